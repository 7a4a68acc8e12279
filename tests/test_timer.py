"""The bench timing loop's check for a queue that ran dry (pure; the GPU side is test_timer_gpu.py)."""

from __future__ import annotations

from bsprof.profile.timer import DRY_GAP_MS, ran_dry


def test_a_few_late_launches_are_not_a_dry_queue():
    times = [0.010] * 50
    gaps = [0.0002] * 49
    assert not ran_dry(times, gaps)
    gaps[:4] = [0.2] * 4  # 4 of 49: a stray stall
    assert not ran_dry(times, gaps)
    gaps[:6] = [0.2] * 6  # 6 of 49: the host fell behind
    assert ran_dry(times, gaps)


def test_the_gap_limit_scales_with_a_long_kernel():
    # a 1 ms kernel: a 0.1 ms gap is launch jitter, not the host holding the GPU up
    assert not ran_dry([1.0] * 20, [0.1] * 19)
    assert ran_dry([1.0] * 20, [0.3] * 19)
    assert not ran_dry([0.01] * 20, [DRY_GAP_MS * 0.9] * 19) and not ran_dry([0.01], [])
