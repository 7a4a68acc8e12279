"""SASS sections from ``bsprof sass`` JSON: category mix per region, and the K-loop's instruction
stream between MMA issues (``--mma-detail``).

Reads the sass JSON contract (``functions[]`` with ``categories``, ``loops[]`` carrying ``depth``,
``instructions``, ``mma``, ``categories``, ``is_kloop``, ``kind`` (kloop / tile / outer / loop) and
``primary`` (the K-loop) and, when known, ``roles``/``executed``; ``kloop_summary`` says in one line
whether there is a K-loop or K is fully unrolled;
``mma_detail`` with the gaps between MMA issues). Category names and their order come from the
analyzer's opcode tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bsprof.artifacts import Artifact, Run
from bsprof.fmt import dig, fmt, num, short_name
from bsprof.reports.page import Figure, Section, note, table

# fixed colours so one category looks the same in every figure (and in both runs)
CATEGORY_COLORS: dict[str, str] = {
    "mma": "#c0504d",
    "tc_control": "#e07b53",
    "tmem": "#f2b880",
    "tma": "#8064a2",
    "sync": "#4f81bd",
    "uniform": "#9bbb59",
    "shared": "#4bacc6",
    "global": "#1b9e77",
    "local": "#7f0000",
    "constant": "#b2abd2",
    "conversion": "#b15928",
    "int": "#a6a6a6",
    "float": "#e6ab02",
    "predicate": "#e7298a",
    "move": "#cccccc",
    "control": "#7570b3",
    "special": "#d95f02",
    "nop": "#eeeeee",
    "other": "#444444",
}


def category_order() -> list[str]:
    try:
        from bsprof.analyzers.sass.opcodes import categories

        return list(categories())
    except Exception:  # the report still draws with the colour table's order
        return list(CATEGORY_COLORS)


def _functions(run: Run) -> list[tuple[Artifact, dict]]:
    out = []
    for art in run.of("sass"):
        for fn in art.data.get("functions") or []:
            if isinstance(fn, dict) and isinstance(fn.get("categories"), dict):
                out.append((art, fn))
    return out


def _key(af: tuple[Artifact, dict]) -> tuple[float, float]:
    return (num(af[1].get("mma")) or _mma(af[1]), num(af[1].get("instructions")) or 0)


def main_function(run: Run) -> tuple[Artifact, dict] | None:
    """The function a run's SASS is about: the one issuing the most MMAs (then the largest)."""
    fns = _functions(run)
    return max(fns, key=_key) if fns else None


MAX_ANALYSES = 3


def main_functions(run: Run) -> list[tuple[Artifact, dict]]:
    """One main function per sass artifact (a run may hold a cubin's and an ncu report's analysis)."""
    out = []
    for art in run.of("sass"):
        fns = [af for af in _functions(run) if af[0] is art]
        if fns:
            out.append(max(fns, key=_key))
    return out[:MAX_ANALYSES]


def _has_roles(fn: dict) -> bool:
    return fn.get("roles_source") not in (None, "loops", "none", "")


def _mma(fn: dict) -> float:
    return float((fn.get("categories") or {}).get("mma", 0))


def _kloops(fn: dict) -> list[dict]:
    """The K-loops, the K-loop proper first (JSON written before loop kinds: the first is_kloop)."""
    loops = [lp for lp in fn.get("loops") or [] if isinstance(lp, dict) and lp.get("is_kloop")]
    return sorted(loops, key=lambda lp: not lp.get("primary"))


def _regions(fn: dict) -> list[tuple[str, dict[str, float]]]:
    """(label, categories) for the whole function, every MMA loop (the K-loop first) and its parents."""
    from bsprof.analyzers.sass.loops import LOOP_TAGS, PLAIN

    regions = [(f"whole function ({fmt(fn.get('instructions'))} inst)", fn["categories"])]
    loops = [lp for lp in fn.get("loops") or [] if isinstance(lp, dict) and isinstance(lp.get("categories"), dict)]
    keep = [lp for lp in _kloops(fn) if isinstance(lp.get("categories"), dict)]
    keep += [lp for lp in loops if lp.get("kind") == "promote" and lp not in keep]
    parents = {lp.get("parent") for lp in keep if lp.get("parent") is not None}
    keep += [lp for lp in loops if lp.get("id") in parents and lp not in keep]
    keep += [lp for lp in loops if lp not in keep and (num(lp.get("mma")) or 0) > 0]
    keep += sorted((lp for lp in loops if lp not in keep), key=lambda lp: -(num(lp.get("instructions")) or 0))[:3]
    for lp in keep[:8]:
        tag = LOOP_TAGS.get(lp.get("kind")) if lp.get("kind") != PLAIN else None
        kind = tag or ("K-loop" if lp.get("is_kloop") else f"loop depth {lp.get('depth')}")
        where = f" @{lp['start_pc']:#x}" if isinstance(lp.get("start_pc"), int) else ""
        regions.append(
            (f"{kind}{where} ({fmt(lp.get('instructions'))} inst, {fmt(lp.get('mma'))} MMA)", lp["categories"])
        )
    return regions


def _role_regions(fn: dict) -> list[tuple[str, dict[str, float]]]:
    """Per warp role / phase (line info + the kernel's scopes), when the analyzer attributed them."""
    roles = fn.get("role_categories") if _has_roles(fn) else None
    out = []
    if isinstance(roles, dict):
        for role, cats in roles.items():
            if isinstance(cats, dict) and cats and all(isinstance(v, (int, float)) for v in cats.values()):
                out.append((f"role {role} ({fmt(sum(cats.values()))} inst)", cats))
    return out


def mix(run: Run) -> Section | None:
    fns = main_functions(run)
    if not fns:
        return None
    sec = Section("sass-mix", "SASS instruction mix per region")
    for art, fn in fns:
        _mix_one(sec, art, fn)
    return sec


def _mix_one(sec: Section, art: Artifact, fn: dict) -> None:
    import plotly.graph_objects as go

    regions = _regions(fn) + _role_regions(fn)
    order = category_order()
    present = [c for c in order if any((cats.get(c) or 0) > 0 for _, cats in regions)]
    present += sorted({c for _, cats in regions for c in cats} - set(present))
    labels = [r[0] for r in regions][::-1]
    fig = go.Figure()
    for cat in present:
        counts = [float(cats.get(cat) or 0) for _, cats in regions][::-1]
        totals = [float(sum(cats.values())) or 1.0 for _, cats in regions][::-1]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[100 * c / t for c, t in zip(counts, totals)],
                customdata=counts,
                orientation="h",
                name=cat,
                marker_color=CATEGORY_COLORS.get(cat, "#888"),
                hovertemplate=f"{cat}: %{{customdata:,}} inst (%{{x:.1f}}%)<extra>%{{y}}</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        xaxis=dict(title="% of the region's instructions", range=[0, 100]),
        legend=dict(traceorder="normal"),
        title=dict(text=short_name(fn.get("name", "?"), 90), font=dict(size=12)),
    )
    src = Path(str(art.data.get("source") or fn.get("source") or "")).name
    how = "regions by warp role (line info)" if _has_roles(fn) else "regions are loops (no warp-role line info)"
    sec.add(
        Figure(
            fig,
            height=max(150 + 20 * len(present), 170 + 34 * len(regions)),
            caption=f"{fn.get('arch') or ''} · {src or art.path.name} ({art.path.parent.name}/{art.path.name}); "
            f"static instruction counts, hover for counts; {how}",
        )
    )
    summary = (fn.get("kloop_summary") or {}).get("text")
    if summary:
        sec.add(note(summary))
    kl = _kloops(fn)
    if kl:
        rows = []
        for lp in kl:
            cats = lp.get("categories") or {}
            rows.append(
                [
                    f"@{lp['start_pc']:#x}" if isinstance(lp.get("start_pc"), int) else lp.get("id", ""),
                    fmt(lp.get("instructions")),
                    fmt(lp.get("mma")),
                    fmt(lp.get("overhead_per_mma")),
                    fmt(cats.get("sync", 0)),
                    fmt(cats.get("tc_control", 0)),
                    fmt(cats.get("uniform", 0)),
                    fmt(lp.get("executed")) if lp.get("executed") is not None else "—",
                ]
            )
        sec.add(
            table(
                rows,
                ["K-loop", "instructions", "MMA", "overhead / MMA", "sync", "tc_control", "uniform", "executed (ncu)"],
                numeric=range(1, 8),
            )
        )
    feats = fn.get("features")
    if isinstance(feats, dict) and feats:
        ev = fn.get("feature_evidence") or {}
        rows = []
        for name, present in feats.items():
            first = (dig(ev, name, "evidence") or [""])[:1]
            rows.append([name.replace("_", " "), "yes" if present else "no", short_name(first[0] if first else "", 90)])
        sec.add(
            "<details><summary>feature checklist</summary>"
            + table(rows, ["feature", "present", "first evidence line"])
            + "</details>"
        )


def _mma_detail(fn: dict) -> dict | None:
    d = fn.get("mma_detail")
    if isinstance(d, dict) and isinstance(d.get("kloops"), list):
        d = d["kloops"]
    if isinstance(d, list):
        d = next((x for x in d if isinstance(x, dict)), None)
    return d if isinstance(d, dict) else None


def _gaps(detail: dict) -> list[dict]:
    gaps = detail.get("gaps") or detail.get("between") or []
    return [g for g in gaps if isinstance(g, dict)]


def mma_gaps(run: Run) -> Section | None:
    """How many instructions, of which categories, sit between two MMA issues in the K-loop."""
    fns = main_functions(run)
    if not fns:
        return None
    sec = Section("mma-gaps", "K-loop: instructions between MMA issues")
    for art, fn in fns:
        detail = _mma_detail(fn)
        if detail is None:
            if _kloops(fn):
                sec.add(
                    note(
                        f"{art.path.parent.name}/{art.path.name}: no MMA detail; bsprof sass ... --mma-detail "
                        "-o DIR adds the instruction stream between MMA issues"
                    )
                )
            continue
        _gaps_one(sec, art, fn, detail)
    return sec if sec.blocks else None


def _gaps_one(sec: Section, art: Artifact, fn: dict, detail: dict) -> None:
    import plotly.graph_objects as go

    gaps = _gaps(detail)
    order = category_order()
    if gaps:
        cats = [c for c in order if any((g.get("categories") or {}).get(c) for g in gaps)]
        cats += sorted({c for g in gaps for c in (g.get("categories") or {})} - set(cats))
        xs = [f"{i}→{(i + 1) % len(gaps)}" if g.get("label") is None else str(g["label"]) for i, g in enumerate(gaps)]
        fig = go.Figure()
        for cat in cats:
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=[(g.get("categories") or {}).get(cat, 0) for g in gaps],
                    name=cat,
                    marker_color=CATEGORY_COLORS.get(cat, "#888"),
                    hovertemplate=f"{cat}: %{{y}}<extra>MMA %{{x}}</extra>",
                )
            )
        fig.update_layout(
            barmode="stack",
            xaxis_title="between MMA issue i and i+1 (in program order, wrapping around the loop)",
            yaxis_title="instructions",
            legend=dict(traceorder="normal"),
        )
        fig.update_layout(
            title=dict(text=f"{fn.get('arch') or ''} {short_name(fn.get('name', ''), 80)}", font=dict(size=12))
        )
        sec.add(
            Figure(
                fig,
                height=max(340, 120 + 20 * len(cats)),
                caption=f"{art.path.parent.name}/{art.path.name}: {len(gaps)} MMA issues per "
                + (
                    "tile-loop iteration (K fully unrolled: no K-loop); "
                    if detail.get("kind") == "tile"
                    else "K-loop iteration; "
                )
                + "bar i→i+1 stacks the instructions issued between them by category",
            )
        )
        sizes = [
            num(g.get("instructions"))
            if num(g.get("instructions")) is not None
            else float(sum((g.get("categories") or {}).values()))
            for g in gaps
        ]
        if len(sizes) >= 8:  # a distribution only says something with enough gaps
            fig2 = go.Figure(go.Histogram(x=sizes, marker_color="#4f81bd", nbinsx=min(30, max(5, len(set(sizes))))))
            fig2.update_layout(
                xaxis_title="instructions between consecutive MMA issues",
                yaxis_title="gaps",
                bargap=0.05,
                title=dict(text="distribution", font=dict(size=12)),
            )
            sec.add(Figure(fig2, height=260))
    summary = []
    for key, label in (
        ("mean_between", "mean instructions between MMA issues"),
        ("mean_instructions_between", "mean instructions between MMA issues"),
        ("mma", "MMA issues in the K-loop"),
    ):
        if num(detail.get(key)) is not None and label not in [r[0] for r in summary]:
            summary.append([label, fmt(detail[key])])
    per = detail.get("per_mma") or {}
    if isinstance(per, dict):
        summary += [[f"{k} per MMA", fmt(v)] for k, v in per.items() if num(v) is not None]
    stalls = detail.get("stalls_between") or detail.get("stalls") or {}
    on_mma = detail.get("stalls_on_mma") or {}
    tables = []
    if summary:
        tables.append(table(summary, ["per K-loop", "value"], numeric=(1,)))
    if isinstance(stalls, dict) and stalls:
        rows = sorted(((k, v) for k, v in stalls.items() if num(v)), key=lambda kv: -num(kv[1]))[:8]
        tables.append(
            table(
                [[k, fmt(v), fmt(on_mma.get(k)) if isinstance(on_mma, dict) else "—"] for k, v in rows],
                ["stall reason (ncu samples)", "between MMAs", "on the MMAs"],
                numeric=(1, 2),
            )
        )
    if tables:
        sec.add('<div class="cols" style="--ncols:2">' + "".join(f"<div>{t}</div>" for t in tables) + "</div>")


def stall_samples_figure(run: Run) -> Figure | None:
    """ncu stall samples per SASS region or warp role (sass analysis of an .ncu-rep with SourceCounters)."""
    import plotly.graph_objects as go

    with_stalls = [(a, f) for a, f in main_functions(run) if f.get("role_stalls") or f.get("region_stalls")]
    if not with_stalls:
        return None
    art, fn = with_stalls[0]
    # role_stalls partitions the instructions (by role with line info, else by innermost loop);
    # region_stalls nests (the function contains its loops), so it is the fallback
    groups = fn.get("role_stalls") or fn.get("region_stalls")
    what = "warp role" if _has_roles(fn) else "SASS region (innermost loop; no warp-role line info)"
    if not isinstance(groups, dict) or not groups:
        return None
    reasons: dict[str, float] = {}
    for per in groups.values():
        if isinstance(per, dict):
            for r, v in per.items():
                reasons[r] = reasons.get(r, 0.0) + (num(v) or 0.0)
    top = [r for r, _ in sorted(reasons.items(), key=lambda kv: -kv[1]) if reasons[r] > 0][:10]
    if not top:
        return None
    fig = go.Figure()
    # the regions with the most samples (a function has dozens of tiny loops)
    names = sorted(groups, key=lambda n: -sum((num(v) or 0) for v in (groups[n] or {}).values()))[:10][::-1]
    for r in top:
        fig.add_trace(go.Bar(y=names, x=[num((groups[n] or {}).get(r)) or 0 for n in names], name=r, orientation="h"))
    fig.update_layout(
        barmode="stack", xaxis_title="stall samples", title=dict(text=f"Stall samples per {what}", font=dict(size=13))
    )
    src = Path(str(art.data.get("source") or fn.get("source") or art.path.name)).name
    return Figure(
        fig,
        height=160 + 30 * len(names),
        caption=f"{src}: ncu PC-sampling stall samples per instruction, summed per {what.split(' (')[0]}",
    )


def compare_metrics(run: Run) -> dict[tuple[str, str | None], Any]:
    got = main_function(run)
    if got is None:
        return {}
    _, fn = got
    out: dict[tuple[str, str | None], Any] = {("SASS instructions (static)", "lower"): num(fn.get("instructions"))}
    kind = (fn.get("kloop_summary") or {}).get("kind")
    if kind:  # two runs whose regions differ in kind show it here instead of subtracting them
        out[("K-loop region", None)] = {"kloop": "K-loop", "unrolled": "none (K fully unrolled)"}.get(
            kind, "none (no MMA)"
        )
    kl = _kloops(fn)
    if kl:
        lp = kl[0]
        out[("K-loop instructions", "lower")] = num(lp.get("instructions"))
        out[("K-loop MMAs", None)] = num(lp.get("mma"))
        out[("K-loop overhead / MMA", "lower")] = num(lp.get("overhead_per_mma"))
        kcats = lp.get("categories") or {}
        for cat in category_order():  # zeros too: the other run may have some (rows 0 in both are dropped)
            if cat != "mma":
                out[(f"K-loop {cat}", "lower")] = float(num(kcats.get(cat)) or 0)
    cats = fn.get("categories") or {}
    for cat in category_order():
        out[(f"function {cat}", None if cat == "mma" else "lower")] = float(num(cats.get(cat)) or 0)
    feats = fn.get("features") or {}
    for name, present in feats.items() if isinstance(feats, dict) else []:
        out[(f"feature: {name}", None)] = "yes" if present else "no"
    return {k: v for k, v in out.items() if v is not None}


__all__ = ["mix", "mma_gaps", "stall_samples_figure", "compare_metrics"]
