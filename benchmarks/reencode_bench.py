"""Scheduled re-encoding: the cost follows the change (issue 11), measured against a full encode in the same run.

    python benchmarks/reencode_bench.py [--docs 5183] [--backend ray] [--out outputs/bench/reencode.json]

Steps, in one process (one Ray session), on SciFact with splade-tiny (``--set``-style overrides via --set):

1. full: a fresh store over the corpus minus ``--held-out`` documents (the baseline: everything encoded);
2. 1 % change: edit / add / delete about 1 % of the documents, re-encode (ratio to 1. must be <= 0.05);
   ``--change-repeats`` (3) successive distinct changes; ``ratio_1pct_to_full`` is the worst of them;
3. no-op: the same corpus again (must take seconds and encode nothing);
4. mutation: +50 new (the held-out ones), 30 edited, 20 deleted; must encode exactly 80;
5. scratch: a second fresh store over the mutated corpus (a second full encode: run-to-run spread of 1.);
   every test query's exact top-1000 on 4. must equal 5.'s (up to the order of exactly tied documents);
6. rollback: ``current`` back to 3.'s version; the test-query run must equal 3.'s byte for byte.

Writes a JSON with every step's summary and the checks, and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "platform"))


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str(ROOT.parent / "shared" / "datasets" / "scifact"))
    ap.add_argument("--model", default="shared:models/splade-tiny")
    ap.add_argument("--docs", type=int, default=None, help="first N documents only (default all)")
    ap.add_argument("--held-out", type=int, default=50)
    ap.add_argument("--backend", choices=["ray", "local"], default="ray")
    ap.add_argument("--change-repeats", type=int, default=3, help="successive 1 %% changes timed (spread)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--work", default=None, help="work folder (default a temporary one, deleted)")
    ap.add_argument("--out", default=str(ROOT / "outputs" / "bench" / "reencode.json"))
    args = ap.parse_args()

    from lexray.config import load_config
    from lexray.data.beir import load_queries
    from lexray.eval.runs import write_trec_run
    from lexray.index.search import ExactSearcher
    from lexray.models import load_encoder
    from lexray.store import reencode, resolve_current, rollback

    src = Path(args.dataset)
    work = Path(args.work or tempfile.mkdtemp(prefix="reencode-bench-"))
    ds = work / "ds"
    ds.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "queries.jsonl", ds / "queries.jsonl")
    shutil.copytree(src / "qrels", ds / "qrels", dirs_exist_ok=True)
    lines = (src / "corpus.jsonl").read_text().splitlines()
    if args.docs:
        lines = lines[: args.docs]
    docs = [json.loads(x) for x in lines]
    held, base = docs[-args.held_out:], docs[: -args.held_out]

    def write(corpus):
        (ds / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))

    def cfg(dataset=ds):
        return load_config(None, [f"data.dataset={dataset}", f"encode.backend={args.backend}", *args.overrides],
                           base={"model": {"name_or_path": args.model}, "encode": {"batching": "exact_length"}})

    queries = load_queries(src, "test")
    qids = list(queries)
    qv: list = []

    def run_of(store):
        if not qv:  # encoded on first use (after the timed steps have started: partial results print early)
            qv.extend(load_encoder(cfg().model).encode_sparse([queries[q] for q in qids], "query"))
        s = ExactSearcher(resolve_current(store) / "index")
        return s.search_run(qids, qv[0], qv[1], k=1000)

    def step(name, summary):
        res["steps"][name] = summary
        print(f"STEP {name}: encoded {summary.get('encoded')} in {summary['seconds']:.2f} s "
              f"{json.dumps(summary.get('timings', {}))}", flush=True)

    if args.backend == "ray":
        from lexray.ray_utils import init_ray

        t = time.perf_counter()
        init_ray()
        ray_start = time.perf_counter() - t
    else:
        ray_start = 0.0
    res: dict = {"docs": len(base), "backend": args.backend, "ray_start_seconds": ray_start, "steps": {}}
    store = work / "store"

    write(base)
    step("full", reencode(store, cfg(), show_progress=False))
    # about 1 %: edit 0.5 %, add 0.25 % (new ids), delete 0.25 %; --change-repeats successive, distinct changes
    # (each against the previous state) give the run-to-run spread of the ratio
    n1 = max(1, round(0.01 * len(base)))
    n_edit, n_add = n1 // 2, n1 // 4
    n_del = n1 - n_edit - n_add
    one = [dict(d) for d in base]
    change_seconds = []
    for r in range(args.change_repeats):
        one = one[: len(one) - n_del]
        for d in one[r:: max(1, len(one) // n_edit)][:n_edit]:
            d["text"] += f" (revised {r})"
        one += [{**d, "_id": f"{d['_id']}-copy{r}", "text": d["text"] + " (copy)"}
                for d in base[r * n_add:(r + 1) * n_add]]
        write(one)
        name = "change_1pct" if r == 0 else f"change_1pct_{r + 1}"
        step(name, reencode(store, cfg(), show_progress=False))
        change_seconds.append(res["steps"][name]["seconds"])
    step("noop", reencode(store, cfg(), show_progress=False))
    before = run_of(store)
    write_trec_run(before, work / "before.trec")

    mutated = [dict(d) for d in one[: len(one) - 20]]
    for d in mutated[1:61:2]:
        d["text"] += " (edited again)"
    mutated += held
    write(mutated)
    step("mutation", reencode(store, cfg(), show_progress=False))
    inc = run_of(store)
    ds2 = work / "ds2"
    shutil.copytree(ds, ds2, dirs_exist_ok=True)
    step("scratch", reencode(work / "scratch", cfg(ds2), show_progress=False))
    ref = run_of(work / "scratch")

    def same(a, b):
        la = sorted(a.items(), key=lambda x: (-x[1], x[0]))
        lb = sorted(b.items(), key=lambda x: (-x[1], x[0]))
        if [s for _, s in la] != [s for _, s in lb]:
            return False
        last = la[-1][1] if la else None
        return {x for x in la if x[1] != last} == {x for x in lb if x[1] != last}

    equal = sum(same(inc[q], ref[q]) for q in qids)
    step("rollback", rollback(store))
    write_trec_run(run_of(store), work / "after.trec")
    full = res["steps"]["full"]["seconds"]
    res["checks"] = {
        "change_1pct_docs": n1, "change_1pct_encoded": res["steps"]["change_1pct"]["encoded"],
        "ratio_1pct_to_full": max(change_seconds) / full,
        "ratio_1pct_to_full_runs": [x / full for x in change_seconds],
        "ratio_1pct_to_scratch_runs": [x / res["steps"]["scratch"]["seconds"] for x in change_seconds],
        # the worst change against the faster of the two full encodes
        "ratio_ok": max(change_seconds) / min(full, res["steps"]["scratch"]["seconds"]) <= 0.05,
        "second_full_seconds": res["steps"]["scratch"]["seconds"],
        "noop_seconds": res["steps"]["noop"]["seconds"], "noop_encoded": res["steps"]["noop"]["encoded"],
        "mutation_encoded": res["steps"]["mutation"]["encoded"],
        "mutation_encoded_ok": res["steps"]["mutation"]["encoded"] == 80,
        "top1000_equal_queries": f"{equal}/{len(qids)}",
        "rollback_bytes_equal": (work / "before.trec").read_bytes() == (work / "after.trec").read_bytes(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(f"{'step':<12} {'encoded':>8} {'seconds':>9}")
    for k, v in res["steps"].items():
        print(f"{k:<12} {v.get('encoded', 0):>8} {v['seconds']:>9.2f}")
    print(json.dumps(res["checks"], indent=2))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return res


if __name__ == "__main__":
    main()
