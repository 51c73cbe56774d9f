"""Fine-tune an MLM SPLADE encoder (SPLADE v2, arXiv:2109.10086; InfoNCE or MarginMSE + FLOPS) with the same Ray
Train loop, and report the zero-shot and fine-tuned scores of the same evaluation side by side.

    python jobs/train_splade.py                          # splade-tiny on SciFact train, BM25 negatives
    python jobs/train_splade.py --config jobs/configs/splade-tiny-scifact.yaml --set train.num_workers=1

The same as ``lexray train-splade`` (lexray.commands.train).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
