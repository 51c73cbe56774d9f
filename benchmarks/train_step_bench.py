"""Ray Train step time vs a plain PyTorch loop on the same model and the same batches (steady state).

Both sides train the same encoder (default: the real splade-tiny BertForMaskedLM, |V| = 30,522) on the same
SciFact (title, abstract) pairs with the same objective (InfoNCE with in-batch negatives + FLOPS), AdamW, cosine LR,
clipping, tokenizing every step:

* baseline — a textbook loop: tokenize, forward queries and documents, loss, backward, clip, optimizer and
  scheduler step;
* lexray — ``run_training`` on a Ray Train ``TorchTrainer`` with one worker holding the same CPUs (ddp strategy),
  ``log_every: 1`` (the most frequent logging).

Design (issue 28 item 7: the answer must not depend on when the VM happens to be fast or slow):

* Every measurement ("bracket") runs in its own fresh Python process, so no bracket shares the CPU with an
  earlier one's Ray (``run_training`` leaves a local Ray running in its process: raylet, GCS, dashboard, idle
  workers, about 7 % of one core here; the plain loop after it read 10-22 % slower in the first version of this
  bench) and allocator state and thread pools start fresh. After each bracket the bench waits until no Ray process
  that it started is left (they carry an environment tag; ``ray_processes_left_after_brackets`` lists any).
* Order: ``--warmup-brackets`` untimed plain brackets (the first process after other work loads cold: it read
  1.25x slower once), then plain, Ray, plain, Ray, ..., plain: ``--brackets`` Ray brackets, each between two plain
  ones. Brackets are short (``--steps`` 15, the first ``--warmup`` 5 excluded), so that neighbours are close
  in time.
* Paired ratios: each Ray bracket's mean step against the plain baseline *at its time*, interpolated linearly
  between its two neighbouring plain brackets at the midpoints of their timed windows. A VM whose speed drifts
  linearly over the ~1 minute of a triple cancels exactly; a slower or faster stretch touches one or two pairs.
* The reported figure, ``ratio``, is the median of the paired ratios (robust to one disturbed pair);
  ``ratio_spread`` is max / min of the paired ratios. Goal: ``ratio`` <= 1.10.
* Baseline agreement: for each pair, after / before = the plain bracket after the Ray bracket over the one
  before it. ``baseline_agreement`` is the median over pairs of max(before, after) / min(before, after) (how far
  apart the two baselines of a Ray bracket typically are; goal <= 1.05); ``baseline_after_over_before_median``
  keeps the sign (> 1: the plain loop runs slower after a Ray run than before it, the issue's symptom);
  ``baseline_halves`` is the median plain bracket of the second half over the first (slow drift across the run);
  ``baseline_spread`` is max / min over all plain brackets (what the previous version reported).
* ``meets_goal`` is both: ``ratio`` <= 1.10 and ``baseline_agreement`` <= 1.05. The JSON records every bracket
  (its steady-state step times, timed window and the load average after it), every pair and these summaries.

Steady state: lexray's step time is the wall-clock time between logged steps (so it includes the logging and any
report barrier), the baseline's the loop-iteration time. The bench refuses to start while another Ray runs on the
machine (``--allow-other-ray`` runs anyway, for smoke runs on a shared machine: not a measurement).

    .venv/bin/python benchmarks/train_step_bench.py --out outputs/benchmarks/train_step.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RAY_PROCESS_NAMES = ("raylet", "gcs_server", "dashboard", "runtime_env", "ray::", "default_worker")


def make_cfg(args, workers: int = 1):
    from lexray.config import LexrayConfig

    return LexrayConfig.model_validate({
        "name": "bench-train-step",
        "model": {"name_or_path": args.model},
        "data": {"dataset": "shared:datasets/scifact"},
        "train": {"strategy": "ddp", "num_workers": workers, "cpus_per_worker": args.cpus, "log_every": 1,
                  "checkpoint_every": 10**9, "collapse_max_fraction": 1.0, "tensorboard": False,
                  "phases": [{"name": "bench", "data": "title_abstract_pairs", "max_steps": args.steps,
                              "global_batch_size": args.batch, "num_negatives": 0, "lr": 2e-5,
                              "query_max_length": args.qlen, "doc_max_length": args.dlen,
                              "max_train_examples": args.batch * args.steps,
                              "flops": {"lambda_q": 1e-4, "lambda_d": 1e-4}}]}})


def plain_loop(args) -> tuple[list[float], list[float]]:
    """The baseline: same encoder, data order, objective and optimizer, no Ray, no strategy wrapper. Returns each
    step's duration (s) and its end on the wall clock (``time.time()``, as lexray's ``wall_time``)."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from lexray.data.collate import StepSampler
    from lexray.losses import flops_loss, infonce_loss
    from lexray.models import load_encoder
    from lexray.train import curriculum

    cfg = make_cfg(args)
    phase = cfg.train.phases[0]
    torch.manual_seed(cfg.train.seed)
    enc = load_encoder(cfg.model)
    data = curriculum.build_dataset(cfg, phase, cfg.train.seed)
    sampler = StepSampler(len(data), phase.global_batch_size, 1, 1, seed=cfg.train.seed)
    opt = torch.optim.AdamW([p for p in enc.parameters() if p.requires_grad], lr=phase.lr,
                            weight_decay=phase.weight_decay)
    sched = get_cosine_schedule_with_warmup(opt, 1, args.steps)
    enc.train()
    times, walls = [], []
    for step in range(args.steps):
        t0 = time.perf_counter()
        epoch, s = sampler.position(step)
        ex = [data.example(int(i), epoch) for i in sampler.micro_batches(epoch, s, 0)[0]]
        q = enc.tokenize([e.query for e in ex], "query", phase.query_max_length)
        d = enc.tokenize([e.docs[0] for e in ex], "document", phase.doc_max_length)
        qr, dr = enc(**q, kind="query"), enc(**d, kind="document")
        loss = infonce_loss(qr, dr) + 1e-4 * flops_loss(qr) + 1e-4 * flops_loss(dr)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(enc.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        walls.append(time.time())
    return times, walls


def ray_loop(args) -> tuple[list[float], list[float]]:
    """lexray on Ray Train; returns each logged step's wall-clock end and its in-worker step time (s)."""
    from lexray.train.loop import run_training

    with tempfile.TemporaryDirectory() as tmp:
        res = run_training(make_cfg(args), storage_path=tmp)
    hist = [m for m in res.history if "wall_time" in m]
    return [m["wall_time"] for m in hist], [m["step_time_s"] for m in hist]


TAG_ENV = "LEXRAY_TRAIN_STEP_BENCH"


def ray_processes(tag: str | None = None) -> list[str]:
    """Command lines of live Ray processes on this machine (raylet, GCS, agents, workers): with ``tag``, only the
    ones whose environment carries this run's tag (the processes this bench's brackets started)."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            line = " ".join(p.info["cmdline"] or [p.info["name"] or ""])
            if not any(n in line for n in RAY_PROCESS_NAMES) or "train_step_bench" in line:
                continue
            if tag is not None and p.environ().get(TAG_ENV) != tag:
                continue
        except psutil.Error:
            continue
        found.append(line[:120])
    return found


def wait_no_ray(tag: str, timeout_s: float = 60.0) -> list[str]:
    """Wait until no Ray process of this run is left (a bracket must not share the CPU with the last one's Ray)."""
    t0 = time.monotonic()
    while (left := ray_processes(tag)) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.5)
    return left


def run_bracket(kind: str, argv: list[str], tag: str) -> dict:
    """One measurement in a fresh interpreter: ``plain`` or ``ray``; returns its steady-state step times (s) and
    the wall-clock start and end of its timed window."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
        t0 = time.time()
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--bracket", kind, "--bracket-out", f.name,
                        *argv], check=True, env={**os.environ, TAG_ENV: tag})
        rec = json.loads(Path(f.name).read_text())
    return {"kind": kind, **rec, "process_s": time.time() - t0}


def bracket_main(args) -> None:
    """Inside a bracket's process: run one side, keep the steps after ``--warmup``, write them as JSON."""
    worker = None
    if args.bracket == "plain":
        times, walls = plain_loop(args)
    else:
        import ray

        walls, worker = ray_loop(args)
        ray.shutdown()
        times = [b - a for a, b in zip(walls, walls[1:], strict=False)]  # step k's time = wall[k] - wall[k-1]
        times = [float("nan"), *times]
    w = args.warmup
    if len(walls) <= w:
        raise SystemExit(f"{len(walls)} logged steps: --steps must exceed --warmup ({w})")
    rec = {"step_s": times[w:], "t_start": walls[w - 1], "t_end": walls[-1]}
    if worker is not None:  # the step as the worker times it (without logging between steps), for reference
        rec["worker_step_s"] = worker[w:]
    Path(args.bracket_out).write_text(json.dumps(rec))


def _mid(b: dict) -> float:
    return (b["t_start"] + b["t_end"]) / 2


def summarise(brackets: list[dict], goal_ratio: float = 1.10, goal_agreement: float = 1.05) -> dict:
    """The bench's figures from its timed brackets (plain, ray, plain, ..., plain; see the module docstring).

    Each Ray bracket is paired with its two neighbouring plain brackets: its baseline is their mean step
    interpolated linearly to the Ray bracket's time (the midpoints of the timed windows), so linear drift of the
    machine's speed cancels. Returns the pairs, the median paired ratio (``ratio``), its spread, the baselines'
    agreement and pass/fail against ``goal_ratio`` and ``goal_agreement``.
    """
    kinds = [b["kind"] for b in brackets]
    if len(brackets) < 3 or len(brackets) % 2 == 0 or any(k != ("plain" if i % 2 == 0 else "ray")
                                                           for i, k in enumerate(kinds)):
        raise ValueError(f"brackets must alternate plain, ray, ..., plain; got {kinds}")
    means = [statistics.mean(b["step_s"]) for b in brackets]
    pairs = []
    for i in range(1, len(brackets), 2):
        before, ray, after = brackets[i - 1], brackets[i], brackets[i + 1]
        pb, pr, pa = means[i - 1], means[i], means[i + 1]
        span = _mid(after) - _mid(before)
        w = (_mid(ray) - _mid(before)) / span if span > 0 else 0.5
        baseline = pb + (pa - pb) * w
        pairs.append({"ray_bracket": i, "plain_before_s": pb, "ray_s": pr, "plain_after_s": pa,
                      "interpolation_weight": w, "baseline_s": baseline, "ratio": pr / baseline,
                      "ratio_vs_neighbour_mean": pr / ((pb + pa) / 2), "after_over_before": pa / pb})
    ratios = [p["ratio"] for p in pairs]
    plain = means[0::2]
    half = len(plain) // 2
    ratio = statistics.median(ratios)
    agreement = statistics.median(max(p["plain_before_s"], p["plain_after_s"]) /
                                  min(p["plain_before_s"], p["plain_after_s"]) for p in pairs)
    return {
        "pairs": pairs, "paired_ratios": ratios, "ratio": ratio, "ratio_spread": max(ratios) / min(ratios),
        "ratio_min": min(ratios), "ratio_max": max(ratios),
        "ratio_mean_of_means": statistics.mean(means[1::2]) / statistics.mean(plain),
        "baseline_agreement": agreement,
        "baseline_after_over_before_median": statistics.median(p["after_over_before"] for p in pairs),
        "baseline_halves": (statistics.median(plain[-half:]) / statistics.median(plain[:half])) if half else 1.0,
        "baseline_spread": max(plain) / min(plain),
        "plain_bracket_means_s": plain, "ray_bracket_means_s": means[1::2],
        "goal_ratio": goal_ratio, "goal_baseline_agreement": goal_agreement,
        "meets_ratio_goal": ratio <= goal_ratio, "meets_baseline_goal": agreement <= goal_agreement,
        "meets_goal": ratio <= goal_ratio and agreement <= goal_agreement,
    }


def main() -> None:
    from lexray.paths import shared_path

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(shared_path("models", "splade-tiny")))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--qlen", type=int, default=32)
    ap.add_argument("--dlen", type=int, default=128)
    ap.add_argument("--steps", type=int, default=15, help="steps per bracket")
    ap.add_argument("--warmup", type=int, default=5, help="first steps of each bracket excluded")
    ap.add_argument("--cpus", type=float, default=2.0)
    ap.add_argument("--brackets", type=int, default=5, help="Ray brackets (pairs); plain brackets = brackets + 1, "
                    "interleaved")
    ap.add_argument("--warmup-brackets", type=int, default=1,
                    help="untimed plain brackets first (the first process after other work loads cold)")
    ap.add_argument("--allow-other-ray", action="store_true",
                    help="run although other Ray processes are live (a smoke run on a shared machine: the numbers "
                    "are not a measurement)")
    ap.add_argument("--out", type=Path, default=Path("outputs/benchmarks/train_step.json"))
    ap.add_argument("--bracket", choices=["plain", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--bracket-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.bracket:
        bracket_main(args)
        return
    if args.brackets < 1 or args.warmup < 1 or args.steps <= args.warmup + 1:
        raise SystemExit("--brackets and --warmup must be >= 1, and --steps > --warmup + 1")
    argv = ["--model", args.model, "--batch", str(args.batch), "--qlen", str(args.qlen), "--dlen", str(args.dlen),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--cpus", str(args.cpus)]
    other = ray_processes()
    if other and not args.allow_other_ray:
        raise SystemExit(f"Ray processes are running on this machine; the bench needs them gone (or "
                         f"--allow-other-ray for a smoke run): {other[:3]}")
    tag = f"{os.getpid()}-{time.time_ns()}"
    t_run = time.monotonic()
    load_start = os.getloadavg()[0]
    for i in range(args.warmup_brackets):
        b = run_bracket("plain", argv, tag)
        print(f"warm-up bracket {i + 1}/{args.warmup_brackets} (untimed): {statistics.mean(b['step_s']):.3f} s/step",
              flush=True)
    brackets, leftovers = [], []
    n = 2 * args.brackets + 1
    for i in range(n):
        b = run_bracket("plain" if i % 2 == 0 else "ray", argv, tag)
        leftovers += wait_no_ray(tag)
        b["load_average_1m_after"] = os.getloadavg()[0]
        brackets.append(b)
        print(f"bracket {i + 1}/{n} {b['kind']}: {statistics.mean(b['step_s']):.3f} s/step", flush=True)
    summary = summarise(brackets)
    out = {"benchmark": "train_step", "model": args.model, "global_batch": args.batch, "query_len": args.qlen,
           "doc_len": args.dlen, "steps": args.steps, "warmup_steps_excluded": args.warmup,
           "brackets": args.brackets, "warmup_brackets": args.warmup_brackets,
           "machine": f"{platform.machine()} {os.cpu_count()} cpus",
           "other_ray_processes_at_start": len(other), "load_average_1m_at_start": load_start,
           "load_average_1m_at_end": os.getloadavg()[0], "wall_s": time.monotonic() - t_run,
           **summary, "ray_processes_left_after_brackets": leftovers, "bracket_records": brackets}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in ("bracket_records", "pairs")}, indent=2))
    for p in summary["pairs"]:
        print(f"pair at bracket {p['ray_bracket'] + 1}: plain {p['plain_before_s']:.3f} / ray {p['ray_s']:.3f} / "
              f"plain {p['plain_after_s']:.3f} s -> ratio {p['ratio']:.3f}")
    print(f"ratio (median of {len(summary['paired_ratios'])} paired ratios) {summary['ratio']:.3f} "
          f"(goal <= {summary['goal_ratio']}); baseline agreement {summary['baseline_agreement']:.3f} "
          f"(goal <= {summary['goal_baseline_agreement']}): {'PASS' if summary['meets_goal'] else 'FAIL'}")

if __name__ == "__main__":
    main()
