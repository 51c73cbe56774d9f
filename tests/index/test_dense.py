"""Exact dense search equals brute-force numpy top-k (issue 26's done-when)."""

from __future__ import annotations

import numpy as np
import pytest

from lexray.index.dense import DenseExactSearcher, FaissSearcher


def test_blocked_exact_search_equals_brute_force_top_k():
    rng = np.random.default_rng(0)
    docs = rng.standard_normal((1003, 24)).astype(np.float32)
    # an exact tie whatever the BLAS summation order (small integers: every product and sum is exact in float32);
    # the lower document index ranks first
    docs[5] = rng.integers(-3, 4, 24).astype(np.float32)
    docs[17] = docs[5]
    q = rng.standard_normal((37, 24)).astype(np.float32)
    q[0] = docs[5]
    s = DenseExactSearcher(docs, [f"d{i}" for i in range(len(docs))], block=100)
    scores, idx = s.search(q, k=50)
    full = q @ docs.T
    ref = np.lexsort((np.broadcast_to(np.arange(len(docs)), full.shape), -full), axis=1)[:, :50]
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_allclose(scores, np.take_along_axis(full, ref, 1), rtol=1e-6)
    assert list(idx[0][:2]) == [5, 17]
    big_k, _ = s.search(q[:2], k=5000)  # k > N: every document once
    assert big_k.shape == (2, 1003)
    run = s.search_run(["a"], q[:1], k=3)
    assert list(run["a"]) == ["d5", "d17", f"d{ref[0][2]}"]
    with pytest.raises(ValueError, match="d=24"):
        s.search(q[:, :3], k=2)


def test_faiss_missing_names_the_requirement():
    try:
        import faiss  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="faiss-cpu"):
            FaissSearcher(np.zeros((2, 4), np.float32), ["a", "b"])
    else:
        pytest.skip("faiss installed")
