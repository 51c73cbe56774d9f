"""``lexray train-dense``: fine-tune a dense bi-encoder, with or without a LexSemBridge, then evaluate it beside its
zero-shot score (LexSemBridge, arXiv:2508.17858, ../shared/papers/lexsembridge.txt §3.4-3.5, §4).

The model is ``model`` with a ``model.dense`` section (pooling, similarity, bridge; docs/lexsembridge.md); training
is cosine InfoNCE (τ = ``train.phases.<i>.temperature``, 0.02 in the recipe) with in-batch and BM25 hard negatives
on Ray Train (:class:`lexray.train.dense.DensePhase` on the one phase runner: the same strategies, checkpoints and
resume as the sparse jobs); evaluation is dense shards → exact top-k → the one metrics computation.
"""

from __future__ import annotations

import argparse
import os

from lexray.commands.common import print_outputs, setup_logging
from lexray.config import add_config_args, apply_overrides, load_config
from lexray.paths import REPO_ROOT

DENSE_RECIPE = REPO_ROOT / "jobs" / "configs" / "lsb-splade-tiny-scifact.yaml"


def main(argv: list[str] | None = None) -> dict:
    """``lexray train-dense [--config recipe.yaml] [--bridge none|slr|llr|clr] [--set k=v ...] [--no-zero-shot]
    [--no-eval]``.

    Raises:
        ConfigError: a bad recipe key, or no ``model.dense`` section. BridgeConfigError: a bridge the model cannot
            run (CLR without an MLM head, a dimension mismatch), before any training.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ap = argparse.ArgumentParser(prog="lexray train-dense", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(ap)
    ap.add_argument("--bridge", choices=["none", "slr", "llr", "clr"], default=None,
                    help="model.dense.bridge (default: the recipe's)")
    ap.add_argument("--no-zero-shot", action="store_true", help="skip evaluating the starting model")
    ap.add_argument("--no-eval", action="store_true", help="train only (evaluate later with lexray evaluate, e.g. "
                    "on several collections at once)")
    args = ap.parse_args(argv)
    setup_logging()
    cfg = load_config(args.config or DENSE_RECIPE, args.overrides)
    if args.bridge is not None:
        cfg = apply_overrides(cfg, [("model.dense.bridge", args.bridge)], source="--bridge")
    from lexray.commands.common import validate_metrics
    from lexray.config import ConfigError

    if cfg.model.dense is None:
        raise ConfigError("train-dense needs a model.dense section (set it in the recipe or with "
                          "--set model.dense.bridge=none)")
    validate_metrics(cfg.eval.metrics)
    from lexray.models.dense import load_dense_encoder

    load_dense_encoder(cfg.model)  # bad bridge input is refused here, before mining and training
    from lexray.eval.report import markdown_table
    from lexray.workflows import train_and_evaluate

    result = train_and_evaluate(cfg, evaluate=not args.no_eval, zero_shot=not (args.no_zero_shot or args.no_eval))
    model_dir = result["train"].model_dir
    if model_dir is not None:  # a stable name for the trained model: OUT/model (a link into the last checkpoint)
        link = result["out_dir"] / "model"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(model_dir, target_is_directory=True)
        print(f"trained model: {link} -> {model_dir}")
    if result["rows"]:
        print(markdown_table(result["rows"], efficiency=("dim",)))
    print_outputs(result["out_dir"])
    return result
