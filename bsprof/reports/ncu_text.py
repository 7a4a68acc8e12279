"""Terminal rendering of ``bsprof ncu`` results (the summary JSON of :mod:`bsprof.analyzers.ncu.summary`
and a :class:`~bsprof.analyzers.ncu.compare.Comparison`) with rich. Rule text is printed whole."""

from __future__ import annotations

import math
import re

from bsprof.analyzers.ncu.facts import clock_above_top
from bsprof.fmt import fmt_metric, lit
from bsprof.reports.term import fit_table, pack, say


def _dims(launch: dict, key: str) -> str:
    vals = launch.get(key) or []
    return "x".join("?" if v is None else str(v) for v in vals)


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _peak_text(c: dict) -> str:
    prec = c.get("precision")
    if prec == "fp4" and c.get("arch") == "sm_90" and c.get("peak_tflops") is None:
        return "n/a: sm_90 has no fp4 tensor peak (FP4 MMA starts with sm_100)"
    if c.get("tflops") is None:
        return "n/a (problem size unknown: pass --flops or --mnkl, or name it in the NVTX range: 'flops=...')"
    if c.get("peak_tflops") is None:
        return f"n/a: no {prec or '?'} peak for {c.get('device') or 'this device'} in bsprof's peak table"
    src = c.get("precision_source")
    return (
        f"{fmt_metric(c.get('pct_of_peak'))} % of {fmt_metric(c.get('peak_tflops'))} ({c.get('precision') or '?'}"
        + (f", from {src}" if src else "")
        + ")"
    )


def print_launch(console, launch: dict, *, max_rules: int = 6) -> None:
    from rich.table import Table

    c = launch["columns"]
    t = Table(title=f"launch {lit(c.get('launch'))}: {lit(launch['kernel'])}", show_header=True, title_justify="left")
    t.add_column("metric", no_wrap=True)
    t.add_column("value", justify="right")
    share = _num(c.get("sm_active_cycles_avg")) / _num(c.get("sm_elapsed_cycles_avg"))
    rows = [
        ("duration", fmt_metric(_num(c.get("duration_ns")) / 1e3, "us")),
        (
            "SM / DRAM clock",
            f"{fmt_metric(_num(c.get('sm_clock_hz')) / 1e6)} / {fmt_metric(_num(c.get('dram_clock_hz')) / 1e6)} MHz"
            + (f" (SM {note})" if (note := clock_above_top(c)) else ""),
        ),
        (
            "cycles: SM / busiest SM",
            f"{fmt_metric(c.get('sm_elapsed_cycles_avg'))} / {fmt_metric(c.get('sm_active_cycles_max'))}",
        ),
        ("grid / block / cluster", f"{_dims(launch, 'grid')} / {_dims(launch, 'block')} / {_dims(launch, 'cluster')}"),
        (
            "CTAs / SMs / waves",
            f"{fmt_metric(c.get('grid_size'))} / {fmt_metric(c.get('sm_count'))} / {fmt_metric(c.get('waves_per_sm'))}",
        ),
        ("SM active / elapsed", fmt_metric(100 * share, "%")),
        ("registers / thread", fmt_metric(c.get("registers_per_thread"))),
        ("shared mem / block", fmt_metric(c.get("smem_per_block_bytes"), "B")),
        (
            "occupancy achieved / theor.",
            f"{fmt_metric(c.get('achieved_occupancy_pct'))} / {fmt_metric(c.get('theoretical_occupancy_pct'))} %",
        ),
        ("issue slots busy", fmt_metric(c.get("issue_active_pct"), "%")),
        ("eligible warps / cycle", fmt_metric(c.get("eligible_warps_per_cycle"))),
        (
            "SOL compute / memory (ncu)",
            f"{fmt_metric(c.get('sol_compute_pct'))} / {fmt_metric(c.get('sol_memory_pct'))} %",
        ),
        (
            "tensor pipe active / elapsed",
            f"{fmt_metric(c.get('tensor_pipe_pct'))} / {fmt_metric(c.get('tensor_pipe_elapsed_pct'))} %",
        ),
        (
            "DRAM / L2 / L1 throughput",
            f"{fmt_metric(c.get('dram_throughput_pct'))} / {fmt_metric(c.get('l2_throughput_pct'))} / {fmt_metric(c.get('l1_throughput_pct'))} %",
        ),
        ("L2 / L1 hit rate", f"{fmt_metric(c.get('l2_hit_pct'))} / {fmt_metric(c.get('l1_hit_pct'))} %"),
        ("TFLOP/s", fmt_metric(c.get("tflops"))),
        ("% of peak", _peak_text(c)),
        ("warp cycles / issue", fmt_metric(c.get("warp_cycles_per_issue"))),
        ("replay passes", fmt_metric(c.get("replay_passes"))),
    ]
    for name, value in rows:
        t.add_row(name, value)
    console.print(t)
    if c.get("flops_source") and c.get("tflops") is not None and c["flops_source"] not in ("--flops", "NVTX range"):
        console.print(f"FLOPs from {lit(c['flops_source'])}: {c['flops']:.4g}")
    if warn := (launch.get("derived") or {}).get("flops_check"):
        console.print(lit(warn, 4000))
    stalls = sorted(((k[6:], v) for k, v in c.items() if k.startswith("stall_") and v), key=lambda kv: -kv[1])[:6]
    if stalls:
        console.print(
            pack(
                ["stalls (cycles per issued instruction): " + f"{stalls[0][0]} {stalls[0][1]:.2f}"]
                + [f"{k} {v:.2f}" for k, v in stalls[1:]],
                console.width,
                sep=", ",
                indent="  ",
            ),
            markup=False,
            highlight=False,
        )
    ops = list(launch.get("inst_executed_by_opcode", {}).items())[:8]
    if ops:
        console.print(
            pack(
                [f"executed instructions: {ops[0][0]} {int(ops[0][1]):,}"] + [f"{k} {int(v):,}" for k, v in ops[1:]],
                console.width,
                sep=", ",
                indent="  ",
            ),
            markup=False,
            highlight=False,
        )
    print_verdict(console, launch.get("verdict_detail") or {})
    rules = [r for r in launch.get("rules", []) if r["kind"] in ("optimization", "warning", "error")]
    if rules:
        console.print("ncu rules (estimated speedup, largest first):")
        for r in rules[:max_rules]:
            sp = f"{r['speedup_pct']:.1f}% {r['speedup_type']}" if r["speedup_pct"] is not None else "n/a"
            say(console, f"{sp:>14}  {r['section']}/{r['rule']}: {r['title'] or r['name']}", indent="  ", hang=" " * 18)
            if r.get("message"):
                say(console, r["message"], indent=" " * 18, hang=" " * 18)
    for note in launch.get("notes", []):
        if note.startswith("missing: "):  # the JSON keeps the ncu names; on screen the columns are enough
            cols = re.sub(r" \((?:[^()]|\([^()]*\))*\)", "", note[len("missing: ") :])
            console.print(f"[dim]not in this report (NaN): {lit(cols, 4000)}[/dim]")
        else:
            console.print(f"[dim]note: {lit(note, 4000)}[/dim]")


def print_verdict(console, v: dict) -> None:
    head = (v.get("label") or v.get("class", "?")) + (f" ({v['detail']})" if v.get("detail") else "")
    head += f" + {', '.join(v['flags'])}" if v.get("flags") else ""
    known = ", ".join(str(v[k]) for k in ("kind", "arch") if v.get(k))
    from rich.markup import escape

    console.print(
        f"[bold]verdict: {escape(head)}[/bold]" + (f"  [dim]kernel kind {escape(known)}[/dim]" if known else "")
    )
    for fact in v.get("facts", []):
        say(console, fact, indent="  ", hang="    ")
    busy = v.get("busy") or {}
    if v.get("class") in ("launch-bound", "under-filled") and busy.get("class"):
        say(console, f"busy SMs: {busy['class']}" + (f" ({busy['unit']})" if busy.get("unit") else ""), indent="  ")
    for e in v.get("evidence", []):
        say(console, f"because {e}", indent="  ", hang="    ")
    prices = v.get("prices") or []
    for i, cand in enumerate(v.get("candidates", [])):
        say(console, f"try: {cand}", indent="  ", hang="    ")
        if i < len(prices) and prices[i].get("text"):
            # what following it would buy: the projected speedup, and ncu's estimate on the same lever
            say(console, f"→ {prices[i]['text']}", indent="    ", hang="      ")
    if (room := v.get("headroom")) and room.get("bounded"):
        # the most any change buys that keeps the work: the lines above are levers that change it
        say(console, f"headroom, the work kept: {room['text']}", indent="  ", hang="    ")
    for line in v.get("ncu", []):
        say(console, line, indent="  ", hang="    ")
    for m in v.get("missing", []):
        say(console, f"this report lacks {m}", indent="  ", hang="    ", style="yellow")


# what each sequence price stands for, in the order shown
SEQUENCE_LEVERS = (
    ("memory-bound/dram/*", "fuse them into one launch (the first one's reads, the last one's writes)"),
    (
        "launch-bound/*/*",
        "batch them into one launch (one fixed cost; GPU time: the host's launch time is not in a report)",
    ),
)


def _spans(ids: list) -> str:
    """Launch numbers as runs: 5-9, 12."""
    if not all(isinstance(i, (int, float)) and not isinstance(i, bool) for i in ids):
        return ", ".join(lit(i) for i in ids)
    runs: list[list[int]] = []
    for i in (int(v) for v in ids):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def print_sequences(console, payload: dict) -> None:
    """Launches that run as one sequence (one NVTX range, or a report without ranges): what fusing or
    batching them would buy, which a single launch's line can only call unbounded."""
    launches = payload.get("launches") or []
    for seq in payload.get("sequences") or []:
        ids = [(launches[i].get("columns") or {}).get("launch", i) for i in seq["launches"] if i < len(launches)]
        where = f"NVTX range {seq['range']}" if seq.get("range") else "the report's launches, in order"
        say(
            console,
            f"sequence: {where} ({len(ids)} launches: {_spans(ids)}; "
            f"{fmt_metric(seq.get('duration_us'), 'us')} together)",
            hang="    ",
            style="bold",
        )
        for pid, what in SEQUENCE_LEVERS:
            if p := (seq.get("prices") or {}).get(pid):
                say(console, f"try: {what}", indent="  ", hang="    ")
                say(console, f"→ {p['text']}", indent="    ", hang="      ")


def print_compare(console, cmp) -> None:
    from rich.table import Table

    from bsprof.fmt import short_name

    # a kernel name of hundreds of characters is cut to the line (the file below it says which launch)
    name_w = max(20, console.width - 3)
    t = Table(
        title=f"{lit(cmp.title)}\nA: {lit(short_name(cmp.a_kernel, name_w))}\n   {lit(cmp.a_name)}\n"
        f"B: {lit(short_name(cmp.b_kernel, name_w))}\n   {lit(cmp.b_name)}",
        title_justify="left",
    )
    for col in ("metric", cmp.a_label, cmp.b_label, "B - A", "change"):
        # the labels are the user's (--label, file names): their brackets are text, not markup
        t.add_column(lit(col), justify="left" if col == "metric" else "right", no_wrap=col != "metric")
    for r in cmp.table.to_dict("records"):
        pct = "" if math.isnan(r["delta_pct"]) else f"{r['delta_pct']:+.1f}%"
        t.add_row(r["metric"], fmt_metric(r["a"]), fmt_metric(r["b"]), fmt_metric(r["delta"]), pct)
    dropped = fit_table(console, t, [3])  # the difference goes before a value would be cut
    console.print(t)
    if dropped:
        from bsprof.reports.term import left_out_note

        console.print(left_out_note(dropped, "--json has every value"))
    for line in getattr(cmp, "notes", []):
        say(console, line, hang="  ")
    for tag, v in ((cmp.a_label, cmp.a_verdict), (cmp.b_label, cmp.b_verdict)):
        say(
            console,
            f"verdict {tag}: {v.label}"
            + (f" ({v.detail})" if v.detail else "")
            + (f" + {', '.join(v.flags)}" if v.flags else ""),
        )
        for e in v.evidence:
            say(console, f"because {e}", indent="  ", hang="    ")
