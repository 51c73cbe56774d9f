"""SparseEncoder over the real splade-tiny model (../shared/models/splade-tiny)."""

from __future__ import annotations

import pytest
import torch

from lexray.config import ModelConfig
from lexray.models import SparseEncoder, load_encoder

RHINO = "Rhinoviruses are the most frequent cause of colds."


@pytest.fixture(scope="module")
def splade(splade_tiny_dir):
    return SparseEncoder.from_pretrained(splade_tiny_dir)


def test_top_terms_of_real_model(splade):
    top = [tok for tok, _ in splade.decode(splade.encode([RHINO])[0], top_k=10)]
    assert "rhino" in top and "cold" in top


def test_batched_equals_one_by_one(splade, scifact_dir):
    import json

    with open(scifact_dir / "corpus.jsonl") as f:
        texts = [json.loads(next(f))["text"][:400] for _ in range(7)] + [RHINO, "x"]
    batched = splade.encode(texts, "document", batch_size=4)
    single = torch.cat([splade.encode([t], "document") for t in texts])
    assert batched.shape == (len(texts), 30522)
    assert torch.allclose(batched, single, atol=1e-5)


def test_chunked_forward_equals_full_logits_reference(splade):
    """The memory-bounded path (body once, head per chunk, pool before activation) equals the textbook
    computation: full (B, L, |V|) logits -> ReLU -> log1p -> mask -> max."""
    texts = [RHINO, "short text", "a somewhat longer document about wings and aerodynamics " * 3]
    batch = splade.tokenize(texts)
    splade.settings.chunk_size = 2
    try:
        with torch.no_grad():
            fast = splade(**batch)
            logits = splade.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            ref = torch.log1p(torch.relu(logits)).masked_fill(~batch["pool_mask"].unsqueeze(-1), 0).amax(1)
    finally:
        splade.settings.chunk_size = 16
    assert torch.allclose(fast, ref, atol=1e-6)


def test_gradients_flow_through_checkpointed_chunks(splade):
    batch = splade.tokenize([RHINO, "colds"])
    splade.zero_grad()
    reps = splade(**batch)
    reps.sum().backward()
    grad = splade.backbone.get_input_embeddings().weight.grad
    assert grad is not None and grad.abs().sum() > 0
    splade.zero_grad()


def test_query_and_document_lengths_and_prefixes(splade_tiny_dir):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, query_max_length=8, doc_max_length=32,
                                        query_prefix="query: ")
    long = "word " * 100
    q = enc.tokenize([long], "query")
    d = enc.tokenize([long], "document")
    assert q["input_ids"].shape[1] == 8 and d["input_ids"].shape[1] == 32
    assert enc.tokenizer.convert_ids_to_tokens(int(q["input_ids"][0, 1])) == "query"


def test_special_token_policy_excludes_cls_and_sep(splade_tiny_dir):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, special_tokens="exclude")
    batch = enc.tokenize([RHINO])
    ids, pool = batch["input_ids"][0], batch["pool_mask"][0]
    assert not pool[ids == enc.tokenizer.cls_token_id].any()
    assert not pool[ids == enc.tokenizer.sep_token_id].any()
    assert pool.sum() == batch["attention_mask"].sum() - 2
    inc = SparseEncoder.from_pretrained(splade_tiny_dir)
    assert inc.settings.special_tokens == "include"
    with torch.no_grad():
        logits = enc.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[0]
    ref = torch.log1p(torch.relu(logits[1:-1])).amax(0)  # every position but [CLS] and [SEP]
    assert torch.allclose(enc.encode([RHINO])[0], ref, atol=1e-6)


def test_inference_free_queries_are_bags_of_tokens_with_idf(splade_tiny_dir, tmp_path):
    import json

    tok_ids = None
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, inference_free_queries=True)
    rep = enc.encode(["cold cold virus"], "query")[0]
    tok_ids = enc.tokenizer("cold cold virus", add_special_tokens=False)["input_ids"]
    assert set(torch.nonzero(rep).flatten().tolist()) == set(tok_ids)
    assert torch.all(rep[tok_ids] == 1.0)
    idf = {str(tok_ids[0]): 2.5}
    (tmp_path / "idf.json").write_text(json.dumps(idf))
    cfg = ModelConfig(name_or_path=str(splade_tiny_dir), inference_free_queries=True,
                      query_idf_path=str(tmp_path / "idf.json"))
    rep2 = load_encoder(cfg).encode(["cold cold virus"], "query")[0]
    assert rep2[tok_ids[0]] == pytest.approx(2.5) and rep2[tok_ids[-1]] == 1.0
    # documents still go through the model
    assert (enc.encode(["cold"], "document")[0] > 0).sum() > 5


def test_save_and_load_keeps_tokenization_contract(splade_tiny_dir, tmp_path):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, query_max_length=12, doc_prefix="passage: ",
                                        special_tokens="exclude")
    enc.save_pretrained(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "lexray_encoder.json").is_file()
    assert list((tmp_path / "ckpt").glob("*.safetensors"))
    again = SparseEncoder.from_pretrained(tmp_path / "ckpt")
    assert again.settings == enc.settings
    assert torch.allclose(again.encode([RHINO]), enc.encode([RHINO]), atol=1e-6)


def test_sparse_form_and_top_k(splade):
    ids, ws = splade.encode_sparse([RHINO, "cold"], "document", top_k=5)
    assert len(ids) == 2 and all(len(i) <= 5 for i in ids)
    assert ids[0].dtype.name == "int32" and ws[0].dtype.name == "float32"
    dense = splade.encode([RHINO])[0]
    assert set(ids[0].tolist()) == set(torch.topk(dense, 5).indices.tolist())


def test_mlm_head_rescale_divides_scores(splade_tiny_dir):
    from lexray.models import mlm_head_norm

    base = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir)))
    scaled = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir), mlm_head_rescale=4.0))
    assert mlm_head_norm(scaled.backbone)["mean_row_norm"] == pytest.approx(
        mlm_head_norm(base.backbone)["mean_row_norm"] / 4, rel=1e-5)
    assert mlm_head_norm(scaled.backbone)["tied"] == 1.0


def test_output_vocab_scores_only_the_collection_terms_and_equals_the_full_head_there(splade_tiny_dir, scifact_dir):
    """model.output_vocab: the head scores only the token ids of the corpus; on those ids the weights equal the
    full head's, every other weight is 0; the ids survive save_pretrained / from_pretrained."""
    cfg = ModelConfig(name_or_path=str(splade_tiny_dir), doc_max_length=32, output_vocab=str(scifact_dir))
    restricted = load_encoder(cfg)
    full = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir), doc_max_length=32))
    ids = restricted.settings.output_ids
    assert ids == sorted(set(ids)) and 1_000 < len(ids) < 30_522
    # every pooled token of a corpus document is in the vocabulary
    from lexray.data.beir import iter_corpus

    doc = next(iter(iter_corpus(scifact_dir))).full_text
    t = restricted.tokenize([doc], "document")
    assert set(t["input_ids"][t["pool_mask"].bool()].tolist()) <= set(ids)
    texts = [doc, RHINO, "Coffee intake lowers the risk of type 2 diabetes."]
    with torch.no_grad():
        a, b = restricted.encode(texts, "document"), full.encode(texts, "document")
    mask = torch.zeros(30_522, dtype=torch.bool)
    mask[ids] = True
    assert torch.allclose(a[:, mask], b[:, mask], atol=1e-5)
    assert (a[:, ~mask] == 0).all() and (b[:, ~mask] > 0).any()   # the full head does use terms outside it


def test_output_vocab_gradient_reaches_the_full_bias_and_hidden_states(splade_tiny_dir, tmp_path):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=16)
    enc.settings.output_ids = [1996, 2003, 4937, 8013]
    enc.train()
    bias = enc.backbone.get_output_embeddings().bias
    w = enc(**{k: v for k, v in enc.tokenize(["the cat is here", RHINO]).items()})
    w.sum().backward()
    g = bias.grad
    assert g is not None and (g[[1996, 2003, 4937, 8013]] != 0).any()
    body = enc.backbone.bert.encoder.layer[0].attention.self.query.weight.grad   # through the hidden states
    assert body is not None and body.abs().sum() > 0
    others = torch.ones_like(g, dtype=torch.bool)
    others[[1996, 2003, 4937, 8013]] = False
    assert (g[others] == 0).all()
    enc.save_pretrained(tmp_path / "m")
    assert SparseEncoder.from_pretrained(tmp_path / "m").settings.output_ids == [1996, 2003, 4937, 8013]


def test_unverified_head_runs_body_once_then_the_head_per_chunk(splade, monkeypatch):
    """Without a fused layout the body runs once and the head per chunk (_head_pool), not the full (B, L, |V|)
    logits of the whole backbone; a restricted output vocabulary is refused there."""
    import lexray.models.encoder as encoder_mod

    calls = []
    real = encoder_mod._head_pool
    monkeypatch.setattr(encoder_mod, "vocab_projection", lambda *a: None)
    monkeypatch.setattr(encoder_mod, "_head_pool", lambda *a: calls.append(1) or real(*a))
    batch = splade.tokenize([RHINO, "short text", "colds and wings"])
    splade.settings.chunk_size = 2
    try:
        with torch.no_grad():
            out = splade(**batch)
        assert len(calls) == 2 and out.shape == (3, 30522)
        splade.settings.output_ids = [1996, 2003]
        with pytest.raises(NotImplementedError, match="output_ids"):
            splade(**batch)
    finally:
        splade.settings.chunk_size = 16
        splade.settings.output_ids = None


@pytest.mark.parametrize("restricted", [False, True])
def test_unfused_head_equals_fused_in_weights_and_gradients(splade_tiny_dir, restricted):
    """head_impl "unfused" (one matmul per chunk, the accelerator default) and "fused" (the CPU default) give the
    same weights and the same gradients, with and without a restricted output vocabulary; "auto" is fused on
    CPU."""
    texts = [RHINO, "short text", "a somewhat longer document about wings and aerodynamics " * 3]
    out = {}
    for impl in ("fused", "unfused"):
        enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=32, head_impl=impl, chunk_size=2)
        if restricted:
            enc.settings.output_ids = sorted({1996, 2003, 4937, 8013, 25269, 3147})
        enc.train()
        torch.manual_seed(0)  # the same dropout masks in the body
        w = enc(**enc.tokenize(texts))
        (w * torch.linspace(0.5, 2.0, w.shape[1])).sum().backward()
        head = enc.backbone.get_output_embeddings()
        out[impl] = (w.detach(), head.weight.grad.clone(), head.bias.grad.clone(),
                     enc.backbone.bert.encoder.layer[0].attention.self.query.weight.grad.clone())
    for a, b in zip(out["fused"], out["unfused"], strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert out["fused"][0].dtype == out["unfused"][0].dtype == torch.float32
    assert SparseEncoder.from_pretrained(splade_tiny_dir).settings.head_impl == "auto"


def test_collection_vocabulary_skips_and_counts_empty_documents(splade_tiny_dir, cranfield_dir, caplog):
    """Cranfield has two documents with empty title and text: the output vocabulary of the collection is the
    tokens of the others (an empty document has none), with the two counted in the log, not an error — the
    encode applies data.on_error to them (the eval.transfer row of the SmolLM2 default failed here)."""
    import logging

    from lexray.models import SparseEncoder
    from lexray.models.encoder import collection_output_ids

    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=64)
    with caplog.at_level(logging.INFO, logger="lexray.models.encoder"):
        ids = collection_output_ids(enc, str(cranfield_dir))
    assert 1000 < len(ids) < enc.vocab_size and ids == sorted(set(ids))
    assert "kept 1398" in caplog.text and "skipped 2" in caplog.text


def test_tokenless_texts_get_zero_vectors_alone_or_beside_others(bpe_tokenizer_dir):
    """A decoder whose tokenizer adds no special token (SmolLM2's, the BPE here) turns "" into a length-0 input,
    which the model's attention cannot take ("cannot reshape tensor of 0 elements", seen through `lexray search
    --query ""` and `Index.search("")`). A batch of such texts alone is not run; beside longer texts (padded, fully
    masked) the empty one is zero as well, and the other texts are what they are alone."""
    from lexray.config import RandomInitConfig

    enc = load_encoder(ModelConfig(random_init=RandomInitConfig(
        architecture="llama", tokenizer=str(bpe_tokenizer_dir), hidden_size=32, intermediate_size=64,
        num_attention_heads=4)))
    assert enc.tokenize([""], "query")["input_ids"].shape[1] == 0  # the case itself: no token at all
    alone = enc.encode(["", ""], "query")
    assert alone.shape == (2, enc.vocab_size) and not alone.any()
    mixed = enc.encode(["", "bone fracture healing"], "query", batch_size=2)
    assert not mixed[0].any() and not torch.isnan(mixed).any()
    assert torch.allclose(mixed[1], enc.encode(["bone fracture healing"], "query")[0], atol=1e-5)
    ids, ws = enc.encode_sparse(["", "bone"], "query")
    assert len(ids[0]) == len(ws[0]) == 0 and len(ids[1]) > 0
