"""Fine-tune an MLM SPLADE encoder (InfoNCE or MarginMSE + FLOPS) with the same Ray Train loop, and report the
zero-shot and fine-tuned scores of the same evaluation side by side.

    python jobs/train_splade.py                          # splade-tiny on SciFact train, BM25 negatives
    python jobs/train_splade.py --config jobs/configs/splade-tiny-scifact.yaml --set train.num_workers=1
"""

from __future__ import annotations

import argparse
import logging
import os

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lexray.config import add_config_args, load_config  # noqa: E402
from lexray.eval.report import markdown_table  # noqa: E402
from lexray.paths import REPO_ROOT  # noqa: E402
from lexray.workflows import train_and_evaluate  # noqa: E402

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "splade-tiny-scifact.yaml"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--no-zero-shot", action="store_true", help="skip evaluating the starting model")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config or DEFAULT_RECIPE, args.overrides)
    result = train_and_evaluate(cfg, zero_shot=not args.no_zero_shot)
    print(markdown_table(result["rows"], efficiency=("avg_query_nnz", "index_avg_nnz_per_doc")))
    print(f"outputs: {result['out_dir']}")
    return result


if __name__ == "__main__":
    main()
