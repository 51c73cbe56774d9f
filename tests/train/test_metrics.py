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
