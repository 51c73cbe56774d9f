"""Merge Parquet sparse shards into an inverted index with DuckDB.

    python jobs/build_index.py --shards OUT/shards --out OUT/index [--set index.memory_limit=4GB]
"""

from __future__ import annotations

import argparse
import json
import logging

from lexray.config import IndexConfig, add_config_args, load_config, save_config
from lexray.index.build import build_index


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", required=True, help="folder of Parquet sparse shards (jobs/encode_corpus.py)")
    ap.add_argument("--out", required=True, help="index folder to write (replaced atomically)")
    add_config_args(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # Only the index section matters here; the model is a placeholder so the root config validates.
    cfg = load_config(args.config, args.overrides, base={"model": {"name_or_path": "unused"}})
    index_cfg: IndexConfig = cfg.index
    stats = build_index(args.shards, args.out, index_cfg)
    save_config(index_cfg, args.out, name="index-config.resolved.yaml")
    summary = stats.to_dict()
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
