"""Outputs of a search: trials table, Pareto front (nDCG@10 against FLOPS), catalogue of recipes, test evaluation.

Pareto front: among *finished* trials (ASHA-stopped ones trained less and have no saved model), those that no
other finished trial beats on both dev nDCG@10 (higher) and dev FLOPS (lower). Catalogue: for each FLOPS budget
(``tune.flops_budgets``, default one per Pareto point, at its FLOPS) the finished trial with the best dev
nDCG@10 whose dev FLOPS fit the budget, written as a full recipe (the base recipe plus the trial's values) that
``jobs/train_splade.py --config catalogue/<name>.yaml`` (or the recipe's own job) runs as it is. The test split
(``data.split``) is read once, here, for the first ``tune.test_entries`` catalogue entries by dev nDCG@10,
evaluating the model each trial already trained (no retraining).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from lexray.config import LexrayConfig
from lexray.tune.space import SearchSpace, trial_config

NDCG, FLOPS = "dev_nDCG@10", "dev_flops"


def pareto_front(rows: list[dict]) -> list[dict]:
    """Non-dominated finished rows (max nDCG, min FLOPS), sorted by FLOPS ascending."""
    pts = [r for r in rows if r.get("status") == "finished" and r.get(NDCG) is not None and r.get(FLOPS) is not None]
    front = [r for r in pts if not any(
        (o[NDCG] >= r[NDCG] and o[FLOPS] <= r[FLOPS]) and (o[NDCG] > r[NDCG] or o[FLOPS] < r[FLOPS]) for o in pts)]
    return sorted(front, key=lambda r: (r[FLOPS], -r[NDCG]))


def _budget_name(b: float) -> str:
    return f"flops-le-{b:.3g}".replace("+", "")


def catalogue_entries(rows: list[dict], budgets: list[float] | None) -> list[dict]:
    """``[{"budget", "name", "row"}]``: per budget the best finished row within it (budgets no row fits are left
    out); one entry per Pareto point when ``budgets`` is None."""
    done = [r for r in rows if r.get("status") == "finished" and r.get(NDCG) is not None and r.get(FLOPS) is not None]
    if budgets is None:
        budgets = [r[FLOPS] for r in pareto_front(rows)]
    out = []
    for b in sorted(set(budgets)):
        fit = [r for r in done if r[FLOPS] <= b * (1 + 1e-9)]
        if fit:
            best = max(fit, key=lambda r: (r[NDCG], -r[FLOPS]))
            out.append({"budget": float(b), "name": _budget_name(b), "row": best})
    return out


def _recipe(cfg: LexrayConfig, space: SearchSpace, row: dict, name: str) -> LexrayConfig:
    params = {k[len("param:"):]: v for k, v in row.items() if k.startswith("param:")}
    tcfg = trial_config(cfg, params, source=f"trial {row['trial_id']}")
    # portable: the recipe's job mines its own negatives and writes to its own output folder
    phases = [p.model_copy(update={"data_path": None}) if p.data == "hard_negatives" else p
              for p in tcfg.train.phases]
    return tcfg.model_copy(update={"name": f"{cfg.name}-{name}", "out_dir": None,
                                   "train": tcfg.train.model_copy(update={"phases": phases})})


def write_outputs(rows: list[dict], space: SearchSpace, cfg: LexrayConfig, out: Path, evaluate_test: bool = True
                  ) -> tuple[list[dict], list[dict]]:
    """Write trials.csv/.parquet, pareto.json/.png, catalogue/ and (optionally) the test evaluation."""
    import pandas as pd

    df = pd.DataFrame(rows)
    df.to_csv(out / "trials.csv", index=False)
    df.astype({c: "string" for c in df.columns if df[c].dtype == object}).to_parquet(out / "trials.parquet",
                                                                                    index=False)
    front = pareto_front(rows)
    entries = catalogue_entries(rows, cfg.tune.flops_budgets)
    tests: dict[str, dict] = {}
    if evaluate_test and cfg.tune.test_entries:
        tests = _evaluate_test(cfg, space, entries, out)
    cat_dir = out / "catalogue"
    cat_dir.mkdir(exist_ok=True)
    catalogue = []
    for e in entries:
        row = e["row"]
        recipe = _recipe(cfg, space, row, e["name"])
        test = tests.get(row["trial_id"])
        head = [f"# lexray tune catalogue: best dev nDCG@10 within dev FLOPS <= {e['budget']:.4g}",
                f"# space {space.path}, trial {row['trial_id']}: dev nDCG@10 {row[NDCG]:.4f}, "
                f"dev FLOPS {row[FLOPS]:.3f}"]
        if test:
            head.append(f"# {cfg.data.split} nDCG@10 {test['nDCG@10']:.4f}, index FLOPS {test['flops']:.3f} "
                        f"(evaluated once, at the end of the search)")
        head.append(f"# run: python jobs/train_splade.py --config {cat_dir.name}/{e['name']}.yaml")
        path = cat_dir / f"{e['name']}.yaml"
        path.write_text("\n".join(head) + "\n" + yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False))
        catalogue.append({"name": e["name"], "budget": e["budget"], "recipe": str(path), "trial_id": row["trial_id"],
                          "params": {k[6:]: v for k, v in row.items() if k.startswith("param:")},
                          NDCG: row[NDCG], FLOPS: row[FLOPS], "model_dir": row.get("model_dir"),
                          "test": test})
    (cat_dir / "index.json").write_text(json.dumps(catalogue, indent=1, default=str) + "\n")
    pareto = [{"trial_id": r["trial_id"], NDCG: r[NDCG], FLOPS: r[FLOPS],
               "params": {k[6:]: v for k, v in r.items() if k.startswith("param:")},
               "test": tests.get(r["trial_id"])} for r in front]
    (out / "pareto.json").write_text(json.dumps({"x": FLOPS, "y": NDCG, "front": pareto}, indent=1,
                                                default=str) + "\n")
    plot_pareto(rows, front, out / "pareto.png", title=f"{space.name}: dev nDCG@10 vs dev FLOPS")
    return pareto, catalogue


def _evaluate_test(cfg: LexrayConfig, space: SearchSpace, entries: list[dict], out: Path) -> dict[str, dict]:
    from lexray.eval.pipeline import evaluate_sparse
    from lexray.workflows import trained_model_config

    chosen: list[dict] = []
    for e in sorted(entries, key=lambda e: -e["row"][NDCG]):
        if e["row"]["trial_id"] not in {c["trial_id"] for c in chosen} and e["row"].get("model_dir"):
            chosen.append(e["row"])
        if len(chosen) >= cfg.tune.test_entries:
            break
    results = {}
    for row in chosen:
        fusion = {k: row.get(f"param:{k}") for k in space.params if k.startswith("hybrid.")}
        ecfg = trained_model_config(trial_config(cfg, fusion), Path(row["model_dir"]))
        rec = evaluate_sparse(ecfg, out / "test" / row["trial_id"], retriever_name=f"{space.name} {row['trial_id']}",
                              hybrid=space.hybrid)
        run_dir = Path(row["model_dir"]).parents[1]  # <trial>/train/lexray/models/<phase> -> <trial>/train/lexray
        if (run_dir / "tensorboard").is_dir():  # beside the trial's training and dev scalars
            from lexray.train.metrics import write_eval_scalars

            write_eval_scalars(run_dir, rec, "eval-test")
        results[row["trial_id"]] = {**rec["metrics"], "flops": rec["efficiency"].get("index_flops"),
                                    "avg_query_nnz": rec["efficiency"].get("avg_query_nnz"),
                                    "index_avg_nnz_per_doc": rec["efficiency"].get("index_avg_nnz_per_doc"),
                                    "split": cfg.data.split}
        print(f"[lexray.tune] {cfg.data.split} of trial {row['trial_id']}: nDCG@10 {rec['metrics']['nDCG@10']:.4f}, "
              f"index FLOPS {results[row['trial_id']]['flops']:.3f}", flush=True)
    return results


def plot_pareto(rows: list[dict], front: list[dict], path: Path, title: str = "") -> None:
    """Scatter of every trial with dev metrics (finished / stopped), the front as a step line (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=110)
    styles = {"finished": ("o", "tab:blue"), "stopped": ("x", "tab:gray")}
    for status, (marker, color) in styles.items():
        pts = [r for r in rows if r.get("status") == status and r.get(NDCG) is not None and r.get(FLOPS) is not None]
        if pts:
            ax.scatter([r[FLOPS] for r in pts], [r[NDCG] for r in pts], marker=marker, color=color,
                       label=f"{status} ({len(pts)})")
    if front:
        ax.step([r[FLOPS] for r in front], [r[NDCG] for r in front], where="post", color="tab:red", label="Pareto front")
        for r in front:
            ax.annotate(r["trial_id"][-5:], (r[FLOPS], r[NDCG]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if any(r.get(FLOPS, 0) and r[FLOPS] > 0 for r in rows if r.get(FLOPS) is not None):
        ax.set_xscale("log")
    ax.set_xlabel("dev FLOPS  Σ_t (df_t/N)²  (lower = faster)")
    ax.set_ylabel("dev nDCG@10")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
