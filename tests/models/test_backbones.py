"""Decoder LLMs made bidirectional (LACONIC §2.1) on tiny random-init models, and refusal of unverified types."""

from __future__ import annotations

import pytest
import torch

from lexray.config import ModelConfig, RandomInitConfig
from lexray.models import UnsupportedModelError, load_encoder, make_bidirectional


def _tiny(arch, tok):
    return load_encoder(ModelConfig(random_init=RandomInitConfig(
        architecture=arch, tokenizer=str(tok), hidden_size=32, intermediate_size=64, num_attention_heads=4)))


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "mistral"])
def test_last_token_changes_first_position_and_padding_changes_nothing(arch, splade_tiny_dir):
    enc = _tiny(arch, splade_tiny_dir)
    assert enc.is_decoder and enc.settings.special_tokens == "exclude"
    body = enc.backbone.model
    batch = enc.tokenize(["the quick brown fox jumps over the lazy dog", "short"])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    last = int(mask[0].sum()) - 1
    changed = ids.clone()
    changed[0, last - 1] = 2000  # a content token near the end
    padded = ids.clone()
    padded[1, mask[1] == 0] = 5000  # rewrite the pad tokens of row 1
    with torch.no_grad():
        h = body(input_ids=ids, attention_mask=mask).last_hidden_state
        h_changed = body(input_ids=changed, attention_mask=mask).last_hidden_state
        h_padded = body(input_ids=padded, attention_mask=mask).last_hidden_state
        reps = enc(**batch)
        reps_padded = enc(input_ids=padded, attention_mask=mask, pool_mask=batch["pool_mask"])
    assert (h[0, 0] - h_changed[0, 0]).abs().max() > 1e-4, "first position must see the last tokens"
    n1 = int(mask[1].sum())
    assert torch.allclose(h[1, :n1], h_padded[1, :n1], atol=1e-6), "pad tokens must not leak"
    assert torch.allclose(reps[1], reps_padded[1], atol=1e-6)


def test_causal_reference_differs(splade_tiny_dir):
    """Sanity check of the test above: with the causal mask back, the first position ignores the future."""
    enc = _tiny("llama", splade_tiny_dir)
    body = enc.backbone.model
    body.config.is_causal = True
    enc.backbone.config.is_causal = True
    for m in body.modules():
        if hasattr(m, "is_causal") and isinstance(m.is_causal, bool):
            m.is_causal = True
    batch = enc.tokenize(["the quick brown fox jumps"])
    changed = batch["input_ids"].clone()
    changed[0, -2] = 2000
    with torch.no_grad():
        a = body(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        b = body(input_ids=changed, attention_mask=batch["attention_mask"]).last_hidden_state
    assert torch.allclose(a[0, 0], b[0, 0], atol=1e-6)


def test_unverified_decoder_is_refused():
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("gpt2", vocab_size=100, n_embd=16, n_layer=1, n_head=2)
    model = AutoModelForCausalLM.from_config(cfg)
    with pytest.raises(UnsupportedModelError, match="gpt2"):
        make_bidirectional(model)


def test_unverified_decoder_checkpoint_is_refused_on_load(tmp_path, splade_tiny_dir):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cfg = AutoConfig.for_model("gpt2", vocab_size=30522, n_embd=16, n_layer=1, n_head=2)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "gpt2")
    AutoTokenizer.from_pretrained(splade_tiny_dir).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(UnsupportedModelError, match="gpt2"):
        load_encoder(ModelConfig(name_or_path=str(tmp_path / "gpt2")))


def test_decoder_save_load_roundtrip_stays_bidirectional(splade_tiny_dir, tmp_path):
    enc = _tiny("llama", splade_tiny_dir)
    enc.save_pretrained(tmp_path / "dec")
    again = load_encoder(ModelConfig(name_or_path=str(tmp_path / "dec")))
    assert again.is_decoder and again.settings.special_tokens == "exclude"
    texts = ["sparse retrieval with decoders", "x"]
    assert torch.allclose(enc.encode(texts), again.encode(texts), atol=1e-5)
    assert len(again.transformer_layers()) == 2


def test_embedding_anisotropy_lets_a_random_model_go_sparse(splade_tiny_dir):
    """SPLADE needs one hidden state that puts most vocabulary logits below zero (docs/bugs-and-fixes.md). With
    isotropic random embeddings the best single direction (minus the rows' mean) leaves about half of them
    positive; with ``embedding_anisotropy`` almost none — and the shared direction also reaches the tied head."""
    def negative_fraction(anisotropy: float) -> float:
        rcfg = RandomInitConfig(tokenizer=str(splade_tiny_dir), hidden_size=64, intermediate_size=128,
                                num_hidden_layers=1, num_attention_heads=4, embedding_anisotropy=anisotropy)
        enc = load_encoder(ModelConfig(random_init=rcfg))
        E = enc.backbone.get_output_embeddings().weight.detach()
        assert enc.backbone.get_input_embeddings().weight.data_ptr() == E.data_ptr()  # still tied
        h = -E.mean(0)
        return float((E @ h < 0).float().mean())

    assert negative_fraction(0.0) < 0.75
    assert negative_fraction(0.5) > 0.99


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_checkpoint_without_lm_head_is_refused(arch, splade_tiny_dir, tmp_path):
    """A bare BertModel / LlamaModel folder would get a randomly initialised head, different on every load
    (each encoder actor would run another model under the same fingerprint): refused with a clear error."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from lexray.models import SparseEncoder

    tok = AutoTokenizer.from_pretrained(splade_tiny_dir)
    extra = {"num_key_value_heads": 4} if arch == "llama" else {}
    config = AutoConfig.for_model(arch, vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=1, num_attention_heads=4, **extra)
    bare = AutoModel.from_config(config)
    bare.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).architectures == [type(bare).__name__]
    with pytest.raises(UnsupportedModelError, match="has no LM/MLM head"):
        SparseEncoder.from_pretrained(tmp_path)
    # the same folder claiming a head it does not have: the missing weights are named
    import json

    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["architectures"] = ["BertForMaskedLM" if arch == "bert" else "LlamaForCausalLM"]
    cfg["tie_word_embeddings"] = False
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="lacks weights"):
        SparseEncoder.from_pretrained(tmp_path)
