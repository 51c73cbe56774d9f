"""Parquet sparse shards and their ``manifest.json``: the Arrow schema and its check, atomic writes, the
manifest, and the encoder's resume check of a shard against its plan.

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

Reading (the one shard reader, :func:`resolve_shards` and the iterators, which verify a folder against its
manifest) is :mod:`lexray.encode.reader`.

Dense shards (the LexSemBridge track, ``model.dense``) use the same layout, manifest, writes and checks with the
schema ``doc_id: string, embedding: fixed_size_list<float32 | float16>[d]`` (:func:`dense_schema`); their
"postings" count is rows × d.

Schema (``docs/contracts.md``): ``doc_id: string, term_ids: list<int32>, weights: list<float32>``; term ids are
sorted ascending within a row and ``weights`` is aligned with them. Each file's Arrow schema metadata carries
``lexray.fingerprint`` (the run identity, see :func:`fingerprint`) and ``lexray.shard`` (its index). The schema is
checked in one place, :func:`schema_problem`: by the encoder's resume check (:func:`verify_shard`) and by the index
builder (:mod:`lexray.index.build`, also for shards written without a manifest).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Sequence
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
    "dense_schema",
    "dense_shard_table",
    "is_dense_schema",
    "schema_problem",
    "file_sha256",
    "MANIFEST_FILE",
    "FORMAT_VERSION",
    "ShardInfo",
    "ModelInfo",
    "Totals",
    "Manifest",
    "ManifestMismatchError",
    "shard_name",
    "shard_table",
    "write_shard",
    "verify_shard",
    "ids_digest",
    "fingerprint",
    "load_manifest",
    "save_manifest",
    "remove_stale_tmp",
    "shard_metadata",
    "read_fingerprint",
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


DENSE_DTYPES = {"float32": pa.float32(), "float16": pa.float16()}


def dense_schema(dim: int, dtype: str = "float32") -> pa.Schema:
    """Arrow schema of a dense shard (LexSemBridge track, :mod:`lexray.models.dense`): ``doc_id: string,
    embedding: fixed_size_list<float32 | float16>[dim]``, one row per document."""
    return pa.schema([pa.field("doc_id", pa.string(), nullable=False),
                      pa.field("embedding", pa.list_(DENSE_DTYPES[dtype], dim), nullable=False)])


def dense_schema_problem(schema: pa.Schema) -> str | None:
    """What is wrong with a dense shard's schema (:func:`dense_schema`, any dimension), or None."""
    if schema.names != ["doc_id", "embedding"]:
        return f"columns {schema.names}, expected exactly ['doc_id', 'embedding'] in this order"
    if schema.field(0).type != pa.string():
        return f"column 'doc_id' has type {schema.field(0).type}, expected string"
    typ = schema.field(1).type
    if not pa.types.is_fixed_size_list(typ) or typ.value_type not in DENSE_DTYPES.values():
        return f"column 'embedding' has type {typ}, expected fixed_size_list<float32 | float16>[d]"
    return None


def is_dense_schema(schema: pa.Schema) -> bool:
    """Whether a shard file is a dense shard (it has an ``embedding`` column)."""
    return "embedding" in schema.names


def schema_problem(schema: pa.Schema) -> str | None:
    """What is wrong with a shard file's Arrow schema, or None if it is :data:`SHARD_SCHEMA`: the one schema check.

    Columns are compared by name, order and exact type (``string``, ``list<int32>``, ``list<float32>``; the
    ``large_`` variants, other element types and extra columns are refused). Declared column nullability and the
    list element's name are not compared: Parquet writers differ in them (pyarrow's default is nullable), and the
    readers (:func:`lexray.encode.reader.iter_live_rows`, :mod:`lexray.index.build`) check the values for nulls
    row by row, naming the row. Metadata is ignored.

    Returns:
        None, or a message naming the column (``column 'term_ids' has type list<item: int64>, expected
        list<item: int32>``).
    """
    if is_dense_schema(schema):
        return dense_schema_problem(schema)
    names = schema.names
    for col in SHARD_SCHEMA:
        if col.name not in names:
            return f"column '{col.name}' missing (schema: {schema})"
        typ = schema.field(names.index(col.name)).type
        if typ != col.type:
            return f"column '{col.name}' has type {typ}, expected {col.type}"
    if names != SHARD_SCHEMA.names:
        return f"columns {names}, expected exactly {SHARD_SCHEMA.names} in this order"
    return None


_META_FP = b"lexray.fingerprint"
_META_SHARD = b"lexray.shard"


class ManifestMismatchError(ValueError):
    """``out_dir`` holds shards made by a different model, settings or corpus; the message names what differs."""


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
    while a run is in progress the same file has status ``running`` and lists the planned shards; a run that
    stopped on an error or Ctrl-C leaves ``interrupted`` (only a killed process leaves ``running``)."""

    format_version: int = FORMAT_VERSION
    status: Literal["running", "interrupted", "complete"] = "running"
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


def dense_shard_table(doc_ids: Sequence[str], vectors: np.ndarray, dtype: str = "float32",
                      metadata: dict[str, str] | None = None) -> pa.Table:
    """A dense shard table: ``vectors`` (N, d) float → :func:`dense_schema` (cast to ``dtype``), plus metadata.

    Raises:
        ValueError: ``vectors`` is not (len(doc_ids), d).
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != len(doc_ids):
        raise ValueError(f"vectors must be ({len(doc_ids)}, d), got {vectors.shape}")
    schema = dense_schema(vectors.shape[1], dtype)
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.dtype(dtype)).reshape(-1), type=DENSE_DTYPES[dtype])
    emb = pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])
    if metadata:
        schema = schema.with_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    return pa.Table.from_arrays([pa.array(list(doc_ids), type=pa.string()), emb], schema=schema)


ROW_GROUP_POSTINGS = 1 << 20
"""Target postings per Parquet row group. Readers (DuckDB, pyarrow) decode a row group at a time, so row groups
are sized by postings, not rows: 4,096 documents of a dense early-training model (|V| = 30,522 non-zeros each)
would make a 125M-posting row group that no reader can hold in a bounded memory (docs/bugs-and-fixes.md)."""


def row_group_rows(table: pa.Table, max_rows: int = 4096) -> int:
    """Rows per row group so that one holds about :data:`ROW_GROUP_POSTINGS` postings (1..``max_rows``)."""
    if is_dense_schema(table.schema):
        return max_rows
    postings = pc.sum(pc.list_value_length(table.column("term_ids"))).as_py() if table.num_rows else 0
    if not postings:
        return max_rows
    return max(1, min(max_rows, ROW_GROUP_POSTINGS * table.num_rows // postings))


def write_shard(table: pa.Table, path: str | os.PathLike) -> int:
    """Write a shard atomically: a hidden temporary file in the same folder, then ``os.replace``.

    Row groups hold about :data:`ROW_GROUP_POSTINGS` postings (at most 4,096 rows).
    Returns the file size in bytes. Raises ValueError if the table's schema is not :data:`SHARD_SCHEMA`.
    """
    if schema_problem(table.schema) is not None:
        raise ValueError(f"shard table schema must be {SHARD_SCHEMA} or a dense schema, got {table.schema}")
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
    if schema_problem(t.schema) is not None:
        return False, f"schema {t.schema} != {SHARD_SCHEMA}", 0
    meta = t.schema.metadata or {}
    if meta.get(_META_FP, b"").decode() != fp:
        return False, "fingerprint differs (made by another model/settings)", 0
    if t.num_rows != info.rows:
        return False, f"rows {t.num_rows} != {info.rows}", 0
    if ids_digest(t.column("doc_id").to_pylist()) != info.ids_sha1:
        return False, "doc ids differ from the planned slice", 0
    if is_dense_schema(t.schema):  # values: rows x d
        return True, "ok", t.num_rows * t.schema.field(1).type.list_size
    tid = t.column("term_ids").combine_chunks()
    wts = t.column("weights").combine_chunks()
    if not np.array_equal(tid.offsets.to_numpy(), wts.offsets.to_numpy()):
        return False, "term_ids and weights lengths differ", 0
    return True, "ok", len(tid.values)


def shard_metadata(fp: str, index: int) -> dict[str, str]:
    """The schema metadata every shard carries."""
    return {_META_FP.decode(): fp, _META_SHARD.decode(): str(index)}


def read_fingerprint(path: str | os.PathLike) -> str:
    """The run fingerprint a shard file carries in its schema metadata (``""`` if none); reads the footer only.

    Raises:
        pyarrow.ArrowException, OSError: the file is not readable Parquet.
    """
    meta = pq.read_schema(path).metadata or {}
    return meta.get(_META_FP, b"").decode()
