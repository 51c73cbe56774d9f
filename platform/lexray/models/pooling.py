"""SPLADE max pooling: w_j = max_i log(1 + ReLU(logit_ij)) over unmasked positions i.

Source: LACONIC arXiv:2601.01684 eq. (1) (../shared/papers/laconic.txt §2.1) and SPLADE v2 (Formal et al.
2021, arXiv:2109.10086). The one implementation of the pooling in lexray; every encoder path calls
:func:`splade_max_pool`.

Why pool before the activation: log1p∘ReLU is monotone non-decreasing, so
``max_i log1p(relu(x_i)) == log1p(relu(max_i x_i))`` exactly. Taking the max of the raw logits first means the
activation runs on a (B, |V|) tensor instead of (B, L, |V|) and no second (B, L, |V|) temporary is created. The
gradient is the same too: it flows to the arg-max position, and is zero where the max logit is ≤ 0.
"""

from __future__ import annotations

import torch


def splade_max_pool(logits: torch.Tensor, pool_mask: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    """Pool token logits into one SPLADE vector per sequence.

    Args:
        logits: (B, L, |V|) float tensor of MLM/LM-head outputs (any float dtype).
        pool_mask: (B, L) bool or {0,1} tensor; positions that may contribute (padding and, by policy, special
            tokens are 0). A row with no allowed position yields the zero vector.
        inplace: overwrite masked positions of ``logits`` instead of copying it — halves the peak memory
            when the caller no longer needs the logits (safe under autograd: the head's backward does not
            read its output).

    Returns:
        (B, |V|) float32 tensor of non-negative weights.
    """
    if logits.dim() != 3 or pool_mask.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (B, L, |V|) and pool_mask (B, L); got {tuple(logits.shape)} and "
                         f"{tuple(pool_mask.shape)}")
    mask = pool_mask.to(torch.bool).unsqueeze(-1)
    neg = torch.finfo(logits.dtype).min
    filled = logits.masked_fill_(~mask, neg) if inplace else logits.masked_fill(~mask, neg)
    pooled = filled.amax(dim=1)
    return torch.log1p(torch.relu(pooled.float()))
