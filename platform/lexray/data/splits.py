"""A dev split carved from the training queries, for model selection (hyper-parameter search).

Why: a search that selects on the test split reports an optimistic test score. The dev split is taken from the
*training* queries instead, and those queries are then kept out of everything a trial trains on — the training
examples and the hard-negative mining — so a trial never sees a dev query, its positives as a training target,
or negatives mined for it.

Rule (deterministic, independent of file order): every query id gets the key
``sha256(f"{seed}:{query_id}")``; the ``n_dev`` ids with the smallest keys form the dev split, the rest stay for
training. The same (ids, n_dev, seed) always give the same split, adding queries to the file moves a query into
the dev split only if its key is smaller than the current largest dev key, and a different seed gives an
independent split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class DevSplit:
    """``train`` and ``dev`` query ids (disjoint, sorted), the seed and the rule's name."""

    train: tuple[str, ...]
    dev: tuple[str, ...]
    seed: int
    rule: str = "smallest sha256(seed:query_id)"

    def to_dict(self) -> dict:
        return {"rule": self.rule, "seed": self.seed, "n_train": len(self.train), "n_dev": len(self.dev),
                "dev": list(self.dev)}


def _key(seed: int, qid: str) -> str:
    return hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest()


def carve_dev_split(query_ids: Iterable[str], n_dev: int, seed: int = 0) -> DevSplit:
    """Split ``query_ids`` into (train, dev) with ``n_dev`` dev queries (see the module docstring).

    Raises:
        ValueError: ``n_dev`` < 1, duplicate ids, or ``n_dev`` leaves no training query.
    """
    ids = list(query_ids)
    if len(set(ids)) != len(ids):
        raise ValueError("carve_dev_split: duplicate query ids")
    if n_dev < 1:
        raise ValueError(f"carve_dev_split: n_dev must be >= 1, got {n_dev}")
    if n_dev >= len(ids):
        raise ValueError(f"carve_dev_split: n_dev={n_dev} leaves no training query (only {len(ids)} queries)")
    ranked = sorted(ids, key=lambda q: (_key(seed, q), q))
    return DevSplit(train=tuple(sorted(ranked[n_dev:])), dev=tuple(sorted(ranked[:n_dev])), seed=seed)
