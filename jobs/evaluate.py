"""One command from a model (or BM25) and a BEIR collection to metrics.

    python jobs/evaluate.py --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact --out DIR
    python jobs/evaluate.py --retriever bm25 --dataset ../shared/datasets/scifact --out DIR
    python jobs/evaluate.py --model M --dataset D --out DIR --backend both     # exact and Lucene impact index
    python jobs/evaluate.py --model M --dataset D --out DIR --backend seismic  # Seismic (approximate) + recall@10

Encodes the corpus with Ray Data (reusing complete shards in DIR/shards), builds the DuckDB inverted index,
searches exactly (or with Pyserini's impact index), evaluates with pytrec_eval (nDCG@10, MRR@10, R@100,
R@1000) and writes DIR/metrics.json, the TREC run and DIR/metrics.md.
"""

from __future__ import annotations

import argparse
import logging

from lexray.config import add_config_args, load_config
from lexray.eval.pipeline import evaluate_bm25, evaluate_sparse
from lexray.eval.report import markdown_table, write_markdown

EFFICIENCY = ("avg_query_nnz", "index_avg_nnz_per_doc", "index_flops", "encode_docs_per_s", "search_qps",
              "seismic_search_qps", "seismic_recall@10")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="sparse encoder: local directory or hub id (model.name_or_path)")
    ap.add_argument("--dataset", help="BEIR-layout folder (data.dataset), e.g. ../shared/datasets/scifact")
    ap.add_argument("--split", help="qrels split (data.split), default test")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--retriever", choices=["sparse", "bm25"], default="sparse")
    ap.add_argument("--backend", choices=["exact", "lucene", "both", "seismic"],
                    help="search backend (eval.backend); seismic is approximate and reports recall@10 vs exact")
    add_config_args(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    # Command-line flags win over the recipe: they are applied as overrides after it (before --set).
    flags = {"model.name_or_path": args.model, "data.dataset": args.dataset, "data.split": args.split,
             "eval.backend": args.backend}
    overrides = [f"{k}={v}" for k, v in flags.items() if v is not None] + args.overrides
    base = None if args.config else {"model": {"name_or_path": "shared:models/splade-tiny"}}
    cfg = load_config(args.config, overrides, base=base)
    if args.retriever == "bm25":
        record = evaluate_bm25(cfg, args.out)
    else:
        record = evaluate_sparse(cfg, args.out)
    table = markdown_table(record, efficiency=EFFICIENCY)
    write_markdown(f"{args.out}/metrics.md", record, efficiency=EFFICIENCY)
    print(table)
    return record


if __name__ == "__main__":
    main()
