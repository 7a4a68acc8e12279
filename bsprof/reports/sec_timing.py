"""Timing sections: per-phase duration distributions and a per-warp timeline of a few tiles.

Input: a ``timing`` artifact and the per-warp, per-tile table beside it (schema:
:mod:`bsprof.analyzers.timing.schema`). Statistics come from :mod:`bsprof.analyzers.timing.stats`;
this module only reduces the table to what a figure needs (box statistics and a few tiles), so the
page stays small however many tiles were captured.
"""

from __future__ import annotations

from typing import Any

from bsprof.analyzers.timing.schema import PHASES, ROLES
from bsprof.artifacts import Artifact, Run, TableError
from bsprof.fmt import dig, fmt, num
from bsprof.reports.page import Figure, Section, note, table

# one colour per phase, stable across figures (waits grey-ish, work saturated)
PHASE_COLORS: dict[str, str] = {
    "load": "#8064a2",
    "acc_wait": "#bfbfbf",
    "tma0": "#f2b880",
    "kloop": "#4f81bd",
    "ml_wait": "#d9d9d9",
    "phase1": "#c0504d",
    "phase2": "#9bbb59",
}
TIMELINE_TILES = 4


def _table_names(art: Artifact) -> list[str]:
    d = art.data
    names = []
    for key in ("table", "parquet", "csv"):
        v = d.get(key)
        if isinstance(v, str):
            names.append(v)
    for key in ("files", "tables"):
        tables = d.get(key)
        if isinstance(tables, dict):
            names += [tables[k] for k in ("table", "parquet", "csv") if isinstance(tables.get(k), str)]
    return names + ["timing"]


def load(run: Run) -> tuple[Artifact, Any] | None:
    """The first timing artifact with a readable, non-empty table beside it."""
    for art in run.of("timing"):
        try:
            t = art.read_table(*_table_names(art))
        except TableError:
            continue
        if t is not None and len(t):
            return art, t
    return None


def _missing_table(run: Run) -> Section | None:
    arts = run.of("timing")
    if not arts:
        return None
    return Section(
        "timing",
        "Per-phase timing",
        [
            note(
                f"{arts[0].path.name}: its timing table (timing.parquet / timing.csv) is missing or unreadable; "
                "a half-written run? re-run bsprof timing",
                "warning",
            )
        ],
        level="warning",
    )


def _clock_line(art: Artifact) -> str:
    ghz = (
        num(dig(art.data, "stats", "clock", "ghz"))
        or num(dig(art.data, "summary", "clock", "ghz"))
        or num(dig(art.data, "clock", "ghz"))
    )
    return f"SM clock measured during the run: {ghz:.3f} GHz" if ghz else ""


def distributions(run: Run) -> Section | None:
    import numpy as np
    import plotly.graph_objects as go

    got = load(run)
    if got is None:
        return _missing_table(run)
    art, t = got
    from bsprof.analyzers.timing.stats import epilogue_spread, phase_stats

    stats = phase_stats(t)
    dur = (t["end"] - t["start"]).astype("int64")
    fig = go.Figure()
    for role in ROLES:
        for phase in PHASES[role]:
            sel = dur[(t["role"] == role) & (t["phase"] == phase)].to_numpy()
            if not len(sel):
                continue
            q = np.percentile(sel, [5, 25, 50, 75, 95])
            name = f"{role} · {phase}"
            # precomputed box: five numbers per phase instead of every sample
            fig.add_trace(
                go.Box(
                    name=name,
                    q1=[q[1]],
                    median=[q[2]],
                    q3=[q[3]],
                    lowerfence=[q[0]],
                    upperfence=[q[4]],
                    mean=[float(sel.mean())],
                    x=[name],
                    marker_color=PHASE_COLORS.get(phase, "#888"),
                    showlegend=False,
                    hovertemplate=f"{name}<br>n={len(sel)}<extra></extra>",
                )
            )
    fig.update_layout(
        yaxis_title="cycles per tile", title=dict(text="Phase durations per warp and tile", font=dict(size=13))
    )
    sec = Section("timing", "Per-phase timing")
    sec.add(
        Figure(
            fig,
            height=360,
            caption=" · ".join(
                x
                for x in (
                    f"{len(t):,} intervals from {art.path.parent.name}/{art.path.name}; boxes p25–p75 with the median, "
                    "whiskers p5–p95, dashed line the mean",
                    _clock_line(art),
                )
                if x
            ),
        )
    )

    # per epilogue warp: Phase 1 histograms (the slowest warp sets the pace, not the mean)
    ep = t[(t["role"] == "epilogue") & (t["phase"] == "phase1")]
    if len(ep):
        d = (ep["end"] - ep["start"]).astype("int64")
        lo, hi = np.percentile(d, [0.5, 99.5])
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 41)
        fig2 = go.Figure()
        for warp, g in d.groupby(ep["warp"]):
            counts, edges = np.histogram(g.to_numpy(), bins=bins)
            fig2.add_trace(
                go.Scatter(
                    x=(edges[:-1] + edges[1:]) / 2, y=counts, mode="lines", line_shape="hvh", name=f"warp {warp}"
                )
            )
        spread = epilogue_spread(t)
        fig2.update_layout(
            xaxis_title="epilogue Phase 1, cycles",
            yaxis_title="tiles",
            title=dict(text="Phase 1 per epilogue warp", font=dict(size=13)),
            legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
        )
        cap = ""
        if spread.get("tiles"):
            cap = (
                f"per-tile spread (max − min over {spread['warps_per_tile']} warps): mean {fmt(spread['mean'])}, "
                f"p95 {fmt(spread['p95'])} cycles over {spread['tiles']:,} tiles"
            )
        sec.add(Figure(fig2, height=320, caption=cap))
    rows = [
        [r["role"], r["phase"], fmt(r["n"]), fmt(r["mean"]), fmt(r["p50"]), fmt(r["p95"]), fmt(r["max"])]
        for r in stats.to_dict("records")
    ]
    sec.add(table(rows, ["role", "phase", "n", "mean", "p50", "p95", "max"], caption="cycles", numeric=(2, 3, 4, 5, 6)))
    return sec


def timeline(run: Run) -> Section | None:
    """The first few tiles of one CTA, one row per warp (and role), one bar per phase."""
    import plotly.graph_objects as go

    got = load(run)
    if got is None:
        return None
    art, t = got
    # the CTA with the most tiles recorded: a full persistent loop, not a tail CTA
    per_cta = t.groupby("cta")["tile"].nunique()
    cta = int(per_cta.idxmax())
    sel = t[t["cta"] == cta]
    tiles = sorted(sel["tile"].unique())
    first = tiles[1 : 1 + TIMELINE_TILES] if len(tiles) > TIMELINE_TILES + 1 else tiles[:TIMELINE_TILES]
    sel = sel[sel["tile"].isin(first)].copy()
    if sel.empty:
        return None
    t0 = int(sel["start"].min())
    sel["row"] = [f"W{w} {r}" for w, r in zip(sel["warp"], sel["role"])]
    order = sorted(
        sel["row"].unique(),
        key=lambda s: (ROLES.index(s.split(" ", 1)[1]) if s.split(" ", 1)[1] in ROLES else 9, int(s[1:].split(" ")[0])),
    )
    fig = go.Figure()
    for role in ROLES:
        for phase in PHASES[role]:
            p = sel[(sel["role"] == role) & (sel["phase"] == phase)]
            if p.empty:
                continue
            fig.add_trace(
                go.Bar(
                    y=p["row"],
                    x=(p["end"] - p["start"]).astype("int64"),
                    base=(p["start"] - t0).astype("int64"),
                    orientation="h",
                    name=phase,
                    marker_color=PHASE_COLORS.get(phase, "#888"),
                    customdata=p["tile"],
                    hovertemplate=f"{phase} tile %{{customdata}}<br>%{{base:,}} + %{{x:,}} cycles<extra>%{{y}}</extra>",
                )
            )
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        xaxis_title=f"cycles since tile {first[0]} began (SM clock)",
        yaxis=dict(categoryorder="array", categoryarray=order[::-1]),
        title=dict(text=f"CTA {cta}, tiles {first[0]}–{first[-1]}", font=dict(size=13)),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
    )
    sec = Section("timeline", "Per-warp timeline")
    sm = int(sel["sm"].iloc[0])
    sec.add(
        Figure(
            fig,
            height=140 + 28 * len(order),
            caption=f"SM {sm}, CTA {cta}: {len(first)} consecutive tiles; a tile's K-loop (mma) and its "
            "epilogue phases line up left to right",
        )
    )
    return sec
