"""Merge Parquet sparse shards into an inverted index with DuckDB.

    python jobs/build_index.py --shards OUT/shards --out OUT/index [--set index.memory_limit=4GB]

The same as ``lexray index`` (lexray.commands.index).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
