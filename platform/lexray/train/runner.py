"""The one phase runner: every lexray training phase (SPLADE / LACONIC, VT adaptation, ...) runs through it.

A *phase* is a number of optimizer steps of one objective on a Ray Train worker (every worker runs the same code).
What differs between objectives is how the model, strategy and data are built, what one step computes and how the
trained weights are saved; what is the same lives here, once:

* resume: the latest checkpoint's :class:`~lexray.train.checkpoint.TrainerState` (:func:`resume_state`) and, for a
  phase in progress, the strategy's model / optimizer / scheduler state;
* the cadence: a metrics record every ``train.log_every`` steps and at the last step (rank 0 writes it to
  ``metrics.jsonl``, optionally TensorBoard, and the console), a checkpoint every ``train.checkpoint_every``
  steps; only checkpoint, dev-evaluation and collapse steps go through ``ray.train.report`` (each report can wait
  for Ray Train V2's 2 s controller poll: issue 13, docs/bugs-and-fixes.md);
* an optional dev evaluation and an optional stop check (the collapse guard) on logged steps;
* fault injection (tests only);
* the phase end: the full state dict (gathered on rank 0), the objective's save, a barrier, and a phase-end
  checkpoint report.

How a new objective plugs in (e.g. CAI's continual MLM pre-training, arXiv:2211.03988, or LexSemBridge's dense
bi-encoder with InfoNCE, arXiv:2508.17858): subclass :class:`PhaseSteps`; its ``__init__`` is the build (model,
``make_strategy`` around the ``nn.Module`` whose ``forward`` is the objective, data, ``total`` steps), ``step(i)``
runs optimizer step ``i`` (0-based) on this worker's micro-batches via ``strategy.forward`` / ``sync`` /
``backward`` / ``step``, ``record`` turns its output into the metrics record, ``console_line`` prints it and
``save`` writes the phase-end weights. Then call :func:`run_phase` with a callable that builds it. Nothing here
changes: see :class:`lexray.train.splade.SparsePhase` and :class:`lexray.vocab.adapt.AdaptationPhase`.

Reporters: :class:`RayReporter` (``ray.train.report`` / ``get_checkpoint``) on Ray Train workers,
:class:`LocalReporter` for the in-process references of the tests and the benchmark.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lexray.train.checkpoint import TrainerState, add_model, materialize
from lexray.train.metrics import MetricsSink
from lexray.train.strategies import Strategy, barrier, rank


class PhaseSteps:
    """The step functions of one phase; the runner's only view of an objective.

    Subclasses build everything in ``__init__`` (every worker; keep the order of RNG calls fixed: the runner
    makes none) and set:

    Attributes:
        name: the phase's name (console lines, TensorBoard tags ``<name>/<metric>``).
        total: optimizer steps of the phase.
        strategy: the :class:`~lexray.train.strategies.Strategy` wrapping the objective's module; the runner
            loads it on resume, saves it in checkpoints and gathers its full state dict at the phase end.
        eval_every: run :meth:`evaluate` every this many steps and at the last step (None: never).
    """

    name: str
    total: int
    strategy: Strategy
    eval_every: int | None = None

    def step(self, step: int) -> dict[str, Any]:
        """Optimizer step ``step`` (0-based) on this worker's micro-batches; returns what :meth:`record` needs."""
        raise NotImplementedError

    def record(self, out: dict[str, Any], done: int, elapsed: float) -> dict[str, Any]:
        """The metrics record of a logged or checkpointed step (floats; ``step`` = ``done``, 1-based), from the
        output of :meth:`step` and its wall time ``elapsed`` (s). Its keys' order is ``metrics.jsonl``'s."""
        raise NotImplementedError

    def console_line(self, m: dict[str, Any]) -> str:
        """The console line of a logged record (rank 0)."""
        raise NotImplementedError

    def save(self, state_dict: dict[str, torch.Tensor], out_dir: Path) -> None:
        """Rank 0, phase end: write the trained model (``state_dict``: ``strategy.full_state_dict()``) to
        ``out_dir`` and say so on the console."""
        raise NotImplementedError

    def evaluate(self, done: int) -> dict[str, float]:
        """Rank 0, every ``eval_every`` steps: dev metrics joining the step's record and report."""
        return {}

    def check(self, m: dict[str, Any], done: int) -> str | None:
        """Every logged step: a message stops the phase (and the run) as failed, e.g. the collapse guard."""
        return None


PhaseEnd = Callable[[Path], tuple[TrainerState, dict, "str | None"]]
"""``out_dir -> (state after the phase, phase-end report metrics, model folder the checkpoint carries)``."""


def run_phase(build: Callable[[], PhaseSteps], state: TrainerState, reporter, sink: MetricsSink, out_dir: Path,
              end: PhaseEnd, *, log_every: int, checkpoint_every: int, checkpoint_model: str | None = None,
              fault_injection: dict | None = None) -> TrainerState:
    """Run phase ``state.phase`` from step ``state.step`` to its end (every worker); returns the next state.

    Args:
        build: builds the phase's :class:`PhaseSteps` (called once; the runner holds the only reference, so the
            model and optimizer are freed before the next phase is built).
        state: where the phase starts; ``state.step > 0`` loads the strategy from ``reporter``'s checkpoint.
        reporter: :class:`RayReporter` or :class:`LocalReporter`.
        sink: rank 0's metrics sink (``enabled`` only on rank 0).
        out_dir: where :meth:`PhaseSteps.save` writes the phase-end model.
        end: the state, report metrics and carried model of the phase-end checkpoint (:data:`PhaseEnd`).
        log_every, checkpoint_every: the cadence in steps (``train.log_every``, ``train.checkpoint_every``).
        checkpoint_model: the model folder every step checkpoint carries (the one the phase started from;
            :mod:`lexray.train.checkpoint`), or None.
        fault_injection: tests only, ``{"step", "marker", "phase", "rank", "mode"}``: fail once per worker
            after that step (:func:`_inject_fault`).

    Returns:
        The phase-end state from ``end``, or — when :meth:`PhaseSteps.check` stopped the phase — the state at
        that step with ``done=True`` (the record carries ``collapsed`` and ``collapse_message``).
    """
    steps = build()
    r, start, total = rank(), state.step, steps.total
    if start > 0:
        with reporter.get_checkpoint_dir() as d:
            steps.strategy.load(Path(d))
        if r == 0:
            print(f"[lexray] phase '{steps.name}': resumed at step {start}/{total}", flush=True)
    steps.strategy.module.train()
    for step in range(start, total):
        t0 = time.perf_counter()
        out = steps.step(step)
        done = step + 1
        _inject_fault(fault_injection, state.phase, done, r)
        elapsed = time.perf_counter() - t0
        every = steps.eval_every
        eval_now = every is not None and (done % every == 0 or done == total)
        log_now = done % log_every == 0 or done == total or eval_now
        ckpt_now = done % checkpoint_every == 0 and done < total
        if not (log_now or ckpt_now):
            continue
        m = steps.record(out, done, elapsed)
        if eval_now:
            if r == 0:
                m.update(steps.evaluate(done))
            barrier()
        stop = steps.check(m, done) if log_now else None
        if stop:
            m["collapsed"] = 1.0
            m["collapse_message"] = stop
            sink.write(m, done, steps.name, steps.console_line(m))
            reporter.report(m, None)
            return TrainerState(state.phase, done, state.init_dir, state.phase_dirs, done=True)
        if log_now:
            sink.write(m, done, steps.name, steps.console_line(m))
        if ckpt_now:
            report_checkpoint(reporter, m, TrainerState(state.phase, done, state.init_dir, state.phase_dirs),
                              checkpoint_model, steps.strategy)
        elif eval_now:
            # Only reports that carry a checkpoint or a dev evaluation go to Ray (Tune's schedulers read the
            # latter). Every ray.train.report puts the result in a one-slot queue that Ray Train V2's controller
            # empties once per poll (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s): reporting every logged step made a
            # 0.7 s step take 2.0 s (issue 13; docs/bugs-and-fixes.md). The logged steps go to the sink above.
            reporter.report(m, None)
    sd = steps.strategy.full_state_dict()
    if r == 0:
        steps.save(sd, out_dir)
    del sd, steps
    barrier()
    new, metrics, model = end(out_dir)
    report_checkpoint(reporter, metrics, new, model)
    return new


def _inject_fault(fault_injection: dict | list[dict] | None, phase: int, done: int, r: int) -> None:
    """Tests only: fail once per worker (a marker file per rank) after step ``fault_injection["step"]`` of
    phase ``fault_injection.get("phase", 0)``, on every rank or only on ``fault_injection["rank"]``.

    ``mode``: ``"raise"`` (default) raises a RuntimeError; ``"kill"`` kills the worker process with SIGKILL (what
    the OOM killer or a pre-empted machine does: no Python cleanup, Ray sees the actor die; after ``delay_s``
    seconds, default 0); ``"hold"`` writes the
    marker and sleeps up to ``hold_s`` seconds (default 120) so that a test can remove the worker's node while
    it is mid-phase, then raises. A list injects several faults (each with its own marker). Runs that share a
    marker (the trials of one Tune search) share the fault: the first to reach the step takes it."""
    if isinstance(fault_injection, list):
        for f in fault_injection:
            _inject_fault(f, phase, done, r)
        return
    if not fault_injection or done != fault_injection.get("step") or phase != fault_injection.get("phase", 0):
        return
    if fault_injection.get("rank") is not None and r != fault_injection["rank"]:
        return
    marker = Path(fault_injection["marker"]).with_suffix(f".rank{r}")
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:  # created atomically: of several runs sharing one marker (Tune trials), exactly one takes the fault
        with marker.open("x") as f:
            f.write(f"injected pid={os.getpid()}")
    except FileExistsError:
        return
    mode = fault_injection.get("mode", "raise")
    if mode == "kill":
        time.sleep(float(fault_injection.get("delay_s", 0)))  # let the controller collect the last report
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "hold":
        time.sleep(float(fault_injection.get("hold_s", 120)))
    raise RuntimeError(f"injected failure after step {done} (fault_injection, tests only)")


def report_checkpoint(reporter, metrics: dict, state: TrainerState, model: str | Path | None = None,
                      strategy: Strategy | None = None) -> None:
    """One report with a checkpoint (every worker calls it): the strategy's files from every rank (when given),
    ``trainer_state.json`` and a copy of ``model`` (a saved encoder folder, or None) from rank 0. Without a
    strategy only rank 0 contributes a folder."""
    r = rank()
    with checkpoint_tmpdir() as tmp:
        if strategy is not None:
            strategy.save(Path(tmp))
        if r == 0:
            state.save(Path(tmp))
            add_model(Path(tmp), model)
        reporter.report(metrics, tmp if strategy is not None or r == 0 else None)


CKPT_TMP_PREFIX = "lexray-ckpt-"
"""Name prefix of the local folder a checkpoint is staged in before ``ray.train.report`` takes it; the writer's pid
follows (``lexray-ckpt-<pid>-<random>``)."""


def checkpoint_tmpdir() -> tempfile.TemporaryDirectory:
    """The local staging folder of one checkpoint report, ``<tmp>/lexray-ckpt-<pid>-<random>``, removed on exit.

    Why the pid in the name: a worker SIGKILLed while it staged a checkpoint (a killed or pre-empted worker, a
    lost node's restart) never runs the clean-up, and its folder, a full model copy, stayed in /tmp for good
    (issue 24, resource hygiene). Every report first removes the staging folders of processes that no longer exist
    on this node (:func:`reap_stale_checkpoint_dirs`), so the restarted worker's first report reclaims them.
    """
    reap_stale_checkpoint_dirs(Path(tempfile.gettempdir()))
    return tempfile.TemporaryDirectory(prefix=f"{CKPT_TMP_PREFIX}{os.getpid()}-")


def reap_stale_checkpoint_dirs(root: Path) -> list[Path]:
    """Remove ``root/lexray-ckpt-<pid>-*`` folders whose process is gone; returns the removed folders.

    A folder whose pid is alive (or cannot be probed: another user's process) is kept. Folders without a pid in
    their name (written before the pid was added) are left alone: nothing tells whether their writer lives.
    /tmp is per node, so the pid is probed on the node that wrote the folder."""
    import shutil

    removed = []
    for d in root.glob(f"{CKPT_TMP_PREFIX}*-*"):
        pid = d.name[len(CKPT_TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not d.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def resume_state(reporter, default: TrainerState, models_dir: Path | None = None) -> TrainerState:
    """The :class:`TrainerState` of the reporter's latest checkpoint, or ``default`` without one.

    With ``models_dir``, the model the checkpoint carries (``model/``, :mod:`lexray.train.checkpoint`) is copied
    to ``<models_dir>/resume-phase-<p>-step-<s>`` on this node and the state points at the copy: as the final
    model of a finished run, else as the model the phase in progress starts from.
    """
    ctx = reporter.get_checkpoint_dir()
    if ctx is None:
        return default
    with ctx as d:
        state = TrainerState.load(Path(d))
        local = None
        if models_dir is not None:
            local = materialize(Path(d), models_dir / f"resume-phase-{state.phase}-step-{state.step}")
    if local is not None and state.done:
        state.phase_dirs = [*state.phase_dirs[:-1], str(local)]
    elif local is not None:
        state.init_dir = str(local)
    return state


def worker_device() -> torch.device:
    """This Ray Train worker's device (``ray.train.torch.get_device``); outside a worker, cuda if available."""
    try:
        import ray.train.torch

        return ray.train.torch.get_device()
    except Exception:  # noqa: BLE001 - outside a Ray Train worker
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class RayReporter:
    """Ray Train's report / checkpoint API (every worker calls ``report`` the same number of times)."""

    def get_checkpoint_dir(self):
        """A context manager giving the latest checkpoint's local folder, or None (a fresh run)."""
        import ray.train

        ckpt = ray.train.get_checkpoint()
        return ckpt.as_directory() if ckpt is not None else None

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        """``ray.train.report`` with the folder as a checkpoint (Ray merges every rank's files), or none."""
        import ray.train

        ckpt = ray.train.Checkpoint.from_directory(checkpoint_dir) if checkpoint_dir else None
        ray.train.report(metrics, checkpoint=ckpt)


class LocalReporter:
    """In-process stand-in for Ray (one process, no process group): keeps reported metrics and the latest
    checkpoint (copied into ``ckpt_root``). For references in tests and the benchmark."""

    def __init__(self, ckpt_root: Path | None = None):
        self.metrics: list[dict] = []
        self.history: list[dict] = []
        self.ckpt_root = ckpt_root
        self.latest: Path | None = None

    def get_checkpoint_dir(self):
        """As :meth:`RayReporter.get_checkpoint_dir`: the latest copied checkpoint, or None."""
        return contextlib.nullcontext(str(self.latest)) if self.latest else None

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        """Keep ``metrics``; copy ``checkpoint_dir`` to ``<ckpt_root>/checkpoint_<n>`` and make it the latest."""
        self.metrics.append(metrics)
        if checkpoint_dir and self.ckpt_root is not None:
            import shutil

            dst = self.ckpt_root / f"checkpoint_{len(self.metrics):06d}"
            shutil.copytree(checkpoint_dir, dst)
            self.latest = dst
