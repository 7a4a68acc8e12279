"""`bsprof model`: the producer–consumer equilibrium of a warp-specialized GEMM, and what a change
to the K-loop or epilogue would do to wall time before anyone writes it."""

from __future__ import annotations

import click

from bsprof.errors import BsprofError

ARTIFACT_KEY = {"kind": "model", "version": 1}
STRUCTURE_CHOICES = ["auto", "blackwell", "hopper-coop", "hopper-pingpong"]


def _delta_opt(name: str, what: str):
    return click.option(f"--{name}", default=None, metavar="DELTA",
                        help=f"change of {what} per tile: cycles (-300) or percent (-5%)")


@click.command(name="model")
@click.option("--from", "source", default=None, type=click.Path(), metavar="TIMING",
              help="calibrate on a timing table (.parquet/.csv) or a `bsprof timing` results dir; "
                   "default: the embedded B200 measurement")
@click.option("--structure", type=click.Choice(STRUCTURE_CHOICES), default="auto", show_default=True,
              help="pipeline structure; auto = from the table's roles (Hopper: same warp under mma and epilogue)")
@_delta_opt("kloop", "the K-loop")
@_delta_opt("phase1", "epilogue Phase 1 (every epilogue warp)")
@_delta_opt("tma0", "the first-load (TMA0) wait")
@_delta_opt("phase2", "epilogue Phase 2")
@click.option("--acc-stages", type=int, default=None, help="project with N accumulator stages")
@click.option("--epi-warps", type=int, default=None, help="project with N epilogue warps (per-warp work rescales)")
@click.option("--release", "release_frac", type=float, default=None,
              help="calibration: fraction of Phase 1 done when the accumulator is freed (0..1)")
@click.option("--handoff", type=float, default=None, help="calibration: barrier hand-off latency, cycles")
@click.option("--sweep", "sweep_spec", default=None, metavar="SPEC",
              help="grid of projections, e.g. kloop=-600:0:50,phase1=-600:0:50")
@click.option("--html", "html", default=None, type=click.Path(), help="write a plotly heatmap of the sweep")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON (stdout)")
@click.option("--csv", "as_csv", is_flag=True, help="print the result as CSV (stdout)")
@click.option("-o", "--output", "out", default=None, type=click.Path(),
              help="also write model.json (+ sweep table) into a fresh directory under this one")
@click.option("--tiles", type=int, default=50_000, show_default=True, help="Monte Carlo tiles per projection")
@click.option("--seed", type=int, default=0, show_default=True, help="Monte Carlo seed")
@click.option("--validate", is_flag=True, help="check projections against delay-injected builds on this GPU")
@click.option("--kernel", default="optimized", show_default=True,
              help="with --validate: bundled kernel variant (fp8-blockwise: switch specs too, e.g. optimized:epi_split=0)")
@click.option("--family", default="auto", show_default=True, help="with --validate: kernel family")
@click.option("--mnkl", default=None, help="with --validate: problem M,N,K[,L]")
def command(source, structure, kloop, phase1, tma0, phase2, acc_stages, epi_warps, release_frac, handoff,
            sweep_spec, html, as_json, as_csv, out, tiles, seed, validate, kernel, family, mnkl) -> None:
    """Project what K-loop / epilogue changes do to wall time.

    \b
    bsprof model                               calibrated B200 equilibrium + what 5% cuts buy
    bsprof model --kloop -300 --phase1 -200    baseline vs projected, both models
    bsprof model --from RESULTS_DIR --phase1 -5%
    bsprof model --sweep kloop=-600:0:50,phase1=-600:0:50 --html sweep.html
    """
    from rich.console import Console

    console = Console(stderr=as_json or as_csv, highlight=False)
    if as_json and as_csv:
        raise BsprofError("--json and --csv both print to stdout; choose one")
    if validate:
        _validate(kernel, family, mnkl, out, console)
        return
    if html and not sweep_spec:
        raise BsprofError("--html draws a sweep; add --sweep, e.g. --sweep kloop=-600:0:50,phase1=-600:0:50")
    if release_frac is not None and not 0.0 <= release_frac <= 1.0:
        raise BsprofError(f"--release {release_frac} must be between 0 and 1 (fraction of Phase 1)")
    if handoff is not None and handoff < 0:
        raise BsprofError(f"--handoff {handoff} must be >= 0 cycles")
    if tiles < 1000 or tiles > 5_000_000:
        raise BsprofError(f"--tiles {tiles} is out of range; use 1,000..5,000,000")

    from bsprof.analyzers import model as M

    params = _params(source, structure, release_frac, handoff)
    deltas = {"kloop": kloop, "phase1": phase1, "tma0": tma0, "phase2": phase2,
              "acc_stages": acc_stages, "epi_warps": epi_warps}
    deltas = {k: v for k, v in deltas.items() if v is not None}

    if sweep_spec:
        axes = M.parse_sweep(sweep_spec)
        clash = [k for k in axes if k in deltas]
        if clash:
            raise BsprofError(f"--{clash[0]} is also a --sweep axis; drop one of them")
        res = M.sweep(params, axes, deltas, tiles=tiles, seed=seed)
        doc = {**res.to_json(), "fixed": deltas, "params": params.to_json()}
        if html:
            from bsprof.reports.figures_model import sweep_figure, write_html

            write_html(sweep_figure(doc, title=f"bsprof model sweep ({params.source})"), html)
        _render_sweep(console, params, res, html)
        _emit(doc, as_json, as_csv, res.rows(), out, params, sweep=res)
        return

    pj = M.project(params, deltas, tiles=tiles, seed=seed)
    doc = pj.to_json()
    what_if = checks = None
    if not deltas:
        what_if = _what_if(M, params, tiles, seed)
        doc["what_if"] = what_if
        if source is None and release_frac is None and handoff is None:
            checks = _observed_checks(M, params, tiles, seed)
            doc["observed_checks"] = checks
    _render(console, params, pj, what_if, checks)
    _emit(doc, as_json, as_csv, _projection_rows(doc), out, params)


# ---------------------------------------------------------------------------------------------

def _params(source, structure, release_frac, handoff):
    from bsprof.analyzers import model as M

    st = None if structure == "auto" else structure
    if source is None:
        from bsprof.analyzers.model import default as D

        if st not in (None, "blackwell"):
            raise BsprofError(f"--structure {st} needs a Hopper timing table (--from); the embedded default is Blackwell")
        return D.default_params(release_frac=D.RELEASE_FRAC if release_frac is None else release_frac,
                                handoff=D.HANDOFF if handoff is None else handoff)
    from bsprof.analyzers.timing.table import load, resolve

    table = load(source)
    p = M.calibrate(table, st, release_frac=release_frac, handoff=handoff)
    p.source = str(resolve(source))
    return p


def _what_if(M, params, tiles, seed) -> list[dict]:
    """What a 5% cut of each phase (and one more accumulator stage) would buy: the default view."""
    rows = []
    for knob in ("kloop", "phase1", "phase2", "tma0"):
        base = params.mma.tma0 if knob == "tma0" else params.mma.kloop if knob == "kloop" else None
        if base is not None and base <= 0:
            continue
        if knob == "phase2" and max(params.epi.phase2) <= 0:
            continue
        pj = M.project(params, {knob: "-5%"}, tiles=tiles, seed=seed)
        j = pj.to_json()
        rows.append({"change": f"{knob} -5%", "det": j["deterministic"], "sto": j["stochastic"],
                     "sentence": pj.sentence})
    pj = M.project(params, {"acc_stages": params.structure.acc_stages + 1}, tiles=tiles, seed=seed)
    j = pj.to_json()
    label = ("ping-pong" if params.structure.name == "hopper-coop"
             else f"acc-stages {params.structure.acc_stages + 1}")
    rows.append({"change": label, "det": j["deterministic"],
                 "sto": j["stochastic"], "sentence": pj.sentence})
    return rows


def _observed_checks(M, params, tiles, seed) -> list[dict]:
    """The embedded kernel's two measured changes, replayed through the model."""
    from bsprof.analyzers.model.default import OBSERVED
    from bsprof.analyzers.model.project import required_delta

    rows = []
    for ob in OBSERVED:
        deltas = ob["deltas"]
        if deltas is None:  # the size of the change was not recorded: what the model needs
            need = required_delta(params, ob["knob"], ob["after_ms"] / ob["before_ms"])
            deltas = {ob["knob"]: round(need)}
        j = M.project(params, deltas, tiles=tiles, seed=seed).to_json()
        rows.append({"change": ob["change"], "deltas": deltas, "observed_ms": ob["after_ms"],
                     "det_ms": ob["before_ms"] * j["deterministic"]["wall_ratio"],
                     "sto_ms": ob["before_ms"] * j["stochastic"]["wall_ratio"],
                     "sto_p05_ms": ob["before_ms"] * j["stochastic"]["wall_ratio_p05"],
                     "sto_p95_ms": ob["before_ms"] * j["stochastic"]["wall_ratio_p95"]})
    return rows


def _projection_rows(doc: dict) -> list[dict]:
    rows = []
    for model in ("deterministic", "stochastic"):
        d = doc.get(model) or {}
        rows.append({"model": model, "baseline_tile_cycles": d.get("baseline_tile_cycles"),
                     "projected_tile_cycles": d.get("projected_tile_cycles"), "wall_ratio": d.get("wall_ratio"),
                     "wall_ratio_p05": d.get("wall_ratio_p05", ""), "wall_ratio_p95": d.get("wall_ratio_p95", ""),
                     "binding_before": d.get("binding_before"), "binding_after": d.get("binding_after")})
    return rows


def _emit(doc, as_json, as_csv, rows, out, params, sweep=None) -> None:
    import csv
    import io
    import json

    if as_json:
        click.echo(json.dumps(doc, indent=2, default=_json_default))
    if as_csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        click.echo(buf.getvalue(), nl=False)
    if out:
        from pathlib import Path

        from bsprof.io import unique_dir, write_text_atomic

        d = unique_dir(out, "model")
        art = {"bsprof": dict(ARTIFACT_KEY), "source": params.source, **doc}
        if sweep is not None:
            import pandas as pd

            from bsprof.io import atomic_path

            df = pd.DataFrame(rows)
            with atomic_path(Path(d) / "sweep.csv") as tmp:
                df.to_csv(tmp, index=False)
            art["files"] = {"sweep": "sweep.csv"}
        write_text_atomic(Path(d) / "model.json", json.dumps(art, indent=2, default=_json_default) + "\n")
        click.echo(f"wrote {d}/model.json", err=True)


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.integer):
            return int(o)
        if isinstance(o, np.floating):
            return float(o)
    except ImportError:
        pass
    raise TypeError(type(o).__name__)


def _validate(kernel, family, mnkl, out, console) -> None:
    from bsprof.kernels.api import parse_kernel_spec
    from bsprof.profile import validate

    parse_kernel_spec(kernel, None if family == "auto" else family)   # a bad spec before any GPU work
    validate.run(kernel=kernel, family=family, mnkl=mnkl, out_dir=out or "bsprof-results", console=console)


# ---------------------------------------------------------------------------------------------
# rich output
# ---------------------------------------------------------------------------------------------

def _f(v, fmt="{:,.0f}"):
    return "—" if v is None else fmt.format(v)


def _pct(r):
    return "—" if r is None else f"{(r - 1) * 100:+.2f}%"


def _header(console, params) -> None:
    from rich.panel import Panel

    st = params.structure
    rel = "end of Phase 2" if st.release_after_phase2 else (
        "end of Phase 1" if st.release_frac >= 1 else f"{st.release_frac:.0%} into Phase 1")
    lines = [f"[bold]{params.source}[/]",
             f"structure [cyan]{st.name}[/]: {st.acc_stages} accumulator stage(s), freed at {rel}, "
             f"barrier hand-off {st.handoff:,.0f} cycles",
             f"{params.epi.warps} epilogue warps · Monte Carlo on "
             + ("the table's own tiles (resampled whole)" if params.samples is not None else
                "per-warp lognormals fitted to avg/p95, correlated to match the per-tile spread")]
    lines += [f"[dim]· {n}[/]" for n in params.notes]
    console.print(Panel("\n".join(lines), title="bsprof model", title_align="left", border_style="blue"))


def _equilibrium_table(params, pj):
    from rich.table import Table

    b, s, o = pj.det_before, pj.sto or {}, params.observed
    t = Table(title="Equilibrium, cycles per tile", title_justify="left", header_style="bold")
    for c in ("", "measured", "deterministic", "stochastic (90% band)"):
        t.add_column(c, justify="right" if c else "left", no_wrap=True)
    band = (f" [dim]({s['baseline_tile_p05']:,.0f}–{s['baseline_tile_p95']:,.0f})[/]"
            if s.get("baseline_tile_p05") is not None else "")
    t.add_row("tile period", _f(o.get("tile")), f"[bold]{b.period:,.0f}[/]",
              _f(s.get("baseline_tile_cycles")) + band)
    t.add_row("epi_wait", _f(o.get("epi_wait")), _f(b.epi_wait), _f(s.get("epi_wait_before")))
    t.add_row("ml_wait", _f(o.get("ml_wait")), _f(b.ml_wait), _f(s.get("ml_wait_before")))
    t.add_row("binding side", "", f"[bold]{b.binding}[/]", s.get("binding_before", "—"))
    from bsprof.analyzers.model.project import critical_label

    crit = critical_label(params.structure.name, b.critical, short=True)
    t.add_row("critical cycle", "", crit, "")
    t.add_row("deficit", "", _f(b.deficit), "")
    t.add_row("slack K-loop / Phase 1", "", f"{b.kloop_slack:,.0f} / {b.phase1_slack:,.0f}", "")
    return t


def _render(console, params, pj, what_if, checks=None) -> None:
    from rich.table import Table

    _header(console, params)
    console.print(_equilibrium_table(params, pj))
    if checks:
        t = Table(title="Measured on this kernel vs the model (wall time, ms; baseline 0.543)",
                  title_justify="left", header_style="bold")
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
                t.caption = (f"* the rewrite's Phase-1 cut was not recorded; {val:+,} cycles/warp/tile "
                             f"({pct:.1f}% of Phase 1) is what the model needs")
        console.print(t)
    if what_if is not None:
        t = Table(title="What a change would buy (wall time)", title_justify="left", header_style="bold")
        for c in ("change", "deterministic", "stochastic", "90% band", "binding after"):
            t.add_column(c, justify="left" if c in ("change", "binding after") else "right", no_wrap=True)
        for r in what_if:
            sto = r["sto"]
            t.add_row(r["change"], _style(r["det"]["wall_ratio"]), _style(sto["wall_ratio"]),
                      _band(sto), _after(r["det"]))
        console.print(t)
        best = min(what_if, key=lambda r: r["sto"]["wall_ratio"])
        console.print(f"[bold]→[/] {pj.sentence}")
        console.print(f"[bold]→[/] Best of these: [bold]{best['change']}[/] — {best['sentence']}")
        console.print("[dim]Try: bsprof model --kloop -300 --phase1 -200 · --acc-stages N · --epi-warps N · "
                      "--sweep kloop=-600:0:50,phase1=-600:0:50 --html sweep.html · --from RESULTS_DIR[/]")
        return
    j = pj.to_json()
    t = Table(title="Projection: " + ", ".join(f"{k} {v}" for k, v in j["deltas"].items()),
              title_justify="left", header_style="bold")
    for c in ("model", "baseline", "projected", "wall time", "90% band"):
        t.add_column(c, justify="left" if c == "model" else "right", no_wrap=True)
    d, s = j["deterministic"], j["stochastic"]
    t.add_row("deterministic", _f(d["baseline_tile_cycles"]), _f(d["projected_tile_cycles"]), _style(d["wall_ratio"]),
              "")
    t.add_row("stochastic", _f(s["baseline_tile_cycles"]), _f(s["projected_tile_cycles"]), _style(s["wall_ratio"]),
              _band(s))
    console.print(t)
    console.print(f"binding side: {_flip(d)} (deterministic), {_flip(s)} (stochastic)")
    if params.wall_ms:
        w = j["wall_ms"]
        console.print(f"wall time {w['baseline']:.3f} ms → [bold]{w['projected_deterministic']:.3f} ms[/] deterministic, "
                      f"{w['projected_stochastic']:.3f} ms stochastic")
    console.print(f"[bold]→[/] {pj.sentence}")


def _band(s: dict) -> str:
    a, b = (s["wall_ratio_p05"] - 1) * 100, (s["wall_ratio_p95"] - 1) * 100
    return f"{a:+.2f}…{b:+.2f}%"


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
    t = Table(title=f"Stochastic wall-time change over the sweep (baseline {res.baseline_sto:,.0f} cycles/tile)"
              + (f" · rows {knobs[0]}, columns {knobs[1]}" if len(knobs) == 2 else ""),
              title_justify="left", header_style="bold")
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
            t.add_row(f"{v}" if isinstance(v, str) else f"{v:g}",
                      *[_cell(res.sto_ratio[i][j]) for j in cols])
        if step > 1:
            t.caption = "percent; every %s column shown — the full grid is in --csv / --json / --html" % (
                {2: "2nd", 3: "3rd"}.get(step, f"{step}th"))
        else:
            t.caption = "percent change of wall time"
    else:
        for c in (knobs[0], "deterministic", "stochastic", "90% band", "binding"):
            t.add_column(c, justify="right")
        for i, v in enumerate(res.axes[knobs[0]]):
            t.add_row(f"{v}", _pct(res.det_ratio[i]), _pct(res.sto_ratio[i]),
                      f"{_pct(res.sto_p05[i])}…{_pct(res.sto_p95[i])}", res.det_binding[i])
    console.print(t)
    if html:
        console.print(f"[bold]→[/] heatmap written to {html}")


def _cell(r: float) -> str:
    pct = (r - 1) * 100
    colour = "green" if pct < -0.05 else "red" if pct > 0.05 else "dim"
    return f"[{colour}]{pct:+.1f}[/]"
