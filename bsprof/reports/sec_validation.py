"""Validation scatter: the model's projected wall-time ratio against the measured one, per point.

Reads the ``validation`` artifact of ``bsprof model --validate`` (``points``: the rows of
validation.csv — direction, knob, nominal deltas, measured_ratio with its 95% interval, the
model's projection ``projected_wall_det``, the oracle's and the trivial predictor's, and their
``err_*_pct`` — and ``summary``: median and max |error| of each, on every point and on the flip
points, against the target). The Monte Carlo band is not drawn: it covered too few measured points.
"""

from __future__ import annotations

from typing import Any

from bsprof.artifacts import Artifact, Run, TableError
from bsprof.fmt import dig, fmt, num
from bsprof.reports.page import Figure, Section, note, table

TARGET_MEDIAN_PCT = 2.0  # the model's accuracy target: median |error| <= 2 %
TARGET_MAX_PCT = 5.0  # ... and max <= 5 %
KNOB_SYMBOL = {"kloop": "circle", "phase1": "square", "both": "diamond"}
KNOB_COLOR = {"kloop": "#4f81bd", "phase1": "#c0504d", "both": "#8064a2", "none": "#777"}
# (label, projection column, error column, filled marker); version-1 runs carried projected_det
MODELS = (
    ("model", "projected_wall_det", "err_det_pct", True),
    ("trivial", "projected_trivial", "err_trivial_pct", False),
)
SUMMARIES = (("det", "model"), ("oracle", "oracle (measured phase changes)"), ("trivial", "trivial predictor"))


def _points(art: Artifact) -> list[dict]:
    pts = art.data.get("points")
    if isinstance(pts, list) and pts:
        return [p for p in pts if isinstance(p, dict)]
    try:  # the CSV beside the JSON carries the same rows
        df = art.read_table(dig(art.data, "files", "table") or "", "validation")
    except TableError:
        return []
    return [] if df is None else df.to_dict("records")


def _usable(p: dict) -> bool:
    return num(p.get("measured_ratio")) is not None and num(p.get("projected_wall_det")) is not None


def scatter(run: Run) -> Section | None:
    import plotly.graph_objects as go

    arts = run.of("validation")
    if not arts:
        return None
    sec = Section("validation", "Model validation: projected vs measured")
    for art in arts[:2]:
        pts = [p for p in _points(art) if _usable(p)]
        if not pts:
            sec.add(
                note(f"{art.path.name}: no scored points (half-written run? re-run bsprof model --validate)", "warning")
            )
            sec.level = "warning"
            continue
        meas = [num(p["measured_ratio"]) for p in pts]
        projs = [num(p.get(k)) for p in pts for _, k, _, _ in MODELS if num(p.get(k)) is not None]
        lo, hi = min(meas + projs), max(meas + projs)
        pad = (hi - lo) * 0.08 or 0.02
        lo, hi = lo - pad, hi + pad
        fig = go.Figure()
        # the error band: projected within ±target of measured (ratios, so the band widens with x)
        for pct_, shade, label in (
            (TARGET_MAX_PCT, "rgba(192,80,77,0.07)", f"±{TARGET_MAX_PCT:g}% (max target)"),
            (TARGET_MEDIAN_PCT, "rgba(79,129,189,0.13)", f"±{TARGET_MEDIAN_PCT:g}% (median target)"),
        ):
            f = pct_ / 100
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi, hi, lo, lo],
                    y=[lo * (1 - f), hi * (1 - f), hi * (1 + f), lo * (1 + f), lo * (1 - f)],
                    mode="lines",
                    fill="toself",
                    fillcolor=shade,
                    line=dict(width=0),
                    name=label,
                    hoverinfo="skip",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                line=dict(color="#555", dash="dot", width=1),
                name="projected = measured",
                hoverinfo="skip",
            )
        )
        for model, key, err_key, filled in MODELS:
            for knob in sorted({str(p.get("knob")) for p in pts}):
                sel = [p for p in pts if str(p.get("knob")) == knob and num(p.get(key)) is not None]
                if not sel:
                    continue
                band = None
                if filled and all(num(p.get("ci_hi")) is not None for p in sel):  # the measurement's 95% CI
                    band = dict(
                        type="data",
                        symmetric=False,
                        array=[num(p["ci_hi"]) - num(p["measured_ratio"]) for p in sel],
                        arrayminus=[num(p["measured_ratio"]) - num(p["ci_lo"]) for p in sel],
                        thickness=1,
                        width=2,
                        color="#999",
                    )
                fig.add_trace(
                    go.Scatter(
                        x=[num(p["measured_ratio"]) for p in sel],
                        y=[num(p[key]) for p in sel],
                        mode="markers",
                        name=f"{knob} · {model}",
                        error_x=band,
                        marker=dict(
                            symbol=KNOB_SYMBOL.get(knob, "circle") + ("" if filled else "-open"),
                            size=9,
                            color=KNOB_COLOR.get(knob, "#444"),
                            line=dict(width=1.5, color=KNOB_COLOR.get(knob, "#444")),
                        ),
                        customdata=[
                            [
                                p.get("direction", ""),
                                fmt(p.get("delta_kloop")),
                                fmt(p.get("delta_phase1")),
                                fmt(p.get(err_key), 3),
                                p.get("binding_after", ""),
                            ]
                            for p in sel
                        ],
                        hovertemplate=(
                            "%{customdata[0]}: ΔK-loop %{customdata[1]}, ΔPhase1 %{customdata[2]} cycles<br>"
                            "measured %{x:.4f}, projected %{y:.4f} (error %{customdata[3]}%)<br>"
                            "binding after: %{customdata[4]}<extra>" + f"{knob} · {model}</extra>"
                        ),
                    )
                )
        fig.update_layout(
            xaxis=dict(title="measured wall-time ratio (build ÷ calibration build)", range=[lo, hi]),
            yaxis=dict(title="projected wall-time ratio", range=[lo, hi]),
            title=dict(text=_title(art), font=dict(size=12)),
        )
        sec.add(
            Figure(
                fig,
                height=520,
                caption=f"{art.path.parent.name}/{art.path.name}: {len(pts)} points; filled: "
                "the model (from the calibration table and the nominal change), with the "
                "measurement's 95% interval; open: the trivial predictor; forward points "
                "slow the plain build down, reverse points project back to it",
            )
        )
        sec.add(_error_figure(pts))
        sec.add(_summary_table(art, pts))
    return sec


def _error_figure(pts: list[dict]) -> Figure:
    """Error per point against the injected change: where (and on which side) the model drifts."""
    import plotly.graph_objects as go

    def delta(p: dict) -> float:
        return (num(p.get("delta_kloop")) or 0.0) + (num(p.get("delta_phase1")) or 0.0)

    xs = [delta(p) for p in pts]
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    pad = (hi - lo) * 0.05 or 1.0
    fig = go.Figure()
    for pct_, shade in ((TARGET_MAX_PCT, "rgba(192,80,77,0.07)"), (TARGET_MEDIAN_PCT, "rgba(79,129,189,0.13)")):
        fig.add_hrect(y0=-pct_, y1=pct_, fillcolor=shade, line_width=0)
    for knob in sorted({str(p.get("knob")) for p in pts}):
        for model, _, key, filled in MODELS:
            sel = [p for p in pts if str(p.get("knob")) == knob and num(p.get(key)) is not None]
            if not sel:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[delta(p) for p in sel],
                    y=[num(p[key]) for p in sel],
                    mode="markers",
                    name=f"{knob} · {model}",
                    marker=dict(
                        symbol=KNOB_SYMBOL.get(knob, "circle") + ("" if filled else "-open"),
                        size=8,
                        color=KNOB_COLOR.get(knob, "#444"),
                    ),
                    hovertemplate="Δ %{x:,.0f} cycles/tile: error %{y:.2f}%<extra>" + f"{knob} · {model}</extra>",
                )
            )
    fig.update_layout(
        xaxis=dict(title="injected change per tile, cycles (negative: reverse projection)", range=[lo - pad, hi + pad]),
        yaxis_title="projected ÷ measured − 1, %",
        showlegend=False,
        title=dict(text="Error against the size of the change (bands: ±2 %, ±5 %)", font=dict(size=12)),
    )
    return Figure(fig, height=300)


def _title(art: Artifact) -> str:
    d = art.data
    bits = [d.get("device"), d.get("family"), d.get("variant")]
    if isinstance(d.get("mnkl"), list):
        bits.append("x".join(map(str, d["mnkl"][:3])))
    return " · ".join(str(b) for b in bits if b) or "validation"


def _summary_table(art: Artifact, pts: list[dict]) -> str:
    summ = art.data.get("summary") or {}
    rows: list[list[Any]] = []
    for key, label in SUMMARIES:
        s = summ.get(key) if isinstance(summ.get(key), dict) else {}
        med, mx = num(s.get("median_abs_pct")), num(s.get("max_abs_pct"))
        if med is None:
            continue
        flip = s.get("flip") if isinstance(s.get("flip"), dict) else {}
        fmed = num(flip.get("median_abs_pct"))
        ok = s.get("pass")
        verdict = "—" if ok is None else ("meets the target" if ok else "misses the target")
        rows.append(
            [
                label,
                str(s.get("n", "")),
                f"{med:.2f} %",
                f"{mx:.2f} %",
                f"{fmed:.2f} % ({flip.get('n')})" if fmed is not None else "—",
                verdict,
            ]
        )
    out = table(
        rows,
        [
            "projection",
            "points",
            "median |error|",
            "max |error|",
            "flip points: median (n)",
            f"target: median ≤ {TARGET_MEDIAN_PCT:g} %, max ≤ {TARGET_MAX_PCT:g} %, ≥ 12 points",
        ],
        numeric=(1, 2, 3),
    )
    noise = num(summ.get("noise_floor_pct"))
    if noise is not None:
        out += note(
            f"noise floor: a second plain build measured {noise:.2f} % off the first; "
            f"median 95% interval of a point's error ±{num(summ.get('median_ci_pct')) or 0:.2f} %"
        )
    return out
