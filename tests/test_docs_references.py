"""The tests the documentation names exist: every ``tests/<file>.py`` and ``tests/<file>.py::<test>`` in README.md
and docs/*.md (the failure matrix of docs/operations.md names one per row; issue 24).

Why: a merged or renamed test left the matrix naming one that no longer existed (2026-11-27: the re-encoding
store's driver-kill row named a test that had been merged into tests/store/test_reencode_kills.py a day before).
A name written with a trailing ``...`` is an abbreviation and is checked only as a prefix."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
DOCS_AND_JOBS = (*DOCS, *sorted((REPO / "jobs").glob("*.py")))
"""The job files too where a check reads command lines: their usage docstrings show them."""


def _lines(files) -> Iterator[tuple[str, int, str]]:
    """``(file relative to the repository, line number, line)`` of every line of ``files``."""
    for f in files:
        for lineno, line in enumerate(f.read_text().splitlines(), 1):
            yield str(f.relative_to(REPO)), lineno, line


REF = re.compile(r"(tests/[A-Za-z0-9_/]+\.py)(?:::([A-Za-z0-9_]+)(\.\.\.|…)?)?")


@functools.cache
def _test_names(path: Path) -> set[str]:
    """The test functions (module level and in classes) of one test file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_docs_name_exists():
    missing, seen = [], 0
    for doc, lineno, line in _lines(DOCS):
        for m in REF.finditer(line):
            seen += 1
            path, name, abbreviated = REPO / m.group(1), m.group(2), m.group(3)
            where = f"{doc}:{lineno}: {m.group(0)}"
            if not path.is_file():
                missing.append(f"{where} (no such file)")
            elif name and not any(n == name or (abbreviated and n.startswith(name)) for n in _test_names(path)):
                missing.append(f"{where} (no such test in {m.group(1)})")
    assert seen > 50  # the pattern still matches how the docs write them
    assert not missing, "\n".join(missing)


API = re.compile(r"(?<![\w/.])lexray(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` (``lexray.a.b.name``) is a module, or an attribute chain under the longest importable
    module prefix."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_lexray_name_the_docs_give_resolves():
    """``lexray.<module>[.<name>]`` in README.md and docs/*.md (docs/architecture.md's module map, the API the
    guides show) is importable: a module, or a function, class or constant in one."""
    names = {(m.group(0).rstrip("."), doc) for doc, _, line in _lines(DOCS) for m in API.finditer(line)}
    assert len(names) > 40
    missing = sorted(f"{doc}: {name}" for name, doc in names if not _resolves(name))
    assert not missing, "\n".join(missing)


COMMAND_LINE = re.compile(r"(?:lexray ([a-z][a-z-]*)|python (jobs/[a-z_]+\.py))((?: +[^\s`|;&>]+)*)")
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*)")


def _help_flags(name: str) -> set[str]:
    """The ``--flags`` that ``lexray <name> --help`` shows."""
    import contextlib
    import io

    from lexray import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert cli.main([name, "--help"]) == 0
    return set(FLAG.findall(out.getvalue()))


def test_every_flag_of_a_command_line_in_the_docs_is_one_its_command_takes():
    """``lexray <command> ... --flag`` and ``python jobs/<file>.py ... --flag`` in README.md, docs/*.md and the job
    files' usage docstrings: each flag is in that command's ``--help`` (a renamed or removed flag is a copied command
    that fails)."""
    from lexray import cli

    flags: dict[str, set[str]] = {}
    wrong, checked = [], 0
    for doc, lineno, line in _lines(DOCS_AND_JOBS):
        for m in COMMAND_LINE.finditer(line):
            cmd = cli.BY_NAME.get(m.group(1)) if m.group(1) else cli.BY_JOB_FILE.get(Path(m.group(2)).name)
            if cmd is None:  # prose ("lexray is ...") or a script that is not a command
                continue
            if cmd.name not in flags:
                flags[cmd.name] = _help_flags(cmd.name)
            for flag in FLAG.findall(m.group(3)):
                checked += 1
                if flag not in flags[cmd.name]:
                    wrong.append(f"{doc}:{lineno}: `{cmd.name}` takes no {flag}")
    assert checked > 200  # the pattern still finds the command lines
    assert not wrong, "\n".join(wrong)


SET = re.compile(r"--set[ =]+([A-Za-z_][A-Za-z0-9_.]*)=")
PLACEHOLDERS = {"key"}  # "--set key=value" in prose


def _config_path_exists(tp: Any, parts: list[str]) -> bool:
    """Whether the dotted ``parts`` name a field under the annotation ``tp`` (pydantic sections, list indices,
    dict keys, optional sections)."""
    import types
    import typing

    from pydantic import BaseModel

    if not parts:
        return True
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_config_path_exists(a, parts) for a in typing.get_args(tp) if a is not type(None))
    if origin is typing.Annotated:
        return _config_path_exists(typing.get_args(tp)[0], parts)
    if origin in (list, tuple):
        return parts[0].isdigit() and _config_path_exists(typing.get_args(tp)[0], parts[1:])
    if origin is dict:
        return _config_path_exists(typing.get_args(tp)[1], parts[1:])
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(parts[0])
        return field is not None and _config_path_exists(field.annotation, parts[1:])
    return tp is Any


def test_every_set_key_in_the_docs_is_a_config_field():
    """``--set <key>=...`` in README.md, docs/*.md and the job files: the dotted key is a field of
    :class:`lexray.config.LexrayConfig` (list items by index: ``train.phases.0.lr``)."""
    from lexray.config import LexrayConfig

    keys = [(doc, lineno, key) for doc, lineno, line in _lines(DOCS_AND_JOBS) for key in SET.findall(line)
            if key not in PLACEHOLDERS]
    assert len(keys) > 50
    assert _config_path_exists(LexrayConfig, ["train", "phases", "0", "flops", "lambda_q"])
    assert not _config_path_exists(LexrayConfig, ["train", "phases", "0", "flops", "lambda"])
    wrong = [f"{doc}:{lineno}: {key}" for doc, lineno, key in keys
             if not _config_path_exists(LexrayConfig, key.split("."))]
    assert not wrong, "no such config field:\n" + "\n".join(wrong)
