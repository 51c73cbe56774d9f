"""File-system helpers shared across layers: the one file sha256, and publishing a folder atomically when several
processes may build it at once.

Why: a converted GGUF model (``models/gguf.py``) or a checkpoint's model copied to a node's disk
(``train/checkpoint.py``) is built by whichever process needs it first, and two Ray workers often need it at the
same moment. Each builds into a private temporary folder beside the target and ``os.rename``s it into place;
``rename`` of a folder onto an existing non-empty one fails, so the loser of a race discards its copy. A reader
therefore sees no folder or a complete one, never a partial one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (streamed in 4 MiB blocks; ~0.3 s for 100 MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a folder, so that a rename into it (a published version, a switched link) survives a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_folder(dest: str | os.PathLike, fill: Callable[[Path], None], marker: str,
                   replace_stale: bool = True) -> Path:
    """Build ``dest`` once: return it at once if ``dest/marker`` exists, else ``fill(tmp)`` and rename into place.

    Args:
        dest: the folder to publish.
        fill: writes the folder's content into the temporary folder it is given; ``marker`` must be among it
            (write it last where completeness matters).
        marker: a file whose presence means ``dest`` is complete.
        replace_stale: delete a ``dest`` without ``marker`` that blocks the rename (False: raise
            FileExistsError instead, for callers whose ``dest`` may hold a user's files).

    Returns:
        ``dest``. A stale, incomplete ``dest`` (no marker: left by a crash outside this function) is replaced.
    """
    dest = Path(dest)
    if (dest / marker).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        fill(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; shared caches are read by other users' workers
        try:
            os.rename(tmp, dest)
        except OSError:
            if not (dest / marker).is_file():  # not a lost race: a stale, incomplete folder
                if not replace_stale:
                    raise FileExistsError(f"{dest} appeared while it was being built; not replaced") from None
                shutil.rmtree(dest, ignore_errors=True)
                os.rename(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


class OutputNotWritableError(PermissionError):
    """An output folder lexray must write is read-only (or on a read-only file system); raised at a job's start,
    before Ray or a model is loaded."""


def check_writable(folder: str | os.PathLike, what: str = "output folder") -> None:
    """Refuse a read-only output folder at a job's start: create and delete a probe file in ``folder`` (or in its
    nearest existing parent when it does not exist yet).

    Why a probe rather than ``os.access``: ``os.access`` says yes to root on a read-only mount and to anyone on a
    file system mounted read-only under an NFS client's cache; creating a file is what the job will do.

    Raises:
        OutputNotWritableError: the folder cannot be written (names it, the errno and ``what``).
    """
    p = Path(folder).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        fd, probe = tempfile.mkstemp(prefix=".lexray-write-probe-", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputNotWritableError(
            f"{what} {folder} is not writable ({p}: {os.strerror(e.errno) if e.errno else e}); choose a writable "
            "folder or fix its permissions (nothing was started)") from e
