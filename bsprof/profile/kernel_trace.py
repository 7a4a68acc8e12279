"""Trace a launch callable with CUPTI (``torch.profiler``): GPU kernel durations and launch gaps."""

from __future__ import annotations

import os
import tempfile
from typing import Callable


def trace_launches(fn: Callable[[], object], launches: int = 30, warmup_s: float = 0.3,
                   keep: str | os.PathLike | None = None):
    """``kernel_spans`` of the last ``launches`` calls of ``fn``, each between a pair of CUDA events
    as the bench times them. The warm-up runs inside the profiler: starting CUPTI idles the GPU,
    and a kernel traced right after that runs at clocks it would not sustain. ``keep`` saves the
    Chrome trace there."""
    import torch

    from bsprof.analyzers.kernel_trace import kernel_spans, load_trace
    from bsprof.profile.timer import launch_times_ms

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
    per_call = max(1, round(len(spans) / calls))   # a peer may launch more than one kernel per call
    return spans.iloc[-launches * per_call:].reset_index(drop=True)
