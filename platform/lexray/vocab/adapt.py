"""VT adaptation (Vocabulary Transfer, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2.3,
§5.3): a short embedding-only MLM phase.

Every transformer weight is frozen (attention, MLP, norms, an MLM head's transform); only the input embeddings
train, plus — with ``vt.adapt.train_output_head`` — an untied output projection and the output bias (a tied head
trains with the embeddings). Positions are masked with the Overlap-Aware Masking Curriculum
(:mod:`lexray.vocab.masking`). AdamW, cosine schedule with linear warm-up (``vt.adapt.warmup_steps``), on a Ray
Train ``TorchTrainer`` with the strategies of :mod:`lexray.train.strategies` (ddp / fsdp / deepspeed). The phase
is :class:`AdaptationPhase`'s step functions (a :class:`MaskedLMPhase`, shared with CAI's continual
pre-training) run by the one phase runner (:func:`lexray.train.runner.run_phase`):
checkpoints (:class:`lexray.train.checkpoint.TrainerState` + the strategy's files) every
``train.checkpoint_every`` steps; re-running with the same name resumes.

Objective for a decoder made bidirectional (``vt.adapt.objective: auto`` picks ``mntp``): LLM2Vec-style masked
next-token prediction — the masked token at position i is predicted from the hidden state at i − 1 — rather than
masked-token prediction at i. Why: the transformer stays frozen here, and a causally pretrained stack computes, at every
position, a prediction of the *next* token; with MNTP the loss asks the frozen layers for what they already do, so
the gradient goes where VT wants it (placing the new vocabulary rows in the source geometry) instead of into the
embeddings trying to compensate for a one-position shift that only the (frozen) layers could learn. LLM2Vec
(BehnamGhader et al. 2024, arXiv:2404.05961) made the same choice for adapting decoders to bidirectional attention.
MLM encoders use plain masked-token prediction at the masked position (what they were pretrained on). The shift is
undone later by SPLADE fine-tuning, which trains the layers.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lexray.models.backbones import body_and_head
from lexray.models.head import output_projection
from lexray.train.runner import PhaseSteps
from lexray.vocab.masking import IGNORE, omc_mask, token_weights

log = logging.getLogger(__name__)


def freeze_for_adaptation(backbone: nn.Module, train_output_head: bool = True) -> list[str]:
    """Freeze everything but the input embeddings (and, optionally, an untied output projection and the output
    bias); returns the names of the trainable parameters."""
    for p in backbone.parameters():
        p.requires_grad_(False)
    backbone.get_input_embeddings().weight.requires_grad_(True)
    if train_output_head:
        proj = output_projection(backbone)
        proj.weight.requires_grad_(True)
        if getattr(proj, "bias", None) is not None:
            proj.bias.requires_grad_(True)
    return [n for n, p in backbone.named_parameters() if p.requires_grad]


def resolve_objective(objective: str, kind: str) -> str:
    """``vt.adapt.objective`` for a backbone ``kind``: ``auto`` is ``mntp`` for decoders, ``mlm`` otherwise."""
    return ("mntp" if kind == "decoder" else "mlm") if objective == "auto" else objective


class MaskedLMObjective(nn.Module):
    """``forward(inputs, labels) -> mean cross-entropy`` over masked positions (mlm) or, for mntp, with the
    prediction of position i read at i − 1. The head runs only on the predicting positions."""

    def __init__(self, backbone: nn.Module, kind: str, objective: str):
        super().__init__()
        self.backbone = backbone
        self.kind = kind
        self.objective = objective

    def forward(self, inputs: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        """``inputs``: input_ids / attention_mask (B, L); ``labels`` (B, L) long, IGNORE where not masked.
        Returns the scalar float32 loss (0 with a graph when nothing is masked)."""
        split = body_and_head(self.backbone, self.kind)
        if self.objective == "mntp":
            labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE)], 1)
        sel = labels != IGNORE
        if split is None:
            logits = self.backbone(**inputs).logits[sel]
        else:
            body, head = split
            hidden = body(**inputs).last_hidden_state
            logits = head(hidden[sel])
        if logits.shape[0] == 0:
            return logits.sum() * 0.0
        return nn.functional.cross_entropy(logits.float(), labels[sel])


def mlm_texts(dataset: str, max_docs: int | None = None) -> list[str]:
    """Training text: the documents (title + text) of a BEIR corpus."""
    from lexray.data.beir import iter_corpus

    return [d.full_text for d in iter_corpus(dataset, max_docs=max_docs)]


class MaskedLMPhase(PhaseSteps):
    """The masked-LM step functions for :func:`lexray.train.runner.run_phase`, shared by VT's adaptation
    (:class:`AdaptationPhase`) and CAI's continual pre-training (:class:`lexray.vocab.domain.ContinualMLMPhase`).

    Builds on every worker: the encoder from ``init_dir``, the subclass's :meth:`prepare` (masking weights ω,
    which parameters train, the objective), the texts, the step sampler (seed ``train.seed``) and the strategy.
    Step ``i``'s masks come from a generator seeded by (seed, i, rank, micro-batch), so a resumed run masks as the
    uninterrupted one did. Masking is :func:`lexray.vocab.masking.omc_mask` (80/10/10); with uniform ω it is
    BERT's: every non-special position masked with probability ``mask_rate``.

    Subclasses set ``name`` (the phase), ``out_name`` (the model folder under ``<run_dir>/models``) and implement
    :meth:`section` (the config section with max_steps, lr, weight_decay, warmup_steps, global_batch_size,
    grad_accum, max_length, mask_rate), :meth:`prepare` and :meth:`load_texts`.
    """

    name = "mlm"
    out_name = "mlm"

    @staticmethod
    def section(cfg):
        """The phase's config section."""
        raise NotImplementedError

    def prepare(self, enc, init_dir: str) -> tuple[torch.Tensor, str]:
        """Freeze what does not train; returns (ω over the vocabulary (|V|,) float32, objective mlm|mntp)."""
        raise NotImplementedError

    def load_texts(self, cfg) -> list[str]:
        """The training texts (every worker reads them)."""
        raise NotImplementedError

    def __init__(self, cfg, init_dir: str, device: torch.device):
        from lexray.data.collate import StepSampler
        from lexray.models import SparseEncoder
        from lexray.train.strategies import make_strategy, rank, world_size

        ac, tc = self.section(cfg), cfg.train
        self.cfg, self.ac, self.init_dir, self.device = cfg, ac, init_dir, device
        self.rank, W = rank(), world_size()
        enc = SparseEncoder.from_pretrained(init_dir, dtype=cfg.model.dtype)
        self.tok = enc.tokenizer
        self.omega, objective = self.prepare(enc, init_dir)
        self.module = MaskedLMObjective(enc.backbone, enc.settings.kind, objective)
        self.texts = self.load_texts(cfg)
        self.sampler = StepSampler(len(self.texts), ac.global_batch_size, W, ac.grad_accum, seed=tc.seed)
        self.total = ac.max_steps
        self.strategy = make_strategy(
            tc.strategy, self.module, lr=ac.lr, weight_decay=ac.weight_decay, total_steps=self.total,
            warmup_ratio=ac.warmup_steps / self.total, max_grad_norm=tc.max_grad_norm, device=device,
            layers=enc.transformer_layers(), deepspeed_config=tc.deepspeed_config,
            micro_batch=self.sampler.micro_batch_size, grad_accum=ac.grad_accum,
            bf16=tc.bf16 and device.type == "cuda")

    def step(self, step: int) -> dict:
        """Mask this worker's micro-batches, accumulate, one optimizer step."""
        ac, seed, tok, device = self.ac, self.cfg.train.seed, self.tok, self.device
        epoch, s = self.sampler.position(step)
        mbs = self.sampler.micro_batches(epoch, s, self.rank)
        loss_sum, masked = 0.0, 0
        for k, mb in enumerate(mbs):
            batch = tok([self.texts[int(i)] for i in mb], padding=True, truncation=True, max_length=ac.max_length,
                        return_tensors="pt")
            g = torch.Generator().manual_seed(int(seed * 1_000_003 + step * 1009 + self.rank * 31 + k))
            ids, labels = omc_mask(batch["input_ids"], batch["attention_mask"], self.omega, tok.mask_token_id,
                                   len(tok), ac.mask_rate, g)
            inputs = {"input_ids": ids.to(device), "attention_mask": batch["attention_mask"].to(device)}
            with self.strategy.sync(k == len(mbs) - 1):
                loss = self.strategy.forward(inputs, labels.to(device))
                self.strategy.backward(loss / len(mbs))
            loss_sum += float(loss.detach())
            masked += int((labels != IGNORE).sum())
        grad_norm = self.strategy.step()
        return {"loss": loss_sum / len(mbs), "masked": masked, "grad_norm": grad_norm}

    def record(self, out: dict, done: int, elapsed: float) -> dict:
        """``phase`` (0), ``step``, ``loss`` (mean over micro-batches), ``lr``, ``grad_norm``, ``masked``,
        ``examples_per_s``, ``wall_time``."""
        return {"phase": 0.0, "step": float(done), "loss": out["loss"], "lr": self.strategy.lr(),
                "grad_norm": out["grad_norm"], "masked": float(out["masked"]),
                "examples_per_s": self.ac.global_batch_size / max(elapsed, 1e-9), "wall_time": time.time()}

    def console_line(self, m: dict) -> str:
        """``[lexray] <name> step <done>/<total> mlm loss … lr … masked … ex/s``."""
        return (f"[lexray] {self.name} step {int(m['step'])}/{self.total} mlm loss {m['loss']:.4f} "
                f"lr {m['lr']:.2e} masked {m['masked']:.0f} {m['examples_per_s']:.1f} ex/s")

    def save(self, state_dict: dict[str, torch.Tensor], out_dir: Path) -> None:
        """Load the trained backbone weights into a fresh copy of the ``init_dir`` encoder and save it.

        Raises:
            RuntimeError: the state dict does not match the model.
        """
        from lexray.models import SparseEncoder

        final = SparseEncoder.from_pretrained(self.init_dir, dtype=self.cfg.model.dtype)
        missing, unexpected = final.backbone.load_state_dict(
            {k[len("backbone."):]: v for k, v in state_dict.items() if k.startswith("backbone.")}, strict=False)
        if missing or unexpected:
            raise RuntimeError(f"adapted state does not match the model: {missing[:5]} {unexpected[:5]}")
        if out_dir.exists():
            import shutil

            shutil.rmtree(out_dir)
        final.save_pretrained(out_dir)
        print(f"[lexray] {self.name} done: {out_dir}", flush=True)


class AdaptationPhase(MaskedLMPhase):
    """VT's adaptation (one phase named ``vt-adapt``): embedding-only, Overlap-Aware Masking Curriculum over the
    migrated encoder's ``vt_alignment.json`` (which target tokens are new), texts of ``vt.adapt.dataset``."""

    name = "vt-adapt"
    out_name = "vt-adapted"

    @staticmethod
    def section(cfg):
        return cfg.vt.adapt

    def prepare(self, enc, init_dir: str) -> tuple[torch.Tensor, str]:
        ac = self.ac
        meta = json.loads((Path(init_dir) / "vt_alignment.json").read_text())
        is_new = np.asarray(meta["is_new"], dtype=bool)
        omega = token_weights(is_new, ac.new_token_weight, enc.tokenizer.all_special_ids)
        objective = resolve_objective(ac.objective, enc.settings.kind)
        trainable = freeze_for_adaptation(enc.backbone, ac.train_output_head)
        if self.rank == 0:
            print(f"[lexray] vt-adapt: objective {objective}, trainable {trainable}", flush=True)
        return omega, objective

    def load_texts(self, cfg) -> list[str]:
        return mlm_texts(self.ac.dataset or cfg.data.dataset, self.ac.max_docs)


def run_mlm_phase(phase_cls: type[MaskedLMPhase], cfg, init_dir: str, run_dir: Path, reporter,
                  device: torch.device | None = None):
    """A :class:`MaskedLMPhase` (every worker) on the phase runner: returns the final :class:`TrainerState`
    (``model_dir`` = the trained encoder, saved by rank 0 under ``<run_dir>/models/<phase_cls.out_name>``).
    Checkpoints do not carry a model: the caller names ``init_dir`` on every run, and a resumed run starts
    from it."""
    from lexray.train.checkpoint import TrainerState
    from lexray.train.metrics import MetricsSink
    from lexray.train.runner import resume_state, run_phase, worker_device
    from lexray.train.strategies import rank

    device = device or worker_device()
    state = resume_state(reporter, TrainerState(init_dir=init_dir))
    if state.done:
        return state

    def end(out: Path):
        return (TrainerState(1, 0, init_dir, [str(out)], done=True),
                {"phase": 0.0, "done": 1.0, "model_dir": str(out)}, None)

    sink = MetricsSink(run_dir, enabled=rank() == 0, tensorboard=False)
    try:
        return run_phase(lambda: phase_cls(cfg, init_dir, device), state, reporter, sink,
                         run_dir / "models" / phase_cls.out_name, end, log_every=cfg.train.log_every,
                         checkpoint_every=cfg.train.checkpoint_every)
    finally:
        sink.close()


def mlm_func(config: dict) -> None:
    """Ray Train worker entry point: ``{"cfg": LexrayConfig JSON, "phase": "module:Class", "init_dir": str,
    "run_dir": str}``."""
    import importlib

    from lexray.config import LexrayConfig
    from lexray.console import quiet_ray_train_reports
    from lexray.train.loop import set_cpu_threads
    from lexray.train.runner import RayReporter

    cfg = LexrayConfig.model_validate(config["cfg"])
    module, cls = config["phase"].split(":")
    phase_cls = getattr(importlib.import_module(module), cls)
    quiet_ray_train_reports()
    set_cpu_threads(cfg)
    torch.manual_seed(cfg.train.seed)
    run_mlm_phase(phase_cls, cfg, config["init_dir"], Path(config["run_dir"]), RayReporter())


def run_mlm(cfg, phase_cls: type[MaskedLMPhase], init_dir: str | os.PathLike, storage_path: str | os.PathLike,
            name: str) -> Path:
    """Run a :class:`MaskedLMPhase` on a Ray Train ``TorchTrainer`` (``train.num_workers``, ``train.strategy``,
    CPUs/GPUs as for the other jobs); returns the trained encoder's folder. Same name + storage path = resume."""
    from lexray.ray_utils import init_ray
    from lexray.train.loop import torch_trainer

    init_ray()
    storage = Path(storage_path).resolve()
    run_dir = storage / name / "lexray"
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = torch_trainer(cfg, mlm_func, {"cfg": cfg.model_dump(mode="json"), "init_dir": str(init_dir),
                                            "phase": f"{phase_cls.__module__}:{phase_cls.__qualname__}",
                                            "run_dir": str(run_dir)}, name, str(storage))
    result = trainer.fit()
    metrics = dict(result.metrics or {})
    if metrics.get("model_dir"):
        return Path(metrics["model_dir"])
    return run_dir / "models" / phase_cls.out_name


def mlm_local(cfg, phase_cls: type[MaskedLMPhase], init_dir: str | os.PathLike, run_dir: str | os.PathLike) -> Path:
    """The same phase in this process without Ray (tests, debugging); returns the trained encoder's folder."""
    from lexray.train.runner import LocalReporter

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.train.seed)
    state = run_mlm_phase(phase_cls, cfg, str(init_dir), run_dir, LocalReporter(run_dir / "checkpoints"),
                          device=torch.device("cpu"))
    return Path(state.model_dir)


def run_adaptation(cfg, init_dir: str | os.PathLike, storage_path: str | os.PathLike, name: str = "vt-adapt"
                   ) -> Path:
    """VT's adaptation on Ray Train (:func:`run_mlm` with :class:`AdaptationPhase`)."""
    return run_mlm(cfg, AdaptationPhase, init_dir, storage_path, name)


def adapt_local(cfg, init_dir: str | os.PathLike, run_dir: str | os.PathLike) -> Path:
    """VT's adaptation in this process (:func:`mlm_local` with :class:`AdaptationPhase`)."""
    return mlm_local(cfg, AdaptationPhase, init_dir, run_dir)
