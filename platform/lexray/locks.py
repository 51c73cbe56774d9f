"""One writer at a time: a lock file that names its holder (pid, host, start time, command).

Used by the encoder (``lexray.encode.pipeline.encode_corpus`` locks its output folder) and the store
(``lexray.store`` locks the whole store for a re-encode or a rollback). The lock is a file created with
``O_CREAT | O_EXCL`` (atomic on local file systems and NFSv3+), holding JSON::

    {"pid": 12345, "host": "node-1", "started_at": "2026-11-23T12:00:00+00:00", "command": "jobs/reencode.py ..."}

A second writer gets :class:`LockHeldError` naming the holder. A lock whose process is dead (same host, pid gone)
is *stale*: it is never taken over silently, because on shared storage another host's process cannot be checked;
``break_stale=True`` (``--break-stale-lock`` in the jobs) removes it when its holder is on this host and dead, and
refuses otherwise. The takeover is atomic: the stale lock is re-read and removed under an exclusive ``flock`` of
the folder, so of several processes taking over the same stale lock exactly one gets it. A lock of another host must be removed by hand after checking that host (docs/operations.md).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sys
from pathlib import Path

__all__ = ["LockHeldError", "FolderLock", "read_lock", "holder_alive"]


class LockHeldError(RuntimeError):
    """Another writer holds the lock; the message names it (pid, host, start time) and how to recover."""


def read_lock(path: str | os.PathLike) -> dict | None:
    """The holder recorded in a lock file, or None if there is none (or it is unreadable: ``{"raw": text}``)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {"raw": text[:200]}


def holder_alive(holder: dict) -> bool | None:
    """True/False if the holder runs on this host and its pid is alive/dead; None if it cannot be told."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return None
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FolderLock:
    """Exclusive lock on a folder: ``FolderLock(dir).acquire()`` / ``release()``, or a context manager.

    Args:
        folder: the folder to lock (created if missing); the lock file is ``folder/name``.
        name: lock file name (default ``LOCK``).
        break_stale: remove a stale lock (holder on this host and dead) instead of refusing.

    Raises (acquire):
        LockHeldError: the lock is held (by a live process, or a stale one without ``break_stale``, or a
            holder on another host); the message names the holder and the lock file.
    """

    def __init__(self, folder: str | os.PathLike, name: str = "LOCK", break_stale: bool = False):
        self.path = Path(folder) / name
        self.break_stale = break_stale
        self.held = False

    def acquire(self) -> FolderLock:
        """Create the lock file atomically (O_EXCL) with this process's pid, host, start time and command.

        Raises :class:`LockHeldError` naming the holder when another run holds it; a holder that is no longer
        running (a stale lock) is taken over only with ``break_stale=True``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
              "command": " ".join(sys.argv)[:500]}
        for attempt in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_lock(self.path) or {}
                alive = holder_alive(holder)
                who = (f"pid {holder.get('pid')} on host {holder.get('host')}, started {holder.get('started_at')}"
                       f" ({holder.get('command', '')})" if "pid" in holder else f"unreadable holder {holder}")
                if alive is False and self.break_stale and attempt == 0:
                    self._remove_if_still(holder)
                    continue
                if alive is False:
                    raise LockHeldError(
                        f"{self.path} is held by {who}, which is no longer running (a stale lock: the run was "
                        "killed). Check nothing else writes here, then re-run with --break-stale-lock "
                        "(break_stale=True)") from None
                hint = ("" if alive else " If that host's process is gone, delete the lock file by hand "
                        "(docs/operations.md, 'Stale locks').")
                raise LockHeldError(f"{self.path} is held by {who}: another run writes here; refusing to start."
                                    + hint) from None
            with os.fdopen(fd, "w") as fh:
                json.dump(me, fh)
            self.held = True
            return self
        raise LockHeldError(f"{self.path}: could not take the lock")  # pragma: no cover - raced twice

    def _remove_if_still(self, stale: dict) -> None:
        """Remove the lock file only if it still names ``stale``, under an exclusive ``flock`` of the folder.

        Why: reading the stale holder, then unlinking, raced: two takers both read the dead holder, the first
        unlinked it and created its own lock, the second then unlinked *that* one (two holders, 1 of 20 trials).
        Every taker re-reads the lock under the folder's flock, so the second sees the first's live lock and
        refuses; a plain ``O_EXCL`` create racing with the takeover still lets only one file exist.
        """
        import fcntl

        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if read_lock(self.path) == stale:
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # closing releases the flock

    def release(self) -> None:
        """Remove the lock file if this process holds it (a lock taken over by another process is left alone)."""
        if self.held:
            holder = read_lock(self.path) or {}
            if holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
