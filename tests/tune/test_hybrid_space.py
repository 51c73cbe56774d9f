"""tune_spaces/hybrid.yaml (CAI §3.3's BM25 hybrid, searched with Ray Tune): the space loads and validates, fusion
parameters without ``hybrid: bm25`` are refused, and one sampled trial's dev evaluation (the one the trainable runs,
lexray.tune.dev.DevEvaluator) fuses splade-tiny's dev run with BM25 through lexray.index.fusion — the weight moves
the fused score between the sparse run (α = 1) and BM25 (α = 0)."""

from __future__ import annotations

import pytest

from lexray.commands.tune import DEFAULT_RECIPE
from lexray.config import load_config
from lexray.data.splits import carve_dev_split
from lexray.paths import REPO_ROOT
from lexray.tune.dev import DevEvaluator, DevSet
from lexray.tune.space import SpaceError, check_space_against_config, load_space, trial_config


@pytest.fixture(scope="module")
def base():
    return load_config(None, None, base=DEFAULT_RECIPE)


def test_hybrid_space_loads_and_fusion_params_need_hybrid(base, tmp_path):
    space = load_space(REPO_ROOT / "tune_spaces" / "hybrid.yaml")
    check_space_against_config(space, base)
    assert space.hybrid == "bm25" and set(space.params) == {"hybrid.method", "hybrid.weight"}
    assert "rrf" not in space.params["hybrid.method"].choice  # ranx's RRF takes no weight
    p = tmp_path / "s.yaml"
    p.write_text("params:\n  hybrid.weight: {uniform: [0.0, 1.0]}\n")
    with pytest.raises(SpaceError, match=r"params\.hybrid\.weight: a fusion parameter needs hybrid: bm25"):
        load_space(p)
    p.write_text("hybrid: bm25\nparams:\n  hybrid.weight: {uniform: [0.0, 1.5]}\n")
    with pytest.raises(SpaceError, match=r"hybrid\.weight"):
        check_space_against_config(load_space(p), base)


@pytest.fixture(scope="module")
def dev(scifact_dir, tmp_path_factory):
    """8 SciFact train queries; BM25 top-10 over the first 300 documents plus their positives; the dev corpus is
    those lists plus the positives (as lexray.tune.dev.prepare_dev builds it)."""
    from lexray.data import beir
    from lexray.index import lucene

    qrels = beir.load_qrels(scifact_dir, "train", check_ids=False)
    queries = beir.load_queries(scifact_dir, "train")
    split = carve_dev_split(sorted(q for q in qrels if q in queries), 8, seed=0)
    pos = {d for q in split.dev for d in qrels[q]}
    docs = {d.doc_id: d.full_text for i, d in enumerate(beir.iter_corpus(scifact_dir)) if i < 300 or d.doc_id in pos}
    index = tmp_path_factory.mktemp("bm25") / "index"
    lucene.build_bm25_index(list(docs.items()), index, overwrite=True)
    dq = {q: queries[q] for q in split.dev}
    bm25 = lucene.bm25_search(index, dq, k=10, show_progress=False)
    ids = sorted({d for q in split.dev for d in bm25.get(q, {})} | pos)
    return DevSet(dq, {q: dict(qrels[q]) for q in split.dev}, ids, [docs[d] for d in ids], split,
                  bm25={q: dict(bm25.get(q, {})) for q in split.dev})


@pytest.mark.timeout(240)  # ranx compiles its numba kernels on first use (seconds when cached)
def test_one_hybrid_trial_evaluation_fuses_with_bm25(base, dev, splade_tiny_dir):
    from lexray.eval.metrics import evaluate
    from lexray.models import SparseEncoder

    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=128)
    cfg = trial_config(base, {"hybrid.method": "sum", "hybrid.weight": 0.5})  # one sampled trial
    m_h = DevEvaluator(dev, every=1, hybrid=cfg.hybrid)(enc, step=0)
    m_s = DevEvaluator(dev, every=1)(enc, step=0)
    assert "dev_sparse_nDCG@10" not in m_s
    assert m_h["dev_sparse_nDCG@10"] == pytest.approx(m_s["dev_nDCG@10"])
    assert m_h["dev_flops"] == pytest.approx(m_s["dev_flops"])  # efficiency stays the sparse model's
    bm25_ndcg = evaluate(dev.bm25, dev.qrels, ["nDCG@10"])["nDCG@10"]
    only_sparse = DevEvaluator(dev, 1, hybrid=trial_config(base, {"hybrid.weight": 1.0}).hybrid)(enc, 0)
    only_bm25 = DevEvaluator(dev, 1, hybrid=trial_config(base, {"hybrid.weight": 0.0}).hybrid)(enc, 0)
    assert only_sparse["dev_nDCG@10"] == pytest.approx(m_s["dev_nDCG@10"])
    assert only_bm25["dev_nDCG@10"] == pytest.approx(bm25_ndcg)
    assert m_h["dev_nDCG@10"] not in (pytest.approx(m_s["dev_nDCG@10"]), pytest.approx(bm25_ndcg))
    with pytest.raises(ValueError, match="BM25 run"):
        DevEvaluator(DevSet(dev.queries, dev.qrels, dev.doc_ids, dev.doc_texts, dev.split), 1, hybrid=cfg.hybrid)
