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
    which resolves inside :func:`shared_dir`.
    """
    s = str(name_or_path)
    if s.startswith("shared:"):
        return shared_path(s[len("shared:"):])
    p = Path(s).expanduser()
    if p.exists():
        return p.resolve()
    if not p.is_absolute() and (REPO_ROOT / p).exists():
        return (REPO_ROOT / p).resolve()
    return None


def default_output_dir() -> Path:
    """Default root for run outputs (``<repo>/outputs``, git-ignored)."""
    return REPO_ROOT / "outputs"
