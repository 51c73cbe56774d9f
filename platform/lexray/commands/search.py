"""Ask an index queries: ranked document ids, scores, titles and a snippet (or JSON / a TREC run).

    lexray search --index outputs/laconic-smollm2-cpu --query "what causes obesity?"
    lexray search --index /tmp/eval --query "a" --query "b" --k 5 --explain
    lexray search --index /tmp/eval --queries ../shared/datasets/scifact/queries.jsonl --format trec > run.trec
    printf 'first query\\nsecond query\\n' | lexray search --index STORE --format json

--index: an evaluated output folder (lexray evaluate --out, or a training job's output: its eval/trained), a
collection store (current is resolved once) or an index folder. --model defaults to the encoder recorded with the
index. Queries: --query (repeatable), --queries FILE (a BEIR queries.jsonl, or plain text with one query per
line), or standard input. The index and the model are loaded once; the batch is encoded and searched in one
pass each, and the speed (queries per second, load excluded) goes to standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from lexray.commands.common import setup_logging

FORMATS = ("text", "json", "trec")
CHUNK = 1024  # queries encoded and searched per pass (output streams between passes)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lexray search", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="evaluated output folder, collection store or index folder")
    ap.add_argument("--model", help="query encoder (default: the one recorded with the index)")
    ap.add_argument("--dataset", help="BEIR folder for titles and texts (default: the recorded corpus)")
    ap.add_argument("--no-verify", action="store_true", help="skip checking the index files against their "
                    "recorded checksums on open (one read of the index; docs/operations.md)")
    ap.add_argument("--query", action="append", default=[], help="a query text (repeatable)")
    ap.add_argument("--queries", help="queries file: BEIR queries.jsonl ({_id, text}) or one query per line; "
                                      "'-' or no --query/--queries: standard input")
    ap.add_argument("-k", "--k", type=int, default=10, help="hits per query (default 10)")
    ap.add_argument("--backend", choices=["exact", "lucene", "seismic"], default="exact",
                    help="exact (evaluate's ranking), lucene (the impact index of evaluate --backend both) or "
                         "seismic (approximate, built in memory first)")
    ap.add_argument("--seismic-cache", metavar="DIR", help="with --backend seismic: keep the Seismic index it "
                    "builds in DIR and load it from there next time (minutes to build, seconds to load; the file is "
                    "about 19 times the size of the lexray index)")
    ap.add_argument("--format", choices=FORMATS, default="text",
                    help="text (rank, doc id, score, title, snippet), json (one object per query per line) or "
                         "trec (qid Q0 doc_id rank score tag)")
    ap.add_argument("--explain", action="store_true",
                    help="show the matching terms with their query and document weights")
    ap.add_argument("--explain-terms", type=int, default=10, metavar="N",
                    help="text format: the N largest contributions per hit, and how much of the score the rest "
                         "make (default 10; 0: every term). The json format always lists every term")
    ap.add_argument("--snippet", type=int, default=160, help="characters of text shown per hit (text format)")
    ap.add_argument("--batch-size", type=int, help="queries per encoder forward pass (default: the recorded "
                                                   "eval.query_batch_size)")
    return ap


def read_queries(args: argparse.Namespace, stdin: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """``[(qid, text)]`` from ``--query`` (ids 1..n), ``--queries FILE`` or standard input (ids = line numbers).

    Raises:
        ValueError: no query at all; DataError: a bad row of a .jsonl file (file:line, field).
    """
    if args.query:
        empty = [i for i, q in enumerate(args.query, 1) if not q.strip()]
        if empty:
            raise ValueError(f"--query {empty[0]} is empty: give the query text")
        return [(str(i), q) for i, q in enumerate(args.query, 1)]
    if args.queries and args.queries != "-":
        path = Path(args.queries)
        if not path.is_file():
            raise FileNotFoundError(f"--queries {path}: no such file")
        if path.suffix == ".jsonl":
            from lexray.data.beir import load_queries_file

            return list(load_queries_file(path).items())
        lines: Iterable[str] = path.read_text(encoding="utf-8").splitlines()
    else:
        lines = stdin if stdin is not None else sys.stdin
    out = [(str(n), line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
    if not out:
        raise ValueError("no query given (--query TEXT, --queries FILE, or lines on standard input)")
    return out


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def _snippet(text: str | None, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " …"


def _terms(hit) -> list[dict]:
    return [{"token": t.token, "text": t.text, "term_id": t.term_id, "query_weight": round(t.query_weight, 4),
             "doc_weight": round(t.doc_weight, 4), "contribution": round(t.contribution, 4)} for t in hit.terms]


def _explanation(terms, top: int) -> str:
    """``terms (query × document weight): bone 1.97×1.98, … (+121 more terms: 59 % of the score)``: the ``top``
    largest contributions (all when ``top`` is 0), each as the term's text, then what the others add up to."""
    shown = terms if top <= 0 else terms[:top]
    parts = [f"{t.text or t.token} {t.query_weight:.2f}×{t.doc_weight:.2f}" for t in shown]
    line = "terms (query × document weight): " + (", ".join(parts) or "none")
    rest = terms[len(shown):]
    if rest:
        total = sum(t.contribution for t in terms)
        share = sum(t.contribution for t in rest) / total if total > 0 else 0.0
        line += f" (+{len(rest)} more term{'s' if len(rest) > 1 else ''}: {100 * share:.0f} % of the score)"
    return line


def format_hits(qid: str, query: str, hits: list, fmt: str, snippet: int = 160, tag: str = "lexray",
                explain_terms: int = 10) -> str:
    """The lines printed for one query (without the trailing newline); ``explain_terms``: see
    :func:`_explanation` (text format only)."""
    if fmt == "json":
        return json.dumps({"qid": qid, "query": query, "hits": [
            {"rank": h.rank, "doc_id": h.doc_id, "score": h.score, "title": h.title, "text": h.text,
             **({"terms": _terms(h)} if h.terms is not None else {})} for h in hits]}, ensure_ascii=False)
    if fmt == "trec":
        return "\n".join(f"{qid} Q0 {h.doc_id} {h.rank} {h.score!r} {tag}" for h in hits)
    lines = [f"query {qid}: {query}"]
    if not hits:
        lines.append("  (no document shares a term with this query)")
    for h in hits:
        title = " ".join((h.title or "").split()) or "(no title)"
        lines.append(f"{h.rank:>4}  {h.doc_id:<12} {h.score:10.4f}  {title}")
        text = _snippet(h.text, snippet)
        if text:
            lines.append(f"      {text}")
        if h.terms is not None:
            lines.append("      " + _explanation(h.terms, explain_terms))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    """Run the search; returns ``{"queries", "load_seconds", "encode_qps", "search_qps"}``.

    Raises:
        FileNotFoundError / ValueError: the index, model or queries are missing or invalid (before any model
            is loaded).
    """
    from lexray.eval.runs import run_tag
    from lexray.search.api import open_index

    args = build_parser().parse_args(argv)
    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if args.explain_terms < 0:
        raise ValueError(f"--explain-terms must be >= 0 (0: every term), got {args.explain_terms}")
    setup_logging()
    queries = read_queries(args)
    t0 = time.perf_counter()
    index = open_index(args.index, model=args.model, dataset=args.dataset, query_batch_size=args.batch_size,
                       verify=not args.no_verify, seismic_cache=args.seismic_cache)
    loc = index.location
    recorded = (loc.model.name_or_path or "random-init") if loc.model is not None else "none recorded"
    print(f"index: {loc.index_dir} ({loc.kind}, {index.n_docs:,} documents); model: {args.model or recorded}",
          file=sys.stderr)
    if index.fields is None:
        print("no corpus recorded with this index: titles and texts are not shown (--dataset gives one)",
              file=sys.stderr)
    elif index.fields.n_missing:
        print(f"{index.fields.n_missing} indexed documents are not in {index.fields.path} (no fields shown)",
              file=sys.stderr)
    index.encoder  # noqa: B018 - load the model now (or fail: none known); the speeds below exclude loading
    if args.backend == "seismic":  # minutes on a large or dense index the first time: say what the wait is
        print(f"Seismic index of {index.n_docs:,} documents: "
              + (f"loading it from {args.seismic_cache}, or building it there" if args.seismic_cache else
                 "building it in memory (--seismic-cache DIR keeps it for the next run)")
              + " ...", file=sys.stderr, flush=True)
    t_prep = time.perf_counter()
    searcher = index.prepare(args.backend)
    if args.backend == "seismic":
        if searcher.cache_file is None:
            done = "built"
        else:
            done = f"{'loaded from' if searcher.source == 'cache' else 'built, saved to'} {searcher.cache_file}"
        print(f"Seismic index {done} in {time.perf_counter() - t_prep:.1f} s", file=sys.stderr)
    load_s = time.perf_counter() - t0
    tag = run_tag(f"lexray-{args.backend}")
    enc_s = search_s = 0.0
    for s in range(0, len(queries), CHUNK):
        chunk = queries[s:s + CHUNK]
        t = time.perf_counter()
        ids, ws = index.encode([q for _, q in chunk])
        enc_s += time.perf_counter() - t
        t = time.perf_counter()
        hits = index.search_vectors(ids, ws, k=args.k, backend=args.backend, explain=args.explain)
        search_s += time.perf_counter() - t
        for (qid, q), h in zip(chunk, hits, strict=True):
            print(format_hits(qid, q, h, args.format, args.snippet, tag, args.explain_terms))
            if args.format == "text":
                print()
    n = len(queries)
    summary = {"queries": n, "load_seconds": load_s, "encode_qps": n / max(enc_s, 1e-9),
               "search_qps": n / max(search_s, 1e-9)}
    print(f"{n} queries: load {load_s:.1f} s, encode {_rate(summary['encode_qps'])} queries/s, search "
          f"{_rate(summary['search_qps'])} queries/s ({args.backend}, k={args.k}, fields"
          f"{' and explanations' if args.explain else ''} included)", file=sys.stderr)
    index.close()
    return summary
