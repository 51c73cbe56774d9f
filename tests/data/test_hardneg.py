"""Hard-negative groups (mining.py's format): validation with file:line:field, id resolution, sampling."""

import json

import pytest

from lexray.data.beir import iter_corpus
from lexray.data.hardneg import HardNegDataset


@pytest.fixture(scope="module")
def doc_ids(scifact_dir):
    return [d.doc_id for d, _ in zip(iter_corpus(scifact_dir), range(40), strict=False)]


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_groups_resolve_texts_and_sample_deterministically(tmp_path, scifact_dir, doc_ids):
    texts = {d.doc_id: d.full_text for d, _ in zip(iter_corpus(scifact_dir), range(40), strict=False)}
    g = {"query_id": "1", "query": "q one", "positive_ids": [doc_ids[0]], "negative_ids": doc_ids[1:8],
         "negative_scores": [float(i) for i in range(7)], "positive_scores": [9.0]}
    p = _write(tmp_path / "g.jsonl", [g])
    ds = HardNegDataset(p, scifact_dir, num_negatives=3, need_teacher=True, seed=1)
    ex = ds.example(0, epoch=0)
    assert ex.query == "q one" and ex.docs[0] == texts[doc_ids[0]] and len(ex.docs) == 4
    negs = [next(k for k, v in texts.items() if v == d) for d in ex.docs[1:]]
    assert len(set(negs)) == 3 and set(negs) <= set(doc_ids[1:8])
    assert ex.teacher == [9.0] + [float(doc_ids[1:8].index(n)) for n in negs]  # aligned with the docs
    assert ds.example(0, epoch=0) == ex  # deterministic
    assert any(ds.example(0, epoch=e).docs != ex.docs for e in range(1, 6))  # varies across epochs


def test_parquet_matches_jsonl(tmp_path, scifact_dir, doc_ids):
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = {"query_id": "1", "query": "q", "positive_ids": [doc_ids[0]], "negative_ids": doc_ids[1:4]}
    pq.write_table(pa.Table.from_pylist([g]), tmp_path / "g.parquet")
    a = HardNegDataset(_write(tmp_path / "g.jsonl", [g]), scifact_dir, num_negatives=2)
    b = HardNegDataset(tmp_path / "g.parquet", scifact_dir, num_negatives=2)
    assert a.example(0) == b.example(0)


def test_errors_name_file_line_field(tmp_path, scifact_dir, doc_ids):
    ok = {"query_id": "1", "query": "q", "positive_ids": [doc_ids[0]], "negative_ids": doc_ids[1:4]}
    rows = [ok,
            {**ok, "negative_ids": [doc_ids[1], "no-such-doc", doc_ids[2]]},
            {**ok, "positive_ids": []},
            "{broken",
            {**ok, "negative_scores": [1.0]},
            {**ok, "negative_ids": doc_ids[1:2]}]
    p = _write(tmp_path / "g.jsonl", rows)
    with pytest.raises(ValueError, match=r"g\.jsonl:3: field 'positive_ids': empty"):
        HardNegDataset(p, scifact_dir, num_negatives=2)  # field checks come first (before the corpus is read)
    with pytest.raises(ValueError, match=r"u\.jsonl:2: field 'negative_ids': document id 'no-such-doc'"):
        HardNegDataset(_write(tmp_path / "u.jsonl", rows[:2]), scifact_dir, num_negatives=2)
    ds = HardNegDataset(p, scifact_dir, num_negatives=2, on_error="skip")
    assert len(ds) == 1
    assert dict(ds.report.skipped) == {"unknown_doc": 1, "bad_field": 2, "bad_json": 1, "too_few_negatives": 1}
    msgs = "\n".join(ds.report.messages)
    assert ":3: field 'positive_ids'" in msgs and ":5: field 'negative_scores'" in msgs and ":4: field '<line>'" in msgs
    with pytest.raises(ValueError, match=r":1: field 'positive_scores': MarginMSE needs teacher scores"):
        HardNegDataset(_write(tmp_path / "h.jsonl", [ok]), scifact_dir, num_negatives=2, need_teacher=True)
