"""Weakly supervised pairs: SciFact (title, abstract) pairs and pair files with file:line:field errors."""

import json

import pytest

from lexray.data.beir import iter_corpus
from lexray.data.pairs import read_pairs_file, title_abstract_pairs


def test_scifact_title_abstract_pairs(scifact_dir):
    ds = title_abstract_pairs(scifact_dir)
    first = next(iter_corpus(scifact_dir))
    assert ds.example(0).query == first.title and ds.example(0).docs == [first.text]
    n_docs = sum(1 for _ in iter_corpus(scifact_dir))
    assert len(ds) + sum(ds.report.skipped.values()) == n_docs  # nothing dropped unreported
    assert len(ds) > 5000
    assert len(title_abstract_pairs(scifact_dir, max_pairs=7)) == 7


def test_pairs_file_jsonl_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"query": "what is a cat", "document": "a cat is an animal"}, {"query": "q2", "document": "d2"}]
    p = tmp_path / "pairs.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    ds = read_pairs_file(p)
    assert len(ds) == 2 and ds.example(1).query == "q2" and ds.example(1).docs == ["d2"]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pairs.parquet")
    assert read_pairs_file(tmp_path / "pairs.parquet").pairs == ds.pairs


def test_pairs_file_errors_name_file_line_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"query": "ok", "document": "fine"}\n{"query": "q", "document": 3}\nnot json\n'
                 '{"query": " ", "document": "x"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: field 'document'"):
        read_pairs_file(p)
    ds = read_pairs_file(p, on_error="skip")
    assert len(ds) == 1
    assert dict(ds.report.skipped) == {"bad_field": 1, "bad_json": 1, "empty_text": 1}
    assert any(":3: field '<line>'" in m for m in ds.report.messages)
