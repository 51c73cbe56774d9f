"""One call from a model (or BM25) and a BEIR collection to metrics: encode → index → search → evaluate.

This is what ``jobs/evaluate.py`` runs and what the training jobs call after training. Each stage reuses the
previous run's output in ``out_dir`` when it is complete and was made by the same model and settings (the encode
stage checks its manifest; the index is rebuilt when the shards' manifest changed).

Layout of ``out_dir``::

    shards/          Parquet sparse shards + manifest.json      (lexray.encode)
    index/           inverted index (DuckDB-built, memory-mapped) (lexray.index.build)
    lucene/          Pyserini impact index (backend "lucene" or "both")
    run.<split>.trec TREC run;  metrics.json;  metrics.md;  config.resolved.yaml
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Literal

import numpy as np

from lexray.config import LexrayConfig, save_config

log = logging.getLogger(__name__)

Backend = Literal["exact", "lucene", "both", "seismic"]


def _queries_and_qrels(cfg: LexrayConfig):
    from lexray.data import beir

    dataset = beir.resolve_dataset_dir(cfg.data.dataset)
    qrels = beir.load_qrels(dataset, cfg.data.split, on_error=cfg.data.on_error)
    queries = beir.load_queries(dataset, cfg.data.split, on_error=cfg.data.on_error)
    missing = [q for q in qrels if q not in queries]
    if missing:
        log.warning("%d queries in qrels have no text and count as 0 (e.g. %s)", len(missing), missing[:3])
    return dataset, queries, qrels


def _dataset_name(dataset: Path) -> str:
    return Path(dataset).name


def evaluate_bm25(cfg: LexrayConfig, out_dir: str | Path) -> dict:
    """Pyserini BM25 (Anserini defaults k1=0.9, b=0.4, flat title+text) on ``cfg.data`` → metrics dict."""
    from lexray.data import beir
    from lexray.eval.metrics import evaluate
    from lexray.eval.report import write_metrics_json, write_per_query
    from lexray.eval.runs import write_trec_run
    from lexray.index import lucene

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out)
    dataset, queries, qrels = _queries_and_qrels(cfg)
    index_dir = out / "bm25-index"
    t0 = time.perf_counter()
    lucene.build_bm25_index(beir.iter_id_text(dataset, on_error=cfg.data.on_error), index_dir, overwrite=True)
    index_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run = lucene.bm25_search(index_dir, queries, k=cfg.eval.top_k)
    search_s = time.perf_counter() - t0
    res = evaluate(run, qrels, cfg.eval.metrics, per_query=True)
    metrics = res["mean"]
    write_per_query(out / f"per_query.{cfg.data.split}.jsonl", res["per_query"])
    write_trec_run(run, out / f"run.{cfg.data.split}.trec", tag="bm25")
    efficiency = {"index_seconds": index_s, "search_qps": len(queries) / max(search_s, 1e-9),
                  "index_bytes": _dir_bytes(index_dir)}
    result = write_metrics_json(out, dataset=_dataset_name(dataset), retriever="bm25", split=cfg.data.split,
                                n_queries=len(qrels), metrics=metrics, efficiency=efficiency)
    return result


def _dir_bytes(path: Path) -> int:
    """Total size in bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def evaluate_sparse(cfg: LexrayConfig, out_dir: str | Path, backend: Backend | None = None,
                    encoder=None, retriever_name: str | None = None, index_dir: str | Path | None = None,
                    hybrid: Literal["bm25"] | None = None) -> dict:
    """Evaluate a sparse encoder (``cfg.model``, or an already loaded ``encoder``) on ``cfg.data``.

    Args:
        cfg: the resolved configuration (model, data, encode, index, eval sections).
        out_dir: output folder (see module docstring).
        backend: ``"exact"`` (DuckDB-built index, exact top-k), ``"lucene"`` (Pyserini impact index),
            ``"both"`` (metrics of both are reported; the exact backend's are the headline) or ``"seismic"``
            (approximate, pyseismic-lsr with ``cfg.eval.seismic``; its metrics are the headline, the exact search
            runs too and ``efficiency`` gets ``seismic_recall@10`` against the exact top-10).
        encoder: a loaded :class:`~lexray.models.SparseEncoder` to use for the queries (the corpus is encoded
            from ``cfg.model`` by the Ray Data pipeline, so pass a saved checkpoint path in ``cfg.model``); used as
            given (``cfg.encode.output_vocab`` applies to ``cfg.model`` only).
        index_dir: search this already built index (e.g. a collection store's version, resolved once with
            ``lexray.store.resolve_current``) instead of encoding and indexing the corpus; exact backend only.
        hybrid: ``"bm25"``: also fuse each backend's run with BM25 (``cfg.hybrid``; :func:`_hybrid`). With
            ``cfg.index.doc_weighting`` every backend searches IDF-weighted queries (:func:`_weight_queries`).

    Returns:
        the metrics.json content: ``{"dataset", "retriever", "split", "n_queries", "metrics", "efficiency"}``.

    Raises:
        ConfigError: ``cfg.model`` names no model (``model.name_or_path``) where it is needed (no ``encoder`` or
            no ``index_dir``).
    """
    from lexray.eval.report import write_metrics_json
    from lexray.models import load_encoder

    if encoder is None or index_dir is None:
        cfg.model.require_source()
    # encode.output_vocab: the terms the head scores for this collection (queries here, documents in encode_corpus)
    cfg = cfg.model_copy(update={"model": cfg.model.with_output_vocab(cfg.encode.output_vocab, cfg.data.dataset)})
    backend = backend or cfg.eval.backend
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out)
    dataset, queries, qrels = _queries_and_qrels(cfg)
    # the model is loaded (and so checked) before the corpus is encoded
    enc = encoder if encoder is not None else load_encoder(cfg.model)
    if index_dir is not None:
        if backend != "exact":
            raise ValueError(f"index_dir= searches an exact index; backend {backend!r} needs the shards")
        index = Path(index_dir)
        manifest, stats, index_s = {}, json.loads((index / "stats.json").read_text()), 0.0
    else:
        index = out / "index"
        manifest, stats, index_s = _encode_and_index(cfg, dataset, out, index)
    # 3. queries -> sparse vectors (in process: queries are few)
    qids = [q for q in qrels if q in queries]
    t0 = time.perf_counter()
    q_ids, q_ws = enc.encode_sparse([queries[q] for q in qids], "query", batch_size=cfg.eval.query_batch_size)
    q_encode_s = time.perf_counter() - t0
    efficiency: dict = {}
    if cfg.index.doc_weighting != "none":
        q_ws = _weight_queries(cfg, enc, dataset, index, out if index_dir is not None else index, q_ids, q_ws)
        efficiency["doc_weighting"] = f"{cfg.index.doc_weighting} ({cfg.index.idf_source})"
    # 4. search
    efficiency.update({
        "avg_query_nnz": float(np.mean([len(i) for i in q_ids])) if qids else 0.0,
        "query_encode_qps": len(qids) / max(q_encode_s, 1e-9),
        "index_build_seconds": index_s,
    })
    efficiency.update(_encode_efficiency(manifest))
    efficiency.update(_index_efficiency(stats, index))
    results, runs = _search_backends(cfg, out, index, backend, enc, {q: queries[q] for q in qids},
                                     (qids, q_ids, q_ws), qrels, efficiency, retriever_name)
    name = retriever_name or str(cfg.model.name_or_path or "random-init")
    if hybrid is not None:
        return _hybrid(cfg, out, dataset, {q: queries[q] for q in qids}, runs, results, qrels, efficiency, name)
    headline = results.get("seismic") or results.get("exact") or results["lucene"]
    if len(results) > 1:
        efficiency["backends"] = results
    return write_metrics_json(out, dataset=_dataset_name(dataset), retriever=name, split=cfg.data.split,
                              n_queries=len(qrels), metrics=headline, efficiency=efficiency)


def evaluate_dense(cfg: LexrayConfig, out_dir: str | Path, encoder=None, retriever_name: str | None = None,
                   shards_dir: str | Path | None = None) -> dict:
    """Evaluate a dense model (``cfg.model.dense`` set; LexSemBridge arXiv:2508.17858) on ``cfg.data``: corpus →
    dense Parquet shards (the same Ray Data pipeline, manifest and resume as sparse shards) → exact blocked top-k
    (:class:`lexray.index.dense.DenseExactSearcher`) and, with ``eval.dense_ann: faiss``, faiss HNSW (its recall@10
    against the exact top-10 in ``efficiency``) → the same metrics and files as :func:`evaluate_sparse`.
    ``shards_dir``: encode the corpus there instead of ``out_dir/shards`` (collections sharing one corpus file
    share one folder; complete shards of the same model, settings and corpus are reused by the encode stage).

    Raises:
        ConfigError: no model. BridgeConfigError: a bridge the model cannot run (names the key).
    """
    from lexray.encode.pipeline import encode_corpus
    from lexray.encode.reader import read_dense
    from lexray.eval.metrics import evaluate
    from lexray.eval.report import write_metrics_json, write_per_query
    from lexray.eval.runs import run_tag, write_trec_run
    from lexray.index.dense import DenseExactSearcher, FaissSearcher, recall_at_k, run_from_topk
    from lexray.models.dense import load_dense_encoder

    cfg.model.require_source()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out)
    dataset, queries, qrels = _queries_and_qrels(cfg)
    enc = encoder if encoder is not None else load_dense_encoder(cfg.model)  # checked before encoding
    shards = Path(shards_dir) if shards_dir is not None else out / "shards"
    manifest = encode_corpus(cfg.model, dataset, shards, cfg.encode, on_error=cfg.data.on_error,
                             max_docs=cfg.data.max_docs)
    doc_ids, vectors = read_dense(shards)
    qids = [q for q in qrels if q in queries]
    t0 = time.perf_counter()
    qv = enc.encode([queries[q] for q in qids], "query", batch_size=cfg.eval.query_batch_size).numpy()
    efficiency: dict = {"query_encode_qps": len(qids) / max(time.perf_counter() - t0, 1e-9),
                        "dim": int(vectors.shape[1]), "index_bytes": _dir_bytes(shards)}
    efficiency.update(_encode_efficiency(manifest))
    exact = DenseExactSearcher(vectors, doc_ids)
    t0 = time.perf_counter()
    scores, idx = exact.search(qv, cfg.eval.top_k)
    efficiency["search_qps"] = len(qids) / max(time.perf_counter() - t0, 1e-9)
    run = run_from_topk(qids, scores, idx, exact.doc_ids)
    res = evaluate(run, qrels, cfg.eval.metrics, per_query=True)
    write_per_query(out / f"per_query.{cfg.data.split}.jsonl", res["per_query"])
    write_trec_run(run, out / f"run.{cfg.data.split}.trec", tag=run_tag(retriever_name or "lexray-dense"))
    headline = res["mean"]
    if cfg.eval.dense_ann == "faiss":
        ann = FaissSearcher(vectors, doc_ids)
        t0 = time.perf_counter()
        a_scores, a_idx = ann.search(qv, cfg.eval.top_k)
        efficiency["faiss_search_qps"] = len(qids) / max(time.perf_counter() - t0, 1e-9)
        efficiency["faiss_recall@10"] = recall_at_k(idx, a_idx, 10)
        efficiency["backends"] = {"exact": headline}
        headline = evaluate(run_from_topk(qids, a_scores, a_idx, exact.doc_ids), qrels, cfg.eval.metrics)
        efficiency["backends"]["faiss"] = headline
    name = retriever_name or str(cfg.model.name_or_path or "random-init")
    return write_metrics_json(out, dataset=_dataset_name(dataset), retriever=name, split=cfg.data.split,
                              n_queries=len(qrels), metrics=headline, efficiency=efficiency)


def _search_backends(cfg: LexrayConfig, out: Path, index: Path, backend: str, enc, topics: dict[str, str],
                     queries_enc: tuple, qrels: dict, efficiency: dict, retriever_name: str | None
                     ) -> tuple[dict, dict]:
    """Step 4 of :func:`evaluate_sparse`: search every requested backend; ``(mean metrics, run)`` per backend
    (Seismic first: it is the headline when it runs)."""
    from lexray.eval.runs import run_tag

    results: dict[str, dict] = {}
    runs: dict[str, dict] = {}
    qids, q_ids, q_ws = queries_enc
    if backend in ("exact", "both", "seismic"):
        searcher, results["exact"], runs["exact"] = _search_exact(cfg, out, index, queries_enc, qrels, efficiency,
                                                                  run_tag(retriever_name or "lexray-exact"))
    if backend == "seismic":
        m, runs["seismic"] = _seismic(cfg, out, searcher, qids, q_ids, q_ws, qrels, efficiency,
                                      run_tag(retriever_name or "lexray-seismic"))
        results = {"seismic": m, **results}
    if backend in ("lucene", "both"):
        results["lucene"], runs["lucene"] = _search_lucene(cfg, out, enc, topics, queries_enc, qrels, efficiency,
                                                           run_tag(retriever_name or "lexray-lucene"))
    return results, runs


def _weight_queries(cfg: LexrayConfig, enc, dataset: Path, index: Path, record_dir: Path, q_ids, q_ws) -> list:
    """``q_t · w_t`` with the collection's term weights (CAI Eq. 6, ``cfg.index``; lexray.index.weighting); the
    statistics are recorded in ``record_dir`` (the index folder, or ``out`` beside a store's published index)."""
    from lexray.data import beir
    from lexray.index import weighting

    def texts():
        return (d.full_text for d in beir.iter_corpus(dataset, on_error=cfg.data.on_error,
                                                      max_docs=cfg.data.max_docs))

    df, n = weighting.collection_stats(index, cfg.index.idf_source, tokenizer=enc.tokenizer, texts=texts,
                                       corpus=f"{dataset} (max_docs={cfg.data.max_docs})", record_dir=record_dir)
    return weighting.weight_queries(q_ids, q_ws, weighting.term_weights(df, n, cfg.index.doc_weighting))


def _bm25_run(cfg: LexrayConfig, dataset: Path, out: Path, queries: dict[str, str], k: int) -> dict:
    """BM25 (Anserini defaults k1=0.9, b=0.4) top-``k`` of ``queries`` over the first ``data.max_docs``
    documents of ``dataset``, index in ``out/bm25-index``."""
    from lexray.data import beir
    from lexray.index import lucene

    index_dir = out / "bm25-index"
    lucene.build_bm25_index(beir.iter_id_text(dataset, on_error=cfg.data.on_error, max_docs=cfg.data.max_docs),
                            index_dir, overwrite=True)
    return lucene.bm25_search(index_dir, queries, k=k)


def _hybrid(cfg: LexrayConfig, out: Path, dataset: Path, queries: dict[str, str], runs: dict[str, dict],
            results: dict[str, dict], qrels: dict, efficiency: dict, name: str) -> dict:
    """``--hybrid bm25``: fuse every backend's sparse run with one BM25 run (``cfg.hybrid``,
    :func:`lexray.index.fusion.fuse_runs`), evaluate, write ``run.<split>[.<backend>].hybrid.trec`` and
    ``run.<split>.bm25.trec``. The record's retriever is the fused one (:func:`fusion.hybrid_name`) and its
    metrics the first backend's fused metrics; ``efficiency.backends`` holds every row (fused per backend,
    sparse per backend, BM25) and ``efficiency.backend_retrievers`` their retriever names."""
    from lexray.eval.metrics import evaluate
    from lexray.eval.report import write_metrics_json, write_per_query
    from lexray.eval.runs import run_tag, write_trec_run
    from lexray.index.fusion import fuse_runs, hybrid_name

    h = cfg.hybrid
    depth = h.depth or cfg.eval.top_k
    bm25 = _bm25_run(cfg, dataset, out, queries, depth)
    split = cfg.data.split
    write_trec_run(bm25, out / f"run.{split}.bm25.trec", tag="bm25")
    fused_name = hybrid_name(name, h.method, h.weight)
    rows: dict[str, dict] = {}
    names: dict[str, str] = {}
    for backend, run in runs.items():
        fused = fuse_runs(run, bm25, method=h.method, weight=h.weight, depth=depth, rrf_k=h.rrf_k,
                          k=cfg.eval.top_k)
        res = evaluate(fused, qrels, cfg.eval.metrics, per_query=True)
        sfx = "" if backend == "exact" else f".{backend}"
        write_trec_run(fused, out / f"run.{split}{sfx}.hybrid.trec", tag=run_tag(f"hybrid-{h.method}"))
        write_per_query(out / f"per_query.{split}{sfx}.hybrid.jsonl", res["per_query"])
        rows[f"hybrid {backend}"], names[f"hybrid {backend}"] = res["mean"], f"{fused_name} [{backend}]"
    for backend, m in results.items():
        rows[backend], names[backend] = m, f"{name} [{backend}]"
    rows["bm25"], names["bm25"] = evaluate(bm25, qrels, cfg.eval.metrics), "bm25"
    efficiency.update(backends=rows, backend_retrievers=names,
                      hybrid={**h.model_dump(), "depth": depth, "with": "bm25"})
    return write_metrics_json(out, dataset=_dataset_name(dataset), retriever=fused_name, split=split,
                              n_queries=len(qrels), metrics=next(iter(rows.values())), efficiency=efficiency)


def _encode_and_index(cfg: LexrayConfig, dataset: Path, out: Path, index: Path) -> tuple:
    """Steps 1–2 of :func:`evaluate_sparse`: corpus → ``out/shards`` (Ray Data; resumes / reuses complete shards)
    → inverted index at ``index``. Returns ``(manifest, index stats, index build seconds)``."""
    from lexray.encode.pipeline import encode_corpus
    from lexray.index.build import build_index

    manifest = encode_corpus(cfg.model, dataset, out / "shards", cfg.encode, on_error=cfg.data.on_error,
                             max_docs=cfg.data.max_docs)
    t0 = time.perf_counter()
    stats = build_index(out / "shards", index, cfg.index)
    return manifest, stats, time.perf_counter() - t0


def _search_exact(cfg: LexrayConfig, out: Path, index: Path, queries_enc: tuple, qrels: dict, efficiency: dict,
                  tag: str) -> tuple:
    """Exact top-k search of the encoded queries ``(qids, term ids, weights)``; writes the per-query metrics and
    the TREC run, adds ``search_qps`` to ``efficiency``. Returns ``(searcher, mean metrics, run)``."""
    from lexray.eval.metrics import evaluate
    from lexray.eval.report import write_per_query
    from lexray.eval.runs import write_trec_run
    from lexray.index.search import ExactSearcher

    qids, q_ids, q_ws = queries_enc
    searcher = ExactSearcher(index)
    t0 = time.perf_counter()
    run = searcher.search_run(qids, q_ids, q_ws, k=cfg.eval.top_k)
    efficiency["search_qps"] = len(qids) / max(time.perf_counter() - t0, 1e-9)
    res = evaluate(run, qrels, cfg.eval.metrics, per_query=True)
    write_per_query(out / f"per_query.{cfg.data.split}.jsonl", res["per_query"])
    write_trec_run(run, out / f"run.{cfg.data.split}.trec", tag=tag)
    return searcher, res["mean"], run


def _search_lucene(cfg: LexrayConfig, out: Path, enc, topics: dict[str, str], queries_enc: tuple, qrels: dict,
                   efficiency: dict, tag: str) -> dict:
    """Lucene impact index of ``out/shards`` (terms per ``cfg.index.lucene_tokens``), impact search of the
    encoded queries, per-query metrics, TREC run and topics file; adds ``lucene_*`` timings and size to
    ``efficiency``. Returns the mean metrics and the run, its scores in weight units
    (:func:`lexray.index.lucene.weight_scores`, for score fusion)."""
    from lexray.eval.metrics import evaluate
    from lexray.eval.report import write_per_query
    from lexray.eval.runs import write_trec_run
    from lexray.index import lucene

    qids, q_ids, q_ws = queries_enc
    t0 = time.perf_counter()
    vocab = (enc.tokenizer.convert_ids_to_tokens(list(range(enc.vocab_size)))
             if cfg.index.lucene_tokens == "vocab" else None)
    lucene.build_impact_index(out / "shards", out / "lucene", bits=cfg.index.quant_bits, overwrite=True,
                              vocab=vocab, show_progress=False,
                              collection_dir=out / "lucene.collection" if cfg.index.keep_lucene_collection
                              else None)
    write_topics(out / f"topics.{cfg.data.split}.tsv", topics)
    efficiency["lucene_index_seconds"] = time.perf_counter() - t0
    efficiency["lucene_index_bytes"] = _dir_bytes(out / "lucene")
    t0 = time.perf_counter()
    run_l = lucene.impact_search(out / "lucene", qids, q_ids, q_ws, k=cfg.eval.top_k, show_progress=False)
    efficiency["lucene_search_qps"] = len(qids) / max(time.perf_counter() - t0, 1e-9)
    res = evaluate(run_l, qrels, cfg.eval.metrics, per_query=True)
    write_per_query(out / f"per_query.{cfg.data.split}.lucene.jsonl", res["per_query"])
    write_trec_run(run_l, out / f"run.{cfg.data.split}.lucene.trec", tag=tag)
    return res["mean"], lucene.weight_scores(run_l, out / "lucene", qids, q_ws)


def write_topics(path: Path, queries: dict[str, str]) -> Path:
    """Queries as a ``qid<TAB>text`` topics file (Pyserini's ``--topics`` for a .tsv path); tabs and newlines
    inside a query become spaces."""
    with open(path, "w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            fh.write(f"{qid}\t{' '.join(str(text).split())}\n")
    return path


def _seismic(cfg: LexrayConfig, out: Path, exact, qids, q_ids, q_ws, qrels, efficiency: dict, tag: str) -> dict:
    """Seismic over the same index: build, search, recall@10 against the exact top-10. Returns (metrics, run)."""
    from lexray.eval.metrics import evaluate
    from lexray.eval.runs import write_trec_run
    from lexray.index.search import run_from_topk
    from lexray.index.seismic import SeismicSearcher, recall_at_k

    sc = cfg.eval.seismic
    t0 = time.perf_counter()
    sei = SeismicSearcher(exact.index_dir, n_postings=sc.n_postings, centroid_fraction=sc.centroid_fraction,
                          summary_energy=sc.summary_energy, query_cut=sc.query_cut, heap_factor=sc.heap_factor,
                          n_threads=sc.threads)
    efficiency["seismic_index_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores, idx = sei.search(q_ids, q_ws, k=cfg.eval.top_k)
    efficiency["seismic_search_qps"] = len(qids) / max(time.perf_counter() - t0, 1e-9)
    _, exact_idx = exact.search(q_ids, q_ws, k=10)
    efficiency["seismic_recall@10"] = recall_at_k(exact_idx, idx, 10)
    efficiency["seismic_settings"] = sc.model_dump()
    run = run_from_topk(qids, scores, idx, exact.doc_ids)
    write_trec_run(run, out / f"run.{cfg.data.split}.seismic.trec", tag=tag)
    return evaluate(run, qrels, cfg.eval.metrics), run


def _encode_efficiency(manifest) -> dict:
    m = manifest.model_dump() if hasattr(manifest, "model_dump") else dict(manifest)
    totals = m.get("totals", m)
    keep = {}
    for k in ("docs", "n_docs", "avg_nnz", "avg_doc_nnz", "docs_per_second", "docs_per_s", "encode_seconds"):
        if k in totals:
            keep[f"encode_{k}" if not k.startswith("encode") else k] = totals[k]
    skipped = (m.get("read_report") or {}).get("skipped")
    if skipped is not None:  # corpus rows skipped under data.on_error=skip (e.g. Cranfield's 2 empty documents)
        keep["encode_docs_skipped"] = int(sum(skipped.values()))
        if skipped:
            keep["encode_skipped_by_reason"] = dict(skipped)
    return keep


def _index_efficiency(stats, index_dir: Path) -> dict:
    s = stats.model_dump() if hasattr(stats, "model_dump") else (
        stats if isinstance(stats, dict) else dict(vars(stats)))
    out = {f"index_{k}": v for k, v in s.items() if isinstance(v, int | float)}
    out["index_bytes"] = _dir_bytes(index_dir)
    return out


def load_metrics(out_dir: str | Path) -> dict:
    """The ``metrics.json`` record an evaluation wrote into ``out_dir``."""
    return json.loads((Path(out_dir) / "metrics.json").read_text())
