"""LexSemBridge: a vocabulary-space lexical vector that modulates a dense vector element-wise.

Source: LexSemBridge (arXiv:2508.17858), ../shared/papers/lexsembridge.txt §3.4-3.5. From the input tokens
``t_1..t_L`` and the encoder's hidden states ``H`` (B, L, d) a lexical importance vector ``w`` (B, |V|) is built
with one of

* SLR, Eq. (5): ``w(t) = log(1 + max_j 1[t = t_j])`` (token presence; log 2 for every present token);
* LLR, Eq. (6): ``w(t) = log(1 + ReLU(h_j U + b)_t)`` with a learned ``U`` (d × |V|), ``b`` (|V|). The equation
  leaves the pooling over positions j implicit; lexray takes the max over attention-mask positions (as SLR's
  ``max_j`` and SPLADE-max do), computed by the fused, vocabulary-blocked head of
  :mod:`lexray.models.fused_head` so no (B, L, |V|) tensor is built;
* CLR, Eq. (7): ``w(t) = log(1 + p_t)`` with ``p = softmax(MLM-Head(h_0))`` at the [CLS] position (the text
  after Eq. 7: "the MLM-Head produces a softmax-normalized probability distribution").

Then (Eq. 8) ``q_lex = softmax(W w)`` with a trainable alignment layer ``W`` (d × |V|, no bias), and (Eq. 9)
``q_out = q_dense ⊙ q_lex``. The lexical-only ablation (Table 6) returns ``q_lex`` itself.

The authors' public code differs (issue 26): LLR there is a d→1 weight per *input* token (``llr_form=
"token_weight"``: ``w(t) = max_{j: t_j = t} log(1 + ReLU(h_j u + c))``, zero for absent tokens) and CLR uses
``log1p(ReLU(logits))`` (``clr_form="logits"``). Both are offered as options; the paper's equations are the default.

Departures offered as options (not in the paper; docs/lexsembridge.md has the measurements behind them):

* ``w_norm="l1"``: ``w / ‖w‖₁`` before the alignment layer. Eq. 8 feeds ``w`` as is, so the scale of ``W w`` (and
  how far one Adam step of ``W`` moves it: up to ``lr · ‖w‖₁``) depends on the lexical vector: ‖w‖₁ ≈ 10-30 for
  SLR, ≈ 1 for CLR (log(1+p) of a distribution), ≈ 10⁴ for a freshly initialised LLR (which then collapses).
  With the l1 norm ``W w`` is a weighted average of W's columns for every bridge.
* ``init="embedding"``: W's column for term t starts as the model's input embedding of t (``E[t] / rms(E)``, times
  ``init_scale``), so a term never seen in training still maps to a direction that depends on it. With torch's
  init (or zero) W is a |V|-column lookup table in which only the terms of the training queries get a gradient.
* ``align="tied"``: ``W = A Ê^T`` with ``Ê = E / rms(E)`` the model's (live) input embeddings and a learned
  ``A`` (d × d_h) that starts at 0 (q_lex uniform: the backbone's ranking at step 0). Every training query's
  terms then train the same d × d_h matrix, and a term unseen in training is mapped through its embedding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from lexray.models.fused_head import VocabProjection, fused_splade_max_pool

BRIDGES = ("slr", "llr", "clr")


class BridgeConfigError(ValueError):
    """A bridge that cannot be built for this model (the message names the ``model.dense.*`` key)."""


class LexSemBridge(nn.Module):
    """The lexical vector (SLR / LLR / CLR) → alignment layer → softmax of LexSemBridge §3.4 (Eq. 5-8).

    Args:
        kind: ``"slr"``, ``"llr"`` or ``"clr"``.
        vocab_size: |V| of the tokenizer (the width of ``w``).
        hidden_size: d_h of the encoder's hidden states (LLR's input).
        dim: d of the dense vector it modulates (the alignment layer's output).
        llr_form: ``"paper"`` (Eq. 6, |V| outputs per position, max-pooled) or ``"token_weight"`` (the authors'
            code, one weight per input token).
        clr_form: ``"paper"`` (log1p of the MLM softmax) or ``"logits"`` (the authors' code, log1p(ReLU(logits))).
        init: ``"default"`` (torch's Linear init of W), ``"zero"`` (W = 0: q_lex starts uniform, 1/d) or
            ``"embedding"`` (W from the input embeddings: call :meth:`init_from_embeddings`; a departure).
        w_norm: ``"none"`` (Eq. 8 as written) or ``"l1"`` (``w / ‖w‖₁`` first; a departure, see the module doc).
        align: ``"full"`` (Eq. 8's W, d × |V|) or ``"tied"`` (``W = A Ê^T``, A zero-initialised; a departure: pass
            the input embeddings to :meth:`forward`).

    Raises:
        BridgeConfigError: an unknown kind (names ``model.dense.bridge``).
    """

    def __init__(self, kind: str, vocab_size: int, hidden_size: int, dim: int, llr_form: str = "paper",
                 clr_form: str = "paper", init: str = "default", w_norm: str = "none", align: str = "full"):
        super().__init__()
        if kind not in BRIDGES:
            raise BridgeConfigError(f"model.dense.bridge: unknown bridge {kind!r}; expected none, "
                                    f"{', '.join(BRIDGES)}")
        if w_norm not in ("none", "l1"):
            raise BridgeConfigError(f"model.dense.bridge_w_norm: unknown {w_norm!r}; expected none or l1")
        self.kind, self.llr_form, self.clr_form, self.w_norm = kind, llr_form, clr_form, w_norm
        self.vocab_size, self.dim = vocab_size, dim
        if align not in ("full", "tied"):
            raise BridgeConfigError(f"model.dense.bridge_align: unknown {align!r}; expected full or tied")
        self.align_form = align
        if align == "tied":  # W = A Ê^T: A (d × d_h), zero at init
            self.align_core = nn.Linear(hidden_size, dim, bias=False)
            nn.init.zeros_(self.align_core.weight)
        else:
            self.align = nn.Linear(vocab_size, dim, bias=False)  # W (d × |V|), Eq. 8
        if align == "tied" and init != "default":
            raise BridgeConfigError("model.dense.bridge_init: only 'default' with bridge_align=tied (A starts at 0)")
        if init == "zero":
            nn.init.zeros_(self.align.weight)
        if kind == "llr":
            self.llr = nn.Linear(hidden_size, vocab_size if llr_form == "paper" else 1)  # U, b (Eq. 6)

    @torch.no_grad()
    def init_from_embeddings(self, embeddings: torch.Tensor, scale: float = 1.0) -> None:
        """``W[:, t] = scale · E[t] / rms(E)`` for the input embedding matrix ``E`` (|V|, d) (``init="embedding"``).

        Raises:
            BridgeConfigError: ``E``'s shape is not (|V|, d) of this bridge (names ``model.dense.bridge_init``).
        """
        if tuple(embeddings.shape) != (self.vocab_size, self.dim):
            raise BridgeConfigError(f"model.dense.bridge_init=embedding: the input embeddings are "
                                    f"{tuple(embeddings.shape)}, the alignment layer needs (|V|, d) = "
                                    f"{(self.vocab_size, self.dim)} (dimension mismatch)")
        e = embeddings.detach().float()
        self.align.weight.copy_((scale * e / e.pow(2).mean().sqrt().clamp_min(1e-12)).T)

    def lexical(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, hidden: torch.Tensor,
                mlm_head: Callable[[torch.Tensor], torch.Tensor] | None) -> torch.Tensor:
        """The importance vector ``w`` (B, |V|) float32 (Eq. 5, 6 or 7).

        Args:
            input_ids: (B, L) long. attention_mask: (B, L) {0,1}. hidden: (B, L, d_h) last hidden states.
            mlm_head: hidden (…, d_h) → logits (…, |V|), for CLR.
        """
        mask = attention_mask.bool()
        B = input_ids.shape[0]
        if self.kind == "slr":
            w = hidden.new_zeros(B, self.vocab_size, dtype=torch.float32)
            w.scatter_reduce_(1, input_ids, mask.float(), reduce="amax", include_self=True)
            return torch.log1p(w)
        if self.kind == "llr":
            if self.llr_form == "paper":
                return fused_splade_max_pool(VocabProjection(_identity, self.llr.weight, self.llr.bias),
                                             hidden, mask)
            tw = torch.log1p(torch.relu(self.llr(hidden).squeeze(-1).float())) * mask.float()  # (B, L)
            w = tw.new_zeros(B, self.vocab_size)
            return w.scatter_reduce(1, input_ids, tw, reduce="amax", include_self=True)
        if mlm_head is None:
            raise BridgeConfigError("model.dense.bridge=clr needs an MLM head, and this model has none")
        logits = mlm_head(hidden[:, 0]).float()  # (B, |V|) at [CLS]
        if self.clr_form == "paper":
            return torch.log1p(torch.softmax(logits, dim=-1))
        return torch.log1p(torch.relu(logits))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, hidden: torch.Tensor,
                mlm_head: Callable[[torch.Tensor], torch.Tensor] | None = None,
                embeddings: torch.Tensor | None = None) -> torch.Tensor:
        """``q_lex = softmax(W w)`` (Eq. 8): (B, d) float32, each row a distribution over the d dimensions."""
        w = self.lexical(input_ids, attention_mask, hidden, mlm_head)
        if self.w_norm == "l1":
            w = w / w.abs().sum(-1, keepdim=True).clamp_min(1e-12)
        if self.align_form == "tied":
            if embeddings is None:
                raise BridgeConfigError("model.dense.bridge_align=tied needs the model's input embeddings")
            e = embeddings.float()
            u = (w @ e) / e.detach().pow(2).mean().sqrt().clamp_min(1e-12)  # Ê^T w: (B, d_h)
            return torch.softmax(self.align_core(u.to(self.align_core.weight.dtype)).float(), dim=-1)
        return torch.softmax(self.align(w.to(self.align.weight.dtype)).float(), dim=-1)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x
