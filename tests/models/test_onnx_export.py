"""ONNX export (``lexray export-onnx``): onnxruntime's weights equal the PyTorch encoder's on real SciFact
documents, for the MLM SPLADE encoder (splade-tiny) and a bidirectional decoder (tiny random-init Llama with a
restricted output vocabulary, an output bias and special-token exclusion); the export stays bidirectional; and
unsupported models are refused before any tracing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lexray.config import ModelConfig, RandomInitConfig
from lexray.data.beir import iter_corpus
from lexray.models import UnsupportedModelError, load_encoder
from lexray.models.head import ensure_output_bias
from lexray.models.onnx_export import SPEC_FILE, OnnxSparseEncoder, export_onnx

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def docs(scifact_dir):
    return [d.full_text for d in iter_corpus(scifact_dir, max_docs=16)]


@pytest.fixture(scope="module")
def mlm_export(tmp_path_factory, splade_tiny_dir, scifact_dir):
    """splade-tiny exported through the command, checked on 4 SciFact documents."""
    from lexray.commands.export_onnx import main

    out = tmp_path_factory.mktemp("onnx") / "splade-tiny"
    spec = main(["--model", str(splade_tiny_dir), "--out", str(out), "--probe-dataset", str(scifact_dir),
                 "--probe-docs", "4"])
    return out, spec


def _tiny_decoder(tok):
    enc = load_encoder(ModelConfig(random_init=RandomInitConfig(
        tokenizer=str(tok), hidden_size=32, intermediate_size=64, num_attention_heads=4, embedding_anisotropy=0.5)))
    with torch.no_grad():
        ensure_output_bias(enc.backbone).copy_(torch.linspace(-0.5, 0.2, enc.vocab_size))
    return enc


@pytest.fixture(scope="module")
def decoder_export(tmp_path_factory, splade_tiny_dir, docs):
    enc = _tiny_decoder(splade_tiny_dir)
    t = enc.tokenize(docs, "document")
    enc.settings.output_ids = sorted(set(t["input_ids"][t["pool_mask"]].tolist()) | set(range(1000, 3000)))
    out = tmp_path_factory.mktemp("onnx") / "tiny-llama"
    spec = export_onnx(enc, out, docs[:3])
    return enc, out, spec


def test_mlm_export_matches_pytorch_on_scifact_documents(mlm_export, splade_tiny_dir, docs):
    out, spec = mlm_export
    assert json.loads((out / SPEC_FILE).read_text()) == spec
    assert spec["kind"] == "mlm" and spec["vocab_size"] == 30522 and spec["verification"]["max_abs_diff"] <= 1e-4
    enc = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir)))
    ref = enc.encode(docs, "document", batch_size=8).numpy()
    got = OnnxSparseEncoder(out, threads=1).encode(docs, "document", batch_size=5)  # other batch shapes
    assert got.shape == ref.shape and (ref > 0).sum() > 0
    assert float(np.abs(got - ref).max()) <= 1e-4
    q = ["what causes cancer", "vitamin D deficiency and bone density in older adults"]
    assert float(np.abs(OnnxSparseEncoder(out).encode(q, "query") - enc.encode(q, "query").numpy()).max()) <= 1e-4


def test_decoder_export_matches_pytorch_and_stays_bidirectional(decoder_export, docs):
    enc, out, spec = decoder_export
    assert spec["kind"] == "decoder" and spec["attention"] == "bidirectional"
    assert spec["output_terms"] == len(enc.settings.output_ids) < spec["vocab_size"]
    ref = enc.encode(docs, "document", batch_size=8).numpy()
    got = OnnxSparseEncoder(out).encode(docs, "document", batch_size=6)
    assert float(np.abs(got - ref).max()) <= 1e-4
    outside = np.setdiff1d(np.arange(enc.vocab_size), enc.settings.output_ids)
    assert (got[:, outside] == 0).all() and (got > 0).sum(1).min() > 0
    # special tokens ([CLS], [SEP]) are excluded from pooling in the graph too: a doc of only them weighs nothing
    assert (OnnxSparseEncoder(out).encode([""], "document") == 0).all()
    # the same backbone run causally gives clearly different weights: the export did not trace a causal mask
    enc.backbone.config.is_causal = enc.backbone.model.config.is_causal = True
    try:
        causal = enc.encode(docs, "document", batch_size=8).numpy()
    finally:
        enc.backbone.config.is_causal = enc.backbone.model.config.is_causal = False
    assert float(np.abs(got - causal).max()) > 1e-2


def test_unsupported_models_and_occupied_folders_are_refused(decoder_export, splade_tiny_dir, tmp_path):
    enc, out, _ = decoder_export
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_onnx(enc, out)  # an earlier export, no overwrite: refused before tracing
    (tmp_path / "x.txt").write_text("a user's file")
    with pytest.raises(FileExistsError, match="not a lexray ONNX export"):
        export_onnx(enc, tmp_path, overwrite=True)
    enc.backbone.config.is_causal = True
    try:
        with pytest.raises(UnsupportedModelError, match="causal"):
            export_onnx(enc, tmp_path / "causal")
    finally:
        enc.backbone.config.is_causal = False
    mlm = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir), inference_free_queries=True))
    with pytest.raises(UnsupportedModelError, match="inference-free"):
        export_onnx(mlm, tmp_path / "if")
    bf16 = load_encoder(ModelConfig(name_or_path=str(splade_tiny_dir), dtype="bfloat16"))
    with pytest.raises(UnsupportedModelError, match="float32"):
        export_onnx(bf16, tmp_path / "bf16")
    assert not any((tmp_path / n).exists() for n in ("causal", "if", "bf16"))
