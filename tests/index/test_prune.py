"""Static pruning (lexray.index.prune, ``lexray prune``) of an index built from small random shards.

What could fail: a kept posting whose weight or impact differs from the source's, a posting that is not in the
source, a term or document over its k, the wrong postings kept (not the largest), the CSR offsets out of step,
provenance missing, the pruned index unopenable by search / verify, bad input accepted or written."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lexray
from lexray import cli
from lexray.config import IndexConfig
from lexray.index.build import build_index
from lexray.index.prune import PruneError, prune_index
from lexray.index.search import ExactSearcher

V = 256


def read_postings(index_dir):
    return tuple(np.load(index_dir / f) for f in ("offsets.npy", "postings_doc.npy", "postings_weight.npy",
                                                   "postings_impact.npy"))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """400 documents of up to 40 terms over 200 ids, in two shards, with tied weights (rounded) so the tie
    rule is exercised."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("prune")
    (d / "shards").mkdir()
    rng = np.random.default_rng(7)
    for s in range(2):
        rows = [rng.choice(200, size=rng.integers(1, 40), replace=False).astype(np.int32) for _ in range(200)]
        ws = [np.round(rng.gamma(2.0, 0.7, size=len(t)), 1).astype(np.float32) + 0.1 for t in rows]
        pq.write_table(pa.table({"doc_id": [f"d{s}-{i}" for i in range(200)], "term_ids": rows, "weights": ws},
                                schema=pa.schema([("doc_id", pa.string()), ("term_ids", pa.list_(pa.int32())),
                                                  ("weights", pa.list_(pa.float32()))])),
                       d / "shards" / f"shard-{s:03d}.parquet")
    build_index(d / "shards", d / "index", IndexConfig(threads=1, memory_limit="256MB"), vocab_size=V,
                show_progress=False)
    return d / "index"


def _triples(index_dir) -> dict[tuple[int, int], tuple[float, int]]:
    off, pdoc, pw, imp = read_postings(index_dir)
    terms = np.repeat(np.arange(len(off) - 1), np.diff(off))
    return {(int(t), int(d)): (float(w), int(i)) for t, d, w, i in zip(terms, pdoc, pw, imp, strict=True)}


@pytest.mark.parametrize("term_k, doc_k", [(7, None), (None, 5), (10, 8)])
def test_pruned_postings_are_a_subset_with_the_same_weights_and_at_most_k(source, tmp_path, term_k, doc_k):
    res = prune_index(source, tmp_path / "p", term_k=term_k, doc_k=doc_k)
    src, got = _triples(source), _triples(tmp_path / "p")
    assert got and set(got) <= set(src) and all(got[key] == src[key] for key in got)  # weight and impact
    assert res.postings_after == len(got) < res.postings_before == len(src)
    off, pdoc, _, _ = read_postings(tmp_path / "p")
    assert off[-1] == len(pdoc) and all(np.all(np.diff(pdoc[off[t]:off[t + 1]]) > 0) for t in range(V))
    per_term = np.diff(off)
    per_doc = np.bincount(pdoc, minlength=400)
    if term_k:
        assert per_term.max() <= term_k
    if doc_k:
        assert per_doc.max() <= doc_k
    # the kept ones are the largest: every dropped posting loses to k kept ones of its term or of its document
    by_term: dict[int, list[float]] = {}
    by_doc: dict[int, list[float]] = {}
    for (t, d), (w, _) in src.items():
        by_term.setdefault(t, []).append(w)
        by_doc.setdefault(d, []).append(w)
    for (t, d), (w, _) in src.items():
        if (t, d) in got:
            continue
        beaten_t = term_k is not None and sum(x > w for x in by_term[t]) >= term_k - sum(x == w for x in by_term[t]) + 1
        beaten_d = doc_k is not None and sum(x > w for x in by_doc[d]) >= doc_k - sum(x == w for x in by_doc[d]) + 1
        assert beaten_t or beaten_d, (t, d)
    for (t, d), (w, _) in got.items():  # and a kept one is within the top-k of both
        if term_k:
            assert sum(x > w for x in by_term[t]) < term_k
        if doc_k:
            assert sum(x > w for x in by_doc[d]) < doc_k
    stats = json.loads((tmp_path / "p" / "stats.json").read_text())
    p = stats["prune"]
    assert p["term_k"] == term_k and p["doc_k"] == doc_k and p["postings_after"] == len(got)
    assert p["source_index"] == str(source.resolve()) and len(p["source_stats_sha256"]) == 64
    assert stats["n_postings"] == len(got) and stats["n_docs"] == 400
    assert stats["index_bytes"] < json.loads((source / "stats.json").read_text())["index_bytes"]


@pytest.mark.timeout(120)
def test_pruned_index_searches_verifies_and_opens(source, tmp_path, capsys):
    assert cli.main(["prune", "--index", str(source), "--out", str(tmp_path / "p"), "--term-k", "30"]) == 0
    out = capsys.readouterr().out
    assert '"postings_after"' in out
    assert cli.main(["verify", "--index", str(tmp_path / "p")]) == 0
    # a query of one pruned term: the top-30 of its posting list is exactly what the unpruned index ranks first
    full, pruned = ExactSearcher(source), ExactSearcher(tmp_path / "p")
    t = int(np.argmax(np.diff(full.offsets)))
    q = ([np.array([t])], [np.array([1.0], np.float32)])
    s_full, d_full = full.search(*q, k=30)
    s_pr, d_pr = pruned.search(*q, k=30)
    np.testing.assert_array_equal(d_full, d_pr)
    np.testing.assert_array_equal(s_full, s_pr)
    with lexray.open_index(tmp_path / "p") as ix:
        hits = ix.search_vectors(np.array([t]), np.array([1.0], np.float32), k=5)
        assert [h.doc_id for h in hits] == [str(full.doc_ids[i]) for i in d_full[0][:5]]


def test_bad_input_is_refused_naming_the_key(source, tmp_path):
    with pytest.raises(PruneError, match="term_k must be an integer >= 1, got 0"):
        prune_index(source, tmp_path / "a", term_k=0)
    with pytest.raises(PruneError, match="doc_k must be an integer >= 1, got -3"):
        prune_index(source, tmp_path / "a", doc_k=-3)
    with pytest.raises(PruneError, match="give term_k"):
        prune_index(source, tmp_path / "a")
    with pytest.raises(PruneError, match="is the input index"):
        prune_index(source, source, term_k=3)
    with pytest.raises(PruneError, match="is the input index"):
        prune_index(source, source / "inside", term_k=3)
    (tmp_path / "notindex").mkdir()
    (tmp_path / "notindex" / "x.txt").write_text("x")
    with pytest.raises(PruneError, match="not a lexray index"):
        prune_index(tmp_path / "notindex", tmp_path / "a", term_k=3)
    with pytest.raises(PruneError, match="not an empty folder"):
        prune_index(source, tmp_path / "notindex", term_k=3)
    assert not (tmp_path / "a").exists()


def test_a_pruned_index_records_what_its_source_records(source, tmp_path, splade_tiny_dir, scifact_dir):
    """``--index`` an evaluated folder: the pruned index knows the source's model and corpus (lexray search needs no
    --model), but not its Lucene index (that one holds the unpruned postings)."""
    import shutil

    from lexray.config import load_config, save_config
    from lexray.search.locate import locate_index

    ev = tmp_path / "ev"
    shutil.copytree(source, ev / "index")
    (ev / "lucene").mkdir()
    save_config(load_config(None, [f"model.name_or_path={splade_tiny_dir}", f"data.dataset={scifact_dir}"]), ev)
    assert cli.main(["prune", "--index", str(ev), "--out", str(tmp_path / "p"), "--doc-k", "3"]) == 0
    src, got = locate_index(ev), locate_index(tmp_path / "p")
    assert got.index_dir == tmp_path / "p" and got.kind == "index" and src.lucene_dir and got.lucene_dir is None
    assert got.model == src.model and str(got.model.name_or_path) == str(splade_tiny_dir)
    assert got.dataset == str(scifact_dir)
