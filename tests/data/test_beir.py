"""BEIR readers on the real SciFact / Cranfield files and on small malformed files."""

from __future__ import annotations

import json

import pytest

from lexray.data.beir import (
    DataError,
    ReadReport,
    available_splits,
    dataset_stats,
    iter_corpus,
    iter_corpus_batches,
    load_qrels,
    load_queries,
)


def test_scifact_real(scifact_dir):
    rep = ReadReport()
    docs = list(iter_corpus(scifact_dir, report=rep))
    assert len(docs) == 5183 and len({d.doc_id for d in docs}) == 5183
    assert docs[0].doc_id == "4983" and docs[0].title.startswith("Microstructural development")
    assert docs[0].full_text.startswith(docs[0].title + " ")
    assert rep.n_skipped == 0 and rep.kept["corpus.jsonl"] == 5183
    assert available_splits(scifact_dir) == ["test", "train"]
    test = load_qrels(scifact_dir, "test")
    train = load_qrels(scifact_dir, "train")
    assert len(test) == 300 and sum(map(len, test.values())) == 339
    assert len(train) == 809 and sum(map(len, train.values())) == 919
    assert test["1"] == {"31715818": 1}
    q = load_queries(scifact_dir, split="test")
    assert set(q) == set(test) and q["1"]
    assert len(load_queries(scifact_dir)) == 1109


def test_cranfield_real_has_two_empty_documents(cranfield_dir):
    with pytest.raises(DataError) as ei:
        list(iter_corpus(cranfield_dir))
    msg = str(ei.value)
    assert "corpus.jsonl:471" in msg and "'text'" in msg and ei.value.reason == "empty_text"
    rep = ReadReport()
    docs = list(iter_corpus(cranfield_dir, on_error="skip", report=rep))
    assert len(docs) == 1398 and rep.skipped == {"empty_text": 2}
    assert "skipped 2 rows (empty_text=2)" in rep.summary()
    qrels = load_qrels(cranfield_dir, "test")
    assert len(qrels) == 225
    # the empty document 995 is judged relevant: the judgement is kept, not reported as unknown
    assert qrels["125"]["995"] == 3
    assert {r for d in qrels.values() for r in d.values()} == {1, 2, 3, 4}


def test_batches_and_max_docs(scifact_dir):
    batches = list(iter_corpus_batches(scifact_dir, batch_size=2000))
    assert [len(b["doc_id"]) for b in batches] == [2000, 2000, 1183]
    assert set(batches[0]) == {"doc_id", "title", "text"}
    assert [d.doc_id for d in iter_corpus(scifact_dir, max_docs=3)] == batches[0]["doc_id"][:3]


def _write_dataset(tmp_path, corpus_lines, query_lines, qrels_lines, split="test"):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text("\n".join(corpus_lines) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(query_lines) + "\n")
    (tmp_path / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels_lines) + "\n")
    return tmp_path


def test_malformed_corpus(tmp_path):
    lines = [
        json.dumps({"_id": "d1", "title": "t", "text": "a"}),        # 1 ok
        '{"_id": "d2", "text": ',                                    # 2 bad json
        json.dumps({"title": "x", "text": "no id"}),                 # 3 missing id
        json.dumps({"_id": "d1", "text": "again"}),                  # 4 duplicate
        json.dumps({"_id": "d5", "title": "", "text": "  "}),        # 5 empty
        json.dumps({"_id": "d6", "text": 7}),                        # 6 bad field
        json.dumps(["not", "an", "object"]),                         # 7 bad json
        json.dumps({"_id": 8, "text": "int ids are accepted"}),      # 8 ok
    ]
    d = _write_dataset(tmp_path, lines, [json.dumps({"_id": "q", "text": "x"})], ["q\td1\t1"])
    expected = {2: ("<line>", "bad_json"), 3: ("_id", "missing_id"), 4: ("_id", "duplicate_id"),
                5: ("text", "empty_text"), 6: ("text", "bad_field")}
    with pytest.raises(DataError) as ei:
        list(iter_corpus(d))
    assert ei.value.line == 2 and str(ei.value).startswith(f"{d / 'corpus.jsonl'}:2: field '<line>'")
    rep = ReadReport()
    docs = list(iter_corpus(d, on_error="skip", report=rep))
    assert [x.doc_id for x in docs] == ["d1", "8"]
    assert rep.read["corpus.jsonl"] == 8 and rep.kept["corpus.jsonl"] == 2
    assert rep.skipped == {"bad_json": 2, "missing_id": 1, "duplicate_id": 1, "empty_text": 1, "bad_field": 1}
    for line, (fld, reason) in expected.items():
        assert any(f"corpus.jsonl:{line}: field '{fld}'" in m and reason in m for m in rep.messages), line


def test_malformed_qrels(tmp_path):
    corpus = [json.dumps({"_id": f"d{i}", "text": f"doc {i}"}) for i in range(3)]
    queries = [json.dumps({"_id": "q1", "text": "a"}), json.dumps({"_id": "q2", "text": "b"})]
    qrels = ["q1\td0\t1", "q1\td1\t1.5", "q9\td0\t1", "q2\tdX\t1", "q2\td2", "q1\td0\t2", "q2\td2\t-1"]
    d = _write_dataset(tmp_path, corpus, queries, qrels)
    with pytest.raises(DataError) as ei:
        load_qrels(d, "test")
    assert ei.value.line == 3 and ei.value.field == "score" and "qrels/test.tsv:3" in str(ei.value).replace("\\", "/")
    rep = ReadReport()
    out = load_qrels(d, "test", on_error="skip", report=rep)
    assert out == {"q1": {"d0": 1}, "q2": {"d2": -1}}
    assert rep.skipped == {"bad_score": 1, "unknown_query": 1, "unknown_doc": 1, "bad_columns": 1,
                           "duplicate_qrel": 1}
    assert any("test.tsv:5: field 'corpus-id'" in m and "dX" in m for m in rep.messages)
    with pytest.raises(FileNotFoundError, match="available splits: \\['test'\\]"):
        load_qrels(d, "dev")
    with pytest.raises(ValueError, match="on_error"):
        load_qrels(d, "test", on_error="ignore")


def test_skip_without_report_is_logged(cranfield_dir, caplog):
    with caplog.at_level("WARNING", logger="lexray.data.beir"):
        docs = list(iter_corpus(cranfield_dir, on_error="skip"))
    assert len(docs) == 1398
    assert "skipped 2 rows (empty_text=2)" in caplog.text and "corpus.jsonl:471" in caplog.text


def test_dataset_stats(cranfield_dir):
    st = dataset_stats(cranfield_dir, "test")
    assert st["n_docs"] == 1398 and st["n_queries"] == 225 and st["n_qrels"] == 1612
    assert st["read_report"]["skipped"] == {"empty_text": 2}
