"""evaluate() against hand-computed nDCG / MRR / recall, tie-breaking and the missing-query convention."""

from __future__ import annotations

import math

import pytest

from lexray.eval.metrics import deterministic_run, evaluate, parse_metric

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d5": 1}, "q3": {"d9": 1}}
RUN = {
    "q1": {"d2": 0.9, "d1": 0.5, "d4": 0.3, "d3": 0.1},      # ranks: d2 (0), d1 (1), d4 (-), d3 (2)
    "q2": {"d7": 0.8, "d6": 0.8, "d5": 0.8},                # a three-way tie: doc id ascending puts d5 first
    "qX": {"d1": 1.0},                                       # not in qrels: ignored
}                                                            # q3 has qrels but no run entry: counts 0


def test_hand_computed_example():
    dcg = 1 / math.log2(3) + 2 / math.log2(5)               # trec_eval ndcg: gain = rel, discount log2(rank+1)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    ndcg_q1 = dcg / idcg
    res = evaluate(RUN, QRELS, metrics=("nDCG@10", "MRR@10", "MRR@1", "R@2", "R@100", "P@2"), per_query=True)
    pq, mean = res["per_query"], res["mean"]
    assert set(pq) == {"q1", "q2", "q3"}
    assert pq["q1"]["nDCG@10"] == pytest.approx(ndcg_q1, abs=1e-4)
    assert pq["q2"]["nDCG@10"] == pytest.approx(1.0) and pq["q2"]["MRR@10"] == pytest.approx(1.0)
    assert pq["q1"]["MRR@10"] == pytest.approx(0.5) and pq["q1"]["MRR@1"] == 0.0
    assert pq["q1"]["R@2"] == pytest.approx(0.5) and pq["q1"]["R@100"] == pytest.approx(1.0)
    assert pq["q1"]["P@2"] == pytest.approx(0.5)
    assert all(v == 0.0 for v in pq["q3"].values())
    assert mean["nDCG@10"] == pytest.approx((ndcg_q1 + 1.0 + 0.0) / 3, abs=1e-4)
    assert mean["MRR@10"] == pytest.approx(0.5)
    assert mean["MRR@1"] == pytest.approx(1 / 3)
    assert mean["R@100"] == pytest.approx(2 / 3)
    assert evaluate(RUN, QRELS, metrics=("nDCG@10",)) == {"nDCG@10": mean["nDCG@10"]}


def test_mrr_is_cut_at_k():
    # the only relevant document sits at rank 11: trec_eval's recip_rank would give 1/11
    run = {"q": {f"n{i:02d}": 100.0 - i for i in range(10)} | {"rel": 50.0}}
    qrels = {"q": {"rel": 1}}
    assert evaluate(run, qrels, ("MRR@10",))["MRR@10"] == 0.0
    assert evaluate(run, qrels, ("MRR@11",))["MRR@11"] == pytest.approx(1 / 11)
    assert evaluate(run, qrels, ("MRR",))["MRR"] == pytest.approx(1 / 11)


def test_ties_are_deterministic():
    run = {"q": {"b": 1.0, "a": 1.0, "c": 2.0}}
    assert list(deterministic_run(run)["q"]) == ["c", "a", "b"]
    assert deterministic_run(run, top_k=1) == {"q": {"c": 1.0}}
    # relevant 'a' ties with 'b': doc id ascending ranks it 2nd whatever the dict order
    for r in ({"q": {"b": 1.0, "a": 1.0, "c": 2.0}}, {"q": {"a": 1.0, "c": 2.0, "b": 1.0}}):
        assert evaluate(r, {"q": {"a": 1}}, ("MRR@10",))["MRR@10"] == pytest.approx(0.5)


def test_metric_names():
    assert parse_metric("nDCG@10").trec_measure == "ndcg_cut.10"
    assert parse_metric("r@1000").trec_measure == "recall.1000"
    assert parse_metric("Recall@5").family == "R"
    assert parse_metric("MAP@100").trec_measure == "map_cut.100"
    assert parse_metric("MAP").trec_measure == "map"
    assert parse_metric("P@5").trec_key == "P_5"
    for bad in ("F1@10", "nDCG@0", "R", "ndcg10"):
        with pytest.raises(ValueError):
            parse_metric(bad)
    with pytest.raises(ValueError, match="empty"):
        evaluate(RUN, {})


def test_on_real_scifact_qrels(scifact_dir):
    from lexray.data.beir import load_qrels

    qrels = load_qrels(scifact_dir, "test")
    oracle = {q: {d: float(r) for d, r in docs.items()} for q, docs in qrels.items()}
    res = evaluate(oracle, qrels)
    assert res == {"nDCG@10": pytest.approx(1.0), "MRR@10": pytest.approx(1.0), "R@100": pytest.approx(1.0),
                   "R@1000": pytest.approx(1.0)}
    half = dict(list(oracle.items())[:150])  # the other 150 queries count as 0
    assert evaluate(half, qrels)["nDCG@10"] == pytest.approx(0.5)
