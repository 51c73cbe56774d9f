"""A cache of sparse evaluations, keyed by everything that determines their numbers, shared across output folders.

Why: the training jobs evaluate their starting model (the zero-shot row) before training. For LACONIC on SmolLM2
that is a dense encode of the whole corpus (5,948 terms per SciFact document, a 277 MB index): a third of the main
job, and the same work on every rerun. :func:`cached_evaluate_sparse` runs :func:`lexray.eval.pipeline.
evaluate_sparse` once into a cache entry and afterwards copies its results, so a rerun pays nothing (no model
load, no encode, no index build, no search) and prints the same numbers: ``metrics.json`` and the run file are
the entry's bytes.

Layout (``eval.cache_dir``, default ``outputs/cache/eval``)::

    <key>/            one evaluation: shards/, index/, run.<split>.trec, per_query.<split>.jsonl, metrics.json …
    <key>/cache.json  the identity the key hashes; written last, so an entry without it is incomplete (a crash):
                      the next run resumes it (the encode stage keeps every shard that verifies)

The output folder gets ``metrics.json``, the run and per-query files (copies), ``config.resolved.yaml`` and
``cache.json`` naming the entry and whether it was a hit.

Invalidation: the key is the sha256 of :func:`evaluation_identity`: the encode run's identity
(:func:`lexray.encode.identity.encode_identity`: the model's content hash, its settings, the corpus's sha256),
the encode settings that change vectors (batch size, threads, top-k, output vocabulary …), the content of the
collections the model's settings name (``model.output_vocab``, ``model.apc.probe_dataset``), the index,
search and metric settings, the queries' and qrels' sha256, the retriever label, and the code: the sha256 of
lexray's own source files and the torch / transformers versions. Any change gives another key; an old entry is
never read again (delete the folder to reclaim the space). Not in the key: the CPU. Float32 results differ in
the last bits across instruction sets (docs/recipes.md), so an entry made on another machine of a shared cache
gives that machine's numbers. ``eval.cache: false`` (``--no-cache``) evaluates afresh into the output folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import shutil
import time
from pathlib import Path

from lexray.config import LexrayConfig, save_config
from lexray.fsio import file_sha256

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MARKER = "cache.json"
_NOT_VECTORS = {"overwrite", "backend", "num_actors", "cpus_per_actor", "reader_cpus"}  # scheduling only


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 of lexray's own ``*.py`` files (relative names and bytes): any code change is another key."""
    import lexray

    root = Path(lexray.__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _dataset_sha(dataset: str | None) -> str | None:
    from lexray.data.beir import resolve_dataset_dir

    return None if dataset in (None, "full") else file_sha256(resolve_dataset_dir(dataset) / "corpus.jsonl")


def evaluation_identity(cfg: LexrayConfig, backend: str, retriever_name: str | None) -> dict:
    """What determines an evaluation's numbers (see the module docstring); reads the model, corpus, queries and
    qrels files to hash them (no model is loaded)."""
    import torch
    import transformers

    from lexray.data.beir import resolve_dataset_dir
    from lexray.encode.identity import encode_identity, normalise_model_cfg
    from lexray.encode.plan import count_corpus_rows, resolve_rows_per_shard

    dataset = resolve_dataset_dir(cfg.data.dataset)
    corpus = dataset / "corpus.jsonl"
    model = normalise_model_cfg(cfg.model.with_output_vocab(cfg.encode.output_vocab, str(dataset)))
    rows = resolve_rows_per_shard(cfg.encode.rows_per_shard,
                                  functools.partial(count_corpus_rows, corpus, cfg.data.max_docs))
    enc = cfg.encode.model_copy(update={"rows_per_shard": rows})
    e = cfg.eval
    return {
        "format_version": FORMAT_VERSION,
        "encode": encode_identity(model, enc, corpus, cfg.data.on_error, cfg.data.max_docs),
        "encode_settings": enc.model_dump(mode="json", exclude=_NOT_VECTORS),
        "chunk_size": model.chunk_size,
        "named_collections": {"output_vocab": _dataset_sha(model.output_vocab),
                              "apc_probe": _dataset_sha(model.apc.probe_dataset) if model.apc.enabled else None},
        "index": cfg.index.model_dump(mode="json", exclude={"memory_limit", "threads", "temp_directory"}),
        "eval": {"backend": backend, "top_k": e.top_k, "metrics": e.metrics, "query_batch_size": e.query_batch_size,
                 "seismic": e.seismic.model_dump(mode="json") if backend == "seismic" else None},
        "split": cfg.data.split,
        "queries_sha256": file_sha256(dataset / "queries.jsonl"),
        "qrels_sha256": file_sha256(dataset / "qrels" / f"{cfg.data.split}.tsv"),
        "retriever": retriever_name,
        "code": {"lexray_source": source_hash(), "torch": torch.__version__,
                 "transformers": transformers.__version__},
    }


def cache_root(cfg: LexrayConfig) -> Path:
    """``eval.cache_dir`` or ``outputs/cache/eval`` (absolute)."""
    from lexray.paths import default_output_dir

    return Path(cfg.eval.cache_dir).resolve() if cfg.eval.cache_dir else default_output_dir() / "cache" / "eval"


def _results(entry: Path) -> list[Path]:
    """The files of an entry that make its result (copied to the output folder)."""
    names = [p for p in entry.iterdir() if p.is_file() and (
        p.name in ("metrics.json", "metrics.md") or p.name.startswith(("run.", "per_query.", "topics.")))]
    return sorted(names)


def cached_evaluate_sparse(cfg: LexrayConfig, out_dir: str | Path, backend: str | None = None,
                           retriever_name: str | None = None) -> dict:
    """:func:`lexray.eval.pipeline.evaluate_sparse` of ``cfg.model`` on ``cfg.data``, computed once per
    :func:`evaluation_identity` and reused after (see the module docstring).

    Returns:
        the metrics.json record, the same (byte for byte in ``out_dir/metrics.json``) on a hit as when computed.

    Another live run computing the same entry (its lock held): this one evaluates into ``out_dir`` uncached.

    Raises:
        what :func:`~lexray.eval.pipeline.evaluate_sparse` raises.
    """
    from lexray.eval.pipeline import evaluate_sparse
    from lexray.locks import FolderLock, LockHeldError

    cfg.model.require_source()
    backend = backend or cfg.eval.backend
    t0 = time.perf_counter()
    identity = evaluation_identity(cfg, backend, retriever_name)
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    entry = cache_root(cfg) / key
    hit = (entry / MARKER).is_file()
    if not hit:
        try:
            # a lock left by a killed run on this host is taken over; its partial entry is resumed
            with FolderLock(entry, ".lock", break_stale=True):
                evaluate_sparse(cfg, entry, backend, retriever_name=retriever_name)
                (entry / MARKER).write_text(json.dumps({"key": key, "identity": identity}, indent=2) + "\n")
        except LockHeldError as e:
            log.warning("evaluation cache entry busy (%s): evaluating without the cache", e)
            return evaluate_sparse(cfg, out_dir, backend, retriever_name=retriever_name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for p in _results(entry):
        shutil.copyfile(p, out / p.name)
    save_config(cfg, out)
    (out / MARKER).write_text(json.dumps({"entry": str(entry), "key": key, "hit": hit}, indent=2) + "\n")
    label = retriever_name or cfg.model.name_or_path
    if hit:
        print(f"[lexray] {label}: cached evaluation reused ({time.perf_counter() - t0:.1f} s; {entry}; "
              f"--no-cache or --set eval.cache=false evaluates again)", flush=True)
    else:
        print(f"[lexray] {label}: evaluation cached in {entry} (a rerun reuses it)", flush=True)
    return json.loads((entry / "metrics.json").read_text())
