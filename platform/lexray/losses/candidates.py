"""Student scores of each query's candidate group, checked against the teacher's scores: the input both
distillation losses (:mod:`lexray.losses.margin_mse`, :mod:`lexray.losses.kl_div`) start from.

Layout: documents arrive grouped per query, ``[pos_0, neg_0_1 .. neg_0_N, pos_1, ...]`` (as for InfoNCE), and the
teacher scores as ``teacher_pos`` (B,) and ``teacher_neg`` (B, N).
"""

from __future__ import annotations

import torch


def candidate_scores(q_reps: torch.Tensor, d_reps: torch.Tensor, teacher_pos: torch.Tensor,
                     teacher_neg: torch.Tensor, loss_name: str) -> torch.Tensor:
    """Student scores ``s[b, j] = <q_b, d_{b,j}>`` (B, 1+N) float32, positive first.

    Args:
        q_reps: (B, |V|) query representations. d_reps: (B·(1+N), |V|) grouped documents.
        teacher_pos: (B,) and teacher_neg: (B, N) teacher scores (checked for shape only).
        loss_name: named in the errors.

    Raises:
        ValueError: inconsistent shapes, or N = 0 (a group without a negative carries nothing to distill).
    """
    B, V = q_reps.shape
    if teacher_neg.dim() != 2 or teacher_neg.shape[0] != B or teacher_pos.shape != (B,):
        raise ValueError(f"teacher scores must be (B,) and (B, N) for B={B}; got {tuple(teacher_pos.shape)} and "
                         f"{tuple(teacher_neg.shape)}")
    n = teacher_neg.shape[1]
    if n < 1:
        raise ValueError(f"{loss_name} needs at least one negative per query")
    if d_reps.shape != (B * (1 + n), V):
        raise ValueError(f"expected documents of shape ({B * (1 + n)}, {V}), got {tuple(d_reps.shape)}")
    return torch.einsum("bv,bgv->bg", q_reps.float(), d_reps.float().view(B, 1 + n, V))
