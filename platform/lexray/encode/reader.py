"""The one shard reader: which shard files a reader may read (verified against their manifest), and streaming
their rows.

Integrity (``docs/indexing.md``, "What readers check"): every shard's sha256 over its file bytes is recorded in
the manifest when it is written; :func:`resolve_shards` (the one way readers find shards: ``lexray.index.build``,
``lexray.index.lucene`` and ``lexray.store``) refuses a folder whose manifest is not ``complete``, lists a shard
that is missing, or whose shard bytes or fingerprints differ from the manifest, naming the file. A folder without
``manifest.json`` (shards written by another tool) is read without checksums, with a warning, and only when all
its shards carry the same run fingerprint (a folder mixed from two runs is refused).

Why a module of its own: reading is what the other layers (index, store) need from a shard folder; the format,
the writer, the manifest and the resume check of the encoder stay in :mod:`lexray.encode.shards`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lexray.encode.shards import MANIFEST_FILE, load_manifest, read_fingerprint
from lexray.fsio import file_sha256

log = logging.getLogger(__name__)

__all__ = ["ShardStoreError", "ShardBatch", "ShardSet", "read_shard", "verify_files", "resolve_shards",
           "iter_shard_batches", "iter_live_rows", "iter_shards"]


class ShardStoreError(ValueError):
    """A shard folder or file that must not be read (incomplete, missing, damaged or mixed); names the file."""




class ShardBatch(tuple):
    """``(doc_ids, term_ids, weights)``: a list of str, and two lists of numpy arrays (int32 / float32)."""

    __slots__ = ()

    def __new__(cls, doc_ids, term_ids, weights):
        return super().__new__(cls, (doc_ids, term_ids, weights))

    @property
    def doc_ids(self) -> list[str]:
        return self[0]

    @property
    def term_ids(self) -> list[np.ndarray]:
        return self[1]

    @property
    def weights(self) -> list[np.ndarray]:
        return self[2]


def _split_list_column(col: pa.ChunkedArray | pa.ListArray, dtype) -> list[np.ndarray]:
    """A list<…> column → one numpy array per row (views into one flat buffer; no per-element Python)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(arr) == 0:
        return []
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    return np.split(values[offsets[0]:offsets[-1]], offsets[1:-1] - offsets[0])


def read_shard(path: str | os.PathLike) -> ShardBatch:
    """Read one shard whole into ``(doc_ids, term_ids, weights)``.

    Raises:
        ShardStoreError: the file is unreadable (truncated, not Parquet); the message names it.
    """
    try:
        t = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise ShardStoreError(f"{path}: unreadable shard ({type(e).__name__}: {e})") from None
    return ShardBatch(t.column("doc_id").to_pylist(), _split_list_column(t.column("term_ids"), np.int32),
                      _split_list_column(t.column("weights"), np.float32))


@dataclass
class ShardSet:
    """The shard files a reader may read, in document order, and what is known about them.

    ``files`` number the documents: file order, then row order, skipping the rows in ``dead`` (tombstones of
    :mod:`lexray.store`: ``{str(file): sorted rows}``). ``verified`` says whether the files were checked against
    a manifest or catalog (complete, present, checksums and fingerprints), ``vocab_size`` comes from there.
    """

    files: list[Path]
    vocab_size: int | None = None
    verified: bool = False
    dead: dict[str, list[int]] = field(default_factory=dict)
    source: str = ""

    @property
    def n_dead(self) -> int:
        return sum(len(v) for v in self.dead.values())


def verify_files(entries: Sequence[tuple[Path, str | None, str | None]], where: str,
                 advice: str = "re-run the encode into the same folder to redo it") -> None:
    """Check shard files against recorded ``(path, sha256, fingerprint)`` triples (the manifest or catalog).

    Raises:
        ShardStoreError: a file is missing, has no recorded checksum, its bytes differ from the checksum
            (damaged, truncated or replaced), or its schema metadata names another fingerprint (a folder mixed
            from two runs). The message names the file and ``where`` (the manifest or catalog), and for a
            damaged file ``advice`` (what fixes it where the files live).
    """
    for path, sha, fp in entries:
        if not path.is_file():
            raise ShardStoreError(f"{path}: shard listed in {where} is missing")
        if not sha:
            raise ShardStoreError(f"{path}: {where} records no content checksum for it (written by an older "
                                  "lexray); re-run the encode into the same folder to add checksums")
        got = file_sha256(path)
        if got != sha:
            raise ShardStoreError(f"{path}: content checksum {got[:12]}… differs from {sha[:12]}… in {where} "
                                  f"(the file was changed, truncated or damaged after it was written); {advice}")
        if fp is not None:
            try:
                got_fp = read_fingerprint(path)
            except (pa.ArrowException, OSError) as e:
                raise ShardStoreError(f"{path}: unreadable shard ({type(e).__name__}: {e})") from None
            if got_fp != fp:
                raise ShardStoreError(f"{path}: made by another run (fingerprint {got_fp[:12] or 'none'}… but "
                                      f"{where} says {fp[:12]}…): the folder mixes shards of different runs; "
                                      "re-encode into an empty folder")


def resolve_shards(shards: str | os.PathLike | Sequence[str | os.PathLike] | ShardSet,
                   check_content: bool = True) -> ShardSet:
    """The one way readers find shards: a verified :class:`ShardSet` for a folder, a file, or a list of files.

    A folder with ``manifest.json``: the manifest must be ``complete``, every listed shard present, its bytes
    equal to the recorded sha256 (``check_content``) and its fingerprint the manifest's; the listed files are
    returned in manifest order. A folder without a manifest (shards from another tool): every ``*.parquet`` in
    name order, unverified (a warning is logged), refused when its shards carry different fingerprints. A file or a list of files: used as given, unverified.

    Raises:
        FileNotFoundError: the folder or a file does not exist, or the folder holds no shard.
        ShardStoreError: the manifest is invalid, not complete, or a shard fails verification (names the file).
    """
    if isinstance(shards, ShardSet):
        return shards
    if not isinstance(shards, (str, os.PathLike)):
        files = [Path(s) for s in shards]
        if not files:
            raise ValueError("no shard files given")
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"{f} does not exist")
        return ShardSet(files, source="files")
    p = Path(shards)
    if p.is_file():
        return ShardSet([p], source=str(p))
    if not p.is_dir():
        raise FileNotFoundError(f"shards folder not found: {p}")
    try:
        man = load_manifest(p)
    except ValueError as e:
        raise ShardStoreError(str(e)) from None
    where = str(p / MANIFEST_FILE)
    if man is None:
        files = sorted(f for f in p.glob("*.parquet") if f.is_file())
        if not files:
            raise FileNotFoundError(f"no *.parquet shards in {p}")
        _refuse_mixed_runs(p, files)
        log.warning("%s has no %s: reading %d shard files without checksums (their fingerprints agree)",
                    p, MANIFEST_FILE, len(files))
        return ShardSet(files, source=str(p))
    if man.status != "complete":
        raise ShardStoreError(f"{where}: status '{man.status}': the encode into {p} is still running or was "
                              "interrupted; re-run it into the same folder to finish it before reading")
    if not man.shards:
        raise FileNotFoundError(f"no shards listed in {where}")
    files = [p / s.file for s in man.shards]
    if check_content:
        verify_files([(p / s.file, s.sha256, man.fingerprint) for s in man.shards], where)
    else:
        for f in files:
            if not f.is_file():
                raise ShardStoreError(f"{f}: shard listed in {where} is missing")
    extra = sorted({f.name for f in p.glob("part-*.parquet")} - {f.name for f in files})
    if extra:
        log.warning("%s: %d part-*.parquet files not in the manifest are ignored (e.g. %s)", p, len(extra), extra[0])
    return ShardSet(files, vocab_size=man.vocab_size, verified=check_content, source=where)


def _refuse_mixed_runs(folder: Path, files: list[Path]) -> None:
    """A folder without a manifest is read only when all its shards carry the same run fingerprint (schema
    metadata, :func:`lexray.encode.shards.read_fingerprint`; none at all counts as one fingerprint, ``""``).

    Raises:
        ShardStoreError: two or more fingerprints (a folder mixed from several runs), naming a file of each; an
            unreadable file.
    """
    by_fp: dict[str, list[Path]] = {}
    for f in files:
        try:
            by_fp.setdefault(read_fingerprint(f), []).append(f)
        except (pa.ArrowException, OSError) as e:
            raise ShardStoreError(f"{f}: unreadable shard ({type(e).__name__}: {e})") from None
    if len(by_fp) > 1:
        groups = "; ".join(f"{fp[:12] or 'no fingerprint'}: {len(fs)} files (e.g. {fs[0].name})"
                           for fp, fs in sorted(by_fp.items(), key=lambda kv: kv[1][0]))
        raise ShardStoreError(f"{folder} has no {MANIFEST_FILE} and mixes shards of {len(by_fp)} runs ({groups}); "
                              "refusing to read it: re-encode into an empty folder")


_SHARD_COLUMNS = ("doc_id", "term_ids", "weights")


def iter_shard_batches(shards: str | os.PathLike | Sequence[str | os.PathLike] | ShardSet, batch_size: int = 4096
                       ) -> Iterator[tuple[Path, int, list[str], list[np.ndarray], list[np.ndarray]]]:
    """Stream ``(file, first_row, doc_ids, term_ids, weights)`` record batches (the one shard reader).

    ``shards`` goes through :func:`resolve_shards` (verification). ``first_row`` is the 0-based row number of
    the batch's first row in its file; rows that are tombstones of the :class:`ShardSet` are left out (so the
    row numbers of a batch are not contiguous then: use :func:`iter_live_rows` for them). Term ids are int32,
    weights float32, one array per document (views into one buffer).

    Raises:
        ShardStoreError: a file is unreadable or truncated (names the file), or a missing column, a null
            ``doc_id`` or list, or a row whose term_ids and weights differ in length (names file, row, field).
    """
    for path, row0, _rows, doc_ids, terms, weights in iter_live_rows(shards, batch_size):
        yield path, row0, doc_ids, terms, weights


def iter_live_rows(shards, batch_size: int = 4096):
    """Like :func:`iter_shard_batches` but yields ``(file, first_row, rows, doc_ids, term_ids, weights)`` where
    ``rows`` (int64 array) are the file row numbers of the yielded (live) documents."""
    sset = resolve_shards(shards)
    for path in sset.files:
        dead = np.asarray(sset.dead.get(str(path), ()), dtype=np.int64)
        try:
            pf = pq.ParquetFile(path)
            names = pf.schema_arrow.names
            for col in _SHARD_COLUMNS:
                if col not in names:
                    raise ShardStoreError(f"{path}: missing column {col!r} (has {names}); expected {_SHARD_COLUMNS}")
            row0 = 0
            for batch in pf.iter_batches(batch_size=batch_size, columns=list(_SHARD_COLUMNS)):
                n = batch.num_rows
                for name in _SHARD_COLUMNS:
                    col = batch.column(name)
                    if col.null_count:
                        bad = next(i for i, v in enumerate(col.is_null().to_pylist()) if v)
                        raise ShardStoreError(f"{path}: row {row0 + bad}: field {name!r} is null")
                doc_ids = [str(x) for x in batch.column("doc_id").to_pylist()]
                t_col, w_col = batch.column("term_ids"), batch.column("weights")
                lens_t = np.diff(t_col.offsets.to_numpy())
                lens_w = np.diff(w_col.offsets.to_numpy())
                if not np.array_equal(lens_t, lens_w):
                    bad = int(np.flatnonzero(lens_t != lens_w)[0])
                    raise ShardStoreError(f"{path}: row {row0 + bad} (doc_id {doc_ids[bad]!r}): field 'term_ids' "
                                          f"has {lens_t[bad]} entries but 'weights' has {lens_w[bad]}")
                terms = _split_list_column(t_col, np.int32)
                weights = _split_list_column(w_col, np.float32)
                rows = np.arange(row0, row0 + n, dtype=np.int64)
                if dead.size:
                    keep = ~np.isin(rows, dead)
                    if not keep.all():
                        idx = np.flatnonzero(keep)
                        doc_ids = [doc_ids[i] for i in idx]
                        terms = [terms[i] for i in idx]
                        weights = [weights[i] for i in idx]
                        rows = rows[idx]
                if len(rows):
                    yield path, row0, rows, doc_ids, terms, weights
                row0 += n
        except (pa.ArrowException, OSError) as e:
            raise ShardStoreError(f"{path}: unreadable shard ({type(e).__name__}: {e})") from None


def iter_shards(out_dir: str | os.PathLike | ShardSet, batch_size: int = 4096) -> Iterator[ShardBatch]:
    """Iterate all shards in document order as :class:`ShardBatch` es of at most ``batch_size`` rows.

    Goes through :func:`resolve_shards` (a folder with a manifest is verified first).
    """
    for _, _, doc_ids, terms, weights in iter_shard_batches(out_dir, batch_size):
        yield ShardBatch(doc_ids, terms, weights)


def read_dense(shards: str | os.PathLike | Sequence[str | os.PathLike] | ShardSet
               ) -> tuple[list[str], np.ndarray]:
    """All dense shards (:func:`lexray.encode.shards.dense_schema`) of a folder, verified like every other read
    (:func:`resolve_shards`), as ``(doc_ids, vectors (N, d) float32)`` in document order.

    Raises:
        ShardStoreError: a file is not a dense shard, the files disagree in d, or verification fails (names the
            file).
    """
    from lexray.encode.shards import dense_schema_problem

    ss = resolve_shards(shards)
    ids: list[str] = []
    mats: list[np.ndarray] = []
    for f in ss.files:
        try:
            t = pq.read_table(f)
        except (pa.ArrowException, OSError) as e:
            raise ShardStoreError(f"{f}: unreadable shard ({type(e).__name__}: {e})") from None
        problem = dense_schema_problem(t.schema)
        if problem:
            raise ShardStoreError(f"{f}: not a dense shard: {problem}")
        d = t.schema.field(1).type.list_size
        if mats and mats[0].shape[1] != d:
            raise ShardStoreError(f"{f}: embedding dimension {d}, the folder's other shards have {mats[0].shape[1]}")
        emb = t.column("embedding").combine_chunks()
        mats.append(emb.values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, d))
        ids.extend(t.column("doc_id").to_pylist())
    return ids, np.concatenate(mats) if mats else np.zeros((0, 0), np.float32)
