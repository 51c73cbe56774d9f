"""The dense objective (LexSemBridge, arXiv:2508.17858) on the one phase runner: cosine InfoNCE, the bridge trains
with the backbone, the phase-end folder reloads with its bridge; the cosine option of the one InfoNCE."""

from __future__ import annotations

import pytest
import torch

from lexray.config import LexrayConfig, ModelConfig
from lexray.losses import infonce_loss
from lexray.models.dense import load_dense_encoder
from lexray.train.loop import train_local


def test_cosine_infonce_is_dot_infonce_of_normalised_vectors():
    torch.manual_seed(0)
    q, d = torch.randn(3, 8) * 5, torch.randn(6, 8) * 3
    got = infonce_loss(q, d, 1, 0.02, similarity="cosine")
    ref = infonce_loss(torch.nn.functional.normalize(q, dim=-1), torch.nn.functional.normalize(d, dim=-1), 1, 0.02)
    torch.testing.assert_close(got, ref)
    with pytest.raises(ValueError, match="similarity"):
        infonce_loss(q, d, 1, similarity="l2")


@pytest.mark.timeout(300)
def test_dense_phase_trains_backbone_and_bridge_and_saves_both(tmp_path):
    cfg = LexrayConfig.model_validate({
        "name": "dense-test",
        "model": {"random_init": {"architecture": "bert", "tokenizer": "shared:models/splade-tiny", "hidden_size": 32,
                                  "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2},
                  "dense": {"bridge": "llr"}},
        "data": {"dataset": "shared:datasets/scifact"},
        "train": {"num_workers": 1, "log_every": 1, "checkpoint_every": 2, "tensorboard": False,
                  "phases": [{"name": "pairs", "data": "title_abstract_pairs", "max_steps": 3, "global_batch_size": 4,
                              "num_negatives": 0, "lr": 1e-3, "temperature": 0.02, "query_max_length": 12,
                              "doc_max_length": 24, "max_train_examples": 8}]}})
    start = load_dense_encoder(cfg.model)
    state, rep = train_local(cfg, tmp_path)
    assert [int(m["step"]) for m in rep.history] == [1, 2, 3]
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in rep.history)
    trained = load_dense_encoder(ModelConfig(name_or_path=state.model_dir, dense={}))
    assert trained.settings.bridge == "llr"
    assert not torch.equal(trained.bridge.align.weight, start.bridge.align.weight)  # W trained
    assert not torch.equal(trained.bridge.llr.weight, start.bridge.llr.weight)  # U trained (through W)
    emb = "embeddings.word_embeddings.weight"
    assert not torch.equal(trained.body.state_dict()[emb], start.body.state_dict()[emb])  # backbone trained
