"""Kill points of a re-encoding run, for the tests that kill ``lexray reencode`` at each stage (issue 24).

Why a hook in the library: ``kill -9`` must land at an exact point of a real ``lexray reencode`` process (after
its first new shard, between a temporary folder and its rename, ...); a kill from outside, timed on files
appearing, races with the run. The tests set ``LEXRAY_TEST_KILL_AT=<stage>`` in the job's environment
(tests/store/test_reencode_kills.py); unset, :func:`stage` does nothing.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

__all__ = ["KILL_AT_ENV", "STAGES", "stage"]

KILL_AT_ENV = "LEXRAY_TEST_KILL_AT"
"""Test hook: names a stage of :data:`STAGES`; the run SIGKILLs itself there (:func:`stage`)."""
STAGES = ("encode", "build", "validate", "switch", "published")
"""Where a run can be killed on purpose: ``encode`` after its first new shard (nothing committed), ``build`` after
the committed version's index is built in its temporary folder, ``validate`` after it is validated and described
(still temporary), ``switch`` with the version's folder moved into ``versions/`` and the new ``current`` link made
but not yet renamed over the old one, ``published`` after the switch but before the catalog marks it published."""


def stage(name: str) -> None:
    """SIGKILL this process at stage ``name`` when the environment variable ``LEXRAY_TEST_KILL_AT`` names it.

    Why: the kill-at-each-stage tests (tests/store/test_reencode_kills.py) need ``kill -9`` at an exact point of
    a real ``lexray reencode`` process; a kill from outside, timed on files appearing, races with the run. Unset
    (always, outside those tests) it does nothing.
    """
    at = os.environ.get(KILL_AT_ENV)
    if at and at == name:
        log.warning("%s=%s: killing this run (SIGKILL)", KILL_AT_ENV, name)
        os.kill(os.getpid(), signal.SIGKILL)
