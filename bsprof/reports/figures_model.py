"""Plotly figures of model sweeps: used by ``bsprof model --html`` and by ``bsprof report``.

Works from the sweep's JSON form (``SweepResult.to_json()``, also stored in model.json), so the
report can redraw a sweep without re-running the model. plotly is imported only here, lazily.
"""

from __future__ import annotations

import os


def _pct(rows):
    if rows and isinstance(rows[0], list):
        return [[None if v is None else (v - 1.0) * 100.0 for v in r] for r in rows]
    return [None if v is None else (v - 1.0) * 100.0 for v in rows]


def _label(knob: str) -> str:
    return {"tma0": "TMA0", "kloop": "K-loop", "phase1": "Phase 1", "phase2": "Phase 2"}.get(knob, knob) + " delta"


def sweep_figure(sweep: dict, title: str = "Projected wall-time change"):
    """A heatmap (two axes) or line chart (one axis) of the projected wall-time change in percent,
    stochastic model in colour/solid, deterministic as text/dashed (no Monte Carlo band: docs/model.md)."""
    import plotly.graph_objects as go

    axes = sweep["axes"]
    knobs = list(axes)
    sto = sweep.get("stochastic", {})
    det = sweep.get("deterministic", {})
    if len(knobs) == 2:
        z = _pct(sto.get("wall_ratio") or det["wall_ratio"])
        zd = _pct(det["wall_ratio"])
        binding = det.get("binding") or [[""] * len(axes[knobs[1]]) for _ in axes[knobs[0]]]
        text = [[f"det {d:+.2f}%<br>{b}" for d, b in zip(rd, rb)] for rd, rb in zip(zd, binding)]
        fig = go.Figure(
            go.Heatmap(
                x=[str(v) for v in axes[knobs[1]]],
                y=[str(v) for v in axes[knobs[0]]],
                z=z,
                text=text,
                colorscale="RdBu_r",
                zmid=0,
                colorbar={"title": "wall %"},
                hovertemplate=(
                    f"{_label(knobs[0])} %{{y}}<br>{_label(knobs[1])} %{{x}}<br>"
                    "stochastic %{z:+.2f}%<br>%{text}<extra></extra>"
                ),
            )
        )
        fig.update_layout(
            xaxis_title=_label(knobs[1]) + " (cycles/tile)", yaxis_title=_label(knobs[0]) + " (cycles/tile)"
        )
    else:
        x = [str(v) for v in axes[knobs[0]]]
        fig = go.Figure()
        if sto.get("wall_ratio"):
            fig.add_trace(go.Scatter(x=x, y=_pct(sto["wall_ratio"]), name="stochastic mean"))
        fig.add_trace(go.Scatter(x=x, y=_pct(det["wall_ratio"]), name="deterministic", line={"dash": "dash"}))
        fig.update_layout(xaxis_title=_label(knobs[0]) + " (cycles/tile)", yaxis_title="wall time change (%)")
    fig.update_layout(title=title, template="plotly_white")
    return fig


def write_html(fig, path: str | os.PathLike) -> None:
    """Self-contained HTML (plotly.js inlined), written by the single-output-file policy (it carries
    bsprof's mark, so a later run may replace it)."""
    from bsprof.io import write_output_file

    write_output_file(path, figure_html(fig))


def figure_html(fig) -> str:
    """The figure as a whole page with bsprof's mark in its head (the output policy's proof of origin)."""
    from bsprof.io import BSPROF_MARK

    html = fig.to_html(include_plotlyjs=True, full_html=True)
    return html.replace("<head>", "<head>" + BSPROF_MARK, 1)


def projection_figure(doc: dict, title: str = "Tile period: baseline vs projected"):
    """Bars of baseline and projected tile cycles for both models."""
    import plotly.graph_objects as go

    det, sto = doc.get("deterministic") or {}, doc.get("stochastic") or {}
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="baseline",
            x=["deterministic", "stochastic"],
            y=[det.get("baseline_tile_cycles"), sto.get("baseline_tile_cycles")],
        )
    )
    fig.add_trace(
        go.Bar(
            name="projected",
            x=["deterministic", "stochastic"],
            y=[det.get("projected_tile_cycles"), sto.get("projected_tile_cycles")],
        )
    )
    deltas = ", ".join(f"{k} {v}" for k, v in (doc.get("deltas") or {}).items()) or "no change"
    fig.update_layout(
        title=f"{title} ({deltas})", barmode="group", yaxis_title="cycles per tile", template="plotly_white"
    )
    return fig


def figure_for(doc: dict):
    """The figure of a model.json: the sweep heatmap/line when it holds a sweep, else the bars."""
    return sweep_figure(doc) if "axes" in doc else projection_figure(doc)


def metrics(doc: dict) -> dict:
    """Headline numbers of a model.json for run-to-run comparison: {(name, better): value}."""
    out = {}
    for model in ("deterministic", "stochastic"):
        d = doc.get(model) or {}
        if isinstance(d.get("baseline_tile_cycles"), (int, float)):
            out[(f"model {model} baseline tile (cycles)", "lower")] = d["baseline_tile_cycles"]
        if isinstance(d.get("wall_ratio"), (int, float)):
            out[(f"model {model} projected wall ratio", "lower")] = d["wall_ratio"]
    return out
