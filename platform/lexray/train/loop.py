"""The one training loop of every lexray training job: ``train_func`` run by a Ray Train ``TorchTrainer``.

``run_training(cfg)`` builds the trainer from ``cfg.train`` (workers, CPUs/GPUs, strategy, failures) and runs the
phases of ``cfg.train.phases`` in sequence (LACONIC §2.2-2.4, :mod:`lexray.train.curriculum`). Per phase: build the
encoder (previous phase's merged weights), optional LoRA, the strategy (DDP / FSDP2 / DeepSpeed,
:mod:`lexray.train.strategies`), AdamW with a cosine schedule and linear warm-up
(``transformers.get_cosine_schedule_with_warmup``), then optimizer steps until ``max_steps`` / ``epochs``.

One optimizer step (global batch G = W workers × K micro-batches × m queries):

1. encode the K micro-batches — with K = 1 with a graph; with K > 1 first without one (GradCache, Gao et al. 2021,
   "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"), saving the RNG state of each;
2. gather the (K·m, |V|) query and (K·m·(1+N), |V|) document representations of all workers
   (:func:`lexray.losses.gather_with_grad`) and evaluate the objective of LACONIC §2.2 on the *global* batch:
   ``L_rank + λ_Q·FLOPS(Q) + λ_D·FLOPS(D)`` — in-batch negatives span the whole global batch and the regularizer
   obeys the λ rule of :mod:`lexray.losses.flops`;
3. back-propagate it to the cached representations (the local slice; ×W because strategies average gradients);
4. for each micro-batch: (K > 1: restore its RNG state, re-encode with a graph,) back-propagate
   ``Σ reps · ∂L/∂reps`` with gradient synchronisation only on the last micro-batch;
5. clip, step the optimizer and the LR schedule.

So the update of a step depends on the global batch only — not on W or K (tests/train/test_loop.py). bf16
autocast and gradient checkpointing apply on GPU when ``train.bf16`` / ``train.gradient_checkpointing`` are set.

Metrics (:mod:`lexray.train.metrics`) are written every ``log_every`` steps by rank 0 to TensorBoard and
``metrics.jsonl`` under ``<storage_path>/<name>/lexray/``; only steps with a checkpoint, a dev evaluation or a
collapse are also sent through ``ray.train.report`` (each report can wait for the controller's 2 s poll); checkpoints
(:mod:`lexray.train.checkpoint`) every ``checkpoint_every`` steps and at every phase end. Re-running with the same
name resumes from the latest checkpoint.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lexray.config import LexrayConfig, PhaseConfig
from lexray.console import quiet_ray_train_reports
from lexray.data.collate import Batch, StepSampler, collate
from lexray.losses import (
    FlopsSchedule,
    active_dims,
    flops_loss,
    gather_with_grad,
    infonce_loss,
    l1_loss,
    margin_mse_loss,
)
from lexray.train import curriculum
from lexray.train.checkpoint import TrainerState, add_model, materialize
from lexray.train.metrics import CollapseGuard, MetricsSink, TrainingCollapsedError, read_metrics
from lexray.train.strategies import barrier, make_strategy, rank, world_size


class DualEncoder(nn.Module):
    """One forward for a micro-batch: ``(q_inputs, d_inputs) -> (q_reps (B,|V|), d_reps (B·(1+N),|V|))``.

    Why one module call: DDP and DeepSpeed expect one forward per backward; queries and documents share the
    backbone but use different max lengths, so they are two encoder calls inside one forward.
    """

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, q: dict[str, torch.Tensor], d: dict[str, torch.Tensor]):
        return self.encoder(**q, kind="query"), self.encoder(**d, kind="document")


# ---------------------------------------------------------------------------------------------- objective
def objective(q: torch.Tensor, d: torch.Tensor, teacher: torch.Tensor | None, phase: PhaseConfig,
              lam_q: float, lam_d: float, gather_negatives: bool) -> dict[str, Any]:
    """The step objective on this worker's cached representations (leaf tensors requiring grad).

    Returns ``{"backward": tensor to back-propagate, "loss", "rank_loss", "reg_q", "reg_d": floats of the global
    batch, "q_stats", "d_stats": active_dims of the global batch}``.
    """
    import torch.distributed as dist

    W = world_size()
    qg, dg = gather_with_grad(q), gather_with_grad(d)
    n = phase.num_negatives
    if phase.loss == "margin_mse":
        if teacher is None:
            raise ValueError(f"phase '{phase.name}': margin_mse needs teacher scores")
        tg = gather_with_grad(teacher.to(q.device))
        rank_loss = margin_mse_loss(qg, dg, tg[:, 0], tg[:, 1:])
        rank_scale, rank_value = W, rank_loss.detach()
    elif gather_negatives or W == 1:
        rank_loss = infonce_loss(qg, dg, n, phase.temperature, phase.in_batch_negatives)
        rank_scale, rank_value = W, rank_loss.detach()
    else:  # negatives from this worker only: the mean of per-worker losses
        rank_loss = infonce_loss(q, d, n, phase.temperature, phase.in_batch_negatives)
        rank_scale, rank_value = 1, rank_loss.detach().clone()
        dist.all_reduce(rank_value)
        rank_value /= W
    fl = phase.flops
    if fl.kind == "l1":
        reg_q, reg_d = l1_loss(qg), l1_loss(dg)
    else:
        reg_q, reg_d = flops_loss(qg, fl.unbiased), flops_loss(dg, fl.unbiased)
    reg = lam_q * reg_q + lam_d * reg_d
    return {"backward": rank_scale * rank_loss + W * reg,
            "loss": float(rank_value + reg.detach()), "rank_loss": float(rank_value),
            "reg_q": float(reg_q.detach()), "reg_d": float(reg_d.detach()),
            "q_stats": active_dims(qg), "d_stats": active_dims(dg)}


def _rng_state(device: torch.device):
    return (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(state, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _to(inputs: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in inputs.items()}


def train_step(strategy, batches: list[Batch], phase: PhaseConfig, lam_q: float, lam_d: float,
               gather_negatives: bool, device: torch.device, autocast) -> dict[str, Any]:
    """One optimizer step over this worker's K micro-batches (see the module docstring); returns the objective's
    floats and statistics plus ``grad_norm``."""
    K = len(batches)
    inputs = [(_to(b.queries, device), _to(b.docs, device)) for b in batches]
    if K == 1:
        with autocast():
            reps = [strategy.forward(*inputs[0])]
        rng = None
    else:
        reps, rng = [], []
        with torch.no_grad():
            for q_in, d_in in inputs:
                rng.append(_rng_state(device))
                with autocast():
                    reps.append(strategy.forward(q_in, d_in))
    q_leaf = torch.cat([r[0] for r in reps]).detach().float().requires_grad_(True)
    d_leaf = torch.cat([r[1] for r in reps]).detach().float().requires_grad_(True)
    teacher = torch.cat([b.teacher for b in batches]) if batches[0].teacher is not None else None
    out = objective(q_leaf, d_leaf, teacher, phase, lam_q, lam_d, gather_negatives)
    out.pop("backward").backward()
    gq = q_leaf.grad.split([b.n_queries for b in batches])
    gd = d_leaf.grad.split([b.n_queries * (1 + b.num_negatives) for b in batches])
    for k in range(K):
        last = k == K - 1
        with strategy.sync(last):
            if K == 1:
                q_rep, d_rep = reps[0]
            else:
                _set_rng_state(rng[k], device)
                with autocast():
                    q_rep, d_rep = strategy.forward(*inputs[k])
            surrogate = (q_rep.float() * gq[k]).sum() + (d_rep.float() * gd[k]).sum()
            strategy.backward(surrogate)
    out["grad_norm"] = strategy.step()
    return out


# ---------------------------------------------------------------------------------------------- reporting
class RayReporter:
    """Ray Train's report / checkpoint API (every worker calls ``report`` the same number of times)."""

    def get_checkpoint_dir(self):
        import ray.train

        ckpt = ray.train.get_checkpoint()
        return ckpt.as_directory() if ckpt is not None else None

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
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
        return contextlib.nullcontext(str(self.latest)) if self.latest else None

    def report(self, metrics: dict, checkpoint_dir: str | None) -> None:
        self.metrics.append(metrics)
        if checkpoint_dir and self.ckpt_root is not None:
            import shutil

            dst = self.ckpt_root / f"checkpoint_{len(self.metrics):06d}"
            shutil.copytree(checkpoint_dir, dst)
            self.latest = dst


# ---------------------------------------------------------------------------------------------- the loop
def _autocast_factory(cfg: LexrayConfig, device: torch.device):
    if device.type == "cuda" and cfg.train.bf16:
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def worker_device() -> torch.device:
    try:
        import ray.train.torch

        return ray.train.torch.get_device()
    except Exception:  # noqa: BLE001 - outside a Ray Train worker
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


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
    r = rank()
    state = TrainerState()
    resume_ctx = reporter.get_checkpoint_dir()
    if resume_ctx is not None:
        with resume_ctx as d:
            state = TrainerState.load(Path(d))
            # the checkpoint carries the model it needs (lexray.train.checkpoint): copy it to this node
            local = materialize(Path(d), run_dir / "models" / f"resume-phase-{state.phase}-step-{state.step}")
        if local is not None and state.done:
            state.phase_dirs = [*state.phase_dirs[:-1], str(local)]
        elif local is not None:
            state.init_dir = str(local)
    sink = MetricsSink(run_dir, enabled=r == 0, tensorboard=cfg.train.tensorboard)
    try:
        while state.phase < len(cfg.train.phases) and not state.done:
            state = _run_phase(cfg, state, run_dir, reporter, sink, device, fault_injection, evaluator)
            if state.done:  # collapsed
                return state
        state.done = True
        final = {"done": 1.0, "phase": float(len(cfg.train.phases)), "model_dir": state.model_dir}
        # with a checkpoint: Ray's Result.metrics are those of the latest checkpoint, and a rerun of a finished
        # run then finds done=True and returns at once
        with tempfile.TemporaryDirectory(prefix="lexray-ckpt-") as tmp:
            if r == 0:
                state.save(Path(tmp))
                add_model(Path(tmp), state.model_dir)
            reporter.report(final, tmp if r == 0 else None)
        return state
    finally:
        sink.close()


def _run_phase(cfg: LexrayConfig, state: TrainerState, run_dir: Path, reporter, sink: MetricsSink,
               device: torch.device, fault_injection: dict | None, evaluator=None) -> TrainerState:
    p = state.phase
    ev = evaluator if p == len(cfg.train.phases) - 1 else None
    phase = cfg.train.phases[p]
    tc = cfg.train
    r, W = rank(), world_size()
    phase_seed = tc.seed + 1000 * p
    encoder = curriculum.build_encoder(cfg.model, state.init_dir)
    torch.manual_seed(phase_seed)
    peft_model = curriculum.apply_lora(encoder, phase.lora)
    if tc.gradient_checkpointing and device.type == "cuda":
        encoder.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    dataset = curriculum.build_dataset(cfg, phase, phase_seed)
    if r == 0 and getattr(dataset, "report", None) is not None:
        print(f"[lexray] phase '{phase.name}': {dataset.report.summary()}", flush=True)
    sampler = StepSampler(len(dataset), phase.global_batch_size, W, phase.grad_accum, seed=phase_seed)
    total = curriculum.total_steps(phase, sampler.steps_per_epoch)
    module = DualEncoder(encoder)
    strategy = make_strategy(
        tc.strategy, module, lr=phase.lr, weight_decay=phase.weight_decay, total_steps=total,
        warmup_ratio=phase.warmup_ratio, max_grad_norm=tc.max_grad_norm, device=device,
        layers=encoder.transformer_layers(), deepspeed_config=tc.deepspeed_config,
        micro_batch=sampler.micro_batch_size, grad_accum=phase.grad_accum, bf16=tc.bf16 and device.type == "cuda")
    start = state.step
    if start > 0:
        with reporter.get_checkpoint_dir() as d:
            strategy.load(Path(d))
        if r == 0:
            print(f"[lexray] phase '{phase.name}': resumed at step {start}/{total}", flush=True)
    module.train()
    lam = FlopsSchedule.from_config(phase.flops)
    guard = CollapseGuard(encoder.vocab_size, tc.collapse_min_active, tc.collapse_max_fraction,
                          tc.collapse_patience)
    autocast = _autocast_factory(cfg, device)
    gather = tc.gather_negatives
    qmax, dmax = phase.query_max_length, phase.doc_max_length
    for step in range(start, total):
        t0 = time.perf_counter()
        epoch, s = sampler.position(step)
        batches = [collate([dataset.example(int(i), epoch) for i in mb], encoder.tokenize, qmax, dmax)
                   for mb in sampler.micro_batches(epoch, s, r)]
        lam_q, lam_d = lam(step + 1)
        out = train_step(strategy, batches, phase, lam_q, lam_d, gather, device, autocast)
        done_steps = step + 1
        if fault_injection and done_steps == fault_injection.get("step") and p == fault_injection.get("phase", 0):
            marker = Path(fault_injection["marker"]).with_suffix(f".rank{r}")
            if not marker.exists():
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text("injected")
                raise RuntimeError(f"injected failure after step {done_steps} (fault_injection, tests only)")
        elapsed = time.perf_counter() - t0
        eval_now = ev is not None and (done_steps % ev.every == 0 or done_steps == total)
        log_now = done_steps % tc.log_every == 0 or done_steps == total or eval_now
        ckpt_now = done_steps % tc.checkpoint_every == 0 and done_steps < total
        if not (log_now or ckpt_now):
            continue
        m = {"phase": float(p), "step": float(done_steps), "epoch": float(epoch), "loss": out["loss"],
             "rank_loss": out["rank_loss"], "reg_q": out["reg_q"], "reg_d": out["reg_d"],
             "lambda_q": lam_q, "lambda_d": lam_d, "q_active": out["q_stats"]["mean"],
             "d_active": out["d_stats"]["mean"], "q_active_frac": out["q_stats"]["fraction"],
             "d_active_frac": out["d_stats"]["fraction"], "lr": strategy.lr(), "grad_norm": out["grad_norm"],
             "examples_per_s": phase.global_batch_size / max(elapsed, 1e-9), "step_time_s": elapsed,
             "wall_time": time.time(), "resumed_from_step": float(start)}
        if eval_now:
            if r == 0:
                m.update(ev(encoder, done_steps))
            barrier()
        collapse = guard.update(m["d_active"], done_steps) if log_now else None
        if collapse:
            m["collapsed"] = 1.0
            m["collapse_message"] = collapse
            sink.write(m, done_steps, total, phase.name)
            reporter.report(m, None)
            return TrainerState(p, done_steps, state.init_dir, state.phase_dirs, done=True)
        if log_now:
            sink.write(m, done_steps, total, phase.name)
        if ckpt_now:
            with tempfile.TemporaryDirectory(prefix="lexray-ckpt-") as tmp:
                strategy.save(Path(tmp))
                if r == 0:
                    TrainerState(p, done_steps, state.init_dir, state.phase_dirs).save(Path(tmp))
                    add_model(Path(tmp), state.init_dir)
                reporter.report(m, tmp)
        elif eval_now:
            # Only reports that carry a checkpoint or a dev evaluation go to Ray (Tune's schedulers read the
            # latter). Every ray.train.report puts the result in a one-slot queue that Ray Train V2's controller
            # empties once per poll (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s): reporting every logged step made a
            # 0.7 s step take 2.0 s (issue 13; docs/bugs-and-fixes.md). The logged steps go to the sink above.
            reporter.report(m, None)
    # phase end: merge LoRA into the weights and save the encoder the next phase starts from
    sd = strategy.full_state_dict()
    out_dir = run_dir / "models" / f"phase-{p}-{phase.name}"
    if r == 0:
        curriculum.save_merged(sd, cfg.model, state.init_dir, phase.lora, phase_seed, out_dir)
        print(f"[lexray] phase '{phase.name}' done: merged encoder saved to {out_dir}", flush=True)
    del sd, strategy, module, encoder, peft_model
    barrier()
    new = TrainerState(p + 1, 0, str(out_dir), [*state.phase_dirs, str(out_dir)])
    with tempfile.TemporaryDirectory(prefix="lexray-ckpt-") as tmp:
        if r == 0:
            new.save(Path(tmp))
            add_model(Path(tmp), out_dir)
        reporter.report({"phase": float(p), "phase_done": 1.0, "model_dir": str(out_dir)}, tmp if r == 0 else None)
    return new


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
        func, train_loop_config=loop_config,
        scaling_config=ScalingConfig(num_workers=tc.num_workers, use_gpu=tc.use_gpu, resources_per_worker=resources),
        run_config=RunConfig(name=name, storage_path=storage,
                             failure_config=FailureConfig(max_failures=tc.max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=tc.num_checkpoints_to_keep),
                             worker_runtime_env={"env_vars": env}, callbacks=callbacks or None))


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
    from lexray.ray_utils import init_ray

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
