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
