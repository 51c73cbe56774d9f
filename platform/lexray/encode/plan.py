"""Shard-size policy and the shard plan of a corpus: how many documents a shard holds, which documents each shard
holds, and the stream of work units (payloads) the encoder takes.

Why a module of its own: the shard size is resolved in one place (:func:`resolve_rows_per_shard`) for both
writers of shards, the corpus encoder (:mod:`lexray.encode.pipeline`) and the incremental re-encoder
(:mod:`lexray.store.reencode`), so the two cannot drift apart. The plan is what makes resume exact: shard k is
always the k-th slice of R *kept* documents of ``corpus.jsonl`` (docs/indexing.md, "Encoding").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from lexray.encode.shards import ShardInfo, ids_digest, shard_name

__all__ = ["Payload", "AUTO_SHARDS", "AUTO_MIN_ROWS", "AUTO_MAX_ROWS", "auto_rows_per_shard", "count_corpus_rows",
           "resolve_rows_per_shard", "plan_shards", "iter_payloads"]

Payload = tuple[int, str, list[str], list[str]]
"""One unit of work: ``(shard index, shard file name, doc_ids, texts)``."""

AUTO_SHARDS = 32
AUTO_MIN_ROWS = 128
AUTO_MAX_ROWS = 1_000


def auto_rows_per_shard(n_docs: int) -> int:
    """``encode.rows_per_shard = None``: ``ceil(n_docs / 32)`` clamped to [128, 1,000].

    Why: a shard is the unit of work one actor takes, so the run ends when the last actor finishes its last
    shard. With the former fixed 1,000 rows, SciFact (5,183 documents) became five shards of 1,000 and one of 183:
    on two actors one encoded 3,000 documents while the other stopped after 2,183, 16 % longer than a balanced
    split (issue 13). About 32 shards leave at most one small shard of imbalance; the floor
    of 128 rows keeps length-sorted batches well filled (padding) and per-shard costs (a Parquet file, its
    sha256, a manifest update) small; the cap keeps large corpora at 1,000-row shards as before.
    """
    return max(AUTO_MIN_ROWS, min(AUTO_MAX_ROWS, -(-max(int(n_docs), 0) // AUTO_SHARDS)))


def count_corpus_rows(corpus: str | os.PathLike, max_docs: int | None = None) -> int:
    """Non-blank lines of ``corpus.jsonl`` (bad rows included: an upper bound of the kept documents), at most
    ``max_docs``: the N that :func:`auto_rows_per_shard` takes, read in 4 MiB blocks without parsing JSON."""
    n = 0
    tail = b""
    with open(corpus, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            lines = (tail + block).split(b"\n")
            tail = lines.pop()
            n += sum(1 for ln in lines if ln.strip())
            if max_docs is not None and n >= max_docs:
                return max_docs
    n += 1 if tail.strip() else 0
    return n if max_docs is None else min(n, max_docs)


def resolve_rows_per_shard(configured: int | None, n_docs: int | Callable[[], int],
                           previous: int | None = None) -> int:
    """The rows per shard a run uses: the one place the shard size is resolved.

    Args:
        configured: ``encode.rows_per_shard`` (None = auto).
        n_docs: the documents to shard, or a zero-argument callable counting them (e.g.
            :func:`count_corpus_rows`), called only when the auto size is needed.
        previous: the rows per shard of the folder's existing manifest, if any: for ``configured=None`` a
            resumed run keeps its layout and fingerprint.

    Returns:
        ``configured`` if set, else ``previous`` if set, else :func:`auto_rows_per_shard` of ``n_docs``.
    """
    if configured is not None:
        return configured
    if previous:
        return int(previous)
    return auto_rows_per_shard(n_docs() if callable(n_docs) else n_docs)


def plan_shards(dataset_dir: str | os.PathLike, rows_per_shard: int, on_error: Literal["fail", "skip"] = "fail",
                max_docs: int | None = None, report=None, show_progress: bool = False) -> list[ShardInfo]:
    """Stream the corpus once (validating it) and cut it into slices of ``rows_per_shard`` kept documents.

    Shard k holds kept documents ``[k·R, (k+1)·R)`` in file order. Only per-shard counts, first/last ids and an
    id hash are kept in memory.

    Raises:
        lexray.data.beir.DataError: a bad row under ``on_error="fail"`` (file, line, field).
    """
    from lexray.data.beir import iter_corpus

    shards: list[ShardInfo] = []
    h = None
    first_id = last_id = ""
    n_in = 0
    n = 0
    docs = iter_corpus(dataset_dir, on_error=on_error, report=report, max_docs=max_docs)
    if show_progress:
        from tqdm.auto import tqdm

        docs = tqdm(docs, desc="validate corpus", unit="doc", mininterval=1.0)

    def close() -> None:
        shards.append(ShardInfo(index=len(shards), file=shard_name(len(shards)), rows=n_in,
                                first_doc=n - n_in, first_doc_id=first_id, last_doc_id=last_id,
                                ids_sha1=h.hexdigest()))

    for doc in docs:
        if n_in == 0:
            h = hashlib.sha1()
            first_id = doc.doc_id
        else:
            h.update(b"\n")
        h.update(doc.doc_id.encode("utf-8"))
        last_id = doc.doc_id
        n_in += 1
        n += 1
        if n_in == rows_per_shard:
            close()
            n_in = 0
    if n_in:
        close()
    return shards


def iter_payloads(dataset_dir: str, plan: Sequence[ShardInfo], todo: Sequence[int], on_error: str,
                  max_docs: int | None, rows_per_shard: int) -> Iterator[Payload]:
    """Yield ``(shard index, file, doc_ids, texts)`` for the shards in ``todo``, streaming the corpus once.

    Raises RuntimeError if a slice's ids differ from the plan (the corpus changed since planning).
    """
    from lexray.data.beir import ReadReport, iter_corpus

    want = set(todo)
    if not want:
        return
    last = max(want)
    ids: list[str] = []
    texts: list[str] = []
    for n, doc in enumerate(iter_corpus(dataset_dir, on_error=on_error, report=ReadReport(), max_docs=max_docs)):
        k = n // rows_per_shard
        if k > last:
            break
        if k not in want:
            continue
        ids.append(doc.doc_id)
        texts.append(doc.full_text)
        if len(ids) == plan[k].rows:
            if ids_digest(ids) != plan[k].ids_sha1:
                raise RuntimeError(f"{dataset_dir}: documents of shard {k} differ from the plan made at the start "
                                   "of this run; was corpus.jsonl modified during encoding?")
            yield k, plan[k].file, ids, texts
            ids, texts = [], []
    if ids:
        raise RuntimeError(f"{dataset_dir}: corpus ended inside shard {n // rows_per_shard} (changed during "
                           "encoding?)")
