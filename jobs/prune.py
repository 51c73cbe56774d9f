"""Statically prune an index (per-term and/or per-document top-k) into a new index.

    python jobs/prune.py --index OUT/index --out OUT/index-t1000 --term-k 1000 [--doc-k 64]

The same as ``lexray prune`` (lexray.commands.prune).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
