"""lexray.train.curriculum: LoRA with a trainable output bias (lora.train_output_bias), on a tiny random-init
Llama encoder over splade-tiny's vocabulary."""

from __future__ import annotations

import torch

from lexray.config import LoraConfig, load_config
from lexray.models import load_encoder
from lexray.models.head import output_bias
from lexray.paths import REPO_ROOT
from lexray.train.curriculum import apply_lora
from lexray.train.strategies import param_groups


def _tiny():
    cfg = load_config(REPO_ROOT / "jobs" / "configs" / "laconic-tiny.yaml", ["model.doc_max_length=16"])
    return load_encoder(cfg.model)


def test_lora_trains_the_output_bias_with_its_own_lr_and_the_merge_keeps_it():
    torch.manual_seed(0)
    enc = _tiny()
    peft_model = apply_lora(enc, LoraConfig(enabled=True, r=4, alpha=8, train_output_bias=True,
                                            output_bias_lr=0.5))
    bias = output_bias(enc.backbone)
    trainable = {n for n, p in enc.named_parameters() if p.requires_grad}
    assert bias.requires_grad and any("lora_" in n for n in trainable)
    assert all("lora_" in n or n.endswith("lm_head.bias") for n in trainable), trainable
    groups = param_groups(enc, 0.01)
    own = [g for g in groups if any(p is bias for p in g["params"])]
    assert len(own) == 1 and own[0]["lr"] == 0.5 and own[0]["weight_decay"] == 0.0 and len(own[0]["params"]) == 1
    opt = torch.optim.AdamW(groups, lr=1e-3)
    before = bias.detach().clone()
    w = enc(**enc.tokenize(["the cat sat", "a dog barked loudly"]))
    (w.sum()).backward()
    opt.step()
    moved = (bias.detach() - before).abs()
    assert moved.max() > 0.4   # Adam's first step moves each term with a gradient by ~lr = 0.5
    trained = bias.detach().clone()
    merged = peft_model.merge_and_unload()
    assert torch.equal(output_bias(merged), trained)


def test_without_the_flag_the_bias_stays_frozen():
    enc = _tiny()
    apply_lora(enc, LoraConfig(enabled=True, r=4, alpha=8))
    b = output_bias(enc.backbone)
    assert b is None or not b.requires_grad
