"""Teacher scores for distillation: computed once per (teacher, its settings, collection, mined negatives) and
cached beside the mined negatives.

Why: a distilling phase (``phase.distill``, Formal et al. 2022, arXiv:2205.04733: MarginMSE and KL-Div over a
query's positive and hard negatives) needs the teacher's score of every (query, candidate) pair it may sample.
Scoring costs a retrieval run (BM25) or encoding every candidate (a sparse model); both are paid once. The teacher
is any lexray retriever that scores a (query, document) pair:

* ``bm25``: Lucene BM25 (Anserini's BEIR flat set-up, ``lexray.index.lucene``): each query is searched to
  ``teacher.depth`` ranks and a candidate takes its score in that run. A candidate ranked below ``depth`` takes
  the score at rank ``depth`` (an upper bound of its own score; counted as ``below_depth`` in the report).
* ``sparse``: a lexray sparse model (e.g. ``shared:models/splade-tiny``): the exact dot product of its query and
  document vectors (what its exact index scores, before 8-bit quantization).
* a fusion (the hybrid of the CAI issue) plugs in as another ``kind`` with its own pair scorer.

Cache: the scored groups are written as ``<negatives stem>.teacher-<kind>-<key>.jsonl`` beside the negatives
file (:class:`~lexray.data.hardneg.HardNegativeGroup` with ``positive_scores`` / ``negative_scores`` filled in,
the file training reads). ``key`` is the sha256 (first 16 hex digits) of :func:`teacher_identity` (kind and
settings; a sparse model's content hash, :func:`lexray.encode.identity.model_content_hash`), the corpus's sha256
and the negatives file's sha256: another teacher, other settings, another collection or other negatives give
another file; the same give the same file, which is reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lexray.config import TeacherConfig
from lexray.data.hardneg import HardNegativeGroup
from lexray.fsio import file_sha256

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


@dataclass
class TeacherReport:
    """What a scoring pass did: groups and pairs scored, and BM25 candidates below ``depth`` (scored with the
    score at rank ``depth``)."""

    groups: int = 0
    pairs: int = 0
    below_depth: int = 0
    settings: dict = field(default_factory=dict)

    def summary(self) -> str:
        s = f"teacher {self.settings.get('kind')}: scored {self.pairs} (query, document) pairs of {self.groups} groups"
        if self.settings.get("kind") == "bm25":
            s += f"; {self.below_depth} below rank {self.settings.get('depth')} (scored at that rank)"
        return s


def teacher_identity(teacher: TeacherConfig) -> dict:
    """What identifies the teacher's scores: ``kind`` and the settings that change them (a sparse model by its
    content hash, not its path).

    Raises:
        ValueError: ``kind`` is ``none``.
    """
    if teacher.kind == "bm25":
        return {"kind": "bm25", "k1": teacher.k1, "b": teacher.b, "depth": teacher.depth}
    if teacher.kind == "sparse":
        from lexray.config import ModelConfig
        from lexray.encode.identity import model_content_hash, normalise_model_cfg

        model = normalise_model_cfg(ModelConfig(name_or_path=teacher.model))
        return {"kind": "sparse", "model_hash": model_content_hash(model), "batch_size": teacher.batch_size}
    raise ValueError("train.teacher.kind is 'none': no teacher to score with")


def cache_key(teacher: TeacherConfig, negatives: Path, corpus_dir: Path) -> str:
    """The cache key of :func:`teacher_scores_cached` (16 hex digits; see the module docstring)."""
    ident = {"format_version": FORMAT_VERSION, "teacher": teacher_identity(teacher),
             "corpus_sha256": file_sha256(Path(corpus_dir) / "corpus.jsonl"),
             "negatives_sha256": file_sha256(negatives)}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def teacher_scores_cached(negatives: str | os.PathLike, corpus_dir: str | os.PathLike, teacher: TeacherConfig,
                          bm25_index: str | os.PathLike | None = None) -> tuple[Path, bool]:
    """The negatives file with the teacher's scores, computed on the first call and reused after.

    Args:
        negatives: JSONL hard-negative groups (:mod:`lexray.data.mining`'s output).
        corpus_dir: BEIR folder whose corpus resolves the document ids.
        teacher: ``train.teacher``.
        bm25_index: kind bm25: a Lucene BM25 index of the corpus to reuse (e.g. the mining index); built beside
            the negatives when None or absent.

    Returns:
        ``(scored file, hit)``; ``hit`` is True when the file already existed (nothing was computed).

    Raises:
        ValueError: ``teacher.kind`` is ``none``. lexray.data.report.DataError: a bad group line (file, line,
        field). KeyError: a document id absent from the corpus (names it).
    """
    from lexray.data.beir import resolve_dataset_dir
    from lexray.data.mining import read_groups_jsonl, write_groups_jsonl

    neg = Path(negatives)
    corpus_dir = resolve_dataset_dir(corpus_dir)
    key = cache_key(teacher, neg, corpus_dir)
    path = neg.with_name(f"{neg.stem}.teacher-{teacher.kind}-{key}.jsonl")
    if path.is_file():
        log.info("teacher scores reused: %s", path)
        return path, True
    groups = read_groups_jsonl(neg)
    if teacher.kind == "bm25":
        scored, report = score_bm25(groups, corpus_dir, teacher, bm25_index or neg.parent / "teacher-bm25-index")
    else:
        scored, report = score_sparse(groups, corpus_dir, teacher)
    tmp = path.with_name(path.name + ".tmp")
    write_groups_jsonl(scored, tmp)
    os.replace(tmp, path)  # a reader sees no file or a complete one
    print(f"[lexray] {report.summary()} -> {path}", flush=True)
    return path, False


def _with_scores(groups: Sequence[HardNegativeGroup], score) -> tuple[list[HardNegativeGroup], int]:
    """Copies of ``groups`` whose ``positive_scores`` / ``negative_scores`` are ``score(group, doc_id)``."""
    out, pairs = [], 0
    for g in groups:
        pos = [float(score(g, d)) for d in g.positive_ids]
        neg = [float(score(g, d)) for d in g.negative_ids]
        pairs += len(pos) + len(neg)
        out.append(HardNegativeGroup(g.query_id, g.query, list(g.positive_ids), list(g.negative_ids),
                                     negative_scores=neg, positive_scores=pos))
    return out, pairs


def score_bm25(groups: Sequence[HardNegativeGroup], corpus_dir: Path, teacher: TeacherConfig,
               index_dir: str | os.PathLike) -> tuple[list[HardNegativeGroup], TeacherReport]:
    """BM25 teacher scores (see the module docstring); builds ``index_dir`` when it holds no Lucene index."""
    from lexray.data.beir import iter_id_text
    from lexray.index.lucene import bm25_search_fn, ensure_bm25_index

    index_dir = ensure_bm25_index(lambda: iter_id_text(corpus_dir, on_error="skip"), index_dir)
    search = bm25_search_fn(index_dir, k1=teacher.k1, b=teacher.b, show_progress=False)
    report = TeacherReport(groups=len(groups), settings=teacher_identity(teacher))
    runs: dict[str, dict[str, float]] = {}
    for s in range(0, len(groups), 256):
        batch = groups[s:s + 256]
        runs.update(search([g.query_id for g in batch], [g.query for g in batch], teacher.depth))

    def score(g: HardNegativeGroup, doc_id: str) -> float:
        hits = runs.get(g.query_id) or {}
        if doc_id in hits:
            return hits[doc_id]
        report.below_depth += 1
        return min(hits.values()) if len(hits) >= teacher.depth else 0.0

    out, report.pairs = _with_scores(groups, score)
    return out, report


def score_sparse(groups: Sequence[HardNegativeGroup], corpus_dir: Path, teacher: TeacherConfig
                 ) -> tuple[list[HardNegativeGroup], TeacherReport]:
    """A lexray sparse model's exact dot products ``<Q, D>`` for every (query, candidate) pair of ``groups``."""
    import torch

    from lexray.config import ModelConfig
    from lexray.data.beir import iter_corpus
    from lexray.models import load_encoder

    enc = load_encoder(ModelConfig(name_or_path=teacher.model))
    wanted = {d for g in groups for d in (*g.positive_ids, *g.negative_ids)}
    texts = {doc.doc_id: doc.full_text for doc in iter_corpus(corpus_dir, on_error="skip") if doc.doc_id in wanted}
    missing = sorted(wanted - texts.keys())
    if missing:
        raise KeyError(f"document id {missing[0]!r} of the negatives is not in {corpus_dir} ({len(missing)} missing)")
    doc_ids = sorted(texts)
    d_ids, d_ws = enc.encode_sparse([texts[d] for d in doc_ids], "document", batch_size=teacher.batch_size)
    docs = {d: (torch.as_tensor(i, dtype=torch.long), torch.as_tensor(w))
            for d, i, w in zip(doc_ids, d_ids, d_ws, strict=True)}
    q_texts = sorted({g.query_id: g.query for g in groups}.items())
    q_reps = enc.encode([t for _, t in q_texts], "query", batch_size=teacher.batch_size)
    q_row = {q: r for r, (q, _) in enumerate(q_texts)}

    def score(g: HardNegativeGroup, doc_id: str) -> float:
        ids, ws = docs[doc_id]
        return float(q_reps[q_row[g.query_id]].index_select(0, ids).double() @ ws.double())

    report = TeacherReport(groups=len(groups), settings=teacher_identity(teacher) | {"model": teacher.model})
    out, report.pairs = _with_scores(groups, score)
    return out, report
