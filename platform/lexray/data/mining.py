"""Hard-negative mining for contrastive training: BM25 (Lucene) or a sparse model's own index.

Why: in-batch negatives are mostly easy; SPLADE-style training gains from negatives that a first-stage
retriever ranks high but that are not judged relevant (Formal et al. 2021, "SPLADE v2", arXiv:2109.10086 §3:
BM25 negatives, then negatives mined with the model itself). The retriever is pluggable: any
``search_fn(query_ids, query_texts, k) -> run`` works (:data:`lexray.index.lucene.SearchFn`), so the training
code mines with BM25 first and with the exact sparse searcher of a trained model later.

Choice of negatives: for each query, retrieve the top ``depth`` documents, drop every positive (qrels > 0),
and keep the candidates whose *original* 0-based rank r satisfies ``skip_top <= r < depth``. From that window
take ``num_negatives``: either a seeded uniform sample (``strategy="sample"``, default) or the highest ranked
(``strategy="top"``), returned in rank order. Skipping the very top ranks (default ``skip_top=3``) and sampling
from a window (default ``depth=100``) follow the observation that the highest-ranked unjudged documents are
often unlabeled positives (false negatives) on sparsely judged collections such as SciFact and MS MARCO
(Qu et al. 2021, "RocketQA", arXiv:2010.08191 §4.2), while a window keeps the negatives hard but varied.
Randomness is drawn from ``numpy.random.default_rng([seed, crc32(query_id)])``: results do not depend on query
order or batching.

Output (JSONL, one group per line): ``{"query_id", "query", "positive_ids": [...], "negative_ids": [...],
"negative_scores": [...]}`` — :class:`lexray.data.hardneg.HardNegativeGroup`, the schema training reads;
document texts are resolved by id at training time.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lexray.data.hardneg import HardNegativeGroup, parse_group
from lexray.data.jsonl import iter_jsonl
from lexray.data.report import ReadReport

log = logging.getLogger(__name__)

Run = dict[str, dict[str, float]]
SearchFn = Callable[[Sequence[str], Sequence[str], int], Run]


@dataclass
class MiningReport:
    """Counts of a mining pass; nothing is dropped without being counted here.

    ``no_positives``: queries skipped because no document has qrels > 0. ``no_negatives``: skipped because the
    window held no non-positive candidate. ``fewer_than_n``: kept with fewer than ``num_negatives``.
    ``positive_retrieved``: queries with at least one positive in the top ``depth`` (a retriever sanity check).
    """

    queries: int = 0
    groups_written: int = 0
    no_positives: int = 0
    no_negatives: int = 0
    fewer_than_n: int = 0
    missing_from_run: int = 0
    positive_retrieved: int = 0
    negatives_total: int = 0
    not_mined: int = 0
    settings: dict = field(default_factory=dict)

    def summary(self) -> str:
        stop = (f"; stopped at max_groups {self.settings['max_groups']}: {self.not_mined} queries not mined"
                if self.settings.get("max_groups") is not None else "")
        return (f"mined {self.groups_written} groups from {self.queries} queries "
                f"({self.negatives_total} negatives); skipped: no positives {self.no_positives}, "
                f"no negatives {self.no_negatives}; fewer than {self.settings.get('num_negatives')} negatives: "
                f"{self.fewer_than_n}; queries absent from the run: {self.missing_from_run}; "
                f"queries with a positive in the top {self.settings.get('depth')}: {self.positive_retrieved}{stop}")


def _query_rng(seed: int, query_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(query_id.encode("utf-8"))])


def select_negatives(ranked: Sequence[tuple[str, float]], positives: Iterable[str], *, num_negatives: int = 15,
                     skip_top: int = 3, depth: int = 100, strategy: str = "sample",
                     rng: np.random.Generator | None = None) -> list[tuple[str, float]]:
    """Pick negatives from one ranked list (best first) — the rule described in the module docstring.

    Args:
        ranked: ``(doc_id, score)`` pairs in rank order (rank 0 first).
        positives: doc ids to exclude (qrels > 0).
        num_negatives: N ≥ 1, the most to return.
        skip_top, depth: the window ``[skip_top, depth)`` of original ranks.
        strategy: ``"sample"`` (uniform without replacement, needs ``rng``) or ``"top"``.

    Returns:
        up to N ``(doc_id, score)`` in rank order.
    """
    if num_negatives < 1:
        raise ValueError(f"num_negatives must be >= 1, got {num_negatives}")
    if not 0 <= skip_top < depth:
        raise ValueError(f"need 0 <= skip_top < depth, got skip_top={skip_top}, depth={depth}")
    if strategy not in ("sample", "top"):
        raise ValueError(f"strategy must be 'sample' or 'top', got {strategy!r}")
    pos = set(positives)
    window = [(d, s) for r, (d, s) in enumerate(ranked[:depth]) if r >= skip_top and d not in pos]
    if len(window) <= num_negatives or strategy == "top":
        return window[:num_negatives]
    if rng is None:
        raise ValueError("strategy='sample' needs an rng")
    idx = np.sort(rng.choice(len(window), size=num_negatives, replace=False))
    return [window[i] for i in idx]


def _ranked(hits: Mapping[str, float]) -> list[tuple[str, float]]:
    # Score descending, then doc id: the same deterministic order the evaluator uses.
    return sorted(hits.items(), key=lambda x: (-x[1], x[0]))


def mine_hard_negatives(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], search_fn: SearchFn,
                        *, num_negatives: int = 15, skip_top: int = 3, depth: int = 100,
                        strategy: str = "sample", seed: int = 42, batch_size: int = 256,
                        with_scores: bool = True, show_progress: bool = True, max_groups: int | None = None
                        ) -> tuple[list[HardNegativeGroup], MiningReport]:
    """Mine hard negatives for ``queries`` ``{qid: text}`` with ``search_fn``.

    Args:
        qrels: ``{qid: {doc_id: relevance}}``; every doc with relevance > 0 is a positive (and never a
            negative). Queries without a positive are skipped and counted.
        search_fn: ``(query_ids, query_texts, k) -> {qid: {doc_id: score}}``, called with ``k=depth`` on
            batches of ``batch_size`` queries.
        num_negatives, skip_top, depth, strategy, seed: see :func:`select_negatives` and the module docstring.
        max_groups: stop once this many groups are mined (a run that trains on the first N groups only,
            ``train.phases[].max_train_examples``). Why it is safe: each query's negatives come from its own
            random stream, so the groups equal the first ``max_groups`` of a full pass. The queries left are
            counted in ``report.not_mined``; batches shrink near the end so that few extra queries are searched.

    Returns:
        ``(groups, report)``; groups in the order of ``queries``.

    Raises:
        ValueError: ``max_groups`` below 1, or invalid selection settings (:func:`select_negatives`).
    """
    if max_groups is not None and max_groups < 1:
        raise ValueError(f"max_groups must be >= 1 (or None for every query), got {max_groups}")
    report = MiningReport(settings=dict(num_negatives=num_negatives, skip_top=skip_top, depth=depth,
                                        strategy=strategy, seed=seed, max_groups=max_groups))
    select_negatives([], [], num_negatives=num_negatives, skip_top=skip_top, depth=depth, strategy=strategy,
                     rng=np.random.default_rng(0))  # validate the settings before searching
    todo: list[tuple[str, str, list[str]]] = []
    for qid, text in queries.items():
        report.queries += 1
        positives = sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0)
        if not positives:
            report.no_positives += 1
            continue
        todo.append((qid, text, positives))

    groups: list[HardNegativeGroup] = []
    done = 0  # queries of ``todo`` mined
    with tqdm(total=len(todo), desc="mining negatives", unit="query", disable=not show_progress) as bar:
        while done < len(todo) and (max_groups is None or len(groups) < max_groups):
            size = batch_size if max_groups is None else min(batch_size, max(8, 2 * (max_groups - len(groups))))
            batch = todo[done:done + size]
            before = done
            run = search_fn([q for q, _, _ in batch], [t for _, t, _ in batch], depth)
            for qid, text, positives in batch:
                if max_groups is not None and len(groups) >= max_groups:
                    break
                done += 1
                if qid not in run:
                    report.missing_from_run += 1
                ranked = _ranked(run.get(qid, {}))
                pos_set = set(positives)
                if any(d in pos_set for d, _ in ranked[:depth]):
                    report.positive_retrieved += 1
                picked = select_negatives(ranked, positives, num_negatives=num_negatives, skip_top=skip_top,
                                          depth=depth, strategy=strategy, rng=_query_rng(seed, qid))
                if not picked:
                    report.no_negatives += 1
                    continue
                if len(picked) < num_negatives:
                    report.fewer_than_n += 1
                report.negatives_total += len(picked)
                groups.append(HardNegativeGroup(
                    qid, text, positives, [d for d, _ in picked],
                    [float(s) for _, s in picked] if with_scores else None))
            bar.update(done - before)
    report.not_mined = len(todo) - done
    report.groups_written = len(groups)
    log.debug("%s", report.summary())  # callers print the report (workflows.prepare_hard_negatives)
    return groups, report


def mine_bm25_negatives(dataset_dir: str | os.PathLike, index_dir: str | os.PathLike, *, split: str = "train",
                        num_negatives: int = 15, skip_top: int = 3, depth: int = 100, strategy: str = "sample",
                        seed: int = 42, k1: float = 0.9, b: float = 0.4, threads: int = 2,
                        show_progress: bool = True, exclude_query_ids: Iterable[str] | None = None,
                        max_groups: int | None = None) -> tuple[list[HardNegativeGroup], MiningReport]:
    """BM25 negatives for a BEIR split, from a Lucene index built by ``lexray.index.lucene.build_bm25_index``.

    ``exclude_query_ids``: queries never searched nor written (a dev split carved from this split,
    :mod:`lexray.data.splits`); they are not counted in the report's ``queries``. ``max_groups``: the first N
    groups only (:func:`mine_hard_negatives`).
    """
    from lexray.data.beir import load_qrels, load_queries
    from lexray.index.lucene import bm25_search_fn

    qrels = load_qrels(dataset_dir, split)
    queries = load_queries(dataset_dir, split)
    if exclude_query_ids is not None:
        excluded = set(exclude_query_ids)
        queries = {q: t for q, t in queries.items() if q not in excluded}
    search_fn = bm25_search_fn(index_dir, k1=k1, b=b, threads=threads, show_progress=False)
    return mine_hard_negatives(queries, qrels, search_fn, num_negatives=num_negatives, skip_top=skip_top,
                               depth=depth, strategy=strategy, seed=seed, show_progress=show_progress,
                               max_groups=max_groups)


def write_groups_jsonl(groups: Iterable[HardNegativeGroup], path: str | os.PathLike) -> int:
    """Write groups as JSONL (one per line); returns the number written. Parent folders are created."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(p, "w", encoding="utf-8") as fh:
        for g in groups:
            fh.write(g.to_json() + "\n")
            n += 1
    return n


def iter_groups_jsonl(path: str | os.PathLike) -> Iterator[HardNegativeGroup]:
    """Read groups written by :func:`write_groups_jsonl`, validating every field
    (:func:`lexray.data.hardneg.parse_group`).

    Raises:
        DataError: a bad line; the message names the file, line and field.
    """
    report = ReadReport()
    for line_no, rec in iter_jsonl(path, report, on_error="fail"):
        yield parse_group(path, line_no, rec)


def read_groups_jsonl(path: str | os.PathLike) -> list[HardNegativeGroup]:
    """All groups of a JSONL file (see :func:`iter_groups_jsonl`)."""
    return list(iter_groups_jsonl(path))
