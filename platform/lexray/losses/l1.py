"""L1 sparsity regularizer: ``(1/n) Σ_i Σ_j |w_ij|``, the mean L1 norm of a batch of representations.

The alternative to FLOPS offered by SPLADE (Formal et al. 2021, arXiv:2107.05720, §3 cites L1 as the simpler baseline penalty; FLOPS
is preferred because it also spreads activations across terms). Same λ rule as FLOPS (see
:mod:`lexray.losses.flops`): computed on the global batch of an optimizer step; as a mean over rows it is unbiased
at any batch size.
"""

from __future__ import annotations

import torch


def l1_loss(reps: torch.Tensor) -> torch.Tensor:
    """Mean over rows of the L1 norm. reps: (n, |V|) float → 0-dim float32 tensor."""
    if reps.dim() != 2:
        raise ValueError(f"expected (n, |V|) representations, got shape {tuple(reps.shape)}")
    return reps.float().abs().sum(1).mean()
