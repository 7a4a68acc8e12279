"""Terminal rendering of `bsprof model --change` (the chain: SASS -> cycles per phase -> wall time)
and of `bsprof model --validate --changes`. Pure presentation, within 80 columns."""

from __future__ import annotations

import math

from bsprof.analyzers.model.change_record import CHECKED_LEVEL, record_lines, shipped_record
from bsprof.fmt import lit
from bsprof.reports.term import say

SHORT = {"tma0": "TMA0", "kloop": "K-loop", "phase1": "Phase 1", "producer": "producer", "prologue": "prologue"}


def change_doc(res: dict, model_result=None) -> dict:
    """The JSON of one chain (``--json``, model.json): the per-phase deltas with where each came from,
    the projection and its interval, the count rule; the model's own projection document beside."""
    doc: dict = {
        "change": {
            "a": res["a"],
            "b": res["b"],
            "kernels_differ": bool(res.get("kernels_differ")),
            "tile": res["tile"],
            "mnkl": res["mnkl"],
        }
    }
    if res.get("compiler"):
        doc["change"]["compiler"] = res["compiler"]
    if "kloop_only" in res:
        doc["change"]["kloop_only"] = res["kloop_only"].to_json()
        doc["change"]["borrowed_from"] = res.get("borrowed_from", "")
        return doc
    pr = res["projection"]
    doc["change"].update(pr.to_json())
    record = shipped_record()
    if record and record.get("all"):
        kinds = res["estimate"].kinds
        doc["change"]["record"] = {
            "kinds": list(kinds),
            "checked": {k: record["kinds"][k] for k in kinds if k in record["kinds"]},
            "all": record["all"],
            "runs": record["runs"],
            "checked_level": (record.get("checked") or {}).get("level"),
        }
    doc["change"]["base"] = {k: v for k, v in vars(res["base"]).items()}
    if model_result is not None:
        doc.update(model_result.doc)
    return doc


def _c(v: float) -> str:
    return f"{v:+,.0f}"


def render_change(console, res: dict, model_result=None) -> None:
    from rich.table import Table

    console.print(f"change: {res['a']}", markup=False)
    console.print(f"    ->  {res['b']}", markup=False)
    if res.get("compiler"):
        # the bundled builds' SASS is the GPU's only where both compile with the same flavor (kernels/build.py)
        console.print(f"  compiled here with {res['compiler']}", markup=False)
    if res.get("kernels_differ"):
        say(
            console,
            "note: A and B are two different kernels (their function names part at the start): the chain "
            "prices a change of one kernel's code, so these numbers compare two kernels instead",
            indent="  ",
            hang="    ",
            style="yellow",
        )
    if "kloop_only" in res:
        _render_kloop_only(console, res)
        return
    est, pr = res["estimate"], res["projection"]
    t = Table(
        title="cycles per tile, by phase (SASS x the base capture's cost)", title_justify="left", header_style="bold"
    )
    for col in ("phase", "Δ instr", "Δ cycles", "interval", "count rule"):
        t.add_column(col, justify="left" if col == "phase" else "right", no_wrap=True)
    for d in est.deltas:
        if not d.instructions and not d.unpriced:
            continue
        t.add_row(SHORT[d.phase], f"{d.instructions:+,.1f}", _c(d.cycles), f"{_c(d.lo)}..{_c(d.hi)}", _c(d.count_rule))
    console.print(t)
    for d in est.deltas:
        if d.instructions or d.unpriced:
            if d.source:
                console.print(f"  {SHORT[d.phase]}: {d.source}", markup=False)
            if d.top_opcodes:
                ops = ", ".join(f"{op} {v:+g}" for op, v in d.top_opcodes)
                console.print(f"    opcodes a tile: {ops}", markup=False)
    for u in est.unpriced():
        console.print(f"  not priced: {u}", markup=False)
    for n in est.notes:
        console.print(f"  note: {n}", markup=False)
    if model_result is not None:
        from bsprof.reports.model_text import render_model

        render_model(console, model_result)
    base = res["base"]
    lo, hi = 100 * (pr.wall_lo - 1), 100 * (pr.wall_hi - 1)
    if pr.checked_pp is not None:
        # the interval a user can plan with: how far held-out prices like this one missed their timings
        console.print(
            f"wall time {pr.wall_pct:+.2f}% ± {pr.checked_pp:.2f} pp ({CHECKED_LEVEL:.0%} checked interval; "
            f"SASS bounds {lo:+.2f}..{hi:+.2f}%)",
            markup=False,
        )
    else:
        console.print(
            f"wall time {pr.wall_pct:+.2f}% (interval {lo:+.2f}..{hi:+.2f}%; a measurement adds ±{pr.noise_pp:.1f} pp)",
            markup=False,
        )
    clock = (
        f"clock x{pr.clock_ratio:.3f} from {base.mhz:,.0f} MHz ({base.limits['power_limit_w']:.0f} W cap)"
        if base.mhz and base.limits
        else "no clock term (give --clock MHZ@W)"
    )
    console.print(f"  cycles {100 * (pr.cycles_ratio - 1):+.2f}% (busy {base.busy:.2f}), {clock}", markup=False)
    console.print(
        f"  instruction-count rule: {100 * (pr.count_rule_ratio - 1):+.2f}% (instructions x the phase's CPI, 1:1)",
        markup=False,
    )
    # how projections of this kind of change scored where they were checked against a timing
    for i, line in enumerate(record_lines(est.kinds, shipped_record())):
        say(console, line, indent="  " if i == 0 else "    ", hang="      ")


def _render_kloop_only(console, res: dict) -> None:
    k = res["kloop_only"]
    console.print(
        f"K-loop, per K block (tile {res['tile'][0]}x{res['tile'][1]}, "
        f"{k.mma_per_kblock[0]:g} MMAs a K block per warp):",
        markup=False,
    )
    console.print(
        f"  instructions {k.per_kblock_a:,.1f} -> {k.per_kblock_b:,.1f} ({k.per_kblock_b - k.per_kblock_a:+,.1f})",
        markup=False,
    )
    console.print(
        f"  cycles {k.cycles_per_kblock:+,.1f} (interval {k.lo:+,.1f}..{k.hi:+,.1f}) of a "
        f"{k.floor_kblock:,.0f}-cycle tensor-core floor",
        markup=False,
    )
    if k.k_blocks:
        console.print(
            f"  per tile ({k.k_blocks} K blocks): {k.cycles_per_kblock * k.k_blocks:+,.0f} cycles "
            f"({k.lo * k.k_blocks:+,.0f}..{k.hi * k.k_blocks:+,.0f})",
            markup=False,
        )
    if k.top_opcodes:
        console.print("  opcodes a K block: " + ", ".join(f"{op} {v:+g}" for op, v in k.top_opcodes), markup=False)
    console.print(
        f"  point: {k.borrowed_rate:.2f} cycles an instruction, borrowed from {res.get('borrowed_from', '')}",
        markup=False,
    )
    for line in k.priced:
        console.print(f"  priced: {line}", markup=False)
    for u in k.unpriced:
        console.print(f"  not priced: {u}", markup=False)


def _pp(v) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:+.2f}"


def render_validation_changes(console, scored: dict) -> None:
    """One row per (pair, problem): projection and interval, measured change, the three errors."""
    from rich.table import Table

    t = Table(
        title=f"changes priced from SASS vs measured, % wall time ({lit(scored.get('device') or '?')})",
        title_justify="left",
        header_style="bold",
        padding=(0, 1),
    )
    for col in ("change", "model", "meas.", "err", "count", "err", "in"):
        t.add_column(col, justify="left" if col == "change" else "right", no_wrap=True)
    shown = None
    for p in scored["points"]:
        if p["problem"] != shown:
            if shown is not None:
                t.add_section()
            t.add_row(f"[bold]{lit(p['problem'])}[/]", "", "", "", "", "", "")
            shown = p["problem"]
        t.add_row(
            lit(p["change"]),
            _pp(p["projected_pct"]),
            _pp(p["measured_pct"]),
            _pp(p["err_model_pp"]),
            _pp(p["count_rule_pct"]),
            _pp(p["err_rule_pp"]),
            "yes" if p["covered"] else "no",
        )
    console.print(t)
    s = scored["summary"]
    if not s.get("points"):
        return
    for key, name in (
        ("model", "model"),
        ("no_change", "no change"),
        ("count_rule", "count rule"),
        ("model_priced", "model where SASS priced all"),
        ("model_unpriced", "model, the rest"),
    ):
        v = s.get(key)
        if v:
            console.print(f"  {name}: median {v['median']:.2f} pp, max {v['max']:.2f} pp", markup=False)
    console.print(
        f"  intervals hold {s['covered']} of {s['points']}; sign wrong on {len(s['sign_wrong'])}; "
        f"{s['measured_ge_2pct']} points moved >= 2%",
        markup=False,
    )
    if s.get("checked_points"):
        console.print(
            f"  checked intervals (as committed) hold {s['checked_covered']} of {s['checked_points']}, "
            f"median ±{s['checked_median_half_pp']:.2f} pp",
            markup=False,
        )
    if sp := s.get("error_split"):
        # wall = cycles / clock: which side of the projection missed, against each build's NVML clock
        console.print(
            f"  error split, wall = cycles / clock (NVML clock of each build, {sp['points']} points): cycles "
            f"median {sp['cycles_median_pp']:.2f} pp, clock {sp['clock_median_pp']:.2f} pp; past 3 pp: "
            f"{sp['past_3pp_in_cycles']} of {sp['past_3pp']} in the cycles",
            markup=False,
        )
    if fr := s.get("first_repeat"):
        # the mean of the paired ratios carries the first repeat: say when it measured apart from the rest
        note = "; off: the first repeat leans every mean that way, time the pairs again" if fr["off"] else ""
        console.print(
            f"  first repeat against the others: median {fr['median_pp']:+.2f} pp over {fr['points']} points{note}",
            markup=False,
        )
    missed = [k for k, ok in s["targets"].items() if not ok]
    console.print("  targets: " + ("met" if not missed else "missed " + ", ".join(missed)), markup=False)


def render_runs(console, res: dict) -> None:
    """Every stored delay-injection run: its verdict, the band's and the interval's coverage."""
    from rich.table import Table

    t = Table(
        title="stored --validate runs, |error| % of wall time",
        title_justify="left",
        header_style="bold",
        padding=(0, 1),
    )
    for col in ("run", "n", "median", "max", "met", "band", "±int", "held"):
        # a run's name folds onto a second line rather than being cut: two runs differ only at its end
        t.add_column(
            col,
            justify="left" if col in ("run", "met") else "right",
            no_wrap=col != "run",
            overflow="fold" if col == "run" else "ellipsis",
        )
    for r in res["runs"]:
        t.add_row(
            lit(r["run"]),  # named by the user's directories: brackets in it are text, not markup
            str(r["points"]),
            f"{r['median']:.2f}",
            f"{r['max']:.2f}",
            "yes" if r["meets"] else "no",
            f"{r['band_held']}/{r['band_points']}",
            f"{r['interval_pct']:.2f}",
            f"{r['interval_held']}/{r['points']}",
        )
    console.print(t)
    b, iv = res["band"], res["interval"]
    console.print(f"  {res['meets']} of {res['count']} runs meet median <= 2%, max <= 5%", markup=False)
    console.print(
        f"  Monte Carlo band holds {b['held']} of {b['points']} points ({b['share']:.0%}), "
        f"overlaps their 95% CI in {b['overlap']}",
        markup=False,
    )
    console.print(
        f"  projection ± q{iv['quantile'] * 100:.0f} of other runs' errors: holds {iv['held']} "
        f"of {iv['points']} ({iv['share']:.0%})",
        markup=False,
    )
    console.print(f"  for a new run: ±{iv['pooled_halfwidth_pct']:.2f}% (all stored runs)", markup=False)
