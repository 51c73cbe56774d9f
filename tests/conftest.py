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
# Ray Train V2's controller drains a worker's report queue (size 1) once per poll, at least 2.0 s apart by default,
# so each checkpoint report of a 4-step test fit waited up to 2 s (docs/bugs-and-fixes.md, 2026-11-23). Polls
# every 0.5 s: the same reports, less waiting. Inherited by every Ray the main call starts (the shared session, the
# jobs run as subprocesses), whose raylets pass the driver's environment to the controller; the multi-node tests
# keep Ray's default (tests/cluster/conftest.py says why).
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")
# One intra-op torch thread in the test process and the jobs it starts (read when torch is first imported; Ray
# Train workers and encoder actors set their own count from the CPUs they reserve). On this 2-core machine the
# tests' torch work is many small products next to Ray's processes: two threads waiting on each other at every
# product made a local encode of 140 8-token documents take 19.7 s against 1.0 s with one thread
# (tests/search/test_search_api.py saw the same, docs/search.md). Results do not depend on it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from lexray.paths import shared_dir  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """The tests that use ``ray_session`` run last, in their files' order; the others keep theirs, first. Why: the
    session is started for its first user and stopped at the end of the run, and idle it is not free (Ray Data's
    session-wide actors, the GCS and raylet polls: ~4.8 core-seconds a minute, measured 2026-11-27).
    Alphabetically its first user (tests/encode) came ~20 s of tests into the run, so it idled through the tests
    between tests/encode and tests/train: ~8 minutes of them measured with the main call alone, longer beside the
    second call. No other test depends on it: a test that needs Ray asks for it, and
    the jobs run as subprocesses start their own. tests/cluster/conftest.py does the same for its cluster."""
    users = [i for i in items if "ray_session" in getattr(i, "fixturenames", ())]
    if users:
        taken = set(map(id, users))
        items[:] = [i for i in items if id(i) not in taken] + users


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
