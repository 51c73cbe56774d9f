"""``lexray prune``: statically prune an index (per-term and/or per-document top-k) into a new index.

    lexray prune --index OUT/index --out OUT/index-t1000 --term-k 1000     # keep 1,000 postings per term
    lexray prune --index outputs/laconic-smollm2-cpu --out pruned --doc-k 64   # 64 terms per document
    lexray search --index pruned --query "..."                             # model and corpus of the source

``--index`` takes what ``lexray search`` takes (an index folder, an evaluated output folder, a training job's
output, a collection store: :mod:`lexray.search.locate`); the pruned index is a bare index folder of the same
format, whose ``stats.json`` records the source, the parameters and the postings before/after
(:mod:`lexray.index.prune`; docs/indexing.md has the size / speed / nDCG@10 trade-off).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexray.commands.common import print_outputs, setup_logging


def main(argv: list[str] | None = None) -> dict:
    """Prune ``--index`` into ``--out``; returns the new index's ``stats.json`` content.

    Raises:
        PruneError: no cut, a k < 1, a non-index input, an output folder that is the input or not new/empty.
        FileNotFoundError / ValueError: ``--index`` holds no index (lexray.search.locate).
    """
    from lexray.index.prune import PruneError, prune_index
    from lexray.search.locate import locate_index

    ap = argparse.ArgumentParser(prog="lexray prune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="the index to prune (index folder, evaluate --out, a training "
                                                   "job's output, a store)")
    ap.add_argument("--out", required=True, help="new or empty folder for the pruned index")
    ap.add_argument("--term-k", type=int, help="postings kept per term: the largest weights (term_k)")
    ap.add_argument("--doc-k", type=int, help="terms kept per document: the largest weights (doc_k)")
    args = ap.parse_args(argv)
    setup_logging()
    if args.term_k is None and args.doc_k is None:
        raise PruneError("give --term-k (term_k), --doc-k (doc_k) or both")
    for key, k in (("--term-k (term_k)", args.term_k), ("--doc-k (doc_k)", args.doc_k)):
        if k is not None and k < 1:
            raise PruneError(f"{key} must be >= 1, got {k}")
    if not Path(args.index).exists():
        raise PruneError(f"--index {args.index}: no such folder")
    source = locate_index(args.index).index_dir
    res = prune_index(source, args.out, term_k=args.term_k, doc_k=args.doc_k)
    p = res.stats["prune"]
    print(json.dumps({"source_index": p["source_index"], "term_k": args.term_k, "doc_k": args.doc_k,
                      "postings_before": res.postings_before, "postings_after": res.postings_after,
                      "kept_fraction": round(p["kept_fraction"], 4), "index_bytes": res.stats["index_bytes"],
                      "source_index_bytes": p["source_index_bytes"]}, indent=2))
    print_outputs(args.out)
    return res.stats
