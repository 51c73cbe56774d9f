from lexray.train.metrics import CollapseGuard


def test_collapse_guard_needs_consecutive_bad_steps():
    g = CollapseGuard(vocab_size=1000, min_active=1.0, max_fraction=0.5, patience=3)
    assert g.update(0.5, 1) is None and g.update(0.2, 2) is None
    assert g.update(40.0, 3) is None  # recovery resets the count
    assert g.update(0.0, 4) is None and g.update(0.0, 5) is None
    msg = g.update(0.0, 6)
    assert msg and "step 6" in msg and "below 1.0" in msg and "3 consecutive" in msg
    g2 = CollapseGuard(vocab_size=1000, patience=1)
    assert "above 50% of |V| = 1000" in g2.update(600.0, 1)


def test_evaluation_metrics_join_the_training_runs_tensorboard(tmp_path):
    """Issue 27: TensorBoard had the training scalars only; the evaluation after training now joins the same run's
    event files (read back with TensorBoard's own EventAccumulator)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from lexray.train.metrics import MetricsSink, write_eval_scalars

    sink = MetricsSink(tmp_path, tensorboard=True)
    for step in (10, 20):
        sink.write({"loss": 1.0 / step, "step": step, "phase": 0}, step, "contrastive", f"step {step}")
    sink.close()
    rec = {"split": "test", "metrics": {"nDCG@10": 0.6436, "R@100": 0.893},
           "efficiency": {"avg_query_nnz": 52.6, "search_qps": 37.0, "backends": {}}}
    write_eval_scalars(tmp_path, rec, "eval-trained")
    write_eval_scalars(tmp_path, {**rec, "metrics": {"nDCG@10": 0.5}}, "eval-zero-shot", step=0)
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"contrastive/loss", "eval-trained/test/nDCG@10", "eval-trained/test/R@100",
            "eval-trained/test/efficiency/search_qps", "eval-zero-shot/test/nDCG@10"} <= tags
    [ev] = acc.Scalars("eval-trained/test/nDCG@10")
    assert ev.step == 20 and abs(ev.value - 0.6436) < 1e-6  # filed at the run's last logged step
    assert acc.Scalars("eval-zero-shot/test/nDCG@10")[0].value == 0.5
