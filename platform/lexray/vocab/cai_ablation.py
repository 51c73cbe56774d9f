"""The CAI ablation (Iida & Okazaki, arXiv:2211.03988, ../shared/papers/cai-vocabulary-idf-domain-adaptation.txt
Table 1 and Table 3) at SciFact scale: its rows, the commands of each, and the table they produce
(``lexray cai-ablation``, :mod:`lexray.commands.cai_ablation`).

A row is one ``lexray evaluate`` command (``jobs/evaluate.py``) on the steps it depends on; the steps are plain
commands too, shared between rows and run once:

* ``adapt-adalm``, ``adapt-cpt``: ``jobs/adapt_domain.py`` (recipe cai-splade-tiny-scifact) with both AdaLM steps,
  or continual pre-training only (``cai.expand.enabled=false``). Vocabulary expansion only is the AdaLM run's
  ``expanded/`` model (after Algorithm 1, before any MLM step), so it costs no run of its own.
* ``train-<model>``: ``jobs/train_splade.py`` with jobs/configs/cai-splade-tiny-finetune.yaml from the model's
  starting point: the same short SPLADE training for every model, on the same mined file of SciFact train
  queries with BM25 hard negatives (the stand-in for the paper's MS MARCO supervision); SPLADE-Doc models train
  with ``model.inference_free_queries=true``. It encodes and indexes SciFact (``<step>/eval/trained/index``).
* ``cranfield-<model>``: the trained model evaluated on Cranfield (encodes and indexes it once).

Every row then searches an existing index (``lexray evaluate --index``): rows that differ only in the query side
(``index.doc_weighting``, ``--hybrid bm25``) never re-encode the corpus (weighting is applied to the query,
docs/hybrid.md). Cranfield has no train split: its rows are the SciFact-trained models, zero-shot.

Resume: a step is done when its ``step.json`` exists, a row when ``rows/<row>/row.json`` exists; both are
skipped on re-runs (``--force`` reruns the selected rows, not their steps).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lexray import ablation
from lexray.ablation import set_args as _sets
from lexray.ablation import shell_line
from lexray.paths import REPO_ROOT

ADAPT_JOB = REPO_ROOT / "jobs" / "adapt_domain.py"
TRAIN_JOB = REPO_ROOT / "jobs" / "train_splade.py"
EVAL_JOB = REPO_ROOT / "jobs" / "evaluate.py"
ADAPT_RECIPE = REPO_ROOT / "jobs" / "configs" / "cai-splade-tiny-scifact.yaml"
FINETUNE_RECIPE = REPO_ROOT / "jobs" / "configs" / "cai-splade-tiny-finetune.yaml"
SCIFACT, CRANFIELD = "shared:datasets/scifact", "shared:datasets/cranfield"
HARDNEG = "hardneg/scifact.train.bm25.n3.jsonl"
"""The one mined training file of every model (under ``<out>``), mined before the first training step."""

# starting point of each model: (label, adapt step or None, folder of that step's output or a model id)
STARTS = {"splade": ("splade-tiny", None, "shared:models/splade-tiny"),
          "cai": ("AdaLM (CAI)", "adapt-adalm", "model"),
          "cpt": ("continual pre-training only", "adapt-cpt", "model"),
          "vocab": ("vocabulary expansion only", "adapt-adalm", "expanded")}


@dataclass(frozen=True)
class Row:
    """One table row: ``model`` is ``<start>`` or ``<start>-doc`` (SPLADE-Doc), None for BM25."""

    name: str
    label: str
    table: str  # a key of TITLES: "zs", "cranfield-zs", "t1", "t3", "cranfield"
    model: str | None
    weighting: str = "none"
    hybrid: bool = False

    @property
    def dataset(self) -> str:
        return CRANFIELD if self.table.startswith("cranfield") else SCIFACT


def _t1(table: str, prefix: str, starts=(("splade", ""), ("cai", " with CAI"))) -> list[Row]:
    rows = []
    for start, cai in starts:
        m, d = start, f"{start}-doc"
        rows += [Row(f"{prefix}{m}", f"SPLADE{cai}", table, m),
                 Row(f"{prefix}{m}-idf", f"SPLADE + IDF{cai}", table, m, "idf"),
                 Row(f"{prefix}{m}-sqrt-idf", f"SPLADE + √IDF{cai}", table, m, "sqrt_idf"),
                 Row(f"{prefix}{d}", f"SPLADE-Doc{cai}", table, d),
                 Row(f"{prefix}{d}-idf", f"SPLADE-Doc + IDF{cai}", table, d, "idf"),
                 Row(f"{prefix}{m}-hybrid", f"Hybrid-SPLADE{cai}", table, m, hybrid=True),
                 Row(f"{prefix}{d}-hybrid", f"Hybrid-SPLADE-Doc{cai}", table, d, hybrid=True)]
    return [Row(f"{prefix}bm25", "BM25", table, None), *rows]


def all_rows() -> list[Row]:
    """Every row in run order (BM25 once per collection, with the zero-shot rows): the zero-shot rows (splade-tiny without SPLADE training: one encoding per
    collection, every other row on its index) on SciFact and Cranfield, SciFact Table 1, SciFact Table 3
    (AdaLM's row is Table 1's "SPLADE with CAI", not repeated), then Cranfield's Table 1 rows."""
    t3 = [Row("cpt", "continual pre-training only", "t3", "cpt"),
          Row("vocab", "vocabulary expansion only", "t3", "vocab")]
    zs = (("zs", ", zero-shot"),)
    return [*_t1("zs", "", zs), *_t1("cranfield-zs", "cranfield-", zs), *_t1("t1", "")[1:], *t3,
            *_t1("cranfield", "cranfield-")[1:]]


class Plan:
    """The steps and rows of one output folder ``out``; ``resolve=False`` (``--dry-run``) puts placeholders where
    a path is known only once a step has run (the trained model folder)."""

    def __init__(self, out: Path, adapt_recipe: Path = ADAPT_RECIPE, finetune_recipe: Path = FINETUNE_RECIPE,
                 finetune_sets: tuple[str, ...] = (), resolve: bool = True):
        self.out, self.adapt_recipe, self.finetune_recipe = out, adapt_recipe, finetune_recipe
        self.finetune_sets, self.resolve = finetune_sets, resolve

    # ---- steps
    def steps_of(self, row: Row) -> list[str]:
        """The steps ``row`` needs, in run order."""
        if row.model is None:
            return []
        if row.model.removesuffix("-doc") == "zs":  # SPLADE-Doc zero-shot: the same documents, bow queries
            return ["cranfield-zs" if row.dataset == CRANFIELD else "encode-zs"]
        start = row.model.removesuffix("-doc")
        steps = [STARTS[start][1]] if STARTS[start][1] else []
        steps.append(f"train-{row.model}")
        if row.dataset == CRANFIELD:
            steps.append(f"cranfield-{row.model}")
        return steps

    def step_dir(self, step: str) -> Path:
        return self.out / "steps" / step

    def trained_model(self, model: str) -> str:
        """The trained checkpoint of ``train-<model>`` (read from its evaluation's resolved config); splade-tiny
        itself for the zero-shot models."""
        if model.removesuffix("-doc") == "zs":
            return STARTS["splade"][2]
        cfg = self.step_dir(f"train-{model}") / "eval" / "trained" / "config.resolved.yaml"
        if not self.resolve or not cfg.is_file():
            return f"<trained model of train-{model}>"
        import yaml

        return str(yaml.safe_load(cfg.read_text())["model"]["name_or_path"])

    def step_command(self, step: str) -> list[str]:
        kind, _, arg = step.partition("-")
        d = self.step_dir(step)
        if kind == "adapt":
            extra = ["cai.expand.enabled=false"] if arg == "cpt" else []
            return ["python", str(ADAPT_JOB), "--config", str(self.adapt_recipe), *_sets([*extra, f"out_dir={d}"])]
        doc = arg.endswith("-doc")
        if kind == "encode":  # encode-zs: splade-tiny zero-shot on SciFact
            return self._evaluate(arg, SCIFACT, d, [])
        if kind == "train":
            _, adapt, where = STARTS[arg.removesuffix("-doc")]
            start = where if adapt is None else str(self.step_dir(adapt) / where)
            sets = [f"model.name_or_path={start}", f"train.phases.0.data_path={self.out / HARDNEG}",
                    *(["model.inference_free_queries=true"] if doc else []), *self.finetune_sets, f"out_dir={d}"]
            return ["python", str(TRAIN_JOB), "--config", str(self.finetune_recipe), "--no-zero-shot", *_sets(sets)]
        # cranfield-<model>: encode and index Cranfield with the trained model
        return self._evaluate(arg, CRANFIELD, d, [])

    def _evaluate(self, model: str, dataset: str, out: Path, extra: list[str]) -> list[str]:
        sets = [f"model.name_or_path={self.trained_model(model)}",
                *(["model.inference_free_queries=true"] if model.endswith("-doc") else []),
                *(["data.on_error=skip"] if dataset == CRANFIELD else []), *extra]
        return ["python", str(EVAL_JOB), "--config", str(self.finetune_recipe), "--dataset", dataset,
                "--out", str(out), *_sets(sets)]

    # ---- rows
    def row_dir(self, row: Row) -> Path:
        return self.out / "rows" / row.name

    def row_command(self, row: Row) -> list[str]:
        """The row's one ``lexray evaluate`` command, on the index its model's step built."""
        d = self.row_dir(row)
        if row.model is None:
            return ["python", str(EVAL_JOB), "--retriever", "bm25", "--dataset", row.dataset, "--out", str(d),
                    *_sets(["data.on_error=skip"] if row.dataset == CRANFIELD else [])]
        base = self.step_dir(self.steps_of(row)[-1])  # the step that built the index this row searches
        if base.name.startswith("train-"):
            base = base / "eval" / "trained"
        cmd = self._evaluate(row.model, row.dataset, d, [f"index.doc_weighting={row.weighting}"])
        return cmd + ["--index", str(base / "index"), *(["--hybrid", "bm25"] if row.hybrid else [])]


def ensure_hard_negatives(plan: Plan, log=print) -> Path:
    """Mine the one training file (SciFact train queries, 3 BM25 negatives each) if it is missing."""
    from lexray.config import load_config
    from lexray.workflows import prepare_hard_negatives

    path = plan.out / HARDNEG
    if not path.is_file():
        log(f"[cai-ablation] mining BM25 hard negatives -> {path}")
        cfg = load_config(plan.finetune_recipe, list(plan.finetune_sets))
        mined = prepare_hard_negatives(cfg, plan.out)
        assert Path(mined.train.phases[0].data_path) == path, mined.train.phases[0].data_path
    return path


def run_step(plan: Plan, step: str, log=print) -> dict:
    """Run a shared step (adapt, train, encode) once through the one table runner: ``<step>/step.json``."""
    cmd = plan.step_command(step)
    before = (lambda: ensure_hard_negatives(plan, log)) if step.startswith("train-") else None
    return ablation.run_row(step, plan.step_dir(step), [cmd],
                            lambda s: {"step": step, "seconds": s[0], "command": shell_line(cmd)},
                            log=log, tag="cai-ablation", before=before, record="step.json")


def run_row(row: Row, plan: Plan, force: bool = False, log=print) -> dict:
    """Run the row's missing steps, then its evaluation; write and return ``row.json``."""
    d = plan.row_dir(row)
    steps: list[dict] = []
    cmd: list[str] = []

    def run_steps() -> None:
        steps.extend(run_step(plan, s, log) for s in plan.steps_of(row))
        cmd.extend(plan.row_command(row))  # the trained model's folder is known once its step ran

    return ablation.run_row(row.name, d, lambda: [cmd], lambda s: collect(row, d, s[0], cmd, steps),
                            force=force, log=log, tag="cai-ablation", before=run_steps)


def finished_rows(plan: Plan) -> list[dict]:
    """The records of every row of :func:`all_rows` with a ``row.json`` under ``plan.out``, in table order."""
    files = (plan.row_dir(r) / "row.json" for r in all_rows())
    return [json.loads(f.read_text()) for f in files if f.is_file()]


def collect(row: Row, d: Path, seconds: float, cmd: list[str], steps: list[dict]) -> dict:
    """The row's scores and efficiency from its ``metrics.json`` (a hybrid row: the fused exact row)."""
    e = json.loads((d / "metrics.json").read_text())
    eff = e.get("efficiency", {})
    return {"row": row.name, "label": row.label, "table": row.table, "retriever": e["retriever"],
            "metrics": e["metrics"], "avg_query_terms": eff.get("avg_query_nnz"),
            "avg_doc_terms": eff.get("index_avg_nnz_per_doc"), "flops": eff.get("index_flops"),
            "row_s": seconds, "steps": [s["step"] for s in steps], "command": shell_line(cmd)}


TITLES = {"zs": "SciFact test (300 queries), splade-tiny zero-shot (no SPLADE training; BM25 and every row on one "
                "index)",
          "cranfield-zs": "Cranfield (225 queries), splade-tiny zero-shot",
          "t1": "SciFact test (300 queries), Table 1 rows",
          "t3": "SciFact test, Table 3 ablation (SPLADE, no IDF, no hybrid; AdaLM = Table 1's \"SPLADE with CAI\")",
          "cranfield": "Cranfield (225 queries), the SciFact-trained models zero-shot"}


def markdown(results: list[dict]) -> str:
    """One table per part: nDCG@10, R@100, average query / document terms, FLOPS."""
    def num(v, f):
        return "–" if v is None else format(v, f)

    out = []
    for table, title in TITLES.items():
        rs = [r for r in results if r["table"] == table]
        if not rs:
            continue
        out += [f"**{title}**", "", "| row | nDCG@10 | R@100 | avg query terms | avg doc terms | FLOPS |",
                "|---|---:|---:|---:|---:|---:|"]
        for r in rs:
            m = r["metrics"]
            out.append(f"| {r['label']} | {m['nDCG@10']:.4f} | {m['R@100']:.4f} | {num(r['avg_query_terms'], '.1f')} "
                       f"| {num(r['avg_doc_terms'], '.1f')} | {num(r['flops'], '.2f')} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
