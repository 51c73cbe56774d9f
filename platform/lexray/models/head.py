"""MLM-head diagnostics and rescaling (arXiv:2606.18811, ../shared/papers/mlm-head-rescaling.txt).

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

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

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
    """In place: ``W <- W / alpha`` on the vocabulary projection (mlm-head-rescaling arXiv:2606.18811 §3.2).

    Tied weights stay tied (the shared parameter is scaled once, in place). Raises ValueError if alpha <= 0.
    """
    if alpha <= 0:
        raise ValueError(f"rescale alpha must be > 0, got {alpha}")
    if alpha == 1.0:
        return
    proj = output_projection(backbone)
    proj.weight.div_(alpha)


OUTPUT_BIAS_FLAG = "lexray_output_bias"
"""Config attribute marking a checkpoint whose bias-less vocabulary projection (e.g. Llama's ``lm_head``) was
given a bias by lexray (VT's PDA/APC, lexray.vocab); :func:`restore_output_bias` re-attaches it on load."""


def output_bias(backbone: nn.Module) -> torch.Tensor | None:
    """The (|V|,) bias of the vocabulary projection, or None when it has none."""
    return getattr(output_projection(backbone), "bias", None)


@torch.no_grad()
def ensure_output_bias(backbone: nn.Module) -> torch.Tensor:
    """Give a bias-less vocabulary projection a zero bias (in place) and mark the config so the bias survives
    ``save_pretrained`` / :func:`restore_output_bias`; returns the bias parameter.

    The projection's weight Parameter is reused, so tied weights stay tied.
    """
    proj = output_projection(backbone)
    if getattr(proj, "bias", None) is not None:
        return proj.bias
    if not isinstance(proj, nn.Linear):
        raise ValueError(f"cannot add a bias to a {type(proj).__name__} vocabulary projection")
    proj.bias = nn.Parameter(torch.zeros(proj.weight.shape[0], dtype=proj.weight.dtype,
                                         device=proj.weight.device))
    setattr(backbone.config, OUTPUT_BIAS_FLAG, True)
    return proj.bias


@torch.no_grad()
def restore_output_bias(backbone: nn.Module, directory) -> None:
    """Re-attach a lexray-added output bias after ``from_pretrained`` (whose architecture has no such parameter
    and drops it). No-op unless the config carries :data:`OUTPUT_BIAS_FLAG`.

    Raises:
        ValueError: the flag is set but no ``*.bias`` of the projection is in the folder's safetensors.
    """
    if not getattr(backbone.config, OUTPUT_BIAS_FLAG, False) or directory is None:
        return
    from pathlib import Path

    from safetensors import safe_open

    proj_name = next(n for n, m in backbone.named_modules() if m is output_projection(backbone))
    key = f"{proj_name}.bias"
    for f in sorted(Path(directory).glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            if key in st.keys():
                bias = ensure_output_bias(backbone)
                bias.copy_(st.get_tensor(key).to(bias.dtype))
                return
    raise ValueError(f"{directory}: config says {OUTPUT_BIAS_FLAG} but no '{key}' tensor was saved")


class _HeldLoadReports(logging.Filter):
    """Holds back transformers' LOAD REPORT records (:func:`expected_output_bias` decides about them after the
    load, once the projection's parameter name is known)."""

    _ANSI = re.compile(r"\x1b\[[0-9;]*m")

    def __init__(self):
        super().__init__()
        self.held: list[logging.LogRecord] = []
        self.model: nn.Module | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in record.getMessage():
            self.held.append(record)
            return False
        return True

    def loaded(self, model: nn.Module) -> None:
        """Name the model that was loaded (its bias key decides which report is the expected one)."""
        self.model = model

    def only_the_bias(self, record: logging.LogRecord) -> bool:
        if self.model is None:
            return False
        key = next(n for n, m in self.model.named_modules() if m is output_projection(self.model)) + ".bias"
        msg = self._ANSI.sub("", record.getMessage())
        rows = [[c.strip() for c in line.split("|")][:2] for line in msg.splitlines() if "|" in line]
        return rows[1:] == [[key, "UNEXPECTED"]]  # rows[0] is the table's header


@contextmanager
def expected_output_bias(config) -> Iterator[_HeldLoadReports]:
    """Around ``from_pretrained`` (call ``.loaded(model)`` on the yielded object inside): for a checkpoint whose
    config carries :data:`OUTPUT_BIAS_FLAG`, drop transformers' LOAD REPORT when its one row is the lexray-added
    bias as UNEXPECTED. The architecture has no output bias, so transformers reports the saved one (a table on the
    console at every load of a trained LACONIC / VT model) and leaves it out; :func:`restore_output_bias` puts it
    back right after. A report with any other row is logged whole, as transformers wrote it.

    Why not save the bias outside ``model.safetensors`` instead: the loaded weights are memory-mapped from that
    file, and a shorter header shifts every tensor's address modulo the SIMD width, which changes the CPU matrix
    kernels' summation and the encoder's outputs by 1 ulp (measured); the file stays byte-identical this way.
    """
    held = _HeldLoadReports()
    if not getattr(config, OUTPUT_BIAS_FLAG, False):
        yield held
        return
    target = logging.getLogger("transformers.modeling_utils")
    target.addFilter(held)
    try:
        yield held
    finally:
        target.removeFilter(held)
        for record in held.held:
            if not held.only_the_bias(record):
                target.handle(record)
