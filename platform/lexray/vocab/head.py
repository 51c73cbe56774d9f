"""The migrated model's embeddings and output head (arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2.2).

* Input embeddings: E′ from :mod:`lexray.vocab.init`.
* Output projection: a tied head shares E′ (weight tying is kept: the model is resized, not rebuilt); an untied
  head W (|V|, d) gets the *same* initialization applied to its own rows (overlap rows copied, new rows through
  the same interpolation weights, random rows at W's scale).
* Output bias, Prior-Aware Distribution Alignment (PDA, eq. 10), a Z-score transfer of the target model's bias
  into the source's range: ``b′ = μ(b_src) + σ(b_src) · (b_tgt − μ(b_tgt)) / σ(b_tgt)``.
  Without PDA the bias is transferred like a row (overlap copied, new tokens interpolated).

  A bias-less source head (Llama, SmolLM2) gets a bias (:func:`lexray.models.head.ensure_output_bias`, saved with
  the model). Its source bias is identically 0, so μ(b_src) = σ(b_src) = 0 and eq. 10 gives b′ = 0: PDA is then
  a no-op — such a model keeps its unigram prior inside W·h, and the bias exists to carry APC's shift (b′ = −c).
  ``vt.pda_scale`` sets σ explicitly to inject the target prior anyway (b′ = σ · z(b_tgt)); it is not the paper's
  setting and off by default.
"""

from __future__ import annotations

import torch
from torch import nn

from lexray.models.head import ensure_output_bias, output_bias, output_projection
from lexray.vocab.init import InitResult, apply_interp


def pda(b_tgt: torch.Tensor, mu_src: float, sigma_src: float) -> torch.Tensor:
    """Eq. 10: ``μ_src + σ_src · (b_tgt − μ(b_tgt)) / σ(b_tgt)`` (float32, shape of ``b_tgt``).

    Raises:
        ValueError: ``b_tgt`` is constant (σ = 0).
    """
    b = b_tgt.detach().float()
    sd = float(b.std())
    if sd == 0:
        raise ValueError("PDA: the target bias is constant (std 0)")
    return mu_src + sigma_src * (b - b.mean()) / sd


def is_tied(backbone: nn.Module) -> bool:
    """True when the output projection shares its weight tensor with the input embeddings (weight tying)."""
    inp = backbone.get_input_embeddings()
    return inp.weight.data_ptr() == output_projection(backbone).weight.data_ptr()


@torch.no_grad()
def migrate_backbone(backbone: nn.Module, init: InitResult, *, b_tgt: torch.Tensor | None, use_pda: bool = True,
                     pda_scale: float | None = None, seed: int = 0) -> dict:
    """Resize ``backbone`` (in place) to |V′| = ``init.weights.shape[0]`` and install E′, the head and the bias.

    Returns a dict for the report: ``tied``, ``source_bias`` ("present" / "added"), ``pda`` (μ/σ used or None).

    Raises:
        ValueError: ``use_pda`` without ``b_tgt``, or b_tgt's length ≠ |V′|.
    """
    n_new = init.weights.shape[0]
    tied = is_tied(backbone)
    src_bias = output_bias(backbone)
    src_bias = None if src_bias is None else src_bias.detach().clone()
    w_src = None if tied else output_projection(backbone).weight.detach().clone()
    backbone.resize_token_embeddings(n_new, mean_resizing=False)
    emb = backbone.get_input_embeddings()
    emb.weight.copy_(init.weights.to(emb.weight.dtype))
    if not tied:
        proj = output_projection(backbone)
        proj.weight.copy_(apply_interp(init, w_src, seed=seed + 1).to(proj.weight.dtype))
    info: dict = {"tied": tied, "source_bias": "present" if src_bias is not None else "added", "pda": None}
    bias = ensure_output_bias(backbone)
    if use_pda:
        if b_tgt is None:
            raise ValueError("PDA needs the target bias b_tgt (vt.target_bias)")
        if b_tgt.shape[0] != n_new:
            raise ValueError(f"target bias has {b_tgt.shape[0]} entries, the target vocabulary {n_new}")
        mu = float(src_bias.float().mean()) if src_bias is not None else 0.0
        sd = pda_scale if pda_scale is not None else (float(src_bias.float().std()) if src_bias is not None else 0.0)
        bias.copy_(pda(b_tgt, mu, sd).to(bias.dtype))
        info["pda"] = {"mu_src": mu, "sigma_src": sd, "mu_tgt": float(b_tgt.float().mean()),
                       "sigma_tgt": float(b_tgt.float().std())}
    elif src_bias is not None:
        bias.copy_(apply_interp(init, src_bias, seed=seed + 2).to(bias.dtype))
    else:
        bias.zero_()
    backbone.config.vocab_size = n_new
    return info
