"""Ask an index queries: ranked document ids, scores, titles and snippets (or JSON / a TREC run).

    python jobs/search.py --index outputs/laconic-smollm2-cpu --query "what causes obesity?"
    python jobs/search.py --index DIR --queries ../shared/datasets/scifact/queries.jsonl --format trec > run.trec
    printf 'first query\nsecond query\n' | python jobs/search.py --index DIR --explain

DIR: an evaluated output folder (lexray evaluate --out, or a training job's output), a collection store or an
index folder; the model defaults to the one recorded with the index.

The same as ``lexray search`` (lexray.commands.search).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
