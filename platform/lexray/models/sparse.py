"""Dense (B, |V|) SPLADE vectors to the sparse form stored in shards and indexes: (term ids, weights).

Why vectorised: a per-row Python loop over ``np.flatnonzero`` costs a scan of |V| floats and two small arrays
per document; :func:`to_sparse_flat` finds all non-zeros of a batch in one ``np.flatnonzero`` and returns CSR-like
flat arrays that Arrow list columns take as they are (``lexray.encode.shards.shard_table``). ``top_k`` ranks only
the non-zeros (a few hundred per row) instead of running ``torch.topk`` over all |V| columns and rebuilding a dense
(B, |V|) matrix. Measured on (64, 30,522) rows with ~185 non-zeros each: 0.8 ms vs 1.2 ms for the per-row loop
without top-k, 1.0–2.6 ms vs 5–6 ms for the former topk + scatter path (results identical).
"""

from __future__ import annotations

import numpy as np
import torch


def to_sparse_flat(reps: torch.Tensor, top_k: int | None = None, threshold: float = 0.0
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert (B, |V|) weights into flat CSR arrays.

    Args:
        reps: (B, |V|) float tensor of non-negative weights (any device/dtype; converted to float32 on CPU).
        top_k: keep at most this many largest weights per row (ties: lower term id first); None keeps all.
        threshold: keep weights strictly greater than this (0.0 drops exact zeros only).

    Returns:
        ``(offsets, term_ids, weights)``: offsets (B+1,) int64 with row i at ``[offsets[i], offsets[i+1])``;
        term_ids (nnz,) int32 ascending within each row; weights (nnz,) float32 aligned with them.
    """
    arr = reps.detach().float().cpu().numpy()
    if arr.ndim != 2:
        raise ValueError(f"expected (B, |V|) weights, got shape {tuple(arr.shape)}")
    n_rows, width = arr.shape
    flat = np.flatnonzero(arr.reshape(-1) > threshold)  # ascending = row-major: by row, then term id
    ws = arr.reshape(-1)[flat]
    rows = flat // width
    counts = np.bincount(rows, minlength=n_rows)
    if top_k is not None and top_k < width and counts.max(initial=0) > top_k:
        # Rank entries within each row by weight (desc), ties by lower term id; keep the first top_k.
        order = np.lexsort((flat, -ws, rows))
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        keep = np.sort(order[np.arange(order.size) - starts < top_k])
        flat, ws, rows = flat[keep], ws[keep], rows[keep]
        counts = np.bincount(rows, minlength=n_rows)
    offsets = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, (flat - rows * width).astype(np.int32), ws.astype(np.float32, copy=False)


def to_sparse(reps: torch.Tensor, top_k: int | None = None, threshold: float = 0.0
              ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Convert (B, |V|) weights into per-row sparse vectors.

    Args:
        reps: (B, |V|) float tensor of non-negative weights.
        top_k: keep at most this many largest weights per row (ties: lower term id first); None keeps all.
        threshold: keep weights strictly greater than this (0.0 drops exact zeros only).

    Returns:
        ``(term_ids, weights)``: two lists of length B; ``term_ids[i]`` is a sorted int32 array and
        ``weights[i]`` the float32 weights aligned with it (views into one flat buffer per call).
    """
    offsets, ids, ws = to_sparse_flat(reps, top_k=top_k, threshold=threshold)
    if len(offsets) == 1:
        return [], []
    cuts = offsets[1:-1]
    return np.split(ids, cuts), np.split(ws, cuts)
