"""Active-dimension (L0) statistics of sparse representations, for logging and the collapse guard.

Why log them: the FLOPS/L1 loss value alone does not say whether representations are sparse enough to index
(documents with ~|V| active terms make an index unusable) or have collapsed to nothing (0 active terms: every
score is 0 and training has stopped learning). Mean non-zeros per query / document are the numbers the
SPLADE papers report next to effectiveness.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def active_dims(reps: torch.Tensor, threshold: float = 0.0) -> dict[str, float]:
    """L0 statistics of (n, |V|) representations.

    Returns ``{"mean": mean #(|w| > threshold) per row, "fraction": mean / |V|, "min": fewest per row,
    "max": most per row}`` as Python floats. An empty batch gives zeros.
    """
    if reps.dim() != 2:
        raise ValueError(f"expected (n, |V|) representations, got shape {tuple(reps.shape)}")
    if reps.shape[0] == 0:
        return {"mean": 0.0, "fraction": 0.0, "min": 0.0, "max": 0.0}
    nnz = (reps.detach().abs() > threshold).sum(1).float()
    mean = float(nnz.mean())
    return {"mean": mean, "fraction": mean / reps.shape[1], "min": float(nnz.min()), "max": float(nnz.max())}
