"""Merge Parquet sparse shards into a memory-mappable inverted index, out of core, with DuckDB.

Why DuckDB: the merge is one big sort of (term, document) postings. DuckDB sorts out of core – it spills to
``temp_directory`` once ``memory_limit`` is reached – so the builder's memory does not grow with the corpus. The
sorted postings are streamed out of DuckDB in record batches (``fetch_record_batch``) and appended to ``.npy``
files with plain sequential writes (not a writable memory map, whose dirty pages would count towards the
process's resident memory and grow with the corpus).

Input: the shards that :func:`lexray.encode.reader.resolve_shards` (the one shard reader) returns for
``shards_dir``, schema ``doc_id: string, term_ids: list<int32>, weights: list<float32>`` (every file checked by
:func:`lexray.encode.shards.schema_problem`, the one schema check, also when the folder has no manifest): a folder
with a ``manifest.json`` is verified first (status complete, every listed shard present, content checksums and
fingerprints equal) and refused otherwise; its ``vocab_size`` is used. Documents are numbered in (shard order,
row) order; rows that are tombstones of a :class:`~lexray.encode.reader.ShardSet` (``lexray.store``) are left out
and the rest numbered densely.

Index layout (``index_dir``)::

    doc_ids.parquet      doc_idx int32 -> doc_id string, one row per document, ordered by doc_idx
    offsets.npy          int64 (|V|+1,)  CSR over terms: postings of term t are [offsets[t], offsets[t+1])
    postings_doc.npy     int32 (P,)      doc_idx, ascending within each term
    postings_weight.npy  float32 (P,)    the encoder's weight
    postings_impact.npy  uint8 (P,)      quantized impact (uint16 when quant_bits > 8)
    stats.json           IndexStats (counts, quantization scale, FLOPS, sizes, build time, settings)

Quantization (uniform, global scale, as in impact indexes such as Anserini's ``-impact`` collections;
:func:`lexray.index.quantization.quantize`, shared with the Lucene export):
``impact = floor(w / max_w * (2**bits - 1) + 0.5)`` with ``max_w`` the largest weight in the corpus, so
``w ≈ impact * quant_scale`` with ``quant_scale = max_w / (2**bits - 1)`` and ``|w - impact*scale| <= scale/2``.

FLOPS (Paria et al. 2020, "Minimizing FLOPs to learn efficient sparse representations", arXiv:2004.05665, §3; the
definition of SPLADE, arXiv:2107.05720): ``flops = Σ_t p_t²`` with ``p_t = df_t / N``, the expected number of
multiplications for a query–document pair when queries and documents share the document activation statistics. ``flops_x_n`` (that
times N) is the expected posting work per query over the whole index.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lexray.config import IndexConfig
from lexray.encode.reader import ShardSet, ShardStoreError, resolve_shards
from lexray.encode.shards import schema_problem
from lexray.fsio import publish_folder
from lexray.index.quantization import quantize
from lexray.index.verify import INDEX_FILES, index_checksums

__all__ = ["IndexBuildError", "IndexOutError", "IndexStats", "build_index", "list_shards", "load_stats",
           "FORMAT_VERSION"]

FORMAT_VERSION = 1
STATS_FILE = "stats.json"


class IndexBuildError(ValueError):
    """Bad shard content; the message names the shard file, the row (0-based) and the field."""


class IndexOutError(FileExistsError):
    """``index_dir`` holds something other than a lexray index of the same shards; nothing was touched."""


@dataclass
class IndexStats:
    """What :func:`build_index` built; also written as ``stats.json`` in the index folder."""

    n_docs: int
    n_postings: int
    vocab_size: int
    n_terms: int  # terms with at least one posting
    avg_nnz_per_doc: float
    max_weight: float
    quant_bits: int
    quant_scale: float  # weight ≈ impact * quant_scale
    flops: float  # Σ_t (df_t / N)^2  (SPLADE / Paria et al. definition, arXiv:2004.05665)
    flops_x_n: float  # flops * N: expected postings touched per query on this index
    index_bytes: int
    build_seconds: float
    postings_per_second: float
    zero_weight_postings_dropped: int
    n_shards: int
    empty_docs: int  # documents with no postings (kept in doc_ids, never retrieved)
    format_version: int = FORMAT_VERSION
    settings: dict = field(default_factory=dict)
    files_sha256: dict = field(default_factory=dict)  # {file: sha256} of the data files (lexray.index.verify)

    def to_dict(self) -> dict:
        return asdict(self)


def list_shards(shards_dir: str | os.PathLike) -> list[Path]:
    """The shard files of ``shards_dir`` in document order, verified (see :func:`resolve_shards`)."""
    return resolve_shards(shards_dir).files


def load_stats(index_dir: str | os.PathLike) -> dict:
    """Read ``stats.json`` of a built index."""
    return json.loads((Path(index_dir) / STATS_FILE).read_text())


def _sql_str(s: str) -> str:
    return "'" + str(s).replace("'", "''") + "'"


def _write_npy_header(fh, dtype: np.dtype, n: int) -> None:
    np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                              "fortran_order": False, "shape": (n,)})


def _connect(cfg: IndexConfig, tmp_dir: Path):
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = {_sql_str(cfg.memory_limit)}")
    con.execute(f"SET temp_directory = {_sql_str(cfg.temp_directory or str(tmp_dir))}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")  # progress is ours (tqdm); DuckDB's writes to stdout
    if cfg.threads:
        con.execute(f"SET threads = {int(cfg.threads)}")
    return con


def _one(con, sql: str, params=None) -> tuple | None:
    # fetchall, not fetchone: DuckDB 2 keeps a partly fetched result open and refuses the next query
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def _first_problem(con, sql: str) -> tuple | None:
    return _one(con, sql + " LIMIT 1")


def flops_from_df(df: np.ndarray, n_docs: int) -> float:
    """FLOPS of a collection from its document frequencies: ``Σ_t (df_t / N)²`` (Paria et al. 2020,
    arXiv:2004.05665, §3; SPLADE's definition, arXiv:2107.05720), the expected number of multiplications per
    query–document pair when queries follow the documents' activation statistics. ``df``: (|V|,) integer counts; ``n_docs``: N (0 gives 0.0)."""
    p = np.asarray(df, dtype=np.float64) / max(int(n_docs), 1)
    return float(np.sum(p * p))


def build_index(shards_dir: str | os.PathLike | ShardSet, index_dir: str | os.PathLike, cfg: IndexConfig | None = None,
                vocab_size: int | None = None, show_progress: bool = True,
                batch_rows: int = 1 << 20) -> IndexStats:
    """Build the inverted index of ``shards_dir`` into ``index_dir`` (replaced atomically when complete).

    Args:
        shards_dir: folder of Parquet sparse shards, or a :class:`ShardSet` (see module docstring).
        index_dir: output folder; written to a sibling temporary folder first, then renamed
            (:func:`lexray.fsio.publish_folder`). It must not exist, be empty, or be a lexray index of the same
            shards (replaced: moved aside, then deleted once the new one is in place); anything else is refused.
        cfg: ``quant_bits`` (1..16), DuckDB ``memory_limit``, ``threads``, ``temp_directory`` (spill; default a
            folder inside the temporary output).
        vocab_size: |V|; default ``manifest.json``'s ``vocab_size``, else max term id + 1.
        show_progress: tqdm bar over postings.
        batch_rows: postings per record batch streamed out of DuckDB (bounds the Python-side memory).

    Returns:
        :class:`IndexStats`.

    Raises:
        IndexBuildError: a shard row with a null/empty or duplicate ``doc_id``, ``term_ids`` and ``weights`` of
            different lengths, a negative or out-of-vocabulary term id, a negative or non-finite weight, or the
            same term twice in a document (message: file, row, doc_id, field).
        ShardStoreError: the folder's manifest is not complete, a listed shard is missing, or a shard's bytes
            or fingerprint differ from the manifest; an unreadable (e.g. truncated) shard. Names the file.
        FileNotFoundError: no shards.
        IndexOutError: ``index_dir`` is not empty and not a lexray index of the same shards (nothing touched).
    """
    cfg = cfg or IndexConfig()
    if not 1 <= cfg.quant_bits <= 16:
        raise ValueError(f"index.quant_bits must be in 1..16, got {cfg.quant_bits}")
    t_start = time.perf_counter()
    sset = resolve_shards(shards_dir)
    index_dir = Path(index_dir)
    replaced = _check_out(index_dir, sset)
    stats: list[IndexStats] = []

    def fill(work: Path) -> None:
        import duckdb

        try:
            stats.append(_build(sset, work, cfg, vocab_size, show_progress, batch_rows, t_start))
        except duckdb.Error:
            _name_unreadable(sset.files)  # a damaged shard: name it (DuckDB's message may not)
            raise
        shutil.rmtree(work / "duckdb_tmp", ignore_errors=True)

    # publish beside the target and rename: the old index is moved aside (never deleted before the new one is
    # in place), and only a folder _check_out recognised as lexray's own index is ever deleted
    aside = index_dir.parent / f".{index_dir.name}.old-{uuid.uuid4().hex[:8]}" if replaced else None
    if aside is not None:
        os.rename(index_dir, aside)
    try:
        publish_folder(index_dir, fill, STATS_FILE, replace_stale=False)
    except BaseException:
        if aside is not None and not index_dir.exists():
            os.rename(aside, index_dir)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return stats[0]


# what a folder may hold to be replaced by a rebuild: the index and the config file lexray index writes beside it
_OWN_FILES = frozenset((*INDEX_FILES, STATS_FILE, "index-config.resolved.yaml"))


def _source_key(source: str) -> str:
    """A shard source comparable across working directories (a path is resolved; a store's label stays)."""
    return os.path.realpath(source) if source and os.path.exists(source) else source


def _check_out(index_dir: Path, sset: ShardSet) -> bool:
    """May ``index_dir`` be written? True: it is a lexray index of the same shards (to be replaced); False: it
    does not exist or is empty.

    Raises:
        IndexOutError: it is a file, a non-empty folder that is not a lexray index (the shard folder, a parent
            folder, user files), an index of other shards, or an index folder that also holds other files.
    """
    if not index_dir.exists():
        return False
    if not index_dir.is_dir():
        raise IndexOutError(f"--out {index_dir} is a file, not a folder; refusing to replace it")
    names = {p.name for p in index_dir.iterdir()}
    if not names:
        return False
    try:
        old = json.loads((index_dir / STATS_FILE).read_text())
        old_source = old["settings"]["shards_dir"] if "format_version" in old else None
    except (OSError, ValueError, KeyError, TypeError):
        old_source = None
    if old_source is None:
        raise IndexOutError(f"--out {index_dir} is not empty and not a lexray index ({len(names)} entries, e.g. "
                            f"{sorted(names)[0]!r}); refusing to write into it: choose a new or empty folder")
    foreign = sorted(names - _OWN_FILES)
    if foreign:
        raise IndexOutError(f"--out {index_dir} is a lexray index but also holds other files ({', '.join(foreign[:5])}"
                            f"{' …' if len(foreign) > 5 else ''}); refusing to replace it: move them or choose "
                            "another folder")
    if _source_key(old_source) != _source_key(sset.source):
        raise IndexOutError(f"--out {index_dir} is an index of other inputs (built from {old_source}, now "
                            f"{sset.source}); refusing to replace it: choose another folder or delete it by hand")
    return True


def _name_unreadable(files: list[Path]) -> None:
    """Raise ShardStoreError naming the first shard pyarrow cannot read whole (else return)."""
    import pyarrow.parquet as pq

    for f in files:
        try:
            pq.read_table(f)
        except Exception as e:  # noqa: BLE001 - re-raised with the file name
            raise ShardStoreError(f"{f}: unreadable shard ({type(e).__name__}: {e})") from None


def _build(sset: ShardSet, out: Path, cfg: IndexConfig, vocab_size: int | None,
           show_progress: bool, batch_rows: int, t_start: float) -> IndexStats:
    """The build into ``out``: number the documents, validate every row, write the doc-id map, the postings and
    ``stats.json``."""
    offsets, total = _file_offsets(sset.files)
    n_docs = total - sset.n_dead
    if n_docs >= 2**31:
        raise IndexBuildError(f"{n_docs} documents do not fit int32 doc_idx")
    con = _connect(cfg, out / "duckdb_tmp")
    src, raw = _scan_sql(con, sset, offsets)
    checked = _validate_rows(con, src, raw, vocab_size or sset.vocab_size)
    # ---- doc id map (ORDER BY inside the COPY: with preserve_insertion_order=false that is what orders rows)
    con.execute(f"COPY (SELECT doc_idx::INTEGER AS doc_idx, doc_id FROM {src} ORDER BY doc_idx) "
                f"TO {_sql_str(str(out / 'doc_ids.parquet'))} (FORMAT parquet)")
    df = _write_postings(con, src, out, checked, cfg.quant_bits, show_progress, batch_rows)
    con.close()
    offs = np.zeros(checked.vocab_size + 1, dtype=np.int64)
    np.cumsum(df, out=offs[1:])
    np.save(out / "offsets.npy", offs)
    vocab_source = "argument" if vocab_size else ("manifest" if sset.vocab_size else "max_term_id+1")
    return _write_stats(out, sset, cfg, checked, df, n_docs, vocab_source, t_start)


def _file_offsets(files: list[Path]) -> tuple[list[int], int]:
    """Document numbering: shard files in order, rows in file order (row counts from the Parquet footers).
    Checks each file's schema (:func:`lexray.encode.shards.schema_problem`, the one shard schema check).

    Returns:
        the first document number of each file and the total number of rows.

    Raises:
        ShardStoreError: an unreadable file. IndexBuildError: a schema problem (names the file and column).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    offsets, total = [], 0
    for f in files:
        try:
            schema = pq.read_schema(f)
            num_rows = pq.ParquetFile(f).metadata.num_rows
        except (pa.ArrowException, OSError) as e:
            raise ShardStoreError(f"{f}: unreadable shard ({type(e).__name__}: {e})") from None
        problem = schema_problem(schema)
        if problem is not None:
            raise IndexBuildError(f"{f}: {problem}")
        offsets.append(total)
        total += num_rows
    return offsets, total


def _scan_sql(con, sset: ShardSet, offsets: list[int]) -> tuple[str, str]:
    """SQL sources over the shard files: ``src`` yields (doc_idx, filename, row, doc_id, term_ids, weights) of
    the live rows; ``raw`` the live rows' columns as cheaply as possible (the files themselves when nothing is
    dead)."""
    files = sset.files
    con.execute("CREATE TEMP TABLE shard_files (filename VARCHAR, file_offset BIGINT, file_order INTEGER)")
    con.executemany("INSERT INTO shard_files VALUES (?, ?, ?)",
                    [(str(f), o, i) for i, (f, o) in enumerate(zip(files, offsets, strict=True))])
    file_list = "[" + ", ".join(_sql_str(str(f)) for f in files) + "]"
    scan = f"read_parquet({file_list}, filename=true, file_row_number=true)"
    if not sset.dead:
        src = (f"(SELECT s.file_offset + r.file_row_number AS doc_idx, r.filename, r.file_row_number AS row, "
               f"r.doc_id, r.term_ids, r.weights FROM {scan} r JOIN shard_files s ON r.filename = s.filename)")
        return src, f"read_parquet({file_list})"
    # tombstones (lexray.store): dead (file, row) pairs are left out and the live rows numbered densely
    con.execute("CREATE TEMP TABLE dead (filename VARCHAR, row BIGINT)")
    con.executemany("INSERT INTO dead VALUES (?, ?)",
                    [(str(f), int(r)) for f, rows in sset.dead.items() for r in rows])
    con.execute(f"""CREATE TEMP TABLE docmap AS SELECT r.filename, r.file_row_number AS row,
                    (row_number() OVER (ORDER BY s.file_order, r.file_row_number) - 1) AS doc_idx
                    FROM (SELECT filename, file_row_number FROM {scan}) r
                    JOIN shard_files s ON r.filename = s.filename
                    ANTI JOIN dead d ON d.filename = r.filename AND d.row = r.file_row_number""")
    src = (f"(SELECT m.doc_idx, r.filename, r.file_row_number AS row, r.doc_id, r.term_ids, r.weights "
           f"FROM {scan} r JOIN docmap m ON r.filename = m.filename AND r.file_row_number = m.row)")
    return src, src


def _fail(row, field_name: str, problem: str):
    filename, file_row, doc_id = row[:3]
    raise IndexBuildError(f"{filename}: row {file_row} (doc_id {doc_id!r}): field '{field_name}': {problem}")


@dataclass
class _Checked:
    """What validation learnt of the live rows."""

    vocab_size: int
    max_weight: float
    n_postings: int  # non-zero weights
    n_zero: int  # zero weights (dropped)
    empty_docs: int


def _validate_rows(con, src: str, raw: str, vocab_size: int | None) -> _Checked:
    """Validate every live row: one aggregate scan with list functions; only if it finds a problem, a second
    scan (LIMIT 1) locates the first offending row for the error message. ``vocab_size`` None: max term id + 1.

    Raises:
        IndexBuildError: null/empty or duplicate doc_id, term_ids and weights of different lengths, a negative or
            out-of-vocabulary term id, a negative or non-finite weight (file, row, doc_id, field).
    """
    agg = _one(con, f"""
        SELECT count(*) FILTER (WHERE doc_id IS NULL OR trim(doc_id) = ''),
               count(*) FILTER (WHERE term_ids IS NULL OR weights IS NULL OR len(term_ids) <> len(weights)),
               count(*) FILTER (WHERE list_count(term_ids) <> len(term_ids) OR list_min(term_ids) < 0),
               count(*) FILTER (WHERE list_count(weights) <> len(weights) OR list_min(weights) < 0
                                OR isnan(list_max(weights)) OR isinf(list_max(weights))),
               max(list_max(term_ids)), max(list_max(weights)), sum(len(term_ids)),
               sum(len(list_filter(weights, lambda x: x = 0))),
               count(*) FILTER (WHERE len(list_filter(weights, lambda x: x > 0)) = 0)
        FROM {raw}""")
    bad_id, bad_len, bad_term, bad_w, max_term, max_w, n_all, n_zero, empty_docs = agg
    if bad_id:
        bad = _first_problem(con, f"SELECT filename, row, doc_id FROM {src} "
                                  f"WHERE doc_id IS NULL OR trim(doc_id) = ''")
        _fail(bad, "doc_id", "null or empty document id")
    if bad_len:
        bad = _first_problem(con, f"SELECT filename, row, doc_id, len(term_ids), len(weights) FROM {src} "
                                  f"WHERE term_ids IS NULL OR weights IS NULL OR len(term_ids) <> len(weights)")
        _fail(bad, "weights", f"term_ids has {bad[3]} entries but weights has {bad[4]} (or a list is null)")
    if bad_term:
        bad = _first_problem(con, f"SELECT filename, row, doc_id, t FROM (SELECT filename, row, doc_id, "
                                  f"unnest(term_ids) AS t FROM {src}) WHERE t IS NULL OR t < 0")
        _fail(bad, "term_ids", f"invalid term id {bad[3]}")
    if bad_w:
        bad = _first_problem(con, f"SELECT filename, row, doc_id, w FROM (SELECT filename, row, doc_id, "
                                  f"unnest(weights) AS w FROM {src}) WHERE w IS NULL OR isnan(w) OR isinf(w) OR w < 0")
        _fail(bad, "weights", f"invalid weight {bad[3]} (weights must be finite and >= 0)")
    dup = _one(con, f"SELECT doc_id, count(*) AS c FROM {raw} GROUP BY doc_id HAVING count(*) > 1 LIMIT 1")
    if dup:
        first = con.execute(f"SELECT filename, row, doc_id FROM {src} WHERE doc_id = ? ORDER BY doc_idx LIMIT 2",
                            [dup[0]]).fetchall()
        _fail(first[1], "doc_id", f"duplicate document id (also at {first[0][0]} row {first[0][1]}; "
                                  f"{dup[1]} occurrences)")
    n_all, n_zero = int(n_all or 0), int(n_zero or 0)
    V = vocab_size or (int(max_term) + 1 if max_term is not None else 0)
    if max_term is not None and max_term >= V:
        bad = _first_problem(con, f"SELECT filename, row, doc_id, t FROM (SELECT filename, row, doc_id, "
                                  f"unnest(term_ids) AS t FROM {src}) WHERE t >= {int(V)}")
        _fail(bad, "term_ids", f"term id {bad[3]} >= vocab_size {V}")
    return _Checked(vocab_size=V, max_weight=float(max_w) if max_w else 0.0, n_postings=n_all - n_zero,
                    n_zero=n_zero, empty_docs=int(empty_docs))


def _write_postings(con, src: str, out: Path, checked: _Checked, quant_bits: int, show_progress: bool,
                    batch_rows: int) -> np.ndarray:
    """The postings: one external sort by (term, doc) in DuckDB, streamed into the three ``postings_*.npy``
    files. Returns the document frequencies (|V|,) int64.

    Raises:
        IndexBuildError: the same term twice in a document (file, row, doc_id, field).
    """
    from tqdm.auto import tqdm

    V, max_w, n_postings = checked.vocab_size, checked.max_weight, checked.n_postings
    imp_dtype = np.uint8 if quant_bits <= 8 else np.uint16
    df = np.zeros(V, dtype=np.int64)
    reader = con.sql(
        f"SELECT term_id, doc_idx::INTEGER AS doc_idx, weight FROM (SELECT doc_idx, unnest(term_ids) AS term_id, "
        f"unnest(weights) AS weight FROM {src}) WHERE weight > 0 ORDER BY term_id, doc_idx"
    ).to_arrow_reader(batch_rows)
    f_doc = open(out / "postings_doc.npy", "wb")
    f_w = open(out / "postings_weight.npy", "wb")
    f_imp = open(out / "postings_impact.npy", "wb")
    written = 0
    prev_t, prev_d = -1, -1
    with f_doc, f_w, f_imp, tqdm(total=n_postings, unit="posting", unit_scale=True, disable=not show_progress,
                                 desc="index postings") as bar:
        _write_npy_header(f_doc, np.int32, n_postings)
        _write_npy_header(f_w, np.float32, n_postings)
        _write_npy_header(f_imp, imp_dtype, n_postings)
        for batch in reader:
            t = batch.column(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            d = batch.column(1).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
            w = batch.column(2).to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
            if len(t) == 0:
                continue
            # the same term twice in one document shows up as equal consecutive (term, doc) pairs
            same = (t[1:] == t[:-1]) & (d[1:] == d[:-1])
            if (t[0] == prev_t and d[0] == prev_d) or same.any():
                i = 0 if (t[0] == prev_t and d[0] == prev_d) else int(np.flatnonzero(same)[0]) + 1
                reader.close()
                row = _one(con, f"SELECT filename, row, doc_id FROM {src} WHERE doc_idx = ?", [int(d[i])])
                _fail(row, "term_ids", f"term id {int(t[i])} appears more than once")
            prev_t, prev_d = int(t[-1]), int(d[-1])
            f_doc.write(d.tobytes())
            f_w.write(w.tobytes())
            f_imp.write(quantize(w, max_w, quant_bits).astype(imp_dtype).tobytes())
            df += np.bincount(t, minlength=V)[:V]
            written += len(t)
            bar.update(len(t))
    if written != n_postings:
        raise IndexBuildError(f"internal error: wrote {written} postings, expected {n_postings}")
    return df


def _write_stats(out: Path, sset: ShardSet, cfg: IndexConfig, checked: _Checked, df: np.ndarray, n_docs: int,
                 vocab_source: str, t_start: float) -> IndexStats:
    """:class:`IndexStats` of the finished folder, also written as ``stats.json`` (its size counted in
    ``index_bytes``)."""
    n_postings, max_w = checked.n_postings, checked.max_weight
    levels = (1 << cfg.quant_bits) - 1
    flops = flops_from_df(df, n_docs)
    build_s = time.perf_counter() - t_start
    index_bytes = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    stats = IndexStats(
        n_docs=n_docs, n_postings=n_postings, vocab_size=checked.vocab_size, n_terms=int(np.count_nonzero(df)),
        avg_nnz_per_doc=n_postings / n_docs if n_docs else 0.0, max_weight=max_w, quant_bits=cfg.quant_bits,
        quant_scale=max_w / levels if max_w > 0 else 1.0, flops=flops, flops_x_n=flops * n_docs,
        index_bytes=index_bytes, build_seconds=build_s,
        postings_per_second=n_postings / build_s if build_s > 0 else math.inf,
        zero_weight_postings_dropped=int(checked.n_zero), n_shards=len(sset.files), empty_docs=checked.empty_docs,
        settings={"memory_limit": cfg.memory_limit, "threads": cfg.threads, "temp_directory": cfg.temp_directory,
                  "shards_dir": sset.source, "tombstones": sset.n_dead, "vocab_size_source": vocab_source})
    stats.files_sha256 = index_checksums(out)
    stats.index_bytes = index_bytes + len(json.dumps(stats.to_dict(), indent=2))
    (out / STATS_FILE).write_text(json.dumps(stats.to_dict(), indent=2) + "\n")
    return stats
