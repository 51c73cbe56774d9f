"""Ray Train step time vs a plain PyTorch loop on the same model and the same batches (steady state).

Both sides train the same encoder (default: the real splade-tiny BertForMaskedLM, |V| = 30,522) on the same
SciFact (title, abstract) pairs with the same objective (InfoNCE with in-batch negatives + FLOPS), AdamW, cosine LR,
clipping, tokenizing every step:

* baseline — a textbook loop: tokenize, forward queries and documents, loss, backward, clip, optimizer and
  scheduler step;
* lexray — ``run_training`` on a Ray Train ``TorchTrainer`` with one worker holding the same CPUs (ddp strategy),
  ``log_every: 1`` (the most frequent logging).

Design (issue 28 item 7: the answer must not depend on when the VM happens to be fast or slow). The VM's speed
moves by 14-22 % between 10-step windows of one process, about 6 seconds each (measured 2026-11-26), so any two
measurements taken at different moments differ by that much, whatever else is done. Hence the default mode,
``--mode interleaved``: the two sides run *at the same time*, as two resident processes taking turns:

* the Ray side (one ``run_training`` of ``--steps`` steps, 130 by default) starts first and takes ``--warmup``
  steps alone; then it is frozen with SIGSTOP — its driver and every Ray process it started (GCS, raylet,
  dashboard, agents, the Train controller and worker), found by an environment tag — and the plain side starts
  and takes its own ``--warmup`` steps;
* from then on the controller switches every ``--window-s`` seconds (6): SIGSTOP one side, SIGCONT the other,
  until the Ray run ends. The side on turn has the machine to itself, Ray's background processes included when
  it is the Ray side's turn, and none of them when it is the plain side's;
* a step counts only if it lies inside one turn of its own side (the step under way at a switch is cut by the
  other side's turn and dropped); each Ray turn is paired with the plain turns just before and after it, and
  its ratio is its mean step over the mean of theirs. Neighbouring turns are seconds apart, so the VM's slow
  drift cancels; its fast noise averages out over the pairs;
* ``ratio`` is the median of the paired ratios (goal <= 1.10); ``baseline_after_over_before_median`` the median of
  plain-after / plain-before over the same pairs (> 1: the plain loop runs slower right after a Ray turn, the
  issue's symptom), and ``baseline_agreement`` = max(m, 1/m) of that median (goal <= 1.05). ``ratio_of_means``,
  ``baseline_halves`` (second half's plain turns over the first half's) and ``baseline_spread`` (max / min plain
  turn) are reported beside them. ``meets_goal`` is both goals. The JSON keeps the raw record: the Ray run's
  logged step ends, the plain side's step (start, end) pairs and the switch times.

``--mode brackets`` keeps the previous design: every measurement ("bracket") in a fresh process, plain, Ray,
plain, ..., plain (``--brackets`` Ray brackets of ``--steps`` 15, the first ``--warmup`` 5 excluded), each Ray
bracket against the plain baseline interpolated between its two neighbours; ``ratio`` the median of the paired
ratios, ``baseline_agreement`` the median over pairs of max / min of the two plain brackets. Its three quiet runs
of 2026-11-26 (ratios 1.00, 1.24, 1.25) are in docs/training.md.

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


def plain_loop(args, live: str | None = None) -> tuple[list[float], list[float]]:
    """The baseline: same encoder, data order, objective and optimizer, no Ray, no strategy wrapper. Returns each
    step's duration (s) and its end on the wall clock (``time.time()``, as lexray's ``wall_time``). With ``live``,
    also appends ``start end`` (wall clock) of every step to that file as it ends (the interleaved mode reads it)."""
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
    sink = open(live, "a", buffering=1) if live else None  # noqa: SIM115 - closed with the process
    for step in range(args.steps):
        w0 = time.time()
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
        if sink:
            sink.write(f"{w0!r} {walls[-1]!r}\n")
    return times, walls


def ray_loop(args) -> tuple[list[float], list[float]]:
    """lexray on Ray Train; returns each logged step's wall-clock end and its in-worker step time (s)."""
    from lexray.train.loop import run_training

    with tempfile.TemporaryDirectory() as tmp:
        res = run_training(make_cfg(args), storage_path=tmp)
    hist = [m for m in res.history if "wall_time" in m]
    return [m["wall_time"] for m in hist], [m["step_time_s"] for m in hist]


def local_loop(args) -> tuple[list[float], list[float]]:
    """``--against local``: lexray's own training loop in this process without Ray (``train.loop.train_local``,
    the loop every Ray Train worker runs), in place of the Ray run. Against the plain loop it measures what
    lexray's loop itself adds (metrics, logging, the strategy object); the default run's ratio over this one is
    roughly what Ray Train adds. Same return as :func:`ray_loop`."""
    from lexray.train.loop import train_local

    with tempfile.TemporaryDirectory() as tmp:
        _, rep = train_local(make_cfg(args), Path(tmp) / "run")
    hist = [m for m in rep.history if "wall_time" in m]
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
    if args.bracket == "plain" and args.live:  # interleaved mode: runs until the controller ends it
        plain_loop(args, live=args.live)
        return
    if args.bracket == "plain":
        times, walls = plain_loop(args)
    else:
        if args.against == "local":
            walls, worker = local_loop(args)
        else:
            import ray

            walls, worker = ray_loop(args)
            ray.shutdown()
        # step k's time = wall[k] - wall[k-1]
        times = [float("nan"), *(b - a for a, b in zip(walls, walls[1:], strict=False))]
    w = args.warmup
    if len(walls) <= w:
        raise SystemExit(f"{len(walls)} logged steps: --steps must exceed --warmup ({w})")
    rec = {"step_s": times[w:], "t_start": walls[w - 1], "t_end": walls[-1], "walls": walls}
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


# ---- interleaved mode (the default): one resident plain process and one resident Ray run taking turns ----------

def _signal_all(procs: list, sig: int) -> None:
    import psutil

    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def _tagged(tag: str, extra_pids: tuple[int, ...] = ()) -> list:
    """psutil processes carrying ``tag`` in their environment (a side's driver and every Ray process it started),
    plus ``extra_pids``."""
    import psutil

    out = {}
    for p in psutil.process_iter():
        try:
            if p.pid in extra_pids or p.environ().get(TAG_ENV) == tag:
                out[p.pid] = p
        except psutil.Error:
            continue
    return list(out.values())


def _read_live(path: Path) -> list[tuple[float, float]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((float(parts[0]), float(parts[1])))
    return rows


def run_interleaved(args, argv: list[str], tag: str) -> dict:
    """Run the Ray side and the plain side as two resident processes that take turns of ``--window-s`` seconds,
    the side not on turn frozen with SIGSTOP (the Ray side: its driver and every Ray process it started: GCS,
    raylet, dashboard, agents, Train controller and worker). Returns the raw record: the Ray run's logged step
    ends, the plain side's step (start, end) pairs and the switch times."""
    import signal
    import threading

    ray_tag, plain_tag = f"{tag}-ray", f"{tag}-plain"
    with tempfile.TemporaryDirectory() as tmp:
        ray_out, live = Path(tmp) / "ray.json", Path(tmp) / "plain.live"
        ray_steps = args.steps
        ray_cmd = [sys.executable, str(Path(__file__).resolve()), "--bracket", "ray", "--bracket-out", str(ray_out),
                   *_with(argv, "--steps", str(ray_steps))]
        plain_cmd = [sys.executable, str(Path(__file__).resolve()), "--bracket", "plain", "--live", str(live),
                     *_with(argv, "--steps", str(100 * ray_steps))]
        t_run = time.time()
        ray_p = subprocess.Popen(ray_cmd, env={**os.environ, TAG_ENV: ray_tag}, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        progress = {"step": 0}
        log_tail: list[str] = []

        def pump():
            for line in ray_p.stdout:
                log_tail.append(line)
                del log_tail[:-50]
                if " bench step " in line:
                    try:
                        progress["step"] = int(line.split(" bench step ", 1)[1].split("/", 1)[0])
                    except ValueError:
                        pass

        threading.Thread(target=pump, daemon=True).start()
        plain_p = None
        switches: list[tuple[float, str]] = []  # (wall time, side that runs from then on)
        try:
            deadline = time.time() + args.start_timeout_s
            while progress["step"] < args.warmup and ray_p.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            if progress["step"] < args.warmup:
                raise SystemExit(f"the Ray side did not reach step {args.warmup} "
                                 f"(exit {ray_p.poll()}):\n{''.join(log_tail[-20:])}")
            ray_group = _tagged(ray_tag, (ray_p.pid,))
            _signal_all(ray_group, signal.SIGSTOP)
            switches.append((time.time(), "plain"))
            plain_p = subprocess.Popen(plain_cmd, env={**os.environ, TAG_ENV: plain_tag},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + args.start_timeout_s
            while len(_read_live(live)) < args.warmup and plain_p.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            if len(_read_live(live)) < args.warmup:
                raise SystemExit(f"the plain side did not reach step {args.warmup} (exit {plain_p.poll()})")
            on = "plain"
            t_next = time.time() + args.window_s
            while ray_p.poll() is None:
                time.sleep(max(0.0, t_next - time.time()))
                t_next += args.window_s
                if ray_p.poll() is not None:
                    break
                if on == "plain":
                    plain_p.send_signal(signal.SIGSTOP)
                    _signal_all(ray_group, signal.SIGCONT)
                    on = "ray"
                else:
                    ray_group = _tagged(ray_tag, (ray_p.pid,))  # Ray may have started a process meanwhile
                    _signal_all(ray_group, signal.SIGSTOP)
                    plain_p.send_signal(signal.SIGCONT)
                    on = "plain"
                switches.append((time.time(), on))
            switches.append((time.time(), "end"))
            if ray_p.wait() != 0:
                raise SystemExit(f"the Ray side failed (exit {ray_p.returncode}):\n{''.join(log_tail[-20:])}")
            ray_rec = json.loads(ray_out.read_text())
        finally:
            for proc in (plain_p, ray_p):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                    proc.kill()
                    proc.wait()
            _signal_all(_tagged(ray_tag), signal.SIGCONT)
        plain_steps = _read_live(live)
    return {"ray_walls": ray_rec["walls"], "plain_steps": plain_steps, "switches": switches, "t_run_start": t_run}


def _with(argv: list[str], key: str, value: str) -> list[str]:
    """``argv`` with ``key``'s value replaced."""
    out = list(argv)
    out[out.index(key) + 1] = value
    return out


def summarise_turns(ray_walls: list[float], plain_steps: list[tuple[float, float]],
                    switches: list[tuple[float, str]], goal_ratio: float = 1.10,
                    goal_agreement: float = 1.05) -> dict:
    """The interleaved mode's figures.

    ``switches``: ``(wall time, side running from then on)`` in order, the last ``(t, "end")``. A turn is the
    time between two switches. A step counts only if it lies inside one turn of its own side (a step cut by a
    switch contains the other side's turn and is dropped; Ray step k spans ``ray_walls[k-1]`` to
    ``ray_walls[k]``, so the first logged step is never counted). Each Ray turn with at least 2 steps is paired
    with the plain turns just before and after it (each with at least 2 steps): its ratio is its mean step over
    the mean of theirs. ``ratio`` is the median of the paired ratios; ``baseline_after_over_before_median`` the
    median of after / before over the same pairs (> 1: the plain loop runs slower right after a Ray turn), and
    ``baseline_agreement`` = max(m, 1/m) of that median m. ``ratio_of_means`` is all counted Ray steps' mean
    over all counted plain steps' mean.
    """
    if len(switches) < 4 or switches[-1][1] != "end":
        raise ValueError("need at least three turns and a final 'end' switch")
    turns = [(a[0], b[0], a[1]) for a, b in zip(switches, switches[1:], strict=False)]

    def turn_of(start: float, end: float, side: str) -> int | None:
        for i, (t0, t1, who) in enumerate(turns):
            if who == side and t0 <= start and end <= t1:
                return i
        return None

    per_turn: dict[int, list[float]] = {}
    for k in range(1, len(ray_walls)):
        i = turn_of(ray_walls[k - 1], ray_walls[k], "ray")
        if i is not None:
            per_turn.setdefault(i, []).append(ray_walls[k] - ray_walls[k - 1])
    for start, end in plain_steps:
        i = turn_of(start, end, "plain")
        if i is not None:
            per_turn.setdefault(i, []).append(end - start)
    means = {i: statistics.mean(v) for i, v in per_turn.items() if len(v) >= 2}
    pairs = []
    for i, (_, _, who) in enumerate(turns):
        if who != "ray" or i not in means or (i - 1) not in means or (i + 1) not in means:
            continue
        pb, pr, pa = means[i - 1], means[i], means[i + 1]
        pairs.append({"ray_turn": i, "plain_before_s": pb, "ray_s": pr, "plain_after_s": pa,
                      "ratio": pr / ((pb + pa) / 2), "after_over_before": pa / pb,
                      "ray_steps": len(per_turn[i])})
    if not pairs:
        raise ValueError("no Ray turn with counted steps between two plain turns with counted steps: "
                         "lengthen --window-s or --steps")
    ratios = [p["ratio"] for p in pairs]
    ray_all = [x for i, v in per_turn.items() if turns[i][2] == "ray" for x in v]
    plain_all = [x for i, v in per_turn.items() if turns[i][2] == "plain" for x in v]
    plain_turns = [means[i] for i in sorted(means) if turns[i][2] == "plain"]
    half = len(plain_turns) // 2
    m = statistics.median(p["after_over_before"] for p in pairs)
    ratio = statistics.median(ratios)
    agreement = max(m, 1 / m)
    return {
        "pairs": pairs, "paired_ratios": ratios, "ratio": ratio, "ratio_min": min(ratios), "ratio_max": max(ratios),
        "ratio_spread": max(ratios) / min(ratios),
        "ratio_of_means": statistics.mean(ray_all) / statistics.mean(plain_all),
        "ray_steps_counted": len(ray_all), "plain_steps_counted": len(plain_all),
        "ray_step_mean_s": statistics.mean(ray_all), "plain_step_mean_s": statistics.mean(plain_all),
        "turns": len(turns), "baseline_after_over_before_median": m, "baseline_agreement": agreement,
        "baseline_halves": (statistics.median(plain_turns[-half:]) / statistics.median(plain_turns[:half]))
        if half else 1.0,
        "baseline_spread": max(plain_turns) / min(plain_turns),
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
    ap.add_argument("--mode", choices=["interleaved", "brackets"], default="interleaved",
                    help="interleaved (default): one resident plain process and one resident Ray run taking turns "
                    "of --window-s seconds; brackets: fresh processes, plain, Ray, plain, ... (the previous design)")
    ap.add_argument("--steps", type=int, default=None,
                    help="Ray steps (interleaved, default 130) or steps per bracket (brackets, default 15)")
    ap.add_argument("--window-s", type=float, default=6.0, help="interleaved: seconds per turn")
    ap.add_argument("--start-timeout-s", type=float, default=300.0, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=5, help="first steps of each bracket excluded")
    ap.add_argument("--cpus", type=float, default=2.0)
    ap.add_argument("--brackets", type=int, default=5, help="Ray brackets (pairs); plain brackets = brackets + 1, "
                    "interleaved")
    ap.add_argument("--warmup-brackets", type=int, default=1,
                    help="untimed plain brackets first (the first process after other work loads cold)")
    ap.add_argument("--allow-other-ray", action="store_true",
                    help="run although other Ray processes are live (a smoke run on a shared machine: the numbers "
                    "are not a measurement)")
    ap.add_argument("--against", choices=["ray", "local"], default="ray",
                    help="what the plain loop is compared with: ray (default, the reported figure): lexray on Ray "
                    "Train; local: lexray's own loop in process without Ray (a diagnostic: what the loop itself "
                    "adds, so that the default's ratio can be split into lexray's loop and Ray)")
    ap.add_argument("--out", type=Path, default=Path("outputs/benchmarks/train_step.json"))
    ap.add_argument("--bracket", choices=["plain", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--bracket-out", help=argparse.SUPPRESS)
    ap.add_argument("--live", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.steps is None:
        args.steps = 130 if args.mode == "interleaved" else 15
    if args.bracket:
        bracket_main(args)
        return
    if args.brackets < 1 or args.warmup < 1 or args.steps <= args.warmup + 1:
        raise SystemExit("--brackets and --warmup must be >= 1, and --steps > --warmup + 1")
    argv = ["--model", args.model, "--batch", str(args.batch), "--qlen", str(args.qlen), "--dlen", str(args.dlen),
            "--steps", str(args.steps), "--warmup", str(args.warmup), "--cpus", str(args.cpus),
            "--against", args.against]
    other = ray_processes()
    t_wait = time.monotonic()
    while other and not args.allow_other_ray and time.monotonic() - t_wait < 60:
        time.sleep(1.0)  # an earlier run's Ray may still be exiting (its dashboard's children take a few seconds)
        other = ray_processes()
    if other and not args.allow_other_ray:
        raise SystemExit(f"Ray processes are running on this machine; the bench needs them gone (or "
                         f"--allow-other-ray for a smoke run): {other[:3]}")
    tag = f"{os.getpid()}-{time.time_ns()}"
    t_run = time.monotonic()
    load_start = os.getloadavg()[0]
    if args.mode == "interleaved":
        raw = run_interleaved(args, argv, tag)
        summary = summarise_turns(raw["ray_walls"], raw["plain_steps"], raw["switches"])
        out = {"benchmark": "train_step", "mode": "interleaved", "against": args.against, "model": args.model,
               "global_batch": args.batch, "query_len": args.qlen, "doc_len": args.dlen, "ray_steps": args.steps,
               "window_s": args.window_s, "warmup_steps": args.warmup,
               "machine": f"{platform.machine()} {os.cpu_count()} cpus",
               "other_ray_processes_at_start": len(other), "load_average_1m_at_start": load_start,
               "load_average_1m_at_end": os.getloadavg()[0], "wall_s": time.monotonic() - t_run,
               "ray_processes_left": wait_no_ray(tag + "-ray"), **summary, "raw": raw}
        lines = [f"Ray turn {p['ray_turn']}: plain {p['plain_before_s']:.3f} / ray {p['ray_s']:.3f} "
                 f"({p['ray_steps']} steps) / plain {p['plain_after_s']:.3f} s -> ratio {p['ratio']:.3f}"
                 for p in summary["pairs"]]
        _report(args.out, out, ("raw", "pairs"), lines, summary, "paired turns")
        return
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
    out = {"benchmark": "train_step", "mode": "brackets", "against": args.against, "model": args.model,
           "global_batch": args.batch, "query_len": args.qlen, "doc_len": args.dlen, "steps": args.steps,
           "warmup_steps_excluded": args.warmup,
           "brackets": args.brackets, "warmup_brackets": args.warmup_brackets,
           "machine": f"{platform.machine()} {os.cpu_count()} cpus",
           "other_ray_processes_at_start": len(other), "load_average_1m_at_start": load_start,
           "load_average_1m_at_end": os.getloadavg()[0], "wall_s": time.monotonic() - t_run,
           **summary, "ray_processes_left_after_brackets": leftovers, "bracket_records": brackets}
    lines = [f"pair at bracket {p['ray_bracket'] + 1}: plain {p['plain_before_s']:.3f} / ray {p['ray_s']:.3f} / "
             f"plain {p['plain_after_s']:.3f} s -> ratio {p['ratio']:.3f}" for p in summary["pairs"]]
    _report(args.out, out, ("bracket_records", "pairs"), lines, summary, "paired ratios")


def _report(path: Path, out: dict, hidden: tuple[str, ...], pair_lines: list[str], summary: dict, what: str) -> None:
    """Write ``out`` as JSON to ``path``; print it without the bulky ``hidden`` keys, one line per pair and the
    verdict."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k not in hidden}, indent=2))
    print("\n".join(pair_lines))
    print(f"ratio (median of {len(summary['paired_ratios'])} {what}) {summary['ratio']:.3f} "
          f"(goal <= {summary['goal_ratio']}); baseline agreement {summary['baseline_agreement']:.3f} "
          f"(goal <= {summary['goal_baseline_agreement']}): {'PASS' if summary['meets_goal'] else 'FAIL'}")


if __name__ == "__main__":
    main()
