"""LACONIC (../shared/papers/laconic.txt §2): a decoder LLM made bidirectional, trained as a SPLADE encoder with
the two-phase curriculum — weakly supervised pre-finetuning with in-batch negatives, then hard-negative
finetuning (LoRA merged between phases) — then encoded, indexed and evaluated.

    python jobs/train_laconic.py                                   # embedded CPU default (jobs/configs/laconic-tiny.yaml)
    python jobs/train_laconic.py --config jobs/configs/laconic-1b.yaml
    ray job submit --working-dir . -- python jobs/train_laconic.py
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

DEFAULT_RECIPE = REPO_ROOT / "jobs" / "configs" / "laconic-tiny.yaml"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--no-eval", action="store_true", help="train only")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cfg = load_config(args.config or DEFAULT_RECIPE, args.overrides)
    result = train_and_evaluate(cfg, evaluate=not args.no_eval)
    if result["rows"]:
        print(markdown_table(result["rows"], efficiency=("avg_query_nnz", "index_avg_nnz_per_doc")))
    print(f"outputs: {result['out_dir']}")
    return result


if __name__ == "__main__":
    main()
