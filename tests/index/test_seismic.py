"""Seismic (pyseismic-lsr) over a lexray index: valid, exactly scored results and high recall@10 against
ExactSearcher at a generous setting; recall_at_k itself."""

from __future__ import annotations

import numpy as np
import pytest

from lexray.index.build import build_index
from lexray.index.search import ExactSearcher

pytest.importorskip("seismic")

from lexray.index.seismic import SeismicSearcher, recall_at_k  # noqa: E402


def _index(d, n_docs=3000, vocab=300, seed=11):
    """A dense random sparse matrix (~10 % non-zero) written as one shard and indexed; returns it and the ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    dense = (rng.random((n_docs, vocab)) < 0.1) * rng.gamma(2.0, 0.7, (n_docs, vocab)).astype(np.float32)
    ids = [f"doc{i}" for i in range(n_docs)]
    rows = [np.flatnonzero(r).astype(np.int32) for r in dense]
    (d / "shards").mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": ids, "term_ids": pa.array(rows, pa.list_(pa.int32())),
                             "weights": pa.array([dense[i, r] for i, r in enumerate(rows)], pa.list_(pa.float32()))}),
                   d / "shards" / "s.parquet")
    build_index(d / "shards", d / "index", show_progress=False)
    q_ids = [rng.choice(vocab, size=12, replace=False).astype(np.int32) for _ in range(40)]
    return dense.astype(np.float32), ids, q_ids, [rng.gamma(2.0, 0.5, 12).astype(np.float32) for _ in q_ids]


def test_recall_at_k():
    exact = np.array([[1, 2, 3, -1], [-1, -1, -1, -1]])
    approx = np.array([[3, 9, 1, 2], [5, -1, -1, -1]])
    assert recall_at_k(exact, approx, k=3) == pytest.approx(2 / 3)  # empty exact rows are skipped
    assert recall_at_k(exact, exact, k=4) == 1.0


def test_seismic_recalls_exact_top10(tmp_path):
    dense, ids, q_ids, q_ws = _index(tmp_path)
    exact = ExactSearcher(tmp_path / "index")
    _, e_idx = exact.search(q_ids, q_ws, k=10)
    sei = SeismicSearcher(tmp_path / "index", query_cut=50, heap_factor=1.0, n_threads=1)
    s, d = sei.search(q_ids, q_ws, k=10)
    assert s.shape == d.shape == (40, 10) and d.dtype == np.int64
    assert recall_at_k(e_idx, d, 10) >= 0.95
    for i in range(40):  # returned scores are the true dot products, in descending order
        q = np.zeros(300, np.float32)
        q[q_ids[i]] = q_ws[i]
        valid = d[i] >= 0
        np.testing.assert_allclose(s[i][valid], dense[d[i][valid]] @ q, rtol=1e-3)
        assert np.all(np.diff(s[i][valid]) <= 1e-6)
    run = sei.search_run([f"q{i}" for i in range(3)], q_ids[:3], q_ws[:3], exact.doc_ids, k=5)
    assert list(run) == ["q0", "q1", "q2"] and set(run["q0"]) <= set(ids)
