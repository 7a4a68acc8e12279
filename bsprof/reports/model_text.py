"""Terminal rendering (rich) of `bsprof model` results: projections, sweeps, --explain and the
validation table. Pure presentation: every number comes from bsprof.analyzers.model."""

from __future__ import annotations

import math

from bsprof.fmt import lit, plural


def _pct_ratio(r: float) -> str:
    return "—" if r is None or not math.isfinite(r) else f"{(r - 1) * 100:+.2f}%"


def _err(e: float) -> str:
    return "—" if e is None or not math.isfinite(e) else f"{e:+.2f}%"


def _yes(v) -> str:
    return "no flip point in this run" if v is None else ("yes" if v else "no")


def render_validation(console, points, summ: dict, title: str = "") -> None:
    """One row per point: measured ratio with its 95% interval, the model (and its three terms), the
    oracle and the trivial predictor, each with its error; then the summary against the target."""
    from rich.table import Table

    t = Table(
        title=f"model validation{': ' + title if title else ''} — wall-time change vs the calibration build",
        title_justify="left",
        header_style="bold",
    )
    held = summ.get("held") or {}
    per = held.get("per_point") or []
    show_held = len(per) == len(points) and bool(held.get("blocks"))
    cols = (
        "dir",
        "knob",
        "Δkloop",
        "Δphase1",
        "measured (95% CI)",
        "model",
        "period",
        "tail",
        "clock",
        "err",
        "±noise",
        "oracle",
        "err",
        "trivial",
        "err",
        "binding",
    ) + (("held out",) if show_held else ())
    for c in cols:
        t.add_column(c, justify="left" if c in ("dir", "knob", "binding") else "right", no_wrap=True)
    for i, p in enumerate(points):
        ci = f" ({(p.ci_lo - 1) * 100:+.2f}…{(p.ci_hi - 1) * 100:+.2f})" if math.isfinite(p.ci_lo) else ""
        bind = f"{p.binding_before}→{p.binding_after}" if p.binding_before else ""
        if p.flip:
            bind = f"[bold]{bind} flip[/]"
        extra = (_held_cell(per[i]),) if show_held else ()
        t.add_row(
            p.direction,
            p.knob,
            f"{p.delta_kloop + 0.0:+,.0f}",
            f"{p.delta_phase1 + 0.0:+,.0f}",
            _pct_ratio(p.measured_ratio) + ci,
            _pct_ratio(p.projected_wall_det),
            f"{p.term_period * 100:+.2f}",
            f"{p.term_tail * 100:+.2f}",
            "—" if not math.isfinite(p.term_clock) else f"{p.term_clock * 100:+.2f}",
            _err(p.err_det_pct),
            "—" if not math.isfinite(p.err_ci_pct) else f"{p.err_ci_pct:.2f}",
            _pct_ratio(p.projected_oracle),
            _err(p.err_oracle_pct),
            _pct_ratio(p.projected_trivial),
            _err(p.err_trivial_pct),
            bind,
            *extra,
        )
    from bsprof.reports.term import fit_table, left_out_note

    # a narrow terminal keeps the measurement, the model and its error; the terms, the other
    # predictors and the nominal deltas go first (each named below the table, the three "err"
    # columns by whose error each is)
    dropped = fit_table(
        console,
        t,
        [14, 13, 12, 11, 8, 7, 6, 10, 3, 2, 15, 16, 0],
        names={9: "model err", 12: "oracle err", 14: "trivial err"},
    )
    console.print(t)
    if dropped:
        console.print(left_out_note(dropped, "--json and validation.csv have every column"))
    console.print(
        "[dim]Δ: nominal cycles per tile (the probe-measured cost of the injected spin). model: the "
        "equilibrium from the calibration table and the nominal change = 1 + period term (busy × period "
        "change) + tail term (makespan outside tiles × period), the projected cycles, + clock term (those cycles at "
        "the sustained clock the power limit allows after the change, from the calibration build's clock and "
        "power and the device's limits); oracle: the same model given the "
        "perturbed build's measured phase changes; trivial: the changed phase's delta when it is on "
        "the baseline's critical cycle. ±noise: half-width of the error's 95% interval.[/]"
    )
    for key, name in (("det", "model"), ("oracle", "oracle"), ("trivial", "trivial")):
        s = summ.get(key, {})
        if s.get("median_abs_pct") is None:
            continue
        f = s.get("flip", {})
        flip = (
            f" · on the {f['n']} flip points median {f['median_abs_pct']:.2f}%, max {f['max_abs_pct']:.2f}%"
            if f.get("n")
            else ""
        )
        console.print(
            f"{name:8s} median |error| {s['median_abs_pct']:.2f}%, max {s['max_abs_pct']:.2f}% over "
            f"{s['n']} points{flip}"
        )
    d = summ.get("det", {})
    if d.get("median_abs_pct") is not None:
        verdict = "[green]meets[/]" if d.get("pass") else "[red]misses[/]"
        console.print(
            f"model {verdict} the target (median <= 2%, max <= 5% over >= 12 points, below the trivial "
            f"predictor on the flip points: {_yes(d.get('beats_trivial_on_flips'))})"
        )
    if summ.get("noise_floor_pct") is not None:
        ci = summ.get("noise_ci_pct")
        console.print(
            f"noise floor: a second plain build measured {summ['noise_floor_pct']:.2f}% off the first"
            + (f" (95% CI ±{ci:.2f}%)" if ci is not None else "")
            + (f"; median error interval ±{summ['median_ci_pct']:.2f}%" if summ.get("median_ci_pct") else "")
        )
    b = summ.get("band")
    if b:
        console.print(
            f"Monte Carlo 90% band: contains {b['covered']} of {b['n']} measured points within their "
            f"noise ({b['coverage']:.0%}; {'80% or more in this run' if b['keep'] else 'below 80%'}; "
            "not shown by bsprof model: it fell short of 80% on earlier runs)"
        )
    k = summ.get("clocked")
    if k:
        console.print(
            f"with each build's measured sustained clock (a diagnostic: not known before building): "
            f"median |error| {k['median_abs_pct']:.2f}%, max {k['max_abs_pct']:.2f}% over {k['n']} points"
        )
    if held:
        _render_held(console, held)
    c = summ.get("cycles")
    if c:
        console.print(
            f"in cycles (the model before its clock term vs the captures' busiest-CTA makespans): "
            f"median |error| {c['median_abs_pct']:.2f}%, "
            f"max {c['max_abs_pct']:.2f}% over {c['n']} points; builds ran at "
            f"{c['ghz_min']:.2f}-{c['ghz_max']:.2f} GHz"
        )
    sc = summ.get("sustained_cycles")
    if sc:
        console.print(
            f"in sustained cycles (the model before its clock term vs wall x SM-counter clock of the timed "
            f"blocks): median |error| {sc['median_abs_pct']:.2f}%, max {sc['max_abs_pct']:.2f}% over "
            f"{sc['n']} points"
        )
    cn = summ.get("counter_vs_nvml")
    if cn:
        spin = f"; during the stamp spin {cn['spin']:.3f}" if cn.get("spin") else ""
        console.print(
            f"SM cycle counter over NVML's clock (a diagnostic; the clock term reads NVML): "
            f"{cn['min']:.3f}-{cn['max']:.3f} over the builds' blocks{spin}"
        )


def _held_cell(pp: dict) -> str:
    n = pp.get("held_repeats") or 0
    if not n:
        return ""
    e = pp.get("err_det_pct")
    return f"-{n} rep: " + ("—" if e is None or not math.isfinite(e) else f"{e:+.2f}%")


def _render_held(console, held: dict) -> None:
    """The blocks the power controller held below the limit, and the model's score without them."""
    r = held.get("rule", {})
    blocks = held.get("blocks") or []
    rule = (
        f"power-capped, clock >= {r.get('clock_drop', 0) * 100:.0f}% under its code's median block and draw >= "
        f"{r.get('power_margin', 0) * 100:.0f}% of (limit - floor) under the limit"
    )
    if not blocks:
        console.print(f"held below the power limit ({rule}): no block")
        return
    names = ", ".join(f"{b['build']} {b['set'][0]}{b['repeat']}" for b in blocks)
    d = held.get("det") or {}
    line = (
        f"held below the power limit ({rule}): {plural(len(blocks), 'block')}: {names}. Without them (their repeats "
        f"left out, the calibration clock pooled over the rest; column 'held out'):"
    )
    if d.get("median_abs_pct") is not None:
        f = d.get("flip") or {}
        flip = f", flip points {f['median_abs_pct']:.2f}% / {f['max_abs_pct']:.2f}%" if f.get("n") else ""
        line += (
            f" model median |error| {d['median_abs_pct']:.2f}%, max {d['max_abs_pct']:.2f}% over {d['n']} points"
            f"{flip}; {'meets' if d.get('pass') else 'misses'} the target on that score"
        )
    console.print(line)


def _f(v, fmt="{:,.0f}"):
    return "—" if v is None else fmt.format(v)


def _pct(r):
    return "—" if r is None else f"{(r - 1) * 100:+.2f}%"


def _header(console, params) -> None:
    from rich.panel import Panel

    st = params.structure
    rel = (
        "end of Phase 2"
        if st.release_after_phase2
        else ("end of Phase 1" if st.release_frac >= 1 else f"{st.release_frac:.0%} into Phase 1")
    )
    lines = [
        f"[bold]{params.source}[/]",
        f"structure [cyan]{st.name}[/]: {plural(st.acc_stages, 'accumulator stage')}, freed at {rel}, "
        f"barrier hand-off {st.handoff:,.0f} cycles",
        f"{params.epi.warps} epilogue warps · Monte Carlo on "
        + (
            "the table's own tiles (resampled whole)"
            if params.samples is not None
            else "per-warp lognormals fitted to avg/p95, correlated to match the per-tile spread"
        ),
    ]
    lines += [f"[dim]· {n}[/]" for n in params.notes]
    console.print(Panel("\n".join(lines), title="bsprof model", title_align="left", border_style="blue"))


def _equilibrium_table(params, pj):
    from rich.table import Table

    b, s, o = pj.det_before, pj.sto or {}, params.observed
    t = Table(title="Equilibrium, cycles per tile", title_justify="left", header_style="bold")
    for c in ("", "measured", "deterministic", "stochastic"):
        t.add_column(c, justify="right" if c else "left", no_wrap=True)
    t.add_row("tile period", _f(o.get("tile")), f"[bold]{b.period:,.0f}[/]", _f(s.get("baseline_tile_cycles")))
    t.add_row("epi_wait", _f(o.get("epi_wait")), _f(b.epi_wait), _f(s.get("epi_wait_before")))
    t.add_row("ml_wait", _f(o.get("ml_wait")), _f(b.ml_wait), _f(s.get("ml_wait_before")))
    t.add_row("binding side", "", f"[bold]{b.binding}[/]", s.get("binding_before", "—"))
    from bsprof.analyzers.model.project import critical_label

    crit = critical_label(params.structure.name, b.critical, short=True)
    t.add_row("critical cycle", "", crit, "")
    t.add_row("deficit", "", _f(b.deficit), "")
    t.add_row("slack K-loop / Phase 1", "", f"{b.kloop_slack:,.0f} / {b.phase1_slack:,.0f}", "")
    return t


def _render_projection(console, params, pj, what_if, checks=None) -> None:
    from rich.table import Table

    _header(console, params)
    console.print(_equilibrium_table(params, pj))
    if checks:
        t = Table(
            title="Measured on this kernel vs the model (wall time, ms; baseline 0.543)",
            title_justify="left",
            header_style="bold",
        )
        for c in ("change", "measured", "deterministic", "stochastic"):
            t.add_column(c, justify="left" if c == "change" else "right", no_wrap=True)
        for r in checks:
            knob, val = next(iter(r["deltas"].items()))
            name = {"kloop": "K-loop", "phase1": "Phase 1"}.get(knob, knob)
            inferred = not r["change"].startswith("K-loop")
            label = f"{r['change']} ({name} {val:+,}*)" if inferred else f"{name} {val:+,}"
            t.add_row(label, f"{r['observed_ms']:.3f}", f"{r['det_ms']:.3f}", f"{r['sto_ms']:.3f}")
            if inferred:
                pct = 100 * abs(val) / (sum(params.epi.phase1) / params.epi.warps)
                t.caption = (
                    f"* the rewrite's Phase-1 cut was not recorded; {val:+,} cycles/warp/tile "
                    f"({pct:.1f}% of Phase 1) is what the model needs"
                )
        console.print(t)
    if what_if is not None:
        t = Table(title="What a change would buy (wall time)", title_justify="left", header_style="bold")
        for c in ("change", "deterministic", "stochastic", "binding after"):
            t.add_column(c, justify="left" if c in ("change", "binding after") else "right", no_wrap=True)
        for r in what_if:
            t.add_row(r["change"], _style(r["det"]["wall_ratio"]), _style(r["sto"]["wall_ratio"]), _after(r["det"]))
        console.print(t)
        best = min(what_if, key=lambda r: r["sto"]["wall_ratio"])
        console.print(f"[bold]→[/] {pj.sentence}")
        console.print(f"[bold]→[/] Best of these: [bold]{best['change']}[/] — {best['sentence']}")
        console.print(
            "[dim]Try: bsprof model --kloop -300 --phase1 -200 · --acc-stages N · --epi-warps N · "
            "--sweep kloop=-600:0:50,phase1=-600:0:50 --html sweep.html · --from RESULTS_DIR[/]"
        )
        return
    j = pj.to_json()
    t = Table(
        title="Projection: " + ", ".join(f"{k} {v}" for k, v in j["deltas"].items()),
        title_justify="left",
        header_style="bold",
    )
    for c in ("model", "baseline", "projected", "wall time"):
        t.add_column(c, justify="left" if c == "model" else "right", no_wrap=True)
    d, s = j["deterministic"], j["stochastic"]
    t.add_row("deterministic", _f(d["baseline_tile_cycles"]), _f(d["projected_tile_cycles"]), _style(d["wall_ratio"]))
    t.add_row("stochastic", _f(s["baseline_tile_cycles"]), _f(s["projected_tile_cycles"]), _style(s["wall_ratio"]))
    console.print(t)
    console.print(f"binding side: {_flip(d)} (deterministic), {_flip(s)} (stochastic)")
    if params.wall_ms:
        w = j["wall_ms"]
        console.print(
            f"wall time {w['baseline']:.3f} ms → [bold]{w['projected_deterministic']:.3f} ms[/] deterministic, "
            f"{w['projected_stochastic']:.3f} ms stochastic"
        )
    console.print(f"[bold]→[/] {pj.sentence}")


def _flip(d: dict) -> str:
    b, a = d.get("binding_before"), d.get("binding_after")
    return b if a == b else f"{b} → [bold]{a}[/]"


def _after(d: dict) -> str:
    a = d.get("binding_after")
    return a if a == d.get("binding_before") else f"[bold]{a}[/]"


def _style(ratio: float) -> str:
    pct = (ratio - 1) * 100
    colour = "green" if pct < -0.05 else "red" if pct > 0.05 else "dim"
    return f"[{colour}]{pct:+.2f}%[/]"


def _render_sweep(console, params, res, html) -> None:
    from rich.table import Table

    _header(console, params)
    knobs = list(res.axes)
    t = Table(
        title=f"Stochastic wall-time change over the sweep (baseline {res.baseline_sto:,.0f} cycles/tile)"
        + (f" · rows {knobs[0]}, columns {knobs[1]}" if len(knobs) == 2 else ""),
        title_justify="left",
        header_style="bold",
    )
    if len(knobs) == 2:
        from rich import box

        cols = list(range(len(res.axes[knobs[1]])))
        room = max(4, (console.width - 20) // 7)
        step = -(-len(cols) // room)
        cols = cols[::step]
        if cols[-1] != len(res.axes[knobs[1]]) - 1:
            cols.append(len(res.axes[knobs[1]]) - 1)
        t.box = box.SIMPLE_HEAD
        t.add_column(f"{knobs[0]}↓ {knobs[1]}→", justify="right", no_wrap=True)
        for j in cols:
            v = res.axes[knobs[1]][j]
            t.add_column(f"{v}" if isinstance(v, str) else f"{v:g}", justify="right", no_wrap=True)
        for i, v in enumerate(res.axes[knobs[0]]):
            t.add_row(f"{v}" if isinstance(v, str) else f"{v:g}", *[_cell(res.sto_ratio[i][j]) for j in cols])
        if step > 1:
            t.caption = "percent; every %s column shown — the full grid is in --csv / --json / --html" % (
                {2: "2nd", 3: "3rd"}.get(step, f"{step}th")
            )
        else:
            t.caption = "percent change of wall time"
    else:
        for c in (knobs[0], "deterministic", "stochastic", "binding"):
            t.add_column(c, justify="right")
        for i, v in enumerate(res.axes[knobs[0]]):
            t.add_row(f"{v}", _pct(res.det_ratio[i]), _pct(res.sto_ratio[i]), res.det_binding[i])
    console.print(t)
    if html:
        console.print(f"[bold]→[/] heatmap written to {lit(html)}")


def _cell(r: float) -> str:
    pct = (r - 1) * 100
    colour = "green" if pct < -0.05 else "red" if pct > 0.05 else "dim"
    return f"[{colour}]{pct:+.1f}[/]"


def _render_walk(console, walk: dict) -> None:
    """--explain: every cycle of the equilibrium, arc by arc, before and after the change."""
    from rich.table import Table

    for when in ("before", "after"):
        if walk.get(when) is None:
            console.print(
                "[dim]no change given: add one (--kloop -300, --phase1 -5%, --acc-stages 3 ...) to walk "
                "the cycles after it[/]"
            )
            continue
        period = walk[f"period_{when}"]
        t = Table(
            title=f"Critical cycle walk, {when} the change: period = max over cycles of sum/tokens = "
            f"{period:,.0f} cycles",
            title_justify="left",
            header_style="bold",
        )
        for c in ("cycle", "arc", "cycles", "sum /\ntokens"):  # names wrap between words, numbers never
            t.add_column(c, justify="left" if c in ("cycle", "arc") else "right", no_wrap=c not in ("cycle", "arc"))
        for c in walk[when]:
            name = f"[bold]{c['cycle']} ◀ binds[/]" if c["critical"] else c["cycle"]
            for i, (arc, v) in enumerate(c["arcs"]):
                t.add_row(name if i == 0 else "", arc, f"{v:,.0f}", "")
            t.add_row(
                "",
                f"[dim]= {c['sum']:,.0f} over {plural(c['tokens'], 'token')}[/]",
                "",
                f"[bold]{c['mean']:,.0f}[/]" if c["critical"] else f"{c['mean']:,.0f}",
            )
        console.print(t)


def _render_fitted(console, fitted: list, provenance: dict | None) -> None:
    from rich.table import Table

    if fitted:
        t = Table(
            title="Terms no table measured (what the projection rests on)", title_justify="left", header_style="bold"
        )
        # names and prose wrap between words; a number never does
        for c in ("term", "size", "how", "share of\nperiod", "projection", "without\nit"):
            t.add_column(c, justify="left" if c in ("term", "how") else "right", no_wrap=c not in ("term", "how"))
        for r in fitted:
            size = f"{r['size']:.2f}" if "fraction" in r["how"] else f"{r['size']:,.0f} cyc"
            share = "—" if r.get("share_of_period") is None else f"{r['share_of_period']:.1%}"
            wo = r.get("projected_change_without")
            t.add_row(
                r["term"],
                size,
                r["how"],
                share,
                f"{r['projected_change'] * 100:+.2f}%",
                "—" if wo is None else f"{wo * 100:+.2f}%",
            )
        console.print(t)
    if provenance:
        for k in ("measured", "fitted", "assumed", "outcomes"):
            console.print(f"[dim]{lit(k)}: {lit(provenance[k], 4000)}[/]")


def _render_ceiling(console, extra: dict) -> None:
    c = extra.get("ceiling")
    if not c:
        return
    if isinstance(c, str):
        console.print(f"[yellow]epilogue warps: {c}[/]")
        return
    console.print(
        f"epilogue warps: each warp's Phase 1 and Phase 2 × {c['split']:.3f} (work split) × {c['shared_path_slowdown']:.3f} "
        f"(shared-path slowdown measured on {c['curve']}, warps {c['warps_measured'][0]}–"
        f"{c['warps_measured'][-1]}) = × {c['phase1_scale']:.3f}"
    )
    if c.get("extrapolated"):
        console.print("[yellow]the warp count lies outside the measured curve: extrapolated[/]")
    if c.get("stand_in"):
        console.print(
            "[yellow]a Blackwell epilogue reads TMEM: that curve is not measured (no B200); the H100 "
            "shared-memory curve stands in for it[/]"
        )


def warning_lines(result) -> list[str]:
    """What the terminal view shows in yellow, as plain lines: --json / --csv print only these
    beside the data."""
    c = (result.projection.extra or {}).get("ceiling") if result.projection is not None else None
    if not c:
        return []
    if isinstance(c, str):
        return [f"epilogue warps: {c}"]
    out = []
    if c.get("extrapolated"):
        out.append("the warp count lies outside the measured curve: extrapolated")
    if c.get("stand_in"):
        out.append(
            "a Blackwell epilogue reads TMEM: that curve is not measured (no B200); the H100 "
            "shared-memory curve stands in for it"
        )
    return out


def render_model(console, result, html: str | None = None) -> None:
    """The terminal view of a ModelResult (projection, what-if view, or sweep)."""
    if result.sweep is not None:
        _render_sweep(console, result.params, result.sweep, html)
        return
    pj = result.projection
    _render_projection(console, result.params, pj, result.what_if, result.checks)
    if result.clock:
        _render_clock(console, result.clock)
    _render_ceiling(console, pj.extra)
    if result.walk:
        _render_walk(console, result.walk)
    _render_fitted(console, result.fitted, result.provenance)


def _render_clock(console, c: dict) -> None:
    lim = c["limits"]
    state = "power-capped" if c["capped"] else "not power-capped"
    console.print(
        f"[bold]At the sustained clock:[/] the baseline runs {c['mhz_before']:,.0f} MHz ({state}; top "
        f"{lim['max_mhz']:,.0f} MHz, limit {lim['power_limit_w']:,.0f} W); the change moves the cycles "
        f"{_pct(c['cycle_ratio'])} and the clock to {c['mhz_after']:,.0f} MHz ({c['limited_by']}): wall time "
        f"[bold]{_pct(c['wall_ratio'])}[/] (clock term {c['term_clock'] * 100:+.2f} points)"
    )
    console.print(
        f"[dim]the same tensor work over more cycles draws less per cycle; at the power limit the clock "
        f"moves as (cycle ratio)^(1/{c['power_exponent']:g}) (γ assumed, not fitted), capped at the top "
        f"clock; floor {lim['floor_w']:,.0f} W does not scale with the work ({lim['source']})[/]"
    )


def emit(result, *, as_json: bool, as_csv: bool, out: str | None, artifact_key: dict) -> None:
    """--json / --csv to stdout and ``-o DIR`` (model.json, + sweep.csv for a sweep)."""
    import csv
    import io

    import click

    from bsprof import artifacts

    if as_json:
        click.echo(artifacts.dumps(result.doc))
    if as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(result.rows[0]))
        w.writeheader()
        w.writerows(result.rows)
        click.echo(buf.getvalue(), nl=False)
    if out:
        from bsprof.io import atomic_path, results_dir

        art = {"bsprof": dict(artifact_key), "source": result.params.source, **result.doc}
        with results_dir(out, "model") as staged:  # sweep.csv and model.json appear together or not at all
            d = staged.path
            if result.sweep is not None:
                import pandas as pd

                with atomic_path(d / "sweep.csv") as tmp:
                    pd.DataFrame(result.rows).to_csv(tmp, index=False)
                art["files"] = {"sweep": "sweep.csv"}
            artifacts.save(d / "model.json", art)
        click.echo(f"wrote {staged.path}/model.json", err=True)
