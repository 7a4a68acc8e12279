"""Bench results: the kernel's time beside cuBLAS (and DeepGEMM on Hopper), measured in one process.

Reads the ``bench`` artifact (``bsprof bench -o DIR``, or ``--json > DIR/bench.json``): ``family``, ``variant``,
``device``, ``mnkl``, ``warmup``, ``iters``, ``rows`` (one per kernel: ``name``, ``ours``, ``ms``
median, ``tflops``, ``rel_err``; since the clock readout also ``sm_mhz``, ``watts``,
``clock_limiters``, ``flop_per_sm_cycle``; with interleaved rounds ``ms_rounds`` and
(where the bench read them) ``sm_mhz_rounds`` / ``watts_rounds``; with rounds over copies of the
operands ``placement_rounds`` (the copy each round ran on; ``placements`` on the problem); with
``--launch-gaps`` ``kernel_us`` /
``gap_us``; ours ``tile`` and ``choice``, the configuration and why the tile choice made it; a close
call timed by ``--close-calls`` its ``close_call`` spec) and ``skipped`` (peers that could not
run and specs the problem refused, with why).
"""

from __future__ import annotations

from typing import Any

from bsprof.analyzers.bench_rows import clock_cells, column_labels, round_spread, spread_cell
from bsprof.artifacts import Artifact, Run, identity, mnkl_of
from bsprof.fmt import fmt, num
from bsprof.reports.page import Figure, Section, note, table


def _bench(run: Run) -> tuple[Artifact, dict, dict | None] | None:
    """(artifact, its data, the row of the variant it was run for)."""
    for art in run.of("bench"):
        for d in _problems(art.data):
            rows = [r for r in d.get("rows") or [] if isinstance(r, dict) and num(r.get("ms")) is not None]
            if not rows:
                continue
            variant = d.get("variant")
            mine = next((r for r in rows if r.get("ours") and r.get("name") == variant), None)
            mine = mine or next((r for r in rows if r.get("ours")), None)
            return art, d, mine
    return None


def _problems(data: dict) -> list[dict]:
    """`bsprof bench --json` holds one problem; `benchmarks/*.py --json` a list under ``results``.
    Each problem inherits the file's family / variant / device."""
    results = data.get("results")
    if not isinstance(results, list):
        return [data]
    shared = {k: v for k, v in data.items() if k != "results"}
    return [{**shared, **r} for r in results if isinstance(r, dict)]


def _device_name(d: dict) -> str | None:
    dev = d.get("device")
    if isinstance(dev, dict):
        return dev.get("name")
    return dev if isinstance(dev, str) else None


def peak_for(device: str | None, family: str | None, precision: str | None = None) -> tuple[float | None, str | None]:
    """Dense peak TFLOP/s of the device for the family's precision (the ncu analyzer's table)."""
    try:
        from bsprof.analyzers.ncu.peaks import FAMILY_PRECISION, peak_tflops
    except ImportError:
        return None, None
    prec = precision or FAMILY_PRECISION.get(family or "")
    if not prec or not device:
        return None, prec
    return peak_tflops(device, prec), prec


def headline(run: Run) -> dict[str, Any]:
    got = _bench(run)
    if not got:
        return {}
    art, d, mine = got
    out: dict[str, Any] = {"family": d.get("family"), "variant": d.get("variant"), "device": _device_name(d)}
    if mnkl_of(d.get("mnkl")):
        out["mnkl"] = mnkl_of(d.get("mnkl"))
    if mine is None:
        return out
    family = d.get("family") or identity(run).get("family")  # older bench files name no family
    out["kernel"] = " ".join(str(x) for x in ("bsprof", family, mine.get("name")) if x)
    out["time_ms"] = num(mine.get("ms"))
    out["tflops"] = num(mine.get("tflops"))
    out["time_how"] = f"median of {d.get('iters', '?')} launches after {d.get('warmup', '?')} warm-up, bench"
    peak, prec = peak_for(out["device"], d.get("family"))
    if peak:
        out["peak_tflops"], out["precision"] = peak, prec
    out["peer_ratios"] = {
        r["name"]: num(mine["ms"]) / num(r["ms"])
        for r in d.get("rows") or []
        if isinstance(r, dict) and not r.get("ours") and num(r.get("ms"))
    }
    out["source"] = art.path.name
    return out


def peers_table(run: Run) -> Section | None:
    """The bench rows as a table and a TFLOP/s bar chart (with the device peak), or None."""
    import plotly.graph_objects as go

    got = _bench(run)
    if not got:
        return None
    art, d, mine = got
    rows = [r for r in d.get("rows") or [] if isinstance(r, dict) and num(r.get("ms")) is not None]
    ref = num(mine["ms"]) if mine else None
    # a bench that read the clock the kernel ran at (bsprof.profile.sensors) has these columns; older ones do not
    clocks = any(num(r.get("sm_mhz")) for r in rows)
    spreads = any(round_spread(r) is not None for r in rows)
    # `benchmarks/fp8_blockwise.py --launch-gaps`: CUPTI's kernel duration and the idle gap before it
    gaps = any(num(r.get("kernel_us")) is not None for r in rows)
    labels = column_labels(rows)
    body = []
    for r, label in zip(rows, labels):
        err = r.get("rel_err")
        line = [
            label,
            "bsprof" if r.get("ours") else "peer",
            f"{num(r['ms']) * 1e3:,.1f}",
            fmt(r.get("tflops")),
            f"{ref / num(r['ms']):.3f}×" if ref else "—",
        ]
        if clocks:
            line += clock_cells(r)
        if spreads:
            line.append(spread_cell(r))
        if gaps:
            line += [f"{v:,.1f}" if v is not None else "—" for v in (num(r.get("kernel_us")), num(r.get("gap_us")))]
        line.append(f"{err:.2e}" if isinstance(err, float) else (str(err) if err is not None else "—"))
        body.append(line)
    head = ["kernel", "", "median µs", "TFLOP/s", f"speed vs {mine.get('name') if mine else '?'}"]
    if clocks:
        head += ["SM MHz", "board W", "FLOP / SM-cycle"]
    if spreads:
        head.append("round spread")
    if gaps:
        head += ["kernel µs (CUPTI)", "gap µs"]
    head.append("rel. error vs float64")
    rounds = f", median round of {d['rounds']}" if (d.get("rounds") or 1) > 1 else ""
    sec = Section("peers", "")
    sec.add(
        table(
            body,
            head,
            numeric=tuple(range(2, len(head) - 1)),
            caption=f"measured in one process on the same inputs: {d.get('warmup', '?')} warm-up, median of "
            f"{d.get('iters', '?')} launches{rounds} ({art.path.name})",
        )
    )
    if clocks:
        sec.add(
            note(
                "SM clock and power read from NVML while the timed launches ran (* = the driver named the "
                "power cap as the clock limiter). FLOP / SM-cycle is TFLOP/s with the clock divided out: "
                "at the cap a kernel loses on cycles (scheduling) or on clock (energy per FLOP)."
            )
        )
    if spreads:
        sec.add(
            note(
                "round spread: slowest over fastest of the interleaved rounds, minus one (in brackets the "
                "same over each round's cycles, time × the SM clock it ran at, where the bench kept "
                "per-round clocks: small beside the time's spread, the rounds moved with the clock). A "
                "difference between two kernels smaller than their spreads is not one a single run decides."
            )
        )
    if gaps:
        sec.add(
            note(
                "kernel µs and gap µs: CUPTI (torch.profiler) over 30 back-to-back launches, the kernel's GPU "
                "duration and the idle time before it; the median µs column is both, timed with CUDA events."
            )
        )
    if mine is not None and mine.get("tile"):
        chosen = f" (chosen: {mine['choice']})" if mine.get("choice") else ""
        sec.add(note(f"{mine.get('name')} ran {mine['tile']}{chosen}"))
    close = [r for r in rows if r.get("close_call")]
    if close:
        sec.add(
            note(
                "close calls, the configurations the tile choice modelled too near its pick to rank, timed "
                "beside it: " + "; ".join(f"{r['name']} = {r['close_call']}" for r in close)
            )
        )
    for name, why in (d.get("skipped") or {}).items():
        sec.add(note(f"peer {name} not measured: {why}"))
    peak, prec = peak_for(_device_name(d), d.get("family"))
    names = labels[::-1]
    vals = [num(r.get("tflops")) or 0 for r in rows][::-1]
    fig = go.Figure(
        go.Bar(
            x=vals,
            y=names,
            orientation="h",
            marker_color=["#c0504d" if r.get("ours") else "#7f7f7f" for r in rows][::-1],
            text=[f"{v:,.0f}" for v in vals],
            textposition="outside",
            hovertemplate="%{y}: %{x:,.0f} TFLOP/s<extra></extra>",
        )
    )
    if peak:
        fig.add_vline(
            x=peak,
            line_dash="dash",
            line_color="#1d2330",
            annotation_text=f"dense {prec} peak {peak:,.0f}",
            annotation_position="top left",
        )
    fig.update_layout(
        xaxis=dict(title="TFLOP/s", range=[0, max(vals + [peak or 0]) * 1.15]),
        showlegend=False,
        title=dict(text="Throughput beside the peers (speed of light dashed)", font=dict(size=13)),
    )
    sec.add(Figure(fig, height=110 + 30 * len(rows)))
    return sec


__all__ = ["headline", "peers_table", "peak_for"]
