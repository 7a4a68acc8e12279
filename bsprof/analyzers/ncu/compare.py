"""Two profiled launches side by side: key metrics, deltas, both verdicts.

Inputs are .ncu-rep files or bsprof result directories (the .ncu-rep inside is used).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from bsprof.analyzers.ncu.extract import extract
from bsprof.analyzers.ncu.facts import THRESHOLDS
from bsprof.analyzers.ncu.verdict import Verdict, classify
from bsprof.analyzers.ncu_loader import report_stem, resolve_report
from bsprof.errors import BsprofError

KEY_COLUMNS: tuple[str, ...] = (
    "duration_ns",
    "sm_clock_hz",
    "sm_elapsed_cycles_avg",
    "sm_active_cycles_max",
    "sm_active_cycles_avg",
    "tflops",
    "pct_of_peak",
    "sol_compute_pct",
    "sol_memory_pct",
    "tensor_pipe_pct",
    "dram_throughput_pct",
    "l2_throughput_pct",
    "smem_pipe_pct",
    "l2_hit_pct",
    "l1_hit_pct",
    "achieved_occupancy_pct",
    "issue_active_pct",
    "eligible_warps_per_cycle",
    "warp_cycles_per_issue",
    "registers_per_thread",
    "smem_per_block_bytes",
    "inst_executed",
    "replay_passes",
    "l2_to_sm_bytes",
    "dram_bytes_read",
)
# bytes from sector counts, for the table
SECTOR_COLUMNS = {"l2_to_sm_bytes": "l2_read_sectors_sm"}


@dataclass
class Comparison:
    table: object  # DataFrame: metric, a, b, delta, delta_pct
    a_name: str
    b_name: str
    a_kernel: str
    b_kernel: str
    a_verdict: Verdict
    b_verdict: Verdict
    a_label: str = "A"
    b_label: str = "B"
    notes: list[str] = field(default_factory=list)  # clock and cycles: what µs alone would mislead on

    @property
    def title(self) -> str:
        return f"{self.a_label} vs {self.b_label}"


def recorded_flops(path: str | Path) -> float | None:
    """FLOPs of the launch a bsprof result directory recorded (summary.json), if any."""
    from bsprof.artifacts import load

    summary = Path(path) / "summary.json"
    if not Path(path).is_dir() or not os.path.lexists(summary):
        return None
    launch = load(summary, "ncu").get("launch")  # a damaged summary is one error line, not a guess
    flops = launch.get("flops") if isinstance(launch, dict) else None
    if flops is None:
        return None
    if isinstance(flops, bool) or not isinstance(flops, (int, float)) or not math.isfinite(flops) or flops < 0:
        raise BsprofError(
            f"{summary}: launch.flops is {flops!r}, not a FLOP count; re-run bsprof ncu, or pass --flops "
            "(which this file then does not override)"
        )
    return float(flops) or None


def _pick(path: Path, filter: str | None, flops: float | None, option: str = "--filter"):
    ex = extract(path, filter=filter, flops=flops, with_rules=False, option=option)
    return ex.table.iloc[0], len(ex.table)


def report_label(path: str | Path) -> str:
    """What a report is called in a comparison: its result directory's name, or the file's stem."""
    p = Path(path)
    return p.name if p.is_dir() else report_stem(p)


def compare(
    a: str | Path,
    b: str | Path,
    *,
    filter: str | None = None,
    flops: float | None = None,
    labels: tuple[str, str] | None = None,
    filter_b: str | None = None,
) -> Comparison:
    """Compare the first launch (matching ``filter``; on B ``filter_b`` where given, so two launches of
    one report compare too) of each report. ``flops`` (or the FLOPs a result directory recorded) gives
    TFLOP/s and % of peak."""
    import pandas as pd

    pa, pb = resolve_report(a), resolve_report(b)
    ra, _ = _pick(pa, filter, recorded_flops(a) or flops)
    rb, _ = _pick(pb, filter_b or filter, recorded_flops(b) or flops, "--filter-b" if filter_b else "--filter")
    stalls = sorted(
        {c for c in list(ra.index) + list(rb.index) if c.startswith("stall_")},
        key=lambda c: -max(_f(ra.get(c)), _f(rb.get(c))),
    )[:5]
    rows = []
    for col in list(KEY_COLUMNS) + stalls:
        if col in SECTOR_COLUMNS:
            va, vb = 32.0 * _f(ra.get(SECTOR_COLUMNS[col])), 32.0 * _f(rb.get(SECTOR_COLUMNS[col]))
        else:
            va, vb = _f(ra.get(col)), _f(rb.get(col))
        delta = vb - va
        pct = 100.0 * delta / va if va and not math.isnan(va) and not math.isnan(vb) else math.nan
        rows.append({"metric": col, "a": va, "b": vb, "delta": delta, "delta_pct": pct})
    la, lb = labels or (report_label(a), report_label(b))
    if la == lb:
        la, lb = f"A: {la}", f"B: {lb}"
    return Comparison(
        pd.DataFrame(rows),
        str(pa),
        str(pb),
        ra["kernel"],
        rb["kernel"],
        classify(ra),
        classify(rb),
        la,
        lb,
        notes=clock_notes(ra, rb),
    )


def _change(a: float, b: float) -> str:
    return f"{100 * (b - a) / a:+.1f}%" if a and not math.isnan(a) and not math.isnan(b) else "n/a"


def clock_notes(ra, rb) -> list[str]:
    """Duration beside SM cycles and clock: under ``--clock-control none`` the SM clock moves a few %
    between launches, enough to reverse a comparison made in microseconds."""
    da, db = _f(ra.get("duration_ns")) / 1e3, _f(rb.get("duration_ns")) / 1e3
    ea, eb = _f(ra.get("sm_elapsed_cycles_avg")), _f(rb.get("sm_elapsed_cycles_avg"))
    ma, mb = _f(ra.get("sm_active_cycles_max")), _f(rb.get("sm_active_cycles_max"))
    if any(math.isnan(x) or x <= 0 for x in (da, db, ea, eb)):
        return []
    ca, cb = ea / da, eb / db
    out = [
        f"duration {da:.2f} -> {db:.2f} us ({_change(da, db)}); SM clock {ca:,.0f} -> {cb:,.0f} MHz ({_change(ca, cb)}); "
        f"elapsed SM cycles {ea:,.0f} -> {eb:,.0f} ({_change(ea, eb)})"
        + (f"; busiest SM active {ma:,.0f} -> {mb:,.0f} cycles ({_change(ma, mb)})" if not math.isnan(ma + mb) else "")
    ]
    if abs(cb - ca) >= THRESHOLDS["clock_change_pct"] / 100 * ca:
        out.append(
            f"the SM clocks differ by {_change(ca, cb)} (>= {THRESHOLDS['clock_change_pct']:.0f}%, clock_change_pct): "
            "compare the cycles; the microseconds include the clock change"
        )
    return out


def _f(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan
