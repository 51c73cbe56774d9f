"""Resource hygiene (issue 24, Build 4): what a job's own local Ray leaves behind.

A driver that started its own Ray and is killed with SIGKILL: Ray's reaper stops the GCS, the raylet and the
workers, but the raylet's DashboardAgent and RuntimeEnvAgent stay, re-parented to init, for a minute or more
(Ray 2.60; they hang flushing logs to the dead GCS). ``lexray.ray_utils.init_ray`` reaps such orphans before it
starts a local instance (``reap_orphaned_agents``). Runs with the multi-node tests (``-m cluster``): it starts a
Ray instance of its own in a subprocess, outside the main suite's session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from tiny_recipes import tiny_recipe

from lexray.paths import REPO_ROOT

pytestmark = pytest.mark.cluster

DRIVER = """
import sys, time
from lexray.ray_utils import init_ray
init_ray(num_cpus=1, include_dashboard=False)
print("READY", flush=True)
time.sleep(600)
"""


def _agents_of(driver: psutil.Process) -> tuple[set[int], set[int]]:
    """(raylet pids, their agent pids) among the driver's descendants."""
    raylets = {p.pid for p in driver.children(recursive=True) if "raylet" in p.name()}
    agents = {c.pid for r in raylets for c in psutil.Process(r).children()
              if (c.cmdline() or [""])[0].strip() in ("ray::DashboardAgent", "ray::RuntimeEnvAgent")}
    return raylets, agents


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}


@pytest.mark.timeout(180)
def test_killed_driver_leaves_agents_that_the_next_start_reaps(tmp_path):
    from lexray.ray_utils import orphaned_agents, reap_orphaned_agents

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "platform"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "READY"
        driver = psutil.Process(proc.pid)
        deadline = time.time() + 60
        raylets, agents = _agents_of(driver)
        while len(agents) < 2 and time.time() < deadline:  # the agents start shortly after the raylet
            time.sleep(0.5)
            raylets, agents = _agents_of(driver)
        assert raylets and len(agents) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 60
    while _alive(raylets) and time.time() < deadline:  # Ray's reaper stops the raylet
        time.sleep(0.5)
    assert not _alive(raylets)
    left = _alive(agents)
    # the defect: the agents outlive their raylet (if a Ray release fixes it, nothing is left to reap)
    assert left <= {p.pid for p in orphaned_agents()}
    assert reap_orphaned_agents(only=agents) == len(left)
    assert not _alive(agents)


def _watch_descendants(proc: subprocess.Popen, seen: set[int], stop) -> None:
    """Record every descendant pid of ``proc`` (its Ray: GCS, raylet, agents, workers) until ``stop`` is set."""
    try:
        root = psutil.Process(proc.pid)
        while not stop.is_set() and proc.poll() is None:
            seen.update(p.pid for p in root.children(recursive=True))
            time.sleep(0.2)
    except psutil.Error:
        pass


def _run_encode(args: list[str], log: Path, interrupt_after_shards: int | None = None) -> tuple[int, set[int]]:
    """Run ``lexray encode <args>`` with its own local Ray; with ``interrupt_after_shards`` the run presses Ctrl-C
    on itself (SIGINT) right after it recorded that many shards (``lexray.encode.faults``: timed from outside, on
    the manifest, the SIGINT once landed after the run had finished). Its stdout and stderr go to ``log`` (shown
    by a failed assertion). Returns the exit status and every descendant pid seen."""
    import threading

    from lexray.encode.faults import INTERRUPT_AFTER_SHARDS_ENV

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "platform"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    if interrupt_after_shards is not None:
        env[INTERRUPT_AFTER_SHARDS_ENV] = str(interrupt_after_shards)
    with log.open("w") as f:
        # SIGINT back to its default in the child: a shell starts a background command (`cmd &` without job
        # control, as CI scripts and `nohup` do) with SIGINT ignored, a child inherits that, and Python then
        # installs no KeyboardInterrupt handler, so the run's own SIGINT did nothing (the run finished, exit 0)
        proc = subprocess.Popen([sys.executable, "-m", "lexray.cli", "encode", *args], env=env,
                                stdout=f, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen: set[int] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_descendants, args=(proc, seen, stop), daemon=True)
    watcher.start()
    try:
        rc = proc.wait(timeout=240)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    watcher.join(timeout=5)
    return rc, seen


def _tail(log: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a run's output, for an assertion's message."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _names(pids: set[int]) -> dict[int, str]:
    """``{pid: command line}`` of live processes, for a failure message (which of Ray's processes was left)."""
    out = {}
    for p in pids:
        try:
            out[p] = " ".join(psutil.Process(p).cmdline())[:160]
        except psutil.Error:
            out[p] = "(gone)"
    return out


def _leftovers(pids: set[int], timeout: float = 90) -> set[int]:
    """The processes of ``pids`` still alive ``timeout`` s after the job ended. Ray's own shutdown takes a few
    seconds on a quiet machine; with the README command's two pytest calls side by side on 2 cores one of a failed
    job's processes was once still exiting after 30 s (docs/operations.md). A leaked process is still there after
    any grace, so the grace only bounds the wait; the failure message names what was left."""
    deadline = time.time() + timeout
    while _alive(pids) and time.time() < deadline:
        time.sleep(0.5)
    return _alive(pids)


@pytest.mark.timeout(420)
def test_ctrl_c_then_success_leave_no_processes_locks_or_running_manifest(splade_tiny_dir, scifact_dir, tmp_path):
    """``lexray encode`` with its own local Ray: Ctrl-C after 2 shards, then the same command to completion.
    After each: none of the job's processes (GCS, raylet, agents, workers), no lock, no temporary file, no
    ``running`` manifest (``interrupted``, then ``complete``), and nothing in the folder but shards and the
    manifest (and the resolved config)."""
    from lexray.encode.shards import load_manifest

    out = tmp_path / "shards"
    args = ["--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--out", str(out), "--max-docs", "60",
            "--set", "encode.rows_per_shard=10", "--set", "encode.num_actors=1", "--set", "encode.batch_size=8"]
    first, second = tmp_path / "interrupted.log", tmp_path / "rerun.log"
    rc, pids = _run_encode(args, first, interrupt_after_shards=2)
    assert rc == 130 and pids, _tail(first)  # lexray.cli: interrupted
    left = _leftovers(pids)
    assert not left, f"left running: {_names(left)}\n{_tail(first)}"
    assert load_manifest(out).status == "interrupted", _tail(first)
    assert not (out / ".lock").exists() and not list(out.glob(".*.tmp-*"))
    rc, pids = _run_encode(args, second)
    left = _leftovers(pids)
    assert rc == 0 and pids and not left, f"left running: {_names(left)}\n{_tail(second)}"
    m = load_manifest(out)
    assert m.status == "complete" and m.totals.shards_reused >= 2
    assert {p.name for p in out.iterdir()} - {f"part-{i:05d}.parquet" for i in range(6)} <= {
        "manifest.json", "config.resolved.yaml"}


# hidden_size 32 over 3 attention heads: accepted by lexray's config, refused by transformers when a worker
# builds the model (inside the Ray Train worker: the failure crosses Ray's worker -> controller -> driver path).
# Title -> abstract pairs: train-laconic mines no BM25 negatives (a JVM and a Lucene index) before the failure
# (64 -> 48 core-seconds measured); the tune job still builds its dev set's BM25 index.
BAD_RECIPE = yaml.safe_dump(tiny_recipe("bad-heads", random_init={"num_attention_heads": 3},
                                      phase={"data": "title_abstract_pairs", "num_negatives": 0}))
BAD_SPACE = """
params:
  train.phases.0.flops.lambda_q: {grid: [1.0e-4]}
objective: [{metric: dev_nDCG@10, mode: max}]
search: {algorithm: random, num_samples: 1, seed: 0, max_concurrent: 1}
"""
REAL_CAUSE = "not a multiple of the number of attention heads"


def _run_failing(args: list[str], tmp_path) -> tuple[subprocess.CompletedProcess, set[int], Path]:
    """Run ``lexray <args>`` with its own local Ray and its own temporary folder (TMPDIR: short, Ray's socket
    paths live under it); returns the result, every descendant pid seen, and that folder."""
    import tempfile
    import threading

    tmpdir = Path(tempfile.mkdtemp(prefix="lxr-", dir="/tmp"))
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "TMPDIR": str(tmpdir),
           "PYTHONPATH": str(REPO_ROOT / "platform"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "lexray.cli", *args], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_descendants, args=(proc, seen, stop), daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=900)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    watcher.join(timeout=5)
    return subprocess.CompletedProcess(args, proc.returncode, out, err), seen, tmpdir


def _no_leftovers(pids: set[int], tmpdir, outputs) -> None:
    """No process of the job's (Ray's included), nothing in its temporary folder but Ray's session logs, and no
    lock, temporary file or ``running`` manifest in its outputs."""
    import json
    import shutil

    try:
        left = _leftovers(pids)
        assert pids and not left, f"left running: {_names(left)}"
        assert {p.name for p in tmpdir.iterdir()} <= {"ray"}, sorted(p.name for p in tmpdir.iterdir())
        names = [p for p in outputs.rglob("*")]
        assert not [p for p in names if p.name in (".lock", "LOCK") or ".tmp-" in p.name
                    or p.name.startswith("lexray-ckpt-")], names
        for m in (p for p in names if p.name == "manifest.json"):
            assert json.loads(m.read_text()).get("status") != "running", m
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


@pytest.mark.timeout(1000)
def test_failing_training_leaves_nothing_and_names_the_real_cause(tmp_path):
    """``lexray train-laconic`` whose model config fails inside the Ray Train worker: exit 1 with one line naming
    transformers' reason (not Ray's 'missing 1 required positional argument: cause' from an exception that
    could not be unpickled: lexray.train.loop.run_with_picklable_errors), and nothing left behind."""
    (tmp_path / "bad.yaml").write_text(BAD_RECIPE)
    res, pids, tmpdir = _run_failing(["train-laconic", "--config", "bad.yaml", "--no-eval", "--set",
                                      f"out_dir={tmp_path / 'out'}"], tmp_path)
    line = [x for x in res.stderr.splitlines() if x.startswith("lexray train-laconic: error:")]
    assert res.returncode == 1 and line, res.stderr[-3000:]
    assert REAL_CAUSE in line[0] and "missing 1 required positional argument" not in line[0], line[0][:1000]
    _no_leftovers(pids, tmpdir, tmp_path / "out")


@pytest.mark.timeout(1000)
def test_failing_tune_trial_leaves_nothing_and_records_the_real_cause(tmp_path):
    """``lexray tune`` whose only trial fails inside its training worker: the trial is recorded as failed with
    transformers' reason, and nothing is left behind (processes, temporary folders, locks, manifests)."""
    import pandas as pd

    (tmp_path / "bad.yaml").write_text(BAD_RECIPE)
    (tmp_path / "space.yaml").write_text(BAD_SPACE)
    out = tmp_path / "out"
    res, pids, tmpdir = _run_failing(["tune", "--space", "space.yaml", "--config", "bad.yaml", "--out", str(out),
                                      "--name", "bad", "--no-test"], tmp_path)
    print(f"tune exit {res.returncode}: {res.stderr.strip().splitlines()[-1:]}")
    table = pd.read_parquet(out / "trials.parquet")
    assert list(table["status"]) == ["failed"], res.stderr[-3000:]
    assert REAL_CAUSE in table["reason"].iloc[0], table["reason"].iloc[0][:1000]
    _no_leftovers(pids, tmpdir, out)
