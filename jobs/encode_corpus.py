"""Encode a BEIR corpus into Parquet sparse shards with Ray Data (resumable; see docs/indexing.md).

    python jobs/encode_corpus.py --model ../shared/models/splade-tiny --dataset ../shared/datasets/scifact \\
        --out outputs/scifact-shards [--config recipe.yaml] [--set encode.batch_size=64 ...]

Re-running into the same --out keeps complete shards and encodes only missing or damaged ones; a folder made by a
different model, settings or corpus is refused unless --overwrite. Writes manifest.json and config.resolved.yaml
beside the shards and prints read/skipped counts and throughput.

The same as ``lexray encode`` (lexray.commands.encode).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
