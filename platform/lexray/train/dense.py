"""The dense bi-encoder's objective for :mod:`lexray.train.runner`: LexSemBridge training (arXiv:2508.17858,
../shared/papers/lexsembridge.txt §3.2 Eq. 4, §4 training set-up).

InfoNCE over cosine similarity with temperature τ (``phase.temperature``; the paper's 0.02), in-batch negatives
plus ``phase.num_negatives`` hard negatives per query (BM25-mined, :mod:`lexray.data.mining`, read through the
one hard-negative reader :class:`lexray.data.hardneg.HardNegDataset`), on the global batch of all workers
(:func:`lexray.losses.infonce_loss` with ``similarity="cosine"``, gathered as the SPLADE objective is). The
backbone and the bridge (:class:`lexray.models.bridge.LexSemBridge`) train together; the step is the SPLADE
objective's GradCache step (:func:`lexray.train.splade.train_step` with this loss), the strategies, checkpoints
and resume are the runner's. LoRA is not offered for the dense track (refused).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from lexray.config import LexrayConfig
from lexray.losses import gather_with_grad, infonce_loss
from lexray.train.checkpoint import TrainerState
from lexray.train.runner import PhaseSteps
from lexray.train.splade import setup_phase_training, step_batches, train_step
from lexray.train.strategies import rank, world_size


def build_dense_encoder(cfg: LexrayConfig, init_dir: str | None):
    """The dense encoder a phase starts from: ``cfg.model`` for the first phase, else the previous phase's
    saved folder (its ``lexray_dense.json`` and bridge)."""
    from lexray.config import DenseConfig
    from lexray.models.dense import load_dense_encoder

    if init_dir is None:
        return load_dense_encoder(cfg.model)
    return load_dense_encoder(cfg.model.model_copy(update={
        "name_or_path": init_dir, "random_init": None,
        "dense": DenseConfig(shard_dtype=cfg.model.dense.shard_dtype)}))


class DensePhase(PhaseSteps):
    """Phase ``state.phase`` of ``cfg.train.phases`` for a dense model (``cfg.model.dense``): cosine InfoNCE.

    Builds on every worker, in this order: the encoder, ``manual_seed(train.seed + 1000·phase)``, the dataset, the
    step sampler, the strategy.

    Raises:
        ValueError: ``train.phases.<i>.lora.enabled`` or ``loss: margin_mse`` (not offered for the dense track).
    """

    def __init__(self, cfg: LexrayConfig, state: TrainerState, device: torch.device, evaluator=None):
        p = state.phase
        self.cfg, self.state, self.device = cfg, state, device
        self.phase = phase = cfg.train.phases[p]
        if phase.lora.enabled or phase.loss != "infonce":
            raise ValueError(f"train.phases.{p}: the dense track trains with loss infonce and no LoRA")
        self.name = phase.name
        tc = cfg.train
        self.rank = rank()
        self.phase_seed = tc.seed + 1000 * p
        self.encoder = encoder = build_dense_encoder(cfg, state.init_dir)
        if phase.bridge_lr is not None and encoder.bridge is not None:
            for prm in encoder.bridge.parameters():  # its own group (strategies.param_groups reads the tag)
                prm._lexray_lr = phase.bridge_lr
        torch.manual_seed(self.phase_seed)
        setup_phase_training(self, cfg, encoder, device, evaluator, p)

    def loss(self, q: torch.Tensor, d: torch.Tensor) -> dict[str, Any]:
        """Cosine InfoNCE on the global batch (×W: strategies average gradients; see losses/infonce.py)."""
        W = world_size()
        ph = self.phase
        loss = infonce_loss(gather_with_grad(q), gather_with_grad(d), ph.num_negatives, ph.temperature,
                            ph.in_batch_negatives, similarity=self.encoder.settings.similarity)
        return {"backward": W * loss, "loss": float(loss.detach())}

    def step(self, step: int) -> dict[str, Any]:
        """Collate this worker's micro-batches of ``step``, one GradCache step with :meth:`loss`."""
        epoch, batches = step_batches(self, step)
        out = train_step(self.strategy, batches, self.phase, 0.0, 0.0, True, self.device, self.autocast,
                         loss_fn=self.loss)
        out["epoch"] = epoch
        return out

    def record(self, out: dict[str, Any], done: int, elapsed: float) -> dict[str, Any]:
        """``phase, step, epoch, loss, lr, grad_norm, examples_per_s, step_time_s, wall_time, resumed_from_step``."""
        return {"phase": float(self.state.phase), "step": float(done), "epoch": float(out["epoch"]),
                "loss": out["loss"], "lr": self.strategy.lr(), "grad_norm": out["grad_norm"],
                "examples_per_s": self.phase.global_batch_size / max(elapsed, 1e-9), "step_time_s": elapsed,
                "wall_time": time.time(), "resumed_from_step": float(self.state.step)}

    def console_line(self, m: dict[str, Any]) -> str:
        return (f"[lexray] {self.name} step {int(m['step'])}/{self.total} InfoNCE {m['loss']:.4f} "
                f"lr {m['lr']:.2e} {m['examples_per_s']:.1f} ex/s")

    def evaluate(self, done: int) -> dict[str, float]:
        return self.evaluator(self.encoder, done)

    def save(self, state_dict: dict[str, torch.Tensor], out_dir: Path) -> None:
        """Load the trained full state dict into a CPU copy of the phase's encoder and save it (bridge included)."""
        import shutil

        enc = build_dense_encoder(self.cfg, self.state.init_dir)
        sd = {k[len("encoder."):]: v for k, v in state_dict.items() if k.startswith("encoder.")}
        missing, unexpected = enc.load_state_dict(sd, strict=False)
        if missing or unexpected:
            raise RuntimeError(f"trained state does not match the dense encoder: missing {missing[:5]}, "
                               f"unexpected {unexpected[:5]}")
        if Path(out_dir).exists():
            shutil.rmtree(out_dir)
        enc.save_pretrained(out_dir)
        print(f"[lexray] phase '{self.name}' done: dense encoder saved to {out_dir}", flush=True)
