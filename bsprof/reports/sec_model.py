"""The model section: the projection heatmap (K-loop delta x epilogue delta) with the current point
and the boundary where the binding side flips, plus the baseline equilibrium it starts from.

Reads the ``model`` artifact of ``bsprof model ... -o DIR`` (issue #6's JSON contract:
``deterministic`` / ``stochastic`` with ``baseline_tile_cycles``, ``projected_tile_cycles``,
``wall_ratio``, ``binding_before``, ``binding_after``) and its sweep grid (rows of K-loop delta,
Phase-1 delta, wall ratio and binding side, in the JSON or as a table beside it). When the model
package ships a figure builder (:mod:`bsprof.reports.figures_model`), the heatmap is its figure.
"""

from __future__ import annotations

from typing import Any

from bsprof.reports.artifacts import Artifact, Run, TableError
from bsprof.reports.fmt import dig, fmt, num
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
    rows = []
    for model in ("deterministic", "stochastic"):
        m = d.get(model)
        if not isinstance(m, dict):
            continue
        ratio = num(m.get("wall_ratio"))
        band = ""
        if num(m.get("wall_ratio_p05")) is not None and num(m.get("wall_ratio_p95")) is not None:
            band = f" (90 %: {num(m['wall_ratio_p05']):.4f}–{num(m['wall_ratio_p95']):.4f})"
        rows.append([model, fmt(m.get("baseline_tile_cycles")), fmt(m.get("projected_tile_cycles")),
                     (f"{ratio:.4f}" if ratio is not None else "—") + band,
                     f"{m.get('binding_before', '—')} → {m.get('binding_after', '—')}"])
    return rows


def _builder():
    try:
        from bsprof.reports import figures_model
    except ImportError:
        return None
    for name in ("heatmap_figure", "sweep_heatmap", "heatmap"):
        fn = getattr(figures_model, name, None)
        if callable(fn):
            return fn
    return None


def heatmap(run: Run) -> Section | None:
    arts = _model_artifacts(run)
    if not arts:
        return None
    sec = Section("model", "Model projection")
    for art in arts[:2]:
        _one(sec, art)
    return sec


def _one(sec: Section, art: Artifact) -> None:
    d = art.data
    sentence = d.get("sentence") or d.get("explanation") or dig(d, "deterministic", "sentence")
    if isinstance(sentence, str) and sentence:
        sec.add(f"<p><b>{_esc(sentence)}</b></p>")
    fig = None
    builder = _builder()
    if builder is not None:
        try:
            fig = builder(d)
        except Exception:  # the builder wants another shape: draw our own from the grid below
            fig = None
    if fig is None:
        df = sweep_frame(art)
        fig = _heatmap(df) if df is not None and len(df) else None
    if fig is not None:
        sec.add(Figure(fig, height=520, caption=f"{art.path.parent.name}/{art.path.name}: projected wall time ÷ "
                                                "baseline wall time for each (K-loop Δ, Phase-1 Δ) cycles per tile; "
                                                "the marker is the current kernel, the line where the binding side "
                                                "flips"))
    elif not any(isinstance(d.get(m), dict) for m in ("deterministic", "stochastic")):
        sec.add(note(f"{art.path.name}: no projection or sweep in this model artifact (bsprof model --sweep ... -o DIR)",
                     "warning"))
        return
    rows = _baseline_rows(art)
    if rows:
        sec.add(table(rows, ["model", "baseline tile (cycles)", "projected tile", "wall ratio", "binding side"],
                      numeric=(1, 2)))


def _esc(s: str) -> str:
    from bsprof.reports.page import esc

    return esc(s)


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
    fig = go.Figure(go.Heatmap(
        x=xs, y=ys, z=z, colorscale="RdBu_r", zmid=1.0, colorbar=dict(title="wall ratio"),
        hovertemplate="K-loop Δ %{x:+,.0f}, Phase 1 Δ %{y:+,.0f}: wall × %{z:.4f}<extra></extra>"))
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
            fig.add_trace(go.Scatter(x=bx, y=by, mode="lines+markers", line=dict(color="#1d2330", width=2),
                                     marker=dict(size=4), name="binding side flips",
                                     hovertemplate="binding flips near Phase 1 Δ %{y:+,.0f}<extra></extra>"))
        sides = sorted({str(v) for v in np.ravel(b) if v is not None and str(v) != "nan"})
        for side in sides:  # label each side's region at one of its cells
            ii, jj = np.where(b == side)
            if len(ii):
                k = len(ii) // 2
                fig.add_annotation(x=xs[jj[k]], y=ys[ii[k]], text=f"{side} binds", showarrow=False,
                                   font=dict(color="#1d2330", size=12), bgcolor="rgba(255,255,255,0.6)")
    fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers", marker=dict(symbol="x", size=14, color="#000"),
                             name="current kernel", hovertemplate="current kernel (Δ 0, 0)<extra></extra>"))
    fig.update_layout(xaxis_title="K-loop Δ, cycles per tile", yaxis_title="epilogue Phase 1 Δ, cycles per tile",
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
                      title=dict(text="Projected wall time ÷ current (deterministic model)", font=dict(size=13)))
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
