"""VT adaptation (../shared/papers/vocabulary-transfer-vt.txt §4.2.3, §5.3): a short embedding-only MLM phase.

Every transformer weight is frozen (attention, MLP, norms, an MLM head's transform); only the input embeddings
train, plus — with ``vt.adapt.train_output_head`` — an untied output projection and the output bias (a tied head
trains with the embeddings). Positions are masked with the Overlap-Aware Masking Curriculum
(:mod:`lexray.vocab.masking`). AdamW, cosine schedule with linear warm-up (``vt.adapt.warmup_steps``), on a Ray
Train ``TorchTrainer`` with the strategies of :mod:`lexray.train.strategies` (ddp / fsdp / deepspeed), checkpoints
(:class:`lexray.train.checkpoint.TrainerState` + the strategy's files) every ``train.checkpoint_every`` steps;
re-running with the same name resumes.

Objective for a decoder made bidirectional (``vt.adapt.objective: auto`` picks ``mntp``): LLM2Vec-style masked
next-token prediction — the masked token at position i is predicted from the hidden state at i − 1 — rather than
masked-token prediction at i. Why: the transformer stays frozen here, and a causally pretrained stack computes, at
every position, a prediction of the *next* token; with MNTP the loss asks the frozen layers for what they already
do, so the gradient goes where VT wants it (placing the new vocabulary rows in the source geometry) instead of
into the embeddings trying to compensate for a one-position shift that only the (frozen) layers could learn.
LLM2Vec (BehnamGhader et al. 2024) made the same choice for adapting decoders to bidirectional attention. MLM
encoders use plain masked-token prediction at the masked position (what they were pretrained on). The shift is
undone later by SPLADE fine-tuning, which trains the layers.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lexray.models.backbones import body_and_head
from lexray.models.head import output_projection
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


def _metrics_line(run_dir: Path, m: dict, total: int) -> None:
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(m) + "\n")
    print(f"[lexray] vt-adapt step {int(m['step'])}/{total} mlm loss {m['loss']:.4f} lr {m['lr']:.2e} "
          f"masked {m['masked']:.0f} {m['examples_per_s']:.1f} ex/s", flush=True)


def run_adaptation_phase(cfg, init_dir: str, run_dir: Path, reporter, device: torch.device | None = None):
    """The adaptation loop (every worker): returns the final :class:`TrainerState` (``model_dir`` = the adapted
    encoder, saved by rank 0 under ``<run_dir>/models/vt-adapted``)."""
    from lexray.data.collate import StepSampler
    from lexray.models import SparseEncoder
    from lexray.train.checkpoint import TrainerState
    from lexray.train.loop import worker_device
    from lexray.train.strategies import barrier, make_strategy, rank, world_size

    ac, tc = cfg.vt.adapt, cfg.train
    device = device or worker_device()
    r, W = rank(), world_size()
    state = TrainerState(init_dir=init_dir)
    ctx = reporter.get_checkpoint_dir()
    if ctx is not None:
        with ctx as d:
            state = TrainerState.load(Path(d))
    if state.done:
        return state
    enc = SparseEncoder.from_pretrained(init_dir, dtype=cfg.model.dtype)
    meta = json.loads((Path(init_dir) / "vt_alignment.json").read_text())
    is_new = np.asarray(meta["is_new"], dtype=bool)
    tok = enc.tokenizer
    omega = token_weights(is_new, ac.new_token_weight, tok.all_special_ids)
    objective = resolve_objective(ac.objective, enc.settings.kind)
    trainable = freeze_for_adaptation(enc.backbone, ac.train_output_head)
    if r == 0:
        print(f"[lexray] vt-adapt: objective {objective}, trainable {trainable}", flush=True)
    module = MaskedLMObjective(enc.backbone, enc.settings.kind, objective)
    texts = mlm_texts(ac.dataset or cfg.data.dataset, ac.max_docs)
    sampler = StepSampler(len(texts), ac.global_batch_size, W, ac.grad_accum, seed=tc.seed)
    total = ac.max_steps
    strategy = make_strategy(
        tc.strategy, module, lr=ac.lr, weight_decay=ac.weight_decay, total_steps=total,
        warmup_ratio=ac.warmup_steps / total, max_grad_norm=tc.max_grad_norm, device=device,
        layers=enc.transformer_layers(), deepspeed_config=tc.deepspeed_config,
        micro_batch=sampler.micro_batch_size, grad_accum=ac.grad_accum, bf16=tc.bf16 and device.type == "cuda")
    start = state.step
    if start > 0:
        with reporter.get_checkpoint_dir() as d:
            strategy.load(Path(d))
    module.train()
    for step in range(start, total):
        t0 = time.perf_counter()
        epoch, s = sampler.position(step)
        mbs = sampler.micro_batches(epoch, s, r)
        loss_sum, masked = 0.0, 0
        for k, mb in enumerate(mbs):
            batch = tok([texts[int(i)] for i in mb], padding=True, truncation=True, max_length=ac.max_length,
                        return_tensors="pt")
            g = torch.Generator().manual_seed(int(tc.seed * 1_000_003 + step * 1009 + r * 31 + k))
            ids, labels = omc_mask(batch["input_ids"], batch["attention_mask"], omega, tok.mask_token_id,
                                   len(tok), ac.mask_rate, g)
            inputs = {"input_ids": ids.to(device), "attention_mask": batch["attention_mask"].to(device)}
            with strategy.sync(k == len(mbs) - 1):
                loss = strategy.forward(inputs, labels.to(device))
                strategy.backward(loss / len(mbs))
            loss_sum += float(loss.detach())
            masked += int((labels != IGNORE).sum())
        grad_norm = strategy.step()
        done = step + 1
        log_now = done % tc.log_every == 0 or done == total
        ckpt_now = done % tc.checkpoint_every == 0 and done < total
        if not (log_now or ckpt_now):
            continue
        m = {"phase": 0.0, "step": float(done), "loss": loss_sum / len(mbs), "lr": strategy.lr(),
             "grad_norm": grad_norm, "masked": float(masked),
             "examples_per_s": ac.global_batch_size / max(time.perf_counter() - t0, 1e-9), "wall_time": time.time()}
        if r == 0 and log_now:
            _metrics_line(run_dir, m, total)
        if ckpt_now:
            with tempfile.TemporaryDirectory(prefix="lexray-ckpt-") as tmp:
                strategy.save(Path(tmp))
                if r == 0:
                    TrainerState(0, done, init_dir).save(Path(tmp))
                reporter.report(m, tmp)
        # logged steps without a checkpoint stay out of Ray: a report per step waits for Ray Train V2's 2 s
        # controller poll (as in lexray.train.loop._run_phase; docs/bugs-and-fixes.md)
    sd = strategy.full_state_dict()
    out_dir = run_dir / "models" / "vt-adapted"
    if r == 0:
        final = SparseEncoder.from_pretrained(init_dir, dtype=cfg.model.dtype)
        missing, unexpected = final.backbone.load_state_dict(
            {k[len("backbone."):]: v for k, v in sd.items() if k.startswith("backbone.")}, strict=False)
        if missing or unexpected:
            raise RuntimeError(f"adapted state does not match the model: {missing[:5]} {unexpected[:5]}")
        if out_dir.exists():
            import shutil

            shutil.rmtree(out_dir)
        final.save_pretrained(out_dir)
        print(f"[lexray] vt-adapt done: {out_dir}", flush=True)
    del sd, strategy, module, enc
    barrier()
    new = TrainerState(1, 0, init_dir, [str(out_dir)], done=True)
    with tempfile.TemporaryDirectory(prefix="lexray-ckpt-") as tmp:
        if r == 0:
            new.save(Path(tmp))
        reporter.report({"phase": 0.0, "done": 1.0, "model_dir": str(out_dir)}, tmp if r == 0 else None)
    return new


def adapt_func(config: dict) -> None:
    """Ray Train worker entry point: ``{"cfg": LexrayConfig JSON, "init_dir": str, "run_dir": str}``."""
    from lexray.config import LexrayConfig
    from lexray.train.loop import RayReporter, set_cpu_threads

    cfg = LexrayConfig.model_validate(config["cfg"])
    set_cpu_threads(cfg)
    torch.manual_seed(cfg.train.seed)
    run_adaptation_phase(cfg, config["init_dir"], Path(config["run_dir"]), RayReporter())


def run_adaptation(cfg, init_dir: str | os.PathLike, storage_path: str | os.PathLike, name: str = "vt-adapt"
                   ) -> Path:
    """Run the adaptation on a Ray Train ``TorchTrainer`` (``train.num_workers``, ``train.strategy``, CPUs/GPUs
    as for the other jobs); returns the adapted encoder's folder. Same name + storage path = resume."""
    from lexray.ray_utils import init_ray
    from lexray.train.loop import torch_trainer

    init_ray()
    storage = Path(storage_path).resolve()
    run_dir = storage / name / "lexray"
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = torch_trainer(cfg, adapt_func, {"cfg": cfg.model_dump(mode="json"), "init_dir": str(init_dir),
                                              "run_dir": str(run_dir)}, name, str(storage))
    result = trainer.fit()
    metrics = dict(result.metrics or {})
    if metrics.get("model_dir"):
        return Path(metrics["model_dir"])
    return run_dir / "models" / "vt-adapted"


def adapt_local(cfg, init_dir: str | os.PathLike, run_dir: str | os.PathLike) -> Path:
    """The same loop in this process without Ray (tests, debugging); returns the adapted encoder's folder."""
    from lexray.train.loop import LocalReporter

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.train.seed)
    state = run_adaptation_phase(cfg, str(init_dir), run_dir, LocalReporter(run_dir / "checkpoints"),
                                 device=torch.device("cpu"))
    return Path(state.model_dir)
