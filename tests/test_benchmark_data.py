"""The benchmarks' synthetic collections stay valid lexray shard folders: ``build_index`` verifies manifests
(issue 11), and a writer that produced a bare manifest broke the 1M search benchmark without any test noticing."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def test_synthetic_shards_are_indexable(tmp_path):
    from search_bench import write_synthetic_shards

    from lexray.config import IndexConfig
    from lexray.index.build import build_index
    from lexray.index.search import ExactSearcher

    man = write_synthetic_shards(tmp_path / "shards", 2_500, nnz=40, rows_per_shard=1_000, show_progress=False)
    stats = build_index(tmp_path / "shards", tmp_path / "index", IndexConfig())
    assert stats.n_docs == 2_500 and man["n_postings"] == stats.n_postings
    ids, ws = ExactSearcher(tmp_path / "index").search([np.array([1, 2, 3], np.int32)],
                                                       [np.ones(3, np.float32)], 5)
    assert ids.shape == (1, 5)
