"""The summary at the top: what ran where, how fast, and how far from speed of light and the peers."""

from __future__ import annotations

from typing import Any

from bsprof.artifacts import Run, identity
from bsprof.fmt import fmt, num, pct, short_name
from bsprof.reports.page import Section, note, table


def _shape(ident: dict) -> str:
    mnkl = ident.get("mnkl")
    if not mnkl:
        return ""
    m, n, k, batches = mnkl
    return f"M={m} N={n} K={k}" + (f" L={batches}" if batches != 1 else "")


def facts(run: Run) -> dict[str, Any]:
    """The headline numbers of a run, from whichever artifacts have them (bench first: it times the
    kernel beside its peers; ncu's duration is one profiled launch)."""
    from bsprof.reports import sec_bench, sec_ncu

    out: dict[str, Any] = {}
    ident = identity(run)
    out.update({k: v for k, v in ident.items() if v})
    nc = sec_ncu.headline(run)
    bench = sec_bench.headline(run)
    for src in (nc, bench):  # bench wins where both say something
        out.update({k: v for k, v in src.items() if v not in (None, "", [], {})})
    if bench.get("time_ms") and nc.get("kernel") and nc.get("duration_ns"):
        out["ncu_kernel"], out["ncu_duration_ns"] = nc["kernel"], nc["duration_ns"]
    return out


def render(run: Run) -> Section | None:
    from bsprof.reports import sec_bench

    f = facts(run)
    if not run.artifacts:
        return None
    rows: list[list[Any]] = []
    if f.get("kernel"):
        rows.append(["kernel", short_name(f["kernel"], 110)])
    for key, label in (("family", "family"), ("variant", "variant")):
        if f.get(key):
            rows.append([label, f[key]])
    if f.get("device") or f.get("arch"):
        rows.append(["device", " · ".join(str(x) for x in (f.get("device"), f.get("arch")) if x)])
    shape = _shape(f)
    if shape:
        rows.append(["problem", shape])
    if f.get("grid"):
        launch = f"grid {tuple(f['grid'])}, block {tuple(f.get('block') or [])}"
        if f.get("cluster") and any(f["cluster"]):
            launch += f", cluster {tuple(f['cluster'])}"
        if f.get("registers"):
            launch += f", {fmt(f['registers'])} registers/thread"
        rows.append(["launch", launch])
    t_ms = num(f.get("time_ms"))
    if t_ms is None and num(f.get("duration_ns")) is not None:
        t_ms = num(f["duration_ns"]) / 1e6
    if t_ms is not None:
        how = f.get("time_how") or f"one profiled launch ({f.get('source', 'ncu')})"
        rows.append(["time", f"{t_ms * 1e3:,.1f} µs ({how})"])
    if num(f.get("tflops")) is not None:
        rows.append(["throughput", f"{num(f['tflops']):,.0f} TFLOP/s"])
    peak = num(f.get("peak_tflops"))
    if peak is not None and num(f.get("tflops")) is not None:
        p = num(f["tflops"]) / peak * 100
        rows.append(
            [
                "speed of light",
                f"{pct(p)} of the {fmt(peak)} TFLOP/s dense {f.get('precision') or ''} peak "
                f"(gap: {100 - p:.1f} points, {peak / num(f['tflops']):.2f}× headroom)",
            ]
        )
    if f.get("ncu_kernel"):
        rows.append(
            ["profiled launch", f"{num(f['ncu_duration_ns']) / 1e3:,.1f} µs under ncu ({short_name(f['ncu_kernel'])})"]
        )
    for peer, ratio in (f.get("peer_ratios") or {}).items():
        if num(ratio):
            rows.append([f"vs {peer}", f"{1 / num(ratio):.3f}× its speed (time ratio {num(ratio):.3f})"])
    if f.get("verdict"):
        rows.append(["verdict", f["verdict"]])
    sec = Section("summary", "Summary")
    if rows:
        sec.add(table(rows))
    peers = sec_bench.peers_table(run)
    if peers:
        sec.add(*peers.blocks)
    else:
        sec.add(*_profiled_peers(run, f))
    if not f.get("tflops") and f.get("kernel"):
        sec.add(note("no TFLOP/s: the problem size is unknown for this kernel (bsprof ncu --flops N, or a bench run)"))
    if len(sec.blocks) == 0:
        return None
    sec.add(artifacts_table(run))
    return sec


def _profiled_peers(run: Run, f: dict) -> list[str]:
    """Without a bench run: the other kernels profiled in this run (ncu durations of one launch each;
    separate ncu sessions, so a coarser comparison than bench's same-process medians)."""
    from bsprof.reports import sec_ncu

    peers = sec_ncu.profiled_peers(run)
    mine = num(f.get("duration_ns"))
    if not peers or mine is None:
        return []
    rows = [
        [
            short_name(f.get("kernel", "this kernel")) + " (this run's subject)",
            f"{mine / 1e3:,.1f}",
            fmt(f.get("tflops")),
            "1.000×",
        ]
    ]
    for p in peers:
        d = num(p.get("duration_ns"))
        rows.append(
            [
                short_name(p.get("kernel")),
                f"{d / 1e3:,.1f}" if d else "—",
                fmt(p.get("tflops")),
                f"{d / mine:.3f}×" if d else "—",
            ]
        )
    return [
        table(
            rows,
            ["kernel", "µs (one profiled launch)", "TFLOP/s", "time ÷ subject's"],
            numeric=(1, 2, 3),
            caption="other kernels profiled in this run (ncu, one launch each, separate sessions; "
            "for same-process peer timing add a bench artifact: bsprof bench -o DIR)",
        )
    ]


def _subject(kind: str, d: dict) -> str:
    """One line saying what an artifact is about."""
    from pathlib import Path

    def shape(v: Any) -> str:
        return "x".join(map(str, v[:3])) if isinstance(v, list) and len(v) >= 3 else ""

    dev = d.get("device")
    dev = dev.get("name") if isinstance(dev, dict) else dev
    if kind == "ncu":
        ls = d.get("launches") or [{}]
        cols = ls[0].get("columns") or {}
        return " · ".join(
            str(x)
            for x in (
                short_name(ls[0].get("kernel")),
                cols.get("device"),
                f"{len(ls)} launch(es)" if len(ls) > 1 else "",
                Path(str(d.get("report") or "")).name,
            )
            if x
        )
    if kind == "sass":
        fns = d.get("functions") or [{}]
        f = max(fns, key=lambda fn: fn.get("mma") or 0) if fns else {}
        name = str(f.get("name") or "")
        return " · ".join(
            x
            for x in (
                (name[:60] + "…") if len(name) > 60 else name,
                str(f.get("arch") or ""),
                Path(str(d.get("source") or "")).name,
            )
            if x
        )
    if kind == "model":
        src = d.get("source") or d.get("calibration") or d.get("from")
        if isinstance(src, dict):
            src = src.get("name") or src.get("path") or src.get("kind")
        return str(src or "model projection")
    bits = [dev, d.get("family"), d.get("variant"), shape(d.get("mnkl"))]
    if kind == "validation" and isinstance(d.get("points"), list):
        bits.append(f"{len(d['points'])} points")
    return " · ".join(str(b) for b in bits if b) or kind


def artifacts_table(run: Run) -> str:
    rows = []
    for a in run.artifacts:
        rel = a.path.relative_to(run.root) if run.root.is_dir() else a.path.name
        rows.append([a.kind, _subject(a.kind, a.data), str(rel)])
    return table(rows, ["artifact", "about", "file"], caption="what this run holds")
