"""Exact search against a brute-force dense dot product; impacts within quantization error; a real Cranfield
end-to-end check (term-frequency vectors -> shards -> index -> search -> evaluate)."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexray.index.build import build_index
from lexray.index.search import ExactSearcher, topk_dense

SCHEMA = pa.schema([("doc_id", pa.string()), ("term_ids", pa.list_(pa.int32())), ("weights", pa.list_(pa.float32()))])


def random_shards(d, n_docs, vocab, max_nnz, seed, n_shards=3):
    """Random sparse documents in ``n_shards`` Parquet files; returns the dense (n_docs, vocab) matrix, ids."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True)
    dense = np.zeros((n_docs, vocab), np.float32)
    ids = [f"doc{i}" for i in range(n_docs)]
    for s, idx in enumerate(np.array_split(np.arange(n_docs), n_shards)):
        tids = [rng.choice(vocab, size=rng.integers(0, max_nnz), replace=False).astype(np.int32) for _ in idx]
        ws = [rng.gamma(2.0, 0.7, size=len(t)).astype(np.float32) for t in tids]
        for i, t, w in zip(idx, tids, ws, strict=True):
            dense[i, t] = w
        pq.write_table(pa.table({"doc_id": [ids[i] for i in idx], "term_ids": tids, "weights": ws}, schema=SCHEMA),
                       d / f"shard-{s}.parquet")
    return dense, ids

BACKENDS = ["numba", "numpy"]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    dense, ids = random_shards(d / "shards", n_docs=400, vocab=150, max_nnz=20, seed=3)
    build_index(d / "shards", d / "index", show_progress=False)
    return d / "index", dense, ids


def brute_force_topk(scores: np.ndarray, k: int):
    order = np.lexsort((np.arange(len(scores)), -scores))  # score desc, doc_idx asc
    order = order[scores[order] != 0][:k]
    return scores[order], order


def random_queries(rng, n, vocab, nnz=8):
    ids = [rng.choice(vocab, size=rng.integers(1, nnz), replace=False).astype(np.int32) for _ in range(n)]
    return ids, [rng.gamma(2.0, 0.5, size=len(t)).astype(np.float32) for t in ids]


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_matches_brute_force(small_index, backend):
    index_dir, dense, _ = small_index
    rng = np.random.default_rng(0)
    q_ids, q_ws = random_queries(rng, 25, 150)
    s = ExactSearcher(index_dir, backend=backend)
    k = 60
    scores, idx = s.search(q_ids, q_ws, k=k)
    assert scores.shape == (25, k) and scores.dtype == np.float32 and idx.dtype == np.int64
    for i in range(25):
        q = np.zeros(150, np.float32)
        q[q_ids[i]] = q_ws[i]
        ref = dense.astype(np.float64) @ q.astype(np.float64)
        ref_s, ref_d = brute_force_topk(ref, k)
        n = len(ref_d)
        np.testing.assert_allclose(scores[i, :n], ref_s, rtol=1e-5)
        np.testing.assert_allclose(ref[idx[i, :n]], scores[i, :n], rtol=1e-5)  # each document has its score
        # the same documents; float32 summation order may only swap documents tied with the k-th score
        for doc in set(idx[i, :n].tolist()) ^ set(ref_d.tolist()):
            assert np.isclose(ref[doc], ref_s[-1], rtol=1e-5), (i, doc, ref[doc], ref_s[-1])
        assert np.all(idx[i, n:] == -1) and np.all(np.isneginf(scores[i, n:]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_broken_by_doc_idx(tmp_path, backend):
    # 30 documents that all score exactly 1.0 for term 0, plus a few higher ones
    d = tmp_path / "shards"
    d.mkdir()
    ids = [f"d{i}" for i in range(40)]
    terms = [[0] if i < 30 else [0, 1] for i in range(40)]
    weights = [[1.0] if i < 30 else [1.0, float(40 - i)] for i in range(40)]
    pq.write_table(pa.table({"doc_id": ids, "term_ids": terms, "weights": weights}, schema=SCHEMA),
                   d / "s.parquet")
    build_index(d, tmp_path / "index", show_progress=False)
    s = ExactSearcher(tmp_path / "index", backend=backend)
    scores, idx = s.search([np.array([1, 0], np.int32)], [np.array([1.0, 1.0], np.float32)], k=15)
    assert idx[0].tolist() == list(range(30, 40)) + [0, 1, 2, 3, 4]   # ties at the k-th place: lowest doc_idx
    assert scores[0, :10].tolist() == [11.0 - j for j in range(10)] and scores[0, 10:].tolist() == [1.0] * 5
    # query term order and repeated terms do not matter (repeats are summed)
    s2, i2 = s.search([np.array([0, 1, 0], np.int32)], [np.array([0.5, 1.0, 0.5], np.float32)], k=15)
    np.testing.assert_array_equal(i2, idx)
    np.testing.assert_array_equal(s2, scores)


@pytest.mark.parametrize("backend", BACKENDS)
def test_impacts_within_quantization_error(small_index, backend):
    index_dir, dense, _ = small_index
    rng = np.random.default_rng(1)
    q_ids, q_ws = random_queries(rng, 20, 150)
    exact = ExactSearcher(index_dir, backend=backend)
    quant = ExactSearcher(index_dir, use_impacts=True, backend=backend)
    scale = quant.stats["quant_scale"]
    _, idx = quant.search(q_ids, q_ws, k=400)
    q_s, _ = quant.search(q_ids, q_ws, k=400)
    for i in range(20):
        q = np.zeros(150, np.float32)
        q[q_ids[i]] = q_ws[i]
        true = dense @ q
        valid = idx[i] >= 0
        bound = float(q_ws[i].sum()) * scale / 2 + 1e-5  # each posting is off by at most scale/2
        assert np.all(np.abs(q_s[i][valid] - true[idx[i][valid]]) <= bound)
        assert valid.sum() > 0
    e_s, e_i = exact.search(q_ids, q_ws, k=10)
    assert np.mean([len(set(e_i[i]) & set(idx[i][:10])) for i in range(20)]) >= 8  # rankings mostly agree


def test_backends_agree_and_validation(small_index):
    index_dir, _, ids = small_index
    rng = np.random.default_rng(2)
    q_ids, q_ws = random_queries(rng, 30, 150)
    a = ExactSearcher(index_dir, backend="numba").search(q_ids, q_ws, k=1000)
    b = ExactSearcher(index_dir, backend="numpy").search(q_ids, q_ws, k=1000)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[0], b[0])
    s = ExactSearcher(index_dir)
    with pytest.raises(ValueError, match="query 1: term id out of range"):
        s.search([np.array([1]), np.array([150])], [np.ones(1, np.float32)] * 2)
    with pytest.raises(ValueError, match="query 0: 2 term ids but 1 weights"):
        s.search([np.array([1, 2])], [np.ones(1, np.float32)])
    sc, ix = s.search([np.zeros(0, np.int32)], [np.zeros(0, np.float32)], k=5)
    assert ix.tolist() == [[-1] * 5]
    run = s.search_run(["q1", "q2"], q_ids[:2], q_ws[:2], k=5, batch_size=1)
    assert list(run) == ["q1", "q2"] and all(len(v) == 5 for v in run.values())
    top = s.search(q_ids[:1], q_ws[:1], k=5)
    assert list(run["q1"]) == [ids[j] for j in top[1][0]]
    assert s.doc_ids.tolist() == ids
    with pytest.raises(FileNotFoundError):
        ExactSearcher(index_dir.parent / "nope")


@pytest.mark.parametrize("block_docs", [1, 7, 64, 400, 1 << 16])
def test_blocked_heap_topk_identical_to_partition(small_index, block_docs):
    """The numba kernel (document ranges + one-pass heap) returns exactly the numpy backend's top-k (dense
    accumulator + partition), whatever the range size and k — including ties and short rows."""
    index_dir, _, _ = small_index
    rng = np.random.default_rng(5)
    q_ids, q_ws = random_queries(rng, 30, 150)
    q_ws = [np.round(w) for w in q_ws]  # integer weights: many exact score ties across ranges
    ref = ExactSearcher(index_dir, backend="numpy")
    blk = ExactSearcher(index_dir, backend="numba", block_docs=block_docs, n_threads=2)
    for k in (1, 10, 57, 1000):
        a, b = blk.search(q_ids, q_ws, k=k), ref.search(q_ids, q_ws, k=k)
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[0], b[0])
    with pytest.raises(ValueError, match="block_docs"):
        ExactSearcher(index_dir, block_docs=0)


def test_topk_dense_ties():
    acc = np.array([0, 2, 1, 2, 0, 1, 1], np.float32)
    s, i = topk_dense(acc, 4)
    assert i.tolist() == [1, 3, 2, 5] and s.tolist() == [2, 2, 1, 1]
    s, i = topk_dense(acc, 9)
    assert i.tolist() == [1, 3, 2, 5, 6, -1, -1, -1, -1]


def test_cranfield_end_to_end(tmp_path, cranfield_dir):
    """Real data: log-tf x idf document vectors of Cranfield written as shards, searched exactly, evaluated."""
    from lexray.data.beir import ReadReport, iter_corpus_batches, load_qrels, load_queries
    from lexray.eval.metrics import evaluate

    tok = re.compile(r"[a-z0-9]+")
    vocab: dict[str, int] = {}
    rep = ReadReport()
    docs_tf = []
    for batch in iter_corpus_batches(cranfield_dir, batch_size=500, on_error="skip", report=rep):
        for did, title, text in zip(batch["doc_id"], batch["title"], batch["text"], strict=True):
            tf = Counter(vocab.setdefault(w, len(vocab)) for w in tok.findall(f"{title} {text}".lower()))
            docs_tf.append((did, tf))
    assert rep.skipped == {"empty_text": 2}
    n = len(docs_tf)
    df = Counter(t for _, tf in docs_tf for t in tf)
    idf = {t: math.log(n / c) for t, c in df.items()}
    (tmp_path / "shards").mkdir()
    for s in range(2):  # two shards
        part = docs_tf[s::2]
        terms = [np.array(sorted(tf), np.int32) for _, tf in part]
        ws = [np.array([(1 + math.log(tf[t])) * idf[t] for t in sorted(tf)], np.float32) for _, tf in part]
        pq.write_table(pa.table({"doc_id": [d for d, _ in part], "term_ids": terms, "weights": ws},
                                schema=SCHEMA), tmp_path / "shards" / f"part-{s}.parquet")
    stats = build_index(tmp_path / "shards", tmp_path / "index", vocab_size=len(vocab), show_progress=False)
    assert stats.n_docs == 1398
    queries = load_queries(cranfield_dir, split="test")
    qrels = load_qrels(cranfield_dir, "test")
    qids = list(queries)
    q_ids, q_ws = [], []
    for q in qids:
        tf = Counter(vocab[w] for w in tok.findall(queries[q].lower()) if w in vocab)
        q_ids.append(np.array(list(tf), np.int32))
        q_ws.append(np.array([c * idf[t] for t, c in tf.items()], np.float32))
    run = ExactSearcher(tmp_path / "index").search_run(qids, q_ids, q_ws, k=100)
    m = evaluate(run, qrels, ("nDCG@10", "MRR@10", "R@100"))
    # tf-idf on Cranfield is a known-reasonable baseline (BEIR BM25: nDCG@10 ~0.3); random would be ~0.01
    assert m["nDCG@10"] > 0.2 and m["R@100"] > 0.5, m
