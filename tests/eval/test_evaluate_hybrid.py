"""``lexray evaluate --hybrid bm25`` end to end on a SciFact slice (CAI §3.3, Eq. 8): the fused rows carry "hybrid",
the fused TREC run is written and differs from both of its parts; ``--index`` searches the first run's index again
(no re-encoding) and reproduces its sparse scores, with IDF weighting applied on the query side.

The slice (a BEIR folder in tmp_path): SciFact's first 40 test queries, their judged documents and the first 50
documents of the corpus — real data, 7x fewer query encodings than the full test split; documents truncated to 64
tokens."""

from __future__ import annotations

import json

import pytest

from lexray import cli
from lexray.eval.runs import read_trec_run


def _top(run: dict, q: str, k: int = 10) -> list[str]:
    return [d for d, _ in sorted(run[q].items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def _slice(scifact_dir, out, n_queries: int = 40, n_docs: int = 50):
    lines = (scifact_dir / "qrels" / "test.tsv").read_text().splitlines()
    qids = sorted({ln.split("\t")[0] for ln in lines[1:]}, key=int)[:n_queries]
    qrels = [ln for ln in lines[1:] if ln.split("\t")[0] in qids]
    judged = {ln.split("\t")[1] for ln in qrels}
    (out / "qrels").mkdir(parents=True)
    (out / "qrels" / "test.tsv").write_text("\n".join([lines[0], *qrels]) + "\n")
    with open(scifact_dir / "queries.jsonl") as fh:
        (out / "queries.jsonl").write_text("".join(ln for ln in fh if json.loads(ln)["_id"] in qids))
    with open(scifact_dir / "corpus.jsonl") as fh:
        (out / "corpus.jsonl").write_text("".join(ln for i, ln in enumerate(fh)
                                                  if i < n_docs or json.loads(ln)["_id"] in judged))
    return out


@pytest.mark.timeout(600)  # ranx compiles its numba kernels once per process (~70 s of CPU)
def test_evaluate_hybrid_bm25_then_reuse_the_index(capsys, tmp_path, scifact_dir, splade_tiny_dir):
    data = _slice(scifact_dir, tmp_path / "scifact")
    common = ["--model", str(splade_tiny_dir), "--dataset", str(data),
              "--set", "encode.backend=local", "--set", "model.doc_max_length=64", "--set", "eval.top_k=100",
              "--set", "eval.metrics=[nDCG@10,R@100]"]
    a = tmp_path / "a"
    assert cli.main(["evaluate", *common, "--out", str(a), "--hybrid", "bm25"]) == 0, capsys.readouterr().err
    rec = json.loads((a / "metrics.json").read_text())
    assert "hybrid" in rec["retriever"] and "(sum, α=0.5)" in rec["retriever"]
    names = rec["efficiency"]["backend_retrievers"]
    assert set(names) == {"hybrid exact", "exact", "bm25"} and "hybrid" in names["hybrid exact"]
    assert rec["metrics"] == rec["efficiency"]["backends"]["hybrid exact"]
    fused, sparse, bm25 = (read_trec_run(a / f"run.test{s}.trec") for s in (".hybrid", "", ".bm25"))
    qs = sorted(set(fused) & set(sparse) & set(bm25))
    assert len(qs) == 40
    assert any(_top(fused, q) != _top(sparse, q) for q in qs) and any(_top(fused, q) != _top(bm25, q) for q in qs)
    for q in qs:  # the fused list is drawn from the union of both lists (Eq. 8), cut to eval.top_k
        union = set(sparse[q]) | set(bm25[q])
        assert set(fused[q]) <= union and len(fused[q]) == min(100, len(union))
    assert "hybrid" in capsys.readouterr().out  # the printed table has the fused rows

    # the same model on the built index: nothing re-encoded, the same sparse scores; IDF changes them
    b, c = tmp_path / "b", tmp_path / "c"
    assert cli.main(["evaluate", *common, "--out", str(b), "--index", str(a / "index")]) == 0
    assert cli.main(["evaluate", *common, "--out", str(c), "--index", str(a / "index"),
                     "--set", "index.doc_weighting=idf"]) == 0, capsys.readouterr().err
    assert not (b / "shards").exists() and not (c / "shards").exists()
    assert json.loads((b / "metrics.json").read_text())["metrics"] == rec["efficiency"]["backends"]["exact"]
    assert read_trec_run(b / "run.test.trec") == sparse
    weighted = json.loads((c / "metrics.json").read_text())
    assert weighted["efficiency"]["doc_weighting"].startswith("idf")
    assert read_trec_run(c / "run.test.trec") != sparse
    assert cli.main(["evaluate", *common, "--out", str(tmp_path / "d"), "--index", str(tmp_path / "none")]) == 1
    assert "no stats.json" in capsys.readouterr().err
