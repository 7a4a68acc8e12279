"""The model section: the projection heatmap (K-loop delta x epilogue delta) with the current point
and the boundary where the binding side flips, plus the baseline equilibrium it starts from.

Reads the ``model`` artifact of ``bsprof model ... -o DIR`` (the model's JSON contract:
``deterministic`` / ``stochastic`` with ``baseline_tile_cycles``, ``projected_tile_cycles``,
``wall_ratio``, ``binding_before``, ``binding_after``) and its sweep grid (rows of K-loop delta,
Phase-1 delta, wall ratio and binding side, in the JSON or as a table beside it). When the model
package ships a figure builder (:mod:`bsprof.reports.figures_model`), the heatmap is its figure.
"""

from __future__ import annotations

from typing import Any

from bsprof.artifacts import Artifact, Run, TableError
from bsprof.fmt import dig, fmt, num
from bsprof.reports.page import Figure, Section, note, table

X_COLS = ("kloop", "delta_kloop", "dkloop", "kloop_delta", "d_kloop")
Y_COLS = ("phase1", "delta_phase1", "dphase1", "phase1_delta", "d_phase1", "epilogue", "delta_epilogue")
Z_COLS = ("wall_ratio", "det_wall_ratio", "wall_ratio_det", "deterministic_wall_ratio", "deterministic.wall_ratio")
ZS_COLS = ("sto_wall_ratio", "wall_ratio_sto", "stochastic_wall_ratio", "stochastic.wall_ratio")
B_COLS = ("binding_after", "binding", "det_binding_after", "deterministic.binding_after")


def _pick(cols, names) -> str | None:
    return next((n for n in names if n in cols), None)


def _flatten(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        else:
            out[k] = v
    return out


def sweep_frame(art: Artifact):
    """The sweep grid as a DataFrame (JSON rows, a grid dict, or a table beside the JSON), or None."""
    import pandas as pd

    sw = art.data.get("sweep") or art.data.get("grid")
    if isinstance(sw, dict) and isinstance(sw.get("rows"), list):
        sw = sw["rows"]
    if isinstance(sw, list) and sw and isinstance(sw[0], dict):
        return pd.DataFrame([_flatten(r) for r in sw])
    names = [v for v in (dig(art.data, "files", "sweep"), dig(art.data, "files", "table")) if isinstance(v, str)]
    try:
        return art.read_table(*names, "sweep")
    except TableError:
        return None


def _model_artifacts(run: Run) -> list[Artifact]:
    return run.of("model")


def _baseline_rows(art: Artifact) -> list[list[Any]]:
    d = art.data
    if isinstance(dig(d, "deterministic", "wall_ratio"), list):  # a sweep: the point it starts from
        rows = []
        axes = _axes(d) or {}
        at0 = [v.index(0.0) if 0.0 in v else None for v in axes.values()]
        for model in ("deterministic", "stochastic"):
            m = d.get(model) if isinstance(d.get(model), dict) else {}
            bind = m.get("binding")
            side = "—"
            if isinstance(bind, list) and None not in at0 and len(at0) == 2:
                side = bind[at0[0]][at0[1]]
            rows.append([model, fmt(m.get("baseline_tile_cycles")), side])
        return rows
    rows = []
    for model in ("deterministic", "stochastic"):
        m = d.get(model)
        if not isinstance(m, dict):
            continue
        ratio = num(m.get("wall_ratio"))
        rows.append(
            [
                model,
                fmt(m.get("baseline_tile_cycles")),
                fmt(m.get("projected_tile_cycles")),
                f"{ratio:.4f}" if ratio is not None else "—",
                f"{m.get('binding_before', '—')} → {m.get('binding_after', '—')}",
            ]
        )
    return rows


def heatmap(run: Run) -> Section | None:
    arts = _model_artifacts(run)
    if not arts:
        return None
    sec = Section("model", "Model projection")
    # the first two projections or sweeps, and every priced code change (`model --change`)
    for art in arts[:2] + [a for a in arts[2:] if isinstance(a.data, dict) and isinstance(a.data.get("change"), dict)]:
        _one(sec, art)
    return sec


def _change(sec: Section, d: dict) -> None:
    """`bsprof model --change`: each phase's delta with where it came from, then the wall time."""
    ch = d.get("change")
    if not isinstance(ch, dict):
        return
    sec.add(f"<p>change: <code>{_esc(str(ch.get('a')))}</code> → <code>{_esc(str(ch.get('b')))}</code></p>")
    chain = ch.get("chain") if isinstance(ch.get("chain"), dict) else None
    if chain is None and isinstance(ch.get("kloop_only"), dict):
        k = ch["kloop_only"]
        sec.add(
            table(
                [
                    [
                        "K-loop (per K block)",
                        fmt(num(k.get("per_kblock_b", 0)) - num(k.get("per_kblock_a", 0))),
                        fmt(k.get("cycles_per_kblock")),
                        f"{fmt(k.get('lo'))} .. {fmt(k.get('hi'))}",
                    ]
                ],
                ["phase", "Δ instructions", "Δ cycles", "interval"],
                numeric=(1, 2),
                caption="; ".join(
                    [f"priced: {_esc(x)}" for x in k.get("priced") or []]
                    + [f"not priced: {_esc(u)}" for u in k.get("unpriced") or []]
                ),
            )
        )
        return
    if chain is None:
        return
    rows = [
        [
            dd.get("phase"),
            fmt(dd.get("instructions")),
            fmt(dd.get("cycles")),
            f"{fmt(dd.get('lo'))} .. {fmt(dd.get('hi'))}",
            fmt(dd.get("count_rule")),
            _esc(str(dd.get("source", ""))),
        ]
        for dd in chain.get("deltas") or []
        if isinstance(dd, dict) and (dd.get("instructions") or dd.get("unpriced"))
    ]
    iv = ch.get("interval_pct") or [None, None]
    ck = ch.get("checked_interval_pct") or [None, None]
    level = num(ch["record"].get("checked_level")) if isinstance(ch.get("record"), dict) else None
    checked_txt = (
        f"; checked interval ({fmt(100 * level) if level else '?'}% of held-out prices of its kinds) "
        f"{fmt(num(ck[0]))} .. {fmt(num(ck[1]))} %"
        if ck[0] is not None
        else ""
    )
    sec.add(
        table(
            rows,
            ["phase", "Δ instructions / tile", "Δ cycles / tile", "interval", "count rule", "from"],
            numeric=(1, 2, 4),
            caption=f"projected wall time {fmt(num(ch.get('wall_pct')))} % (interval {fmt(num(iv[0]))} .. "
            f"{fmt(num(iv[1]))} %){checked_txt}; the instruction-count rule {fmt(num(ch.get('count_rule_pct')))} %",
        )
    )
    for u in chain.get("unpriced") or []:
        sec.add(note(f"not priced: {_esc(str(u))}", "warning"))
    rec = ch.get("record") if isinstance(ch.get("record"), dict) else {}
    checked = rec.get("checked") if isinstance(rec.get("checked"), dict) else {}
    rows = [
        [
            _esc(str(k)),
            fmt(v.get("points")),
            fmt(v.get("held_out")),
            fmt(v.get("median_pp")),
            fmt(v.get("max_pp")),
            fmt(v.get("bias_pp")),
        ]
        for k, v in [*checked.items(), ("every change", rec.get("all"))]
        if isinstance(v, dict)
    ]
    if rows:
        sec.add(
            table(
                rows,
                ["checked: changes that touch", "points", "held out", "median |error| pp", "max pp", "mean pp"],
                numeric=(1, 2, 3, 4, 5),
                caption="how projections of this kind scored on the stored checks; held out: priced as committed "
                "before the pair was timed, the rest re-priced since by a fit that used them",
            )
        )


def _one(sec: Section, art: Artifact) -> None:
    d = art.data
    _change(sec, d)
    sentence = d.get("sentence") or d.get("explanation") or dig(d, "deterministic", "sentence")
    if isinstance(sentence, str) and sentence:
        sec.add(f"<p><b>{_esc(sentence)}</b></p>")
    fig = _sweep_json_figure(d)
    if fig is None:
        df = sweep_frame(art)
        fig = _heatmap(df) if df is not None and len(df) else None
    if fig is not None:
        sec.add(
            Figure(
                fig,
                height=520,
                caption=f"{art.path.parent.name}/{art.path.name}: projected wall time ÷ "
                "baseline wall time for each (K-loop Δ, Phase-1 Δ) cycles per tile; "
                "the marker is the current kernel, the line where the binding side "
                "flips",
            )
        )
    elif not any(isinstance(d.get(m), dict) for m in ("deterministic", "stochastic")):
        sec.add(
            note(
                f"{art.path.name}: no projection or sweep in this model artifact (bsprof model --sweep ... -o DIR)",
                "warning",
            )
        )
        return
    rows = _baseline_rows(art)
    if rows and len(rows[0]) == 3:
        sec.add(
            table(
                rows,
                ["model", "current tile period (cycles)", "binding side now"],
                numeric=(1,),
                caption=f"calibrated on: {d.get('source') or '?'}",
            )
        )
    elif rows:
        sec.add(
            table(
                rows,
                ["model", "baseline tile (cycles)", "projected tile", "wall ratio", "binding side"],
                numeric=(1, 2),
                caption=f"calibrated on: {d.get('source') or '?'}; deltas: "
                f"{d.get('deltas') or d.get('fixed') or 'none'}",
            )
        )
    _fitted(sec, d)


def _fitted(sec: Section, d: dict) -> None:
    """The terms no table measured, with what rests on them, and the default's provenance."""
    terms = [t for t in d.get("fitted_terms") or [] if isinstance(t, dict)]
    if terms:
        rows = []
        for t in terms:
            frac = "fraction" in str(t.get("how", ""))
            size = num(t.get("size"))
            share, wo, pc = (
                num(t.get("share_of_period")),
                num(t.get("projected_change_without")),
                num(t.get("projected_change")),
            )
            rows.append(
                [
                    t.get("term", "?"),
                    "—" if size is None else (f"{size:.2f}" if frac else f"{size:,.0f} cycles"),
                    t.get("how", ""),
                    "—" if share is None else f"{share:.1%}",
                    "—" if pc is None else f"{pc * 100:+.2f} %",
                    "—" if wo is None else f"{wo * 100:+.2f} %",
                ]
            )
        sec.add(
            table(
                rows,
                ["term no table measured", "size", "how", "share of period", "projection", "projection without it"],
                caption="what the projection rests on",
            )
        )
    prov = d.get("provenance")
    if isinstance(prov, dict):
        sec.add(note("; ".join(f"{k}: {v}" for k, v in prov.items())))  # note() escapes, once


def _esc(s: str) -> str:
    from bsprof.reports.page import esc

    return esc(s)


def _axes(d: dict) -> dict[str, list[float]] | None:
    axes = d.get("axes")
    if isinstance(axes, dict) and axes and all(isinstance(v, list) for v in axes.values()):
        return {k: [float(x) for x in v] for k, v in axes.items()}
    return None


def _grid(g: Any, transpose: bool):
    import numpy as np

    a = np.array([[np.nan if v is None else v for v in row] for row in g], dtype=object)
    return a.T if transpose else a


def _sweep_json_figure(d: dict):
    """The sweep the model stored in its JSON (``SweepResult.to_json()``): K-loop delta on x, the
    epilogue knob on y, coloured by the stochastic wall-time change (deterministic when absent)."""
    import numpy as np
    import plotly.graph_objects as go

    axes = _axes(d)
    det, sto = d.get("deterministic") or {}, d.get("stochastic") or {}
    if not axes or not isinstance(det.get("wall_ratio"), list):
        return None
    knobs = list(axes)
    if len(knobs) == 1:  # a one-axis sweep: the model's own line chart
        from bsprof.reports.figures_model import sweep_figure

        return sweep_figure(d, title="Projected wall-time change")
    # x: the K-loop side (kloop or tma0) when present; y: the other knob
    xk = next((k for k in knobs if k in ("kloop", "tma0")), knobs[1])
    yk = next(k for k in knobs if k != xk)
    transpose = knobs[0] == xk  # grids are indexed [knobs[0]][knobs[1]]; plotly wants z[y][x]
    zdet = _grid(det["wall_ratio"], transpose).astype(float)
    zsto = _grid(sto["wall_ratio"], transpose).astype(float) if isinstance(sto.get("wall_ratio"), list) else None
    z = (zsto if zsto is not None else zdet - 0) * 100 - 100
    bind = _grid(det["binding"], transpose) if isinstance(det.get("binding"), list) else None
    xs, ys = axes[xk], axes[yk]
    text = [
        [
            f"deterministic {(zdet[i][j] - 1) * 100:+.2f}%" + (f", {bind[i][j]} binds" if bind is not None else "")
            for j in range(len(xs))
        ]
        for i in range(len(ys))
    ]
    lim = float(np.nanmax(np.abs(z))) or 1.0
    fig = go.Figure(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            text=text,
            colorscale="RdBu_r",
            zmid=0,
            zmin=-lim,
            zmax=lim,
            colorbar=dict(title="wall %"),
            hovertemplate=(
                f"{_name(xk)} Δ %{{x:+,.0f}}, {_name(yk)} Δ %{{y:+,.0f}} cycles/tile<br>"
                + ("stochastic" if zsto is not None else "deterministic")
                + " %{z:+.2f}%<br>%{text}<extra></extra>"
            ),
        )
    )
    if bind is not None:
        _boundary(fig, xs, ys, bind)
    if 0.0 in xs and 0.0 in ys or (min(xs) <= 0 <= max(xs) and min(ys) <= 0 <= max(ys)):
        fig.add_trace(
            go.Scatter(
                x=[0],
                y=[0],
                mode="markers+text",
                text=["current"],
                textposition="top right",
                marker=dict(symbol="x", size=14, color="#000"),
                name="current kernel",
                hovertemplate="current kernel (no change)<extra></extra>",
            )
        )
    fig.update_layout(
        xaxis_title=f"{_name(xk)} Δ, cycles per tile",
        yaxis_title=f"{_name(yk)} Δ, cycles per tile",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        title=dict(
            text="Projected wall-time change, %"
            + (" (stochastic model; hover for deterministic)" if zsto is not None else ""),
            font=dict(size=13),
        ),
    )
    return fig


def _name(knob: str) -> str:
    return {"kloop": "K-loop", "tma0": "TMA0", "phase1": "epilogue Phase 1", "phase2": "epilogue Phase 2"}.get(
        knob, knob
    )


def _boundary(fig, xs, ys, bind) -> None:
    """The line where the binding side flips: between adjacent grid cells whose binding differs, on
    each row and each column, joined in order of x."""
    import numpy as np
    import plotly.graph_objects as go

    pts = set()
    for i in range(len(ys)):
        for j in range(len(xs) - 1):
            if bind[i][j] != bind[i][j + 1]:
                pts.add(((xs[j] + xs[j + 1]) / 2, ys[i]))
    for j in range(len(xs)):
        for i in range(len(ys) - 1):
            if bind[i][j] != bind[i + 1][j]:
                pts.add((xs[j], (ys[i] + ys[i + 1]) / 2))
    if pts:
        pts = sorted(pts)
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in pts],
                y=[p[1] for p in pts],
                mode="lines",
                line=dict(color="#1d2330", width=2.5),
                name="binding side flips",
                hovertemplate="binding side flips here<extra></extra>",
            )
        )
    flat = [str(v) for v in np.ravel(bind) if v not in (None, "") and str(v) != "nan"]
    for side in sorted(set(flat)):
        ii, jj = np.where(bind == side)
        k = len(ii) // 2
        fig.add_annotation(
            x=xs[jj[k]],
            y=ys[ii[k]],
            text=f"{side} binds",
            showarrow=False,
            font=dict(color="#1d2330", size=12),
            bgcolor="rgba(255,255,255,0.7)",
        )


def _heatmap(df):
    """Wall-ratio heatmap over the sweep grid, with (0, 0) marked and the binding-flip boundary."""
    import numpy as np
    import plotly.graph_objects as go

    cols = list(df.columns)
    xc, yc, zc = _pick(cols, X_COLS), _pick(cols, Y_COLS), _pick(cols, Z_COLS)
    if not (xc and yc and zc):
        return None
    bc = _pick(cols, B_COLS)
    piv = df.pivot_table(index=yc, columns=xc, values=zc, aggfunc="mean").sort_index().sort_index(axis=1)
    xs, ys, z = [float(v) for v in piv.columns], [float(v) for v in piv.index], piv.to_numpy()
    fig = go.Figure(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            colorscale="RdBu_r",
            zmid=1.0,
            colorbar=dict(title="wall ratio"),
            hovertemplate="K-loop Δ %{x:+,.0f}, Phase 1 Δ %{y:+,.0f}: wall × %{z:.4f}<extra></extra>",
        )
    )
    if bc:
        bind = df.pivot_table(index=yc, columns=xc, values=bc, aggfunc="first").sort_index().sort_index(axis=1)
        b = bind.to_numpy()
        # boundary: midpoints between vertically adjacent grid cells whose binding side differs
        bx, by = [], []
        for j, x in enumerate(xs):
            col = b[:, j]
            for i in range(len(ys) - 1):
                if col[i] != col[i + 1]:
                    bx.append(x)
                    by.append((ys[i] + ys[i + 1]) / 2)
                    break
        if bx:
            fig.add_trace(
                go.Scatter(
                    x=bx,
                    y=by,
                    mode="lines+markers",
                    line=dict(color="#1d2330", width=2),
                    marker=dict(size=4),
                    name="binding side flips",
                    hovertemplate="binding flips near Phase 1 Δ %{y:+,.0f}<extra></extra>",
                )
            )
        sides = sorted({str(v) for v in np.ravel(b) if v is not None and str(v) != "nan"})
        for side in sides:  # label each side's region at one of its cells
            ii, jj = np.where(b == side)
            if len(ii):
                k = len(ii) // 2
                fig.add_annotation(
                    x=xs[jj[k]],
                    y=ys[ii[k]],
                    text=f"{side} binds",
                    showarrow=False,
                    font=dict(color="#1d2330", size=12),
                    bgcolor="rgba(255,255,255,0.6)",
                )
    fig.add_trace(
        go.Scatter(
            x=[0],
            y=[0],
            mode="markers",
            marker=dict(symbol="x", size=14, color="#000"),
            name="current kernel",
            hovertemplate="current kernel (Δ 0, 0)<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis_title="K-loop Δ, cycles per tile",
        yaxis_title="epilogue Phase 1 Δ, cycles per tile",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        title=dict(text="Projected wall time ÷ current (deterministic model)", font=dict(size=13)),
    )
    return fig


def compare_metrics(run: Run) -> dict[tuple[str, str | None], Any]:
    arts = _model_artifacts(run)
    if not arts:
        return {}
    d = arts[0].data
    out: dict[tuple[str, str | None], Any] = {}
    det = d.get("deterministic") if isinstance(d.get("deterministic"), dict) else {}
    if num(det.get("baseline_tile_cycles")) is not None:
        out[("model tile (cycles)", "lower")] = num(det["baseline_tile_cycles"])
    if det.get("binding_before"):
        out[("model binding side", None)] = det["binding_before"]
    return out
