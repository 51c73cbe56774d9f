"""Merge Parquet sparse shards into an inverted index with DuckDB.

    python jobs/build_index.py --shards OUT/shards --out OUT/index [--set index.memory_limit=4GB]
"""

from __future__ import annotations

import sys

from lexray.cli import run_as_script
from lexray.commands.index import main as main  # noqa: F401 - importable as the job's main(argv)

if __name__ == "__main__":
    sys.exit(run_as_script("index"))
