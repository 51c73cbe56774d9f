"""One read/skip report for every reader: problem() raises or counts; file and labelled summaries."""

import pytest

from lexray.data.report import DataError, ReadReport, check_on_error


def test_problem_raises_under_fail_and_counts_under_skip():
    err = DataError("f.jsonl", 3, "text", "empty_text", "empty")
    with pytest.raises(DataError) as e:
        ReadReport().problem(err, "fail")
    assert e.value is err and str(err).startswith("f.jsonl:3: field 'text': empty [empty_text] (on_error='skip'")
    rep = ReadReport(max_messages=1)
    rep.problem(err, "skip")
    rep.problem(DataError("f.jsonl", "row 4", "_id", "missing_id", "no id"), "skip")
    assert dict(rep.skipped) == {"empty_text": 1, "missing_id": 1} and rep.n_skipped == 2
    assert rep.messages == ["f.jsonl:3: field 'text': empty [empty_text]"]


def test_summaries():
    rep = ReadReport()
    rep.read["corpus.jsonl"] += 3
    rep.kept["corpus.jsonl"] += 2
    rep.problem(DataError("c", 2, "text", "empty_text", "empty"), "skip")
    assert rep.summary() == ("corpus.jsonl: read 3, kept 2\nskipped 1 rows (empty_text=1)\n"
                             "  c:2: field 'text': empty [empty_text]")
    labelled = ReadReport(label="pairs")
    labelled.kept["p.jsonl"] = 5
    labelled.skipped.update({"bad_json": 1, "bad_field": 2})
    assert labelled.summary() == "pairs kept 5; skipped 3 (bad_field=2, bad_json=1)"
    assert ReadReport(label="pairs").summary() == "pairs kept 0; skipped 0 (none)"


def test_on_error_values():
    check_on_error("skip")
    with pytest.raises(ValueError, match="on_error must be"):
        check_on_error("ignore")
