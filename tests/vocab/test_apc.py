"""Activation Potential Calibration (VT §4.2.3, Table 5) on splade-tiny and SciFact documents."""

from __future__ import annotations

import torch

from lexray.config import ApcConfig
from lexray.models import SparseEncoder
from lexray.vocab.apc import activation_rate, apply_apc, probe_texts, solve_shift


def test_target_rate_reached_within_two_points(splade_tiny_dir, scifact_dir):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    texts = probe_texts(str(scifact_dir), 8)
    bias0 = enc.backbone.get_output_embeddings().bias.detach().clone()
    info = apply_apc(enc, ApcConfig(target_rate=0.3), texts)
    bias1 = enc.backbone.get_output_embeddings().bias.detach()
    assert torch.allclose(bias0 - bias1, torch.full_like(bias0, info["shift"]), atol=1e-5)
    # measured afresh through the SPLADE encoder itself: fraction of |V| with a positive weight
    reps = enc.encode(texts, "document", batch_size=8)
    assert abs(float((reps > 0).float().mean()) - 0.3) <= 0.02
    assert abs(info["rate_after"] - 0.3) <= 0.02
    assert info["rate_before"] < 0.05 and info["shift"] < 0   # splade-tiny is sparse: APC lowers c below 0


def test_bisection_and_fixed_shift():
    m = torch.linspace(-5, 5, 1001).repeat(3, 1)
    c, r = solve_shift(m, 0.25)
    assert abs(r - 0.25) <= 1e-3 and abs(c - 2.5) < 0.02
    assert abs(activation_rate(m, 0.0) - 0.5) < 0.002
