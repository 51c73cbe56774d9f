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


def test_per_term_centring_removes_each_terms_mean_then_shifts():
    """apc.per_term: b_v <- b_v - mean_d M_dv - c, so after it every term's mean max logit over the probe is -c."""
    from lexray.vocab.apc import centre_terms

    m = torch.tensor([[1.0, 10.0, float("-inf")], [3.0, 14.0, float("-inf")]])
    centred, mu = centre_terms(m)
    assert torch.allclose(mu, torch.tensor([2.0, 12.0, 0.0]))
    assert torch.allclose(centred[:, :2], torch.tensor([[-1.0, -2.0], [1.0, 2.0]]))


def test_per_term_apc_on_a_real_model(splade_tiny_dir, scifact_dir):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    texts = probe_texts(str(scifact_dir), 16)
    from lexray.vocab.apc import max_logits

    m0 = max_logits(enc, texts)
    info = apply_apc(enc, ApcConfig(per_term=True, shift=0.5), texts)
    m1 = max_logits(enc, texts)
    assert info["per_term"] and info["shift"] == 0.5
    assert torch.allclose(m1.mean(0), torch.full((m1.shape[1],), -0.5), atol=1e-3)   # every term centred, then -c
    # the order of documents within a term is unchanged (a per-term constant)
    assert torch.equal(m0.argsort(0)[:, :50], m1.argsort(0)[:, :50])


def test_a_saved_calibrated_model_refuses_a_second_apc_and_rescale(splade_tiny_dir, tmp_path):
    """APC and the MLM-head rescale are recorded in lexray_encoder.json when applied; loading that folder with
    model.apc (or mlm_head_rescale) again — `lexray evaluate --config <training recipe> --model <trained folder>` —
    would shift the bias twice without a word, so it is refused naming the key; without them the folder loads
    with exactly the saved bias."""
    import json

    import pytest

    from lexray.config import ModelConfig
    from lexray.models import load_encoder
    from lexray.recipes import ConfigError

    cfg = ModelConfig(name_or_path=str(splade_tiny_dir), apc=ApcConfig(shift=2.0), mlm_head_rescale=2.0)
    enc = load_encoder(cfg)
    assert enc.settings.calibration == {"mlm_head_rescale": 2.0, "apc": {"shift": 2.0, "per_term": False}}
    enc.save_pretrained(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "lexray_encoder.json").read_text())
    assert saved["calibration"]["apc"] == {"shift": 2.0, "per_term": False}
    again = cfg.model_copy(update={"name_or_path": str(tmp_path / "m"), "mlm_head_rescale": 1.0})
    with pytest.raises(ConfigError, match=r"model\.apc: .* already has APC in its weights"):
        load_encoder(again)
    with pytest.raises(ConfigError, match=r"model\.mlm_head_rescale: .* already rescaled"):
        load_encoder(again.model_copy(update={"apc": ApcConfig(), "mlm_head_rescale": 2.0}))
    plain = load_encoder(again.model_copy(update={"apc": ApcConfig()}))
    b_saved = enc.backbone.get_output_embeddings().bias.detach()
    assert torch.equal(plain.backbone.get_output_embeddings().bias.detach(), b_saved)
    assert plain.settings.calibration == enc.settings.calibration   # carried on through the next save
