"""One writer at a time: the lock names its holder; stale locks are refused unless told (no model, no Ray)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from lexray.locks import FolderLock, LockHeldError, read_lock


def test_second_writer_is_refused_with_the_holder_named(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "LOCK").write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(),
                                                   "started_at": "2026-11-23T12:00:00+00:00", "command": "x"}))
        with pytest.raises(LockHeldError, match=rf"held by pid {holder.pid} on host {socket.gethostname()}, "
                                                r"started 2026-11-23T12:00:00"):
            FolderLock(tmp_path).acquire()
        with pytest.raises(LockHeldError):  # a live holder is never broken
            FolderLock(tmp_path, break_stale=True).acquire()
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_needs_the_flag_and_release_removes_only_own_lock(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "LOCK").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(),
                                               "started_at": "t", "command": "killed"}))
    with pytest.raises(LockHeldError, match="no longer running.*--break-stale-lock"):
        FolderLock(tmp_path).acquire()
    with FolderLock(tmp_path, break_stale=True) as lock:
        assert read_lock(lock.path)["pid"] == os.getpid()
    assert not (tmp_path / "LOCK").exists()


def _take(path, barrier, results, slow):
    import time

    import lexray.locks as locks

    if slow:  # widen the read-then-act window so a non-atomic takeover shows every time
        orig = locks.read_lock

        def read_slowly(p):
            out = orig(p)
            time.sleep(0.2)
            return out

        locks.read_lock = read_slowly
    barrier.wait()
    try:
        FolderLock(path, break_stale=True).acquire()
        results.put(os.getpid())
    except LockHeldError:
        results.put(None)
    barrier.wait()  # hold the lock until every taker has tried


def test_stale_lock_takeover_is_atomic_exactly_one_of_many_takers_wins(tmp_path):
    """Issue 24: read-then-unlink let two processes both take over the same stale lock (1 of 20 trials)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    n = 6
    for trial in range(2):
        (tmp_path / "LOCK").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(),
                                                   "started_at": "t", "command": "killed"}))
        barrier, results = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_take, args=(tmp_path, barrier, results, True)) for _ in range(n)]
        for p in procs:
            p.start()
        got = [results.get(timeout=30) for _ in range(n)]
        for p in procs:
            p.join(timeout=30)
        winners = [g for g in got if g is not None]
        assert len(winners) == 1, f"trial {trial}: {len(winners)} processes took the lock"
        (tmp_path / "LOCK").unlink(missing_ok=True)
