"""lexray.ray_utils.init_ray: a JVM started before Ray keeps working after ``ray.init``.

Runs in a subprocess with its own Ray instance: the failure mode is the whole process dying (SIGSEGV/SIGABRT from
the JVM), which would take pytest down with it, and the suite's shared Ray session is already initialised.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import faulthandler, json, sys, tempfile
    from pathlib import Path
    from lexray.data.beir import iter_id_text
    from lexray.index.lucene.bm25 import bm25_search, build_bm25_index
    from lexray.ray_utils import init_ray

    ds = Path(sys.argv[1])
    idx = Path(tempfile.mkdtemp()) / "bm25"
    build_bm25_index(iter_id_text(ds, max_docs=500), idx, show_progress=False)
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(ds / "queries.jsonl"))}
    before = bm25_search(idx, queries, k=50, show_progress=False)   # the JVM runs JIT-compiled code now
    init_ray(num_cpus=1, include_dashboard=False)
    assert not faulthandler.is_enabled(), "init_ray left Ray's faulthandler in front of the JVM's handler"
    for _ in range(3):                                                 # enough JIT code to hit implicit null checks
        after = bm25_search(idx, queries, k=50, show_progress=False)
    print("SAME" if after == before else "DIFFERENT", len(after))
""")


@pytest.mark.timeout(300)
def test_jvm_started_before_ray_survives_ray_init(scifact_dir, tmp_path):
    # Before the fix the process died in the second search: "Fatal Python error: Aborted" and a JVM hs_err file
    # reporting a SIGSEGV "sent by kill" (faulthandler re-raising the JVM's own fault).
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(scifact_dir)], capture_output=True, text=True,
                          timeout=280, cwd=tmp_path,
                          env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "SAME 1109" in proc.stdout



def test_closing_line_does_not_show_a_stopped_local_dashboard_as_live(monkeypatch):
    """Issue 27: the closing lines printed the URL of the job's own Ray, which stops when the job exits. Its URL
    is printed when Ray starts; at the end the line says it stops with the job. An attached cluster's URL (it
    outlives the job) is still printed as is."""
    from lexray import ray_utils

    monkeypatch.setattr(ray_utils, "_LOCAL", {"dashboard": "http://127.0.0.1:8266"})
    line = ray_utils.dashboard_closing_line()
    assert line.startswith("Ray dashboard: http://127.0.0.1:8266 stops with this job")
    monkeypatch.setattr(ray_utils, "_LOCAL", {"dashboard": None})  # local Ray without a dashboard
    assert ray_utils.dashboard_closing_line() is None
    monkeypatch.setattr(ray_utils, "_LOCAL", {})  # attached to a cluster
    monkeypatch.setattr(ray_utils, "dashboard_url", lambda: "http://10.0.0.1:8265")
    assert ray_utils.dashboard_closing_line() == "Ray dashboard: http://10.0.0.1:8265"


@pytest.mark.timeout(120)
def test_a_local_instance_runs_ray_train_without_the_preemption_watcher(ray_session):
    """The suite's session is a local instance started by init_ray: its workers, where Ray Train's controller runs
    and reads the switch, see the pre-emption watcher turned off (one process fewer per fit; nothing to drain on a
    job's own one-node Ray). The attached case is the test below; that no watcher actor is started is asserted
    after a fit, in tests/train/test_loop.py (the FSDP test: two worker groups)."""
    from lexray.ray_utils import PREEMPTION_WATCHER_ENV, started_locally

    @ray_session.remote(num_cpus=0)
    def switch():
        return os.environ.get(PREEMPTION_WATCHER_ENV)

    assert started_locally()
    assert ray_session.get(switch.remote(), timeout=60) == "0"


def test_attaching_to_a_cluster_leaves_the_preemption_watcher_to_ray(monkeypatch):
    """A job attached to a cluster (``ray job submit``, an explicit address) keeps Ray's default, the watcher on:
    nodes there can be drained. Ray itself is replaced by a recorder (no cluster is started)."""
    from lexray import ray_utils

    monkeypatch.delenv(ray_utils.PREEMPTION_WATCHER_ENV, raising=False)
    calls = []

    class Recorder:
        @staticmethod
        def init(**kwargs):
            calls.append(kwargs)
            return "context"

    assert ray_utils._init(Recorder, "127.0.0.1:6379", None, {}) == "context"
    assert calls and calls[0]["address"] == "127.0.0.1:6379"
    assert ray_utils.PREEMPTION_WATCHER_ENV not in os.environ
