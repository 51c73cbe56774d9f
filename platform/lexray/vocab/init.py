"""Initialization of the migrated embedding table E′ (|V′|, d) (Vocabulary Transfer, arXiv:2607.00004,
../shared/papers/vocabulary-transfer-vt.txt §4.2.2).

* ``semantic`` — Semantic-Init, eq. 7–9: for a new token t ∈ N′, cosine affinities s_t,u = cos(Ẽ_t, Ẽ_u) to every
  anchor u ∈ O in a *target-space* table Ẽ (|V′|, d̃) (eq. 7; e.g. bert-base-uncased's input embeddings — d̃ need
  not equal d), α_t = sparsemax(s_t) (eq. 8), E′_t = Σ_u α_t,u E_src(u) (eq. 9). Overlap rows are copied
  bit-for-bit: E′_u = E_src(u).
* ``rand_all`` — every row random (overlap too); ``rand_new`` — overlap copied, new rows random. Random rows are
  N(μ, σ²) with the per-dimension mean and std of the source table (same scale as the trained rows).
* ``mean`` — Mean-Init: new rows = the centroid of the anchors' source rows.
* ``subtoken`` — SubToken-Init: the mean of the source rows of the source tokenization of the new token's string
  (word-start tokens are tokenized with their leading space, continuations without).

Vectorised: affinities are one (chunk, |O|) matmul per chunk of new tokens, sparsemax works on each row's top-k
(:func:`~lexray.vocab.sparsemax.sparsemax_topk`, exact), and eq. 9 is a sparse (|N′|, |O|) × (|O|, d) product —
the interpolation matrix A is returned so the same weights can initialize an untied output head
(:mod:`lexray.vocab.head`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lexray.vocab.alignment import Alignment, byte_encoder, canonical, tokenizer_convention
from lexray.vocab.sparsemax import sparsemax_topk

METHODS = ("semantic", "rand_all", "rand_new", "mean", "subtoken")


@dataclass
class InitResult:
    """``weights``: E′ (|V′|, d) in the source dtype. The recipe, to apply the same initialization to another
    per-source-token matrix (:func:`apply_interp`): ``method``; ``new_interp``: (|N′|, |V|) sparse COO float32
    with new rows = new_interp @ source (semantic, subtoken; None otherwise); ``random_ids``: target ids drawn at
    random; ``overlap_ids``/``overlap_src``: target ids of O and their source ids; ``new_ids``: N′."""

    weights: torch.Tensor
    method: str
    overlap_ids: np.ndarray
    overlap_src: np.ndarray
    new_ids: np.ndarray
    new_interp: torch.Tensor | None
    random_ids: np.ndarray
    stats: dict


def semantic_weights(alignment: Alignment, target_table: torch.Tensor, top_k: int = 64, chunk: int = 2048
                     ) -> tuple[torch.Tensor, dict]:
    """Sparsemax weights α (eq. 7–8) of every new token over the anchors, as a sparse (|N′|, |O|) COO matrix
    (rows in :attr:`Alignment.new_ids` order, columns in :attr:`Alignment.overlap_ids` order).

    Raises:
        ValueError: ``target_table`` rows ≠ |V′|, or there are no anchors.
    """
    n_t = len(alignment.source_of)
    if target_table.shape[0] < n_t:
        raise ValueError(f"target embedding table has {target_table.shape[0]} rows, the target vocabulary "
                         f"{n_t}")
    ov, new = alignment.overlap_ids, alignment.new_ids
    if len(ov) == 0:
        raise ValueError("Semantic-Init needs anchors: the vocabularies share no token")
    tbl = torch.nn.functional.normalize(target_table[:n_t].detach().float(), dim=1)
    anchors = tbl[torch.from_numpy(ov)]
    rows, cols, vals, supports = [], [], [], []
    k = top_k
    for s in range(0, len(new), chunk):
        ids = torch.from_numpy(new[s:s + chunk])
        sim = tbl[ids] @ anchors.T                                   # eq. 7: (c, |O|) cosine affinities
        v, idx, ks = sparsemax_topk(sim, k)                          # eq. 8
        # next chunk: enough candidates for this chunk's largest support (rows above k are redone, costly)
        k = max(top_k, int(1.25 * int(ks.max())) + 1)
        keep = v > 0
        r = torch.arange(s, s + len(ids)).unsqueeze(1).expand_as(v)
        rows.append(r[keep])
        cols.append(idx[keep])
        vals.append(v[keep])
        supports.append(ks)
    if new.size:
        ind = torch.stack([torch.cat(rows), torch.cat(cols)])
        val = torch.cat(vals)
        sup = torch.cat(supports).float()
        stats = {"support_mean": float(sup.mean()), "support_median": float(sup.median()),
                 "support_max": int(sup.max())}
    else:
        ind, val, stats = torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), {}
    return torch.sparse_coo_tensor(ind, val, (len(new), len(ov)), check_invariants=False).coalesce(), stats


def _subtoken_ids(alignment: Alignment, source_tokenizer, ids: np.ndarray) -> list[list[int]]:
    """Source token ids of each target token's string (word-start tokens with a leading space)."""
    conv = tokenizer_convention(source_tokenizer)
    model = source_tokenizer.backend_tokenizer.model
    enc = byte_encoder()
    out = []
    for t in ids:
        c = canonical(alignment.target_tokens[t], alignment.target_convention)
        text = c.text if c.text is not None else c.raw.decode("utf-8", "replace")
        if conv == "byte_bpe":
            raw = ((" " if c.word_start else "") + text).encode("utf-8")
            toks = [tk.id for tk in model.tokenize("".join(enc[b] for b in raw))]
        elif conv == "sentencepiece":
            toks = [tk.id for tk in model.tokenize(("▁" if c.word_start else "") + text)]
        else:
            toks = source_tokenizer(text, add_special_tokens=False)["input_ids"]
            if not c.word_start and toks:
                cont = source_tokenizer.convert_tokens_to_ids("##" + text)
                toks = [cont] if cont != source_tokenizer.unk_token_id else toks
        out.append(toks)
    return out


def init_embeddings(source: torch.Tensor, alignment: Alignment, method: str = "semantic", *,
                    target_table: torch.Tensor | None = None, source_tokenizer=None, top_k: int = 64,
                    seed: int = 0) -> InitResult:
    """E′ (|V′|, d) from the source table ``source`` (|V|, d) (see the module docstring for the methods).

    Args:
        target_table: Ẽ (|V′|, d̃), needed by ``semantic``.
        source_tokenizer: needed by ``subtoken``.
        top_k: first candidates per row of the exact top-k sparsemax.

    Raises:
        ValueError: unknown method or a missing input it needs.
    """
    if method not in METHODS:
        raise ValueError(f"unknown vt.init method {method!r}; expected one of {METHODS}")
    n_t, n_s = len(alignment.source_of), source.shape[0]
    ov, new = alignment.overlap_ids, alignment.new_ids
    stats: dict = {"method": method}
    interp = None
    random_ids = np.zeros(0, dtype=np.int64)
    if method == "rand_all":
        random_ids = np.arange(n_t)
    elif method == "rand_new":
        random_ids = new
    elif method == "subtoken":
        if source_tokenizer is None:
            raise ValueError("SubToken-Init needs the source tokenizer")
        pieces = _subtoken_ids(alignment, source_tokenizer, new)
        lens = torch.tensor([len(p) for p in pieces])
        empty = int((lens == 0).sum())
        if empty:
            raise ValueError(f"SubToken-Init: {empty} new tokens have no source tokenization")
        r = torch.arange(len(new)).repeat_interleave(lens)
        c = torch.tensor([i for p in pieces for i in p], dtype=torch.long)
        interp = torch.sparse_coo_tensor(torch.stack([r, c]), (1.0 / lens.float()).repeat_interleave(lens),
                                         (len(new), n_s), check_invariants=False).coalesce()
        stats["subtokens_mean"] = float(lens.float().mean())
    elif method == "semantic":
        if target_table is None:
            raise ValueError("Semantic-Init needs the target-space embedding table Ẽ (vt.target_table)")
        alpha, sstats = semantic_weights(alignment, target_table, top_k)
        stats.update(sstats)
        ai = alpha.indices()
        cols = torch.from_numpy(alignment.source_of[ov])[ai[1]]
        interp = torch.sparse_coo_tensor(torch.stack([ai[0], cols]), alpha.values(), (len(new), n_s),
                                         check_invariants=False).coalesce()
    res = InitResult(source, method, ov, alignment.source_of[ov], new, interp, random_ids, stats)
    res.weights = apply_interp(res, source, seed=seed)
    return res


def apply_interp(result: InitResult, source_rows: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Apply an initialization recipe to a matrix with one row per source token (the input embeddings, an untied
    output projection (|V|, d) or a bias (|V|,)): overlap rows copied bit-for-bit, new rows interpolated
    (semantic, subtoken) or set to the anchors' centroid (mean), random rows N(μ, σ²) at that matrix's own
    per-column scale. Returns (|V′|, …) in the dtype of ``source_rows``."""
    squeeze = source_rows.dim() == 1
    m = source_rows.detach().reshape(source_rows.shape[0], -1)
    n_t = len(result.overlap_ids) + len(result.new_ids)
    out = torch.zeros(n_t, m.shape[1], dtype=m.dtype)
    ov, new = torch.from_numpy(result.overlap_ids), torch.from_numpy(result.new_ids)
    anchors = m[torch.from_numpy(result.overlap_src)]
    out[ov] = anchors                                                # overlap rows unchanged (§4.2.2)
    if result.method == "mean" and len(new):
        out[new] = anchors.float().mean(0).to(m.dtype)
    elif result.new_interp is not None and len(new):
        out[new] = torch.sparse.mm(result.new_interp, m.float()).to(m.dtype)   # eq. 9 / sub-token means
    if len(result.random_ids):
        g = torch.Generator().manual_seed(seed)
        mf = m.float()
        rnd = mf.mean(0) + mf.std(0) * torch.randn(len(result.random_ids), m.shape[1], generator=g)
        out[torch.from_numpy(result.random_ids)] = rnd.to(m.dtype)
    return out.squeeze(1) if squeeze else out
