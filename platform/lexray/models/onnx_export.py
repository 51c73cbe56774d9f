"""ONNX export of a sparse encoder, with the SPLADE pooling inside the graph (``lexray export-onnx``).

What the graph computes (LACONIC arXiv:2601.01684 eq. (1), SPLADE-max of SPLADE v2 arXiv:2109.10086), from
``input_ids`` (B, L) int64 and ``attention_mask`` (B, L) int64 to ``weights`` (B, |V|) float32:

    logits = head(body(input_ids, attention_mask))          (B, L, |V'|)   MLM transform + decoder, or lm_head
    pool   = attention_mask ∧ ¬is_special[input_ids]        (B, L)         special-token exclusion, if the encoder
                                                                           excludes them (decoders by default)
    w      = log1p(ReLU(max_{i: pool} logits + bias))        (B, |V'|)     :func:`lexray.models.pooling.splade_max_pool`
    weights = scatter of w into |V| columns                  (B, |V|)      output vocabulary restriction
                                                                           (``settings.output_ids``), else w

So everything :meth:`SparseEncoder.forward` applies to a tokenized batch is in the graph: ReLU, log1p, the
attention / pool mask, max over positions, the output bias (APC's ``b <- b - c`` lives in the head's bias), the
restricted output vocabulary and the special-token exclusion. Tokenization stays outside (the tokenizer and
``lexray_onnx.json``, which records prefixes and max lengths, are saved beside ``model.onnx``).

One difference, by construction: the graph sees token ids only, so it excludes every position holding a
special-token id, while the PyTorch encoder excludes the positions its tokenizer marks in ``special_tokens_mask``
(the tokens it adds: [CLS], [SEP], BOS …). A special-token string written in the text itself (``"<|im_end|>"``,
``"[SEP]"``) is pooled by PyTorch and not by the graph. SciFact's documents contain none (the checks below).

Bidirectional attention (decoders, LACONIC §2.1): the exporter traces the backbone as loaded, with
``config.is_causal = False``; a causal trace would give different weights, so every export is compared with the
PyTorch encoder on probe texts through onnxruntime and refused above ``tolerance`` (1e-4 by default).

Exporter: ``torch.onnx.export(..., dynamo=True)`` (torch.export + onnxscript), dynamic batch and length axes.
The head runs unfused in the graph (one (B, L, |V'|) matmul, as ``head_impl="unfused"``): the fused, blocked
head of :mod:`lexray.models.fused_head` is a Python loop that no exporter traces.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lexray.models.backbones import VERIFIED_DECODERS, UnsupportedModelError
from lexray.models.fused_head import vocab_projection
from lexray.models.pooling import splade_max_pool

log = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
SPEC_FILE = "lexray_onnx.json"
SPEC_VERSION = 1
DEFAULT_OPSET = 18
DEFAULT_TOLERANCE = 1e-4
PROBE_TEXTS = (
    "Sparse retrieval scores documents by the weights of shared vocabulary terms.",
    "short",
    "A longer probe text: learned sparse representations expand a document with related terms, so that a "
    "query can match it without sharing its exact words; padding and truncation must not change the weights.",
)


class SpladeOnnxGraph(nn.Module):
    """The exportable form of a :class:`~lexray.models.SparseEncoder`'s document/query network.

    ``forward(input_ids (B, L) int64, attention_mask (B, L) int64) -> (B, |V|) float32`` non-negative weights,
    equal to ``SparseEncoder.forward`` on the same batch (its pool mask recomputed from the token ids). The
    weights are copies (float32) of the backbone's, so the encoder itself is not changed.
    """

    def __init__(self, encoder):
        super().__init__()
        check_exportable(encoder)
        self.body = encoder._split[0]
        proj = vocab_projection(encoder.backbone, encoder.settings.kind)
        self.transform = proj.transform
        ids = encoder.settings.output_ids
        weight, bias = proj.weight.detach(), None if proj.bias is None else proj.bias.detach()
        if ids is not None:
            index = torch.tensor(ids, dtype=torch.long)
            weight = weight.index_select(0, index)
            bias = None if bias is None else bias.index_select(0, index)
            self.register_buffer("output_ids", index)
        else:
            self.output_ids = None
        self.register_buffer("head_weight", weight.float().clone())
        self.register_buffer("head_bias", None if bias is None else bias.float().clone())
        special = torch.zeros(encoder.vocab_size, dtype=torch.bool)
        if encoder.settings.special_tokens == "exclude":
            special[sorted(set(encoder.tokenizer.all_special_ids))] = True
        self.register_buffer("is_special", special)
        self.vocab_size = encoder.vocab_size

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        logits = nn.functional.linear(self.transform(hidden), self.head_weight, self.head_bias)
        pool = attention_mask.bool() & ~self.is_special[input_ids]
        w = splade_max_pool(logits, pool)
        if self.output_ids is None:
            return w
        out = w.new_zeros(w.shape[0], self.vocab_size)
        return out.index_copy(1, self.output_ids, w)


def check_exportable(encoder) -> None:
    """Refuse what the graph would not reproduce, before any tracing.

    Raises:
        UnsupportedModelError: a backbone not in float32; inference-free queries (the query side is a lookup,
            not this network); a head without a verified layout (``fused_head.vocab_projection``: BERT MLM or a
            decoder ``lm_head``); a decoder of an unverified type or still causal (``config.is_causal`` not False).
    """
    s = encoder.settings
    name = type(encoder.backbone).__name__
    if s.inference_free_queries:
        raise UnsupportedModelError(
            "export-onnx: inference-free queries are a bag-of-tokens lookup, not the exported network; export "
            "of such models is not supported (the document side alone would be a different model)")
    dtype = next(encoder.backbone.parameters()).dtype
    if dtype != torch.float32:
        raise UnsupportedModelError(f"export-onnx: the backbone is {dtype}; export a float32 model "
                                    "(model.dtype=float32): the check against PyTorch and onnxruntime's CPU "
                                    "kernels assume float32")
    if encoder._split is None or vocab_projection(encoder.backbone, s.kind) is None:
        raise UnsupportedModelError(
            f"export-onnx: {name} has no verified head layout (BERT MLM or a decoder lm_head Linear); its "
            "pooling cannot be put in the graph")
    if s.kind == "decoder":
        cfg = encoder.backbone.config
        if cfg.model_type not in VERIFIED_DECODERS:
            raise UnsupportedModelError(f"export-onnx: decoder model_type '{cfg.model_type}' is not verified "
                                        f"to run bidirectionally ({', '.join(VERIFIED_DECODERS)})")
        if getattr(cfg, "is_causal", True) is not False:
            raise UnsupportedModelError(
                f"export-onnx: the {name} backbone is causal (config.is_causal is not False); LACONIC encoders "
                "are bidirectional (lexray.models.make_bidirectional)")


def export_onnx(encoder, out: str | Path, probe_texts: Sequence[str] = PROBE_TEXTS, opset: int = DEFAULT_OPSET,
                tolerance: float = DEFAULT_TOLERANCE, overwrite: bool = False, source: str | None = None) -> dict:
    """Export ``encoder`` to ``out/model.onnx`` with its tokenizer and ``lexray_onnx.json``; returns the spec.

    The export is built in a temporary folder beside ``out``, checked with onnxruntime against the PyTorch
    encoder on ``probe_texts`` (documents; max |Δw| ≤ ``tolerance``) and only then renamed into place.

    Raises:
        UnsupportedModelError: see :func:`check_exportable`.
        FileExistsError: ``out`` exists, is not empty, and is not a lexray ONNX export replaced by ``overwrite``.
        RuntimeError: onnxruntime's weights differ from PyTorch's by more than ``tolerance`` (nothing written).
    """
    out = Path(out)
    check_exportable(encoder)
    if out.exists() and any(out.iterdir()):
        if not (overwrite and (out / SPEC_FILE).is_file()):
            raise FileExistsError(f"export-onnx: {out} exists and is not empty" + (
                " (and is not a lexray ONNX export: not replaced)" if overwrite else "; use --overwrite to "
                "replace an earlier export"))
    if not probe_texts:
        raise ValueError("export-onnx: at least one probe text is needed to check the export")
    encoder.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        graph = SpladeOnnxGraph(encoder).eval()
        batch = encoder.tokenize(list(probe_texts[:2]) or ["x"], "document")
        params = sum(p.numel() * 4 for p in graph.parameters()) + sum(b.numel() * 4 for b in graph.buffers())
        _trace(graph, batch, tmp / ONNX_FILE, opset, external=params > 1_800_000_000)
        encoder.tokenizer.save_pretrained(tmp)
        encoder.settings.save(tmp)
        diff = max_weight_diff(tmp / ONNX_FILE, encoder, probe_texts)
        if not diff <= tolerance:
            raise RuntimeError(f"export-onnx: onnxruntime's weights differ from PyTorch's by {diff:.3g} > "
                               f"{tolerance:g} on {len(probe_texts)} probe texts; the export was not kept")
        spec = _spec(encoder, opset, diff, len(probe_texts), source)
        (tmp / SPEC_FILE).write_text(json.dumps(spec, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.chmod(0o755)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("exported %s: max |Δw| %.2e on %d probe texts", out / ONNX_FILE, diff, len(probe_texts))
    return spec


def _trace(graph: nn.Module, batch: dict, path: Path, opset: int, external: bool) -> None:
    """torch.onnx's dynamo exporter with dynamic (batch, length) axes on both inputs."""
    import warnings

    b, length = torch.export.Dim("batch"), torch.export.Dim("length")
    dims = {0: b, 1: length}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(graph, (batch["input_ids"], batch["attention_mask"]), str(path), dynamo=True,
                          input_names=["input_ids", "attention_mask"], output_names=["weights"],
                          dynamic_shapes={"input_ids": dims, "attention_mask": dims}, opset_version=opset,
                          external_data=external, verbose=False)


def _spec(encoder, opset: int, diff: float, n_probe: int, source: str | None) -> dict:
    """The ``lexray_onnx.json`` beside the graph: inputs, outputs, what is in the graph, tokenization."""
    s = encoder.settings
    n_out = encoder.vocab_size if s.output_ids is None else len(s.output_ids)
    return {
        "format_version": SPEC_VERSION,
        "onnx_file": ONNX_FILE,
        "opset": opset,
        "source_model": source,
        "kind": s.kind,
        "attention": "bidirectional" if s.kind == "decoder" else "bidirectional (MLM encoder)",
        "inputs": [{"name": "input_ids", "dtype": "int64", "shape": ["batch", "length"]},
                   {"name": "attention_mask", "dtype": "int64", "shape": ["batch", "length"],
                    "meaning": "1 = token, 0 = padding"}],
        "outputs": [{"name": "weights", "dtype": "float32", "shape": ["batch", encoder.vocab_size],
                     "meaning": "SPLADE-max term weights w_j = max_i log(1 + ReLU(logit_ij)), >= 0"}],
        "in_graph": ["backbone", "vocabulary head (+ output bias)", "attention-mask pooling",
                     "special-token exclusion (by token id: also a special-token string written in the "
                     "text, which the PyTorch encoder pools)" if s.special_tokens == "exclude"
                     else "special tokens pooled",
                     "max over positions", "ReLU", "log1p",
                     f"output vocabulary restriction ({n_out} of {encoder.vocab_size} terms)"
                     if s.output_ids is not None else "full output vocabulary"],
        "vocab_size": encoder.vocab_size,
        "output_terms": n_out,
        "tokenization": {"query_prefix": s.query_prefix, "doc_prefix": s.doc_prefix,
                         "query_max_length": s.query_max_length, "doc_max_length": s.doc_max_length,
                         "padding": "longest", "truncation": True, "tokenizer_files": "this folder"},
        "top_k": {"query": s.query_top_k, "document": s.doc_top_k, "applied": "outside the graph"},
        "verification": {"max_abs_diff": diff, "probe_texts": n_probe, "against": "lexray SparseEncoder "
                         "(PyTorch), onnxruntime CPUExecutionProvider"},
    }


def max_weight_diff(onnx_path: str | Path, encoder, texts: Sequence[str], batch_size: int = 8) -> float:
    """max |Δw| between onnxruntime on ``onnx_path`` and ``encoder.encode`` on ``texts`` (documents)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ref = encoder.encode(list(texts), "document", batch_size=batch_size).numpy()
    diff = 0.0
    for s in range(0, len(texts), batch_size):
        b = encoder.tokenize(list(texts[s:s + batch_size]), "document")
        got = sess.run(None, {"input_ids": b["input_ids"].numpy(), "attention_mask": b["attention_mask"].numpy()})[0]
        diff = max(diff, float(np.abs(got - ref[s:s + batch_size]).max()))
    return diff


class OnnxSparseEncoder:
    """An exported folder run by onnxruntime: texts → (N, |V|) float32 weights, as ``SparseEncoder.encode``.

    Tokenizes as :meth:`SparseEncoder.tokenize` does (prefix, max length, truncation, longest padding) with the
    tokenizer saved beside the graph. ``threads`` sets onnxruntime's intra-op threads (None: its default).
    """

    def __init__(self, folder: str | Path, threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.folder = Path(folder)
        spec_path = self.folder / SPEC_FILE
        if not spec_path.is_file():
            raise FileNotFoundError(f"{self.folder}: no {SPEC_FILE} (not a lexray ONNX export)")
        self.spec = json.loads(spec_path.read_text())
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        opts = ort.SessionOptions()
        if threads is not None:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(self.folder / self.spec["onnx_file"]), opts,
                                            providers=["CPUExecutionProvider"])
        self.vocab_size = int(self.spec["vocab_size"])

    def encode(self, texts: Sequence[str], kind: str = "document", batch_size: int = 32) -> np.ndarray:
        """(N, |V|) float32 weights in input order; batches are length-sorted like ``SparseEncoder.encode``."""
        tok = self.spec["tokenization"]
        prefix = tok["query_prefix"] if kind == "query" else tok["doc_prefix"]
        max_len = tok["query_max_length"] if kind == "query" else tok["doc_max_length"]
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), self.vocab_size), dtype=np.float32)
        for s in range(0, len(texts), batch_size):
            idx = order[s:s + batch_size]
            b = self.tokenizer([prefix + texts[i] for i in idx], padding=True, truncation=True,
                               max_length=max_len, return_tensors="np")
            feeds = {"input_ids": b["input_ids"].astype(np.int64),
                     "attention_mask": b["attention_mask"].astype(np.int64)}
            out[idx] = self.session.run(None, feeds)[0]
        return out
