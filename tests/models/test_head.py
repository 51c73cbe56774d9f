from __future__ import annotations

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
