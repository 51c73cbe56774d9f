"""The SPLADE / LACONIC objective's step functions for :mod:`lexray.train.runner` (one phase of
``cfg.train.phases``; LACONIC, arXiv:2601.01684, §2.2-2.4).

Per phase (:class:`SparsePhase`): build the encoder (previous phase's merged weights,
:mod:`lexray.train.curriculum`), optional LoRA, the strategy (DDP / FSDP2 / DeepSpeed,
:mod:`lexray.train.strategies`), AdamW with a cosine schedule and linear warm-up
(``transformers.get_cosine_schedule_with_warmup``), then optimizer steps until ``max_steps`` / ``epochs``.

One optimizer step (:func:`train_step`; global batch G = W workers × K micro-batches × m queries):

1. encode the K micro-batches — with K = 1 with a graph; with K > 1 first without one (GradCache, Gao et al. 2021,
   "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup", arXiv:2101.06983), saving the RNG
   state of each;
2. gather the (K·m, |V|) query and (K·m·(1+N), |V|) document representations of all workers
   (:func:`lexray.losses.gather_with_grad`) and evaluate the objective of LACONIC (arXiv:2601.01684) §2.2 on the
   *global* batch: ``L_rank + λ_Q·FLOPS(Q) + λ_D·FLOPS(D)`` — in-batch negatives span the whole global batch and
   the regularizer obeys the λ rule of :mod:`lexray.losses.flops`;
3. back-propagate it to the cached representations (the local slice; ×W because strategies average gradients);
4. for each micro-batch: (K > 1: restore its RNG state, re-encode with a graph,) back-propagate
   ``Σ reps · ∂L/∂reps`` with gradient synchronisation only on the last micro-batch;
5. clip, step the optimizer and the LR schedule.

So the update of a step depends on the global batch only — not on W or K (tests/train/test_loop.py). bf16
autocast and gradient checkpointing apply on GPU when ``train.bf16`` / ``train.gradient_checkpointing`` are set.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lexray.config import LexrayConfig, PhaseConfig
from lexray.data.collate import Batch, StepSampler, collate
from lexray.losses import (
    FlopsSchedule,
    active_dims,
    flops_loss,
    gather_with_grad,
    infonce_loss,
    kl_div_loss,
    l1_loss,
    margin_mse_loss,
)
from lexray.train import curriculum
from lexray.train.checkpoint import TrainerState
from lexray.train.metrics import CollapseGuard
from lexray.train.runner import PhaseSteps
from lexray.train.strategies import make_strategy, rank, world_size


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

    With ``phase.distill.loss`` set, a distillation term over each query's positive and hard negatives
    (:func:`_distill_term`, on the global batch) is added to InfoNCE with weight ``phase.distill.weight``; the
    result then also has ``"distill_loss"`` (the unweighted term). ``"rank_loss"`` stays InfoNCE (or MarginMSE).

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
    backward = rank_scale * rank_loss + W * reg
    total = rank_value + reg.detach()
    extra = {}
    if phase.distill.loss != "none":
        term = _distill_term(qg, dg, teacher, phase)
        backward = backward + W * phase.distill.weight * term
        total = total + phase.distill.weight * term.detach()
        extra["distill_loss"] = float(term.detach())
    return {"backward": backward, "loss": float(total), "rank_loss": float(rank_value),
            "reg_q": float(reg_q.detach()), "reg_d": float(reg_d.detach()),
            "q_stats": active_dims(qg), "d_stats": active_dims(dg), **extra}


def _distill_term(qg: torch.Tensor, dg: torch.Tensor, teacher: torch.Tensor | None, phase: PhaseConfig
                  ) -> torch.Tensor:
    """The distillation term of ``phase.distill`` on the global batch: KL-Div (:func:`lexray.losses.kl_div_loss`)
    or MarginMSE (:func:`lexray.losses.margin_mse_loss`) against the (B, 1+N) teacher scores."""
    if teacher is None:
        raise ValueError(f"phase '{phase.name}': distill.loss '{phase.distill.loss}' needs teacher scores")
    tg = gather_with_grad(teacher.to(qg.device))
    if phase.distill.loss == "kl":
        return kl_div_loss(qg, dg, tg[:, 0], tg[:, 1:], phase.distill.temperature,
                           phase.distill.teacher_temperature)
    return margin_mse_loss(qg, dg, tg[:, 0], tg[:, 1:])


def _rng_state(device: torch.device):
    return (torch.get_rng_state(), torch.cuda.get_rng_state(device) if device.type == "cuda" else None)


def _set_rng_state(state, device: torch.device) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], device)


def _to(inputs: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in inputs.items()}


def train_step(strategy, batches: list[Batch], phase: PhaseConfig, lam_q: float, lam_d: float,
               gather_negatives: bool, device: torch.device, autocast, loss_fn=None) -> dict[str, Any]:
    """One optimizer step over this worker's K micro-batches (see the module docstring); returns the objective's
    floats and statistics plus ``grad_norm``. ``loss_fn(q_leaf, d_leaf) -> {"backward", ...}`` replaces
    :func:`objective` (the dense objective of :mod:`lexray.train.dense` reuses this GradCache step)."""
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
    out = (loss_fn(q_leaf, d_leaf) if loss_fn is not None
           else objective(q_leaf, d_leaf, teacher, phase, lam_q, lam_d, gather_negatives))
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

def _autocast_factory(cfg: LexrayConfig, device: torch.device):
    if device.type == "cuda" and cfg.train.bf16:
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def setup_phase_training(steps: PhaseSteps, cfg: LexrayConfig, encoder, device: torch.device, evaluator,
                         phase_index: int) -> None:
    """The build every dual-encoder phase shares once its encoder exists (SPLADE / LACONIC :class:`SparsePhase`,
    the dense :class:`lexray.train.dense.DensePhase`): the dataset (its skip report printed on rank 0), the step
    sampler, the step count, the :class:`DualEncoder` and the strategy, then the autocast factory and the dev
    evaluator (last phase only). Sets those attributes on ``steps``, which must already carry ``phase`` and
    ``phase_seed``. The order is part of the recipe: the dataset and the sampler draw from the RNG."""
    phase, tc = steps.phase, cfg.train
    steps.dataset = curriculum.build_dataset(cfg, phase, steps.phase_seed)
    if rank() == 0 and getattr(steps.dataset, "report", None) is not None:
        print(f"[lexray] phase '{phase.name}': {steps.dataset.report.summary()}", flush=True)
    steps.sampler = StepSampler(len(steps.dataset), phase.global_batch_size, world_size(), phase.grad_accum,
                                seed=steps.phase_seed)
    steps.total = curriculum.total_steps(phase, steps.sampler.steps_per_epoch)
    steps.module = DualEncoder(encoder)
    steps.strategy = make_strategy(
        tc.strategy, steps.module, lr=phase.lr, weight_decay=phase.weight_decay, total_steps=steps.total,
        warmup_ratio=phase.warmup_ratio, max_grad_norm=tc.max_grad_norm, device=device,
        layers=encoder.transformer_layers(), deepspeed_config=tc.deepspeed_config,
        micro_batch=steps.sampler.micro_batch_size, grad_accum=phase.grad_accum,
        bf16=tc.bf16 and device.type == "cuda")
    steps.autocast = _autocast_factory(cfg, device)
    steps.evaluator = evaluator if phase_index == len(tc.phases) - 1 else None
    steps.eval_every = steps.evaluator.every if steps.evaluator is not None else None


def step_batches(steps: PhaseSteps, step: int) -> tuple[int, list[Batch]]:
    """``(epoch, micro-batches)`` of optimizer step ``step`` (0-based) on this worker: the sampler's examples of
    its rank, collated with the encoder's tokenizer at the phase's query/document lengths. For phases built by
    :func:`setup_phase_training` (which sets ``dataset`` and ``sampler``; ``encoder``, ``phase`` and ``rank`` are
    the phase's own)."""
    phase = steps.phase
    epoch, s = steps.sampler.position(step)
    return epoch, [collate([steps.dataset.example(int(i), epoch) for i in mb], steps.encoder.tokenize,
                           phase.query_max_length, phase.doc_max_length)
                   for mb in steps.sampler.micro_batches(epoch, s, steps.rank)]


class SparsePhase(PhaseSteps):
    """Phase ``state.phase`` of ``cfg.train.phases``: ranking loss + FLOPS / L1 regularizer on sparse
    representations (:func:`objective`), one :func:`train_step` per optimizer step, the LoRA-merged encoder
    saved at the end (:func:`lexray.train.curriculum.save_merged`), a collapse guard on logged steps and, in the
    last phase, the optional dev ``evaluator`` (see :func:`lexray.train.loop.run_phases`).

    Builds on every worker, in this order (the RNG calls are part of the recipe): the encoder, ``manual_seed(
    train.seed + 1000·phase)``, LoRA, the dataset, the step sampler, the strategy.
    """

    def __init__(self, cfg: LexrayConfig, state: TrainerState, device: torch.device, evaluator=None):
        p = state.phase
        self.cfg, self.state, self.device = cfg, state, device
        self.phase = phase = cfg.train.phases[p]
        self.name = phase.name
        tc = cfg.train
        self.rank = rank()
        self.phase_seed = tc.seed + 1000 * p
        self.encoder = encoder = curriculum.build_encoder(cfg.model, state.init_dir)
        torch.manual_seed(self.phase_seed)
        self.peft_model = curriculum.apply_lora(encoder, phase.lora)
        if tc.gradient_checkpointing and device.type == "cuda":
            encoder.backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        setup_phase_training(self, cfg, encoder, device, evaluator, p)
        self.lam = FlopsSchedule.from_config(phase.flops)
        self.guard = CollapseGuard(encoder.vocab_size, tc.collapse_min_active, tc.collapse_max_fraction,
                                   tc.collapse_patience)

    def step(self, step: int) -> dict[str, Any]:
        """Collate this worker's micro-batches of ``step``, the λ in force, one :func:`train_step`."""
        phase = self.phase
        epoch, batches = step_batches(self, step)
        lam_q, lam_d = self.lam(step + 1)
        out = train_step(self.strategy, batches, phase, lam_q, lam_d, self.cfg.train.gather_negatives,
                         self.device, self.autocast)
        out.update(epoch=epoch, lambda_q=lam_q, lambda_d=lam_d)
        return out

    def record(self, out: dict[str, Any], done: int, elapsed: float) -> dict[str, Any]:
        """The record of :mod:`lexray.train.metrics` (plus ``step_time_s``, ``wall_time``, ``resumed_from_step``)."""
        qs, ds = out["q_stats"], out["d_stats"]
        return {"phase": float(self.state.phase), "step": float(done), "epoch": float(out["epoch"]),
                "loss": out["loss"], "rank_loss": out["rank_loss"], "reg_q": out["reg_q"], "reg_d": out["reg_d"],
                "lambda_q": out["lambda_q"], "lambda_d": out["lambda_d"], "q_active": qs["mean"],
                "d_active": ds["mean"], "q_active_frac": qs["fraction"], "d_active_frac": ds["fraction"],
                "lr": self.strategy.lr(), "grad_norm": out["grad_norm"],
                "examples_per_s": self.phase.global_batch_size / max(elapsed, 1e-9), "step_time_s": elapsed,
                "wall_time": time.time(), "resumed_from_step": float(self.state.step),
                **({"distill_loss": out["distill_loss"]} if "distill_loss" in out else {})}

    def console_line(self, m: dict[str, Any]) -> str:
        """``[lexray] <phase> step <done>/<total> loss … λ=(…) active q … d … lr … ex/s`` (integer steps)."""
        return (f"[lexray] {self.name} step {int(m['step'])}/{self.total} loss {m['loss']:.4f} rank "
                f"{m['rank_loss']:.4f} regQ {m['reg_q']:.3g} regD {m['reg_d']:.3g} "
                f"λ=({m['lambda_q']:.2g},{m['lambda_d']:.2g}) active q {m['q_active']:.0f} d {m['d_active']:.0f} "
                f"lr {m['lr']:.2e} {m['examples_per_s']:.1f} ex/s"
                + (f" distill {m['distill_loss']:.4f}" if "distill_loss" in m else ""))

    def evaluate(self, done: int) -> dict[str, float]:
        """The dev evaluator on the full (rank 0) encoder."""
        return self.evaluator(self.encoder, done)

    def check(self, m: dict[str, Any], done: int) -> str | None:
        """The collapse guard on the mean active dimensions per document."""
        return self.guard.update(m["d_active"], done)

    def save(self, state_dict: dict[str, torch.Tensor], out_dir: Path) -> None:
        """Merge LoRA into the trained weights and save the encoder the next phase starts from."""
        curriculum.save_merged(state_dict, self.cfg.model, self.state.init_dir, self.phase.lora, self.phase_seed,
                               out_dir)
        print(f"[lexray] phase '{self.name}' done: merged encoder saved to {out_dir}", flush=True)
