"""The library's shape limits (issue 23): no module over 500 lines and no function over 80 lines, unless the
module docstring gives a one-line reason.

A module may opt out with a docstring line ``Size: <reason>`` (module length) or ``Long function <name>: <reason>``
(one function). The reason is read by people; this test only checks that it exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "platform" / "lexray"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(LIB.rglob("*.py"))


def _docstring(tree: ast.Module) -> str:
    return ast.get_docstring(tree) or ""


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LIB)))
def test_module_and_function_sizes(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    doc = _docstring(tree)
    problems = []
    n = len(src.splitlines())
    if n > MAX_MODULE_LINES and "Size:" not in doc:
        problems.append(f"{n} lines (> {MAX_MODULE_LINES}) and no 'Size: <reason>' line in the module docstring")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and f"Long function {node.name}:" not in doc:
                problems.append(f"{node.name} (line {node.lineno}) is {length} lines (> {MAX_FUNCTION_LINES})")
    assert not problems, f"{path.relative_to(LIB)}: " + "; ".join(problems)


def test_the_checker_sees_the_library() -> None:
    """Guards against a moved source root making the parametrized test above check nothing."""
    assert len(_modules()) > 50
