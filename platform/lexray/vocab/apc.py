"""Activation Potential Calibration (APC, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt §4.2.3, Table 5).

SPLADE's ReLU makes the sparsity of a representation depend on where the logits sit relative to 0: globally low
logits give dead dimensions, globally high ones dense collapse. APC shifts the output bias by a scalar once,
``b′ ← b′ − c``. Either c is given (the paper uses c = 5 for ModernBERT-VT, ≈ 40 % activation), or a target
*activation rate* r* — the fraction of |V| with a positive SPLADE weight, averaged over a probe sample of
documents — is reached by bisection on c (Table 5 sweeps r* from 10 % to 90 %).

Why bisection on cached maxima: a document's weight w_j = max_i log(1 + ReLU(ℓ_ij − c)) is positive iff
max_i ℓ_ij > c, so one forward pass gives the (n_docs, |V|) per-document maximum logits M and
rate(c) = mean(M > c), a non-increasing step function of c; bisection on it needs no further forward passes.
"""

from __future__ import annotations

import logging

import torch

from lexray.models.head import ensure_output_bias

log = logging.getLogger(__name__)


@torch.no_grad()
def max_logits(encoder, texts: list[str], batch_size: int = 8, max_length: int | None = None) -> torch.Tensor:
    """(n_docs, |V|) float32: per document, the maximum over its pooled positions of the vocabulary logits
    (bias included, before ReLU). Runs the encoder's backbone in eval mode."""
    was = encoder.training
    encoder.eval()
    dev = encoder.device
    out = []
    for s in range(0, len(texts), batch_size):
        batch = encoder.tokenize(texts[s:s + batch_size], "document", max_length=max_length)
        batch = {k: v.to(dev) for k, v in batch.items()}
        logits = encoder.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logits = logits.float().masked_fill(~batch["pool_mask"].unsqueeze(-1), float("-inf"))
        out.append(logits.amax(1).cpu())
        del logits
    encoder.train(was)
    return torch.cat(out)


def activation_rate(maxima: torch.Tensor, shift: float = 0.0) -> float:
    """Mean over documents of the fraction of |V| with a positive weight after ``b ← b − shift``."""
    return float((maxima > shift).float().mean())


def solve_shift(maxima: torch.Tensor, target_rate: float, tolerance: float = 1e-3, max_iter: int = 100
                ) -> tuple[float, float]:
    """Bisection for c with ``activation_rate(maxima, c) ≈ target_rate``; returns (c, achieved rate).

    The rate is a step function, so an exact hit may not exist; the closest of the bracket ends is returned after
    ``max_iter`` halvings (the gap is then one step of the function, ≤ 1/n_docs·|V| per tied value).

    Raises:
        ValueError: target_rate outside (0, 1).
    """
    if not 0 < target_rate < 1:
        raise ValueError(f"APC target_rate must be in (0, 1), got {target_rate}")
    finite = maxima[torch.isfinite(maxima)]
    lo, hi = float(finite.min()) - 1.0, float(finite.max()) + 1.0  # rate(lo) = 1, rate(hi) = 0
    best = (lo, 1.0)
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        r = activation_rate(maxima, mid)
        if abs(r - target_rate) < abs(best[1] - target_rate):
            best = (mid, r)
        if abs(r - target_rate) <= tolerance:
            break
        if r > target_rate:
            lo = mid
        else:
            hi = mid
    return best


def centre_terms(maxima: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-term centring of probe maxima: returns ``(maxima - mu, mu)`` with ``mu_v`` the mean over documents of
    term v's max logit (non-finite entries — documents without a pooled position — ignored; 0 if none).

    Why (a lexray extension of APC, not in the VT paper): a causal LM's head adds a per-term prior to every
    logit — frequent tokens (",", " the", " and") score high at every position whatever the input — so one scalar
    shift either keeps those terms active in every document or silences the rest. Subtracting each term's mean
    max logit over a probe sample leaves, per term, how much *this* document raises it above its usual level,
    the quantity a lexical match needs. Measured on SmolLM2-135M's first 2 layers over all of SciFact (cached
    maxima, docs/recipes.md): nDCG@10 0.126 with the best scalar shift, 0.237 centred, before any training.
    """
    finite = torch.isfinite(maxima)
    n = finite.sum(0).clamp_min(1)
    mu = torch.where(finite, maxima, torch.zeros_like(maxima)).sum(0) / n
    return maxima - mu, mu


@torch.no_grad()
def shift_bias(backbone, c: float) -> None:
    """``b ← b − c`` on the vocabulary projection's bias, adding a zero bias first to a bias-less head."""
    bias = ensure_output_bias(backbone)
    bias.sub_(c)


def probe_texts(dataset: str, n_docs: int) -> list[str]:
    """The first ``n_docs`` documents (title + text) of a BEIR corpus (:func:`lexray.data.beir.iter_corpus`)."""
    from lexray.data.beir import iter_corpus

    return [d.full_text for d in iter_corpus(dataset, max_docs=n_docs)]


def apply_apc(encoder, apc, texts: list[str] | None = None, cache: bool = True) -> dict:
    """Apply an :class:`lexray.config.ApcConfig` to a :class:`~lexray.models.SparseEncoder` in place.

    With ``apc.per_term`` every term is first centred on the probe (:func:`centre_terms`), then shifted by c.
    A probe's result is cached (``cache``, :mod:`lexray.vocab.apc_cache`): every process that builds the same
    encoder with the same settings and probe loads the first one's bias instead of running the probe again.

    Returns ``{"shift", "rate_before", "rate_after", "probe_docs", "per_term"}`` (rates are None when only a plain
    ``shift`` is set and no ``texts`` were passed; rates count all of |V|, also terms outside a restricted output
    vocabulary). A no-op returning ``{}`` when neither ``apc.shift`` nor ``apc.target_rate`` is set.
    """
    if not apc.enabled:
        return {}
    out = _apply(encoder, apc, texts, cache)
    settings = getattr(encoder, "settings", None)
    if settings is not None:  # saved with the model: lexray.models.encoder.load_encoder refuses a second APC
        settings.record_calibration("apc", {"shift": float(out["shift"]), "per_term": bool(out["per_term"])})
    return out


def _apply(encoder, apc, texts: list[str] | None, cache: bool) -> dict:
    if apc.target_rate is None and texts is None and not apc.per_term:
        shift_bias(encoder.backbone, apc.shift)
        return {"shift": apc.shift, "rate_before": None, "rate_after": None, "probe_docs": 0, "per_term": False}
    if texts is None:
        texts = probe_texts(apc.probe_dataset, apc.probe_docs)
    bias = ensure_output_bias(encoder.backbone)
    if not cache:
        return _probe_apc(encoder, apc, texts, bias)
    from lexray.vocab.apc_cache import apc_key, cached_apc

    return cached_apc(apc_key(encoder, apc, texts, apc.probe_max_length), bias,
                      lambda: _probe_apc(encoder, apc, texts, bias))


def _probe_apc(encoder, apc, texts: list[str], bias: torch.Tensor) -> dict:
    """APC from the probe's maxima (per-term centring, then the shift); changes ``bias`` in place."""
    m = max_logits(encoder, texts, max_length=apc.probe_max_length)
    centred = None
    if apc.per_term:
        m, centred = centre_terms(m)
        with torch.no_grad():
            bias.sub_(centred.to(bias.device, bias.dtype))
    before = activation_rate(m)
    if apc.target_rate is not None:
        c, after = solve_shift(m, apc.target_rate, apc.tolerance)
    else:
        c, after = float(apc.shift), activation_rate(m, apc.shift)
    shift_bias(encoder.backbone, c)
    info = {"shift": c, "rate_before": before, "rate_after": after, "probe_docs": len(texts),
            "per_term": centred is not None}
    log.info("APC: b <- b - %.4f; activation rate %.3f -> %.3f on %d probe documents", c, before, after, len(texts))
    return info
