"""A document's title and text by its position in an index, read from the BEIR ``corpus.jsonl`` on demand.

Why offsets and not a table in memory: a search answers with a few documents, while the corpus can be far larger
than the index; holding it (or a DuckDB copy of it) in every searching process would load the corpus twice. At
open, the one BEIR reader (:func:`lexray.data.beir.corpus_line_numbers`) maps each document id to its line, and
one vectorised newline scan of the memory-mapped file gives each line's byte range; the index's ``doc_idx`` then
maps to ``(start, end)`` (two int64 per document: 83 KB for SciFact's 5,183 documents). A lookup parses one line
of the memory-mapped file, so processes searching the same corpus share its pages through the page cache.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence

import numpy as np

__all__ = ["CorpusFields"]

_SCAN_BYTES = 64 << 20  # newline scan in 64 MiB windows: a (window,) bool temporary, not one of the file's size


def _line_starts(buf: mmap.mmap, size: int) -> np.ndarray:
    """Byte offset of the start of every line (int64, line L (1-based) starts at ``[L-1]``), and ``size`` last."""
    parts = [np.zeros(1, np.int64)]
    view = np.frombuffer(buf, dtype=np.uint8, count=size)
    try:
        for lo in range(0, size, _SCAN_BYTES):
            nl = np.flatnonzero(view[lo:lo + _SCAN_BYTES] == 10)
            parts.append(nl.astype(np.int64) + (lo + 1))
    finally:
        del view  # release the export, so the mmap can be closed later
    starts = np.concatenate(parts)
    if starts[-1] != size:  # no newline at the end: the last line ends at the end of the file
        starts = np.append(starts, size)
    return starts


class CorpusFields:
    """Title and text of the documents of one index, looked up by ``doc_idx``.

    Args:
        dataset: the BEIR folder (path or ``shared:<rel>``) whose ``corpus.jsonl`` the index was built from.
        doc_ids: (N,) document ids in index order (``ExactSearcher.doc_ids``).

    Raises:
        FileNotFoundError: the folder or its ``corpus.jsonl`` does not exist.

    A document of the index that the corpus no longer holds gets ``None`` fields (counted in :attr:`n_missing`),
    as does any lookup whose line does not carry the expected ``_id`` (the file changed after opening).
    Thread-safe: lookups only read the memory map.
    """

    def __init__(self, dataset: str | os.PathLike, doc_ids: Sequence[str]):
        from lexray.data.beir import corpus_line_numbers, resolve_dataset_dir

        self.path = resolve_dataset_dir(dataset) / "corpus.jsonl"
        lines = corpus_line_numbers(self.path.parent)  # FileNotFoundError naming the file when it is missing
        line_of = np.fromiter((lines.get(str(d), 0) for d in doc_ids), dtype=np.int64, count=len(doc_ids))
        del lines
        self.n_missing = int((line_of == 0).sum())
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        starts = _line_starts(self._mm, size) if self._mm is not None else np.zeros(2, np.int64)
        safe = np.maximum(line_of, 1)
        self._start = np.where(line_of > 0, starts[safe - 1], -1)
        self._end = np.where(line_of > 0, starts[np.minimum(safe, len(starts) - 1)], -1)
        self._doc_ids = doc_ids

    def get(self, doc_idx: int) -> dict[str, str] | None:
        """``{"title", "text"}`` of the document at ``doc_idx`` (``""`` for an absent field), or None."""
        a, b = int(self._start[doc_idx]), int(self._end[doc_idx])
        if a < 0 or self._mm is None:
            return None
        try:
            rec = json.loads(self._mm[a:b].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        if str(rec.get("_id")) != str(self._doc_ids[doc_idx]):
            return None
        return {"title": rec.get("title") or "", "text": rec.get("text") or ""}

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
