"""Kernel launches in a CUPTI trace (``torch.profiler``'s Chrome-trace export): how long each kernel
ran on the GPU and how long the GPU sat between one kernel's end and the next one's start.

A launch timed with CUDA events is both: the kernel and the launch path around it. Splitting
them answers whether a kernel loses in the kernel or in how it is launched (on a ~100 us problem a
few microseconds of gap is a few percent)."""

from __future__ import annotations

import gzip
import os
import statistics

from bsprof.errors import BsprofError


def load_trace(path: str | os.PathLike) -> dict:
    """A Chrome trace (``.json`` or ``.json.gz``) as written by ``torch.profiler``'s ``export_chrome_trace``."""
    from bsprof.artifacts import max_json_bytes, parse_json
    from bsprof.io import human_bytes, open_input, too_large

    p = os.fspath(path)
    cap = max_json_bytes()  # a JSON document, gzipped or not: read (and unpacked) no further than the JSON cap
    var = "BSPROF_MAX_JSON_BYTES"
    try:
        with open_input(
            p, fix="export a trace with torch.profiler's prof.export_chrome_trace(path)", limit=cap, var=var
        ) as fh:
            raw = (gzip.GzipFile(fileobj=fh) if p.endswith(".gz") else fh).read(cap + 1)
        if len(raw) > cap:
            raise too_large(p, f"more than {human_bytes(cap)} of JSON", cap, var)
    except (OSError, ValueError, EOFError) as exc:
        raise BsprofError(
            f"{p}: not a readable JSON trace ({type(exc).__name__}); export one with "
            "torch.profiler's prof.export_chrome_trace(path)"
        ) from None
    try:
        doc = parse_json(raw, p)
    except BsprofError as exc:
        why = str(exc).removeprefix(f"{p}: ").split(";")[0]
        raise BsprofError(
            f"{p}: not a readable JSON trace ({why}); export one with torch.profiler's prof.export_chrome_trace(path)"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BsprofError(f"{p}: no 'traceEvents' list: not a Chrome trace from torch.profiler")
    return doc


def kernel_spans(trace: dict, last: int | None = None):
    """One row per GPU kernel, in start order: ``name``, ``start_us``, ``dur_us``, ``end_us`` and
    ``gap_us`` (from the previous kernel's end to this one's start; NaN for the first). ``last``
    keeps only the last that many kernels (a window after a warm-up)."""
    import pandas as pd

    evs = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel" and e.get("ph") == "X"]
    if not evs:
        raise BsprofError(
            "the trace has no GPU kernel events: was the profiler run with "
            "ProfilerActivity.CUDA, and did the kernels finish inside it?"
        )
    df = pd.DataFrame(
        {
            "name": [e.get("name", "?") for e in evs],
            "start_us": [float(e["ts"]) for e in evs],
            "dur_us": [float(e["dur"]) for e in evs],
        }
    )
    df = df.sort_values("start_us", kind="stable").reset_index(drop=True)
    df["end_us"] = df["start_us"] + df["dur_us"]
    df["gap_us"] = df["start_us"] - df["end_us"].shift(1)
    if last is not None:
        df = df.iloc[-last:].reset_index(drop=True)
    return df


def launch_summary(spans) -> dict:
    """Medians over ``kernel_spans``: ``kernels``, ``kernel_us`` (GPU duration), ``gap_us``
    (kernel end to the next start) and ``period_us`` (start to start), and ``busy``: the share of
    the window the GPU ran a kernel."""
    durs = spans["dur_us"].tolist()
    gaps = [g for g in spans["gap_us"].tolist() if g == g]
    n = len(durs)
    window = float(spans["end_us"].iloc[-1] - spans["start_us"].iloc[0])
    return dict(
        kernels=n,
        kernel_us=statistics.median(durs),
        gap_us=statistics.median(gaps) if gaps else None,
        period_us=float(spans["start_us"].iloc[-1] - spans["start_us"].iloc[0]) / (n - 1) if n > 1 else None,
        busy=sum(durs) / window if window > 0 else None,
    )
