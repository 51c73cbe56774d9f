"""Fine-tune an MLM SPLADE encoder (InfoNCE or MarginMSE + FLOPS) with the same Ray Train loop, and report the
zero-shot and fine-tuned scores of the same evaluation side by side.

    python jobs/train_splade.py                          # splade-tiny on SciFact train, BM25 negatives
    python jobs/train_splade.py --config jobs/configs/splade-tiny-scifact.yaml --set train.num_workers=1
"""

from __future__ import annotations

import sys

from lexray.cli import run_as_script
from lexray.commands.train import train_splade as main  # noqa: F401 - importable as the job's main(argv)

if __name__ == "__main__":
    sys.exit(run_as_script("train-splade"))
