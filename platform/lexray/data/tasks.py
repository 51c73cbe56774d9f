"""LexSemBridge's fine-grained retrieval tasks (arXiv:2508.17858, ../shared/papers/lexsembridge.txt §3.3, §4.1):
from any BEIR collection, seeded BEIR folders whose queries are built from sampled source passages.

* ``keyword``: 3-8 keywords of the passage (the paper: "3 to 8 keywords extracted from the original passage using a
  large language model"). lexray's extractor is deterministic instead: the passage's content words (lower-cased
  ``[a-z][a-z0-9-]+`` tokens of title + text, at least 3 characters, not in scikit-learn's English stop-word list)
  ranked by tf·idf (idf = ln(N / df) over the whole corpus; ties by first occurrence), the top k with k drawn
  uniformly from 3..8 by the seeded generator. Departures: no LLM, so no paraphrase, no multi-word names
  ("Apple Inc." becomes two words at most), lower-cased words; the most corpus-specific words win, which favours
  rare terms (an LLM picks salient ones, rare or not).
* ``pop16`` / ``pop32`` / ``pop64``: a contiguous span of 16 / 32 / 64 whitespace words of the passage's text
  (title excluded), at a seeded start position (Part-of-Passage, §3.3).
* ``query``: the source collection's own queries and qrels of ``split`` (the paper's "Query" / semantic task).

Every generated query has one qrel, score 1, pointing at its source passage. The same N passages (seeded sample of
the documents whose text has at least 64 words, so every span length fits) serve every task. Each task folder is
an ordinary BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``), so every retriever evaluates on
it; the corpus is a symlink to the source's ``corpus.jsonl`` (never copied), or, with ``corpus_docs``, to one
shared sub-corpus (``<out>/_corpus/corpus.jsonl``: every document the source split's qrels judge, the sampled
passages, then a seeded fill up to ``corpus_docs``) for runs that cannot afford encoding the whole corpus. With a
sub-corpus, every other document of the source goes to ``<out>/_heldout/corpus.jsonl``: in-domain text for training
(for example its title → abstract pairs) that no task ever retrieves or asks about, so a model trained on it has seen
the collection's vocabulary but none of the evaluated passages.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from lexray.data.beir import iter_corpus, load_qrels, resolve_dataset_dir

TASKS = ("query", "keyword", "pop16", "pop32", "pop64")
SPAN_WORDS = {"pop16": 16, "pop32": 32, "pop64": 64}
KEYWORDS_MIN, KEYWORDS_MAX = 3, 8
MIN_SOURCE_WORDS = max(SPAN_WORDS.values())
_WORD = re.compile(r"[a-z][a-z0-9-]+")
MANIFEST = "lexray_tasks.json"


def content_words(text: str) -> list[str]:
    """Lower-cased content words of ``text`` in order (stop words and words under 3 characters dropped)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return [w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in ENGLISH_STOP_WORDS]


def keywords(text: str, df: Counter, n_docs: int, k: int) -> list[str]:
    """The ``k`` content words of ``text`` with the highest tf·ln(N/df), ties by first occurrence."""
    words = content_words(text)
    tf = Counter(words)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    ranked = sorted(tf, key=lambda w: (-tf[w] * math.log(n_docs / max(df[w], 1)), first[w]))
    return ranked[:k]


def span(text: str, n_words: int, rng: np.random.Generator) -> str:
    """``n_words`` consecutive whitespace words of ``text`` from a seeded start (ValueError if it is shorter)."""
    words = text.split()
    if len(words) < n_words:
        raise ValueError(f"passage has {len(words)} words, span needs {n_words}")
    start = int(rng.integers(0, len(words) - n_words + 1))
    return " ".join(words[start:start + n_words])


def build_tasks(dataset: str | os.PathLike, out: str | os.PathLike, n: int = 200, seed: int = 0,
                tasks: Iterable[str] = TASKS, split: str = "test", corpus_docs: int | None = None) -> dict:
    """Write one BEIR folder per task under ``out`` (``out/<task>/``) and ``out/lexray_tasks.json``.

    Args:
        dataset: a BEIR folder (read with :mod:`lexray.data.beir`). n: source passages per generated task.
        seed: the one seed of sampling, keyword counts and span starts (same seed → byte-identical files).
        tasks: names from :data:`TASKS`. split: the source split used by the ``query`` task (and pooled into a
            sub-corpus). corpus_docs: None → every task symlinks the source corpus; else the size of a shared
            sub-corpus (module docstring).

    Returns:
        the manifest: source, seed, n, corpus, and per task its folder and query count.

    Raises:
        ValueError: an unknown task name, or fewer than ``n`` documents with a text of at least 64 words.
    """
    tasks = list(tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; tasks: {', '.join(TASKS)}")
    src = resolve_dataset_dir(dataset)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    df: Counter = Counter()
    eligible: list[tuple[str, str, str]] = []  # (id, title, text) of passages long enough for every span
    all_ids: list[str] = []
    for doc in iter_corpus(src):
        all_ids.append(doc.doc_id)
        df.update(set(content_words(doc.full_text)))
        if len(doc.text.split()) >= MIN_SOURCE_WORDS:
            eligible.append((doc.doc_id, doc.title, doc.text))
    if len(eligible) < n:
        raise ValueError(f"{src}: only {len(eligible)} documents have >= {MIN_SOURCE_WORDS} words, n={n}")
    rng = np.random.default_rng(seed)
    picked = [eligible[i] for i in sorted(rng.choice(len(eligible), size=n, replace=False))]
    manifest: dict = {"source": str(src), "seed": seed, "n": n, "split": split, "corpus_docs": corpus_docs}
    if corpus_docs is None:
        corpus = (src / "corpus.jsonl").resolve()
    else:
        corpus, heldout, n_heldout = _corpus(src, out, split, [p[0] for p in picked], all_ids, corpus_docs, rng)
        manifest.update(heldout=str(heldout), heldout_docs=n_heldout)
    manifest.update(corpus=str(corpus), tasks={})
    for task in tasks:
        folder = out / task
        (folder / "qrels").mkdir(parents=True, exist_ok=True)
        _link(folder / "corpus.jsonl", corpus)
        if task == "query":
            _link(folder / "queries.jsonl", (src / "queries.jsonl").resolve())
            _link(folder / "qrels" / "test.tsv", (src / "qrels" / f"{split}.tsv").resolve())
            manifest["tasks"][task] = {"folder": str(folder), "queries": len(load_qrels(src, split))}
            continue
        t_rng = np.random.default_rng([seed, TASKS.index(task)])
        queries = []
        for doc_id, title, text in picked:
            if task == "keyword":
                k = int(t_rng.integers(KEYWORDS_MIN, KEYWORDS_MAX + 1))
                q = " ".join(keywords(f"{title} {text}", df, len(all_ids), k))
            else:
                q = span(text, SPAN_WORDS[task], t_rng)
            queries.append((f"{task}-{doc_id}", q, doc_id))
        _write(folder / "queries.jsonl",
               "".join(json.dumps({"_id": qid, "text": q}) + "\n" for qid, q, _ in queries))
        _write(folder / "qrels" / "test.tsv",
               "query-id\tcorpus-id\tscore\n" + "".join(f"{qid}\t{d}\t1\n" for qid, _, d in queries))
        manifest["tasks"][task] = {"folder": str(folder), "queries": len(queries)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _corpus(src: Path, out: Path, split: str, picked: list[str], all_ids: list[str], size: int,
            rng: np.random.Generator) -> tuple[Path, Path, int]:
    """The shared sub-corpus (judged documents of ``split``, the picked passages, a seeded fill up to ``size``) and
    the held-out corpus (every other document): their paths and the held-out document count."""
    keep = {d for rel in load_qrels(src, split).values() for d in rel} | set(picked)
    if len(keep) > size:
        raise ValueError(f"corpus_docs={size} is smaller than the {len(keep)} documents the tasks need "
                         f"(judged in {split} + sampled passages)")
    rest = [d for d in all_ids if d not in keep]
    keep |= {rest[i] for i in rng.choice(len(rest), size=min(size - len(keep), len(rest)), replace=False)}
    path, held = out / "_corpus" / "corpus.jsonl", out / "_heldout" / "corpus.jsonl"
    lines: dict[bool, list[str]] = {True: [], False: []}
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines[json.loads(line).get("_id") in keep].append(line if line.endswith("\n") else line + "\n")
    for p, kept in ((path, True), (held, False)):
        p.parent.mkdir(parents=True, exist_ok=True)
        _write(p, "".join(lines[kept]))
    return path.resolve(), held.resolve(), len(lines[False])


def _link(path: Path, target: Path) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
