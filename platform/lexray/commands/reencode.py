"""``lexray reencode``: incremental re-encoding of a collection into a versioned store (plain and idempotent, for a
scheduler: cron, a Kubernetes RayJob; docs/operations.md).

    lexray reencode --store outputs/scifact-store --dataset ../shared/datasets/scifact \\
        --model ../shared/models/splade-tiny [--report run.json] [--set store.keep_versions=5 ...]
    lexray reencode --store outputs/scifact-store --rollback

Diffs the corpus against the store's catalog, encodes only new and changed documents (Ray Data; everything when
the model changed), builds and validates the next index version and switches ``current`` to it atomically.
An unchanged corpus is a no-op. ``--rollback`` switches ``current`` back to the previous version. One writer at
a time: a second run exits with status 3 naming the holder; ``--break-stale-lock`` takes over a lock whose
process (on this host) is dead. Prints the JSON summary (keys added, changed, deleted, encoded, version,
seconds, ...) and writes it to --report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexray.commands.common import setup_logging
from lexray.config import add_config_args, load_config
from lexray.locks import LockHeldError
from lexray.store import reencode, rollback

LOCK_HELD_STATUS = 3  # a scheduler tells "another run holds the store" from a failure


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray reencode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="collection store folder (created on the first run)")
    ap.add_argument("--dataset", help="BEIR-layout folder (data.dataset)")
    ap.add_argument("--model", help="sparse encoder: local directory or hub id (model.name_or_path)")
    ap.add_argument("--report", help="write the run summary as JSON here")
    ap.add_argument("--rollback", action="store_true", help="switch current back to the previous version")
    ap.add_argument("--break-stale-lock", action="store_true",
                    help="take over a lock left by a killed run (its pid on this host is dead)")
    ap.add_argument("--backend", choices=["ray", "local"], help="encode.backend")
    add_config_args(ap)
    return ap


def main(argv: list[str] | None = None) -> dict:
    """Re-encode (or roll back) the store; returns the run summary.

    Raises:
        lexray.locks.LockHeldError: another run holds the store (``exit_status`` 3 for ``lexray``).
        FileNotFoundError: dataset or model missing (before anything is written).
    """
    args = build_parser().parse_args(argv)
    setup_logging()
    try:
        if args.rollback:
            summary = rollback(args.store, break_stale_lock=args.break_stale_lock)
        else:
            flags = {"model.name_or_path": args.model, "data.dataset": args.dataset, "encode.backend": args.backend}
            overrides = [f"{k}={v}" for k, v in flags.items() if v is not None] + args.overrides
            # exact_length batching: a re-encoded document gets the bits a full encode would give it
            base = {"encode": {"batching": "exact_length"}}
            if not args.config:
                base["model"] = {"name_or_path": "shared:models/splade-tiny"}
            cfg = load_config(args.config, overrides, base=base)
            summary = reencode(args.store, cfg, break_stale_lock=args.break_stale_lock)
    except LockHeldError as e:
        e.exit_status = LOCK_HELD_STATUS
        raise
    text = json.dumps(summary, indent=2, default=str)
    print(text)
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(text + "\n")
    return summary
