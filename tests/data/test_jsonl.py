"""The one JSONL parse loop: line numbers, blank lines, and bad lines reported with file, line and field."""

import pytest

from lexray.data.jsonl import iter_jsonl
from lexray.data.report import DataError, ReadReport


def test_records_with_line_numbers_and_bad_lines_counted(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\n\n{broken\n[1, 2]\n\xff\n{"a": 2}\n')
    rep = ReadReport()
    assert list(iter_jsonl(p, rep, on_error="skip")) == [(1, {"a": 1}), (6, {"a": 2})]
    assert rep.read["x.jsonl"] == 5  # the blank line is not a row
    assert dict(rep.skipped) == {"bad_json": 3}
    assert [m.split(": field")[0] for m in rep.messages] == [f"{p}:3", f"{p}:4", f"{p}:5"]
    assert "field '<line>': expected a JSON object, got list [bad_json]" in rep.messages[1]
    assert not rep.kept  # keeping a row is the caller's decision


def test_fail_raises_at_the_first_bad_line(tmp_path):
    p = tmp_path / "y.jsonl"
    p.write_text('{"a": 1}\nnot json\n')
    rows = iter_jsonl(p, ReadReport())
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(DataError, match=r"y\.jsonl:2: field '<line>': not valid JSON") as e:
        next(rows)
    assert (e.value.line, e.value.field, e.value.reason) == (2, "<line>", "bad_json")
