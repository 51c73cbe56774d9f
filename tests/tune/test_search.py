"""Searches end to end, as a user runs them (``jobs/tune.py`` in its own process with its own Ray instance):
a 2-trial search on a tiny random-init model, interrupted (Ctrl-C) after its first trial finished and run again
with the same output folder and experiment name — the finished trial is kept, not trained again, the other one
completes, and the outputs (trials table, Pareto front, catalogue recipes, TensorBoard, the one test evaluation)
are written. Plus the dev split rule, which needs no Ray.

Why subprocesses: the job owns its Ray instance, the test suite's shared session stays untouched
(docs/bugs-and-fixes.md), and Ctrl-C is how a search is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tiny_recipes import tiny_recipe

from lexray.config import load_config
from lexray.data.splits import carve_dev_split
from lexray.paths import REPO_ROOT, shared_dir
from lexray.tune.dev import DevSetError, assert_disjoint

TINY_RECIPE = yaml.safe_dump(tiny_recipe("tiny-tune", train={"collapse_patience": 2},
                                       encode={"num_actors": 1}))

# trial 0 trains normally; trial 1's collapse guard fires (the random-init model stays dense: > 50 % of |V|
# active for 2 logged steps), so it is recorded as failed with the guard's message
TINY_SPACE = """
params:
  train.collapse_max_fraction: {grid: [1.0, 0.5]}
  train.phases.0.flops.lambda_q: {loguniform: [1.0e-5, 1.0e-1]}
objective: [{metric: dev_nDCG@10, mode: max}, {metric: dev_flops, mode: min}]
search: {algorithm: random, num_samples: 1, seed: 0, max_concurrent: 1}
scheduler: {kind: asha, grace_period: 2, reduction_factor: 2}
"""


def test_dev_split_is_deterministic_disjoint_and_order_free():
    ids = [f"q{i}" for i in range(200)]
    a = carve_dev_split(ids, 20, seed=3)
    assert a == carve_dev_split(list(reversed(ids)), 20, seed=3)  # file order does not matter
    assert len(a.dev) == 20 and len(a.train) == 180 and not set(a.dev) & set(a.train)
    assert set(a.dev) | set(a.train) == set(ids)
    assert set(carve_dev_split(ids, 20, seed=4).dev) != set(a.dev)
    with pytest.raises(ValueError, match="leaves no training query"):
        carve_dev_split(ids[:5], 5)


def test_training_file_with_a_dev_query_is_refused(tmp_path):
    hn = tmp_path / "hn.jsonl"
    hn.write_text(json.dumps({"query_id": "7", "query": "x", "positive_ids": ["a"], "negative_ids": ["b"]}) + "\n")
    cfg = load_config(None, [f"train.phases.0.data_path={hn}"], base={"model": {"name_or_path": "x"}})
    assert_disjoint(cfg, {"8"})
    with pytest.raises(DevSetError, match=r"hn\.jsonl: trains on 1 dev queries \(e\.g\. '7'\)"):
        assert_disjoint(cfg, {"7", "8"})


def _job(tmp_path: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(REPO_ROOT / "jobs" / "tune.py"), "--space", str(tmp_path / "space.yaml"),
            "--config", str(tmp_path / "recipe.yaml"), "--out", str(out), "--name", "tiny", *extra]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["LEXRAY_SHARED"] = str(shared_dir())
    return env


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_trial_search_interrupted_then_resumed_without_rerunning_finished_trials(tmp_path):
    """Also: a collapsed trial is recorded as failed with its reason, and the search goes on."""
    (tmp_path / "recipe.yaml").write_text(TINY_RECIPE)
    (tmp_path / "space.yaml").write_text(TINY_SPACE)
    out = tmp_path / "out"
    # 1. start the search; once the first trial finished and the second started (one at a time), press Ctrl-C
    proc = subprocess.Popen(_job(tmp_path, out, "--no-test"), cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.time() + 840  # within the test timeout: on a loaded machine Ray and trials start slowly
    try:
        while time.time() < deadline and proc.poll() is None:
            trials = sorted((out / "trials").glob("*")) if (out / "trials").is_dir() else []
            if len(trials) == 2:
                break
            time.sleep(1)
        assert proc.poll() is None, "search ended before it could be interrupted:\n" + proc.stdout.read()[-3000:]
        assert len(trials) == 2, "the second trial never started"
        time.sleep(3)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finished = [t for t in trials if (t / "train/lexray/models/phase-0-ft/lexray_encoder.json").is_file()]
    assert len(finished) == 1, "exactly the first trial should have finished before Ctrl-C"
    first = finished[0] / "train" / "lexray"
    first_metrics = (first / "metrics.jsonl").read_bytes()
    # 2. the same command again: resumes, keeps the finished trial, finishes the other, writes the outputs
    done = subprocess.run(_job(tmp_path, out), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming experiment" in done.stdout
    assert (first / "metrics.jsonl").read_bytes() == first_metrics  # not trained again
    assert sorted((out / "trials").glob("*")) == trials  # no new trials
    import pandas as pd

    table = pd.read_parquet(out / "trials.parquet").sort_values("param:train.collapse_max_fraction")
    assert list(table["status"]) == ["failed", "finished"], table[["trial_id", "status", "reason"]]
    assert "collapsed" in table["reason"].iloc[0] and "TrainingCollapsedError" in table["reason"].iloc[0]
    assert {"param:train.phases.0.flops.lambda_q", "dev_nDCG@10", "dev_flops", "reason"} <= set(table.columns)
    assert (table["param:train.phases.0.flops.lambda_q"].astype(float) > 0).all()
    assert len(pd.read_csv(out / "trials.csv")) == 2
    pareto = json.loads((out / "pareto.json").read_text())
    assert pareto["front"] and (out / "pareto.png").stat().st_size > 1000
    index = json.loads((out / "catalogue" / "index.json").read_text())
    assert index and all(Path(e["recipe"]).is_file() for e in index)
    recipe = load_config(index[0]["recipe"])  # a ready-to-run recipe
    assert recipe.train.phases[0].flops.lambda_q == pytest.approx(index[0]["params"]["train.phases.0.flops.lambda_q"])
    tested = [e for e in index if e["test"]]
    assert len(tested) == 1 and 0.0 <= tested[0]["test"]["nDCG@10"] <= 1.0 and tested[0]["test"]["split"] == "test"
    for t in trials:
        assert list((t / "train" / "lexray" / "tensorboard").glob("events.out.tfevents.*"))
    assert "failed" in done.stdout and "collapsed" in done.stdout  # the job lists failed trials with reasons
    # the dev queries were neither trained on nor mined
    split = json.loads((out / "dev" / "split.json").read_text())
    mined = next((out / "hardneg").glob("*.jsonl")).read_text().splitlines()
    assert split["n_dev"] == 8 and not {json.loads(line)["query_id"] for line in mined} & set(split["dev"])
