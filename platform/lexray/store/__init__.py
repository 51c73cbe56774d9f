"""Versioned collection stores: a catalog, immutable shards, index versions and an atomic ``current``."""

from lexray.store.reencode import StoreError, reencode, resolve_current, rollback

__all__ = ["StoreError", "reencode", "resolve_current", "rollback"]
