"""The training run of every lexray training job: ``train_func`` run by a Ray Train ``TorchTrainer``.

``run_training(cfg)`` builds the trainer from ``cfg.train`` (workers, CPUs/GPUs, strategy, failures) and runs the
phases of ``cfg.train.phases`` in sequence (LACONIC, arXiv:2601.01684, §2.2-2.4, :mod:`lexray.train.curriculum`):
each phase is the SPLADE / LACONIC objective's step functions (:class:`lexray.train.splade.SparsePhase`: encoder,
LoRA, strategy, AdamW with cosine schedule, the GradCache step over the global batch) run by the one phase runner
(:func:`lexray.train.runner.run_phase`: resume, log and checkpoint cadence, phase-end save and report).

Metrics (:mod:`lexray.train.metrics`) are written every ``log_every`` steps by rank 0 to TensorBoard and
``metrics.jsonl`` under ``<storage_path>/<name>/lexray/``; only steps with a checkpoint, a dev evaluation or a
collapse are also sent through ``ray.train.report`` (each report can wait for the controller's 2 s poll); checkpoints
(:mod:`lexray.train.checkpoint`) every ``checkpoint_every`` steps and at every phase end. Re-running with the same
name resumes from the latest checkpoint.

"""

from __future__ import annotations

import functools
import math
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from lexray.config import LexrayConfig
from lexray.console import quiet_ray_train_reports, ray_train_logging_config
from lexray.train.checkpoint import TrainerState, materialize
from lexray.train.metrics import MetricsSink, TrainingCollapsedError, read_metrics
from lexray.train.runner import (
    LocalReporter,
    RayReporter,
    report_checkpoint,
    resume_state,
    run_phase,
    worker_device,
)
from lexray.train.splade import SparsePhase
from lexray.train.strategies import rank

__all__ = ["TrainResult", "build_trainer", "run_phases", "run_training", "torch_trainer", "train_func",
           "train_local", "train_result", "training_run_dir"]


def run_phases(cfg: LexrayConfig, run_dir: Path, reporter, fault_injection: dict | None = None,
               device: torch.device | None = None, evaluator=None) -> TrainerState:
    """All phases from the latest checkpoint (if any); the body of :func:`train_func`. Returns the final state.

    ``evaluator``: optional callable ``(encoder, step) -> dict[str, float]`` with an attribute ``every``
    (steps). During the *last* phase it runs on rank 0 every ``every`` steps and at the phase's last step, and
    its metrics join that step's report (a hyper-parameter search's intermediate dev results,
    :mod:`lexray.tune`). It sees the full, unsharded encoder, so it needs the ``ddp`` strategy.
    """
    if evaluator is not None and cfg.train.strategy != "ddp" and cfg.train.num_workers > 1:
        raise ValueError(f"a dev evaluator needs train.strategy=ddp (rank 0 holds the full model), "
                         f"got {cfg.train.strategy!r} with {cfg.train.num_workers} workers")
    device = device or worker_device()
    state = resume_state(reporter, TrainerState(), run_dir / "models")
    sink = MetricsSink(run_dir, enabled=rank() == 0, tensorboard=cfg.train.tensorboard)
    try:
        while state.phase < len(cfg.train.phases) and not state.done:
            state = _run_phase(cfg, state, run_dir, reporter, sink, device, fault_injection, evaluator)
            if state.done:  # collapsed, or the last phase ended: its checkpoint was the run's final one (done)
                return state
        # a rerun of a finished run (its latest checkpoint says done): report it again, with the model, so that
        # this run's Result has the metrics and checkpoint of the end (Ray's Result.metrics are those of the latest
        # checkpoint), and return at once
        state.done = True
        report_checkpoint(reporter, {"done": 1.0, "phase": float(len(cfg.train.phases)),
                                     "model_dir": state.model_dir}, state, state.model_dir)
        return state
    finally:
        sink.close()


def _run_phase(cfg: LexrayConfig, state: TrainerState, run_dir: Path, reporter, sink: MetricsSink,
               device: torch.device, fault_injection: dict | None, evaluator=None) -> TrainerState:
    """Phase ``state.phase`` on the runner; its end state starts the next phase from the merged encoder."""
    p = state.phase
    out_dir = run_dir / "models" / f"phase-{p}-{cfg.train.phases[p].name}"

    last = p == len(cfg.train.phases) - 1

    def end(out: Path):
        # the last phase's end is also the run's final checkpoint (done): one report and one copy of the model,
        # where there were two in a row (for an 8B model, two full copies staged and persisted for nothing)
        new = TrainerState(p + 1, 0, str(out), [*state.phase_dirs, str(out)], done=last)
        metrics = {"phase": float(p), "phase_done": 1.0, "model_dir": str(out)}
        if last:
            metrics["done"] = 1.0
        return new, metrics, out

    if cfg.model.dense is not None:  # LexSemBridge's dense bi-encoder (arXiv:2508.17858), same runner
        from lexray.train.dense import DensePhase

        phase_cls = DensePhase
    else:
        phase_cls = SparsePhase
    return run_phase(lambda: phase_cls(cfg, state, device, evaluator), state, reporter, sink, out_dir, end,
                     log_every=cfg.train.log_every, checkpoint_every=cfg.train.checkpoint_every,
                     checkpoint_model=state.init_dir, fault_injection=fault_injection)


def train_func(config: dict) -> None:
    """Ray Train worker entry point. ``config``: ``{"cfg": LexrayConfig as JSON dict, "run_dir": str,
    "fault_injection": {"step", "marker", "phase"} | None, "evaluator": see run_phases | None}``."""
    cfg = LexrayConfig.model_validate(config["cfg"])
    quiet_ray_train_reports()
    set_cpu_threads(cfg)
    torch.manual_seed(cfg.train.seed)
    run_phases(cfg, Path(config["run_dir"]), RayReporter(), config.get("fault_injection"),
               evaluator=config.get("evaluator"))


# ---------------------------------------------------------------------------------------------- driver side
@dataclass
class TrainResult:
    """What :func:`run_training` returns.

    model_dir: the final merged encoder (``SparseEncoder.from_pretrained(model_dir)``); phase_dirs: the merged
    encoder of each phase; metrics: the last reported metrics; history: every logged step
    (``<run_dir>/metrics.jsonl``); run_dir: ``<storage_path>/<name>/lexray`` (TensorBoard in ``tensorboard/``);
    checkpoint_path: the latest Ray checkpoint; ray_result: Ray's ``Result``.
    """

    model_dir: Path | None
    phase_dirs: list[Path]
    metrics: dict
    history: list[dict]
    run_dir: Path
    checkpoint_path: str | None
    ray_result: Any = field(repr=False, default=None)


def training_run_dir(cfg: LexrayConfig, name: str | None = None,
                     storage_path: str | os.PathLike | None = None) -> tuple[str, str, Path]:
    """``(name, storage, run_dir)`` of a run: Ray's storage path and lexray's local run folder.

    ``storage_path`` defaults to ``cfg.train.storage_path``, else ``<cfg.out_dir or outputs>/train``. A URI
    (``scheme://…``: ``s3://``, ``gs://``) is kept as given and the run folder (metrics.jsonl, TensorBoard, phase
    models) goes under ``<cfg.out_dir or outputs>/train/<name>/lexray`` on this machine; a local path is made
    absolute and the run folder is ``<storage>/<name>/lexray``.
    """
    from lexray.paths import default_output_dir

    name = name or cfg.name
    storage_path = storage_path or cfg.train.storage_path
    local_root = Path(cfg.out_dir or default_output_dir()) / "train"
    if storage_path is not None and "://" in str(storage_path):
        return name, str(storage_path), (local_root / name / "lexray").resolve()
    storage = Path(storage_path or local_root).resolve()
    return name, str(storage), storage / name / "lexray"


def build_trainer(cfg: LexrayConfig, name: str | None = None, storage_path: str | os.PathLike | None = None,
                  fault_injection: dict | None = None, evaluator=None, callbacks: list | None = None):
    """The Ray Train ``TorchTrainer`` of a run, built but not fitted (what :func:`run_training` fits; a Tune
    trial fits it inside its function trainable, :mod:`lexray.tune.trainable`).

    Args:
        cfg, name, storage_path, fault_injection: as :func:`run_training`; ``run_dir`` (metrics.jsonl,
            TensorBoard, merged encoders) is ``<storage_path>/<name>/lexray`` (:func:`training_run_dir`), created
            here with the resolved config in it.
        evaluator: dev evaluation inside the loop (see :func:`run_phases`); pickled into the workers.
        callbacks: Ray Train ``UserCallback``s (e.g. one relaying dev results to Ray Tune).

    Returns:
        ``ray.train.torch.TorchTrainer``. Does not start Ray.
    """
    from lexray.config import save_config

    name, storage, run_dir = training_run_dir(cfg, name, storage_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir)
    return torch_trainer(cfg, train_func, {"cfg": cfg.model_dump(mode="json"), "run_dir": str(run_dir),
                                           "fault_injection": fault_injection, "evaluator": evaluator},
                         name, storage, callbacks)


def run_with_picklable_errors(func, config: dict) -> None:
    """Run a worker's ``func(config)``; an exception that does not survive pickling is re-raised as a
    RuntimeError carrying its type and message.

    Why: Ray ships a worker's exception to the controller by pickling it. Some libraries' exceptions cannot be
    unpickled (huggingface_hub's ``StrictDataclassClassValidationError``, raised by transformers 5 for a model
    config such as 32 hidden units over 3 attention heads), and the user then read only
    ``StrictDataclassClassValidationError.__init__() missing 1 required positional argument: 'cause'``
    instead of what was wrong with the configuration.
    """
    try:
        func(config)
    except Exception as e:
        try:
            pickle.loads(pickle.dumps(e))
        except Exception:  # noqa: BLE001 - any failure to round-trip: keep the type and the message
            raise RuntimeError(f"{type(e).__module__}.{type(e).__qualname__}: {e}") from None
        raise


def torch_trainer(cfg: LexrayConfig, func, loop_config: dict, name: str, storage: str, callbacks: list | None = None):
    """A ``TorchTrainer`` running ``func(loop_config)`` on ``cfg.train``'s workers (CPUs/GPUs, failures,
    checkpoints kept) with lexray's worker environment; the one place every lexray Ray Train job (training,
    Tune trials, VT adaptation) builds its trainer."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    tc = cfg.train
    resources = {"CPU": tc.cpus_per_worker}
    if tc.use_gpu:
        resources["GPU"] = 1
    # RAY_TRAIN_ENABLE_PRINT_PATCH=0: Ray Train V2 otherwise re-routes print() to a logger and, with Ray's
    # wrapped stdout, tees it too, so every console line of the workers reached the driver twice.
    # MALLOC_*: Ray Train V2 runs train_func in a non-main thread; glibc gives it its own arena, whose freed
    # memory is returned to the kernel and page-faulted back on every step (Ray Train / plain loop 1.4-1.6 in
    # benchmarks/train_step_bench.py; docs/bugs-and-fixes.md). One arena + no trimming keeps it, as the main
    # thread's arena does in a plain loop.
    env = {"TOKENIZERS_PARALLELISM": "false", "RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "MALLOC_ARENA_MAX": "1",
           "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(64 << 30)}
    if tc.strategy == "deepspeed" and not tc.use_gpu:
        env["DS_ACCELERATOR"] = "cpu"
    return TorchTrainer(
        functools.partial(run_with_picklable_errors, func), train_loop_config=loop_config,
        scaling_config=ScalingConfig(num_workers=tc.num_workers, use_gpu=tc.use_gpu, resources_per_worker=resources),
        run_config=RunConfig(name=name, storage_path=storage,
                             failure_config=FailureConfig(max_failures=tc.max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=tc.num_checkpoints_to_keep),
                             worker_runtime_env={"env_vars": env}, callbacks=callbacks or None,
                             logging_config=ray_train_logging_config()))


def set_cpu_threads(cfg: LexrayConfig) -> None:
    """Ray sets OMP_NUM_THREADS to the whole CPUs a worker reserved (1 for cpus_per_worker = 1.5): use one intra-op
    thread per reserved CPU, rounded up, as the encoder actors do (encode.torch_threads). No-op on GPU runs."""
    if not cfg.train.use_gpu:
        torch.set_num_threads(max(1, math.ceil(cfg.train.cpus_per_worker)))


def train_result(result, run_dir: Path) -> TrainResult:
    """A :class:`TrainResult` from a fitted trainer's Ray ``Result``.

    Raises:
        TrainingCollapsedError: the collapse guard stopped the run.
    """
    metrics = dict(result.metrics or {})
    history = read_metrics(run_dir)
    # Ray Train V2's Result.metrics are those of the latest *checkpoint*; the collapse report carries none, so
    # a run that collapsed before its first checkpoint looked finished. The run's own log has the last word.
    last = history[-1] if history else {}
    for m in (metrics, last):
        if m.get("collapsed"):
            raise TrainingCollapsedError(m.get("collapse_message", "training collapsed"))
    phase_dirs: list[Path] = []
    model_dir = None
    if result.checkpoint is not None:
        with result.checkpoint.as_directory() as d:
            st = TrainerState.load(Path(d))
            phase_dirs = [Path(x) for x in st.phase_dirs]
            # the trained encoder travels in the final checkpoint (lexray.train.checkpoint): read it in place on
            # local storage, else copy it to the run folder
            if _is_local(result.checkpoint):
                model_dir = Path(d) / "model" if (Path(d) / "model").is_dir() else None
            else:
                model_dir = materialize(Path(d), run_dir / "models" / "final")
    return TrainResult(model_dir, phase_dirs, metrics, history, run_dir,
                       result.checkpoint.path if result.checkpoint else None, result)


def run_training(cfg: LexrayConfig, name: str | None = None, storage_path: str | os.PathLike | None = None,
                 fault_injection: dict | None = None) -> TrainResult:
    """Train ``cfg.train.phases`` in sequence on a Ray Train ``TorchTrainer`` and return the final encoder.

    Args:
        cfg: the resolved configuration (model, data, train).
        name: run name (default ``cfg.name``). Re-running with the same name and storage path resumes from the
            latest checkpoint (Ray Train V2: ``fit()`` again with the same ``RunConfig``); a finished run returns
            its result without training again.
        storage_path: where Ray keeps the run (default ``cfg.train.storage_path``, else
            ``<cfg.out_dir or outputs>/train``): a local folder on one machine; on a cluster a shared mount or a
            URI Ray and pyarrow support (``s3://bucket/runs``, ``gs://…``), kept as given. Checkpoints are
            self-contained (:mod:`lexray.train.checkpoint`), so a run resumes from any node or after moving.
        fault_injection: tests only — ``{"step": k, "marker": path}`` raises once on every worker after step k.

    Returns:
        :class:`TrainResult` (``model_dir`` = the final merged encoder).

    Raises:
        TrainingCollapsedError: the collapse guard stopped the run (message gives step and active dims).
        ray.train.TrainingFailedError: a worker failed more than ``train.max_failures`` times.
    """
    from lexray.fsio import check_writable
    from lexray.ray_utils import init_ray

    _, storage, _ = training_run_dir(cfg, name, storage_path)
    if "://" not in storage:
        check_writable(storage, "training storage folder (train.storage_path / out_dir)")  # before Ray starts
    init_ray()
    trainer = build_trainer(cfg, name, storage_path, fault_injection)
    return train_result(trainer.fit(), training_run_dir(cfg, name, storage_path)[2])


def _is_local(checkpoint) -> bool:
    import pyarrow.fs

    return isinstance(checkpoint.filesystem, pyarrow.fs.LocalFileSystem)


def train_local(cfg: LexrayConfig, run_dir: str | os.PathLike, device: str | None = None
                ) -> tuple[TrainerState, LocalReporter]:
    """The same loop in this process without Ray (world size 1): the single-process reference of the tests and
    the benchmark. Returns the final state and the reporter: ``metrics`` holds what would have gone to
    ``ray.train.report`` (checkpoint, dev-evaluation and collapse steps, phase ends), ``history`` every logged
    step (``metrics.jsonl``).

    Raises:
        TrainingCollapsedError: as :func:`run_training`.
    """
    run_dir = Path(run_dir)
    rep = LocalReporter(run_dir / "checkpoints")
    torch.manual_seed(cfg.train.seed)
    state = run_phases(cfg, run_dir, rep, device=torch.device(device) if device else torch.device("cpu"))
    rep.history = read_metrics(run_dir)
    if rep.metrics and rep.metrics[-1].get("collapsed"):
        raise TrainingCollapsedError(rep.metrics[-1]["collapse_message"])
    return state, rep
