"""``lexray index``: merge Parquet sparse shards into an inverted index with DuckDB.

    lexray index --shards OUT/shards --out OUT/index [--set index.memory_limit=4GB]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexray.commands.common import print_outputs, setup_logging
from lexray.config import IndexConfig, add_config_args, load_config, save_config
from lexray.index.build import build_index


def main(argv: list[str] | None = None) -> dict:
    """Build the index of ``--shards`` into ``--out``; returns its statistics (``IndexStats`` as a dict)."""
    ap = argparse.ArgumentParser(prog="lexray index", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", required=True, help="folder of Parquet sparse shards (jobs/encode_corpus.py)")
    ap.add_argument("--out", required=True, help="index folder to write (replaced atomically)")
    add_config_args(ap)
    args = ap.parse_args(argv)
    setup_logging()
    cfg = load_config(args.config, args.overrides, require_model=False)  # only the index section matters here
    index_cfg: IndexConfig = cfg.index
    if not Path(args.shards).is_dir():
        raise FileNotFoundError(f"--shards {args.shards}: no such folder (jobs/encode_corpus.py writes one)")
    stats = build_index(args.shards, args.out, index_cfg)
    save_config(index_cfg, args.out, name="index-config.resolved.yaml")
    summary = stats.to_dict()
    print(json.dumps(summary, indent=2))
    print_outputs(args.out)
    return summary

