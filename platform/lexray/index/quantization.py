"""Impact quantization shared by the DuckDB inverted index (:mod:`lexray.index.build`) and the Lucene impact
index (:mod:`lexray.index.lucene`), so both store the same integer for the same weight.

Rule: uniform with one global scale, round half up: ``impact = floor(w * ((2**bits - 1) / scale) + 0.5)`` in
float64, clipped to ``[0, 2**bits - 1]``. With ``scale`` = the collection's largest weight, ``w ≈ impact ·
scale / (2**bits - 1)`` with an error of at most half a step (docs/indexing.md).
"""

from __future__ import annotations

import numpy as np


def quantize(weights: np.ndarray, scale: float, bits: int = 8) -> np.ndarray:
    """Quantize non-negative weights to integer impacts.

    Args:
        weights: (n,) float array, non-negative.
        scale: the weight that maps to ``2**bits - 1`` (the collection's largest weight); > 0.
        bits: impact width, 1..31.

    Returns:
        (n,) int32 impacts in ``[0, 2**bits - 1]``.

    Raises:
        ValueError: non-positive ``scale``, ``bits`` out of range, or negative / non-finite weights.
    """
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"quantization scale must be a positive finite number, got {scale}")
    if not 1 <= bits <= 31:
        raise ValueError(f"bits must be in 1..31, got {bits}")
    w = np.asarray(weights, dtype=np.float64)
    if w.size and (not np.all(np.isfinite(w)) or w.min() < 0):
        raise ValueError("weights must be finite and non-negative")
    levels = (1 << bits) - 1
    q = np.floor(w * (levels / scale) + 0.5)
    return np.clip(q, 0, levels).astype(np.int32)
