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
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lexray.config import EncodeConfig, ModelConfig
from lexray.encode.shards import (
    MANIFEST_FILE,
    Manifest,
    ManifestMismatchError,
    ModelInfo,
    ShardInfo,
    Totals,
    file_sha256,
    fingerprint,
    ids_digest,
    load_manifest,
    remove_stale_tmp,
    save_manifest,
    shard_metadata,
    shard_name,
    shard_table,
    verify_shard,
    write_shard,
)

log = logging.getLogger(__name__)

__all__ = ["encode_corpus", "encode_payloads", "plan_shards", "model_content_hash", "check_model", "normalise_model_cfg",
           "ShardEncoder", "STAGES", "auto_rows_per_shard", "count_corpus_rows"]

Payload = tuple[int, str, list[str], list[str]]
"""One unit of work: ``(shard index, shard file name, doc_ids, texts)``."""

STAGES = ("tokenize", "body", "head_pool", "sparse", "write")
"""Per-shard timers measured inside the encoder (seconds): tokenization, transformer body, vocabulary head +
max pooling + activation, dense → sparse conversion, Arrow table + Parquet write."""

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


def _resolve_rows_per_shard(cfg: EncodeConfig, old: Manifest | None, corpus: Path, max_docs: int | None) -> int:
    """The configured rows per shard; for None, the value the folder's manifest ``old`` was made with (so a
    resumed run keeps its layout and fingerprint), else :func:`auto_rows_per_shard` of the corpus size."""
    if cfg.rows_per_shard is not None:
        return cfg.rows_per_shard
    if old is not None and old.rows_per_shard:
        return int(old.rows_per_shard)
    return auto_rows_per_shard(count_corpus_rows(corpus, max_docs))


_SUMMARY_SCHEMA = pa.schema([
    ("shard", pa.int64()), ("rows", pa.int64()), ("postings", pa.int64()), ("bytes", pa.int64()),
    *[(f"t_{s}", pa.float64()) for s in STAGES],
    ("t_total", pa.float64()), ("t_init", pa.float64()), ("real_tokens", pa.int64()),
    ("padded_tokens", pa.int64()), ("vocab_size", pa.int64()), ("settings_json", pa.string()),
    ("pid", pa.int64()), ("file", pa.string()), ("sha256", pa.string()),
    ("started_at", pa.float64()), ("ended_at", pa.float64()),
])

_MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model", ".tiktoken")


# =========================================================================== identity
def _hash_files(h, root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in _MODEL_FILE_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        h.update(b"\0")


def model_content_hash(model_cfg: ModelConfig) -> str:
    """sha256 identifying the encoder's weights and tokenization contract.

    Local directory: over the weight files (``*.safetensors``/``*.bin``), the config, tokenizer files and
    ``lexray_encoder.json`` (names and bytes). Local file (a ``.gguf``, also ``pkg:<module>/<file>``): over its
    name and bytes. Random init: over its config (seeded, so deterministic). Hub id:
    over the locally cached snapshot if there is one, else over the id string (prefixed ``id:``).
    """
    from lexray.paths import resolve_local

    h = hashlib.sha256()
    if model_cfg.random_init is not None:
        h.update(b"random_init\0" + json.dumps(model_cfg.random_init.model_dump(mode="json"),
                                               sort_keys=True).encode())
        return "sha256:" + h.hexdigest()
    local = resolve_local(model_cfg.name_or_path)
    if local is None:
        try:
            from huggingface_hub import snapshot_download

            local = Path(snapshot_download(model_cfg.name_or_path, local_files_only=True))
        except Exception:  # noqa: BLE001 - not cached: identify by id only
            return "id:" + str(model_cfg.name_or_path)
    if local.is_file():
        # a single-file model (a GGUF, possibly inside an installed package): that file's bytes. Hashing its
        # folder instead matched nothing (.gguf is not a folder-model suffix): every GGUF had the empty hash.
        from lexray.fsio import file_sha256

        h.update(b"file\0" + local.name.encode() + b"\0" + file_sha256(local).encode())
        return "sha256:" + h.hexdigest()
    _hash_files(h, local)
    return "sha256:" + h.hexdigest()


def check_model(model_cfg: ModelConfig) -> None:
    """Fail fast, before anything is written, when the model cannot be loaded: a local path that does not exist
    or holds no ``config.json``, or a hub id that is neither cached nor downloadable.

    Raises:
        FileNotFoundError: the message names the path or id.
    """
    from lexray.paths import resolve_local

    if model_cfg.random_init is not None:
        return
    name = str(model_cfg.name_or_path or "")
    if not name:
        raise FileNotFoundError("model.name_or_path is empty")
    local = resolve_local(name)
    looks_local = name.startswith(("/", ".", "~", "shared:")) or os.sep in name.strip("/").split("/", 1)[-1] \
        or Path(name).expanduser().exists()
    if local is not None and not local.exists():
        raise FileNotFoundError(f"model {name!r}: no such folder ({local})")
    if local is not None:
        folder = local.parent if local.is_file() else local
        if not (folder / "config.json").is_file() and not local.is_file():
            raise FileNotFoundError(f"model {name!r}: {folder} holds no config.json (not a model folder)")
        return
    if looks_local:
        raise FileNotFoundError(f"model {name!r}: no such folder ({Path(name).expanduser().resolve()})")
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name)
    except Exception as e:  # noqa: BLE001 - re-raised with the id
        raise FileNotFoundError(f"model {name!r}: not a local folder and not loadable from the hub cache "
                                f"({type(e).__name__}: {str(e)[:200]})") from None


def normalise_model_cfg(model_cfg_or_path: ModelConfig | str | os.PathLike) -> ModelConfig:
    """A ModelConfig whose local path is absolute (Ray workers may not share the driver's working directory)."""
    from lexray.paths import resolve_local

    if isinstance(model_cfg_or_path, ModelConfig):
        cfg = model_cfg_or_path.model_copy()
    else:
        cfg = ModelConfig(name_or_path=str(model_cfg_or_path))
    if cfg.name_or_path is not None:
        local = resolve_local(cfg.name_or_path)
        if local is not None:
            cfg = cfg.model_copy(update={"name_or_path": str(local)})
    return cfg


# =========================================================================== planning
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


def _iter_payloads(dataset_dir: str, plan: Sequence[ShardInfo], todo: Sequence[int], on_error: str,
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


# =========================================================================== the encoder actor
class ShardEncoder:
    """Encodes whole shards and writes them; used as the Ray Data actor class and by the local backend.

    Args:
        model_cfg: ``ModelConfig`` as a JSON-able dict (absolute local path).
        out_dir: shard folder. fp: the run fingerprint stored in each shard's metadata.
        batch_size: documents per forward pass. top_k / threshold: sparsification (see ``to_sparse_flat``).
        sort_by_length: length-sorted batches (less padding).
        exact_length_batches: batch only documents of exactly the same token length (no padding at all), so a
            document's weights do not depend on which other documents are encoded with it (bit-identical
            incremental re-encoding, :mod:`lexray.store`; docs/indexing.md). torch_threads: intra-op threads; None leaves
            torch's setting alone (local backend). device: ``"cpu"`` or ``"cuda"``.
    """

    def __init__(self, model_cfg: dict, out_dir: str, fp: str, batch_size: int = 32, top_k: int | None = None,
                 threshold: float = 0.0, sort_by_length: bool = True, torch_threads: int | None = None,
                 device: str = "cpu", exact_length_batches: bool = False):
        t0 = time.perf_counter()
        import torch

        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:  # already set (only possible before the first parallel op)
                pass
        from lexray.models import load_encoder
        from lexray.models.backbones import body_and_head

        self.encoder = load_encoder(ModelConfig.model_validate(model_cfg)).eval().to(device)
        self.device = device
        self.out_dir = Path(out_dir)
        self.fp = fp
        self.batch_size = batch_size
        self.top_k = top_k if top_k is not None else self.encoder.settings.doc_top_k
        self.threshold = threshold
        self.sort_by_length = sort_by_length or exact_length_batches
        self.exact_length_batches = exact_length_batches
        self._body_seconds = 0.0
        split = body_and_head(self.encoder.backbone, self.encoder.settings.kind)
        if split is not None:  # time the transformer body separately from the vocabulary head (forward hooks)
            body = split[0]
            body.register_forward_pre_hook(self._body_start)
            body.register_forward_hook(self._body_end)
        self._t_init = time.perf_counter() - t0
        self._t_body_start = 0.0

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def _body_start(self, *_):
        self._sync()
        self._t_body_start = time.perf_counter()

    def _body_end(self, *_):
        self._sync()
        self._body_seconds += time.perf_counter() - self._t_body_start

    def encode_texts(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
        """Encode documents into flat CSR arrays in input order.

        Returns ``(offsets (N+1,) int64, term_ids (nnz,) int32, weights (nnz,) float32, stats)`` where stats holds
        the seconds of each stage in :data:`STAGES` (``write`` excluded) and real/padded token counts.
        """
        import torch

        from lexray.models.sparse import to_sparse_flat

        st: dict[str, float] = defaultdict(float)
        n = len(texts)
        t = time.perf_counter()
        tok = self.encoder.tokenize(list(texts), kind="document")
        st["tokenize"] += time.perf_counter() - t
        input_ids, attn, pool = tok["input_ids"], tok["attention_mask"], tok["pool_mask"]
        lengths = attn.sum(1).numpy()
        order = np.argsort(-lengths, kind="stable") if self.sort_by_length else np.arange(n)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        if self.exact_length_batches:  # runs of equal length in the length-sorted order, cut at batch_size
            cuts = np.flatnonzero(np.diff(lengths[order])) + 1
            batches = [c[s:s + self.batch_size] for c in np.split(order, cuts)
                       for s in range(0, len(c), self.batch_size)]
        else:
            batches = [order[s:s + self.batch_size] for s in range(0, n, self.batch_size)]
        with torch.inference_mode():
            for b in batches:
                idx = torch.as_tensor(b)
                am = attn[idx]
                cols = am.any(0).nonzero().squeeze(1)  # contiguous for left and right padding
                lo, hi = (int(cols[0]), int(cols[-1]) + 1) if len(cols) else (0, 1)
                batch = {"input_ids": input_ids[idx, lo:hi], "attention_mask": am[:, lo:hi],
                         "pool_mask": pool[idx, lo:hi]}
                st["real_tokens"] += float(am.sum())
                st["padded_tokens"] += float(am[:, lo:hi].numel())
                body0 = self._body_seconds
                t = time.perf_counter()
                reps = self.encoder(**{k: v.to(self.device) for k, v in batch.items()}, kind="document")
                self._sync()
                dt = time.perf_counter() - t
                st["body"] += self._body_seconds - body0
                st["head_pool"] += dt - (self._body_seconds - body0)
                t = time.perf_counter()
                parts.append(to_sparse_flat(reps, top_k=self.top_k, threshold=self.threshold))
                st["sparse"] += time.perf_counter() - t
        t = time.perf_counter()
        offsets, ids, ws = _concat_csr(parts)
        if self.sort_by_length:
            offsets, ids, ws = _permute_csr(offsets, ids, ws, np.argsort(order, kind="stable"))
        st["sparse"] += time.perf_counter() - t
        return offsets, ids, ws, dict(st)

    def encode_shard(self, index: int, doc_ids: list[str], texts: list[str], file: str | None = None
                     ) -> dict[str, Any]:
        """Encode one shard, write ``file`` (default ``part-<index>.parquet``) atomically, return its summary row
        (with the sha256 of the written bytes)."""
        t0 = time.perf_counter()
        started_at = time.time()
        offsets, ids, ws, st = self.encode_texts(texts)
        t = time.perf_counter()
        table = shard_table(doc_ids, offsets, ids, ws, metadata=shard_metadata(self.fp, index))
        file = file or shard_name(index)
        nbytes = write_shard(table, self.out_dir / file)
        sha = file_sha256(self.out_dir / file)
        st["write"] = time.perf_counter() - t
        row = {"shard": index, "rows": len(doc_ids), "postings": int(len(ids)), "bytes": int(nbytes),
               **{f"t_{s}": float(st.get(s, 0.0)) for s in STAGES}, "t_total": time.perf_counter() - t0,
               "t_init": self._t_init, "real_tokens": int(st.get("real_tokens", 0)),
               "padded_tokens": int(st.get("padded_tokens", 0)), "vocab_size": int(self.encoder.vocab_size),
               "settings_json": self.encoder.settings.model_dump_json(), "pid": os.getpid(), "file": file,
               "sha256": sha, "started_at": started_at, "ended_at": time.time()}
        self._t_init = 0.0  # count the model load once per actor
        return row

    def __call__(self, batch: pa.Table) -> pa.Table:
        """Ray Data entry point: rows ``{shard, file, doc_ids, texts}`` → one summary row per shard."""
        rows = [self.encode_shard(int(batch.column("shard")[i].as_py()), batch.column("doc_ids")[i].as_py(),
                                  batch.column("texts")[i].as_py(), batch.column("file")[i].as_py())
                for i in range(batch.num_rows)]
        return pa.Table.from_pylist(rows, schema=_SUMMARY_SCHEMA)


def _concat_csr(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]):
    if not parts:
        return np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    counts = np.concatenate([np.diff(p[0]) for p in parts])
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])


def _permute_csr(offsets: np.ndarray, ids: np.ndarray, ws: np.ndarray, perm: np.ndarray):
    """Rows reordered so that new row r is old row ``perm[r]`` (vectorised gather of ragged segments)."""
    counts = np.diff(offsets)[perm]
    new_off = np.zeros(len(perm) + 1, np.int64)
    np.cumsum(counts, out=new_off[1:])
    src = np.repeat(offsets[:-1][perm] - new_off[:-1], counts) + np.arange(new_off[-1])
    return new_off, ids[src], ws[src]


# =========================================================================== the job
def _diff_identity(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    out = []
    for k in keys:
        if old.get(k) != new.get(k):
            out.append(f"{k}: {json.dumps(old.get(k), default=str)[:120]} -> "
                       f"{json.dumps(new.get(k), default=str)[:120]}")
    return "; ".join(out) or "fingerprint differs"


def _shard_fps(out_dir: Path) -> set[str]:
    import pyarrow.parquet as pq

    fps = set()
    for p in out_dir.glob("part-*.parquet"):
        try:
            meta = pq.read_schema(p).metadata or {}
            fps.add(meta.get(b"lexray.fingerprint", b"").decode())
        except Exception:  # noqa: BLE001 - unreadable shards are redone anyway
            continue
    return fps


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

    The model is checked (:func:`check_model`) before anything is written; ``out_dir`` is locked for the whole
    run (``out_dir/.lock`` naming pid, host and start time, :class:`lexray.locks.FolderLock`), so a second encode
    into the same folder fails at once with :class:`lexray.locks.LockHeldError`.

    Args:
        model_cfg_or_path: a :class:`ModelConfig` or a model location (directory, ``shared:<rel>`` or hub id).
        dataset_dir: BEIR folder holding ``corpus.jsonl``.
        out_dir: shard folder (created). Re-running into it keeps every shard that verifies (row count, doc-id
            hash, readable, same fingerprint) and encodes only the others.
        encode_cfg: :class:`EncodeConfig` (batch size, actors, CPUs/GPUs, rows per shard, top-k, threshold).
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
    """
    from lexray.data.beir import resolve_dataset_dir
    from lexray.locks import FolderLock

    t_call = time.perf_counter()
    cfg = encode_cfg or EncodeConfig()
    model_cfg = normalise_model_cfg(model_cfg_or_path)
    check_model(model_cfg)
    dataset = resolve_dataset_dir(dataset_dir)
    corpus = dataset / "corpus.jsonl"
    if not corpus.is_file():
        raise FileNotFoundError(f"{corpus} not found (expected BEIR layout)")
    out = Path(out_dir)
    with FolderLock(out, ".lock", break_stale=break_stale_lock):
        return _encode_locked(model_cfg, dataset, corpus, out, cfg, on_error, max_docs, backend, overwrite,
                              show_progress, report, t_call)


def _encode_locked(model_cfg: ModelConfig, dataset: Path, corpus: Path, out: Path, cfg: EncodeConfig, on_error,
                   max_docs, backend, overwrite, show_progress, report, t_call: float) -> Manifest:
    import lexray
    from lexray.data.beir import ReadReport

    backend = backend or cfg.backend
    overwrite = cfg.overwrite if overwrite is None else overwrite
    remove_stale_tmp(out)
    try:
        old = load_manifest(out)
    except ValueError:
        if not overwrite:
            raise
        old = None
        _clear(out)
    cfg = cfg.model_copy(update={"rows_per_shard": _resolve_rows_per_shard(cfg, old, corpus, max_docs)})
    report = report if report is not None else ReadReport()

    identity = {
        "format_version": 1,
        "model_hash": model_content_hash(model_cfg),
        "model_config": model_cfg.model_dump(mode="json", exclude={"name_or_path", "chunk_size"}),
        "doc_top_k": cfg.doc_top_k, "threshold": cfg.threshold, "rows_per_shard": cfg.rows_per_shard,
        "corpus_sha256": file_sha256(corpus), "on_error": on_error, "max_docs": max_docs,
    }
    if cfg.batching != "length_sorted":  # only when set, so folders made before the knob keep their fingerprint
        identity["batching"] = cfg.batching
    fp = fingerprint(identity)
    if old is not None and old.fingerprint != fp:
        if not overwrite:
            raise ManifestMismatchError(
                f"{out} holds shards made by a different model/settings/corpus ({_diff_identity(old.identity, identity)}); "
                "choose another output folder or pass overwrite=True (--overwrite) to replace them")
        log.warning("overwriting %s (%s)", out, _diff_identity(old.identity, identity))
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

    plan = plan_shards(dataset, cfg.rows_per_shard, on_error=on_error, max_docs=max_docs, report=report,
                       show_progress=show_progress)
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
    for p in out.glob("part-*.parquet"):
        if p.name not in planned:
            p.unlink()

    manifest = Manifest(
        fingerprint=fp, identity=identity, lexray_version=lexray.__version__,
        model=ModelInfo(name_or_path=model_cfg.name_or_path, content_hash=identity["model_hash"],
                        config=model_cfg.model_dump(mode="json"),
                        vocab_size=old.model.vocab_size if old else None,
                        doc_max_length=old.model.doc_max_length if old else None,
                        settings=old.model.settings if old else None),
        vocab_size=old.vocab_size if old else None,
        encode=cfg.model_dump(mode="json") | {"backend": backend},
        dataset={"path": str(dataset), "corpus": str(corpus), "corpus_sha256": identity["corpus_sha256"],
                 "on_error": on_error, "max_docs": max_docs},
        read_report=report.to_dict(), rows_per_shard=cfg.rows_per_shard, shards=plan)
    save_manifest(manifest, out)

    n_todo_docs = sum(plan[k].rows for k in todo)
    timings: dict[str, float] = defaultdict(float)
    pids: set[int] = set()
    t_start = time.perf_counter()
    t_start_unix = time.time()
    first_start = last_end = None
    timings["prepare"] = t_start - t_call  # hashing model and corpus, validating/planning, verifying old shards
    if todo:
        results = encode_payloads(
            model_cfg, out, fp, cfg, functools.partial(_iter_payloads, str(dataset), plan, todo, on_error, max_docs,
                                                       cfg.rows_per_shard),
            len(todo), backend, input_file=str(corpus))
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_todo_docs, desc=f"encode ({backend})", unit="doc")
        for row in results:
            s = plan[row["shard"]]
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
            first_start = min(first_start or row["started_at"], row["started_at"])
            last_end = max(last_end or row["ended_at"], row["ended_at"])
            manifest.vocab_size = manifest.model.vocab_size = row["vocab_size"]
            settings = json.loads(row["settings_json"])
            manifest.model.settings = settings
            manifest.model.doc_max_length = settings.get("doc_max_length")
            save_manifest(manifest, out)  # status "running", with progress so far
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
    missing = [s.file for s in plan if s.postings is None or s.sha256 is None]
    if missing:
        raise RuntimeError(f"encoding finished without writing shards {missing[:5]}")

    docs = sum(s.rows for s in plan)
    postings = sum(int(s.postings or 0) for s in plan)
    docs_encoded = n_todo_docs
    manifest.totals = Totals(docs=docs, postings=postings, avg_nnz=postings / docs if docs else 0.0,
                             shards=len(plan), shards_encoded=len(todo), shards_reused=len(plan) - len(todo),
                             docs_encoded=docs_encoded, encode_seconds=wall,
                             docs_per_s=docs_encoded / wall if todo and wall > 0 else 0.0,
                             actor_seconds=timings.get("shard_total", 0.0))
    manifest.timings = dict(timings)
    manifest.status = "complete"
    save_manifest(manifest, out)
    return manifest


def _encoder_kwargs(model_cfg: ModelConfig, out: Path, fp: str, cfg: EncodeConfig, local: bool) -> dict:
    threads = cfg.torch_threads if cfg.torch_threads is not None else (
        None if local else max(1, math.ceil(cfg.cpus_per_actor)))
    return dict(model_cfg=model_cfg.model_dump(mode="json"), out_dir=str(out), fp=fp, batch_size=cfg.batch_size,
                top_k=cfg.doc_top_k, threshold=cfg.threshold, sort_by_length=cfg.sort_by_length,
                torch_threads=threads, device="cuda" if cfg.gpus_per_actor > 0 else "cpu",
                exact_length_batches=cfg.batching == "exact_length")


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
        enc = ShardEncoder(**_encoder_kwargs(model_cfg, out, fp, cfg, local=True))
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
        fn_constructor_kwargs=_encoder_kwargs(model_cfg, out, fp, cfg, local=False), **remote)
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        yield from batch.to_pylist()
