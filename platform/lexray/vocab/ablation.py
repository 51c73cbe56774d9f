"""The VT initialization ablation (Vocabulary Transfer, arXiv:2607.00004, ../shared/papers/vocabulary-transfer-vt.txt
§6.2.1, Table 3) at small scale: its rows, the two commands of each row, and the table they produce
(``lexray vt-ablation``, :mod:`lexray.commands.vt_ablation`).

Every row is a migration (``jobs/migrate_vocab.py`` with the migration recipe plus the row's ``--set``s), then the
same short SPLADE training and evaluation (``jobs/train_splade.py`` with the finetune recipe and
``model.name_or_path`` pointing at the migrated model). The native-vocabulary row skips the migration and trains
the migration recipe's *source* model, with the same APC setting the migrated rows get (so the rows differ in
the vocabulary and its initialization, not in calibration), except that APC runs when the encoder is built
(``model.apc``) instead of being saved into a migrated model.

Rows (Table 3's structure): native; Semantic-Init (VT), Rand-New, Mean-Init and SubToken-Init, each "Direct" (no
MLM adaptation) and "Adapted" (with it); VT without APC (Semantic-Init, Adapted, ``vt.apc`` off). The paper's
Rand-All baseline is available (``vt.init=rand_all``) but not a Table 3 row of the issue.

Each row writes ``<out>/<row>/row.json`` (scores, efficiency, wall time of each command, the commands); a row
whose ``row.json`` exists is skipped on re-runs, so an interrupted table resumes at the first missing row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lexray import ablation
from lexray.ablation import set_args as _sets
from lexray.ablation import shell_line
from lexray.paths import REPO_ROOT

__all__ = ["Row", "table3_rows", "native_overrides", "row_commands", "shell_line", "collect", "run_row", "markdown"]

MIGRATE_JOB = REPO_ROOT / "jobs" / "migrate_vocab.py"
TRAIN_JOB = REPO_ROOT / "jobs" / "train_splade.py"
MIGRATE_RECIPE = REPO_ROOT / "jobs" / "configs" / "vt-smollm2-scifact.yaml"
FINETUNE_RECIPE = REPO_ROOT / "jobs" / "configs" / "vt-smollm2-scifact-finetune.yaml"


@dataclass(frozen=True)
class Row:
    """One row of the table: ``migrate`` is None for the native-vocabulary row, else the migration's ``--set``s."""

    name: str
    label: str
    migrate: tuple[str, ...] | None
    finetune: tuple[str, ...] = field(default_factory=tuple)


def table3_rows(native_sets: tuple[str, ...]) -> list[Row]:
    """The rows in table order. ``native_sets`` are the finetune ``--set``s that make the native row train the
    migration's source model (:func:`native_overrides`)."""
    rows = [Row("native", "native-vocabulary source", None, native_sets)]
    for init, label in (("semantic", "VT Semantic-Init"), ("rand_new", "Rand-New"), ("mean", "Mean-Init"),
                        ("subtoken", "SubToken-Init")):
        for adapted in (False, True):
            rows.append(Row(f"{init}-{'adapted' if adapted else 'direct'}",
                            f"{label}, {'Adapted' if adapted else 'Direct'}",
                            (f"vt.init={init}", f"vt.adapt.enabled={str(adapted).lower()}")))
    rows.append(Row("semantic-adapted-no-apc", "VT Semantic-Init, Adapted, without APC",
                    ("vt.init=semantic", "vt.adapt.enabled=true", "vt.apc.target_rate=null", "vt.apc.shift=null")))
    return rows


def native_overrides(migrate_recipe: Path, migrate_sets: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Finetune ``--set``s for the native row, read from the migration recipe: its source model and layer count,
    and its APC (``vt.apc`` → ``model.apc``), so the native row is calibrated like the migrated rows."""
    from lexray.config import load_config

    cfg = load_config(migrate_recipe, list(migrate_sets))
    sets = [f"model.name_or_path={cfg.model.name_or_path}"]
    if cfg.model.num_layers is not None:
        sets.append(f"model.num_layers={cfg.model.num_layers}")
    apc = cfg.vt.apc
    if apc.target_rate is not None:
        sets.append(f"model.apc.target_rate={apc.target_rate}")
    elif apc.shift is not None:
        sets.append(f"model.apc.shift={apc.shift}")
    if apc.enabled:
        sets += [f"model.apc.per_term={str(apc.per_term).lower()}", f"model.apc.probe_docs={apc.probe_docs}",
                 f"model.apc.probe_dataset={apc.probe_dataset}"]
        if apc.probe_max_length is not None:
            sets.append(f"model.apc.probe_max_length={apc.probe_max_length}")
    return tuple(sets)


def row_commands(row: Row, out: Path, migrate_recipe: Path = MIGRATE_RECIPE,
                 finetune_recipe: Path = FINETUNE_RECIPE, migrate_sets: tuple[str, ...] = (),
                 finetune_sets: tuple[str, ...] = ()) -> list[list[str]]:
    """The row's commands (argv lists, ``python`` first): [migrate,] train-and-evaluate. Outputs go to
    ``out/<row>/`` (the migration) and ``out/<row>/ft`` (training, index, ``metrics.json``)."""
    d = out / row.name
    cmds = []
    model = None
    if row.migrate is not None:
        cmds.append(["python", str(MIGRATE_JOB), "--config", str(migrate_recipe),
                     *_sets([*migrate_sets, *row.migrate, f"out_dir={d}"])])
        model = f"model.name_or_path={d / 'model'}"
    cmds.append(["python", str(TRAIN_JOB), "--config", str(finetune_recipe), "--no-zero-shot",
                 *_sets([*([model] if model else []), *row.finetune, *finetune_sets, f"out_dir={d / 'ft'}"])])
    return cmds


def collect(row: Row, out: Path, seconds: list[float], cmds: list[list[str]]) -> dict:
    """Read the row's ``ft/metrics.json`` (the trained model: the file's object, or its list's last entry) and
    ``vt_report.json``."""
    d = out / row.name
    e = ablation.metrics_entries(d / "ft" / "metrics.json")[-1]
    eff = e["efficiency"]
    res = {"row": row.name, "label": row.label, "metrics": e["metrics"],
           "avg_query_terms": eff.get("avg_query_nnz"), "avg_doc_terms": eff.get("index_avg_nnz_per_doc"),
           "flops": eff.get("index_flops"), "wall_s": sum(seconds), "command_s": seconds,
           "commands": [shell_line(c) for c in cmds]}
    rep = d / "vt_report.json"
    if rep.is_file():
        r = json.loads(rep.read_text())
        res["vt"] = {"overlap_fraction": r["alignment"]["overlap_fraction"], "init": r["init"]["method"],
                     "apc": r.get("apc"), "timings_s": r.get("timings_s")}
    return res


def run_row(row: Row, out: Path, force: bool = False, log=print, **kw) -> dict:
    """Run the row's commands through the one table runner (:func:`lexray.ablation.run_row`), write and return
    ``row.json``. Raises subprocess.CalledProcessError naming the failed command; its output is in
    ``out/<row>/<i>.log``."""
    cmds = row_commands(row, out, **kw)
    return ablation.run_row(row.name, out / row.name, cmds, lambda seconds: collect(row, out, seconds, cmds),
                            force=force, log=log, tag="vt-ablation")


def markdown(results: list[dict]) -> str:
    """Table 3 at small scale: nDCG@10, R@100, average query / document terms, FLOPS, wall time."""
    lines = ["| row | nDCG@10 | R@100 | avg query terms | avg doc terms | FLOPS | wall time |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        m = r["metrics"]
        lines.append(f"| {r['label']} | {m['nDCG@10']:.4f} | {m['R@100']:.4f} | {r['avg_query_terms']:.1f} | "
                     f"{r['avg_doc_terms']:.1f} | {r['flops']:.2f} | {r['wall_s'] / 60:.1f} min |")
    total = sum(r["wall_s"] for r in results)
    lines.append(f"\n{len(results)} rows, {total / 60:.1f} min of row wall time in all.")
    return "\n".join(lines)
