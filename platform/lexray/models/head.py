"""MLM-head diagnostics and rescaling (../shared/papers/mlm-head-rescaling.txt).

The paper (§3.2) rescales the vocabulary projection W (|V|, H) of the MLM head once, before SPLADE training:
``W <- W / alpha``. Large-norm heads (RoBERTa, ModernBERT, Ettin) inflate SPLADE activations and scores and
destabilise contrastive training (§5.4); alpha = 1 is the standard initialisation. For tied heads the shared
matrix is scaled so that weight tying is preserved (§3.2), which also scales the input embeddings — as in the
paper. The bias is left unchanged (the paper omits it, eq. (1)).

The "MLM-head L2 norm" of Table 1 scales linearly with 1/alpha (e.g. RoBERTa 3.645 -> 1.82 at alpha=2), which
matches the mean L2 norm of the rows of W; :func:`mlm_head_norm` reports that as ``mean_row_norm`` plus other
summaries.
"""

from __future__ import annotations

import torch
from torch import nn


def output_projection(backbone: nn.Module) -> nn.Module:
    """The (|V|, H) vocabulary projection of a MaskedLM / CausalLM model. Raises ValueError if absent."""
    proj = backbone.get_output_embeddings() if hasattr(backbone, "get_output_embeddings") else None
    if proj is None or getattr(proj, "weight", None) is None:
        raise ValueError(f"{type(backbone).__name__} has no output embedding (vocabulary projection)")
    return proj


def mlm_head_norm(backbone: nn.Module) -> dict[str, float]:
    """Norm statistics of the vocabulary projection W (|V|, H).

    Returns a dict with ``mean_row_norm`` (mean over vocabulary rows of ||W_v||_2 — the paper's Table 1
    quantity), ``median_row_norm``, ``max_row_norm``, ``frobenius`` and ``tied`` (1.0 if W is shared with the
    input embeddings).
    """
    proj = output_projection(backbone)
    w = proj.weight.detach().float()
    rows = w.norm(dim=1)
    inp = backbone.get_input_embeddings() if hasattr(backbone, "get_input_embeddings") else None
    tied = inp is not None and inp.weight.data_ptr() == proj.weight.data_ptr()
    return {
        "mean_row_norm": float(rows.mean()),
        "median_row_norm": float(rows.median()),
        "max_row_norm": float(rows.max()),
        "frobenius": float(w.norm()),
        "tied": float(tied),
    }


@torch.no_grad()
def rescale_mlm_head(backbone: nn.Module, alpha: float) -> None:
    """In place: ``W <- W / alpha`` on the vocabulary projection (mlm-head-rescaling §3.2).

    Tied weights stay tied (the shared parameter is scaled once, in place). Raises ValueError if alpha <= 0.
    """
    if alpha <= 0:
        raise ValueError(f"rescale alpha must be > 0, got {alpha}")
    if alpha == 1.0:
        return
    proj = output_projection(backbone)
    proj.weight.div_(alpha)
