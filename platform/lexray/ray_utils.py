"""One place for ``ray.init`` defaults.

Why: on this kind of machine Ray binds to the external interface unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
is set before Ray is imported, a stale cluster file breaks ``ray.init(num_cpus=...)`` (``address="local"``
avoids it), and a job submitted with ``ray job submit`` must attach to the running cluster instead of starting
its own. :func:`init_ray` handles all three.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

log = logging.getLogger(__name__)

PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
"""Ray Train V2's switch for its per-worker-group PreemptionWatcher actor (``ray.train.v2._internal.constants``)."""

_LOCAL: dict[str, str | None] = {}  # {"dashboard": url or None} once this process started its own Ray instance


def init_ray(address: str | None = None, num_cpus: int | None = None, **kwargs):
    """Start or attach to Ray, idempotently.

    Args:
        address: ``None`` attaches to the cluster this process was submitted to (``RAY_ADDRESS`` set by
            ``ray job submit``) and otherwise starts a local, loopback-only instance; ``"auto"`` or an
            ``ip:port`` attaches explicitly.
        num_cpus: CPUs for a *new* local instance (ignored when attaching).
        kwargs: passed through to :func:`ray.init` (default: dashboard on at 127.0.0.1:8265).

    Returns the Ray context. Never raises if Ray is already initialised in this process.
    """
    import ray

    if ray.is_initialized():
        return ray.get_runtime_context()
    import faulthandler

    had_faulthandler = faulthandler.is_enabled()
    sigterm = _python_sigterm_handler()
    from lexray.console import VERBOSE_ENV, filter_ray_worker_logs

    if os.environ.get(VERBOSE_ENV):  # lexray --verbose: the workers of a cluster learn it too (local ones inherit)
        runtime_env = dict(kwargs.get("runtime_env") or {})
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), VERBOSE_ENV: os.environ[VERBOSE_ENV]}
        kwargs["runtime_env"] = runtime_env
    try:
        ctx = _init(ray, address, num_cpus, kwargs)
        if sigterm is not None and not started_locally():
            # ray.init replaces the driver's SIGTERM handler with sys.exit(15); a caller's own (lexray.cli's
            # Terminated, the Ctrl-C clean-up that ``ray job stop`` relies on) is put back. A local instance keeps
            # Ray's, which stops that instance's processes first and then exits through SystemExit.
            signal.signal(signal.SIGTERM, sigterm)
        filter_ray_worker_logs()  # Ray's one known ERROR line from its own actors (lexray.console)
        if started_locally():
            # the local instance lives as long as this process: its dashboard is shown now, while it is live
            _LOCAL["dashboard"] = url = dashboard_url()
            if url:
                print(f"Ray dashboard: {url} (this job's own Ray: live while the job runs)", file=sys.stderr,
                      flush=True)
        return ctx
    finally:
        # ray.init enables Python's faulthandler in the driver when nobody did. If a JVM (Pyserini, via pyjnius) is
        # already running in this process, faulthandler now sits in front of the JVM's SIGSEGV handler: the JVM's
        # routine faults (implicit null checks of JIT code) reach faulthandler, which re-raises them with kill()
        # and the JVM takes that for a real crash (docs/bugs-and-fixes.md, "JVM killed after ray.init").
        # disable() puts the previous handler (the JVM's) back; a user who enabled faulthandler keeps it.
        if not had_faulthandler and faulthandler.is_enabled():
            faulthandler.disable()


def _python_sigterm_handler():
    """The SIGTERM handler a Python caller installed in this (main) thread, or None (default, ignored, not
    Python's, or not the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    h = signal.getsignal(signal.SIGTERM)
    return h if callable(h) else None


def _init(ray, address, num_cpus, kwargs):
    # The dashboard also serves the State API, which Ray Train's placement-group cleaner polls; without it
    # every poll logs "Failed to query Ray Train Controller actor state". It binds to 127.0.0.1 by default.
    kwargs.setdefault("include_dashboard", True)
    kwargs.setdefault("log_to_driver", True)
    kwargs.setdefault("configure_logging", True)
    kwargs.setdefault("logging_level", logging.WARNING)
    if address is None and os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
    if address is None:
        reap_orphaned_agents()  # what a killed earlier driver's Ray left behind (docs/operations.md, hygiene)
        # Ray Train V2 starts a PreemptionWatcher actor beside every worker group: it polls the GCS for nodes being
        # drained (an autoscaler or a cloud reclaiming a machine) and logs what it finds. A job's own one-node
        # instance has no autoscaler and no node to drain, so the watcher is one more process per fit for nothing
        # (~2.5 core-s to start, then a poll every 5 s and Ray's 10-ms wake-ups: docs/training.md, "Measured").
        # Its raylet passes the driver's environment to Train's controller, which reads this switch. A user's own
        # setting wins; an attached cluster (below) keeps Ray's default.
        os.environ.setdefault(PREEMPTION_WATCHER_ENV, "0")
        # Starting a local instance fails transiently on a machine shared with other heavy jobs: Ray gives the
        # raylet 30 s (hard-coded) to register ("The current node timed out during startup"), and the dashboard
        # may not come up in time. Try again; the last attempt goes without the dashboard (training does not
        # need it; only the dashboard UI and the State API are then missing).
        for attempt in range(3):
            if attempt == 2 and kwargs.get("include_dashboard"):
                kwargs["include_dashboard"] = False
                log.warning("starting Ray without its dashboard")
            before = _child_pids()
            tmp_dirs: set = set()
            # registered before ray.init, so it runs after Ray's own exit handlers (atexit is last in, first out)
            atexit.register(_remove_dirs, tmp_dirs)
            try:
                ctx = ray.init(address="local", num_cpus=num_cpus, _node_ip_address="127.0.0.1", **kwargs)
                atexit.register(_collect_forkserver_dirs, tmp_dirs)  # runs before Ray's: its processes still live
                break
            except Exception as e:  # noqa: BLE001 - Ray raises bare Exceptions for these
                ray.shutdown()
                _kill_new_children(before)  # a failed start leaves its GCS, dashboard, monitors running
                if attempt == 2:
                    raise
                log.warning("Ray's local instance failed to start (%s); retrying (%d/2)",
                            str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__,
                            attempt + 1)
        _LOCAL["dashboard"] = None
    else:
        kwargs.pop("include_dashboard", None)
        ctx = ray.init(address=address, **kwargs)
    return ctx


def _collect_forkserver_dirs(into: set) -> None:
    """Add to ``into`` the multiprocessing folders (``pymp-*``) whose forkserver socket a process of this process's
    Ray holds.

    Why: Ray's dashboard starts its modules through a ``multiprocessing`` forkserver, which listens on a socket in
    a ``pymp-*`` folder of the temporary directory. Python removes that folder when the dashboard exits normally,
    but not when Ray's shutdown kills it: a job that failed left one folder per run in its TMPDIR (issue 24,
    tests/cluster/test_hygiene.py). Found at exit, while Ray's processes still run; removed by :func:`_remove_dirs`
    once Ray has stopped them.
    """
    import psutil

    for proc in psutil.Process().children(recursive=True):
        try:
            for conn in proc.net_connections(kind="unix"):
                path = conn.laddr if isinstance(conn.laddr, str) else ""
                if path and os.path.basename(os.path.dirname(path)).startswith("pymp-"):
                    into.add(os.path.dirname(path))
        except (psutil.Error, OSError):
            continue


def _remove_dirs(dirs: set) -> None:
    """Remove the folders :func:`_collect_forkserver_dirs` found (their processes are gone by now)."""
    import shutil

    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def started_locally() -> bool:
    """Whether this process started its own Ray instance (which stops when the process exits), rather than
    attaching to a cluster that outlives it."""
    return "dashboard" in _LOCAL


def dashboard_url() -> str | None:
    """The Ray dashboard URL of this process's Ray session (None if Ray is not initialised or has none)."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        url = getattr(ray.get_runtime_context(), "dashboard_url", None)
        if not url:
            from ray._private.worker import global_worker

            url = getattr(global_worker.node, "webui_url", None) if global_worker.node else None
        if url and not str(url).startswith("http"):
            url = f"http://{url}"
        return url or None
    except Exception:  # noqa: BLE001 - only informative
        return None


def dashboard_closing_line() -> str | None:
    """What a job's closing lines say about the dashboard: the URL of a cluster it attached to (still live),
    or, for the job's own local Ray, that it stopped with the job (its URL was printed when Ray started).
    None when this process used no Ray or Ray had no dashboard."""
    if started_locally():
        url = _LOCAL.get("dashboard")
        return (f"Ray dashboard: {url} stops with this job (it was this job's own Ray; for one that stays up, "
                f"`ray start --head` and set RAY_ADDRESS)") if url else None
    url = dashboard_url()
    return f"Ray dashboard: {url}" if url else None


def _child_pids() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _kill_new_children(before: set[int]) -> None:
    """Kill the processes this process started since ``before`` (what a failed ``ray.init`` left behind)."""
    import psutil

    for p in psutil.Process().children(recursive=True):
        if p.pid not in before:
            try:
                p.kill()
                p.wait(timeout=5)  # reap it: no zombie left behind
            except (psutil.NoSuchProcess, psutil.TimeoutExpired):
                pass


AGENT_TITLES = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
"""Process titles of the two per-node agents a raylet starts."""


def orphaned_agents() -> list:
    """This user's Ray node agents (DashboardAgent, RuntimeEnvAgent) whose raylet is gone: ``psutil.Process``es.

    Why: when a driver that started its own local Ray is killed with SIGKILL, Ray's reaper stops the GCS, the
    raylet and the workers, but the two agents stay, re-parented to init, each holding ~100-200 MB (issue 24,
    defect 8; Ray 2.60: they notice the raylet's death, then hang for a minute or more flushing logs to the dead
    GCS). A raylet starts its agents as its children, so an agent whose parent is no longer a raylet (re-parented
    to init or a sub-reaper) is orphaned. Agents of a live raylet, any cluster's, are never listed; nor are other
    users' processes.
    """
    import psutil

    me = os.getuid()
    out = []
    for p in psutil.process_iter(["name", "cmdline", "uids", "ppid"]):
        try:
            title = (p.info["cmdline"] or [""])[0].strip()
            if title not in AGENT_TITLES or p.info["uids"] is None or p.info["uids"].real != me:
                continue
            if not _is_raylet(p.info["ppid"]):
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def _is_raylet(pid: int) -> bool:
    import psutil

    try:
        return "raylet" in psutil.Process(pid).name()
    except psutil.Error:
        return False


def reap_orphaned_agents(only: set[int] | None = None) -> int:
    """Kill :func:`orphaned_agents` (SIGKILL, reaped; with ``only``, just those pids), with one warning naming
    them; returns how many.
    :func:`init_ray` runs it before it starts a local instance, so a killed job's leftovers go at the next start
    (``ray stop`` does the same but also stops every live Ray instance of the machine)."""
    import psutil

    found = [p for p in orphaned_agents() if only is None or p.pid in only]
    if found:
        log.warning("stopping %d Ray agent process(es) left by a killed Ray instance (pids %s)", len(found),
                    ", ".join(str(p.pid) for p in found))
    for p in found:
        try:
            p.kill()
            p.wait(timeout=5)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
    return len(found)
