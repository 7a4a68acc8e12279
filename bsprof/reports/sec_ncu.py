"""Sections drawn from ``bsprof ncu`` summaries: the verdict with its evidence, SOL bars, warp stalls.

Reads the ncu JSON contract (:mod:`bsprof.analyzers.ncu.summary`): per launch ``verdict``,
``verdict_detail`` (class, detail, flags, evidence, candidates, thresholds), ``columns`` (the
documented metric table, :mod:`bsprof.analyzers.ncu.metrics`) and ``rules`` (ncu's own).
"""

from __future__ import annotations

from typing import Any

from bsprof.artifacts import Artifact, Run
from bsprof.fmt import dig, fmt, num, short_name
from bsprof.reports.page import Figure, Section, esc, note, table

# (column, label) in the order a kernel engineer reads them; the first two are ncu's SOL headline.
SOL_BARS: tuple[tuple[str, str], ...] = (
    ("sol_compute_pct", "SM (compute) SOL"),
    ("sol_memory_pct", "memory SOL"),
    ("tensor_pipe_pct", "tensor pipe (active)"),
    ("dram_throughput_pct", "DRAM"),
    ("l2_throughput_pct", "L2"),
    ("l1_throughput_pct", "L1/TEX"),
    ("smem_pipe_pct", "shared-memory pipe"),
    ("tma_pipe_pct", "TMA unit"),
    ("tmem_pct", "TMEM"),
    ("issue_active_pct", "issue slots"),
    ("achieved_occupancy_pct", "achieved occupancy"),
)


def main_launch(art: Artifact) -> tuple[dict | None, int]:
    """The launch a report is about: the longest one (a profiled app may hold helper kernels)."""
    launches = [launch for launch in art.data.get("launches") or [] if isinstance(launch, dict)]
    if not launches:
        return None, 0
    best = max(launches, key=lambda launch: num(launch.get("duration_ns")) or -1.0)
    return best, len(launches)


def _is_ours(art: Artifact, launch: dict) -> bool:
    """A bundled bsprof kernel (the launcher recorded its family, or the CuTe DSL name says so)."""
    fam = (art.data.get("launch") or {}).get("family") if isinstance(art.data.get("launch"), dict) else None
    return bool(fam and fam in ("nvfp4", "fp8-blockwise")) or "bsprof" in str(launch.get("kernel", ""))


def _launches(run: Run) -> list[tuple[Artifact, dict, int]]:
    out = []
    for art in run.of("ncu"):
        launch, n = main_launch(art)
        if launch is not None:
            out.append((art, launch, n))
    # the run's subject first: a bundled kernel before a peer (cuBLAS) profiled beside it
    return sorted(out, key=lambda x: not _is_ours(x[0], x[1]))


def first_launch(run: Run) -> tuple[Artifact, dict, int] | None:
    found = _launches(run)
    return found[0] if found else None


def profiled_peers(run: Run) -> list[dict[str, Any]]:
    """The other kernels profiled in the run (each its longest launch): kernel, duration, TFLOP/s."""
    out = []
    for art, launch, _ in _launches(run)[1:]:
        der = launch.get("derived") or {}
        out.append(
            {
                "kernel": launch.get("kernel"),
                "duration_ns": launch.get("duration_ns"),
                "tflops": der.get("tflops"),
                "source": art.path.parent.name + "/" + art.path.name,
            }
        )
    return out


def _which(art: Artifact, launch: dict, n: int) -> str:
    extra = f" (the longest of {n} launches)" if n > 1 else ""
    return f"{short_name(launch.get('kernel', '?'), 90)}{extra} — {art.path.parent.name}/{art.path.name}"


def verdict(run: Run) -> Section | None:
    found = first_launch(run)
    if not found:
        return None
    art, launch, n = found
    d = launch.get("verdict_detail") or {}
    cls = d.get("label") or d.get("class") or launch.get("verdict") or "no verdict"
    detail = d.get("detail") or ""
    sec = Section("verdict", "Bottleneck verdict")
    sec.add(f'<div class="verdict">{esc(cls)}{" — " + esc(detail) if detail else ""}</div>')
    sec.add("".join(f'<span class="pill">{esc(f)}</span>' for f in d.get("flags") or []))
    # what the summary does not hold (one written before the verdict recorded them) is left out, not "?"
    known = ", ".join(str(d[k]) for k in ("kind", "arch") if d.get(k))
    sec.add(f'<div class="caption">{esc(_which(art, launch, n))}{"; kernel kind " + esc(known) if known else ""}</div>')
    facts = list(d.get("facts") or [])
    busy = d.get("busy") or {}
    if d.get("class") in ("launch-bound", "under-filled") and busy.get("class"):
        facts.append(f"busy SMs: {busy['class']}" + (f" ({busy['unit']})" if busy.get("unit") else ""))
    if facts:
        sec.add("<ul>" + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>")
    evidence = d.get("evidence") or []
    if evidence:
        sec.add(table([[e] for e in evidence], ["evidence (metric = value, rule, threshold)"]))
    cands = d.get("candidates") or []
    if cands:
        prices = d.get("prices") or []
        priced = [
            f"<li>{esc(c)}" + (f"<br><i>→ {esc(prices[i]['text'])}</i>" if i < len(prices) else "") + "</li>"
            for i, c in enumerate(cands)
        ]
        sec.add(
            "<b>Advice for this class, kernel kind and architecture, the largest projected speedup first</b><ul>"
            + "".join(priced)
            + "</ul>"
        )
    if (room := d.get("headroom")) and room.get("bounded"):
        sec.add(f"<p><b>headroom, the work kept:</b> {esc(room['text'])}</p>")
    if d.get("ncu"):
        sec.add("<b>bsprof beside ncu</b><ul>" + "".join(f"<li>{esc(x)}</li>" for x in d["ncu"]) + "</ul>")
    for m in d.get("missing") or []:
        sec.add(note(f"this report lacks {m}"))
    thr = d.get("thresholds") or {}
    if thr:
        sec.add(
            '<div class="caption">thresholds the verdict applies (bsprof.analyzers.ncu.verdict.THRESHOLDS): '
            + " ".join(f'<span class="pill">{esc(k)} {esc(fmt(v))}</span>' for k, v in thr.items())
            + "</div>"
        )
    rules = [r for r in launch.get("rules") or [] if r.get("kind") in ("optimization", "warning")]
    if rules:
        rows = [
            [
                r.get("title") or r.get("name") or r.get("rule"),
                fmt(r.get("speedup_pct"), 2, "%"),
                r.get("speedup_type") or "",
                r.get("message") or "",
            ]
            for r in rules[:6]
        ]
        sec.add(
            table(
                rows,
                ["ncu rule", "est. speedup", "scope", "message"],
                caption=f"Nsight Compute's own rules ({len(rules)} with findings; largest estimated speedup first)",
            )
        )
    return sec


def sol(run: Run) -> Section | None:
    found = first_launch(run)
    if not found:
        return None
    art, launch, n = found
    cols = launch.get("columns") or {}
    bars = [(label, num(cols.get(col)), col) for col, label in SOL_BARS if num(cols.get(col)) is not None]
    if not bars:
        return Section(
            "sol",
            "Speed of light",
            [note(f"{art.path.name} has no throughput metrics (profile with --set triage or full)")],
        )
    import plotly.graph_objects as go

    bound = num(dig(launch, "verdict_detail", "thresholds", "unit_bound_pct")) or 60.0
    labels = [b[0] for b in bars][::-1]
    values = [b[1] for b in bars][::-1]
    colors = ["#c0504d" if v >= bound else "#4f81bd" for v in values]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=colors,
            text=[f"{v:.1f}%" for v in values],
            textposition="outside",
            customdata=[b[2] for b in bars][::-1],
            hovertemplate="%{y}: %{x:.1f}%<br>%{customdata}<extra></extra>",
        )
    )
    fig.add_vline(
        x=bound,
        line_dash="dash",
        line_color="#888",
        annotation_text=f"{bound:g}% bound threshold",
        annotation_position="top",
    )
    fig.update_layout(
        xaxis=dict(range=[0, 110], title="% of peak"),
        showlegend=False,
        title=dict(text="Throughput, % of speed of light", font=dict(size=13)),
    )
    sec = Section("sol", "Speed of light")
    sec.add(
        Figure(
            fig, height=80 + 30 * len(bars), caption=f"{_which(art, launch, n)}; red: at or above the bound threshold"
        )
    )
    return sec


def _stall_columns(cols: dict) -> dict[str, float]:
    out = {k[len("stall_") :]: num(v) for k, v in cols.items() if k.startswith("stall_")}
    return {k: v for k, v in out.items() if v is not None and v > 0}


def stalls(run: Run) -> Section | None:
    """Cycles per issued instruction by stall reason (ncu), and stall samples per SASS region / role."""
    import plotly.graph_objects as go

    sec = Section("stalls", "Warp stalls")
    found = first_launch(run)
    if found:
        art, launch, n = found
        st = _stall_columns(launch.get("columns") or {})
        if st:
            items = sorted(st.items(), key=lambda kv: kv[1])
            total = num((launch.get("columns") or {}).get("warp_cycles_per_issue")) or sum(st.values())
            names = [k + " (issuing, not a stall)" if k == "selected" else k for k, _ in items]
            fig = go.Figure(
                go.Bar(
                    x=[v for _, v in items],
                    y=names,
                    orientation="h",
                    marker_color="#4f81bd",
                    text=[f"{v:.2f} ({100 * v / total:.0f}%)" for _, v in items],
                    textposition="outside",
                    hovertemplate="%{y}: %{x:.3f} cycles/inst<extra></extra>",
                )
            )
            fig.update_layout(
                xaxis=dict(title="warp cycles per issued instruction", range=[0, items[-1][1] * 1.18]),
                showlegend=False,
                title=dict(text=f"Stall reasons ({fmt(total)} cycles between issues)", font=dict(size=13)),
            )
            sec.add(Figure(fig, height=80 + 22 * len(items), caption=_which(art, launch, n)))
    from bsprof.reports import sec_sass

    role_fig = sec_sass.stall_samples_figure(run)
    if role_fig is not None:
        sec.add(role_fig)
    elif found and sec.blocks:
        sec.add(
            note(
                "stall samples per warp role need SASS with line info and an ncu report with SourceCounters "
                "(bsprof sass CUBIN --ncu REPORT); not in this run"
            )
        )
    return sec if sec.blocks else None


def headline(run: Run) -> dict[str, Any]:
    """What the summary shows from ncu: kernel, device, duration, launch shape, derived TFLOP/s."""
    found = first_launch(run)
    if not found:
        return {}
    art, launch, n = found
    cols = launch.get("columns") or {}
    der = launch.get("derived") or {}
    return {
        "kernel": launch.get("kernel"),
        "device": cols.get("device"),
        "arch": cols.get("arch"),
        "duration_ns": launch.get("duration_ns"),
        "grid": launch.get("grid"),
        "block": launch.get("block"),
        "cluster": launch.get("cluster"),
        "registers": launch.get("registers_per_thread"),
        "tflops": der.get("tflops"),
        "peak_tflops": der.get("peak_tflops"),
        "pct_of_peak": der.get("pct_of_peak"),
        "precision": der.get("precision"),
        "verdict": launch.get("verdict"),
        "source": art.path.name,
        "sm_clock_hz": cols.get("sm_clock_hz"),
    }


__all__ = ["verdict", "sol", "stalls", "headline", "main_launch"]
