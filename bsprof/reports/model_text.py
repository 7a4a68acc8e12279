"""Terminal rendering (rich) of `bsprof model` results: projections, sweeps, --explain and the
validation table. Pure presentation: every number comes from bsprof.analyzers.model."""

from __future__ import annotations

import math


def _pct_ratio(r: float) -> str:
    return "—" if r is None or not math.isfinite(r) else f"{(r - 1) * 100:+.2f}%"


def _err(e: float) -> str:
    return "—" if e is None or not math.isfinite(e) else f"{e:+.2f}%"


def _yes(v) -> str:
    return "no flip point in this run" if v is None else ("yes" if v else "no")


def render_validation(console, points, summ: dict, title: str = "") -> None:
    """One row per point: measured ratio with its 95% interval, the model (and its two terms), the
    oracle and the trivial predictor, each with its error; then the summary against the target."""
    from rich.table import Table

    t = Table(title=f"model validation{': ' + title if title else ''} — wall-time change vs the calibration build",
              title_justify="left", header_style="bold")
    cols = ("dir", "knob", "Δkloop", "Δphase1", "measured (95% CI)", "model", "period", "tail", "err",
            "±noise", "oracle", "err", "trivial", "err", "binding")
    for c in cols:
        t.add_column(c, justify="left" if c in ("dir", "knob", "binding") else "right", no_wrap=True)
    for p in points:
        ci = (f" ({(p.ci_lo - 1) * 100:+.2f}…{(p.ci_hi - 1) * 100:+.2f})" if math.isfinite(p.ci_lo) else "")
        bind = f"{p.binding_before}→{p.binding_after}" if p.binding_before else ""
        if p.flip:
            bind = f"[bold]{bind} flip[/]"
        t.add_row(p.direction, p.knob, f"{p.delta_kloop:+,.0f}", f"{p.delta_phase1:+,.0f}",
                  _pct_ratio(p.measured_ratio) + ci, _pct_ratio(p.projected_wall_det),
                  f"{p.term_period * 100:+.2f}", f"{p.term_tail * 100:+.2f}", _err(p.err_det_pct),
                  "—" if not math.isfinite(p.err_ci_pct) else f"{p.err_ci_pct:.2f}",
                  _pct_ratio(p.projected_oracle), _err(p.err_oracle_pct),
                  _pct_ratio(p.projected_trivial), _err(p.err_trivial_pct), bind)
    console.print(t)
    console.print("[dim]Δ: nominal cycles per tile (the probe-measured cost of the injected spin). model: the "
                  "equilibrium from the calibration table and the nominal change = 1 + period term (busy × period "
                  "change) + tail term (makespan outside tiles × period); oracle: the same model given the "
                  "perturbed build's measured phase changes; trivial: the changed phase's delta when it is on "
                  "the baseline's critical cycle. ±noise: half-width of the error's 95% interval.[/]")
    for key, name in (("det", "model"), ("oracle", "oracle"), ("trivial", "trivial")):
        s = summ.get(key, {})
        if s.get("median_abs_pct") is None:
            continue
        f = s.get("flip", {})
        flip = (f" · on the {f['n']} flip points median {f['median_abs_pct']:.2f}%, max {f['max_abs_pct']:.2f}%"
                if f.get("n") else "")
        console.print(f"{name:8s} median |error| {s['median_abs_pct']:.2f}%, max {s['max_abs_pct']:.2f}% over "
                      f"{s['n']} points{flip}")
    d = summ.get("det", {})
    if d.get("median_abs_pct") is not None:
        verdict = "[green]meets[/]" if d.get("pass") else "[red]misses[/]"
        console.print(f"model {verdict} the target (median <= 2%, max <= 5% over >= 12 points, below the trivial "
                      f"predictor on the flip points: {_yes(d.get('beats_trivial_on_flips'))})")
    if summ.get("noise_floor_pct") is not None:
        ci = summ.get("noise_ci_pct")
        console.print(f"noise floor: a second plain build measured {summ['noise_floor_pct']:.2f}% off the first"
                      + (f" (95% CI ±{ci:.2f}%)" if ci is not None else "")
                      + (f"; median error interval ±{summ['median_ci_pct']:.2f}%" if summ.get("median_ci_pct") else ""))
    b = summ.get("band")
    if b:
        console.print(f"Monte Carlo 90% band: contains {b['covered']} of {b['n']} measured points within their "
                      f"noise ({b['coverage']:.0%}; {'kept' if b['keep'] else 'below 80%: not shown by bsprof model'})")
    c = summ.get("cycles")
    if c:
        console.print(f"in cycles (vs the captures' busiest-CTA makespans): median |error| {c['median_abs_pct']:.2f}%, "
                      f"max {c['max_abs_pct']:.2f}% over {c['n']} points; builds ran at "
                      f"{c['ghz_min']:.2f}-{c['ghz_max']:.2f} GHz")
