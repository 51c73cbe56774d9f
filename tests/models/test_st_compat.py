"""sentence-transformers reads lexray-saved models with the same vectors, refuses what it cannot represent, and
lexray reads ST SPLADE folders (plain and inference-free)."""

from __future__ import annotations

import json

import pytest
import torch

from lexray.config import ModelConfig, RandomInitConfig
from lexray.models import SparseEncoder, load_encoder

st = pytest.importorskip("sentence_transformers", reason="sentence-transformers is in the dev extra")


def _scifact(scifact_dir, n_docs=48, n_queries=48):
    with open(scifact_dir / "corpus.jsonl") as f:
        docs = []
        for line in f:
            r = json.loads(line)
            docs.append((r.get("title", "") + " " + r["text"]).strip())
            if len(docs) == n_docs:
                break
    with open(scifact_dir / "queries.jsonl") as f:
        queries = [json.loads(line)["text"] for _, line in zip(range(n_queries), f, strict=False)]
    return docs, queries


def _max_diff(a: torch.Tensor, b) -> float:
    b = torch.as_tensor(b.to_dense() if hasattr(b, "to_dense") else b).float()
    return float((a - b).abs().max())


def test_st_reproduces_lexray_vectors_with_truncation_and_prefixes(splade_tiny_dir, scifact_dir, tmp_path):
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, query_max_length=16, doc_max_length=48,
                                        query_prefix="query: ", doc_prefix="passage: ")
    out = enc.save_pretrained(tmp_path / "m")
    docs, queries = _scifact(scifact_dir)
    ref_d, ref_q = enc.encode(docs, "document"), enc.encode(queries, "query")
    # truncation really happens at these lengths, so the lengths must have reached ST
    assert max(len(enc.tokenizer(d)["input_ids"]) for d in docs) > 48
    assert max(len(enc.tokenizer("query: " + q)["input_ids"]) for q in queries) > 16

    model = st.SparseEncoder(str(out), device="cpu")
    got_d = model.encode_document(docs, convert_to_tensor=True, convert_to_sparse_tensor=False, batch_size=16)
    got_q = model.encode_query(queries, convert_to_tensor=True, convert_to_sparse_tensor=False, batch_size=16)
    assert _max_diff(ref_d, got_d) < 1e-5
    assert _max_diff(ref_q, got_q) < 1e-5
    assert (out / "README.md").read_text().count("sentence-transformers") >= 1


def test_st_reproduces_inference_free_queries(splade_tiny_dir, scifact_dir, tmp_path):
    idf = {2003: 0.5, 4962: 2.25, 1996: 0.0}
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, query_max_length=12, inference_free_queries=True,
                                        query_idf=idf, query_prefix="q ")
    out = enc.save_pretrained(tmp_path / "m")
    docs, queries = _scifact(scifact_dir, n_docs=8, n_queries=48)
    model = st.SparseEncoder(str(out), device="cpu")
    assert _max_diff(enc.encode(queries, "query"),
                     model.encode_query(queries, convert_to_tensor=True, convert_to_sparse_tensor=False)) < 1e-5
    assert _max_diff(enc.encode(docs, "document"),
                     model.encode_document(docs, convert_to_tensor=True, convert_to_sparse_tensor=False)) < 1e-5
    # and lexray reads the folder back through ST's files alone
    (out / "lexray_encoder.json").unlink()
    back = SparseEncoder.from_pretrained(out)
    assert back.settings.inference_free_queries and back.settings.query_max_length == 12
    assert _max_diff(enc.encode(queries, "query"), back.encode(queries, "query")) < 1e-6


def test_decoder_checkpoint_is_refused_by_st(bpe_tokenizer_dir, tmp_path):
    enc = load_encoder(ModelConfig(random_init=RandomInitConfig(tokenizer=str(bpe_tokenizer_dir))))
    assert enc.is_decoder
    out = enc.save_pretrained(tmp_path / "laconic")
    with pytest.raises(ValueError, match="NotSupportedBySentenceTransformers"):
        st.SparseEncoder(str(out), device="cpu")
    with pytest.raises(ValueError, match="decoder \\(LACONIC\\) checkpoint"):
        st.SparseEncoder(str(out), device="cpu", trust_remote_code=True)
    assert "refuse" in (out / "README.md").read_text()


def test_lexray_reads_st_saved_models(splade_tiny_dir, scifact_dir, tmp_path):
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sparse_encoder.modules import SparseStaticEmbedding, SpladePooling

    docs, queries = _scifact(scifact_dir, n_docs=8, n_queries=16)
    t = Transformer(str(splade_tiny_dir), transformer_task="fill-mask", query_length=20, document_length=40)
    plain = st.SparseEncoder(modules=[t, SpladePooling("max", "relu")], prompts={"query": "q: "})
    plain.save(str(tmp_path / "plain"))
    lex = SparseEncoder.from_pretrained(tmp_path / "plain")
    assert (lex.settings.query_max_length, lex.settings.doc_max_length, lex.settings.query_prefix) == (20, 40, "q: ")
    assert _max_diff(lex.encode(docs, "document"), plain.encode_document(
        docs, convert_to_tensor=True, convert_to_sparse_tensor=False)) < 1e-5

    weight = torch.rand(30522) + 0.5
    router = Router.for_query_document(
        query_modules=[SparseStaticEmbedding(tokenizer=t.tokenizer, weight=weight, frozen=True)],
        document_modules=[t, SpladePooling("max", "relu")])
    inf = st.SparseEncoder(modules=[router], similarity_fn_name="dot")
    inf.save(str(tmp_path / "if"))
    lex = SparseEncoder.from_pretrained(tmp_path / "if")
    assert lex.settings.inference_free_queries
    assert _max_diff(lex.encode(queries, "query"), inf.encode_query(
        queries, convert_to_tensor=True, convert_to_sparse_tensor=False)) < 1e-5
    assert _max_diff(lex.encode(docs, "document"), inf.encode_document(
        docs, convert_to_tensor=True, convert_to_sparse_tensor=False)) < 1e-5


def test_sum_pooling_st_folder_is_refused(splade_tiny_dir, tmp_path):
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from lexray.models.st_compat import STFormatError

    m = st.SparseEncoder(modules=[Transformer(str(splade_tiny_dir), transformer_task="fill-mask"),
                                  SpladePooling("sum", "relu")])
    m.save(str(tmp_path / "sum"))
    with pytest.raises(STFormatError, match="pooling_strategy='sum'"):
        SparseEncoder.from_pretrained(tmp_path / "sum")
