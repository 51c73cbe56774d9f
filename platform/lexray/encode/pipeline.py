"""Corpus encoding: BEIR ``corpus.jsonl`` → SPLADE sparse vectors → Parquet shards, with Ray Data.

Flow (docs/indexing.md, "Encoding")::

    driver: validate the corpus once (lexray.data.beir.iter_corpus: bad rows fail or are skipped and counted),
            plan shards as fixed slices of R documents, keep shards already on disk that verify, write the
            manifest (status "running")
    Ray Data: one read task streams the corpus and emits one row per shard still to do
              {shard, doc_ids: list<string>, texts: list<string>}
           → map_batches(ShardEncoder, batch_size=1, ActorPoolStrategy(size=num_actors),
                         num_cpus=cpus_per_actor (fractional), num_gpus=gpus_per_actor)
              each actor loads the encoder once; per shard: tokenize all texts, length-sorted batches under
              torch.inference_mode, vectorised sparse conversion, one Parquet file written atomically; it
              returns a one-row summary (counts and per-stage seconds)
    driver: collects summaries (progress bar over documents), updates the manifest, finally status "complete"

Why one row per shard rather than one row per document: the shard is the unit of resume (a deterministic slice
of the corpus), so the actor that encodes it also writes it, atomically, and Ray Data can neither split nor
merge it across blocks. It also lets the actor sort a whole shard by length, which removes most padding.

Documents are encoded as ``title + " " + text`` (BEIR's convention, :attr:`lexray.data.beir.Document.full_text`);
the document prefix and max length come from the encoder's settings (``lexray_encoder.json``).

This module is the orchestration (the driver side, and the Ray Data plumbing of :func:`encode_payloads`); one
run of :func:`encode_corpus` goes plan → verify → run → finalize. Its parts live beside it, one concern each:
:mod:`lexray.encode.plan` (shard size and shard plan), :mod:`lexray.encode.identity` (model hash, run identity),
:mod:`lexray.encode.actor` (the :class:`~lexray.encode.actor.ShardEncoder` actor), :mod:`lexray.encode.shards`
(format, writes, manifest) and :mod:`lexray.encode.reader` (reading shards back).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from lexray.config import EncodeConfig, ModelConfig
from lexray.encode import faults
from lexray.encode.actor import STAGES, ShardEncoder, encoder_kwargs
from lexray.encode.identity import (
    check_model,
    diff_identity,
    encode_identity,
    normalise_model_cfg,
)
from lexray.encode.plan import (
    Payload,
    count_corpus_rows,
    iter_payloads,
    plan_shards,
    resolve_rows_per_shard,
)
from lexray.encode.shards import (
    MANIFEST_FILE,
    Manifest,
    ManifestMismatchError,
    ModelInfo,
    ShardInfo,
    Totals,
    file_sha256,
    fingerprint,
    load_manifest,
    read_fingerprint,
    remove_stale_tmp,
    save_manifest,
    verify_shard,
)

log = logging.getLogger(__name__)

__all__ = ["encode_corpus", "encode_payloads"]


@dataclass
class _Run:
    """What one :func:`encode_corpus` call encodes, where and how (``cfg.rows_per_shard`` resolved by
    :func:`_resume_state`)."""

    model_cfg: ModelConfig
    dataset: Path
    corpus: Path
    out: Path
    cfg: EncodeConfig
    on_error: Literal["fail", "skip"]
    max_docs: int | None
    backend: Literal["ray", "local"]
    show_progress: bool


def _payload_table(k: int, file: str, ids: list[str], texts: list[str]) -> pa.Table:
    return pa.table({"shard": pa.array([k], pa.int64()), "file": pa.array([file], pa.string()),
                     "doc_ids": pa.array([ids], pa.list_(pa.string())),
                     "texts": pa.array([texts], pa.list_(pa.large_string()))})


def _make_datasource(payloads: Callable[[], Iterator[Payload]], n_rows: int, input_file: str):
    """A Ray Data datasource with one read task that calls ``payloads()`` (streaming the corpus) and yields one
    row per shard to do."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class CorpusShardsDatasource(Datasource):
        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            def read_fn():
                for k, file, ids, texts in payloads():
                    yield _payload_table(k, file, ids, texts)

            meta = BlockMetadata(num_rows=n_rows, size_bytes=None, exec_stats=None, input_files=(input_file,))
            return [ReadTask(read_fn, meta)]

        def get_name(self):
            return "CorpusShards"

    return CorpusShardsDatasource()


def _clear(out_dir: Path) -> None:
    for p in out_dir.glob("part-*.parquet"):
        p.unlink()
    (out_dir / MANIFEST_FILE).unlink(missing_ok=True)


def encode_corpus(model_cfg_or_path: ModelConfig | str | os.PathLike, dataset_dir: str | os.PathLike,
                  out_dir: str | os.PathLike, encode_cfg: EncodeConfig | None = None,
                  on_error: Literal["fail", "skip"] = "fail", max_docs: int | None = None,
                  backend: Literal["ray", "local"] | None = None, overwrite: bool | None = None,
                  show_progress: bool = True, report=None, break_stale_lock: bool = False) -> Manifest:
    """Encode a BEIR corpus into Parquet sparse shards plus ``manifest.json``; resumable; one writer at a time.

    The model is checked (:func:`lexray.encode.identity.check_model`) before anything is written; ``out_dir`` is locked for the whole
    run (``out_dir/.lock`` naming pid, host and start time, :class:`lexray.locks.FolderLock`), so a second encode
    into the same folder fails at once with :class:`lexray.locks.LockHeldError`.

    Args:
        model_cfg_or_path: a :class:`ModelConfig` or a model location (directory, ``shared:<rel>`` or hub id).
        dataset_dir: BEIR folder holding ``corpus.jsonl``.
        out_dir: shard folder (created). Re-running into it keeps every shard that verifies (row count, doc-id
            hash, readable, same fingerprint) and encodes only the others.
        encode_cfg: :class:`EncodeConfig` (batch size, actors, CPUs/GPUs, rows per shard, top-k, threshold, the
            output vocabulary for this collection: ``output_vocab``).
        on_error: bad corpus rows: ``"fail"`` raises, ``"skip"`` skips and counts them (manifest
            ``read_report``).
        max_docs: only the first N (kept) documents.
        backend / overwrite: override ``encode_cfg.backend`` / ``encode_cfg.overwrite``.
        show_progress: tqdm over documents (and Ray Data's own progress bars).
        report: a :class:`lexray.data.beir.ReadReport` to fill (one is created otherwise; also in the manifest).
        break_stale_lock: take over a lock left by a killed run on this host (its pid is dead).

    Returns:
        the final :class:`Manifest` (status ``complete``), also written to ``out_dir/manifest.json``.

    Raises:
        ManifestMismatchError: ``out_dir`` holds shards of a different model, settings or corpus (the message
            lists what differs) and ``overwrite`` is false.
        lexray.data.beir.DataError: bad corpus row under ``on_error="fail"`` (file, line, field), raised before
            any encoding starts.
        FileNotFoundError: dataset or model missing (before anything is written).
        lexray.locks.LockHeldError: another run holds ``out_dir`` (names it).
        lexray.fsio.OutputNotWritableError: ``out_dir`` is read-only (checked first).
    """
    from lexray.data.beir import resolve_dataset_dir
    from lexray.fsio import check_writable
    from lexray.locks import FolderLock

    t_call = time.perf_counter()
    check_writable(out_dir, "encode output folder")  # a read-only --out is refused before any model or Ray work
    cfg = encode_cfg or EncodeConfig()
    model_cfg = normalise_model_cfg(model_cfg_or_path)
    check_model(model_cfg)
    dataset = resolve_dataset_dir(dataset_dir)
    # the head's terms for this collection (encode.output_vocab: model | collection | full)
    model_cfg = model_cfg.with_output_vocab(cfg.output_vocab, str(dataset))
    corpus = dataset / "corpus.jsonl"
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus} not found (expected BEIR layout)")
    run = _Run(model_cfg, dataset, corpus, Path(out_dir), cfg, on_error, max_docs, backend or cfg.backend,
               show_progress)
    with FolderLock(run.out, ".lock", break_stale=break_stale_lock):
        return _encode_locked(run, cfg.overwrite if overwrite is None else overwrite, report, t_call)


def _encode_locked(run: _Run, overwrite: bool, report, t_call: float) -> Manifest:
    """One run under the folder lock: plan → verify → run → finalize."""
    from lexray.data.beir import ReadReport

    identity, fp, old = _resume_state(run, overwrite)
    report = report if report is not None else ReadReport()
    plan = plan_shards(run.dataset, run.cfg.rows_per_shard, on_error=run.on_error, max_docs=run.max_docs,
                       report=report, show_progress=run.show_progress)
    todo = _verify_existing(run.out, plan, old, fp)
    manifest = _start_manifest(run, identity, fp, old, report, plan)
    try:
        timings, wall = _encode_todo(run, manifest, plan, todo, fp, t_call)
        return _finalize(run.out, manifest, plan, todo, timings, wall)
    except BaseException:  # an error or Ctrl-C: the manifest says so (the finished shards stay recorded)
        if manifest.status != "complete":
            manifest.status = "interrupted"
            try:
                save_manifest(manifest, run.out)
            except OSError:  # e.g. the disk that failed the shard: the file keeps "running"
                pass
        raise


def _resume_state(run: _Run, overwrite: bool) -> tuple[dict[str, Any], str, Manifest | None]:
    """Plan step 1: the run's identity and fingerprint, and the folder's manifest if the run resumes it.

    Resolves ``run.cfg.rows_per_shard`` (a resumed folder keeps its value). A folder of another run (different
    fingerprint, or shards of another run without a manifest) is refused, or cleared with ``overwrite``.

    Raises:
        ManifestMismatchError: the folder holds another run's shards and ``overwrite`` is false.
        ValueError: an invalid ``manifest.json`` and ``overwrite`` is false.
    """
    out = run.out
    remove_stale_tmp(out)
    try:
        old = load_manifest(out)
    except ValueError:
        if not overwrite:
            raise
        old = None
        _clear(out)
    rows = resolve_rows_per_shard(run.cfg.rows_per_shard,
                                  functools.partial(count_corpus_rows, run.corpus, run.max_docs),
                                  previous=old.rows_per_shard if old is not None else None)
    run.cfg = run.cfg.model_copy(update={"rows_per_shard": rows})
    identity = encode_identity(run.model_cfg, run.cfg, run.corpus, run.on_error, run.max_docs)
    fp = fingerprint(identity)
    if old is not None and old.fingerprint != fp:
        if not overwrite:
            raise ManifestMismatchError(
                f"{out} holds shards made by a different model/settings/corpus ({diff_identity(old.identity, identity)}); "
                "choose another output folder or pass overwrite=True (--overwrite) to replace them")
        log.warning("overwriting %s (%s)", out, diff_identity(old.identity, identity))
        _clear(out)
        old = None
    elif old is None:
        foreign = _shard_fps(out) - {fp}
        if foreign:
            if not overwrite:
                raise ManifestMismatchError(
                    f"{out} holds part-*.parquet shards without a manifest, made by a different model/settings/"
                    "corpus; choose another output folder or pass overwrite=True (--overwrite)")
            _clear(out)
    return identity, fp, old


def _verify_existing(out: Path, plan: list[ShardInfo], old: Manifest | None, fp: str) -> list[int]:
    """Verify step: keep every planned shard on disk that verifies (:func:`lexray.encode.shards.verify_shard`),
    filling its ``postings``, ``bytes``, ``sha256`` and ``encode_seconds`` in ``plan``; delete ``part-*`` files
    outside the plan, with a warning naming them (count and names). Returns the indexes of the shards still to encode."""
    old_by_index = {s.index: s for s in old.shards} if old is not None else {}
    todo: list[int] = []
    for s in plan:
        prev = old_by_index.get(s.index)
        ok, why, postings = verify_shard(out / s.file, s, fp, sha256=prev.sha256 if prev is not None else None)
        if ok:
            s.postings = postings
            s.bytes = (out / s.file).stat().st_size
            s.sha256 = prev.sha256 if prev is not None and prev.sha256 else file_sha256(out / s.file)
            s.encode_seconds = prev.encode_seconds if prev is not None else None
        else:
            if why != "missing":
                log.warning("shard %s will be re-encoded: %s", s.file, why)
            todo.append(s.index)
    planned = {s.file for s in plan}
    stray = sorted(p for p in out.glob("part-*.parquet") if p.name not in planned)
    if stray:  # this run's own shards (same fingerprint) outside its plan, e.g. of a longer corpus: said, then removed
        log.warning("removing %d part-*.parquet file(s) in %s that this run's plan does not contain: %s",
                    len(stray), out, ", ".join(p.name for p in stray[:20]) + (" …" if len(stray) > 20 else ""))
    for p in stray:
        p.unlink()
    return todo


def _start_manifest(run: _Run, identity: dict[str, Any], fp: str, old: Manifest | None, report,
                    plan: list[ShardInfo]) -> Manifest:
    """The run's manifest (status ``running``, the plan, what the previous run learnt of the model), saved."""
    import lexray

    model_cfg = run.model_cfg
    manifest = Manifest(
        fingerprint=fp, identity=identity, lexray_version=lexray.__version__,
        model=ModelInfo(name_or_path=model_cfg.name_or_path, content_hash=identity["model_hash"],
                        config=model_cfg.model_dump(mode="json"),
                        vocab_size=old.model.vocab_size if old else None,
                        doc_max_length=old.model.doc_max_length if old else None,
                        settings=old.model.settings if old else None),
        vocab_size=old.vocab_size if old else None,
        encode=run.cfg.model_dump(mode="json") | {"backend": run.backend},
        dataset={"path": str(run.dataset), "corpus": str(run.corpus), "corpus_sha256": identity["corpus_sha256"],
                 "on_error": run.on_error, "max_docs": run.max_docs},
        read_report=report.to_dict(), rows_per_shard=run.cfg.rows_per_shard, shards=plan)
    save_manifest(manifest, run.out)
    return manifest


def _encode_todo(run: _Run, manifest: Manifest, plan: list[ShardInfo], todo: list[int], fp: str,
                 t_call: float) -> tuple[dict[str, float], float]:
    """Run step: encode the shards in ``todo`` (:func:`encode_payloads`), recording each in ``manifest`` (saved
    after every shard). Returns the timings (seconds; token counts) and the wall seconds of this step."""
    timings: dict[str, float] = defaultdict(float)
    pids: set[int] = set()
    t_start = time.perf_counter()
    t_start_unix = time.time()
    first_start = last_end = None
    timings["prepare"] = t_start - t_call  # hashing model and corpus, validating/planning, verifying old shards
    if todo:
        results = encode_payloads(
            run.model_cfg, run.out, fp, run.cfg,
            functools.partial(iter_payloads, str(run.dataset), plan, todo, run.on_error, run.max_docs,
                              run.cfg.rows_per_shard),
            len(todo), run.backend, input_file=str(run.corpus))
        bar = None
        if run.show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=sum(plan[k].rows for k in todo), desc=f"encode ({run.backend})", unit="doc")
        for n_recorded, row in enumerate(results, 1):
            _record_shard(manifest, plan[row["shard"]], row, timings, pids)
            first_start = min(first_start or row["started_at"], row["started_at"])
            last_end = max(last_end or row["ended_at"], row["ended_at"])
            save_manifest(manifest, run.out)  # status "running", with progress so far
            faults.shard_recorded(n_recorded)  # a test's Ctrl-C (lexray.encode.faults); nothing otherwise
            if bar is not None:
                bar.update(row["rows"])
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t_start
    if first_start is not None:
        # fixed cost before any document is encoded (Ray start when no session is up yet, worker/actor start,
        # imports, model load) and after the last shard (result collection); wall clocks of the encoder processes,
        # so exact on one node and within clock skew on a cluster (issue 13, docs/indexing.md)
        timings["to_first_shard"] = max(0.0, first_start - t_start_unix)
        timings["after_last_shard"] = max(0.0, t_start_unix + wall - last_end)
    return timings, wall


def _record_shard(manifest: Manifest, s: ShardInfo, row: dict, timings: dict[str, float], pids: set[int]) -> None:
    """Fold one encoder summary row (:class:`~lexray.encode.actor.ShardEncoder`) into its planned shard ``s``, the
    run's ``timings`` and the manifest's model information."""
    if row["rows"] != s.rows:
        raise RuntimeError(f"shard {s.index}: encoder returned {row['rows']} rows, planned {s.rows}")
    s.postings, s.bytes, s.encode_seconds = row["postings"], row["bytes"], row["t_total"]
    s.sha256 = row["sha256"]
    for st in STAGES:
        timings[st] += row[f"t_{st}"]
    timings["shard_total"] += row["t_total"]
    timings["actor_init"] += row["t_init"]
    timings["real_tokens"] += row["real_tokens"]
    timings["padded_tokens"] += row["padded_tokens"]
    pids.add(row["pid"])
    timings["actors"] = float(len(pids))
    manifest.vocab_size = manifest.model.vocab_size = row["vocab_size"]
    settings = json.loads(row["settings_json"])
    manifest.model.settings = settings
    manifest.model.doc_max_length = settings.get("doc_max_length")


def _finalize(out: Path, manifest: Manifest, plan: list[ShardInfo], todo: list[int], timings: dict[str, float],
              wall: float) -> Manifest:
    """Finalize step: check every planned shard was written, fill totals and timings, save with status
    ``complete``."""
    missing = [s.file for s in plan if s.postings is None or s.sha256 is None]
    if missing:
        raise RuntimeError(f"encoding finished without writing shards {missing[:5]}")
    # an encoder that died mid-write (a lost node, a killed actor) left its temporary file; Ray Data wrote that
    # shard again elsewhere, so the file is garbage (seen in the node-loss test, issue 24)
    left = remove_stale_tmp(out)
    if left:
        log.warning("removed %d temporary file(s) left in %s by encoders that died mid-write", left, out)
    docs = sum(s.rows for s in plan)
    postings = sum(int(s.postings or 0) for s in plan)
    docs_encoded = sum(plan[k].rows for k in todo)
    manifest.totals = Totals(docs=docs, postings=postings, avg_nnz=postings / docs if docs else 0.0,
                             shards=len(plan), shards_encoded=len(todo), shards_reused=len(plan) - len(todo),
                             docs_encoded=docs_encoded, encode_seconds=wall,
                             docs_per_s=docs_encoded / wall if todo and wall > 0 else 0.0,
                             actor_seconds=timings.get("shard_total", 0.0))
    manifest.timings = dict(timings)
    manifest.status = "complete"
    save_manifest(manifest, out)
    return manifest


def _shard_fps(out_dir: Path) -> set[str]:
    fps = set()
    for p in out_dir.glob("part-*.parquet"):
        try:
            fps.add(read_fingerprint(p))
        except Exception:  # noqa: BLE001 - unreadable shards are redone anyway
            continue
    return fps


def encode_payloads(model_cfg: ModelConfig, out_dir: str | os.PathLike, fp: str, cfg: EncodeConfig,
                    payloads: Callable[[], Iterator[Payload]], n_shards: int, backend: Literal["ray", "local"],
                    input_file: str = "") -> Iterator[dict]:
    """Encode and write shards, one summary row each (as they finish), with the one encoder path of lexray.

    ``payloads`` is a picklable zero-argument callable (it runs inside the Ray Data read task) yielding
    ``(index, file, doc_ids, texts)``; each becomes ``out_dir/file`` written atomically by a
    :class:`ShardEncoder` actor (Ray Data ``map_batches`` over an ``ActorPoolStrategy``, fractional CPUs) or,
    with ``backend="local"``, in this process. Used by :func:`encode_corpus` and :mod:`lexray.store`.
    """
    out = Path(out_dir)
    if n_shards == 0:
        return
    if backend == "local":
        enc = ShardEncoder(**encoder_kwargs(model_cfg, out, fp, cfg, local=True))
        for k, file, ids, texts in payloads():
            yield enc.encode_shard(k, ids, texts, file)
        return
    import ray

    from lexray.ray_utils import init_ray

    init_ray()
    source = _make_datasource(payloads, n_shards, input_file)
    ds = ray.data.read_datasource(source, num_cpus=cfg.reader_cpus, override_num_blocks=1)
    # The read task's output buffer merges consecutive small tables into one block up to target_max_block_size
    # (128 MiB), and a block goes to one actor as a whole: all shards would then land on the same actor. A tiny
    # target on *this* dataset's context (a copy; the global DataContext is untouched) makes every shard row its
    # own block, so the pool spreads shards over all actors.
    ds.context.target_max_block_size = 1
    # lexray shows its own bar over documents; Ray Data's would add, on a non-interactive stdout (jobs, CI,
    # `ray job submit`), a ten-line status block every 10 s.
    ds.context.enable_progress_bars = False
    remote: dict[str, Any] = {"num_cpus": cfg.cpus_per_actor}
    if cfg.gpus_per_actor > 0:
        remote["num_gpus"] = cfg.gpus_per_actor
    # Two shards in flight per actor: the next shard is already queued at the actor (its payload fetched) when the
    # current one finishes. With one in flight the actor idled 0.2-0.4 s at every shard boundary while the
    # streaming executor noticed the finished task and dispatched the next (measured, issue 13). The actor still
    # runs one shard at a time (Ray Data's default: no concurrent UDF calls).
    ds = ds.map_batches(
        ShardEncoder, batch_size=1, batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=min(cfg.num_actors, n_shards), max_tasks_in_flight_per_actor=2),
        fn_constructor_kwargs=encoder_kwargs(model_cfg, out, fp, cfg, local=False), **remote)
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield from batch.to_pylist()
