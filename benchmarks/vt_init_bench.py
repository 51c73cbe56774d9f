"""Speed of the VT initialization step (Semantic-Init, eq. 7–9) at the paper's full sizes.

Sizes: target vocabulary |V′| = 30,522 (bert-base-uncased) of which ``--anchors`` (default 15,000; the paper's
ModernBERT → bert-base-uncased overlap is 56.4 % = 17,214) are anchors O and the rest new tokens N′; source table
|V| = 50,368 × d = 768 (ModernBERT-base), target table Ẽ 30,522 × d̃ = 768. Ẽ is synthetic with structure
(rows = 64 cluster centres + noise), so cosine neighbourhoods are peaked like a trained table rather than flat;
``--flat`` uses isotropic noise instead (the worst case for the sparsemax support).

Baseline measured in the same run: the per-token loop (one cosine row, full sort-based sparsemax, weighted sum of
source rows per new token — what a straightforward implementation does), timed on ``--loop-rows`` tokens and
extrapolated linearly to |N′|. The vectorised result is checked against the loop on those tokens.

Run:  .venv/bin/python benchmarks/vt_init_bench.py [--out outputs/benchmarks/vt_init.json]
Goal: the full initialization in seconds, and ≥ 10× the loop.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform"))

from lexray.vocab.alignment import Alignment  # noqa: E402
from lexray.vocab.init import init_embeddings  # noqa: E402
from lexray.vocab.sparsemax import sparsemax  # noqa: E402


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=int, default=30522)
    ap.add_argument("--anchors", type=int, default=15000)
    ap.add_argument("--source", type=int, default=50368)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--target-dim", type=int, default=768)
    ap.add_argument("--loop-rows", type=int, default=200)
    ap.add_argument("--flat", action="store_true")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="outputs/benchmarks/vt_init.json")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    source_of = np.full(args.target, -1, dtype=np.int64)
    anchors = np.sort(rng.choice(args.target, args.anchors, replace=False))
    source_of[anchors] = rng.choice(args.source, args.anchors, replace=False)
    al = Alignment(source_of, np.where(source_of >= 0, 1, -1).astype(np.int8), [""] * args.target,
                   [""] * args.source, "wordpiece", "byte_bpe")
    E = torch.randn(args.source, args.dim, generator=g)
    if args.flat:
        T = torch.randn(args.target, args.target_dim, generator=g)
    else:
        centres = torch.randn(64, args.target_dim, generator=g)
        T = centres[torch.randint(0, 64, (args.target,), generator=g)] + 0.7 * torch.randn(
            args.target, args.target_dim, generator=g)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = init_embeddings(E, al, "semantic", target_table=T)
        times.append(time.perf_counter() - t0)
    new = al.new_ids[:args.loop_rows]
    tn = torch.nn.functional.normalize(T, dim=1)
    ta = tn[torch.from_numpy(anchors)]
    src_anchor = E[torch.from_numpy(source_of[anchors])]
    t0 = time.perf_counter()
    loop_rows = []
    for t in new:
        s = ta @ tn[int(t)]
        a = sparsemax(s)
        nz = torch.nonzero(a).squeeze(1)
        loop_rows.append((a[nz].unsqueeze(1) * src_anchor[nz]).sum(0))
    loop_t = time.perf_counter() - t0
    max_err = float((torch.stack(loop_rows) - res.weights[torch.from_numpy(new)]).abs().max())
    loop_full = loop_t / len(new) * len(al.new_ids)
    out = {"sizes": {"target": args.target, "anchors": args.anchors, "new": int(len(al.new_ids)),
                     "source": args.source, "dim": args.dim, "target_dim": args.target_dim, "flat": args.flat},
           "vectorised_s": times, "vectorised_best_s": min(times),
           "loop_s_per_token": loop_t / len(new), "loop_extrapolated_s": loop_full,
           "speedup": loop_full / min(times), "max_abs_diff_vs_loop": max_err, "support": res.stats,
           "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "platform": platform.platform(), "load_avg": os.getloadavg()}}
    p = Path(args.out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("vectorised_s", "loop_extrapolated_s", "speedup",
                                          "max_abs_diff_vs_loop", "support")}, indent=1))
    return out


if __name__ == "__main__":
    main()
