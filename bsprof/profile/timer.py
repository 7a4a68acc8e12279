"""GPU launch timing with CUDA events, the one way every bsprof benchmark times a kernel."""

from __future__ import annotations

from typing import Callable


def launch_times_ms(fn: Callable[[], object], warmup: int, iters: int, min_warmup_s: float = 0.3,
                    while_running: Callable[[], None] | None = None) -> list[float]:
    """Milliseconds of each of ``iters`` launches of ``fn``, after at least ``warmup`` untimed ones
    and at least ``min_warmup_s`` seconds of them (none at all with ``warmup=0``).

    The time floor is there because a GPU that sat idle (compiling, building inputs, checking the
    previous kernel) is still raising its clocks for the first few hundred milliseconds of work: ten
    1 ms launches measured the first kernel of each problem up to 10% slow (H100, 8192^3).
    Each launch gets its own pair of events, so the median is robust to a stray slow launch.
    ``while_running`` is called over and over while the timed launches run (to read the clock the
    kernel ran at, :mod:`bsprof.profile.sensors`).
    """
    import time

    import torch

    t0 = time.perf_counter()
    while warmup > 0:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 >= min_warmup_s:
            break
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    if while_running is not None:
        while not ends[-1].query():
            while_running()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]
