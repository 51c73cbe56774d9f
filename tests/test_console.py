"""lexray.console: each filter drops its one known message and keeps everything else; ``--verbose`` keeps all."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from lexray import console

DATA_NOTICE = ("[2026-11-25 14:23:40,482 E 5214 5214] core_worker.cc:2465: Actor with class name: "
               "'MapWorker(MapBatches(ShardEncoder))' and ID: 'c2b9675323cd9e92a7b38de501000000' has constructor "
               "arguments in the object store and max_restarts > 0. If the arguments in the object store go out of "
               "scope or are lost, the actor restart will fail. See https://github.com/ray-project/ray/issues/53727 "
               "for more details.")
WATCHER_NOTICE = DATA_NOTICE.replace("MapWorker(MapBatches(ShardEncoder))", "PreemptionWatcher")
OTHER_RAY_ERROR = "[2026-11-25 14:23:41,000 E 5214 5214] core_worker.cc:1200: Failed to register actor: boom"


def test_the_restart_notice_is_dropped_and_other_lines_kept():
    lines = [DATA_NOTICE, "[lexray] pre-finetune step 5/60 loss 1.0", WATCHER_NOTICE, OTHER_RAY_ERROR,
             "has constructor arguments in the object store"]  # the words alone are not Ray's line
    assert console.drop_ray_restart_notice(lines) == lines[1:2] + lines[3:]


class _FakeDispatcher:
    """The shape of Ray's WorkerStandardStreamDispatcher (ray._private.ray_logging)."""

    def __init__(self, printed):
        self.handlers = [("ray_print_logs", printed.append)]

    def add_handler(self, name, handler):
        self.handlers.append((name, handler))

    def remove_handler(self, name):
        self.handlers = [h for h in self.handlers if h[0] != name]

    def emit(self, data):
        for _, handler in self.handlers:
            handler(data)


@pytest.mark.parametrize("quiet", [True, False])
def test_worker_log_stream_filter(monkeypatch, quiet):
    import ray._private.ray_logging as ray_logging

    printed: list[dict] = []
    fake = _FakeDispatcher(printed)
    monkeypatch.setattr(ray_logging, "global_worker_stdstream_dispatcher", fake)
    monkeypatch.setitem(console._QUIET, "console", quiet)
    console.filter_ray_worker_logs()
    console.filter_ray_worker_logs()  # idempotent: one wrapper, not two
    fake.emit({"pid": 1, "actor_name": "TrainController", "lines": [WATCHER_NOTICE, "Started worker group"]})
    fake.emit({"pid": 1, "actor_name": "TrainController", "lines": [WATCHER_NOTICE]})
    if quiet:
        assert [d["lines"] for d in printed] == [["Started worker group"]]
        assert printed[0]["actor_name"] == "TrainController"
    else:
        assert [d["lines"] for d in printed] == [[WATCHER_NOTICE, "Started worker group"], [WATCHER_NOTICE]]


@pytest.fixture
def deepspeed_records():
    """The records the ``DeepSpeed`` logger lets through, starting without filters (an earlier test in the same
    process may have quieted it); its filters are restored afterwards."""
    ds = logging.getLogger("DeepSpeed")
    filters = list(ds.filters)
    ds.filters[:] = []
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Collect()
    ds.addHandler(handler)
    yield ds, seen
    ds.removeHandler(handler)
    ds.filters[:] = filters


def _warn(message, category, module="transformers.modeling_utils"):
    warnings.warn_explicit(message, category, "modeling_utils.py", 3312, module=module)


def test_library_filters_drop_exactly_their_message(deepspeed_records):
    ds, seen = deepspeed_records
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        console.quiet_libraries()
        console.quiet_libraries()  # idempotent
        _warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
        _warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", DeprecationWarning)
        _warn("`torch_dtype` is deprecated! Use `dtype` instead!", FutureWarning)
        ds.warning(console.DEEPSPEED_CPU_FALLBACK)
        ds.warning("ZeRO-3 offload needs more host memory")
    assert [(type(w.message), str(w.message)[:25]) for w in caught] == [
        (DeprecationWarning, "`is_gradient_checkpointin"), (FutureWarning, "`torch_dtype` is deprecat")]
    assert seen == ["ZeRO-3 offload needs more host memory"]
    assert sum(isinstance(f, console._DropMessage) for f in ds.filters) == 1


def test_worker_side_learns_verbose_from_the_driver(monkeypatch, deepspeed_records):
    ds, _ = deepspeed_records
    monkeypatch.setitem(console._QUIET, "console", False)
    monkeypatch.setitem(console._QUIET, "native_stderr", True)  # keep pytest's stderr as it is
    console.quiet_console(verbose=True)
    assert os.environ[console.VERBOSE_ENV] == "1"
    assert console.quiet_worker() is False and not ds.filters
    console.quiet_console(verbose=False)
    assert console.VERBOSE_ENV not in os.environ and console._QUIET["console"]
    assert console.quiet_worker() is True and ds.filters


NATIVE_SCRIPT = textwrap.dedent("""
    import os, sys
    from lexray.console import quiet_console
    quiet_console(verbose=sys.argv[1] == "verbose")
    os.write(2, b"encode (ray):   0%|    | 0/5183\\r" + sys.argv[2].encode() + b"\\n")
    os.write(2, sys.argv[3].encode() + b"\\n")
    print("python's own line", file=sys.stderr)
    print("isatty kept" if sys.stderr.isatty() == sys.stdout.isatty() else "", file=sys.stderr)
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["quiet", "verbose"])
def test_native_stderr_filter_in_a_process(mode):
    """The driver's own copy of the line is written by C++ straight to descriptor 2: a real process, writing to
    descriptor 2 the way Ray's core worker does (here mid-line after a progress bar's carriage return)."""
    proc = subprocess.run([sys.executable, "-c", NATIVE_SCRIPT, mode, DATA_NOTICE, OTHER_RAY_ERROR],
                          capture_output=True, timeout=100)
    err = proc.stderr.decode()  # bytes: text mode would turn the carriage return into a newline
    assert proc.returncode == 0, err
    assert "encode (ray):   0%|    | 0/5183\r" in err and OTHER_RAY_ERROR in err and "python's own line" in err
    assert (DATA_NOTICE in err) == (mode == "verbose")
    if mode == "quiet":
        assert "isatty kept" in err


RAY_SCRIPT = textwrap.dedent("""
    import sys, time
    from lexray.console import quiet_console
    quiet_console(verbose=sys.argv[1] == "verbose")
    import ray
    from lexray.ray_utils import init_ray

    init_ray(num_cpus=1, include_dashboard=False)

    @ray.remote(num_cpus=0, max_restarts=-1)
    class Holder:
        def __init__(self, arg):
            self.arg = arg

        def ping(self):
            return len(self.arg)

    @ray.remote(num_cpus=0)
    class Maker:                      # an actor that makes a restartable actor, as Ray Train's controller does
        def make(self):
            self.inner = Holder.remote(ray.put(b"x" * 10))
            return ray.get(self.inner.ping.remote())

    outer = Holder.remote(ray.put(b"y" * 10))           # made by the driver, as Ray Data's actor pool is
    assert ray.get(outer.ping.remote()) == 10
    assert ray.get(Maker.remote().make.remote()) == 10
    time.sleep(3)                                       # let the worker's output reach the driver
    print("[lexray] done", file=sys.stderr)
    ray.shutdown()
""")


@pytest.mark.timeout(400)
def test_ray_restart_notice_from_driver_and_workers():
    """End to end with Ray: the notice from the driver's own actor creation and from an actor's (streamed) is gone
    by default and both show with --verbose."""
    # the two runs are independent processes with a Ray of their own each: run side by side (most of each is
    # waiting on Ray's start-up and the 3 s for the worker's output)
    procs = {mode: subprocess.Popen([sys.executable, "-c", RAY_SCRIPT, mode], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
             for mode in ("quiet", "verbose")}
    out = {}
    try:
        for mode, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=240)
            assert proc.returncode == 0 and "[lexray] done" in stderr, stderr[-3000:]
            out[mode] = stdout + stderr
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    notice = "has constructor arguments in the object store and max_restarts > 0"
    assert out["verbose"].count(notice) == 2, out["verbose"][-3000:]
    assert notice not in out["quiet"], out["quiet"][-3000:]


@pytest.mark.parametrize("quiet", [True, False])
def test_ray_train_log_level_follows_the_console(monkeypatch, quiet):
    monkeypatch.setitem(console._QUIET, "console", quiet)
    cfg = console.ray_train_logging_config()
    if quiet:
        from ray.train import RunConfig

        assert cfg.log_level == "WARNING" and RunConfig(logging_config=cfg).logging_config is cfg
    else:
        assert cfg is None
