"""The APC cache (lexray.vocab.apc_cache): a second encoder built the same way loads the first one's bias."""

from __future__ import annotations

import torch

import lexray.vocab.apc as apc_mod
import lexray.vocab.apc_cache as apc_cache
from lexray.config import ApcConfig
from lexray.models import SparseEncoder
from lexray.vocab.apc import apply_apc, probe_texts


def _bias(enc):
    return enc.backbone.get_output_embeddings().bias.detach().clone()


def test_second_build_loads_the_bias_without_a_probe(splade_tiny_dir, scifact_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(apc_cache, "cache_dir", lambda: tmp_path)
    calls = []
    real = apc_mod.max_logits
    monkeypatch.setattr(apc_mod, "max_logits", lambda *a, **k: calls.append(1) or real(*a, **k))
    texts = probe_texts(str(scifact_dir), 8)
    cfg = ApcConfig(per_term=True, shift=1.0)

    fresh = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    info0 = apply_apc(fresh, cfg, texts, cache=False)
    a = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    info1 = apply_apc(a, cfg, texts)
    b = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    info2 = apply_apc(b, cfg, texts)
    assert len(calls) == 2                                   # cache=False and the first cached build; not the third
    assert torch.equal(_bias(a), _bias(fresh)) and torch.equal(_bias(b), _bias(a))
    assert info2["cached"] and "cached" not in info1 and info2["shift"] == info1["shift"] == info0["shift"]
    assert len(list((tmp_path / "apc").glob("*.pt"))) == 1

    # other probe texts or other settings are another entry, computed afresh
    c = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    apply_apc(c, cfg, texts[:4])
    d = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    apply_apc(d, ApcConfig(per_term=True, shift=2.0), texts)
    assert len(calls) == 4 and len(list((tmp_path / "apc").glob("*.pt"))) == 3
    assert torch.allclose(_bias(d), _bias(a) - 1.0, atol=1e-5)


def test_a_damaged_entry_is_computed_again(splade_tiny_dir, scifact_dir, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(apc_cache, "cache_dir", lambda: tmp_path)
    texts = probe_texts(str(scifact_dir), 4)
    cfg = ApcConfig(target_rate=0.3)
    a = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    apply_apc(a, cfg, texts)
    (entry,) = (tmp_path / "apc").glob("*.pt")
    entry.write_bytes(b"not a torch file")
    b = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    info = apply_apc(b, cfg, texts)
    assert "cached" not in info and torch.equal(_bias(b), _bias(a))
    assert "unreadable" in caplog.text
    c = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    assert apply_apc(c, cfg, texts)["cached"]                # the entry was replaced by a good one
