"""GPU side of `bsprof timing`: build, launch, time and capture a bundled kernel's timing build.

Wall times are medians over many launches in one process, the variants interleaved round by
round (plain, timing, plain, ...) so clock and thermal drift hit them alike.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bsprof.errors import BsprofError
from bsprof.kernels.api import Target

# The three benchmark shapes of the Hopper family (its performance targets); overhead is reported on each.
BENCH_SHAPES: tuple[tuple[int, int, int, int], ...] = (
    (4096, 4096, 4096, 1),
    (8192, 8192, 8192, 1),
    (8192, 8192, 1024, 1),
)


def median_us(
    launchers: dict, *, rounds: int = 30, inner: int = 10, warmup: int = 5, prequeue: int = 2, batch: int = 1
) -> dict[str, float]:
    """Median per-launch time (µs) of each launcher; each round times ``inner`` back-to-back launches
    of every launcher in turn with CUDA events. ``prequeue`` launches are enqueued before the start
    event, so the GPU is already busy when it fires and an idle gap before the first launch stays
    out of the window. (When one launch costs the host more than the GPU, ~125 us for a CuTe DSL
    call, the loop is host-bound whatever is queued: see docs/perf.md; :func:`graph_launcher`
    takes the host out.) ``batch``: kernel launches one launcher call makes (a graph replay)."""
    import torch

    if not launchers:
        return {}
    for fn in launchers.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {k: [] for k in launchers}
    names = list(launchers)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]  # alternate order: no variant always goes first
        for name in order:
            fn = launchers[name]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(prequeue):
                fn()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1000.0 / (inner * batch))
    return {k: statistics.median(v) for k, v in samples.items()}


def raw_launcher(prep):
    """The launch to time. A timing build need not zero its buffer between launches (fixed slots:
    every launch rewrites the same slots), so where a Prepared exposes its compiled function and
    arguments (``kernel_call``) we call them directly, keeping a per-launch memset out of the overhead figure."""
    fn, args = getattr(prep, "kernel_call", (None, None))
    if callable(fn) and isinstance(args, tuple):
        return lambda: fn(*args)
    return prep.launch


def graph_replay(launch_on, launches: int = 1, keep: object = None):
    """A callable replaying one CUDA graph of ``launches`` calls of ``launch_on(stream)`` (each
    issuing its work on the torch stream it is given), or None when the work cannot be captured.
    One call runs on that stream first, outside the capture (lazy set-up: modules, JIT, workspace).
    The graph holds raw device pointers and no Python reference: ``keep`` (what owns the memory the
    work reads and writes; default ``launch_on``) lives as long as the returned callable, so a
    replay never runs on memory its owner gave back."""
    import torch

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch_on(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            for _ in range(launches):
                launch_on(side)
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - any capture failure falls back to eager launches
        torch.cuda.synchronize()
        return None
    owner = launch_on if keep is None else keep

    def replay() -> None:
        graph.replay()

    replay.keep = (graph, owner)
    return replay


def graph_launcher(prep, launches: int):
    """A callable replaying one CUDA graph of ``launches`` back-to-back launches of ``prep``, or
    None when the build cannot be captured. A CuTe DSL launch costs the host about as much as a
    4096^3 kernel runs, so eager back-to-back launches measure the host; a graph replay measures
    the GPU. The kernel's stream argument (the last) is swapped for the capture stream."""
    fn, args = getattr(prep, "kernel_call", (None, None))
    if not (callable(fn) and isinstance(args, tuple) and args):
        return None
    try:
        import cuda.bindings.driver as drv
    except ImportError:
        return None
    return graph_replay(lambda side: fn(*args[:-1], drv.CUstream(side.cuda_stream)), launches, keep=prep)


def median_us_graphs(preps: dict, *, rounds: int = 30, launches: int = 10) -> tuple[dict[str, float], str]:
    """Median µs per launch of each Prepared, through CUDA graphs when every one can be captured
    (GPU time only), else eager launches; returns (medians, "graph" | "eager")."""
    graphs = {k: graph_launcher(p, launches) for k, p in preps.items()}
    if all(g is not None for g in graphs.values()):
        return median_us(graphs, rounds=rounds, inner=1, prequeue=1, batch=launches), "graph"
    return median_us({k: raw_launcher(p) for k, p in preps.items()}, rounds=rounds, inner=launches), "eager"


@dataclass
class Capture:
    table: object  # pandas DataFrame (analyzers.timing.schema)
    raw: object | None  # the int64 event buffer as numpy, when the kernel exposes it
    plan: object | None  # its BufferPlan
    kernel_name: str
    wall_us: float = float("nan")  # median wall time of the captured launches (same clock state)


def capture(prep, *, warmup: int = 3, timed: int = 5) -> Capture:
    """Launch the timing build (fixed slots: the last launch overwrites every slot), time the
    last ``timed`` launches, and decode its buffer."""
    import torch

    prep.launch()  # zeroes the buffer once, then every launch rewrites the same slots
    fn = raw_launcher(prep)
    for _ in range(warmup):
        fn()
    walls = []
    for _ in range(timed):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()  # queued ahead so the timed launch starts on a busy GPU
        start.record()
        fn()
        end.record()
        end.synchronize()
        walls.append(start.elapsed_time(end) * 1000.0)
    torch.cuda.synchronize()
    if not hasattr(prep, "timing_table"):
        raise BsprofError("this kernel build has no timing_table(); was it prepared with timing=True?")
    table = prep.timing_table()
    raw = getattr(prep, "timing_buffer", None)
    plan = getattr(prep, "timing_plan", None)
    if raw is not None and hasattr(raw, "detach"):
        raw = raw.detach().cpu().numpy()
    return Capture(table, raw, plan, getattr(prep, "kernel_name", "?"), statistics.median(walls))


def overhead(target: Target, shapes, *, rounds: int = 30, inner: int = 10, log=None) -> list[dict]:
    """Plain vs timing build of ``target`` on each shape: median µs of each and the overhead in percent."""
    out = []
    for mnkl in shapes:
        on_shape = target.on_problem(mnkl)
        plain = on_shape.prepare(timing=False)
        timed = on_shape.prepare(timing=True)
        med, how = median_us_graphs({"plain": plain, "timing": timed}, rounds=rounds, launches=inner)
        row = {
            "mnkl": list(mnkl),
            "plain_us": med["plain"],
            "timing_us": med["timing"],
            "overhead_pct": 100.0 * (med["timing"] / med["plain"] - 1.0),
            "timed_with": how,
        }
        out.append(row)
        if log:
            log(row)
        del plain, timed
    return out


def capture_run(
    target: Target,
    out: str | os.PathLike,
    *,
    overhead_on: str = "shape",
    rounds: int = 30,
    max_trace_events: int = 200_000,
    log: Callable[[str], None] = lambda msg: None,
) -> tuple[dict, Path]:
    """`bsprof timing` on the GPU: capture ``target``'s timing build, measure what the timing build
    costs (``overhead_on``: "shape", "all" benchmark shapes or "none") and write the timing
    artifacts into a fresh directory under ``out``. Returns (timing.json dict, that directory)."""
    import time

    from bsprof.analyzers.timing.io import write_timing_run
    from bsprof.gpu import device_info
    from bsprof.io import results_dir
    from bsprof.kernels.api import family_for_capability

    info = device_info()
    want = getattr(target.module(), "ARCH", None)
    have = "sm_%d%d" % info["capability"]
    if want and not want.startswith(have[:5]):
        raise BsprofError(
            f"the {target.family} kernels need {want}; this {info['name']} is {have} "
            f"(use --family {family_for_capability(info['capability'])})"
        )
    log(f"[dim]building {target.family} {target.spec} timing build for {target.shape}...[/]")
    timed = target.prepare(timing=True)
    cap = capture(timed)
    # the tile the build ran (a per-problem choice is not in the spec): K blocks against the MMA floor;
    # read before the overhead pass frees the build
    built = getattr(timed, "config", None)
    built = built if isinstance(built, dict) else {}
    cfg = {k: built[k] for k in ("tile_m", "tile_n", "cluster_m", "cluster_n", "split_k") if k in built}
    shapes = {"shape": [target.mnkl], "all": list(BENCH_SHAPES), "none": []}[overhead_on]
    ovh = []
    if shapes:
        del timed  # free its inputs before building the overhead pairs
        log(f"[dim]overhead: plain vs timing build on {len(shapes)} shape(s), {rounds} rounds each...[/]")
        ovh = overhead(target, shapes, rounds=rounds)
    meta = {
        "family": target.family,
        "variant": target.spec,
        "mnkl": list(target.mnkl),
        "device": info["name"],
        "capability": list(info["capability"]),
        "sm_count": info["sm_count"],
        "kernel_name": cap.kernel_name,
        "config": cfg,
    }
    with results_dir(out, f"timing_{target.label}_{time.strftime('%Y%m%d-%H%M%S')}") as staged:
        doc = write_timing_run(
            staged.path,
            cap.table,
            meta=meta,
            overhead=ovh,
            raw=cap.raw,
            plan=cap.plan,
            max_trace_events=max_trace_events,
        )
    return doc, staged.path
