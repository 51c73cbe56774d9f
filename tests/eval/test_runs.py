"""TREC run write/read roundtrip, ordering and malformed lines; metrics.json and Markdown reports."""

from __future__ import annotations

import json

import pytest

from lexray.data.beir import DataError, ReadReport
from lexray.eval.report import markdown_table, read_metrics_json, write_markdown, write_metrics_json
from lexray.eval.runs import read_trec_run, run_tag, write_trec_run


def test_roundtrip_and_order(tmp_path):
    run = {"10": {"b": 0.5, "a": 0.5, "c": 1 / 3}, "2": {"x": 2.0000001, "y": -1.5}}
    p = write_trec_run(run, tmp_path / "run.trec", tag="exact")
    lines = p.read_text().splitlines()
    assert lines[0].split() == ["2", "Q0", "x", "1", "2.0000001", "exact"]
    assert [ln.split()[2] for ln in lines[2:]] == ["a", "b", "c"]       # ties: doc id ascending
    assert [ln.split()[3] for ln in lines[2:]] == ["1", "2", "3"]
    assert read_trec_run(p) == run                                       # exact float roundtrip
    write_trec_run(run, tmp_path / "top1.trec", top_k=1)
    assert read_trec_run(tmp_path / "top1.trec") == {"10": {"a": 0.5}, "2": {"x": 2.0000001}}
    with pytest.raises(ValueError, match="whitespace"):
        write_trec_run({"q 1": {"d": 1.0}}, tmp_path / "bad.trec")


def test_malformed_run(tmp_path):
    p = tmp_path / "r.trec"
    p.write_text("q Q0 d1 1 1.0 t\nq Q0 d2 2 abc t\nq Q0 d3 3\nq Q0 d1 4 0.5 t\n")
    with pytest.raises(DataError, match="r.trec:2: field 'score'"):
        read_trec_run(p)
    rep = ReadReport()
    assert read_trec_run(p, on_error="skip", report=rep) == {"q": {"d1": 1.0}}
    assert rep.skipped == {"bad_score": 1, "bad_columns": 1, "duplicate_id": 1}


def test_metrics_json_and_markdown(tmp_path):
    m0 = {"nDCG@10": 0.61234, "MRR@10": 0.5, "R@100": 0.9, "R@1000": 0.97}
    written = write_metrics_json(tmp_path / "zs", "scifact", "splade-tiny zero-shot", "test", 300, m0,
                            efficiency={"qps": 1234.5}, model="x")
    rec = json.loads((tmp_path / "zs" / "metrics.json").read_text())
    assert rec == written
    assert list(rec)[:6] == ["dataset", "retriever", "split", "n_queries", "metrics", "efficiency"]
    assert rec["model"] == "x" and read_metrics_json(tmp_path / "zs") == rec
    rec2 = dict(rec, retriever="fine-tuned", metrics={"nDCG@10": 0.7})
    table = markdown_table([rec, rec2], efficiency=("qps",))
    rows = table.splitlines()
    assert rows[0] == "| Retriever | Dataset | Split | Queries | nDCG@10 | MRR@10 | R@100 | R@1000 | qps |"
    assert "| splade-tiny zero-shot | scifact | test | 300 | 0.6123 | 0.5000 | 0.9000 | 0.9700 | 1,234.5 |" in rows
    assert rows[3].startswith("| fine-tuned |") and "| – |" in rows[3]
    out = write_markdown(tmp_path / "t.md", [rec], title="SciFact")
    assert out.read_text().startswith("# SciFact\n\n| Retriever")


def test_display_names_become_valid_run_tags(tmp_path):
    """The training jobs name runs "laconic-tiny (trained)"; the tag column must not contain whitespace."""
    tag = run_tag("laconic-tiny  (trained)\t")
    assert tag == "laconic-tiny_(trained)" and run_tag("  ") == "lexray"
    path = write_trec_run({"1": {"d1": 2.0, "d2": 1.0}}, tmp_path / "r.trec", tag=tag)
    assert path.read_text().split("\n")[0].split() == ["1", "Q0", "d1", "1", "2.0", tag]
    assert read_trec_run(path) == {"1": {"d1": 2.0, "d2": 1.0}}
