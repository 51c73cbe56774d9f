"""One command from a model (or BM25) and one or more BEIR collections to metrics.

    python jobs/evaluate.py --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact --out DIR
    python jobs/evaluate.py --model M --dataset D1 --dataset D2 --out DIR    # several collections + their average
    python jobs/evaluate.py --retriever bm25 --dataset ../shared/datasets/scifact --out DIR
    python jobs/evaluate.py --model M --dataset D --out DIR --backend both     # exact and Lucene impact index
    python jobs/evaluate.py --model M --dataset D --out DIR --backend seismic  # Seismic (approximate) + recall@10

Encodes the corpus with Ray Data (reusing complete shards in DIR/shards), builds the DuckDB inverted index,
searches exactly (or with Pyserini's impact index), evaluates with pytrec_eval (nDCG@10, MRR@10, R@100,
R@1000) and writes DIR/metrics.json, per-query metrics, the TREC run and DIR/metrics.md (DIR/<collection>/ for
several collections); ``--baseline DIR0`` adds per-query wins/ties/losses and a paired test.

The same as ``lexray evaluate`` (lexray.commands.evaluate).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
