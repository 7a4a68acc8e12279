"""The epilogue shared-path ceiling (``bsprof model --measure-ceiling``): per-warp time of a fixed
epilogue-shaped work against the number of warps sharing one SM, one curve per ALU mix. The model
splits Phase 1 through this curve when ``--epi-warps`` changes (:mod:`bsprof.analyzers.model.ceiling`)."""

from __future__ import annotations

from bsprof.artifacts import Run
from bsprof.fmt import num
from bsprof.reports.page import Figure, Section, table


def curves(run: Run) -> Section | None:
    import plotly.graph_objects as go

    for art in run.of("epi_ceiling"):
        found = art.data.get("curves")
        if not isinstance(found, dict) or not found:
            continue
        fig = go.Figure()
        rows = []
        for name, c in found.items():
            if not isinstance(c, dict):
                continue
            warps, cycles = c.get("warps") or [], c.get("cycles") or []
            pairs = [(w, num(y)) for w, y in zip(warps, cycles) if num(y) is not None]
            if not pairs:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[w for w, _ in pairs],
                    y=[y for _, y in pairs],
                    mode="lines+markers",
                    name=name,
                    hovertemplate="%{x} warps: %{y:,.0f} cycles<extra>" + name + "</extra>",
                )
            )
            rows.append([name, c.get("what", ""), c.get("saturates_at", "—")])
        if not rows:
            continue
        fig.update_layout(
            xaxis_title="warps sharing one SM",
            yaxis_title="cycles per warp",
            title=dict(text="Epilogue shared-path ceiling", font=dict(size=13)),
        )
        sec = Section("ceiling", "Epilogue shared-path ceiling")
        sec.add(
            Figure(
                fig,
                height=340,
                caption=f"{art.data.get('device', '?')}, {art.data.get('iters', '?')} "
                f"chunks per warp, median of {art.data.get('repeats', '?')} repeats "
                f"({art.path.parent.name}/{art.path.name})",
            )
        )
        sec.add(table(rows, header=["mix", "work per chunk", "saturates at (warps)"]))
        return sec
    return None
