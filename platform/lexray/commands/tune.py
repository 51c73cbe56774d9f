"""``lexray tune``: a hyper-parameter search with Ray Tune. Every trial fine-tunes with Ray Train and is evaluated
on a dev split carved from the training queries; the chosen configurations are evaluated once on the test split.

    lexray tune --out outputs/tune-flops                  # embedded default: splade-tiny, SciFact, flops space
    lexray tune --space tune_spaces/rescale.yaml --out outputs/tune-rescale
    lexray tune --space tune_spaces/laconic.yaml --config jobs/configs/laconic-tiny.yaml
    lexray tune --set tune.dev_queries=80 --set train.phases.0.max_steps=60

Re-running with the same --out and --name resumes the search (finished trials are not run again). Ctrl-C stops
it with status 130, keeping the experiment for the resume. The space file, the recipe and the --set values are
checked before Ray starts. Outputs and how to follow a search: docs/tuning.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from lexray.config import add_config_args, load_config
from lexray.paths import REPO_ROOT, default_output_dir

DEFAULT_SPACE = REPO_ROOT / "tune_spaces" / "flops.yaml"

# The embedded default: the real splade-tiny fine-tuned on SciFact train queries (minus the dev split) with BM25
# hard negatives. Sized for >= 8 trials plus their dev evaluations and the test evaluation of 2 chosen entries in
# <= 30 minutes on 2 CPU cores: 100 steps of 8 queries (~1 epoch of the 749 training queries; 1 BM25 negative +
# in-batch, 32/128 tokens), dev evaluation every 25 steps on 60 dev queries x (top-5 BM25 + positives), ASHA
# halving from step 25. The FLOPS weights ramp up quadratically over all 100 steps: with a 20-step ramp the searched
# λ (1e-5 to 1e-1) sparsified so hard that the best entry only tied zero-shot splade-tiny. Measured: docs/tuning.md.
DEFAULT_RECIPE = {
    "name": "tune-splade-tiny-scifact",
    "model": {"name_or_path": "shared:models/splade-tiny", "query_max_length": 64, "doc_max_length": 256},
    "data": {"dataset": "shared:datasets/scifact", "split": "test", "train_split": "train"},
    "train": {
        "strategy": "ddp", "num_workers": 1, "cpus_per_worker": 0.9, "log_every": 5, "checkpoint_every": 25,
        "num_checkpoints_to_keep": 1,
        "phases": [{"name": "finetune", "data": "hard_negatives", "loss": "infonce", "max_steps": 100,
                    "global_batch_size": 8, "num_negatives": 1, "query_max_length": 32, "doc_max_length": 128,
                    "lr": 5.0e-5, "warmup_ratio": 0.1,
                    "flops": {"lambda_q": 1.0e-4, "lambda_d": 1.0e-4, "schedule": "quadratic",
                              "warmup_steps": 100}}],
    },
    "encode": {"batch_size": 64},
    "tune": {"dev_queries": 60, "dev_depth": 5, "eval_every": 25, "test_entries": 2},
}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--space", default=str(DEFAULT_SPACE), help="search space file (tune_spaces/*.yaml)")
    add_config_args(ap)
    ap.add_argument("--out", default=None, help="output folder (default outputs/<recipe name>-<space name>)")
    ap.add_argument("--name", default=None, help="experiment name (default: the space's file name); "
                    "the same --out and --name resume")
    ap.add_argument("--no-test", action="store_true", help="skip the final test evaluation")
    return ap


def main(argv: list[str] | None = None):
    """Run (or resume) the search; returns :class:`lexray.tune.search.SearchResult`.

    Raises:
        SpaceError / ConfigError: a bad space file, recipe or ``--set`` (before Ray starts).
        SystemExit(130): the search was interrupted (Ctrl-C); its state is kept for a resume.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from lexray.tune.space import load_space

    space = load_space(args.space)
    recipe = args.config or (REPO_ROOT / space.recipe if space.recipe else None)
    cfg = load_config(recipe, args.overrides, base=None if recipe else DEFAULT_RECIPE)
    from lexray.tune.search import SearchInterrupted, run_search

    out = args.out or default_output_dir() / f"{cfg.name}-{space.name}"
    try:
        result = run_search(cfg, space, out, experiment=args.name, evaluate_test=not args.no_test)
    except SearchInterrupted as e:  # not an error: the message says how to resume
        print(str(e), file=sys.stderr)
        raise SystemExit(130) from None
    _print_result(result)
    return result


def _print_result(result) -> None:
    print(f"\n{len(result.rows)} trials: " + ", ".join(
        f"{s} {sum(r['status'] == s for r in result.rows)}" for s in ("finished", "stopped", "failed")))
    for r in result.rows:
        if r["status"] == "failed":
            print(f"  failed {r['trial_id']}: {r['reason']}")
    for e in result.catalogue:
        t = e.get("test") or {}
        test = f"; test nDCG@10 {t['nDCG@10']:.4f}, index FLOPS {t['flops']:.3f}" if t else ""
        print(f"catalogue {e['name']}: trial {e['trial_id']} dev nDCG@10 {e['dev_nDCG@10']:.4f}, "
              f"dev FLOPS {e['dev_flops']:.3f}{test}")
    print(f"outputs: {result.out} ({result.seconds / 60:.1f} min)")
