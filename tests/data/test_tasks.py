"""LexSemBridge's fine-grained tasks (arXiv:2508.17858 §3.3) from a 300-document slice of SciFact: seeded,
each query's qrels name its source passage, spans have their length, the corpus is linked, not copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lexray.data import beir
from lexray.data.tasks import build_tasks, content_words

N_DOCS = 300


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory, scifact_dir):
    d = tmp_path_factory.mktemp("scifact-slice")
    lines = (scifact_dir / "corpus.jsonl").read_text().splitlines(keepends=True)[:N_DOCS]
    (d / "corpus.jsonl").write_text("".join(lines))
    ids = {json.loads(x)["_id"] for x in lines}
    (d / "qrels").mkdir()
    qrels = [x for x in (scifact_dir / "qrels" / "test.tsv").read_text().splitlines()[1:] if x.split("\t")[1] in ids]
    (d / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(x + "\n" for x in qrels))
    qids = {x.split("\t")[0] for x in qrels}
    (d / "queries.jsonl").write_text("".join(x + "\n" for x in (scifact_dir / "queries.jsonl").read_text()
                                             .splitlines() if json.loads(x)["_id"] in qids))
    return d


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != "lexray_tasks.json"}


def test_tasks_are_deterministic_for_a_seed(slice_dir, tmp_path):
    a, b, c = (build_tasks(slice_dir, tmp_path / n, n=20, seed=s) for n, s in (("a", 0), ("b", 0), ("c", 1)))
    assert a["tasks"]["keyword"]["queries"] == 20
    fa, fb, fc = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    assert fa == fb
    assert fa["pop16/queries.jsonl"] != fc["pop16/queries.jsonl"]
    assert b["corpus"] == c["corpus"] == str((slice_dir / "corpus.jsonl").resolve())


def test_qrels_point_at_the_source_passage_and_spans_have_their_length(slice_dir, tmp_path):
    build_tasks(slice_dir, tmp_path, n=20, seed=3)
    docs = {d.doc_id: d for d in beir.iter_corpus(slice_dir)}
    for task, n_words in (("pop16", 16), ("pop32", 32), ("pop64", 64), ("keyword", None)):
        folder = tmp_path / task
        assert (folder / "corpus.jsonl").is_symlink()  # linked, never copied
        queries, qrels = beir.load_queries(folder), beir.load_qrels(folder, "test")
        assert len(queries) == len(qrels) == 20
        for qid, text in queries.items():
            (doc_id, score), = qrels[qid].items()
            assert score == 1 and qid == f"{task}-{doc_id}"
            source = docs[doc_id]
            if n_words is not None:
                assert len(text.split()) == n_words and f" {text} " in f" {' '.join(source.text.split())} "
            else:
                words = text.split()
                assert 3 <= len(words) <= 8 and len(set(words)) == len(words)
                assert set(words) <= set(content_words(source.full_text))
    assert beir.load_qrels(tmp_path / "query", "test") == beir.load_qrels(slice_dir, "test")


def test_sub_corpus_keeps_every_judged_and_sampled_document(slice_dir, tmp_path):
    m = build_tasks(slice_dir, tmp_path, n=20, seed=0, tasks=["query", "pop16"], corpus_docs=120)
    ids = beir.corpus_ids(tmp_path / "pop16")
    assert len(ids) == 120 and Path(m["corpus"]).parent.name == "_corpus"
    needed = {d for rel in beir.load_qrels(slice_dir, "test").values() for d in rel}
    needed |= {d for rel in beir.load_qrels(tmp_path / "pop16", "test").values() for d in rel}
    assert needed <= ids
    # every other source document is held out for training, and none of them is in the tasks' corpus
    held = {json.loads(line)["_id"] for line in open(m["heldout"], encoding="utf-8")}
    assert m["heldout_docs"] == len(held) and not held & ids and held | ids == beir.corpus_ids(slice_dir)
    with pytest.raises(ValueError, match="corpus_docs=5 is smaller"):
        build_tasks(slice_dir, tmp_path / "x", n=20, seed=0, corpus_docs=5)
    with pytest.raises(ValueError, match="unknown task"):
        build_tasks(slice_dir, tmp_path / "y", tasks=["pop8"])
