"""docs/architecture.md's layout tree is true to the repository: every file and folder it lists exists, and every
module of a package whose modules it lists is listed (a folder shown without children, such as ``commands/`` or
``losses/``, is summarised by its line and not checked module by module), as is every job script.

Why: the guide asks that the page be kept true to the code, and a module added, moved or renamed without it is
easy to miss by reading."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r"^( *)([A-Za-z0-9_.*{},/-]+)(?:\s{2,}|$)")


def layout_tree() -> dict[str, bool]:
    """``{repository path: has listed children}`` from the first code block under ``## Layout``. Entries are
    indented by two spaces per level; their descriptions (and continuation lines, indented past column 10) are
    ignored."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    stack: list[tuple[int, str]] = []
    tree: dict[str, bool] = {}
    for line in block.splitlines():
        m = ENTRY.match(line)
        if not m or len(m.group(1)) > 8 or len(m.group(1)) % 2:
            continue
        indent, name = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else ""
        path = parent + name
        if parent:
            tree[parent] = True
        tree.setdefault(path, False)
        if name.endswith("/"):
            stack.append((indent, path))
    return tree


def test_every_listed_path_exists():
    tree = layout_tree()
    assert len(tree) > 100 and "platform/lexray/encode/pipeline.py" in tree  # the parser still reads the page
    missing = [p for p in tree if not (list(REPO.glob(p.rstrip("/"))) if "*" in p else (REPO / p).exists())]
    assert not missing, f"docs/architecture.md lists what does not exist: {missing}"


def test_every_module_of_a_listed_package_and_every_job_is_listed():
    tree = layout_tree()
    unlisted = []
    for folder, has_children in tree.items():
        if not (folder.endswith("/") and has_children and folder.startswith(("platform/lexray/", "jobs/"))):
            continue
        for py in sorted((REPO / folder).glob("*.py")):
            if py.name != "__init__.py" and f"{folder}{py.name}" not in tree:
                unlisted.append(f"{folder}{py.name}")
        for sub in sorted(p for p in (REPO / folder).iterdir() if p.is_dir() and (p / "__init__.py").is_file()):
            if f"{folder}{sub.name}/" not in tree:
                unlisted.append(f"{folder}{sub.name}/")
    assert not unlisted, f"not in docs/architecture.md's layout: {unlisted}"
