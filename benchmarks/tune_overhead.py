"""Ray Tune's overhead: N trials through ``lexray.tune`` against the same N training runs in sequence.

Same script, same machine, same configurations: a tiny random-init Llama encoder (hidden 32, 2 layers) over
splade-tiny's vocabulary, hard-negative fine-tuning on SciFact (BM25 negatives mined once, dev split excluded),
``--steps`` steps, dev evaluation every ``--eval-every`` steps. The N configurations are λ_Q values spread
log-uniformly (a grid, so both arms train exactly the same N configurations).

    baseline    the N runs one after another in this process: build_trainer(cfg, evaluator) + fit()
    tune_serial lexray.tune.search.run_search with max_concurrent = 1 (what Tune adds per trial)
    tune        run_search with the concurrency derived from the CPUs (what Tune buys on this machine)

Writes JSON (default ``outputs/bench/tune_overhead.json``): seconds per arm and the ratios to the baseline.
Ratios survive a busy machine better than seconds; report the machine's load with them.

    python benchmarks/tune_overhead.py --trials 2 --steps 4
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def recipe(steps: int, eval_every: int) -> dict:
    return {
        "name": "bench-tune",
        "model": {"random_init": {"architecture": "llama", "tokenizer": "shared:models/splade-tiny",
                                  "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 2, "max_position_embeddings": 64},
                  "query_max_length": 16, "doc_max_length": 32},
        "data": {"dataset": "shared:datasets/scifact"},
        "train": {"num_workers": 1, "cpus_per_worker": 0.9, "log_every": 1, "checkpoint_every": 1000,
                  "collapse_max_fraction": 1.0, "tensorboard": True,
                  "phases": [{"name": "ft", "data": "hard_negatives", "max_steps": steps, "global_batch_size": 8,
                              "num_negatives": 1, "lr": 1e-4, "query_max_length": 12, "doc_max_length": 24}]},
        "tune": {"dev_queries": 20, "dev_depth": 5, "eval_every": eval_every, "test_entries": 0},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--eval-every", type=int, default=4)
    ap.add_argument("--out", default="outputs/bench/tune_overhead.json")
    args = ap.parse_args()

    import numpy as np

    from lexray.config import load_config
    from lexray.ray_utils import init_ray
    from lexray.train.loop import build_trainer, train_result, training_run_dir
    from lexray.tune.dev import DevEvaluator, prepare_dev
    from lexray.tune.search import derive_concurrency, run_search
    from lexray.tune.space import SearchSpace, trial_config

    lams = [float(x) for x in np.geomspace(1e-4, 1e-2, args.trials)]
    key = "train.phases.0.flops.lambda_q"
    base = load_config(None, None, base=recipe(args.steps, args.eval_every))
    work = Path(tempfile.mkdtemp(prefix="lexray-bench-tune-"))
    cfg, dev = prepare_dev(base.model_copy(update={"out_dir": str(work / "prep")}), work / "prep")
    init_ray()
    import ray

    t0 = time.perf_counter()
    for i, lam in enumerate(lams):
        c = trial_config(cfg, {key: lam})
        storage = work / "baseline" / f"run{i}"
        trainer = build_trainer(c, name="train", storage_path=storage,
                                evaluator=DevEvaluator(dev, c.tune.eval_every, c.tune.eval_batch_size))
        train_result(trainer.fit(), training_run_dir(c, "train", storage)[2])
    baseline_s = time.perf_counter() - t0

    arms = {"baseline": baseline_s}
    concurrency = derive_concurrency(base, ray.cluster_resources())
    for arm, conc in (("tune_serial", 1), ("tune", concurrency)):
        space = SearchSpace.model_validate({
            "params": {key: {"grid": lams}}, "objective": [{"metric": "dev_nDCG@10", "mode": "max"}],
            "search": {"algorithm": "grid", "num_samples": 1, "max_concurrent": conc}, "scheduler": {"kind": "fifo"}})
        res = run_search(base, space, work / arm, experiment=arm, evaluate_test=False)
        assert all(r["status"] == "finished" for r in res.rows), res.rows
        arms[arm] = res.seconds
    record = {"trials": args.trials, "steps": args.steps, "eval_every": args.eval_every, "concurrency": concurrency,
              "seconds": arms, "ratio_to_baseline": {k: v / baseline_s for k, v in arms.items()},
              "loadavg_1m_at_end": os.getloadavg()[0], "cpus": os.cpu_count(),
              "note": "tune arms include their own dev preparation (mining reused from the prep folder is not: "
                      "each arm's out folder mines again)"}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
