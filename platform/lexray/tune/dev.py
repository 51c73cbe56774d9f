"""The dev split of a search and its evaluation inside a trial.

Dev split (:func:`prepare_dev`): ``tune.dev_queries`` judged queries of ``data.train_split``, chosen by the rule
of :mod:`lexray.data.splits` (smallest ``sha256(f"{tune.dev_seed}:{query_id}")``). They are excluded from the
BM25 hard-negative mining, so the mined training file — the only source of training queries of a
``hard_negatives`` phase — holds none of them; a phase given its own ``data_path`` is checked and refused if it
contains one. The test split (``data.split``) is not read here at all.

Dev corpus: the positives of the dev queries plus BM25's top ``tune.dev_depth`` documents for each (the same
Lucene index the mining used). Ranking this small corpus with the trial's model costs a few hundred document
forward passes instead of the whole corpus, and its hard BM25 candidates keep nDCG@10 discriminative. dev_flops
is the collection FLOPS ``Σ_t (df_t/N)²`` (:func:`lexray.index.build.flops_from_df`) over the dev corpus: an
estimate of the test index's FLOPS from BM25-selected documents, comparable between trials, not equal to it.

Hybrid (a space with ``hybrid: bm25``, e.g. tune_spaces/hybrid.yaml): the trial's sparse dev run is fused with the
BM25 run of the same dev queries (BM25's top ``tune.dev_depth`` over the whole corpus, the list that chose the dev
corpus) by :func:`lexray.index.fusion.fuse_runs` with the trial's ``hybrid.*`` (CAI arXiv:2211.03988 §3.3, Eq. 8);
``dev_nDCG@10``, ``dev_MRR@10`` and ``dev_R@100`` are then the fused run's, and ``dev_sparse_nDCG@10`` the sparse
run's. The efficiency metrics are the sparse model's either way.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lexray.config import LexrayConfig
from lexray.data.splits import DevSplit, carve_dev_split


@dataclass
class DevSet:
    """Dev queries ``{qid: text}``, their qrels, and the dev corpus (ids and ``full_text``s, aligned)."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    doc_ids: list[str]
    doc_texts: list[str]
    split: DevSplit
    bm25: dict[str, dict[str, float]] | None = None
    """BM25's run of the dev queries (top ``tune.dev_depth`` over the whole corpus), for hybrid trials."""


class DevSetError(ValueError):
    """Training data that contains a dev query (the message names the file and a query id)."""


def _training_query_ids(cfg: LexrayConfig) -> dict[str, set[str]]:
    """Query ids of every query-based phase's training file (``hard_negatives`` with a data_path)."""
    from lexray.data.hardneg import iter_group_records

    out: dict[str, set[str]] = {}
    for p in cfg.train.phases:
        if p.data == "hard_negatives" and p.data_path:
            out[p.data_path] = {str(rec["query_id"]) for _, rec in iter_group_records(p.data_path)
                                if isinstance(rec, dict) and "query_id" in rec}
    return out


def assert_disjoint(cfg: LexrayConfig, dev_ids: set[str]) -> None:
    """Raise :class:`DevSetError` if a phase's hard-negative file trains on a dev query."""
    for path, ids in _training_query_ids(cfg).items():
        both = sorted(ids & dev_ids)
        if both:
            raise DevSetError(f"{path}: trains on {len(both)} dev queries (e.g. {both[0]!r}); mine it with the dev "
                              "split excluded (lexray.tune.dev.prepare_dev does) or change tune.dev_seed")


def prepare_dev(cfg: LexrayConfig, out: Path) -> tuple[LexrayConfig, DevSet]:
    """Carve the dev split, mine training negatives without it, and build the dev corpus.

    Returns the config whose phases point at the mined file, and the :class:`DevSet`. Writes
    ``out/dev/split.json`` (rule, seed, dev query ids) and ``out/dev/corpus_ids.txt``.

    Raises:
        DevSetError: a given training file contains a dev query. ValueError: too few queries for the split.
    """
    from lexray.data import beir
    from lexray.index import lucene
    from lexray.workflows import bm25_index, prepare_hard_negatives

    dataset = beir.resolve_dataset_dir(cfg.data.dataset)
    split_name = cfg.data.train_split
    qrels = beir.load_qrels(dataset, split_name, on_error=cfg.data.on_error)
    queries = beir.load_queries(dataset, split_name, on_error=cfg.data.on_error)
    judged = [q for q in qrels if q in queries and any(r > 0 for r in qrels[q].values())]
    tc = cfg.tune
    split = carve_dev_split(judged, tc.dev_queries, tc.dev_seed)
    dev_ids = set(split.dev)
    cfg = prepare_hard_negatives(cfg, out, exclude_query_ids=dev_ids,
                                 tag=f".minus-dev{tc.dev_queries}-s{tc.dev_seed}")
    assert_disjoint(cfg, dev_ids)
    index_dir = bm25_index(dataset, out, cfg.data.on_error)  # mining's, or built now (a recipe without mining)
    dev_queries = {q: queries[q] for q in split.dev}
    run = lucene.bm25_search(index_dir, dev_queries, k=tc.dev_depth, show_progress=False)
    dev_qrels = {q: dict(qrels[q]) for q in split.dev}
    wanted = {d for q in split.dev for d in run.get(q, {})} | {d for q in split.dev for d in qrels[q]}
    docs = {d.doc_id: d.full_text for d in beir.iter_corpus(dataset, on_error=cfg.data.on_error)
            if d.doc_id in wanted}
    doc_ids = sorted(docs)
    dev_dir = out / "dev"
    dev_dir.mkdir(parents=True, exist_ok=True)
    (dev_dir / "split.json").write_text(json.dumps({**split.to_dict(), "train_split": split_name,
                                                    "dev_depth": tc.dev_depth, "n_docs": len(doc_ids)}, indent=1))
    (dev_dir / "corpus_ids.txt").write_text("\n".join(doc_ids) + "\n")
    return cfg, DevSet(dev_queries, dev_qrels, doc_ids, [docs[d] for d in doc_ids], split,
                       bm25={q: dict(run.get(q, {})) for q in split.dev})


class DevEvaluator:
    """Ranks the dev corpus with a trial's current encoder: nDCG@10, MRR@10, R@100, FLOPS, active terms.

    Called by the training loop on rank 0 every ``every`` steps of the last phase
    (:func:`lexray.train.loop.run_phases`); pickled into the Ray Train worker with the dev texts.
    """

    def __init__(self, dev: DevSet, every: int, batch_size: int = 32, hybrid: Any = None):
        """``hybrid``: a :class:`lexray.config.HybridConfig` to fuse the dev run with ``dev.bm25`` (None: no
        fusion)."""
        if hybrid is not None and dev.bm25 is None:
            raise ValueError("a hybrid dev evaluation needs the dev set's BM25 run (DevSet.bm25; prepare_dev sets it)")
        self.dev = dev
        self.every = every
        self.batch_size = batch_size
        self.hybrid = hybrid

    def __call__(self, encoder, step: int) -> dict[str, float]:
        """``encoder``: a :class:`lexray.models.SparseEncoder` (train or eval mode; restored). Returns the
        ``dev_*`` metrics of :data:`lexray.tune.space.DEV_METRICS` plus ``dev_eval_s``."""
        import torch

        t0 = time.perf_counter()
        was_training = encoder.training
        encoder.eval()
        try:
            with torch.inference_mode():
                qids = list(self.dev.queries)
                q_ids, q_ws = encoder.encode_sparse([self.dev.queries[q] for q in qids], "query", self.batch_size)
                d_ids, d_ws = encoder.encode_sparse(self.dev.doc_texts, "document", self.batch_size)
        finally:
            encoder.train(was_training)
        V = encoder.vocab_size
        metrics = score_dev(qids, q_ids, q_ws, self.dev.doc_ids, d_ids, d_ws, self.dev.qrels, V,
                            bm25=self.dev.bm25 if self.hybrid is not None else None, hybrid=self.hybrid)
        metrics["dev_eval_s"] = time.perf_counter() - t0
        return metrics


def score_dev(qids, q_ids, q_ws, doc_ids, d_ids, d_ws, qrels, vocab_size: int, k: int = 100,
              bm25: dict | None = None, hybrid: Any = None) -> dict[str, float]:
    """Exact dot-product ranking of the dev corpus and its metrics (``dev_`` prefixed); with ``bm25`` and
    ``hybrid`` (a :class:`lexray.config.HybridConfig`) the ranking metrics are the fused run's (module docstring)."""
    import scipy.sparse as sp

    from lexray.eval.metrics import evaluate
    from lexray.index.build import flops_from_df

    def csr(ids, ws):
        indptr = np.cumsum([0] + [len(i) for i in ids])
        data = np.concatenate(ws) if ids else np.zeros(0, np.float32)
        ind = np.concatenate(ids) if ids else np.zeros(0, np.int32)
        return sp.csr_matrix((data.astype(np.float32), ind, indptr), shape=(len(ids), vocab_size))

    Q, D = csr(q_ids, q_ws), csr(d_ids, d_ws)
    S = (Q @ D.T).toarray()
    run: dict[str, dict[str, float]] = {}
    for i, q in enumerate(qids):
        top = np.argsort(-S[i], kind="stable")[:k]
        run[q] = {doc_ids[j]: float(S[i, j]) for j in top if S[i, j] > 0}
    m = evaluate(run, qrels, ["nDCG@10", "MRR@10", "R@100"])
    extra = {}
    if bm25 is not None:
        from lexray.index.fusion import fuse_runs

        extra["dev_sparse_nDCG@10"] = m["nDCG@10"]
        fused = fuse_runs(run, bm25, method=hybrid.method, weight=hybrid.weight, depth=hybrid.depth,
                          rrf_k=hybrid.rrf_k, k=k)
        m = evaluate(fused, qrels, ["nDCG@10", "MRR@10", "R@100"])
    df = np.bincount(np.concatenate(d_ids), minlength=vocab_size) if d_ids else np.zeros(vocab_size)
    return {"dev_nDCG@10": m["nDCG@10"], "dev_MRR@10": m["MRR@10"], "dev_R@100": m["R@100"],
            "dev_flops": flops_from_df(df, len(d_ids)),
            "dev_q_terms": float(np.mean([len(i) for i in q_ids])) if q_ids else 0.0,
            "dev_d_terms": float(np.mean([len(i) for i in d_ids])) if d_ids else 0.0, **extra}
