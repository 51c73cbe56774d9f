from __future__ import annotations

import logging

import pytest
import torch
from transformers import AutoConfig, AutoModelForMaskedLM

from lexray.models import mlm_head_norm, rescale_mlm_head


@pytest.mark.parametrize("tied", [True, False])
def test_rescale_divides_head_and_preserves_tying(tied):
    cfg = AutoConfig.for_model("bert", vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=16, tie_word_embeddings=tied)
    model = AutoModelForMaskedLM.from_config(cfg)
    w = model.get_output_embeddings().weight.detach().clone()
    before = mlm_head_norm(model)
    rescale_mlm_head(model, 4.0)
    after = mlm_head_norm(model)
    assert torch.allclose(model.get_output_embeddings().weight, w / 4)
    assert after["mean_row_norm"] == pytest.approx(before["mean_row_norm"] / 4, rel=1e-6)
    assert after["tied"] == float(tied)
    assert before["mean_row_norm"] == pytest.approx(float(w.norm(dim=1).mean()), rel=1e-6)
    with pytest.raises(ValueError):
        rescale_mlm_head(model, 0.0)


class _Reports(logging.Handler):
    """Collects transformers' log records (its LOAD REPORT is a WARNING of transformers.modeling_utils)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        logging.getLogger("transformers").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("transformers").removeHandler(self)


def _decoder_with_trained_bias(tok):
    from lexray.config import ModelConfig, RandomInitConfig
    from lexray.models import load_encoder
    from lexray.models.head import ensure_output_bias

    enc = load_encoder(ModelConfig(random_init=RandomInitConfig(
        architecture="llama", tokenizer=str(tok), hidden_size=32, intermediate_size=64, num_attention_heads=4)))
    with torch.no_grad():
        ensure_output_bias(enc.backbone).copy_(torch.randn(enc.vocab_size, generator=torch.Generator().manual_seed(3)))
    return enc


TEXTS = ["bidirectional decoders as sparse encoders", "the cells were counted", "x"]


def test_lexray_added_bias_loads_without_a_load_report_and_bit_identical(splade_tiny_dir, tmp_path):
    """A LACONIC / VT decoder whose bias-less lm_head got a bias (saved inside model.safetensors, as transformers
    saves any parameter): loading it prints no LOAD REPORT, and the reloaded encoder gives bit-identical vectors."""
    from lexray.models import SparseEncoder

    enc = _decoder_with_trained_bias(splade_tiny_dir)
    enc.save_pretrained(tmp_path / "m")
    with _Reports() as reports:
        again = SparseEncoder.from_pretrained(tmp_path / "m")
    assert not [m for m in reports.messages if "LOAD REPORT" in m], reports.messages
    assert torch.equal(again.backbone.lm_head.bias, enc.backbone.lm_head.bias)
    assert torch.equal(again.encode(TEXTS), enc.encode(TEXTS))


def test_a_load_report_with_other_rows_is_shown_whole(splade_tiny_dir, tmp_path):
    """Only the report whose one row is the expected bias is dropped: an unknown extra tensor in the checkpoint
    still gets transformers' whole report (the bias row included), and the bias is still restored."""
    from safetensors.torch import load_file, save_file

    from lexray.models import SparseEncoder

    enc = _decoder_with_trained_bias(splade_tiny_dir)
    enc.save_pretrained(tmp_path / "m")
    weights = load_file(str(tmp_path / "m" / "model.safetensors"))
    save_file({**weights, "model.stray.weight": torch.zeros(2)}, str(tmp_path / "m" / "model.safetensors"),
              metadata={"format": "pt"})
    with _Reports() as reports:
        again = SparseEncoder.from_pretrained(tmp_path / "m")
    shown = [m for m in reports.messages if "LOAD REPORT" in m]
    assert len(shown) == 1 and "model.stray.weight" in shown[0] and "lm_head.bias" in shown[0]
    assert torch.equal(again.backbone.lm_head.bias, enc.backbone.lm_head.bias)
