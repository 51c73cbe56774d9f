"""The one runner of reproduction tables: every row is a list of plain commands (the jobs in ``jobs/``), run in
order as subprocesses of this interpreter, timed, and cached in ``<out>/<row>/row.json``.

Why subprocesses: each row then is exactly what a user types (``--dry-run`` prints it, docs/recipes.md lists
it), a row cannot leak Ray, torch threads or allocator state into the next, and an interrupted table resumes at
the first row without ``row.json``. The tables built on it (VT Table 3 in :mod:`lexray.vocab.ablation`, the
LACONIC compute curve in :mod:`lexray.train.curve`) only say which commands make a row and how to read its
outputs into a record.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lexray.paths import REPO_ROOT


def shell_line(cmd: list[str]) -> str:
    """A command as one copy-pasteable shell line."""
    return " ".join(shlex.quote(c) for c in cmd)


def set_args(pairs) -> list[str]:
    """``["a=1", "b=2"]`` → ``["--set", "a=1", "--set", "b=2"]``."""
    return [a for kv in pairs for a in ("--set", kv)]


def run_row(name: str, row_dir: Path, cmds: list[list[str]] | Callable[[], list[list[str]]], collect: Callable[[list[float]], dict],
            force: bool = False, log: Callable[[str], None] = print, tag: str = "ablation",
            before: Callable[[], None] | None = None, record: str = "row.json") -> dict:
    """Run one row's commands (argv lists, ``python`` first, run with this interpreter from the repository root)
    unless ``row_dir/row.json`` exists (``force`` reruns), then ``collect(seconds)`` → the record written there.

    Args:
        name: the row's name (log lines).
        row_dir: the row's folder; command ``i`` logs to ``row_dir/<i>.log``.
        cmds: the commands, in order, or a function that gives them (called after ``before``: a command may name
            what a shared step made).
        collect: reads the row's outputs; gets the wall time of each command (s).
        tag: the log prefix (``[tag] name ...``).
        before: run first when the row is not cached (e.g. steps several rows share).
        record: the record's file name in ``row_dir``.

    Returns:
        The record (also ``row.json``), with ``commands`` and ``command_s`` added when ``collect`` leaves them out.

    Raises:
        subprocess.CalledProcessError: a command failed; its output is in ``row_dir/<i>.log``.
    """
    done = row_dir / record
    if done.is_file() and not force:
        log(f"[{tag}] {name}: done already ({done})")
        return json.loads(done.read_text())
    if before is not None:
        before()
    if callable(cmds):
        cmds = cmds()
    row_dir.mkdir(parents=True, exist_ok=True)
    seconds: list[float] = []
    for i, cmd in enumerate(cmds):
        log(f"[{tag}] {name} ({i + 1}/{len(cmds)}): {shell_line(cmd)}")
        t0 = time.perf_counter()
        with open(row_dir / f"{i}.log", "w") as fh:
            proc = subprocess.run([sys.executable, *cmd[1:]], stdout=fh, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        seconds.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, shell_line(cmd),
                                                output=f"see {row_dir / f'{i}.log'}")
        log(f"[{tag}] {name} ({i + 1}/{len(cmds)}) done in {seconds[-1] / 60:.1f} min")
    res = collect(seconds)
    res.setdefault("command_s", seconds)
    res.setdefault("commands", [shell_line(c) for c in cmds])
    done.write_text(json.dumps(res, indent=1))
    return res


def metrics_entries(path: Path, transfer: bool = False) -> list[dict]:
    """The records of a ``metrics.json`` (one evaluated model: a single object; several: a list). A training
    job's file ends with its ``eval.transfer`` rows (records with ``"transfer"``, other collections): left out
    unless ``transfer``, so ``[-1]`` stays the trained model on the training collection."""
    entries = json.loads(path.read_text())
    entries = entries if isinstance(entries, list) else [entries]
    return entries if transfer else [e for e in entries if "transfer" not in e]
