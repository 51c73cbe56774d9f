"""Fused SPLADE head: vocabulary projection → max over positions → log1p∘ReLU, without the (B, L, |V|) logits.

What it computes (LACONIC arXiv:2601.01684 eq. (1), ../shared/papers/laconic.txt §2.1; SPLADE-max,
Formal et al. 2021, arXiv:2109.10086):

    w_{b,v} = log(1 + ReLU( max_{i : pool_mask[b,i]} (h_{b,i} · W_v) + bias_v ))

where ``h`` (B, L, H) are the hidden states *after* the head's transform (BERT MLM: dense → GELU → LayerNorm;
decoder LMs: the body's final RMSNorm is already applied) and ``W`` (|V|, H) the output embedding (tied or not).
It equals :func:`lexray.models.pooling.splade_max_pool` applied to the full logits: the bias is added after the
max, which is exact because float rounding of ``x + b`` is monotone in ``x`` (and log1p∘ReLU is monotone, see
pooling.py). The one pooling definition stays ``splade_max_pool``; this is its fused, cache-blocked execution.

Why: the unfused head writes B·L·|V| logits to memory, masks them, reads them again for the max — memory-bound
work that took 92 % of the encoder actors' time for splade-tiny (128 × 30,522 head). Here each sequence's valid
positions (l_b, H) are multiplied with vocabulary blocks of ``block`` rows and reduced by max immediately, so the
(l_b, block) tile stays in L2 and padding positions cost nothing; only (B, |V|) leaves the loop.

Training: :class:`_FusedSpladeMax` is a custom autograd Function. Forward keeps the arg-max position per
(b, v) (int64, (B, |V|)); backward adds, for each term v with a non-zero gradient g, ``g · W_v`` to the
arg-max position's hidden-state gradient and ``g · h_{b,arg}`` to ``W_v``'s (the logit gradient has one
non-zero per column, so this is O(B·|V|·H), not the O(B·L·|V|·H) of dense matmuls):
∂L/∂h and ∂L/∂W are the same as autograd through the unfused graph (max routes the gradient to the arg-max
position; the tests check ≤ 1e-5), and memory stays O(B·|V| + l·block) instead of O(B·L·|V|). Exact ties
between two positions' logits (measure zero for real hidden states) send the whole gradient to the first
position, where ``torch.amax``'s backward would split it evenly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["VocabProjection", "fused_splade_max_pool", "vocab_projection"]

DEFAULT_BLOCK = 2048


@dataclass
class VocabProjection:
    """A backbone's head split as ``logits = transform(hidden) @ weight.T + bias``.

    Attributes:
        transform: (…, H) → (…, H') module/function applied before the projection (identity for decoder LMs).
        weight: (|V|, H') output embedding (a Parameter of the backbone; tied weights stay tied).
        bias: (|V|,) or None.
    """

    transform: Callable[[torch.Tensor], torch.Tensor]
    weight: torch.Tensor
    bias: torch.Tensor | None


def vocab_projection(backbone: nn.Module, kind: str) -> VocabProjection | None:
    """Split ``backbone``'s vocabulary head into :class:`VocabProjection`, or ``None`` if not a verified layout.

    Verified: BERT MLM heads (``cls.predictions``: transform + decoder with bias) and decoder LMs (``lm_head``
    Linear, with or without bias, after the body's final norm: Llama, Qwen, Mistral…). Other heads, and
    parameters partitioned by DeepSpeed ZeRO-3, keep the unfused path.
    """
    proj = _split_head(backbone, kind)
    if proj is None or any(hasattr(t, "ds_id") for t in (proj.weight, proj.bias) if t is not None):
        return None  # DeepSpeed ZeRO-3 gathers parameters in module hooks; the fused path bypasses them
    return proj


def _split_head(backbone: nn.Module, kind: str) -> VocabProjection | None:
    if kind == "decoder":
        head = getattr(backbone, "lm_head", None)
        if not isinstance(head, nn.Linear):
            return None
        return VocabProjection(nn.Identity(), head.weight, head.bias)
    if getattr(backbone.config, "model_type", None) == "bert":
        pred = getattr(getattr(backbone, "cls", None), "predictions", None)
        dec = getattr(pred, "decoder", None)
        if pred is None or not isinstance(dec, nn.Linear):
            return None
        bias = dec.bias if dec.bias is not None else getattr(pred, "bias", None)
        return VocabProjection(pred.transform, dec.weight, bias)
    return None


def _positions(pool_mask: torch.Tensor) -> list[torch.Tensor]:
    return [torch.nonzero(row, as_tuple=True)[0] for row in pool_mask.to(torch.bool)]


def _gather_rows(hidden: torch.Tensor, pos: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """Each sequence's pooled positions as one contiguous (l_b, H) matrix (None for a row without any)."""
    return [hidden[b].index_select(0, p) if p.numel() else None for b, p in enumerate(pos)]


def _max_tiles(hidden: torch.Tensor, weight: torch.Tensor, pos: list[torch.Tensor], block: int) -> torch.Tensor:
    """z_{b,v} = max_{i ∈ pos_b} h_{b,i}·W_v, (B, |V|), without arg-max bookkeeping (the inference path).

    Loop order: vocabulary block outside, sequence inside. A (block, H) slice of W (1 MB at the default
    2,048 × 128 float32) is then read from memory once per batch and stays in cache while every sequence's
    (l_b, H) positions are multiplied with it; the (l_b, block) tile is reduced by max at once. The other order
    (each sequence against all of W) streams the whole |V| × H matrix (15.6 MB for BERT) from memory once per
    *sequence*: on the 2-core machine two encoder processes doing that share the L3 and measured 88-89 % of the
    single-core matmul peak against 95-98 % for this order (issue 13, docs/indexing.md). Same tiles, same
    products: the output is bit-identical to the sequence-outer order."""
    B, V = hidden.shape[0], weight.shape[0]
    z = torch.full((B, V), float("-inf"), dtype=hidden.dtype, device=hidden.device)
    rows = _gather_rows(hidden, pos)
    for v0 in range(0, V, block):
        wt = weight[v0:v0 + block].T  # (H, block) view
        for b, hb in enumerate(rows):
            if hb is not None:
                torch.amax(hb @ wt, 0, out=z[b, v0:v0 + block])
    return z


class _FusedSpladeMax(torch.autograd.Function):
    """z_{b,v} = max_{i ∈ pos_b} h_{b,i}·W_v (−inf-free: rows without positions give z = −inf → w = 0)."""

    @staticmethod
    def forward(ctx, hidden, weight, pos, block):  # noqa: D401 - autograd signature
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return _max_tiles(hidden, weight, pos, block)
        B, V = hidden.shape[0], weight.shape[0]
        z = torch.full((B, V), float("-inf"), dtype=hidden.dtype, device=hidden.device)
        arg = torch.zeros((B, V), dtype=torch.long, device=hidden.device)
        rows = _gather_rows(hidden, pos)
        for v0 in range(0, V, block):  # vocabulary block outside: see _max_tiles
            wt = weight[v0:v0 + block].T
            for b, hb in enumerate(rows):
                if hb is None:
                    continue
                m, a = (hb @ wt).max(0)  # (l_b, blk) tile: stays in cache
                z[b, v0:v0 + block] = m
                arg[b, v0:v0 + block] = pos[b][a]
        ctx.save_for_backward(hidden, weight, arg)
        ctx.block = block
        ctx.pos = pos
        return z

    @staticmethod
    def backward(ctx, gz):
        hidden, weight, arg = ctx.saved_tensors
        block, pos = ctx.block, ctx.pos
        gh = torch.zeros_like(hidden) if ctx.needs_input_grad[0] else None
        gw = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        V = weight.shape[0]
        gz = gz.to(hidden.dtype)
        for b, p in enumerate(pos):
            if p.numel() == 0:
                continue
            for v0 in range(0, V, block):
                # d z_{b,v} / d h_{b,arg} = W_v and / d W_v = h_{b,arg}: one row per term with a non-zero
                # gradient, O(n·H) instead of the dense (L, block) logit-gradient matmuls
                nz = torch.nonzero(gz[b, v0:v0 + block], as_tuple=True)[0]
                if nz.numel() == 0:
                    continue
                v = nz + v0
                g = gz[b, v].unsqueeze(1)
                a = arg[b, v]
                if gh is not None:
                    gh[b].index_add_(0, a, g * weight.index_select(0, v))
                if gw is not None:
                    gw.index_add_(0, v, g * hidden[b].index_select(0, a))
        return gh, gw, None, None


def fused_splade_max_pool(proj: VocabProjection, hidden: torch.Tensor, pool_mask: torch.Tensor,
                          block: int = DEFAULT_BLOCK) -> torch.Tensor:
    """SPLADE-max pooled weights from the body's hidden states, without (B, L, |V|) logits.

    Args:
        proj: the head split (:func:`vocab_projection`).
        hidden: (B, L, H) body output (``last_hidden_state``), any float dtype.
        pool_mask: (B, L) bool or {0,1}; positions that may contribute. A row without one yields zeros.
        block: vocabulary rows per tile (2,048: a 256 × 2,048 float32 tile is 2 MB, a 128-token one 1 MB).

    Returns:
        (B, |V|) float32 non-negative weights, equal to ``splade_max_pool(head(hidden), pool_mask)`` within
        float round-off (≤ 1e-5 in the tests); differentiable w.r.t. ``hidden`` and the head's parameters.

    Raises:
        ValueError: shapes disagree.
    """
    if hidden.dim() != 3 or pool_mask.shape != hidden.shape[:2]:
        raise ValueError(f"expected hidden (B, L, H) and pool_mask (B, L); got {tuple(hidden.shape)} and "
                         f"{tuple(pool_mask.shape)}")
    h = proj.transform(hidden)
    if torch.is_grad_enabled() and (h.requires_grad or proj.weight.requires_grad):
        z = _FusedSpladeMax.apply(h, proj.weight, _positions(pool_mask), int(block))
    else:
        # inference: the head's weight is a Parameter with requires_grad=True, so inside autograd.Function
        # needs_input_grad stays True even under no_grad / inference_mode and the forward would keep the arg-max
        # (max with indices + an int64 (B, |V|) tensor: 1.77x the head's time on one thread, issue 13)
        z = _max_tiles(h, proj.weight, _positions(pool_mask), int(block))
    if proj.bias is not None:
        z = z + proj.bias
    return torch.log1p(torch.relu(z.float()))
