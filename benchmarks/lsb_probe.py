"""A fast, in-process probe of a LexSemBridge variant (arXiv:2508.17858 §3.4-3.5): train + score on two tasks.

For choosing between bridge variants before running ``lexray lsb-ablation`` rows (which are the measurements the
docs report). No Ray, no shards: the same encoder (:func:`lexray.models.dense.load_dense_encoder` from the recipe
plus ``--set``s), the same cosine InfoNCE (:func:`lexray.losses.infonce_loss`, τ from the recipe), the same hard
negatives file and sampler as :class:`lexray.train.dense.DensePhase`, AdamW with the bridge in its own group
(weight decay 0, ``bridge_lr``) and a cosine schedule with linear warm-up; then exact cosine search of the task
folders' queries over their shared corpus, nDCG@1 and nDCG@10 with binary gains (:func:`ndcg`; every SciFact
and task qrel has score 1). On the no-bridge row nDCG@1 equals the ablation's; nDCG@10 differs by up to 0.01
(the cause was not looked into).

    python benchmarks/lsb_probe.py --tasks outputs/lsb-ablation/tasks --hardneg outputs/lsb-ablation/hardneg.jsonl \
        --set model.dense.bridge=slr --set train.phases.0.bridge_lr=5e-2 --tasks-list query,pop16

One thread (``torch.set_num_threads(1)``). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, line in enumerate(open(path)):
        parts = line.rstrip("\n").split("\t")
        if i == 0 and not parts[-1].lstrip("-").isdigit():
            continue
        out.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return out


def ndcg(ranked: list[str], rel: dict[str, int], k: int) -> float:
    dcg = sum((1.0 if rel.get(d, 0) > 0 else 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    n = min(k, sum(1 for v in rel.values() if v > 0))
    idcg = sum(1.0 / math.log2(i + 2) for i in range(n))
    return dcg / idcg if idcg else 0.0


def main() -> None:
    from lexray.config import load_config
    from lexray.data.collate import StepSampler, collate
    from lexray.data.hardneg import HardNegDataset
    from lexray.losses import infonce_loss
    from lexray.models.dense import load_dense_encoder
    from lexray.paths import REPO_ROOT, resolve_local

    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO_ROOT / "jobs" / "configs" / "lsb-splade-tiny-scifact.yaml"))
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--tasks-list", default="query,pop16")
    ap.add_argument("--hardneg", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--doc-max-length", type=int, default=128)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    overrides = ["model.doc_max_length=128", *args.sets]
    cfg = load_config(args.config, overrides)
    ph = cfg.train.phases[0]
    enc = load_dense_encoder(cfg.model)
    if enc.bridge is not None and ph.bridge_lr is not None:
        for p in enc.bridge.parameters():
            p._lexray_lr = ph.bridge_lr
    torch.manual_seed(cfg.train.seed)
    from lexray.train.strategies import param_groups

    opt = torch.optim.AdamW(param_groups(enc, ph.weight_decay), lr=ph.lr)
    base = [g["lr"] for g in opt.param_groups]
    warm = max(1, int(round(ph.warmup_ratio * args.steps)))
    tasks_dir = Path(args.tasks)
    ds = HardNegDataset(args.hardneg, resolve_local(cfg.data.dataset),
                        ph.num_negatives, seed=cfg.train.seed)
    sampler = StepSampler(len(ds), ph.global_batch_size, 1, 1, seed=cfg.train.seed)
    t0 = time.time()
    enc.train()
    losses = []
    for step in range(args.steps):
        f = (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, args.steps - warm)))
        for g, b in zip(opt.param_groups, base, strict=True):
            g["lr"] = b * f
        epoch, s = sampler.position(step)
        (mb,) = list(sampler.micro_batches(epoch, s, 0))
        batch = collate([ds.example(int(i), epoch) for i in mb], enc.tokenize, ph.query_max_length,
                        ph.doc_max_length)
        q = enc(**batch.queries, kind="query")
        d = enc(**batch.docs, kind="document")
        loss = infonce_loss(q, d, ph.num_negatives, ph.temperature, ph.in_batch_negatives, similarity="cosine")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(enc.parameters(), cfg.train.max_grad_norm or 1e9)
        opt.step()
        losses.append(float(loss.detach()))
    train_s = time.time() - t0
    enc.eval()
    res: dict = {"label": args.label, "sets": args.sets, "steps": args.steps, "loss_first": losses[0],
                 "loss_last": float(np.mean(losses[-5:])), "train_s": round(train_s, 1)}
    corpus = None
    doc_vecs = None
    for t in args.tasks_list.split(","):
        td = tasks_dir / t
        if corpus is None:
            corpus = _read_jsonl(td / "corpus.jsonl")
            ids = [c["_id"] for c in corpus]
            texts = [(c.get("title", "") + " " + c["text"]).strip() if c.get("title") else c["text"] for c in corpus]
            doc_vecs = enc.encode(texts, "document", batch_size=64)
        qrels = _qrels(td / "qrels" / "test.tsv")
        queries = [q for q in _read_jsonl(td / "queries.jsonl") if q["_id"] in qrels]
        qv = enc.encode([q["text"] for q in queries], "query", batch_size=64)
        sc = qv @ doc_vecs.T
        top = torch.topk(sc, 10, dim=1).indices.numpy()
        n1 = [ndcg([ids[j] for j in top[i]], qrels[q["_id"]], 1) for i, q in enumerate(queries)]
        n10 = [ndcg([ids[j] for j in top[i]], qrels[q["_id"]], 10) for i, q in enumerate(queries)]
        res[t] = {"nDCG@1x100": round(100 * float(np.mean(n1)), 2), "nDCG@10": round(float(np.mean(n10)), 4)}
    if enc.bridge is not None:
        with torch.no_grad():
            b = enc.tokenize([q["text"] for q in queries[:64]], "query")
            hidden = enc.body(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
            ql = enc.bridge(b["input_ids"], b["attention_mask"], hidden, enc.mlm_head,
                            enc.backbone.get_input_embeddings().weight) * enc.dim
        res["q_lex_x_d"] = {"max": round(float(ql.max(1).values.mean()), 3), "min": round(float(ql.min(1).values.mean()), 3),
                            "std": round(float(ql.std(1).mean()), 3)}
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
