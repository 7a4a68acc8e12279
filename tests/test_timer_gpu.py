"""The bench timing loop on a real GPU: a kernel shorter than the host's time per launch is timed
at the GPU's pace when the queue is held, and at the host's when it is not (CUPTI's kernel
durations are the reference)."""

from __future__ import annotations

import statistics

import pytest

pytestmark = pytest.mark.gpu


def _short_op():
    """A ~2-5 us kernel whose Python launch costs the host more than the GPU spends on it."""
    import torch

    x = torch.randn(1 << 16, device="cuda")
    return lambda: x.mul_(1.0000001)


def test_a_held_queue_times_the_kernel_not_the_host():
    import torch

    from bsprof.analyzers.kernel_trace import launch_summary
    from bsprof.profile.timer import launch_times_ms, trace_launches

    op = _short_op()
    held = statistics.median(launch_times_ms(op, 10, 200, 0.1, hold=True)) * 1e3
    paced = statistics.median(launch_times_ms(op, 10, 200, 0.1, hold=False)) * 1e3
    kernel_us = launch_summary(trace_launches(op, 30, 0.1))["kernel_us"]
    torch.cuda.synchronize()
    # CUPTI's duration is the kernel alone; an event pair around a queued launch adds ~3 us
    # (H100: 4.3 us for a 1.1 us kernel)
    assert held < kernel_us + 5.0, (held, kernel_us)
    # at the host's pace the event pair also waits for the host's next launch
    assert paced - kernel_us > 2 * (held - kernel_us), (paced, held, kernel_us)


def test_a_long_kernel_times_the_same_either_way():
    import torch

    from bsprof.profile.timer import launch_times_ms

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    fn = lambda: a @ a  # noqa: E731 - ~150-250 us: the host is far ahead of the GPU either way
    held = statistics.median(launch_times_ms(fn, 10, 50, 0.3, hold=True))
    paced = statistics.median(launch_times_ms(fn, 10, 50, 0.3, hold=False))
    assert held == pytest.approx(paced, rel=0.08)


def test_a_queue_that_ran_dry_is_told_from_one_that_held():
    import torch

    from bsprof.profile.timer import ran_dry, timed_launches_and_gaps

    op = _short_op()
    for _ in range(20):
        op()
    torch.cuda.synchronize()
    paced = timed_launches_and_gaps(op, 100, 0.0, None)  # no hold: the GPU waits on the host
    held = timed_launches_and_gaps(op, 100, 0.05, None)  # 50 ms: far longer than 100 launches take
    assert ran_dry(*paced) and not ran_dry(*held), (sorted(paced[1])[50], sorted(held[1])[50])
