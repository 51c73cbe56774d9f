"""``lexray make-tasks``: LexSemBridge's fine-grained retrieval tasks (arXiv:2508.17858, §3.3) from a BEIR
collection, as seeded BEIR folders (:mod:`lexray.data.tasks`; docs/lexsembridge.md).

    lexray make-tasks --dataset ../shared/datasets/scifact --out outputs/lsb-tasks            # full corpus (linked)
    lexray make-tasks --dataset D --out DIR --n 200 --seed 0 --corpus-docs 1000               # shared sub-corpus
    lexray evaluate --retriever bm25 --dataset DIR/keyword --dataset DIR/pop16 --out E        # any retriever

Writes DIR/<task>/{corpus.jsonl (a link), queries.jsonl, qrels/test.tsv} for query, keyword, pop16, pop32, pop64
and DIR/lexray_tasks.json. Same dataset, n and seed: byte-identical files.
"""

from __future__ import annotations

import argparse
import json

from lexray.commands.common import setup_logging, validate_dataset


def main(argv: list[str] | None = None) -> dict:
    """Build the task folders; returns the manifest. Raises ValueError (unknown task, too few long passages,
    corpus_docs below what the tasks need) before writing any task."""
    from lexray.data.tasks import TASKS, build_tasks

    ap = argparse.ArgumentParser(prog="lexray make-tasks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="source BEIR folder")
    ap.add_argument("--out", required=True, help="output folder (one sub-folder per task)")
    ap.add_argument("--n", type=int, default=200, help="sampled source passages per generated task (default 200)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, from {', '.join(TASKS)}")
    ap.add_argument("--split", default="test", help="the source split of the query task (default test)")
    ap.add_argument("--corpus-docs", type=int, default=None,
                    help="a shared sub-corpus of this many documents (judged + sampled + seeded fill) instead of "
                         "linking the whole corpus")
    args = ap.parse_args(argv)
    setup_logging()
    src = validate_dataset(args.dataset, args.split)
    manifest = build_tasks(src, args.out, n=args.n, seed=args.seed, split=args.split,
                           tasks=[t.strip() for t in args.tasks.split(",") if t.strip()],
                           corpus_docs=args.corpus_docs)
    print(json.dumps(manifest["tasks"], indent=1))
    print(f"tasks: {args.out}/lexray_tasks.json")
    return manifest
