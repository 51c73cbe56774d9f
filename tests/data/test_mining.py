"""Hard-negative mining: positives never become negatives, N is respected, results are deterministic."""

from __future__ import annotations

import json

import pytest

from lexray.data import mining


def _fake_search(depth_docs: int = 60):
    """A search_fn whose ranking is a fixed function of the query id (doc '<q>-<r>' at rank r)."""
    calls = []

    def search_fn(qids, texts, k):
        calls.append((list(qids), k))
        return {q: {f"{q}-{r}": float(depth_docs - r) for r in range(min(k, depth_docs))} for q in qids}

    search_fn.calls = calls
    return search_fn


def test_select_negatives_window_excludes_positives_and_respects_n():
    import numpy as np

    ranked = [(f"d{r}", 100.0 - r) for r in range(50)]
    positives = {"d4", "d5", "d20"}
    got = mining.select_negatives(ranked, positives, num_negatives=10, skip_top=3, depth=30, strategy="top")
    assert [d for d, _ in got] == ["d3", "d6", "d7", "d8", "d9", "d10", "d11", "d12", "d13", "d14"]
    sampled = mining.select_negatives(ranked, positives, num_negatives=10, skip_top=3, depth=30,
                                      rng=np.random.default_rng(0))
    ids = [d for d, _ in sampled]
    assert len(ids) == 10 and not set(ids) & positives
    assert all(3 <= int(d[1:]) < 30 for d in ids)
    assert ids == sorted(ids, key=lambda d: int(d[1:]))  # rank order
    with pytest.raises(ValueError):
        mining.select_negatives(ranked, positives, skip_top=5, depth=5)


def test_mining_is_deterministic_excludes_positives_and_counts():
    queries = {"q1": "one", "q2": "two", "q3": "three", "q4": "four"}
    qrels = {
        "q1": {"q1-3": 1, "q1-10": 2, "q1-11": 0},  # q1-11 judged non-relevant: may be a negative
        "q2": {"q2-0": 1},
        "q3": {"q3-1": 0},  # no positive: skipped and counted
        # q4 has no qrels at all: skipped and counted
    }
    fn = _fake_search()
    groups, report = mining.mine_hard_negatives(queries, qrels, fn, num_negatives=15, skip_top=3, depth=100,
                                                seed=7, batch_size=1, show_progress=False)
    assert [g.query_id for g in groups] == ["q1", "q2"]
    assert report.no_positives == 2 and report.groups_written == 2 and report.queries == 4
    assert [k for _, k in fn.calls] == [100, 100]  # batched, asked for depth
    for g in groups:
        assert len(g.negative_ids) == 15 and len(set(g.negative_ids)) == 15
        assert not set(g.negative_ids) & set(g.positive_ids)
        assert all(int(d.split("-")[1]) >= 3 for d in g.negative_ids)
        assert len(g.negative_scores) == 15
    assert groups[0].positive_ids == ["q1-10", "q1-3"]

    again, _ = mining.mine_hard_negatives(dict(reversed(list(queries.items()))), qrels, _fake_search(),
                                          num_negatives=15, seed=7, batch_size=3, show_progress=False)
    assert {g.query_id: g.negative_ids for g in again} == {g.query_id: g.negative_ids for g in groups}
    other, _ = mining.mine_hard_negatives(queries, qrels, _fake_search(), num_negatives=15, seed=8,
                                          show_progress=False)
    assert [g.negative_ids for g in other] != [g.negative_ids for g in groups]


def test_short_runs_are_counted():
    queries = {"a": "x", "b": "y"}
    qrels = {"a": {"a-0": 1}, "b": {f"b-{r}": 1 for r in range(10)}}
    groups, report = mining.mine_hard_negatives(queries, qrels, _fake_search(depth_docs=10), num_negatives=15,
                                                skip_top=0, depth=100, show_progress=False)
    assert [len(g.negative_ids) for g in groups] == [9]  # 'a' keeps 9; every doc of 'b' is a positive
    assert report.fewer_than_n == 1 and report.no_negatives == 1 and report.positive_retrieved == 2


def test_max_groups_mines_the_head_of_a_full_pass_and_counts_the_rest():
    queries = {f"q{i}": f"text {i}" for i in range(40)}
    qrels = {q: {f"{q}-{i % 7}": 1} for i, q in enumerate(queries) if i % 5}  # q0, q5, ...: no positive
    full, _ = mining.mine_hard_negatives(queries, qrels, _fake_search(), num_negatives=4, seed=3,
                                         show_progress=False)
    fn = _fake_search()
    head, report = mining.mine_hard_negatives(queries, qrels, fn, num_negatives=4, seed=3, max_groups=6,
                                              show_progress=False)
    assert head == full[:6]
    # 40 queries = 8 without a positive (counted before any search) + 6 mined + 26 not mined
    assert report.groups_written == 6 and report.queries == 40 and report.no_positives == 8
    assert report.not_mined == 26 and "26 queries not mined" in report.summary()
    assert sum(len(q) for q, _ in fn.calls) < 40  # the search stopped early too
    with pytest.raises(ValueError, match="max_groups"):
        mining.mine_hard_negatives(queries, qrels, _fake_search(), max_groups=0, show_progress=False)


def test_jsonl_roundtrip_and_validation(tmp_path):
    groups = [mining.HardNegativeGroup("q1", "text", ["d1"], ["d2", "d3"], [2.0, 1.0]),
              mining.HardNegativeGroup("q2", "more", ["d4"], ["d5"], None)]
    path = tmp_path / "hn.jsonl"
    assert mining.write_groups_jsonl(groups, path) == 2
    assert mining.read_groups_jsonl(path) == groups
    assert "negative_scores" not in json.loads(path.read_text().splitlines()[1])
    path.write_text(path.read_text() + json.dumps({"query_id": "q3", "query": "t", "positive_ids": ["d"],
                                                   "negative_ids": "d9"}) + "\n")
    with pytest.raises(ValueError, match=r"hn\.jsonl:3: field 'negative_ids'"):
        mining.read_groups_jsonl(path)


def test_bm25_mining_on_scifact_train(scifact_dir, tmp_path_factory):
    from lexray.data.beir import iter_id_text, load_qrels
    from lexray.index.lucene import bm25_search_fn, build_bm25_index

    index = build_bm25_index(iter_id_text(scifact_dir), tmp_path_factory.mktemp("bm25") / "scifact", show_progress=False)
    groups, report = mining.mine_bm25_negatives(scifact_dir, index.index_dir, split="train", num_negatives=15,
                                                seed=1, show_progress=False)
    qrels = load_qrels(scifact_dir, "train")
    assert report.queries == 809 and report.groups_written == len(groups) == 809
    assert report.positive_retrieved > 0.8 * 809  # BM25 finds a positive in the top 100 for most queries
    for g in groups:
        assert len(g.negative_ids) == 15
        assert not {d for d, rel in qrels[g.query_id].items() if rel > 0} & set(g.negative_ids)
        assert g.negative_scores == sorted(g.negative_scores, reverse=True)
    # deterministic: the same seed gives the same negatives, whatever the batching (checked on 100 queries)
    subset = {g.query_id: g.query for g in groups[:100]}
    again, _ = mining.mine_hard_negatives(subset, qrels, bm25_search_fn(index.index_dir, show_progress=False),
                                          num_negatives=15, seed=1, batch_size=32, show_progress=False)
    assert [g.negative_ids for g in again] == [g.negative_ids for g in groups[:100]]


def test_mined_groups_are_the_training_schema(tmp_path, scifact_dir):
    from lexray.data.beir import iter_corpus
    from lexray.data.hardneg import HardNegativeGroup, HardNegDataset

    assert mining.HardNegativeGroup is HardNegativeGroup  # one schema for mining and training
    ids = [d.doc_id for d, _ in zip(iter_corpus(scifact_dir), range(4), strict=False)]
    path = tmp_path / "mined.jsonl"
    mining.write_groups_jsonl([HardNegativeGroup("7", "q", ids[:1], ids[1:], [3.0, 2.0, 1.0])], path)
    ds = HardNegDataset(path, scifact_dir, num_negatives=2)
    assert ds.groups == mining.read_groups_jsonl(path) and ds.groups[0].negative_scores == [3.0, 2.0, 1.0]
    assert ds.report.summary() == "hard-negative groups kept 1; skipped 0 (none)"
