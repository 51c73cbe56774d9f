"""Static pruning of an inverted index: a smaller index of the same format, with its provenance recorded.

Why: learned sparse indexes are bloated compared with BM25's (every document activates hundreds of terms, and
frequent terms carry long posting lists of tiny impacts), which makes them large and slow; users of impact
indexes ask for a cut at build time (OpenSearch neural-search RFC #946). Two classic static cuts, either or both:

* **per-term top-k** (``term_k``): every posting list keeps its ``k`` largest impacts. This is the
  term-centric static index pruning of Carmel et al., "Static index pruning for information retrieval systems"
  (SIGIR 2001), in its simplest form (a fixed ``k`` per term instead of a threshold from the k-th score), as
  used for learned sparse indexes in the static-pruning study of Lassance, Lupart, Déjean, Clinchant and Tonellotto,
  "A static pruning study on sparse neural retrievers" (SIGIR 2023), which also evaluates the next cut;
* **per-document top-k** (``doc_k``): every document keeps its ``k`` largest weights, the document-centric cut
  (Büttcher & Clarke, CIKM 2006) and the "top-k terms per document" of SPLADE's efficiency work (Lassance &
  Clinchant, "An efficiency study for SPLADE models", SIGIR 2022).

Both criteria are judged on the **source** index, and a posting is kept when it passes every requested one (the
result does not depend on the order of the cuts; each per-term list then holds ≤ ``term_k`` postings and each
document ≤ ``doc_k`` terms). Ranking is by the float weight; ties keep the lower ``doc_idx`` (per term) and the
lower term id (per document), so the pruned index is deterministic.

Output (``out_dir``): the layout of :mod:`lexray.index.build` (``doc_ids.parquet`` copied, every document kept
— a document that loses all its terms is counted in ``empty_docs`` and never retrieved; ``offsets.npy`` and the
postings filtered in their term-major, doc-ascending order, so the kept postings carry the source's exact
weights *and* impacts, with the source's ``quant_scale``), and a ``stats.json`` whose statistics describe the
pruned index, with its checksums (``lexray verify --index``) and ``prune``: the source index path and the sha256
of its ``stats.json`` (which holds the sha256 of every source file), the parameters, postings before and after.
Searching it: ``lexray search --index OUT`` and :func:`lexray.open_index` take the model and corpus the source
recorded (:mod:`lexray.search.locate`); ``lexray evaluate --index``-style callers pass it as ``index_dir``.

Memory: the postings' (P,) arrays are read whole (about 30 bytes a posting for the sort keys: 1M postings ≈ 30
MB); an index of billions of postings wants a per-term streaming cut, not done here.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lexray.fsio import file_sha256, publish_folder
from lexray.index.build import STATS_FILE, flops_from_df
from lexray.index.verify import INDEX_FILES, index_checksums, index_problems

__all__ = ["PruneError", "PruneResult", "prune_index", "prune_mask"]


class PruneError(ValueError):
    """Bad pruning input: the message names the argument or key (``term_k``, ``doc_k``, ``--index``, ``--out``)."""


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune_index` wrote: the output folder, postings before/after, and the new ``stats.json``."""

    out_dir: Path
    postings_before: int
    postings_after: int
    stats: dict


def _ranks_in_groups(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rank (0-based) of every element within its group, given ``order``: a permutation sorting by (group, key).
    Returns (P,) int64 ranks in the original element order."""
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, len(g)]))
    ranks = np.empty(len(g), np.int64)
    ranks[order] = np.arange(len(g)) - first
    return ranks


def prune_mask(offsets: np.ndarray, postings_doc: np.ndarray, postings_weight: np.ndarray,
               term_k: int | None = None, doc_k: int | None = None) -> np.ndarray:
    """Which postings survive (module docstring for the rule).

    Args:
        offsets: (|V|+1,) int64 CSR over terms; postings_doc: (P,) int32 doc_idx; postings_weight: (P,) float32.
        term_k: keep the ``term_k`` largest weights of every posting list (None: no per-term cut).
        doc_k: keep the ``doc_k`` largest weights of every document (None: no per-document cut).

    Returns:
        (P,) bool mask over the postings.

    Raises:
        PruneError: neither cut given, or a ``k`` < 1 (names the key).
    """
    _check_k(term_k, doc_k)
    n = len(postings_doc)
    keep = np.ones(n, dtype=bool)
    w = np.asarray(postings_weight, dtype=np.float32)
    if term_k is not None:
        df = np.diff(offsets)
        if n and int(df.max()) > term_k:
            terms = np.repeat(np.arange(len(df), dtype=np.int64), df)
            # (term, weight desc, doc asc); postings are already doc-ascending within a term
            order = np.lexsort((np.asarray(postings_doc), -w, terms))
            keep &= _ranks_in_groups(terms, order) < term_k
    if doc_k is not None and n:
        docs = np.asarray(postings_doc, dtype=np.int64)
        terms = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        order = np.lexsort((terms, -w, docs))  # (doc, weight desc, term asc)
        keep &= _ranks_in_groups(docs, order) < doc_k
    return keep


def _check_k(term_k: int | None, doc_k: int | None) -> None:
    if term_k is None and doc_k is None:
        raise PruneError("give term_k (--term-k: postings kept per term) or doc_k (--doc-k: terms kept per "
                         "document), or both")
    for key, k in (("term_k", term_k), ("doc_k", doc_k)):
        if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
            raise PruneError(f"{key} must be an integer >= 1, got {k!r}")


def _check_paths(index_dir: Path, out_dir: Path) -> dict:
    """The source's stats (refusing a non-index, a damaged index, or an output that is the input or inside it)."""
    stats_path = index_dir / STATS_FILE
    if not index_dir.is_dir():
        raise PruneError(f"--index {index_dir}: no such folder")
    try:
        stats = json.loads(stats_path.read_text())
        int(stats["n_docs"]), int(stats["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PruneError(f"--index {index_dir}: not a lexray index ({stats_path}: {type(e).__name__}: {e}); "
                         "give an index folder (lexray index / evaluate's OUT/index)") from None
    missing = [n for n in INDEX_FILES if not (index_dir / n).is_file()]
    if missing:
        raise PruneError(f"--index {index_dir}: not a complete lexray index (missing {', '.join(missing)})")
    problems = index_problems(index_dir) if stats.get("files_sha256") else []
    if problems:
        raise PruneError(f"--index {index_dir}: damaged source index: {problems[0]}")
    src, out = index_dir.resolve(), out_dir.resolve()
    if out == src or src in out.parents or out in src.parents:
        raise PruneError(f"--out {out_dir} is the input index {index_dir}, inside it or above it: choose a new "
                         "folder")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise PruneError(f"--out {out_dir} exists and is not an empty folder: choose a new one")
    return stats


def prune_index(index_dir: str | os.PathLike, out_dir: str | os.PathLike, term_k: int | None = None,
                doc_k: int | None = None) -> PruneResult:
    """Write the statically pruned copy of ``index_dir`` into ``out_dir`` (module docstring: rule, layout).

    Args:
        index_dir: a lexray index folder (``stats.json`` + the files of :data:`lexray.index.verify.INDEX_FILES`),
            verified against its recorded checksums first.
        out_dir: a new or empty folder; built beside and renamed into place (:func:`lexray.fsio.publish_folder`).
        term_k: postings kept per term (≥ 1), or None. doc_k: terms kept per document (≥ 1), or None.

    Returns:
        :class:`PruneResult`.

    Raises:
        PruneError: no cut or a ``k`` < 1 (names ``term_k`` / ``doc_k``); ``index_dir`` is not a (complete,
            intact) lexray index; ``out_dir`` is the input, inside or above it, or not a new/empty folder.
    """
    _check_k(term_k, doc_k)
    index_dir, out_dir = Path(index_dir), Path(out_dir)
    src_stats = _check_paths(index_dir, out_dir)
    t0 = time.perf_counter()
    offsets = np.load(index_dir / "offsets.npy")
    pdoc = np.load(index_dir / "postings_doc.npy", mmap_mode="r")
    pw = np.load(index_dir / "postings_weight.npy", mmap_mode="r")
    pimp = np.load(index_dir / "postings_impact.npy", mmap_mode="r")
    keep = prune_mask(offsets, pdoc, pw, term_k=term_k, doc_k=doc_k)
    result: list[PruneResult] = []

    def fill(work: Path) -> None:
        shutil.copyfile(index_dir / "doc_ids.parquet", work / "doc_ids.parquet")
        terms = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        df = np.bincount(terms[keep], minlength=len(offsets) - 1).astype(np.int64)
        new_off = np.zeros_like(offsets)
        np.cumsum(df, out=new_off[1:])
        np.save(work / "offsets.npy", new_off)
        new_doc = np.asarray(pdoc)[keep]
        new_w = np.asarray(pw)[keep]
        np.save(work / "postings_doc.npy", new_doc)
        np.save(work / "postings_weight.npy", new_w)
        np.save(work / "postings_impact.npy", np.asarray(pimp)[keep])
        stats = _pruned_stats(src_stats, index_dir, work, df, new_doc, new_w, len(keep), term_k, doc_k,
                              time.perf_counter() - t0)
        result.append(PruneResult(out_dir=out_dir, postings_before=len(keep), postings_after=int(keep.sum()),
                                  stats=stats))

    publish_folder(out_dir, fill, STATS_FILE, replace_stale=False)
    return result[0]


def _pruned_stats(src: dict, index_dir: Path, work: Path, df: np.ndarray, docs: np.ndarray, weights: np.ndarray,
                  before: int, term_k: int | None, doc_k: int | None, seconds: float) -> dict:
    """The source's ``stats.json`` with the pruned index's counts, sizes and checksums, plus ``prune``
    (provenance); written into ``work``."""
    n_docs, n_post = int(src["n_docs"]), int(len(docs))
    flops = flops_from_df(df, n_docs)
    has_post = np.zeros(n_docs, bool)
    has_post[docs] = True
    stats = dict(src)
    stats.update({
        "n_postings": n_post, "n_terms": int(np.count_nonzero(df)),
        "avg_nnz_per_doc": n_post / n_docs if n_docs else 0.0,
        "max_weight": float(weights.max()) if n_post else 0.0,  # quant_scale stays the source's (impacts kept)
        "flops": flops, "flops_x_n": flops * n_docs, "empty_docs": int(n_docs - has_post.sum()),
        "build_seconds": seconds, "postings_per_second": before / seconds if seconds > 0 else 0.0,
        "files_sha256": index_checksums(work),
        "prune": {"source_index": str(index_dir.resolve()), "source_stats_sha256": file_sha256(index_dir / STATS_FILE),
                  "source_files_sha256": src.get("files_sha256", {}), "term_k": term_k, "doc_k": doc_k,
                  "rule": "a posting is kept when it is among the term_k largest weights of its term and the doc_k "
                          "largest of its document, both judged on the source index",
                  "postings_before": before, "postings_after": n_post,
                  "kept_fraction": n_post / before if before else 1.0,
                  "source_index_bytes": int(src.get("index_bytes", 0))},
    })
    data_bytes = sum(f.stat().st_size for f in work.iterdir() if f.is_file())
    stats["index_bytes"] = data_bytes + len(json.dumps(stats, indent=2))
    (work / STATS_FILE).write_text(json.dumps(stats, indent=2) + "\n")
    return stats
