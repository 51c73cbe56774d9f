"""Overlap-Aware Masking Curriculum (OMC, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2.3, §5.3).

Uniform masking wastes updates on overlap tokens, which the source model already knows. OMC masks position i with
probability ∝ ω_{t_i}: ω = 1 for t ∈ O, ω = λ for t ∈ N′ (λ = 2 in the paper), 0 for special tokens and padding.
Per sequence the probabilities are scaled so that the expected number of masked positions is
``mask_rate × (maskable positions)`` (0.3 in the paper): p_i = min(1, rate · n · ω_i / Σ_j ω_j). So the mask rate
keeps its usual meaning and a new token is λ times as likely to be masked as an overlap token (as long as no
p_i hits the cap of 1, i.e. rate · λ < 1 when new tokens are rare).

Masked positions follow BERT's 80/10/10 rule: 80 % become the mask token, 10 % a random token, 10 % stay.
"""

from __future__ import annotations

import numpy as np
import torch

IGNORE = -100


def token_weights(is_new: np.ndarray | torch.Tensor, new_weight: float = 2.0,
                  special_ids: list[int] | None = None) -> torch.Tensor:
    """ω over the target vocabulary (|V′|,) float32: 1 for overlap, ``new_weight`` (λ) for new tokens, 0 for
    ``special_ids`` (never masked)."""
    w = torch.ones(len(is_new), dtype=torch.float32)
    w[torch.as_tensor(np.asarray(is_new), dtype=torch.bool)] = float(new_weight)
    if special_ids:
        w[torch.tensor(sorted(set(special_ids)), dtype=torch.long)] = 0.0
    return w


def mask_probabilities(input_ids: torch.Tensor, attention_mask: torch.Tensor, omega: torch.Tensor,
                       mask_rate: float = 0.3) -> torch.Tensor:
    """(B, L) float32 masking probability of each position (see the module docstring)."""
    w = omega[input_ids] * attention_mask.float()
    n = (w > 0).sum(1, keepdim=True).float()
    p = mask_rate * n * w / w.sum(1, keepdim=True).clamp_min(1e-12)
    return p.clamp(max=1.0)


def omc_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor, omega: torch.Tensor, mask_token_id: int,
             vocab_size: int, mask_rate: float = 0.3, generator: torch.Generator | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask a batch with OMC.

    Args:
        input_ids: (B, L) long. attention_mask: (B, L) {0,1}. omega: (|V′|,) from :func:`token_weights`.

    Returns:
        (masked input_ids (B, L) long, labels (B, L) long: the original id at masked positions, -100 elsewhere).
    """
    p = mask_probabilities(input_ids, attention_mask, omega, mask_rate)
    masked = torch.rand(p.shape, generator=generator) < p
    labels = torch.where(masked, input_ids, torch.full_like(input_ids, IGNORE))
    r = torch.rand(p.shape, generator=generator)
    out = input_ids.clone()
    out[masked & (r < 0.8)] = mask_token_id
    rnd = masked & (r >= 0.8) & (r < 0.9)
    out[rnd] = torch.randint(0, vocab_size, (int(rnd.sum()),), generator=generator)
    return out, labels
