"""Phase sequencing (LACONIC, arXiv:2601.01684, ../shared/papers/laconic.txt §2.2-2.4): data per phase, model
initialisation, LoRA and its merge.

LACONIC trains in two phases — pre-finetuning on weakly supervised pairs with in-batch negatives, then finetuning
with hard negatives — each with LoRA; after a phase "we merge the LoRA adapter back to the base model and use the
merged checkpoint in the subsequent finetuning training phase" (§2.3). Here each phase starts from the previous
phase's merged, saved encoder (``SparseEncoder.save_pretrained``); phase 0 starts from ``cfg.model``.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from lexray.config import LexrayConfig, LoraConfig, ModelConfig, PhaseConfig


def build_encoder(model_cfg: ModelConfig, init_dir: str | None):
    """The encoder a phase starts from: ``cfg.model`` for the first phase, else the previous merged model."""
    from lexray.models import SparseEncoder, load_encoder

    if init_dir is None:
        return load_encoder(model_cfg)
    return SparseEncoder.from_pretrained(init_dir, dtype=model_cfg.dtype,
                                         trust_remote_code=model_cfg.trust_remote_code)


def apply_lora(encoder, lora: LoraConfig):
    """Wrap the encoder's backbone with peft LoRA adapters (in place); returns the ``PeftModel`` (or None).

    Only adapter weights stay trainable, plus the output bias with ``lora.train_output_bias``. Raises ValueError
    when no ``target_modules`` exist in the backbone (e.g. the decoder defaults ``q_proj..down_proj`` on a BERT
    backbone: BERT's are ``query``, ``key``, ``value``, ``dense``).
    """
    if not lora.enabled:
        return None
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    names = {n.rsplit(".", 1)[-1] for n, _ in encoder.backbone.named_modules()}
    if not set(lora.target_modules) & names:
        raise ValueError(f"lora.target_modules {lora.target_modules} match no module of the "
                         f"{encoder.backbone.config.model_type} backbone; e.g. one of {sorted(names)[:20]}")
    pcfg = PeftLoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                          target_modules=[t for t in lora.target_modules if t in names])
    peft_model = get_peft_model(encoder.backbone, pcfg)
    if lora.train_output_bias:
        # One weight per term: with a frozen head, the bias is the only place where the phase can learn that a
        # term is generally uninformative (punctuation, " the") or informative. A base parameter, so
        # merge_and_unload keeps the trained values. Its own learning rate (param_groups reads the tag).
        from lexray.models.head import ensure_output_bias

        bias = ensure_output_bias(encoder.backbone)
        bias.requires_grad_(True)
        bias._lexray_lr = lora.output_bias_lr
    return peft_model


def save_merged(state_dict: dict[str, torch.Tensor], model_cfg: ModelConfig, init_dir: str | None,
                lora: LoraConfig, phase_seed: int, out_dir: Path, prefix: str = "encoder.") -> Path:
    """Rebuild the phase's encoder on CPU, load the trained full ``state_dict`` (keys ``<prefix>backbone...``),
    merge LoRA (``merge_and_unload``) and ``save_pretrained`` into ``out_dir``. Rank 0 only.

    Raises:
        RuntimeError: the state dict does not match the rebuilt model (missing/unexpected keys).
    """
    enc = build_encoder(model_cfg, init_dir)
    torch.manual_seed(phase_seed)
    peft_model = apply_lora(enc, lora)
    sd = {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)}
    missing, unexpected = enc.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"trained state does not match the encoder: missing {missing[:5]}, unexpected "
                           f"{unexpected[:5]}")
    if peft_model is not None:
        merged = peft_model.merge_and_unload()
        if merged is not enc.backbone:  # peft returns the same (unwrapped) object; keep the encoder consistent
            enc.backbone = merged
    out_dir = Path(out_dir)
    if out_dir.exists():
        import shutil

        shutil.rmtree(out_dir)
    enc.save_pretrained(out_dir)
    return out_dir


def build_dataset(cfg: LexrayConfig, phase: PhaseConfig, seed: int):
    """The phase's training examples (``example(i, epoch)``, ``len``).

    ``title_abstract_pairs``: (title, abstract) of ``cfg.data.dataset`` (or ``phase.data_path`` when set to a BEIR
    folder); ``pairs_file``: JSONL/Parquet pairs at ``phase.data_path``; ``hard_negatives``: groups at
    ``phase.data_path``, document ids resolved in ``phase.corpus`` or ``cfg.data.dataset``.

    Raises:
        ValueError: ``data_path`` missing where required; bad rows (file:line:field) under ``on_error="fail"``.
    """
    from lexray.data.hardneg import HardNegDataset
    from lexray.data.pairs import read_pairs_file, title_abstract_pairs

    corpus = phase.corpus or cfg.data.dataset
    if phase.data == "title_abstract_pairs":
        return title_abstract_pairs(phase.data_path or corpus, max_pairs=phase.max_train_examples,
                                    on_error=cfg.data.on_error)
    if phase.data_path is None:
        raise ValueError(f"phase '{phase.name}': data '{phase.data}' needs data_path")
    if phase.data == "pairs_file":
        return read_pairs_file(phase.data_path, max_pairs=phase.max_train_examples, on_error=cfg.data.on_error)
    return HardNegDataset(phase.data_path, corpus, num_negatives=phase.num_negatives,
                          need_teacher=phase.needs_teacher, seed=seed, on_error=cfg.data.on_error,
                          max_groups=phase.max_train_examples)


def total_steps(phase: PhaseConfig, steps_per_epoch: int) -> int:
    """Optimizer steps of a phase: ``max_steps`` if set, else ``ceil(epochs × steps_per_epoch)``."""
    if phase.max_steps is not None:
        return int(phase.max_steps)
    return max(1, int(math.ceil(phase.epochs * steps_per_epoch)))
