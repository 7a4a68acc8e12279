"""GPU launch timing with CUDA events, the one way every bsprof benchmark times a kernel, and the same
launches traced with CUPTI (``torch.profiler``) to split kernel time from the launch gaps around it."""

from __future__ import annotations

import os
import tempfile
from typing import Callable

# GPU clock the hold kernel's length is counted in: the top H100/H200 boost clock, so the hold
# lasts at least as long as asked at any lower clock
HOLD_CLOCK_HZ = 2.0e9
# host time per timed launch beyond ``fn`` itself: two event records and the loop (a few us each
# under a virtualised driver), with a margin so the queue stays ahead of the GPU
HOLD_SLACK_S = 20e-6
HOLD_MAX_S = 0.25
HOLD_ATTEMPTS = 3
# an idle gap between queued launches longer than this means the queue ran dry (back to back,
# the gap between one launch's end event and the next one's start event is well under a us)
DRY_GAP_MS = 0.005


def launch_times_ms(
    fn: Callable[[], object],
    warmup: int,
    iters: int,
    min_warmup_s: float = 0.3,
    while_running: Callable[[], None] | None = None,
    hold: bool = True,
) -> list[float]:
    """Milliseconds of each of ``iters`` launches of ``fn``, after at least ``warmup`` untimed ones
    and at least ``min_warmup_s`` seconds of them (none at all with ``warmup=0``).

    The time floor is there because a GPU that sat idle (compiling, building inputs, checking the
    previous kernel) is still raising its clocks for the first few hundred milliseconds of work: ten
    1 ms launches measured the first kernel of each problem up to 10% slow (H100, 8192^3).
    Each launch gets its own pair of events, so the median is robust to a stray slow launch.
    ``while_running`` is called over and over while the timed launches run (to read the clock the
    kernel ran at, :mod:`bsprof.profile.sensors`).

    ``hold``: a spin kernel keeps the GPU busy while the host queues every timed launch, so the
    launches run back to back and each event pair times the kernel alone. Without it a kernel
    shorter than the host's time per launch (a graph replay and two event records from Python:
    ~17 us on the device machine) is timed at the host's pace: DeepGEMM, cuBLAS and ours all
    measured ~17 us at 128x576x7168 and 1x32768x512, whatever their real duration. When the host
    still falls behind (a stalled host: a round of ~160 us launches for a ~10 us kernel was seen),
    the idle gaps between launches give it away (``ran_dry``) and the launches are timed again
    behind a longer hold.
    """
    import time

    import torch

    t0 = time.perf_counter()
    host_per_call = 0.0
    while warmup > 0:
        t_enqueue = time.perf_counter()
        for _ in range(warmup):
            fn()
        host_per_call = (time.perf_counter() - t_enqueue) / warmup
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= min_warmup_s:
            break
    torch.cuda.synchronize()
    hold_s = min(HOLD_MAX_S, iters * (2 * host_per_call + HOLD_SLACK_S)) if hold else 0.0
    for _attempt in range(HOLD_ATTEMPTS if hold else 1):
        times, gaps = timed_launches_and_gaps(fn, iters, hold_s, while_running)
        if not hold or not ran_dry(times, gaps):
            break
        # the host fell behind the hold (a stall of the host, not the GPU): a longer hold, once more
        hold_s = min(HOLD_MAX_S, hold_s * 4)
    return times


def timed_launches_and_gaps(fn, iters: int, hold_s: float, while_running) -> tuple[list[float], list[float]]:
    """Each launch's milliseconds and the idle milliseconds between one launch's end event and the
    next one's start event."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    if hold_s > 0:
        torch.cuda._sleep(int(hold_s * HOLD_CLOCK_HZ))
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    if while_running is not None:
        while not ends[-1].query():
            while_running()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    gaps = [e.elapsed_time(s) for e, s in zip(ends, starts[1:])]
    return times, gaps


def ran_dry(times_ms: list[float], gaps_ms: list[float]) -> bool:
    """Whether the GPU waited on the host between launches that should have been queued back to
    back: more than a tenth of the gaps longer than ``DRY_GAP_MS`` or a quarter of the median
    launch. Seen on the H100 as a round of ~160 us launches for a ~10 us kernel."""
    if not gaps_ms:
        return False
    times = sorted(times_ms)
    limit = max(DRY_GAP_MS, 0.25 * times[len(times) // 2])
    return sum(g > limit for g in gaps_ms) > 0.1 * len(gaps_ms)


def trace_launches(
    fn: Callable[[], object], launches: int = 30, warmup_s: float = 0.3, keep: str | os.PathLike | None = None
):
    """``kernel_spans`` of the last ``launches`` calls of ``fn``, each between a pair of CUDA events
    as the bench times them. The warm-up runs inside the profiler: starting CUPTI idles the GPU,
    and a kernel traced right after that runs at clocks it would not sustain. ``keep`` saves the
    Chrome trace there."""
    import torch

    from bsprof.analyzers.kernel_trace import kernel_spans, load_trace

    calls = 0

    def counted() -> None:
        nonlocal calls
        calls += 1
        fn()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        launch_times_ms(counted, 10, launches, warmup_s)
    if keep:
        path = os.fspath(keep)
    else:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
            path = tmp.name
    try:
        prof.export_chrome_trace(path)
        trace = load_trace(path)
    finally:
        if not keep and os.path.exists(path):
            os.unlink(path)
    spans = kernel_spans(trace)
    per_call = max(1, round(len(spans) / calls))  # a peer may launch more than one kernel per call
    return spans.iloc[-launches * per_call :].reset_index(drop=True)
