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

import sys

from lexray.cli import run_as_script
from lexray.commands.evaluate import main as main  # noqa: F401 - importable as the job's main(argv)

if __name__ == "__main__":
    sys.exit(run_as_script("evaluate"))
