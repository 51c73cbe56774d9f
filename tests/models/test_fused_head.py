"""Fused vocabulary-blocked SPLADE head == unfused logits → splade_max_pool, values and gradients (≤ 1e-5),
for a BERT MLM head (the real splade-tiny) and a Llama LM head (tiny random init, tied embeddings,
|V| = 49,152 as SmolLM2)."""

from __future__ import annotations

import pytest
import torch

from lexray.models.fused_head import fused_splade_max_pool, vocab_projection
from lexray.models.pooling import splade_max_pool


def _tiny_llama(vocab=49_152, hidden=32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                      max_position_embeddings=64)
    cfg.is_causal = False
    model = LlamaForCausalLM(cfg).double()
    with torch.no_grad():  # random-init logits are tiny and mostly ≤ 0; spread them so ReLU keeps many
        model.model.norm.weight.mul_(40.0)
    return model


def _splade(splade_tiny_dir):
    from transformers import AutoModelForMaskedLM

    return AutoModelForMaskedLM.from_pretrained(splade_tiny_dir).double()


def _batch(vocab, B=3, L=11, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, L), generator=g)
    att = torch.ones(B, L, dtype=torch.long)
    att[1, 7:] = 0
    att[2, 3:] = 0
    pool = att.bool().clone()
    pool[0, 0] = False  # a special-token position excluded from pooling
    return ids, att, pool


def _check(model, kind, body, head, block):
    ids, att, pool = _batch(model.config.vocab_size)
    proj = vocab_projection(model, kind)
    assert proj is not None
    pool_empty = pool.clone()
    pool_empty[2] = False  # a row with no allowed position → zero vector, zero gradient
    results = []
    for fused in (False, True):
        model.zero_grad()
        hidden = body(input_ids=ids, attention_mask=att).last_hidden_state
        w = fused_splade_max_pool(proj, hidden, pool_empty, block=block) if fused else \
            splade_max_pool(head(hidden), pool_empty)
        (w * torch.linspace(0.5, 1.5, w.shape[1], dtype=w.dtype)).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((w.detach(), grads))
    (w0, g0), (w1, g1) = results
    assert w1.dtype == torch.float32 and w1.shape == (3, model.config.vocab_size)
    assert (w0 > 0).sum() > 20  # the check is not vacuous
    assert torch.all(w1[2] == 0)
    torch.testing.assert_close(w1, w0, atol=1e-5, rtol=0)
    assert g0.keys() == g1.keys() and len(g0) > 5
    for n in g0:
        torch.testing.assert_close(g1[n], g0[n], atol=1e-5, rtol=1e-5, msg=n)
    # inference (no arg-max bookkeeping) gives bit-identical weights to the differentiable forward
    with torch.inference_mode():
        hidden = body(input_ids=ids, attention_mask=att).last_hidden_state
        assert torch.equal(fused_splade_max_pool(proj, hidden, pool_empty, block=block), w1)


def test_llama_lm_head_matches_unfused(monkeypatch):
    model = _tiny_llama()
    _check(model, "decoder", model.model, model.lm_head, block=5000)  # last block partial


def test_bert_mlm_head_matches_unfused(splade_tiny_dir):
    model = _splade(splade_tiny_dir)
    _check(model, "mlm", model.bert, model.cls, block=2048)


def test_unverified_head_and_bad_shapes(splade_tiny_dir):
    from transformers import AutoModelForMaskedLM

    m = AutoModelForMaskedLM.from_pretrained(splade_tiny_dir)
    m.config.model_type = "roberta"
    assert vocab_projection(m, "mlm") is None
    proj = vocab_projection(_splade(splade_tiny_dir), "mlm")
    with pytest.raises(ValueError, match="pool_mask"):
        fused_splade_max_pool(proj, torch.zeros(2, 4, 128), torch.ones(2, 5, dtype=torch.bool))


@pytest.mark.parametrize("block", [7, 2048])
def test_inference_and_training_forwards_give_bit_identical_weights(block):
    """The inference path (no arg-max) and the autograd forward run the same tiles in the same order: an encoder
    scores a document exactly as it was scored in training, whatever the block size or rows without positions."""
    from lexray.models.fused_head import _FusedSpladeMax, _max_tiles, _positions

    torch.manual_seed(0)
    hidden = torch.randn(3, 11, 16, requires_grad=True)
    weight = (torch.randn(50, 16) * 0.1).requires_grad_()
    mask = torch.rand(3, 11) > 0.3
    mask[1] = False  # a sequence without any pooled position
    pos = _positions(mask)
    z_infer = _max_tiles(hidden.detach(), weight.detach(), pos, block)
    z_train = _FusedSpladeMax.apply(hidden, weight, pos, block)
    assert torch.equal(z_infer, z_train.detach())
    assert torch.isinf(z_infer[1]).all() and torch.isfinite(z_infer[[0, 2]]).all()
