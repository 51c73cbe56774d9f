"""A Ray Tune search on the multi-node cluster: two trials at once, each trial's trainer worker on its own worker
node; one trial's training worker is SIGKILLed after step 3, 5 s after its step-2 checkpoint's report
(``fault_injection``, mode ``kill``: the trials share its marker, so the first to reach step 3 takes it).
``tune.max_failures=1`` retries that trial, whose trainer resumes from its checkpoint; the search completes with
every trial accounted for.

Why the fault comes from inside the worker: the test used to SIGKILL node_b's worker from outside, 3 s after both
trials had logged step 3. A trial's steps took 0.2-0.6 s here (the log's examples per second at batch 4), and once
the kill landed after that trial had finished all 6 steps (its rerun resumed from the final checkpoint and repeated
nothing: 2026-11-27). The worker that kills itself cannot run ahead, and its 5-s wait lets Ray Train's controller
(2-s poll) register the step-2 checkpoint first, as in test_multinode.py."""

from __future__ import annotations

import json

import pytest
from tiny_recipes import tiny_recipe

pytestmark = pytest.mark.cluster

RECIPE = tiny_recipe("cluster-tune",
                     train={"cpus_per_worker": 0.75, "collapse_max_fraction": 1.0, "max_failures": 0,
                            "tensorboard": False},
                     phase={"max_steps": 6}, tune={"test_entries": 0, "max_failures": 1})
SPACE = {
    "params": {"train.phases.0.flops.lambda_q": {"grid": [1.0e-4, 1.0e-3]}},
    "objective": [{"metric": "dev_nDCG@10", "mode": "max"}, {"metric": "dev_flops", "mode": "min"}],
    "search": {"algorithm": "random", "num_samples": 1, "seed": 0, "max_concurrent": 2},
    "scheduler": {"kind": "fifo"},
}


def _records(metrics_file) -> list[dict]:
    return [json.loads(line) for line in metrics_file.read_text().splitlines() if '"step"' in line]


@pytest.mark.timeout(600)
def test_search_across_nodes_retries_a_trial_whose_worker_was_killed(cluster, placement, tmp_path):
    from lexray.config import LexrayConfig
    from lexray.tune.search import run_search
    from lexray.tune.space import SearchSpace

    out = tmp_path / "out"
    fault = {"step": 3, "rank": 0, "mode": "kill", "delay_s": 5, "marker": str(tmp_path / "kill")}
    with placement:
        res = run_search(LexrayConfig.model_validate(RECIPE), SearchSpace.model_validate(SPACE), out,
                         evaluate_test=False, fault_injection=fault)
    assert placement.nodes_running("RayTrainWorker") == {"node_a", "node_b"}, placement.seen
    assert [r["status"] for r in res.rows] == ["finished", "finished"], res.rows
    assert (tmp_path / "kill.rank0").is_file(), "no trial worker was killed"
    runs = {m.parents[2].name: _records(m) for m in (out / "trials").glob("*/train/lexray/metrics.jsonl")}
    seen = sorted([(int(r["step"]), float(r["resumed_from_step"])) for r in recs] for recs in runs.values())
    # the killed trial: steps 1-2, the kill after step 3 (before its record), steps 3-6 resumed from the step-2
    # checkpoint; the other trial: steps 1-6 once, from scratch
    assert seen == [[(s, 0.0) for s in range(1, 7)], [(1, 0.0), (2, 0.0)] + [(s, 2.0) for s in range(3, 7)]], seen
