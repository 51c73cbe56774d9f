"""benchmarks/train_step_bench.py's figures (issue 28 item 7): paired ratios against an interpolated baseline, so
that the machine's drift cancels, and the median of the pairs as the reported ratio. Synthetic brackets only; the
bench itself is not run here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _brackets(speed, true_ratio, n_ray=4, ray_extra=None):
    """plain, ray, plain, ... brackets 30 s apart whose step time is ``speed(t)`` (× ``true_ratio`` for Ray)."""
    out = []
    for i in range(2 * n_ray + 1):
        t0 = 30.0 * i
        kind = "plain" if i % 2 == 0 else "ray"
        step = speed(t0 + 2.5) * (true_ratio if kind == "ray" else 1.0)
        if kind == "ray" and ray_extra and i in ray_extra:
            step *= ray_extra[i]
        out.append({"kind": kind, "step_s": [step] * 10, "t_start": t0, "t_end": t0 + 5.0})
    return out


def test_linear_drift_cancels_in_the_paired_ratios():
    """The VM slows by 15 % over the run: the mean-of-means ratio is off, the paired ratios are exact, and the
    before/after baselines disagree (which the bench reports instead of hiding)."""
    from train_step_bench import summarise

    s = summarise(_brackets(lambda t: 0.40 * (1 + 0.15 * t / 240), 1.04))
    assert s["paired_ratios"] == pytest.approx([1.04] * 4)
    assert s["ratio"] == pytest.approx(1.04) and s["ratio_spread"] == pytest.approx(1.0)
    assert s["meets_ratio_goal"]
    assert s["baseline_after_over_before_median"] > 1.03 and s["baseline_halves"] > 1.05
    assert s["baseline_agreement"] == pytest.approx(s["baseline_after_over_before_median"])


def test_the_median_ignores_one_disturbed_pair_and_goals_are_judged():
    from train_step_bench import summarise

    steady = lambda t: 0.40  # noqa: E731
    s = summarise(_brackets(steady, 1.02, n_ray=3, ray_extra={3: 1.3}))  # the 2nd Ray bracket hit by other work
    assert sorted(s["paired_ratios"]) == pytest.approx([1.02, 1.02, 1.02 * 1.3])
    assert s["ratio"] == pytest.approx(1.02) and s["ratio_max"] == pytest.approx(1.326)
    assert s["baseline_agreement"] == pytest.approx(1.0) and s["meets_goal"]
    slow = summarise(_brackets(steady, 1.15, n_ray=3))
    assert not slow["meets_ratio_goal"] and not slow["meets_goal"] and slow["meets_baseline_goal"]


def test_brackets_must_alternate_and_end_on_plain():
    from train_step_bench import summarise

    b = _brackets(lambda t: 0.4, 1.0, n_ray=2)
    with pytest.raises(ValueError, match="alternate"):
        summarise(b[:-1])
    with pytest.raises(ValueError, match="alternate"):
        summarise([b[0], b[0], b[2]])


def _turns(speed, true_ratio, n_ray=5, window=6.0, ray_extra=None):
    """Synthetic interleaved run: plain, ray, plain, ... turns of ``window`` s. In each turn a side first finishes
    the step it was frozen in (ending 0.3 s into the turn: that step spans the other side's turn), then takes
    steps of ``speed(turn start)`` (× ``true_ratio`` for Ray) until the next one would run over the switch."""
    switches, ray_walls, plain = [], [], []
    last_start = {"plain": None}
    t = 0.0
    for i in range(2 * n_ray + 1):
        side = "plain" if i % 2 == 0 else "ray"
        switches.append((t, side))
        step = speed(t) * (true_ratio if side == "ray" else 1.0)
        if side == "ray" and ray_extra and i in ray_extra:
            step *= ray_extra[i]
        x = t + 0.3
        if side == "ray":
            ray_walls.append(x)
        elif last_start["plain"] is not None:
            plain.append((last_start["plain"], x))
        while x + step <= t + window:
            if side == "ray":
                ray_walls.append(x + step)
            else:
                plain.append((x, x + step))
            x += step
        if side == "plain":
            last_start["plain"] = x
        t += window
    switches.append((t, "end"))
    return ray_walls, plain, switches


def test_interleaved_turns_pair_each_ray_turn_with_its_neighbours_and_drop_cut_steps():
    from train_step_bench import summarise_turns

    ray_walls, plain, switches = _turns(lambda t: 0.5 * (1 + 0.2 * t / 66), 1.06)
    s = summarise_turns(ray_walls, plain, switches)
    assert len(s["pairs"]) == 5
    # drift within a turn triple is linear, so the neighbours' mean is the Ray turn's own baseline
    assert s["paired_ratios"] == pytest.approx([1.06] * 5, rel=1e-9)
    assert s["ratio"] == pytest.approx(1.06) and s["meets_ratio_goal"]
    assert all(p["ray_steps"] >= 2 for p in s["pairs"])
    # the steps cut by a switch (each spans the other side's turn) are not counted: every counted step is exact
    assert s["plain_steps_counted"] == len(plain) - 5  # one cut step entering each plain turn after the first
    assert s["ray_steps_counted"] == len(ray_walls) - 5  # the first wall of each Ray turn ends a cut step
    # drift of 20 % over the run shows as after/before > 1 for each pair, and in the halves
    assert s["baseline_after_over_before_median"] > 1.0 and s["baseline_halves"] > 1.05


def test_interleaved_median_ignores_one_disturbed_turn_and_judges_both_goals():
    from train_step_bench import summarise_turns

    s = summarise_turns(*_turns(lambda t: 0.5, 1.03, ray_extra={3: 1.4}))
    assert s["ratio"] == pytest.approx(1.03) and s["ratio_max"] == pytest.approx(1.03 * 1.4)
    assert s["baseline_agreement"] == pytest.approx(1.0) and s["meets_goal"]
    slow = summarise_turns(*_turns(lambda t: 0.5, 1.2))
    assert not slow["meets_ratio_goal"] and slow["meets_baseline_goal"] and not slow["meets_goal"]


def test_interleaved_needs_turns_with_counted_steps():
    from train_step_bench import summarise_turns

    with pytest.raises(ValueError, match="end"):
        summarise_turns([], [], [(0.0, "plain"), (1.0, "ray")])
    # turns shorter than two steps count nothing
    with pytest.raises(ValueError, match="lengthen"):
        summarise_turns(*_turns(lambda t: 4.0, 1.0, n_ray=2))
