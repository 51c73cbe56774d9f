"""Incremental re-encoding of a collection into a versioned store (plain and idempotent, for a scheduler).

    python jobs/reencode.py --store outputs/scifact-store --dataset ../shared/datasets/scifact \\
        --model ../shared/models/splade-tiny [--report run.json] [--set store.keep_versions=5 ...]
    python jobs/reencode.py --store outputs/scifact-store --rollback

Diffs the corpus against the store's catalog, encodes only new and changed documents (Ray Data; everything when
the model changed), builds and validates the next index version and switches ``current`` to it atomically.
An unchanged corpus is a no-op. One writer at a time: a second run exits with status 3 naming the holder;
``--break-stale-lock`` takes over a lock whose process (on this host) is dead. Prints the JSON summary (keys
added, changed, deleted, encoded, version, seconds, ...) and writes it to --report. See docs/operations.md.

The same as ``lexray reencode`` (lexray.commands.reencode).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
