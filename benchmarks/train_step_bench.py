"""Ray Train step time vs a plain PyTorch loop on the same model and the same batches (steady state).

Both sides train the same encoder (default: the real splade-tiny BertForMaskedLM, |V| = 30,522) on the same
SciFact (title, abstract) pairs with the same objective (InfoNCE with in-batch negatives + FLOPS), AdamW, cosine LR,
clipping, tokenizing every step:

* baseline — a textbook loop in this process: tokenize, forward queries and documents, loss, backward, clip,
  optimizer and scheduler step;
* lexray — ``run_training`` on a Ray Train ``TorchTrainer`` with one worker holding the same CPUs (ddp strategy),
  metrics reported through ``ray.train.report`` every step (the most frequent setting).

Brackets: every measurement runs in its own fresh Python process, interleaved plain, Ray, plain, Ray, plain
(``--brackets 2``), and each process must leave no Ray process behind before the next starts. Why: the earlier
version ran the plain loop in the driver before and after ``run_training``, which starts a local Ray and leaves it
running (raylet, GCS, dashboard, idle workers polling), so the "after" baseline shared the 2 cores with an idle
Ray (measured: an idle local Ray's raylet, GCS, dashboard, agents and idle workers use about 7 % of one core here)
and it read 10-22 % slower (0.42 -> 0.48, 0.50 -> 0.61, 0.46 -> 0.55 s per step in three runs); one run's ratio read
1.34 against 0.98 in the other two. Fresh processes also reset allocator state and thread pools between brackets. The ratio is the mean Ray step over the mean plain step across all
brackets; ``baseline_spread`` (max / min of the plain brackets' means) says whether the machine stayed steady
(goal ≤ 1.05). One untimed plain bracket runs first (``--warmup-brackets``): in the first quiet run of this design
the first process read 0.518 s per step against 0.423 and 0.413 for the later plain brackets (cold page cache and
allocator after other work), a 1.25 spread on its own.

Steady state: the first ``--warmup`` steps of each bracket are excluded; lexray's step time is the wall-clock time
between logged steps (so it includes the report barrier), the baseline's is the mean loop-iteration time. Goal:
ratio ≤ 1.10.

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


def plain_loop(args) -> list[float]:
    """The baseline: same encoder, data order, objective and optimizer, no Ray, no strategy wrapper."""
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
    times = []
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
    return times


def ray_loop(args) -> tuple[list[float], list[float]]:
    from lexray.train.loop import run_training

    with tempfile.TemporaryDirectory() as tmp:
        res = run_training(make_cfg(args), storage_path=tmp)
    hist = [m for m in res.history if "wall_time" in m]
    walls = [m["wall_time"] for m in hist]
    return [b - a for a, b in zip(walls, walls[1:], strict=False)], [m["step_time_s"] for m in hist]


def ray_processes() -> list[str]:
    """Command lines of live Ray processes on this machine (raylet, GCS, agents, workers)."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            line = " ".join(p.info["cmdline"] or [p.info["name"] or ""])
        except psutil.Error:
            continue
        if any(n in line for n in RAY_PROCESS_NAMES) and "train_step_bench" not in line:
            found.append(line[:120])
    return found


def wait_no_ray(timeout_s: float = 60.0) -> list[str]:
    """Wait until no Ray process is left (a bracket must not share the CPU with the last one's Ray)."""
    t0 = time.monotonic()
    while (left := ray_processes()) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.5)
    return left


def run_bracket(kind: str, argv: list[str]) -> list[float]:
    """One measurement in a fresh interpreter: ``plain`` or ``ray``; returns its steady-state step times (s)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--bracket", kind, "--bracket-out", f.name,
                        *argv], check=True)
        return json.loads(Path(f.name).read_text())


def bracket_main(args) -> None:
    if args.bracket == "plain":
        times = plain_loop(args)[args.warmup:]
    else:
        import ray

        gaps, _ = ray_loop(args)
        ray.shutdown()
        times = gaps[args.warmup - 1:]  # inter-report gaps start at step 2; drop the same warm-up steps
    Path(args.bracket_out).write_text(json.dumps(times))


def main() -> None:
    from lexray.paths import shared_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(shared_path("models", "splade-tiny")))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--qlen", type=int, default=32)
    ap.add_argument("--dlen", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cpus", type=float, default=2.0)
    ap.add_argument("--brackets", type=int, default=2, help="Ray runs; plain runs = brackets + 1, interleaved")
    ap.add_argument("--warmup-brackets", type=int, default=1,
                    help="untimed plain brackets first (the first process after other work loads cold)")
    ap.add_argument("--out", type=Path, default=Path("outputs/benchmarks/train_step.json"))
    ap.add_argument("--bracket", choices=["plain", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--bracket-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.bracket:
        bracket_main(args)
        return
    argv = ["--model", args.model, "--batch", str(args.batch), "--qlen", str(args.qlen), "--dlen", str(args.dlen),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--cpus", str(args.cpus)]
    if left := wait_no_ray(5.0):
        raise SystemExit(f"Ray processes are running on this machine; the bench needs them gone: {left[:3]}")
    for i in range(args.warmup_brackets):
        times = run_bracket("plain", argv)
        print(f"warm-up bracket {i + 1}/{args.warmup_brackets} (untimed): {statistics.mean(times):.3f} s/step", flush=True)
    plain_runs, ray_runs, leftovers = [], [], []
    for i in range(2 * args.brackets + 1):
        kind = "plain" if i % 2 == 0 else "ray"
        times = run_bracket(kind, argv)
        (plain_runs if kind == "plain" else ray_runs).append(times)
        leftovers += wait_no_ray()
        print(f"bracket {i + 1}/{2 * args.brackets + 1} {kind}: {statistics.mean(times):.3f} s/step", flush=True)
    plain_means = [statistics.mean(t) for t in plain_runs]
    ray_means = [statistics.mean(t) for t in ray_runs]
    b, r = statistics.mean(plain_means), statistics.mean(ray_means)
    out = {"benchmark": "train_step", "model": args.model, "global_batch": args.batch, "query_len": args.qlen,
           "doc_len": args.dlen, "steps": args.steps, "warmup_steps_excluded": args.warmup,
           "brackets": args.brackets, "warmup_brackets": args.warmup_brackets, "machine": f"{platform.machine()} {os.cpu_count()} cpus",
           "load_average_1m_at_end": os.getloadavg()[0],
           "baseline_plain_pytorch_step_s": b, "baseline_bracket_means_s": plain_means,
           "baseline_spread": max(plain_means) / min(plain_means), "lexray_ray_train_step_s": r,
           "lexray_bracket_means_s": ray_means, "ratio": r / b, "goal_ratio": 1.10, "meets_goal": r / b <= 1.10,
           "ray_processes_left_after_brackets": leftovers,
           "baseline_steps_s": plain_runs, "lexray_steps_s": ray_runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if not k.endswith("steps_s")}, indent=2))


if __name__ == "__main__":
    main()
