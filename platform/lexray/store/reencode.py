"""Scheduled re-encoding of a collection store: diff → encode the changes → build → validate → switch ``current``.

Layout of a store (docs/indexing.md, "Collection stores")::

    STORE/
      LOCK                  held by the one writer (pid, host, start time; lexray.locks.FolderLock)
      catalog.duckdb        doc_id -> content hash, model fingerprint, shard/row, per version (store/catalog.py)
      shards/               immutable Parquet shards, s<version>-<k>.parquet, written once by the version named
      versions/v000007/     index/ (lexray.index.build) + version.json (counts, checksums, validation)
                            + config.resolved.yaml (model and corpus, read by lexray search)
      current -> versions/v000007     a symlink, switched with one atomic rename

One run (:func:`reencode`), under the lock:

1. recover from a killed run: drop half-written files and shards no catalog row names; finish a version that
   was committed to the catalog but not published;
2. diff the corpus (sha256 of each document's ``title + " " + text``) against the catalog entries of the
   ``current`` version; a different model fingerprint (model files, model config, top-k, threshold, batching)
   makes every document "changed";
3. encode only the new and changed documents with :func:`lexray.encode.pipeline.encode_payloads` (Ray Data, the
   encoder path of every other job) into new shards; older shards are never rewritten: the rows of deleted or
   re-encoded documents become tombstones;
4. commit the new version's entries and tombstones in one catalog transaction (status ``pending``);
5. build its index from the live rows of its shards (checksums verified first), validate it, move it into
   ``versions/`` and switch ``current`` (``os.replace`` of a symlink: readers see the old or the new version,
   never a partial one); mark it ``published``; keep the last ``store.keep_versions`` versions.

Validation before the switch: the index holds exactly the live documents (count and ids), every shard's bytes
equal its recorded checksum, and for a sample of queries the index's exact top-k (``ExactSearcher``) equals,
document for document and bit for bit in score, a from-scratch exact scoring of the live shard rows (streamed,
with the same float32 term-at-a-time accumulation order).

Readers resolve ``current`` once (:func:`resolve_current`) and keep that version's folder: a swap never changes
files under a reader, and pruning deletes only versions older than the last ``keep_versions``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lexray.config import LexrayConfig, save_config
from lexray.encode.reader import ShardSet, iter_live_rows, verify_files
from lexray.encode.shards import fingerprint
from lexray.fsio import file_sha256, fsync_dir
from lexray.locks import FolderLock
from lexray.store.catalog import Catalog
from lexray.store.faults import stage as _stage
from lexray.store.integrity import repair_current_index, repair_shards

log = logging.getLogger(__name__)

__all__ = ["reencode", "rollback", "resolve_current", "version_dir", "model_fingerprint", "StoreError"]

CURRENT = "current"
VERSION_FILE = "version.json"


class StoreError(RuntimeError):
    """The store cannot do what was asked (validation failed, nothing to roll back to, ...)."""


def version_dir(store: str | os.PathLike, version: int) -> Path:
    return Path(store) / "versions" / f"v{version:06d}"


def resolve_current(store: str | os.PathLike) -> Path:
    """The folder of the published version ``current`` points to, resolved once (absolute, no symlink).

    Readers (search, evaluate) call this once and use ``<folder>/index`` from then on: a later switch of
    ``current`` does not change that folder. Raises FileNotFoundError if the store has no published version.
    """
    link = Path(store) / CURRENT
    if not link.is_symlink() and not link.exists():
        raise FileNotFoundError(f"{link} not found: the store has no published version (run jobs/reencode.py)")
    return Path(os.path.realpath(link))


def _current_version(store: Path) -> int | None:
    try:
        return int(resolve_current(store).name.lstrip("v"))
    except FileNotFoundError:
        return None


def _switch_current(store: Path, version: int) -> None:
    """Point ``current`` at ``versions/v<version>`` atomically (a new symlink renamed over the old one)."""
    tmp = store / f".{CURRENT}.tmp-{uuid.uuid4().hex[:8]}"
    os.symlink(os.path.join("versions", f"v{version:06d}"), tmp)
    _stage("switch")
    os.replace(tmp, store / CURRENT)
    fsync_dir(store)


def model_fingerprint(cfg: LexrayConfig) -> tuple[str, dict]:
    """Fingerprint of what makes a document's vector: model files and config, top-k, threshold, batching."""
    from lexray.encode.identity import model_config_identity, model_content_hash

    identity = {"model_hash": model_content_hash(cfg.model), "model_config": model_config_identity(cfg.model),
                "doc_top_k": cfg.encode.doc_top_k, "threshold": cfg.encode.threshold,
                "batching": cfg.encode.batching}
    return fingerprint(identity), identity


# ---------------------------------------------------------------------------------------------- corpus diff
def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _scan_corpus(dataset: Path, on_error: str, report) -> Any:
    """``(doc_id, content_sha256)`` of every kept document, in corpus order, as a pyarrow table."""
    import pyarrow as pa

    from lexray.data.beir import iter_corpus

    ids, hashes = [], []
    for doc in iter_corpus(dataset, on_error=on_error, report=report):
        ids.append(doc.doc_id)
        hashes.append(_text_sha(doc.full_text))
    return pa.table({"doc_id": pa.array(ids, pa.string()), "content_sha256": pa.array(hashes, pa.string()),
                     "ord": pa.array(np.arange(len(ids), dtype=np.int64))})


def _store_payloads(dataset: str, on_error: str, todo: frozenset[str] | None, rows_per_shard: int, prefix: str
                    ) -> Iterator[tuple[int, str, list[str], list[str]]]:
    """Stream the corpus once and yield the documents in ``todo`` (None: all) as shard payloads."""
    from lexray.data.beir import ReadReport, iter_corpus

    ids: list[str] = []
    texts: list[str] = []
    k = 0
    for doc in iter_corpus(dataset, on_error=on_error, report=ReadReport()):
        if todo is not None and doc.doc_id not in todo:
            continue
        ids.append(doc.doc_id)
        texts.append(doc.full_text)
        if len(ids) == rows_per_shard:
            yield k, f"{prefix}-{k:05d}.parquet", ids, texts
            ids, texts, k = [], [], k + 1
    if ids:
        yield k, f"{prefix}-{k:05d}.parquet", ids, texts


# ---------------------------------------------------------------------------------------------- the run
def _recover(store: Path, cat: Catalog) -> None:
    """Remove what a killed run left: temporary files and folders, shards no catalog row names."""
    known = cat.shard_files()
    for p in (store / "shards").glob("*"):
        if p.name.startswith(".") or p.name not in known:
            log.warning("removing %s (left by an interrupted run)", p)
            p.unlink()
    for p in list((store / "versions").glob(".*")) + list(store.glob(f".{CURRENT}.tmp-*")):
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def reencode(store: str | os.PathLike, cfg: LexrayConfig, break_stale_lock: bool = False,
             show_progress: bool = True) -> dict:
    """Bring the store's ``current`` index up to date with ``cfg.data.dataset`` under ``cfg.model``.

    Args:
        store: the store folder (created on the first run).
        cfg: ``model``, ``data`` (dataset, on_error, split for validation queries), ``encode`` (Ray Data
            settings; ``batching="exact_length"`` makes re-encoded vectors bit-identical to a full encode),
            ``index``, ``store`` (keep_versions, validate_queries, validate_k).
        break_stale_lock: take over a lock whose holder (this host) is dead.

    Returns:
        the run summary: ``added``, ``changed``, ``deleted``, ``encoded`` (documents), ``version`` (the one
        ``current`` points to now), ``seconds``, plus ``previous``, ``docs``, ``noop``, ``validation``,
        ``recovered`` (versions a killed run had committed and this run published), ``repaired`` (damaged
        shards quarantined, pending versions rolled back, damaged index files rebuilt; lexray.store.integrity),
        ``reencoded_damaged`` (documents re-encoded because their shard was damaged), ``timings`` and
        ``read_report``. ``noop`` is true only when nothing was encoded, recovered or repaired.

    Raises:
        lexray.locks.LockHeldError: another run holds the store (names pid, host, start time).
        StoreError: the new version failed validation (``current`` is left unchanged).
        FileNotFoundError: dataset or model missing (before anything is written).
    """
    from lexray.data.beir import resolve_dataset_dir
    from lexray.encode.identity import check_model, normalise_model_cfg

    t0 = time.perf_counter()
    store = Path(store)
    cfg = cfg.model_copy(update={"model": normalise_model_cfg(cfg.model)})
    check_model(cfg.model)
    dataset = resolve_dataset_dir(cfg.data.dataset)
    corpus = dataset / "corpus.jsonl"
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus} not found (expected BEIR layout)")
    with FolderLock(store, "LOCK", break_stale=break_stale_lock):
        for sub in ("shards", "versions"):
            (store / sub).mkdir(parents=True, exist_ok=True)
        with Catalog(store) as cat:
            _recover(store, cat)
            timings: dict[str, float] = {}
            repaired, forced = repair_shards(store, cat, timings)  # damaged shards: quarantine, roll back
            recovered = []
            for v in cat.versions("pending"):  # committed by a killed run: finish it
                log.warning("finishing version %d, committed by an interrupted run", v["version"])
                _publish(store, cat, v["version"], cfg, timings)
                recovered.append(v["version"])
            if not forced:  # a damaged index of current: rebuilt in place from its (just verified) shards
                repair_current_index(store, timings, repaired,
                                     lambda v: _publish(store, cat, v, cfg, timings, replace=True))
            summary = _run(store, cat, cfg, dataset, corpus, timings, show_progress, forced)
            summary["recovered"] = recovered
            summary["repaired"] = repaired
            summary["noop"] = summary["noop"] and not recovered and not repaired
            summary["seconds"] = round(time.perf_counter() - t0, 3)
            summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
            return summary


def _run(store: Path, cat: Catalog, cfg: LexrayConfig, dataset: Path, corpus: Path, timings: dict,
         show_progress: bool, forced: frozenset[str] = frozenset()) -> dict:
    """Diff the corpus against ``current``, encode the changes (and the ``forced`` documents: those of a
    quarantined shard), commit the new version and publish it."""
    from lexray.data.beir import ReadReport

    t = time.perf_counter()
    corpus_sha_before = file_sha256(corpus)
    fp, _ = model_fingerprint(cfg)
    report = ReadReport()
    scan = _scan_corpus(dataset, cfg.data.on_error, report)
    base = _current_version(store)
    base_fp = None
    if base is not None:
        rows = cat.rows("SELECT model_fp FROM versions WHERE version = ?", [base])
        base_fp = rows[0][0] if rows else None
    cat.con.register("corpus_scan", scan)
    diff = cat.diff(base, base_fp == fp, len(scan), forced)
    timings["diff"] = time.perf_counter() - t
    summary = {"added": diff.added, "changed": diff.changed, "deleted": diff.deleted, "encoded": 0, "version": base,
               "reencoded_damaged": diff.forced,
               "previous": base, "docs": len(scan), "noop": False, "read_report": report.to_dict()}
    if base is not None and diff.added == diff.changed == diff.deleted == 0 and not diff.forced:
        summary["noop"] = True
        cat.con.unregister("corpus_scan")
        log.info("corpus unchanged since version %d: nothing to do", base)
        return summary

    version = cat.next_version()
    n_todo = len(scan) if diff.todo_ids is None else len(diff.todo_ids)
    t = time.perf_counter()
    new_shards = _encode_changes(store, cfg, dataset, corpus, fp, diff.todo_ids, n_todo, version, show_progress)
    timings["encode"] = time.perf_counter() - t
    if file_sha256(corpus) != corpus_sha_before:
        raise StoreError(f"{corpus} changed during the run; nothing was committed, re-run")
    new_entries = _placed_entries(store, cat, new_shards)
    if len(new_entries) != n_todo:
        raise StoreError(f"encoded {len(new_entries)} documents but {n_todo} were to do")
    cat.commit_version(version, base, fp, {"added": diff.added, "changed": diff.changed, "deleted": diff.deleted,
                                           "encoded": n_todo}, new_shards, new_entries, diff.drop_sql)
    cat.con.unregister("corpus_scan")
    summary["validation"] = _publish(store, cat, version, cfg, timings)
    summary.update(encoded=n_todo, version=version)
    _prune(store, cat, cfg.store.keep_versions)
    return summary


def _encode_changes(store: Path, cfg: LexrayConfig, dataset: Path, corpus: Path, fp: str,
                    todo_ids: frozenset[str] | None, n_todo: int, version: int, show_progress: bool) -> list[dict]:
    """Encode the documents in ``todo_ids`` (None: all) into new shards ``shards/s<version>-<k>.parquet``;
    returns their catalog rows (file, rows, sha256, bytes, postings, vocab_size)."""
    from lexray.encode.pipeline import encode_payloads
    from lexray.encode.plan import resolve_rows_per_shard

    rows_per_shard = resolve_rows_per_shard(cfg.encode.rows_per_shard, n_todo)
    n_shards = -(-n_todo // rows_per_shard)
    payloads = functools.partial(_store_payloads, str(dataset), cfg.data.on_error, todo_ids, rows_per_shard,
                                 f"s{version:06d}")
    new_shards: list[dict] = []
    bar = None
    if show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_todo, desc=f"re-encode ({cfg.encode.backend})", unit="doc")
    for row in encode_payloads(cfg.model, store / "shards", fp, cfg.encode, payloads, n_shards, cfg.encode.backend,
                               input_file=str(corpus)):
        new_shards.append({k: row[k] for k in ("file", "rows", "sha256", "bytes", "postings", "vocab_size")})
        if bar is not None:
            bar.update(row["rows"])
        _stage("encode")
    if bar is not None:
        bar.close()
    return new_shards


def _placed_entries(store: Path, cat: Catalog, new_shards: list[dict]):
    """The catalog entries (doc_id, content_sha256, shard, row) of the documents just encoded, a pyarrow table:
    where each landed, read back from the shards (ids only), joined with its hash in ``corpus_scan``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    id_tabs = []
    for s in sorted(new_shards, key=lambda s: s["file"]):
        ids = pq.read_table(store / "shards" / s["file"], columns=["doc_id"]).column("doc_id")
        id_tabs.append(pa.table({"doc_id": ids, "shard": pa.array([s["file"]] * len(ids), pa.string()),
                                 "row": pa.array(np.arange(len(ids), dtype=np.int32))}))
    placed = pa.concat_tables(id_tabs) if id_tabs else pa.table(
        {"doc_id": pa.array([], pa.string()), "shard": pa.array([], pa.string()), "row": pa.array([], pa.int32())})
    cat.con.register("placed", placed)
    new_entries = cat.con.sql(
        'SELECT p.doc_id, c.content_sha256, p.shard, p."row" FROM placed p JOIN corpus_scan c ON c.doc_id = p.doc_id'
    ).to_arrow_table()
    cat.con.unregister("placed")
    return new_entries


def _shard_set(store: Path, cat: Catalog, version: int, verify: bool = True) -> ShardSet:
    shards = cat.version_shards(version)
    files = [store / "shards" / f for f, _, _ in shards]
    if verify:
        verify_files([(store / "shards" / f, sha, fp) for f, sha, fp in shards], str(cat.path),
                     advice="run lexray reencode again: it quarantines a damaged shard and re-encodes its documents")
    dead = {str(store / "shards" / f): rows for f, rows in cat.dead_rows(version).items()}
    return ShardSet(files, vocab_size=cat.vocab_size(version), verified=verify, dead=dead,
                    source=f"{cat.path} version {version}")


def _publish(store: Path, cat: Catalog, version: int, cfg: LexrayConfig, timings: dict, replace: bool = False) -> dict:
    """Build, validate, move into ``versions/`` and switch ``current`` to a committed version. ``replace``: rebuild
    a published version whose index is damaged (the old folder is moved aside, then deleted)."""
    from lexray.index.build import build_index

    t = time.perf_counter()
    final = version_dir(store, version)
    if not replace and _current_version(store) == version and (final / VERSION_FILE).is_file():
        # switched by a run killed before it marked the version published: readers may use it, keep it
        cat.set_status(version, "published")
        return json.loads((final / VERSION_FILE).read_text())["validation"]
    if final.exists() and not replace:  # moved into place by a run killed before the switch: rebuild to be sure
        shutil.rmtree(final)
    work = store / "versions" / f".v{version:06d}.building-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    sset = _shard_set(store, cat, version)
    stats = build_index(sset, work / "index", cfg.index, show_progress=False)
    timings["index"] = timings.get("index", 0.0) + time.perf_counter() - t
    _stage("build")
    t = time.perf_counter()
    validation = _validate(store, cat, version, sset, work / "index", cfg)
    timings["validate"] = timings.get("validate", 0.0) + time.perf_counter() - t
    info = {"version": version, "docs": stats.n_docs, "postings": stats.n_postings,
            "shards": [f.name for f in sset.files], "tombstones": sset.n_dead, "validation": validation,
            "index_sha256": {p.name: file_sha256(p) for p in sorted((work / "index").iterdir()) if p.suffix == ".npy"},
            "versions_row": next(v for v in cat.versions() if v["version"] == version)}
    (work / VERSION_FILE).write_text(json.dumps(info, indent=2, default=str) + "\n")
    save_config(cfg, work)  # the model and corpus of this version, for its readers (lexray search)
    _stage("validate")
    if final.exists():  # replace: the damaged folder goes aside (a dot name _recover removes) once work is whole
        aside = store / "versions" / f".v{version:06d}.damaged-{uuid.uuid4().hex[:8]}"
        os.rename(final, aside)
        os.replace(work, final)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(work, final)
    fsync_dir(final.parent)
    _switch_current(store, version)
    _stage("published")
    cat.set_status(version, "published")
    return validation


def _validate(store: Path, cat: Catalog, version: int, sset: ShardSet, index_dir: Path, cfg: LexrayConfig) -> dict:
    """Document count and ids equal the live entries; sample queries' top-k equal a from-scratch exact scoring."""
    import pyarrow.parquet as pq

    from lexray.index.search import ExactSearcher

    live = cat.live_count(version)
    searcher = ExactSearcher(index_dir)
    if searcher.n_docs != live:
        raise StoreError(f"version {version}: index holds {searcher.n_docs} documents, catalog {live} live ones")
    idx_ids = pq.read_table(index_dir / "doc_ids.parquet", columns=["doc_id"]).column("doc_id").to_pylist()
    want = {r[0] for r in cat.rows("SELECT doc_id FROM entries WHERE version = ?", [version])}
    if set(idx_ids) != want or len(idx_ids) != len(want):
        raise StoreError(f"version {version}: the index's documents differ from the catalog's live documents")
    out = {"docs": live, "queries": 0, "k": cfg.store.validate_k, "topk_equal": True}
    n_q = cfg.store.validate_queries
    if n_q == 0:
        return out
    from lexray.data.beir import load_queries, resolve_dataset_dir
    from lexray.models import load_encoder

    try:
        queries = load_queries(resolve_dataset_dir(cfg.data.dataset), cfg.data.split, on_error=cfg.data.on_error)
    except FileNotFoundError:
        queries = load_queries(resolve_dataset_dir(cfg.data.dataset), None, on_error=cfg.data.on_error)
    qids = list(queries)[:n_q]
    if not qids:
        return out
    enc = load_encoder(cfg.model)
    q_ids, q_ws = enc.encode_sparse([queries[q] for q in qids], "query")
    k = cfg.store.validate_k
    got_s, got_d = searcher.search(q_ids, q_ws, k=k)
    exp_s, exp_ids = exact_topk_from_shards(sset, q_ids, q_ws, searcher.vocab_size, k)
    doc_ids = searcher.doc_ids
    for r, qid in enumerate(qids):
        valid = got_d[r] >= 0
        got = list(zip(doc_ids[got_d[r][valid]].tolist(), got_s[r][valid].tolist(), strict=True))
        exp = list(zip(exp_ids[r], exp_s[r].tolist(), strict=True))
        if got != exp:
            raise StoreError(f"version {version}: query {qid!r}: the index's top-{k} differs from an exact "
                             f"scoring of the live shards (first: {got[:2]} vs {exp[:2]}); current is unchanged")
    out["queries"] = len(qids)
    return out


def exact_topk_from_shards(shards, q_ids: list[np.ndarray], q_ws: list[np.ndarray], vocab_size: int, k: int,
                           batch_size: int = 8192) -> tuple[list[np.ndarray], list[list[str]]]:
    """From-scratch exact top-``k`` straight from the live shard rows (no index), streamed in batches.

    Scores are ``Σ_t q_t · w_{t,d}`` (SPLADE, Formal et al. 2021, arXiv:2107.05720, §3) accumulated in float32 over the query's
    sorted terms, exactly as :class:`lexray.index.search.ExactSearcher` does, so equal inputs give equal bits;
    ties are broken by document order (doc_idx). Returns per query ``(scores (≤k,) float32, doc ids)``.
    """
    from scipy import sparse

    from lexray.index.search import prepare_queries, topk_dense

    indptr, terms, weights = prepare_queries(q_ids, q_ws, vocab_size)
    Q = len(indptr) - 1
    best_s = [np.zeros(0, np.float32) for _ in range(Q)]
    best_i = [np.zeros(0, np.int64) for _ in range(Q)]
    all_ids: list[str] = []
    for _, _, _, ids, t, w in iter_live_rows(shards, batch_size):
        base = len(all_ids)
        all_ids.extend(ids)
        lens = np.fromiter((len(x) for x in t), np.int64, len(t))
        ptr = np.zeros(len(t) + 1, np.int64)
        np.cumsum(lens, out=ptr[1:])
        m = sparse.csr_matrix((np.concatenate(w) if len(w) else np.zeros(0, np.float32),
                               np.concatenate(t) if len(t) else np.zeros(0, np.int32), ptr),
                              shape=(len(ids), vocab_size)).tocsc()
        m.sort_indices()
        for qi in range(Q):
            acc = np.zeros(len(ids), np.float32)
            for j in range(indptr[qi], indptr[qi + 1]):
                a, b = m.indptr[terms[j]], m.indptr[terms[j] + 1]
                if a != b:
                    acc[m.indices[a:b]] += weights[j] * m.data[a:b]
            s, i = topk_dense(acc, k)
            keep = i >= 0
            cs = np.concatenate([best_s[qi], s[keep]])
            ci = np.concatenate([best_i[qi], i[keep] + base])
            order = np.lexsort((ci, -cs))[:k]
            best_s[qi], best_i[qi] = cs[order], ci[order]
    return best_s, [[all_ids[i] for i in best_i[qi]] for qi in range(Q)]


def _prune(store: Path, cat: Catalog, keep: int) -> None:
    """Keep the ``keep`` newest published versions (and always the current one); delete the rest."""
    published = [v["version"] for v in cat.versions("published")]
    cur = _current_version(store)
    kept = set(published[-keep:]) | ({cur} if cur is not None else set())
    drop = [v for v in published if v not in kept]
    if not drop:
        return
    for f in cat.drop_versions(drop):
        (store / "shards" / f).unlink(missing_ok=True)
    for v in drop:
        d = version_dir(store, v)
        if d.exists():
            shutil.rmtree(d)
    log.info("pruned versions %s", drop)


def rollback(store: str | os.PathLike, break_stale_lock: bool = False) -> dict:
    """Switch ``current`` back to the newest published version older than it (its index is untouched, so
    searches return the previous results byte for byte). The next re-encode diffs against that version.

    Raises:
        StoreError: no older published version is kept. lexray.locks.LockHeldError: a run holds the store.
    """
    t0 = time.perf_counter()
    store = Path(store)
    with FolderLock(store, "LOCK", break_stale=break_stale_lock), Catalog(store) as cat:
        cur = _current_version(store)
        older = [v["version"] for v in cat.versions("published")
                 if cur is None or v["version"] < cur and version_dir(store, v["version"]).is_dir()]
        if not older:
            raise StoreError(f"{store}: no published version older than {cur} is kept; nothing to roll back to")
        _switch_current(store, older[-1])
        return {"added": 0, "changed": 0, "deleted": 0, "encoded": 0, "version": older[-1], "previous": cur,
                "rollback": True, "seconds": round(time.perf_counter() - t0, 3)}
