"""The ``lexray`` command: table-driven dispatch, every job file the same wrapper, ``--help`` and a one-line user
error for every subcommand, early validation, several collections in one evaluation with an average row,
per-query metrics and a baseline comparison."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

from lexray import cli
from lexray.locks import FolderLock
from lexray.paths import REPO_ROOT

JOB_FILES = sorted((REPO_ROOT / "jobs").glob("*.py"))
WRAPPER = '''from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
'''


def _run(capsys, *argv):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_command_row_resolves_to_a_function():
    names = [c.name for c in cli.COMMANDS]
    assert len(names) == len(set(names))
    for c in cli.COMMANDS:
        assert callable(cli.resolve(c)), c.target
        assert c.help and len(c.help) < 160, c.name
        if c.job_file:
            assert (REPO_ROOT / "jobs" / c.job_file).is_file(), c.job_file


@pytest.mark.parametrize("path", JOB_FILES, ids=[p.name for p in JOB_FILES])
def test_every_job_file_is_the_same_wrapper_of_a_command(path):
    source = path.read_text()
    doc = ast.parse(source).body[0]
    assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)
    assert f"python jobs/{path.name}" in doc.value.value  # the docstring shows how to run it
    after_doc = "\n".join(source.splitlines()[doc.end_lineno:]).strip() + "\n"
    assert after_doc == WRAPPER
    assert path.name in cli.BY_JOB_FILE


# one real user mistake per command, caught before any heavy work (no Ray, no model load)
USER_ERRORS = {
    "train-laconic": (["--set", "train.no_such_key=1"], 1, "train.no_such_key: unknown key"),
    "train-splade": (["--config", "/no/such/recipe.yaml"], 1, "/no/such/recipe.yaml: recipe not found"),
    "train-dense": (["--set", "model.dense.bridge=xlr"], 1, "model.dense.bridge"),
    "evaluate": (["--dataset", "/no/such/beir", "--out", "{tmp}/eval"], 1, "dataset folder not found"),
    "encode": (["--dataset", "/no/such/beir", "--out", "{tmp}/shards"], 1, "dataset folder not found"),
    "index": (["--shards", "/no/such/shards", "--out", "{tmp}/index"], 1, "--shards /no/such/shards: no such folder"),
    "tune": (["--set", "tune.no_such_key=1", "--out", "{tmp}/tune"], 1, "tune.no_such_key: unknown key"),
    "reencode": (["--dataset", "/no/such/beir"], 2, "the following arguments are required: --store"),
    "migrate-vocab": (["--set", "vt.init=bogus"], 1, "vt.init: Input should be 'semantic'"),
    "verify": (["--store", "/no/such/store"], 1, "--store /no/such/store: no such folder"),
    "vt-ablation": (["--rows", "native,no-such-row", "--dry-run"], 2, "unknown row(s) no-such-row; rows: native,"),
    "laconic-curve": (["--cells", "L4", "--dry-run"], 2, "expected L<layers>-S<steps>[-seed<n>]"),
    "cai-ablation": (["--rows", "splade,no-such-row", "--dry-run"], 2, "unknown row(s) no-such-row; rows: bm25,"),
    "adapt-domain": (["--set", "cai.expand.delta_v=0"], 1, "cai.expand.delta_v: Input should be greater than 0"),
    "pyserini": (["os.path"], 1, "'os.path' is not a Pyserini module"),
    "search": (["--index", "/no/such/index", "--query", "x"], 1, "--index /no/such/index: no such folder"),
    "export-onnx": (["--model", "/no/such/model", "--out", "{tmp}/onnx"], 1, "model /no/such/model: no such folder"),
    "model-card": (["--model", "/no/such/model"], 1, "--model /no/such/model: no such folder"),
    "prune": (["--index", "/no/such/index", "--out", "{tmp}/pruned", "--term-k", "0"], 1,
              "--term-k (term_k) must be >= 1, got 0"),
    "make-tasks": (["--dataset", "/no/such/beir", "--out", "{tmp}/tasks"], 1, "dataset folder not found"),
    "lsb-ablation": (["--rows", "minilm-none,no-such-row", "--dry-run"], 2,
                     "unknown row(s) no-such-row; rows: minilm-zero-shot,"),
}


def test_every_command_has_a_user_error_case():
    assert set(USER_ERRORS) == set(cli.BY_NAME)


@pytest.mark.parametrize("name", list(USER_ERRORS))
def test_a_user_mistake_is_one_line_with_its_exit_status(capsys, tmp_path, name):
    argv, status, message = USER_ERRORS[name]
    rc, out, err = _run(capsys, name, *[a.format(tmp=tmp_path) for a in argv])
    assert rc == status, err
    if status == 1:  # lexray's one line
        assert err.count("\n") == 1 and err.startswith(f"lexray {name}: error: ") and message in err, err
    else:  # argparse's usage error: usage, then the one error line
        assert err.startswith(f"usage: lexray {name}") and err.splitlines()[-1].startswith(f"lexray {name}: error: ")
        assert message in err.splitlines()[-1]
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("name", list(cli.BY_NAME))
def test_help_of_every_command(capsys, name):
    rc, out, err = _run(capsys, name, "--help")
    assert rc == 0 and not err
    assert out.startswith(f"usage: lexray {name} ") if name != "pyserini" else "lexray pyserini" in out


def test_help_is_fast_and_the_job_files_run_as_main():
    """In a fresh interpreter: each ``python jobs/x.py --help`` (run as ``__main__``) prints the usage of its command,
    and no ``--help`` imports torch or transformers."""
    code = f"""
import contextlib, io, json, runpy, sys
from lexray import cli
usage = {{}}
for path in {[str(p) for p in JOB_FILES]!r}:
    sys.argv = [path, "--help"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as e:
            assert e.code == 0, (path, e.code)
    usage[path.rsplit("/", 1)[1]] = buf.getvalue().split("\\n", 1)[0]
with contextlib.redirect_stdout(io.StringIO()):
    assert all(cli.main([c.name, "--help"]) == 0 for c in cli.COMMANDS)
print(json.dumps({{"usage": usage, "heavy": sorted(m for m in ("torch", "transformers") if m in sys.modules)}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "platform")})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["heavy"] == []
    for job, line in result["usage"].items():
        assert line.startswith(f"usage: lexray {cli.BY_JOB_FILE[job].name} "), (job, line)


def test_run_job_is_the_command_of_the_file_name(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["jobs/build_index.py", "--shards", "/no/such", "--out", str(tmp_path)])
    assert cli.run_job(str(REPO_ROOT / "jobs" / "build_index.py")) == 1
    assert capsys.readouterr().err.startswith("lexray index: error: --shards /no/such: no such folder")
    with pytest.raises(KeyError, match="not_a_job.py is not the job file of any command"):
        cli.run_job("jobs/not_a_job.py")


def test_a_held_store_lock_exits_with_status_3(capsys, tmp_path):
    """``lexray reencode`` while another run holds the store: one line naming the holder, status 3 (a scheduler
    tells "busy" from "failed")."""
    store = tmp_path / "store"
    with FolderLock(store, "LOCK"):
        rc, _, err = _run(capsys, "reencode", "--store", str(store), "--rollback")
    assert rc == 3
    assert err.count("\n") == 1 and err.startswith("lexray reencode: error: ")
    assert f"held by pid {os.getpid()}" in err and "LockHeldError" in err


@pytest.mark.parametrize("argv, message", [
    (["--set", "eval.metrics=[nDCG@10,foo@3]"], "unknown metric 'foo@3'"),
    (["--set", "eval.top_k=0"], "eval.top_k must be >= 1"),
    (["--dataset", "/no/such/beir"], "dataset folder not found"),
    (["--model", "/no/such/model"], "model /no/such/model: no such folder"),
    (["--split", "nosplit"], "no qrels/nosplit.tsv"),
])
def test_bad_input_fails_before_encoding_with_one_line(capsys, tmp_path, scifact_dir, splade_tiny_dir, argv,
                                                       message):
    base = ["evaluate", "--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--out", str(tmp_path / "o")]
    rc, _, err = _run(capsys, *base, *argv)
    assert rc == 1
    assert err.count("\n") == 1 and err.startswith("lexray evaluate: error:") and message in err
    assert not (tmp_path / "o" / "shards").exists()  # nothing was encoded


def test_debug_shows_the_traceback(tmp_path, scifact_dir):
    with pytest.raises(ValueError, match="unknown metric"):
        cli.main(["--debug", "evaluate", "--dataset", str(scifact_dir), "--out", str(tmp_path),
                  "--set", "eval.metrics=[bogus]"])


def test_unknown_command(capsys):
    rc, _, err = _run(capsys, "no-such-command")
    assert rc == 2 and "unknown command 'no-such-command'" in err and "commands:" in err


def test_job_scripts_still_run_as_files(tmp_path):
    """``python jobs/evaluate.py`` goes through the same command (here: its early validation)."""
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "jobs" / "evaluate.py"), "--dataset", "/no/such",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "platform")})
    assert proc.returncode == 1 and "lexray evaluate: error:" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_evaluate_two_collections_average_per_query_and_baseline(capsys, tmp_path, scifact_dir, cranfield_dir,
                                                                 splade_tiny_dir):
    common = ["--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--dataset", str(cranfield_dir),
              "--set", "data.on_error=skip", "--set", "data.max_docs=40", "--set", "encode.backend=local",
              "--set", "eval.top_k=100", "--set", "eval.metrics=[nDCG@10,MRR@10,R@100]"]
    rc, out, err = _run(capsys, "evaluate", *common, "--out", str(tmp_path / "a"))
    assert rc == 0, err
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert any("| scifact |" in line for line in table) and any("| cranfield |" in line for line in table)
    assert any("average (2)" in line for line in table)
    assert "metrics:" in out and "output folder:" in out
    summary = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert [r["dataset"] for r in summary["datasets"]] == ["scifact", "cranfield"]
    avg = next(iter(summary["average"].values()))["nDCG@10"]
    assert avg == pytest.approx(sum(r["metrics"]["nDCG@10"] for r in summary["datasets"]) / 2)
    lines = (tmp_path / "a" / "scifact" / "per_query.test.jsonl").read_text().splitlines()
    assert len(lines) == summary["datasets"][0]["n_queries"] and "nDCG@10" in json.loads(lines[0])

    # the same model against itself as the baseline: every query ties, p = 1
    rc, out, err = _run(capsys, "evaluate", *common, "--out", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"))
    assert rc == 0, err
    comp = json.loads((tmp_path / "b" / "comparison.json").read_text())["datasets"]["scifact"]["nDCG@10"]
    assert comp["wins"] == comp["losses"] == 0 and comp["ties"] == comp["n"] and comp["p_value"] == 1.0


@pytest.mark.timeout(180)
def test_encode_takes_the_break_stale_lock_flag_its_message_names(capsys, tmp_path, scifact_dir, splade_tiny_dir):
    """Issue 24: the stale-lock message said --break-stale-lock, but `lexray encode` rejected the flag."""
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "shards"
    out.mkdir()
    (out / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started_at": "t",
                                           "command": "killed"}))
    base = ["encode", "--model", str(splade_tiny_dir), "--dataset", str(scifact_dir), "--out", str(out),
            "--max-docs", "8", "--backend", "local", "--set", "model.doc_max_length=32"]
    rc, _, err = _run(capsys, *base)
    assert rc == 1 and "--break-stale-lock" in err
    rc, _, err = _run(capsys, *base, "--break-stale-lock")
    assert rc == 0, err
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete" and not (out / ".lock").exists()


SIGTERM_JOB = """
import sys, time
from lexray import cli
from lexray.locks import FolderLock


def held(argv):  # a command that holds a lock and a manifest-like marker, as encode does
    with FolderLock(argv[0], ".lock"):
        try:
            print("READY", flush=True)
            time.sleep(120)
        except BaseException:
            open(argv[0] + "/status", "w").write("interrupted")
            raise


cli.resolve = lambda cmd: held
sys.exit(cli.main(["encode", sys.argv[1]]))
"""


@pytest.mark.timeout(60)
def test_sigterm_cleans_up_as_ctrl_c_does_and_exits_143(tmp_path):
    """``ray job stop`` sends the driver SIGTERM (SIGKILL 3 s later): the command's clean-up must run (lock
    released, status written) as on Ctrl-C, so the rerun of the same command is not refused by a stale lock."""
    import signal

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "platform")}
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_JOB, str(tmp_path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "READY"
    assert (tmp_path / ".lock").is_file()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM); rerun the same command to resume" in err
    assert not (tmp_path / ".lock").exists() and (tmp_path / "status").read_text() == "interrupted"
