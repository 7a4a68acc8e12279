"""GPU launch timing with CUDA events, the one way every bsprof benchmark times a kernel."""

from __future__ import annotations

from typing import Callable


def launch_times_ms(fn: Callable[[], object], warmup: int, iters: int) -> list[float]:
    """Milliseconds of each of ``iters`` launches of ``fn``, after ``warmup`` untimed ones.

    Each launch gets its own pair of events, so the median is robust to a stray slow launch.
    """
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]
