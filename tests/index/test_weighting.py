"""CAI's IDF weighting (Eq. 6) and BM25 fusion (Eq. 8) give the same rankings on the exact, Lucene and Seismic
backends where the maths says they must, on splade-tiny over a slice of SciFact; bad names are refused.

Tolerances: the exact backend scores float32 dot products. Lucene scores ``Σ q̂·î`` with 8-bit impacts (document
step ``s_d = max w / 255``, query step ``s_q = max q / 255``, both rounded to the nearest level), so a score is
off by at most ``Σ_t (q_t·s_d/2 + w_td·s_q/2 + s_q·s_d/4)`` (the bound below, per query); Lucene's top-10 must
then hold only documents whose exact score is within twice that bound of the exact 10th score. Seismic is run
in its exact regime (every posting kept, every query term used, heap_factor 1); it stores weights at reduced
precision (scores agree to rtol 1e-3, measured 3.6e-4), so near-ties may swap: top-10 overlap ≥ 0.95.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lexray.config import ConfigError, load_config
from lexray.index import weighting
from lexray.index.build import build_index
from lexray.index.fusion import fuse_runs
from lexray.index.search import ExactSearcher, run_from_topk

N_DOCS, N_QUERIES = 80, 24


def _write(shards, ids, t, w):
    shards.mkdir(parents=True)
    pq.write_table(pa.table({"doc_id": ids, "term_ids": pa.array(t, pa.list_(pa.int32())),
                             "weights": pa.array(w, pa.list_(pa.float32()))}), shards / "s.parquet")


@pytest.fixture(scope="module")
def slice_(splade_tiny_dir, scifact_dir, tmp_path_factory):
    """splade-tiny over the first 80 SciFact documents and 24 test queries: SPLADE and bag-of-words (SPLADE-Doc)
    queries, the index, and the corpus token statistics."""
    from lexray.data.beir import iter_corpus, load_queries
    from lexray.models import SparseEncoder

    d = tmp_path_factory.mktemp("cai")
    docs = list(iter_corpus(scifact_dir, max_docs=N_DOCS))
    queries = load_queries(scifact_dir, "test")
    qids = sorted(queries)[:N_QUERIES]
    enc = SparseEncoder.from_pretrained(splade_tiny_dir, doc_max_length=96)
    t, w = enc.encode_sparse([x.full_text for x in docs], "document", batch_size=32)
    _write(d / "shards", [x.doc_id for x in docs], t, w)
    build_index(d / "shards", d / "index", vocab_size=enc.vocab_size, show_progress=False)
    q_t, q_w = enc.encode_sparse([queries[q] for q in qids], "query")
    enc.settings.inference_free_queries = True  # SPLADE-Doc: the query's tokens, weight 1, no forward pass
    b_t, b_w = enc.encode_sparse([queries[q] for q in qids], "query")
    df, n = weighting.token_df(enc.tokenizer, (x.full_text for x in docs), enc.vocab_size)
    return {"dir": d, "docs": docs, "qids": qids, "queries": queries, "doc": (t, w), "splade": (q_t, q_w),
            "bow": (b_t, b_w), "df": df, "n": n, "tokenizer": enc.tokenizer}


def test_term_weights_follow_eq6_and_refuse_unknown_names():
    df = np.array([0, 1, 4, 8])
    idf = weighting.term_weights(df, 8, "idf")
    np.testing.assert_allclose(idf, [1.0, np.log(8), np.log(2), 0.0], rtol=1e-6)  # N_t = 0 -> 1 (Eq. 6)
    np.testing.assert_allclose(weighting.term_weights(df, 8, "sqrt_idf"), [1.0, *np.sqrt(idf[1:])], rtol=1e-6)
    assert np.all(weighting.term_weights(df, 8, "none") == 1)
    with pytest.raises(ValueError, match="index.doc_weighting"):
        weighting.term_weights(df, 8, "bm25")
    with pytest.raises(ConfigError, match="index.doc_weighting"):
        load_config(None, ["index.doc_weighting=tfidf"], require_model=False)
    with pytest.raises(ConfigError, match="hybrid.method"):
        load_config(None, ["hybrid.method=combmnz"], require_model=False)
    with pytest.raises(ConfigError, match="hybrid.weight"):
        load_config(None, ["hybrid.method=rrf", "hybrid.weight=0.3"], require_model=False)


def test_token_df_counts_documents_not_occurrences(splade_tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(splade_tiny_dir)
    df, n = weighting.token_df(tok, ["cell cell cell", "cell death", "apoptosis"], tok.vocab_size)
    cell, death = tok.convert_tokens_to_ids(["cell", "death"])
    assert n == 3 and df[cell] == 2 and df[death] == 1
    assert all(df[i] == 0 for i in tok.all_special_ids)  # [CLS]/[SEP] are not counted (weight stays 1)


def test_query_side_weighting_equals_document_side_weighting(slice_):
    """Σ_t (q_t·w_t)·d_t on the plain index = Σ_t q_t·(w_t·d_t) on an index of weighted documents (Eq. 7)."""
    d, (t, w) = slice_["dir"], slice_["doc"]
    wt = weighting.term_weights(slice_["df"], slice_["n"], "idf")
    _write(d / "weighted-shards", [x.doc_id for x in slice_["docs"]], t, [x * wt[i] for i, x in zip(t, w, strict=True)])
    build_index(d / "weighted-shards", d / "weighted-index", vocab_size=len(wt), show_progress=False)
    q_t, q_w = slice_["splade"]
    s1, i1 = ExactSearcher(d / "index").search(q_t, weighting.weight_queries(q_t, q_w, wt), k=10)
    s2, i2 = ExactSearcher(d / "weighted-index").search(q_t, q_w, k=10)
    np.testing.assert_allclose(s1, s2, rtol=1e-5)
    assert np.mean(i1 == i2) >= 0.99  # the same lists (a float tie may swap a pair)
    assert not np.array_equal(i1, ExactSearcher(d / "index").search(q_t, q_w, k=10)[1])  # weighting matters


def _bound(qw, doc_scale, qmax, max_w):
    sd, sq = doc_scale / 255, qmax / 255
    return float(np.sum(qw * sd / 2 + max_w * sq / 2 + sd * sq / 4))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("queries,weights", [("bow", "sqrt_idf"), ("splade", "idf")])
def test_weighted_queries_rank_alike_on_exact_lucene_and_seismic(slice_, queries, weights):
    """SPLADE-Doc + √IDF (bag-of-words queries weighted on the query side) and SPLADE + IDF (the model's query
    weights times idf: a wider query range for Lucene's per-query 8-bit scale) on all three backends."""
    pytest.importorskip("seismic")
    from lexray.index import lucene
    from lexray.index.seismic import SeismicSearcher

    d, qids = slice_["dir"], slice_["qids"]
    wt = weighting.term_weights(slice_["df"], slice_["n"], weights)
    q_t, q_w = slice_[queries]
    if queries == "bow":
        assert all(set(np.unique(x)) == {1.0} for x in q_w if len(x))  # binary bag
    q_w = weighting.weight_queries(q_t, q_w, wt)
    exact = ExactSearcher(d / "index")
    e_s, e_i = exact.search(q_t, q_w, k=N_DOCS)
    if not (d / "lucene").is_dir():  # one impact index of the (unweighted) documents for every weighting
        lucene.build_impact_index(d / "shards", d / "lucene", vocab=None, show_progress=False)
    run_l = lucene.weight_scores(lucene.impact_search(d / "lucene", qids, q_t, q_w, k=10, show_progress=False),
                                 d / "lucene", qids, q_w)
    doc_scale = json.loads((d / "index" / "stats.json").read_text())["max_weight"]
    exact_score = {q: dict(zip(exact.doc_ids[e_i[n][e_i[n] >= 0]], e_s[n][e_i[n] >= 0], strict=True))
                   for n, q in enumerate(qids)}
    for n, q in enumerate(qids):
        b = _bound(q_w[n], doc_scale, float(q_w[n].max()), doc_scale)
        tenth = e_s[n][9]
        for doc, s in run_l[q].items():
            assert abs(s - exact_score[q][doc]) <= b + 1e-5
            assert exact_score[q][doc] >= tenth - 2 * b
    sei = SeismicSearcher(d / "index", n_postings=N_DOCS, centroid_fraction=1.0, summary_energy=1.0,
                          query_cut=10_000, heap_factor=1.0, n_threads=1)
    s_s, s_i = sei.search(q_t, q_w, k=10)
    np.testing.assert_allclose(s_s, e_s[:, :10], rtol=1e-3)  # Seismic keeps weights at reduced precision
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(s_i, e_i[:, :10], strict=True)]) >= 0.95
    if queries != "bow":
        return
    slice_["runs"] = {"exact": run_from_topk(qids, e_s[:, :10], e_i[:, :10], exact.doc_ids), "lucene": run_l,
                      "seismic": run_from_topk(qids, s_s, s_i, exact.doc_ids)}


@pytest.mark.timeout(300)
def test_hybrid_fusion_ranks_alike_on_every_backend(slice_):
    """Fusing each backend's run with the same BM25 run gives the same fused top-10, up to the near-tie swaps
    allowed above (top-10 overlap ≥ 0.95 for Seismic, ≥ 0.9 for 8-bit Lucene)."""
    if "runs" not in slice_:
        pytest.skip("needs the backend runs of the previous test")
    from lexray.index import lucene

    d, qids = slice_["dir"], slice_["qids"]
    lucene.build_bm25_index(((x.doc_id, x.full_text) for x in slice_["docs"]), d / "bm25", overwrite=True)
    bm25 = lucene.bm25_search(d / "bm25", {q: slice_["queries"][q] for q in qids}, k=10)
    runs = slice_["runs"]
    for method in ("sum", "minmax", "zscore", "rrf"):
        fused = {b: fuse_runs(r, bm25, method=method, k=10) for b, r in runs.items()}
        for backend, floor in (("seismic", 0.95), ("lucene", 0.9)):
            overlap = np.mean([len(set(fused[backend][q]) & set(fused["exact"][q])) / max(len(fused["exact"][q]), 1)
                               for q in qids])
            assert overlap >= floor, (method, backend, overlap)


def test_fuse_sum_is_eq8_over_the_union_with_missing_scores_zero():
    sparse = {"q1": {"a": 3.0, "b": 1.0}, "q2": {"x": 1.0}}
    bm25 = {"q1": {"a": 10.0, "d": 12.0}, "q3": {"z": 4.0}}
    fused = fuse_runs(sparse, bm25, "sum")
    # α = 0.5: half of Eq. 8's BM25 + SPLADE, over the union; a document missing from a list gets 0 from it
    assert fused["q1"] == {"a": 6.5, "d": 6.0, "b": 0.5}
    assert fused["q2"] == {"x": 0.5} and fused["q3"] == {"z": 2.0}
    assert list(fuse_runs(sparse, bm25, "sum", weight=1.0)["q1"])[:2] == ["a", "b"]
    rrf = fuse_runs(sparse, bm25, "rrf")
    assert rrf["q1"]["a"] == pytest.approx(1 / 61 + 1 / 62)
    with pytest.raises(ValueError, match="hybrid.weight"):
        fuse_runs(sparse, bm25, "rrf", weight=0.2)
    with pytest.raises(ValueError, match="hybrid.method"):
        fuse_runs(sparse, bm25, "combmnz")


def test_minmax_zscore_and_rrf_follow_ranx_formulas_with_missing_documents_and_queries():
    """The normalizations are per query and per list (ranx's min-max and zmuv, denominators floored at 1e-9), a
    document missing from a list gets 0 after normalization, a query of one run only fuses with an empty list,
    and RRF ranks ties by document id."""
    sparse = {"q1": {"a": 4.0, "b": 2.0, "c": 0.0}, "q2": {"x": 5.0}}
    bm25 = {"q1": {"a": 10.0, "d": 30.0}, "q3": {"z": 4.0, "y": 4.0}}
    mm = fuse_runs(sparse, bm25, "minmax", weight=0.25)
    # sparse (s-0)/4 → a 1, b .5, c 0; bm25 (s-10)/20 → a 0, d 1; one document: (5-5)/1e-9 = 0
    assert mm["q1"] == pytest.approx({"d": 0.75, "a": 0.25, "b": 0.125, "c": 0.0})
    assert list(mm["q1"])[:2] == ["d", "a"] and mm["q2"] == {"x": 0.0} and mm["q3"] == {"y": 0.0, "z": 0.0}
    z = fuse_runs(sparse, bm25, "zscore")
    sd = np.std([4.0, 2.0, 0.0])  # population std, as ranx's zmuv (np.std)
    assert z["q1"] == pytest.approx({"a": 0.5 * (2 / sd) + 0.5 * -1.0, "b": 0.0, "c": 0.5 * (-2 / sd), "d": 0.5})
    rrf = fuse_runs(sparse, bm25, "rrf", rrf_k=1)
    assert rrf["q1"] == pytest.approx({"a": 1 / 2 + 1 / 3, "d": 1 / 2, "b": 1 / 3, "c": 1 / 4})
    assert rrf["q3"] == pytest.approx({"y": 1 / 2, "z": 1 / 3})  # equal BM25 scores: ranked by document id
    assert list(fuse_runs(sparse, bm25, "sum", k=2)["q1"]) == ["d", "a"]  # k cuts the fused list
