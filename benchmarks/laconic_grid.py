"""Train and evaluate LACONIC cells one after another in one process, without Ray, on any device.

Why: a cell of the compute curve (docs/recipes.md) is a recipe plus ``--set`` overrides; its *score* does not
depend on where it trains, its *time* does. On the 2-core CPU one default-sized cell costs 17-26 minutes, so a
search over learning rates, depths and step counts does not fit a session there; on a lent GPU the same cells
take seconds each. This script runs each cell with the library's own single-process loop
(:func:`lexray.train.loop.train_local`, the reference that tests hold equal to the Ray Train run) and
evaluates it in the same process:

* every corpus document and test query is encoded with the trained encoder (its saved ``lexray_encoder.json``:
  output vocabulary, max lengths, special tokens), float32 on the device;
* retrieval is exact: the (Q, |V|) query matrix times the (N, |V|)ᵀ document matrix, top ``--top-k``;
* metrics are pytrec_eval's through :func:`lexray.eval.metrics.evaluate` (nDCG@10, MRR@10, R@100, R@1000).

Departures from ``python jobs/train_laconic.py``: no 8-bit impact quantization (the job's ``index.quant_bits: 8``
moves nDCG@10 in the third decimal), GPU kernels (on CUDA the unfused head, ``model.head_impl: auto``; float32
unless a cell sets ``train.bf16``) and no Ray. So a GPU score is the CPU recipe's score up to these and to
floating-point order: each grid has a cell with the CPU recipe's own settings (``L2-S360``, ``D-S320``) that
anchors its run against the CPU number in docs/recipes.md.

Cells come from a YAML or JSON file: a list of ``{name, set: [key=value, ...], zero_shot: bool, transfer: bool}``,
or ``{base: [key=value, ...], cells: [...]}`` whose ``base`` overrides apply to every cell first.
Each result is one JSON line in ``--out`` (written as soon as the cell ends, so a run stopped at its time limit
keeps every finished cell); a cell already in ``--out`` is skipped (resumable). Per cell: the overrides,
SciFact test metrics, mean query / document terms, training seconds per phase, final rank loss, and with
``transfer: true`` the Cranfield row (``data.on_error: skip``, all |V| terms, as the default recipe's
``eval.transfer``), and with ``zero_shot: true`` the untrained backbone's row.

    python benchmarks/laconic_grid.py --cells benchmarks/grids/laconic-2026-11-26.yaml --out grid.jsonl \
        --hardneg outputs/laconic-smollm2-cpu/hardneg/scifact.train.bm25.n8.jsonl

Hard negatives: the recipe's mined file must exist (``--hardneg``; ``python jobs/train_laconic.py`` writes it
to ``outputs/laconic-smollm2-cpu/hardneg/``); the grid never mines, so it needs no Java.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "platform"))


def _load_cells(path: Path) -> tuple[list[str], list[dict]]:
    """``(base overrides, cells)`` of a grid file: a list of cells, or ``{base: [key=value, ...], cells: [...]}``
    where ``base`` applies to every cell first (so a grid keeps its meaning after the recipe file changes)."""
    import yaml

    data = yaml.safe_load(path.read_text())
    base: list[str] = []
    if isinstance(data, dict):
        unknown = set(data) - {"base", "cells"}
        if unknown:
            raise SystemExit(f"{path}: unknown top-level keys {sorted(unknown)} (expected base, cells)")
        base, cells = list(data.get("base") or []), data.get("cells")
    else:
        cells = data
    if not isinstance(cells, list):
        raise SystemExit(f"{path}: expected a list of cells, got {type(cells).__name__}")
    for i, c in enumerate(cells):
        if not isinstance(c, dict) or "name" not in c:
            raise SystemExit(f"{path}: cell {i}: needs a 'name'")
        unknown = set(c) - {"name", "set", "zero_shot", "transfer"}
        if unknown:
            raise SystemExit(f"{path}: cell {c['name']}: unknown keys {sorted(unknown)}")
    return base, cells


@torch.no_grad()
def evaluate_encoder(enc, dataset: str, split: str, device: torch.device, on_error: str = "fail",
                     top_k: int = 1000, batch_size: int = 64, max_docs: int | None = None) -> dict:
    """Exact retrieval of ``dataset``'s ``split`` queries with ``enc`` on ``device``; metrics and term counts."""
    from lexray.data.beir import iter_id_text, load_qrels, load_queries
    from lexray.eval.metrics import evaluate

    t0 = time.perf_counter()
    docs = list(iter_id_text(dataset, on_error=on_error, max_docs=max_docs))
    qrels = load_qrels(dataset, split, on_error=on_error)
    queries = load_queries(dataset, split, on_error=on_error)
    qids = [q for q in qrels if q in queries]
    # (N, |V|) float32 (SparseEncoder.encode: length-sorted batches on ``device``, results on CPU), then on device
    d = enc.encode([t for _, t in docs], "document", batch_size, device=device).to(device)
    q = enc.encode([queries[x] for x in qids], "query", batch_size, device=device).to(device)
    scores = q @ d.T
    k = min(top_k, d.shape[0])
    vals, idx = torch.topk(scores, k, dim=1)
    vals, idx = vals.cpu().tolist(), idx.cpu().tolist()
    run = {qid: {docs[j][0]: float(v) for v, j in zip(vs, js, strict=True) if v > 0}
           for qid, vs, js in zip(qids, vals, idx, strict=True)}
    metrics = evaluate(run, qrels, ["nDCG@10", "MRR@10", "R@100", "R@1000"])
    metrics.update(q_terms=float((q > 0).sum(1).float().mean()), d_terms=float((d > 0).sum(1).float().mean()),
                   eval_s=round(time.perf_counter() - t0, 1), n_docs=len(docs), n_queries=len(qids))
    return metrics


def run_cell(cell: dict, base_config: str, hardneg: str | None, out_root: Path, device: torch.device,
             max_docs: int | None = None, base_sets: tuple[str, ...] = ()) -> dict:
    from lexray.config import load_config
    from lexray.models import load_encoder
    from lexray.train.loop import train_local
    from lexray.workflows import trained_model_config

    sets = list(cell.get("set") or [])
    cfg = load_config(base_config, overrides=[*base_sets, *sets])
    if hardneg:
        phases = [p.model_copy(update={"data_path": hardneg}) if p.data == "hard_negatives" and p.data_path is None
                  else p for p in cfg.train.phases]
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"phases": phases})})
    row: dict = {"name": cell["name"], "set": sets, "base_set": list(base_sets), "device": str(device),
                 "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else None}
    if cell.get("zero_shot"):
        enc = load_encoder(cfg.model)
        row["zero_shot"] = evaluate_encoder(enc, cfg.data.dataset, cfg.data.split, device, max_docs=max_docs)
        del enc
    run_dir = out_root / cell["name"]
    t0 = time.perf_counter()
    state, rep = train_local(cfg, run_dir, device=str(device))
    row["train_s"] = round(time.perf_counter() - t0, 1)
    hist = rep.history
    for i in range(len(cfg.train.phases)):
        ph = [h for h in hist if h.get("phase") == i and "rank_loss" in h]
        if ph:  # the mean of the last 5 logged steps, and the phase's wall seconds between its first and last log
            row[f"phase{i}_rank_loss_end"] = sum(h["rank_loss"] for h in ph[-5:]) / len(ph[-5:])
            row[f"phase{i}_s"] = round(ph[-1]["wall_time"] - ph[0]["wall_time"], 1)
            row[f"phase{i}_step_s"] = round(sum(h["step_time_s"] for h in ph[1:]) / max(len(ph) - 1, 1), 4)
    # the trained checkpoint as the job evaluates it (lexray.workflows: no second APC, settings from the folder)
    trained = trained_model_config(cfg, state.model_dir).model
    row["test"] = evaluate_encoder(load_encoder(trained), cfg.data.dataset, cfg.data.split, device,
                                   max_docs=max_docs)
    if cell.get("transfer"):
        for t in cfg.eval.transfer:  # each row with its own encode.output_vocab choice, as eval.transfer does
            enc = load_encoder(trained.with_output_vocab(t.output_vocab, str(t.dataset)))
            name = t.name or Path(str(t.dataset)).name
            row[f"transfer_{name}"] = evaluate_encoder(enc, t.dataset, t.split, device, on_error=t.on_error,
                                                       max_docs=max_docs)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=Path, required=True, help="YAML/JSON list of cells")
    ap.add_argument("--config", default=str(REPO / "jobs/configs/laconic-smollm2-cpu.yaml"))
    ap.add_argument("--hardneg", default=None, help="the mined hard-negative groups (JSONL) for hard_negatives phases")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", type=Path, required=True, help="results, one JSON line per cell")
    ap.add_argument("--work", type=Path, default=REPO / "outputs/laconic-grid", help="run folders")
    ap.add_argument("--only", nargs="*", default=None, help="run only these cell names")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="override applied to every cell before its own (e.g. model.name_or_path=/path/model.gguf)")
    ap.add_argument("--max-docs", type=int, default=None, help="evaluate on the first N documents (smoke runs only)")
    args = ap.parse_args(argv)
    base, cells = _load_cells(args.cells)
    done = set()
    if args.out.is_file():
        done = {json.loads(line)["name"] for line in args.out.read_text().splitlines() if line.strip()}
    device = torch.device(args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        if cell["name"] in done or (args.only and cell["name"] not in args.only):
            continue
        t0 = time.perf_counter()
        try:
            row = run_cell(cell, args.config, args.hardneg, args.work, device, args.max_docs,
                           (*base, *args.sets))
        except Exception as e:  # one failed cell must not cost the rest of a lease
            import traceback

            traceback.print_exc()
            row = {"name": cell["name"], "set": cell.get("set"), "error": f"{type(e).__name__}: {e}"}
        row["cell_s"] = round(time.perf_counter() - t0, 1)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        t = row.get("test", {})
        print(f"[grid] {cell['name']}: nDCG@10 {t.get('nDCG@10', float('nan')):.4f} R@100 "
              f"{t.get('R@100', float('nan')):.4f} q {t.get('q_terms', 0):.0f} d {t.get('d_terms', 0):.0f} "
              f"train {row.get('train_s')} s cell {row['cell_s']} s {row.get('error', '')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
