"""``lexray train-laconic`` / ``lexray train-splade``: train, then evaluate, with the same Ray Train loop.

LACONIC (arXiv:2601.01684, ../shared/papers/laconic.txt §2): a decoder LLM made bidirectional, trained as a SPLADE
encoder with the two-phase curriculum (weakly supervised pre-finetuning with in-batch negatives, then hard-negative
finetuning, LoRA merged between phases). SPLADE (SPLADE v2, arXiv:2109.10086): fine-tune an MLM encoder (InfoNCE
or MarginMSE + FLOPS) and report the zero-shot and fine-tuned scores of the same evaluation side by side.
"""

from __future__ import annotations

import argparse
import os

from lexray.commands.common import print_outputs, setup_logging
from lexray.config import add_config_args, load_config
from lexray.paths import REPO_ROOT

LACONIC_RECIPE = REPO_ROOT / "jobs" / "configs" / "laconic-smollm2-cpu.yaml"
SPLADE_RECIPE = REPO_ROOT / "jobs" / "configs" / "splade-tiny-scifact.yaml"


def _run(argv, prog: str, default_recipe, laconic: bool) -> dict:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ap = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    if laconic:
        ap.add_argument("--no-eval", action="store_true", help="train only")
        ap.add_argument("--zero-shot", dest="zero_shot", action="store_true", default=True,
                        help="also evaluate the starting backbone (bidirectional, untrained) in the same pipeline "
                        "(the default)")
        ap.add_argument("--no-zero-shot", dest="zero_shot", action="store_false",
                        help="skip the zero-shot evaluation")
    else:
        ap.add_argument("--no-zero-shot", action="store_true", help="skip evaluating the starting model")
    ap.add_argument("--no-cache", action="store_true", help="evaluate the starting model afresh instead of "
                    "reusing a cached evaluation of the same model, settings and collection (eval.cache=false)")
    args = ap.parse_args(argv)
    setup_logging()
    cfg = load_config(args.config or default_recipe, args.overrides)
    if args.no_cache:
        cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"cache": False})})
    from lexray.commands.common import validate_metrics
    from lexray.eval.report import markdown_table
    from lexray.workflows import train_and_evaluate

    validate_metrics(cfg.eval.metrics)
    if laconic:
        result = train_and_evaluate(cfg, evaluate=not args.no_eval, zero_shot=args.zero_shot and not args.no_eval)
    else:
        result = train_and_evaluate(cfg, zero_shot=not args.no_zero_shot)
    if result["rows"]:
        print(markdown_table(result["rows"], efficiency=("avg_query_nnz", "index_avg_nnz_per_doc")))
    print_outputs(result["out_dir"])
    return result


def train_laconic(argv: list[str] | None = None) -> dict:
    """``lexray train-laconic [--config recipe.yaml] [--set k=v ...] [--no-eval] [--no-zero-shot] [--no-cache]``
    (default recipe laconic-smollm2-cpu: SmolLM2-135M; the zero-shot score of the same backbone is printed beside
    the trained one, from the evaluation cache on a rerun: lexray.eval.cache)."""
    return _run(argv, "lexray train-laconic", LACONIC_RECIPE, laconic=True)


def train_splade(argv: list[str] | None = None) -> dict:
    """``lexray train-splade [--config recipe.yaml] [--set k=v ...] [--no-zero-shot] [--no-cache]``."""
    return _run(argv, "lexray train-splade", SPLADE_RECIPE, laconic=False)
