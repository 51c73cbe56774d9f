"""The one table runner (lexray.ablation): commands run in order with this interpreter, the record is cached in
row.json and a rerun skips the row, a failed command names its log."""

import json
import subprocess

import pytest

from lexray import ablation


def test_run_row_runs_in_order_caches_and_resumes(tmp_path):
    marker = tmp_path / "calls.txt"
    cmds = [["python", "-c", f"open({str(marker)!r}, 'a').write('a')"],
            ["python", "-c", f"open({str(marker)!r}, 'a').write('b')"]]
    res = ablation.run_row("r", tmp_path / "r", cmds, lambda s: {"n": len(s)}, log=lambda m: None)
    assert marker.read_text() == "ab"
    assert res["n"] == 2 and len(res["command_s"]) == 2 and res["commands"][0].startswith("python -c")
    assert json.loads((tmp_path / "r" / "row.json").read_text()) == res
    again = ablation.run_row("r", tmp_path / "r", cmds, lambda s: {"n": -1}, log=lambda m: None)
    assert again == res and marker.read_text() == "ab"  # cached: nothing ran
    forced = ablation.run_row("r", tmp_path / "r", cmds, lambda s: {"n": 9}, force=True, log=lambda m: None)
    assert forced["n"] == 9 and marker.read_text() == "abab"


def test_failed_command_names_its_log_and_writes_no_record(tmp_path):
    cmds = [["python", "-c", "import sys; print('boom'); sys.exit(3)"]]
    with pytest.raises(subprocess.CalledProcessError) as e:
        ablation.run_row("bad", tmp_path / "bad", cmds, lambda s: {}, log=lambda m: None)
    assert e.value.returncode == 3 and "0.log" in e.value.output
    assert "boom" in (tmp_path / "bad" / "0.log").read_text()
    assert not (tmp_path / "bad" / "row.json").exists()


def test_shared_steps_run_first_and_commands_may_name_what_they_made(tmp_path):
    made = tmp_path / "made.txt"
    calls = []

    def before():
        calls.append("step")
        made.write_text("x")

    def cmds():
        assert made.is_file()  # asked for after the shared step ran
        return [["python", "-c", f"assert open({str(made)!r}).read() == 'x'"]]

    rec = ablation.run_row("s", tmp_path / "s", cmds, lambda s: {"ok": True}, log=lambda m: None, before=before,
                           record="step.json")
    assert rec["ok"] and (tmp_path / "s" / "step.json").is_file() and calls == ["step"]
    ablation.run_row("s", tmp_path / "s", cmds, lambda s: {}, log=lambda m: None, before=before, record="step.json")
    assert calls == ["step"]  # cached: the shared step is not asked for again
