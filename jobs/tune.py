"""Hyper-parameter search with Ray Tune: every trial fine-tunes with Ray Train, is evaluated on a dev split
carved from the training queries, and the chosen configurations are evaluated once on the test split.

    python jobs/tune.py --out outputs/tune-flops                  # embedded default: splade-tiny, SciFact, flops space
    python jobs/tune.py --space tune_spaces/rescale.yaml --out outputs/tune-rescale
    python jobs/tune.py --space tune_spaces/laconic.yaml --config jobs/configs/laconic-tiny.yaml
    python jobs/tune.py --set tune.dev_queries=80 --set train.phases.0.max_steps=60
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- python jobs/tune.py --out /tmp/tune

Re-running with the same --out and --name resumes the search (finished trials are not run again).
Outputs and how to follow a search: docs/tuning.md.

The same as ``lexray tune`` (lexray.commands.tune).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
