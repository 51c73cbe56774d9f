"""An interrupt point of an encoding run, for the test that presses Ctrl-C in ``lexray encode`` (issue 24).

Why a hook in the library: the hygiene test (tests/cluster/test_hygiene.py) interrupts a real ``lexray encode``
after its second shard and checks what the interrupted run leaves (the manifest says ``interrupted``, no lock, no
process). Sent from outside, timed on the manifest, the SIGINT raced with the run: Ray Data hands finished shards
to the driver in bursts, so when the manifest showed 2 shards the run could be recording its last one, and the
SIGINT then landed in Ray's shutdown at exit, after a complete run (exit 0; seen once, 2026-11-26). With
``LEXRAY_TEST_INTERRUPT_AFTER_SHARDS=<n>`` in the job's environment the run sends itself the same SIGINT right
after it recorded its n-th shard; unset (always, outside that test) :func:`shard_recorded` does nothing.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

__all__ = ["INTERRUPT_AFTER_SHARDS_ENV", "shard_recorded"]

INTERRUPT_AFTER_SHARDS_ENV = "LEXRAY_TEST_INTERRUPT_AFTER_SHARDS"
"""Test hook: a number n; the run sends itself SIGINT (Ctrl-C) once it recorded n shards (:func:`shard_recorded`)."""


def shard_recorded(n_recorded: int) -> None:
    """Send this process SIGINT when ``n_recorded`` (shards recorded by this run so far) equals the number in
    ``LEXRAY_TEST_INTERRUPT_AFTER_SHARDS``. Python raises the KeyboardInterrupt at once, in the driver's loop over
    finished shards: the Ctrl-C path of a run with shards still to do."""
    at = os.environ.get(INTERRUPT_AFTER_SHARDS_ENV)
    if at and int(at) == n_recorded:
        log.warning("%s=%s: interrupting this run (SIGINT)", INTERRUPT_AFTER_SHARDS_ENV, at)
        os.kill(os.getpid(), signal.SIGINT)
