"""A Ray Tune search on the multi-node cluster: two trials at once, each trial's trainer worker on its own worker
node; one trial's training worker is SIGKILLed after its step-2 checkpoint. ``tune.max_failures=1`` retries that
trial, whose trainer resumes from its checkpoint; the search completes with every trial accounted for."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest

pytestmark = pytest.mark.cluster

RECIPE = {
    "name": "cluster-tune",
    "model": {"random_init": {"architecture": "llama", "tokenizer": "shared:models/splade-tiny", "hidden_size": 32,
                              "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                              "max_position_embeddings": 64}, "query_max_length": 16, "doc_max_length": 32},
    "data": {"dataset": "shared:datasets/scifact", "max_docs": 50},
    "train": {"num_workers": 1, "cpus_per_worker": 0.75, "log_every": 1, "checkpoint_every": 2,
              "collapse_max_fraction": 1.0, "max_failures": 0, "tensorboard": False,
              "phases": [{"name": "ft", "data": "hard_negatives", "max_steps": 6, "global_batch_size": 4,
                          "num_negatives": 1, "lr": 1.0e-4, "query_max_length": 12, "doc_max_length": 24,
                          "max_train_examples": 32}]},
    "encode": {"batch_size": 64, "rows_per_shard": 25, "doc_top_k": 64},
    "tune": {"dev_queries": 8, "dev_depth": 3, "eval_every": 2, "test_entries": 0, "max_failures": 1},
}
SPACE = {
    "params": {"train.phases.0.flops.lambda_q": {"grid": [1.0e-4, 1.0e-3]}},
    "objective": [{"metric": "dev_nDCG@10", "mode": "max"}, {"metric": "dev_flops", "mode": "min"}],
    "search": {"algorithm": "random", "num_samples": 1, "seed": 0, "max_concurrent": 2},
    "scheduler": {"kind": "fifo"},
}


def _steps(metrics_file):
    try:
        return [int(json.loads(line)["step"]) for line in metrics_file.read_text().splitlines()
                if '"step"' in line]
    except (OSError, ValueError, KeyError):
        return []


@pytest.mark.timeout(600)
def test_search_across_nodes_retries_a_trial_whose_worker_was_killed(cluster, placement, tmp_path):
    import psutil

    from lexray.config import LexrayConfig
    from lexray.tune.search import run_search
    from lexray.tune.space import SearchSpace

    out = tmp_path / "out"
    killed: list[str] = []

    def kill_a_worker_after_step_3():
        """Once both trials logged step 3 (past their step-2 checkpoint), SIGKILL node_b's training worker."""
        deadline = time.time() + 500
        while time.time() < deadline:
            files = list((out / "trials").glob("*/train/lexray/metrics.jsonl")) if (out / "trials").is_dir() else []
            if len(files) == 2 and all(max(_steps(m), default=0) >= 3 for m in files):
                time.sleep(3)  # past Ray Train's 2 s poll: the step-2 checkpoint is registered
                node_b = {pid for pid, name in cluster.raylet_pids().items() if name == "node_b"}
                for p in psutil.process_iter(["ppid", "cmdline"]):
                    if p.info["ppid"] in node_b and (p.info["cmdline"] or [""])[0].startswith("ray::RayTrainWorker"):
                        p.send_signal(signal.SIGKILL)
                        killed.append(p.pid)
                return
            time.sleep(0.2)

    t = threading.Thread(target=kill_a_worker_after_step_3, daemon=True)
    t.start()
    with placement:
        res = run_search(LexrayConfig.model_validate(RECIPE), SearchSpace.model_validate(SPACE), out,
                         evaluate_test=False)
    t.join(timeout=10)
    assert placement.nodes_running("RayTrainWorker") == {"node_a", "node_b"}, placement.seen
    assert [r["status"] for r in res.rows] == ["finished", "finished"], res.rows
    assert len(killed) == 1, "no trial worker was killed"
    steps = {m.parents[2].name: _steps(m) for m in (out / "trials").glob("*/train/lexray/metrics.jsonl")}
    rerun = [t for t, s in steps.items() if len(s) > len(set(s))]
    assert len(rerun) == 1, steps  # the killed trial ran steps again (from its checkpoint), the other did not
    assert all(max(s) == 6 for s in steps.values())
