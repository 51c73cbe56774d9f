"""Sparsemax: the Euclidean projection onto the probability simplex (Martins & Astudillo 2016, arXiv:1602.02068).

Used by Semantic-Init (arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2.2, eq. 8):
``α_t = sparsemax(s_t) = argmin_{p ∈ Δ} ||p − s_t||²`` turns the cosine affinities of a new token to the anchors
into a *sparse* convex weighting (α ≥ 0, Σα = 1, few non-zeros).

Closed form: sort z descending (z_(1) ≥ z_(2) ≥ …), k(z) = max{k : 1 + k·z_(k) > Σ_{j≤k} z_(j)},
τ = (Σ_{j≤k(z)} z_(j) − 1) / k(z), sparsemax(z) = max(z − τ, 0).
"""

from __future__ import annotations

import torch


def _threshold_sorted(zs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """τ and support size k for rows of descending-sorted scores ``zs`` (N, K)."""
    k = torch.arange(1, zs.shape[-1] + 1, device=zs.device, dtype=zs.dtype)
    cs = zs.cumsum(-1)
    support = (1 + k * zs) > cs
    ks = support.sum(-1, keepdim=True)  # support is a prefix: the condition holds for k = 1..k(z)
    tau = (cs.gather(-1, ks - 1) - 1) / ks.to(zs.dtype)
    return tau, ks


def sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Sparsemax of ``z`` along ``dim`` (any shape, float dtype); same shape, rows ≥ 0 summing to 1.

    Exact (full sort along ``dim``): O(K log K) per row. For many rows against many candidates use
    :func:`sparsemax_topk`, which is exact too but sorts only the top ``k`` candidates.

    Raises:
        ValueError: ``z`` is not floating point or ``dim`` has size 0.
    """
    if not z.is_floating_point():
        raise ValueError(f"sparsemax needs a floating-point tensor, got {z.dtype}")
    if z.shape[dim] == 0:
        raise ValueError("sparsemax over an empty dimension")
    z = z.transpose(dim, -1)
    zs, _ = torch.sort(z, dim=-1, descending=True)
    tau, _ = _threshold_sorted(zs)
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


def sparsemax_topk(z: torch.Tensor, k: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact sparsemax of each row of ``z`` (N, K), returned in sparse form over its top candidates.

    The projection only ever puts mass on the largest entries, so it is computed on the top ``k`` of each row and
    then checked: the result is exact iff the row's (k+1)-th largest score is ≤ τ (it would get zero weight
    anyway; with a support of s < k entries this holds by construction). Rows that fail the check (support ≥ k)
    are recomputed with 4·k candidates, recursively, up to K.

    Returns:
        (values (N, k') float, indices (N, k') long into dim 1 of ``z``, support (N,) long): weights are zero
        outside the support; k' = min(k, K), wider when some row needed more candidates (padding: weight 0,
        index 0).
    """
    n, K = z.shape
    kk = min(k, K)
    top, idx = torch.topk(z, min(kk + 1, K), dim=-1, sorted=True)
    nxt = top[:, kk:kk + 1]  # the (k+1)-th largest score of each row (empty when k >= K)
    top, idx = top[:, :kk], idx[:, :kk]
    tau, ks = _threshold_sorted(top)
    vals = torch.clamp(top - tau, min=0)
    ks = ks.squeeze(-1)
    if nxt.shape[1]:
        bad = (nxt.squeeze(-1) > tau.squeeze(-1)) & (ks == kk)
        if bool(bad.any()):
            bv, bi, bk = sparsemax_topk(z[bad], 4 * kk)
            width = bv.shape[1]
            vals = torch.nn.functional.pad(vals, (0, width - kk))
            idx = torch.nn.functional.pad(idx, (0, width - kk))
            vals[bad], idx[bad], ks[bad] = bv, bi, bk
    return vals, idx, ks
