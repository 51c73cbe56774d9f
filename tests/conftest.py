"""Shared fixtures: the ../shared data paths and one Ray session for the whole test run.

Every test that uses Ray takes the ``ray_session`` fixture (session-scoped, started once, loopback only) and
carries a ``@pytest.mark.timeout``.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

from lexray.paths import shared_dir  # noqa: E402


@pytest.fixture(scope="session")
def shared():
    """The shared data folder (``../shared``)."""
    return shared_dir()


@pytest.fixture(scope="session")
def scifact_dir(shared):
    return shared / "datasets" / "scifact"


@pytest.fixture(scope="session")
def cranfield_dir(shared):
    return shared / "datasets" / "cranfield"


@pytest.fixture(scope="session")
def splade_tiny_dir(shared):
    return shared / "models" / "splade-tiny"


@pytest.fixture(scope="session")
def bpe_tokenizer_dir(shared):
    return shared / "tokenizers" / "deepseek-v3-bpe"


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance (2 CPUs, loopback) shared by every Ray test in the run."""
    import ray

    from lexray.ray_utils import init_ray

    init_ray(num_cpus=2, include_dashboard=False)  # faster start; tests need no State API
    yield ray
    ray.shutdown()
