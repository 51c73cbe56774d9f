"""Parquet sparse shards and their ``manifest.json``: the Arrow schema, atomic writes, reading, verification.

Layout of an encoded corpus folder::

    out_dir/
      part-00000.parquet   documents [0, R) of the corpus (R = rows_per_shard), in corpus order
      part-00001.parquet   documents [R, 2R)
      ...
      manifest.json        model, settings, shard list with row counts and doc-id hashes, totals

Why deterministic slices: shard k always holds the k-th slice of R *kept* documents of ``corpus.jsonl`` (in file
order, after the BEIR reader's validation), so a resumed run knows exactly which documents a missing or damaged
shard must hold and encodes only those; every document lands in exactly one shard.

Why atomic writes: a shard is written to a hidden temporary file (``.part-00003.parquet.tmp-<uuid>``, which does
not match ``*.parquet``) and renamed into place only when complete, so a crash never leaves a half-written
``part-*.parquet`` that a reader (``lexray.index.build``) would pick up. Verification still reads every shard in
full before trusting it (row count, schema, doc-id hash), which also catches files damaged later.

Integrity (``docs/indexing.md``, "What readers check"): every shard's sha256 over its file bytes is recorded in
the manifest when it is written; :func:`resolve_shards` (the one way readers find shards: ``lexray.index.build``,
``lexray.index.lucene`` and ``lexray.store``) refuses a folder whose manifest is not ``complete``, lists a shard
that is missing, or whose shard bytes or fingerprints differ from the manifest, naming the file. A folder without
``manifest.json`` (shards written by another tool) is read unverified, with a warning.

Schema (``docs/contracts.md``): ``doc_id: string, term_ids: list<int32>, weights: list<float32>``; term ids are
sorted ascending within a row and ``weights`` is aligned with them. Each file's Arrow schema metadata carries
``lexray.fingerprint`` (the run identity, see :func:`fingerprint`) and ``lexray.shard`` (its index).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from lexray.fsio import file_sha256

log = logging.getLogger(__name__)

__all__ = [
    "SHARD_SCHEMA",
    "ShardStoreError",
    "ShardSet",
    "resolve_shards",
    "verify_files",
    "iter_shard_batches",
    "file_sha256",
    "MANIFEST_FILE",
    "FORMAT_VERSION",
    "ShardBatch",
    "ShardInfo",
    "ModelInfo",
    "Totals",
    "Manifest",
    "ManifestMismatchError",
    "shard_name",
    "shard_table",
    "write_shard",
    "read_shard",
    "iter_shards",
    "iter_live_rows",
    "verify_shard",
    "ids_digest",
    "fingerprint",
    "load_manifest",
    "save_manifest",
    "remove_stale_tmp",
    "shard_metadata",
]

FORMAT_VERSION = 2
"""2: every ShardInfo carries ``sha256`` (content checksum of the file bytes)."""
MANIFEST_FILE = "manifest.json"

SHARD_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("term_ids", pa.list_(pa.int32()), nullable=False),
    pa.field("weights", pa.list_(pa.float32()), nullable=False),
])
"""Arrow schema of every shard: one row per document."""

_META_FP = b"lexray.fingerprint"
_META_SHARD = b"lexray.shard"


class ManifestMismatchError(ValueError):
    """``out_dir`` holds shards made by a different model, settings or corpus; the message names what differs."""


class ShardStoreError(ValueError):
    """A shard folder or file that must not be read (incomplete, missing, damaged or mixed); names the file."""


# --------------------------------------------------------------------------- manifest model
class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class ShardInfo(_Model):
    """One planned shard: the slice ``[first_doc, first_doc + rows)`` of the kept corpus documents."""

    index: int
    file: str
    rows: int = Field(..., description="documents in the shard")
    first_doc: int = Field(..., description="0-based ordinal of its first document among the kept documents")
    first_doc_id: str
    last_doc_id: str
    ids_sha1: str = Field(..., description="sha1 of its doc ids joined by newlines (see ids_digest)")
    postings: int | None = Field(None, description="non-zero (term, weight) entries; None until written")
    bytes: int | None = None
    sha256: str | None = Field(None, description="sha256 of the file bytes (content checksum); None until written")
    encode_seconds: float | None = Field(None, description="actor time to encode and write it")


class ModelInfo(_Model):
    """The encoder that made the shards."""

    name_or_path: str | None
    content_hash: str = Field(..., description="sha256 over weight, config, tokenizer and lexray_encoder.json "
                                               "files (or over the random-init config)")
    vocab_size: int | None = None
    doc_max_length: int | None = None
    settings: dict[str, Any] | None = Field(None, description="EncoderSettings as the encoder loaded them")
    config: dict[str, Any] = Field(default_factory=dict, description="the ModelConfig used")


class Totals(_Model):
    docs: int = 0
    postings: int = 0
    avg_nnz: float = 0.0
    shards: int = 0
    shards_encoded: int = Field(0, description="shards encoded by the last run (the rest were kept)")
    shards_reused: int = 0
    docs_encoded: int = 0
    encode_seconds: float = Field(0.0, description="wall seconds of the last run's encoding stage")
    docs_per_s: float = Field(0.0, description="docs_encoded / encode_seconds")
    actor_seconds: float = Field(0.0, description="sum over actors of time spent encoding + writing shards")


class Manifest(_Model):
    """``manifest.json``: what made the shards, the shard plan, and totals. Written last (status ``complete``);
    while a run is in progress the same file has status ``running`` and lists the planned shards."""

    format_version: int = FORMAT_VERSION
    status: Literal["running", "complete"] = "running"
    fingerprint: str
    identity: dict[str, Any] = Field(..., description="what the fingerprint hashes (compared on resume)")
    created_at: str = Field(default_factory=lambda: _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    lexray_version: str | None = None
    model: ModelInfo
    vocab_size: int | None = None
    encode: dict[str, Any] = Field(default_factory=dict, description="the EncodeConfig used")
    dataset: dict[str, Any] = Field(default_factory=dict, description="corpus path, hash, on_error, max_docs")
    read_report: dict[str, Any] = Field(default_factory=dict, description="rows read / kept / skipped by reason")
    rows_per_shard: int
    shards: list[ShardInfo] = Field(default_factory=list)
    totals: Totals = Field(default_factory=Totals)
    timings: dict[str, float] = Field(default_factory=dict,
                                      description="last run's actor time per stage, seconds (summed over actors)")


def load_manifest(out_dir: str | os.PathLike) -> Manifest | None:
    """Read ``out_dir/manifest.json``; None if absent.

    Raises:
        ValueError: the file exists but is not a valid manifest (names the file).
    """
    path = Path(out_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        return Manifest.model_validate_json(path.read_text())
    except Exception as e:  # noqa: BLE001 - re-raised with the file name
        raise ValueError(f"{path}: invalid shard manifest: {e}") from None


def save_manifest(manifest: Manifest, out_dir: str | os.PathLike) -> Path:
    """Write ``manifest.json`` atomically (temporary file + rename); returns its path."""
    path = Path(out_dir) / MANIFEST_FILE
    tmp = path.with_name(f".{MANIFEST_FILE}.tmp-{uuid.uuid4().hex}")
    tmp.write_text(manifest.model_dump_json(indent=2))
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- identity
def ids_digest(doc_ids: Iterable[str]) -> str:
    """sha1 of the doc ids joined by ``\\n`` (order matters): a shard's content identity in the manifest."""
    h = hashlib.sha1()
    for i, d in enumerate(doc_ids):
        if i:
            h.update(b"\n")
        h.update(d.encode("utf-8"))
    return h.hexdigest()


def fingerprint(identity: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of ``identity`` (model hash, output-relevant settings, corpus hash)."""
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def shard_name(index: int) -> str:
    """File name of shard ``index``: ``part-00007.parquet`` (name order = corpus order)."""
    return f"part-{index:05d}.parquet"


# --------------------------------------------------------------------------- writing
def shard_table(doc_ids: Sequence[str], offsets: np.ndarray, term_ids: np.ndarray, weights: np.ndarray,
                metadata: dict[str, str] | None = None) -> pa.Table:
    """Build a shard table from flat (CSR-like) arrays, without per-row Python objects.

    Args:
        doc_ids: N document ids.
        offsets: (N+1,) int, row i's entries are ``[offsets[i], offsets[i+1])``; ``offsets[0] == 0``.
        term_ids: (nnz,) int32 term ids, sorted within each row.
        weights: (nnz,) float32 weights aligned with ``term_ids``.
        metadata: string key-values added to the schema metadata.

    Returns:
        a ``pa.Table`` with exactly :data:`SHARD_SCHEMA` (plus metadata).

    Raises:
        ValueError: inconsistent lengths.
    """
    offsets = np.asarray(offsets)
    n = len(doc_ids)
    if offsets.shape != (n + 1,) or (n + 1 and offsets[0] != 0):
        raise ValueError(f"offsets must have shape ({n + 1},) and start at 0, got {offsets.shape}")
    if len(term_ids) != len(weights) or int(offsets[-1]) != len(term_ids):
        raise ValueError(f"term_ids ({len(term_ids)}), weights ({len(weights)}) and offsets[-1] "
                         f"({int(offsets[-1])}) disagree")
    off = pa.array(offsets.astype(np.int32, copy=False), type=pa.int32())
    tid = pa.ListArray.from_arrays(off, pa.array(np.asarray(term_ids, dtype=np.int32), type=pa.int32()))
    wts = pa.ListArray.from_arrays(off, pa.array(np.asarray(weights, dtype=np.float32), type=pa.float32()))
    schema = SHARD_SCHEMA
    if metadata:
        schema = schema.with_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    return pa.Table.from_arrays([pa.array(list(doc_ids), type=pa.string()), tid, wts], schema=schema)


ROW_GROUP_POSTINGS = 1 << 20
"""Target postings per Parquet row group. Readers (DuckDB, pyarrow) decode a row group at a time, so row groups
are sized by postings, not rows: 4,096 documents of a dense early-training model (|V| = 30,522 non-zeros each)
would make a 125M-posting row group that no reader can hold in a bounded memory (docs/bugs-and-fixes.md)."""


def row_group_rows(table: pa.Table, max_rows: int = 4096) -> int:
    """Rows per row group so that one holds about :data:`ROW_GROUP_POSTINGS` postings (1..``max_rows``)."""
    postings = pc.sum(pc.list_value_length(table.column("term_ids"))).as_py() if table.num_rows else 0
    if not postings:
        return max_rows
    return max(1, min(max_rows, ROW_GROUP_POSTINGS * table.num_rows // postings))


def write_shard(table: pa.Table, path: str | os.PathLike) -> int:
    """Write a shard atomically: a hidden temporary file in the same folder, then ``os.replace``.

    Row groups hold about :data:`ROW_GROUP_POSTINGS` postings (at most 4,096 rows).
    Returns the file size in bytes. Raises ValueError if the table's schema is not :data:`SHARD_SCHEMA`.
    """
    if not table.schema.equals(SHARD_SCHEMA, check_metadata=False):
        raise ValueError(f"shard table schema must be {SHARD_SCHEMA}, got {table.schema}")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        pq.write_table(table, tmp, row_group_size=row_group_rows(table))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path.stat().st_size


def remove_stale_tmp(out_dir: str | os.PathLike) -> int:
    """Delete temporary files left by interrupted writes (``.part-*.tmp-*``, ``.manifest.json.tmp-*``)."""
    n = 0
    for p in Path(out_dir).glob(".*.tmp-*"):
        p.unlink(missing_ok=True)
        n += 1
    return n


# --------------------------------------------------------------------------- reading
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


def verify_files(entries: Sequence[tuple[Path, str | None, str | None]], where: str) -> None:
    """Check shard files against recorded ``(path, sha256, fingerprint)`` triples (the manifest or catalog).

    Raises:
        ShardStoreError: a file is missing, has no recorded checksum, its bytes differ from the checksum
            (damaged, truncated or replaced), or its schema metadata names another fingerprint (a folder mixed
            from two runs). The message names the file and ``where`` (the manifest or catalog).
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
                                  "(the file was changed, truncated or damaged after it was written); re-run "
                                  "the encode into the same folder to redo it")
        if fp is not None:
            try:
                meta = pq.read_schema(path).metadata or {}
            except (pa.ArrowException, OSError) as e:
                raise ShardStoreError(f"{path}: unreadable shard ({type(e).__name__}: {e})") from None
            got_fp = meta.get(_META_FP, b"").decode()
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
    name order, unverified (a warning is logged). A file or a list of files: used as given, unverified.

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
        log.warning("%s has no %s: reading %d shard files unverified (not written by lexray's encoder?)",
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


def verify_shard(path: str | os.PathLike, info: ShardInfo, fp: str, sha256: str | None = None
                 ) -> tuple[bool, str, int]:
    """Check that a shard file is complete and is the one the manifest plans.

    Reads the whole file (so truncated or damaged files fail), then compares schema, the fingerprint in its
    metadata, the row count and the doc-id hash with ``info``, and, when ``sha256`` (the checksum recorded when
    it was written) is given, the file's bytes.

    Returns:
        ``(ok, reason, postings)``; ``reason`` says why a shard is not kept ("missing", "unreadable: ...",
        "rows 40 != 50", "content checksum differs", ...); ``postings`` is the number of (term, weight) entries
        when ok.
    """
    path = Path(path)
    if not path.is_file():
        return False, "missing", 0
    if sha256 is not None and file_sha256(path) != sha256:
        return False, "content checksum differs from the manifest (changed or damaged)", 0
    try:
        t = pq.read_table(path)
    except Exception as e:  # noqa: BLE001 - any read failure means "redo this shard"
        return False, f"unreadable: {type(e).__name__}: {e}", 0
    if not t.schema.equals(SHARD_SCHEMA, check_metadata=False):
        return False, f"schema {t.schema} != {SHARD_SCHEMA}", 0
    meta = t.schema.metadata or {}
    if meta.get(_META_FP, b"").decode() != fp:
        return False, "fingerprint differs (made by another model/settings)", 0
    if t.num_rows != info.rows:
        return False, f"rows {t.num_rows} != {info.rows}", 0
    if ids_digest(t.column("doc_id").to_pylist()) != info.ids_sha1:
        return False, "doc ids differ from the planned slice", 0
    tid = t.column("term_ids").combine_chunks()
    wts = t.column("weights").combine_chunks()
    if not np.array_equal(tid.offsets.to_numpy(), wts.offsets.to_numpy()):
        return False, "term_ids and weights lengths differ", 0
    return True, "ok", len(tid.values)


def shard_metadata(fp: str, index: int) -> dict[str, str]:
    """The schema metadata every shard carries."""
    return {_META_FP.decode(): fp, _META_SHARD.decode(): str(index)}
