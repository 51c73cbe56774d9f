"""The encoder actor: encodes whole shards of documents into SPLADE sparse vectors and writes them.

:class:`ShardEncoder` is the Ray Data actor class of :func:`lexray.encode.pipeline.encode_payloads` (one per actor,
model loaded once) and the in-process encoder of the local backend. Per shard: tokenize all texts, length-sorted
batches under ``torch.inference_mode`` (less padding), the sparse encoder's forward pass
(:class:`lexray.models.SparseEncoder`: max pooling of ``log(1 + ReLU(logits))``, LACONIC arXiv:2601.01684 §2.1
eq. 1, after SPLADE v2 arXiv:2109.10086), a vectorised dense → sparse conversion into flat CSR arrays, then one
Parquet shard written atomically (:func:`lexray.encode.shards.write_shard`). It returns a one-row summary (counts,
per-stage seconds) that the driver records in the manifest.

With ``model.dense`` set (the LexSemBridge track) the actor runs :class:`lexray.models.dense.DenseEncoder` instead
and writes a dense shard (:func:`lexray.encode.shards.dense_shard_table`); everything around it is the same.

Why a module of its own: it is the only part of encoding that runs a model, and the only part Ray ships to the
actors; the driver-side planning and bookkeeping stay in :mod:`lexray.encode.pipeline`.
"""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lexray.config import EncodeConfig, ModelConfig
from lexray.encode.shards import (
    dense_shard_table,
    file_sha256,
    shard_metadata,
    shard_name,
    shard_table,
    write_shard,
)

__all__ = ["ShardEncoder", "STAGES", "encoder_kwargs"]

STAGES = ("tokenize", "body", "head_pool", "sparse", "write")
"""Per-shard timers measured inside the encoder (seconds): tokenization, transformer body, vocabulary head +
max pooling + activation, dense → sparse conversion, Arrow table + Parquet write."""

_SUMMARY_SCHEMA = pa.schema([
    ("shard", pa.int64()), ("rows", pa.int64()), ("postings", pa.int64()), ("bytes", pa.int64()),
    *[(f"t_{s}", pa.float64()) for s in STAGES],
    ("t_total", pa.float64()), ("t_init", pa.float64()), ("real_tokens", pa.int64()),
    ("padded_tokens", pa.int64()), ("vocab_size", pa.int64()), ("settings_json", pa.string()),
    ("pid", pa.int64()), ("file", pa.string()), ("sha256", pa.string()),
    ("started_at", pa.float64()), ("ended_at", pa.float64()),
])


class ShardEncoder:
    """Encodes whole shards and writes them; used as the Ray Data actor class and by the local backend.

    Args:
        model_cfg: ``ModelConfig`` as a JSON-able dict (absolute local path).
        out_dir: shard folder. fp: the run fingerprint stored in each shard's metadata.
        batch_size: documents per forward pass. top_k / threshold: sparsification (see ``to_sparse_flat``).
        sort_by_length: length-sorted batches (less padding).
        exact_length_batches: batch only documents of exactly the same token length (no padding at all), so a
            document's weights do not depend on which other documents are encoded with it (bit-identical
            incremental re-encoding, :mod:`lexray.store`; docs/indexing.md). torch_threads: intra-op threads; None leaves
            torch's setting alone (local backend). device: ``"cpu"`` or ``"cuda"``.
    """

    def __init__(self, model_cfg: dict, out_dir: str, fp: str, batch_size: int = 32, top_k: int | None = None,
                 threshold: float = 0.0, sort_by_length: bool = True, torch_threads: int | None = None,
                 device: str = "cpu", exact_length_batches: bool = False):
        t0 = time.perf_counter()
        from lexray.console import quiet_worker

        quiet_worker()  # this actor's process: the driver's console choice (lexray.console)
        import torch

        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:  # already set (only possible before the first parallel op)
                pass
        from lexray.models import load_encoder
        from lexray.models.backbones import body_and_head

        mcfg = ModelConfig.model_validate(model_cfg)
        self.dense = mcfg.dense  # the LexSemBridge track: dense vectors, the same shards/manifest/resume
        if self.dense is not None:
            from lexray.models.dense import load_dense_encoder

            self.encoder = load_dense_encoder(mcfg).eval().to(device)
        else:
            self.encoder = load_encoder(mcfg).eval().to(device)
        self.device = device
        self.out_dir = Path(out_dir)
        self.fp = fp
        self.batch_size = batch_size
        self.top_k = top_k if top_k is not None else getattr(self.encoder.settings, "doc_top_k", None)
        self.threshold = threshold
        self.sort_by_length = sort_by_length or exact_length_batches
        self.exact_length_batches = exact_length_batches
        self._body_seconds = 0.0
        split = body_and_head(self.encoder.backbone, self.encoder.settings.kind) if self.dense is None else None
        if split is not None:  # time the transformer body separately from the vocabulary head (forward hooks)
            body = split[0]
            body.register_forward_pre_hook(self._body_start)
            body.register_forward_hook(self._body_end)
        self._t_init = time.perf_counter() - t0
        self._t_body_start = 0.0

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def _body_start(self, *_):
        self._sync()
        self._t_body_start = time.perf_counter()

    def _body_end(self, *_):
        self._sync()
        self._body_seconds += time.perf_counter() - self._t_body_start

    def encode_texts(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
        """Encode documents into flat CSR arrays in input order.

        Returns ``(offsets (N+1,) int64, term_ids (nnz,) int32, weights (nnz,) float32, stats)`` where stats holds
        the seconds of each stage in :data:`STAGES` (``write`` excluded) and real/padded token counts.
        """
        import torch

        from lexray.models.sparse import to_sparse_flat

        st: dict[str, float] = defaultdict(float)
        n = len(texts)
        t = time.perf_counter()
        tok = self.encoder.tokenize(list(texts), kind="document")
        st["tokenize"] += time.perf_counter() - t
        input_ids, attn, pool = tok["input_ids"], tok["attention_mask"], tok["pool_mask"]
        lengths = attn.sum(1).numpy()
        order = np.argsort(-lengths, kind="stable") if self.sort_by_length else np.arange(n)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if self.exact_length_batches:  # runs of equal length in the length-sorted order, cut at batch_size
            cuts = np.flatnonzero(np.diff(lengths[order])) + 1
            batches = [c[s:s + self.batch_size] for c in np.split(order, cuts)
                       for s in range(0, len(c), self.batch_size)]
        else:
            batches = [order[s:s + self.batch_size] for s in range(0, n, self.batch_size)]
        with torch.inference_mode():
            for b in batches:
                idx = torch.as_tensor(b)
                am = attn[idx]
                cols = am.any(0).nonzero().squeeze(1)  # contiguous for left and right padding
                lo, hi = (int(cols[0]), int(cols[-1]) + 1) if len(cols) else (0, 1)
                batch = {"input_ids": input_ids[idx, lo:hi], "attention_mask": am[:, lo:hi],
                         "pool_mask": pool[idx, lo:hi]}
                st["real_tokens"] += float(am.sum())
                st["padded_tokens"] += float(am[:, lo:hi].numel())
                body0 = self._body_seconds
                t = time.perf_counter()
                reps = self.encoder(**{k: v.to(self.device) for k, v in batch.items()}, kind="document")
                self._sync()
                dt = time.perf_counter() - t
                st["body"] += self._body_seconds - body0
                st["head_pool"] += dt - (self._body_seconds - body0)
                t = time.perf_counter()
                parts.append(to_sparse_flat(reps, top_k=self.top_k, threshold=self.threshold))
                st["sparse"] += time.perf_counter() - t
        t = time.perf_counter()
        offsets, ids, ws = _concat_csr(parts)
        if self.sort_by_length:
            offsets, ids, ws = _permute_csr(offsets, ids, ws, np.argsort(order, kind="stable"))
        st["sparse"] += time.perf_counter() - t
        return offsets, ids, ws, dict(st)

    def encode_shard(self, index: int, doc_ids: list[str], texts: list[str], file: str | None = None
                     ) -> dict[str, Any]:
        """Encode one shard, write ``file`` (default ``part-<index>.parquet``) atomically, return its summary row
        (with the sha256 of the written bytes)."""
        t0 = time.perf_counter()
        started_at = time.time()
        if self.dense is not None:
            t = time.perf_counter()
            vecs = self.encoder.encode(texts, "document", batch_size=self.batch_size).numpy()
            st = {"body": time.perf_counter() - t}
            t = time.perf_counter()
            table = dense_shard_table(doc_ids, vecs, self.dense.shard_dtype, metadata=shard_metadata(self.fp, index))
            ids = vecs.reshape(-1)  # "postings" of a dense shard: rows x d values
        else:
            offsets, ids, ws, st = self.encode_texts(texts)
            t = time.perf_counter()
            table = shard_table(doc_ids, offsets, ids, ws, metadata=shard_metadata(self.fp, index))
        file = file or shard_name(index)
        nbytes = write_shard(table, self.out_dir / file)
        sha = file_sha256(self.out_dir / file)
        st["write"] = time.perf_counter() - t
        row = {"shard": index, "rows": len(doc_ids), "postings": int(len(ids)), "bytes": int(nbytes),
               **{f"t_{s}": float(st.get(s, 0.0)) for s in STAGES}, "t_total": time.perf_counter() - t0,
               "t_init": self._t_init, "real_tokens": int(st.get("real_tokens", 0)),
               "padded_tokens": int(st.get("padded_tokens", 0)),
               "vocab_size": int(self.encoder.dim if self.dense is not None else self.encoder.vocab_size),
               "settings_json": self.encoder.settings.model_dump_json(), "pid": os.getpid(), "file": file,
               "sha256": sha, "started_at": started_at, "ended_at": time.time()}
        self._t_init = 0.0  # count the model load once per actor
        return row

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Ray Data entry point: rows ``{shard, file, doc_ids, texts}`` → one summary row per shard."""
        rows = [self.encode_shard(int(batch.column("shard")[i].as_py()), batch.column("doc_ids")[i].as_py(),
                                  batch.column("texts")[i].as_py(), batch.column("file")[i].as_py())
                for i in range(batch.num_rows)]
        return pa.Table.from_pylist(rows, schema=_SUMMARY_SCHEMA)


def _concat_csr(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    if not parts:
        return np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    counts = np.concatenate([np.diff(p[0]) for p in parts])
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


def _permute_csr(offsets: np.ndarray, ids: np.ndarray, ws: np.ndarray, perm: np.ndarray):
    """Rows reordered so that new row r is old row ``perm[r]`` (vectorised gather of ragged segments)."""
    counts = np.diff(offsets)[perm]
    new_off = np.zeros(len(perm) + 1, np.int64)
    np.cumsum(counts, out=new_off[1:])
    src = np.repeat(offsets[:-1][perm] - new_off[:-1], counts) + np.arange(new_off[-1])
    return new_off, ids[src], ws[src]


def encoder_kwargs(model_cfg: ModelConfig, out: Path, fp: str, cfg: EncodeConfig, local: bool) -> dict:
    """:class:`ShardEncoder` constructor arguments for a run: ``local`` (the in-process backend) leaves torch's
    thread count alone unless ``cfg.torch_threads`` is set; an actor takes one thread per reserved CPU."""
    threads = cfg.torch_threads if cfg.torch_threads is not None else (
        None if local else max(1, math.ceil(cfg.cpus_per_actor)))
    return dict(model_cfg=model_cfg.model_dump(mode="json"), out_dir=str(out), fp=fp, batch_size=cfg.batch_size,
                top_k=cfg.doc_top_k, threshold=cfg.threshold, sort_by_length=cfg.sort_by_length,
                torch_threads=threads, device="cuda" if cfg.gpus_per_actor > 0 else "cpu",
                exact_length_batches=cfg.batching == "exact_length")
