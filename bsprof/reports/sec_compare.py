"""Baseline vs optimized: the same key numbers from both runs, with the difference per cell.

Two runs of *different* kernels (another family, architecture or problem shape) are not compared
cell by cell: the section says why, and the per-run sections below still show both side by side.
"""

from __future__ import annotations

from typing import Any, Callable

from bsprof.artifacts import Run, identity
from bsprof.fmt import fmt, num, signed_pct
from bsprof.reports.page import Section, note, table

# (label, better direction) -> value; "lower" / "higher" colour the row, None leaves it neutral
Metrics = dict[tuple[str, str | None], Any]


def _summary_metrics(run: Run) -> Metrics:
    from bsprof.reports.sec_summary import facts

    f = facts(run)
    out: Metrics = {}
    t_ms = num(f.get("time_ms"))
    if t_ms is None and num(f.get("duration_ns")) is not None:
        t_ms = num(f["duration_ns"]) / 1e6
    if t_ms is not None:
        out[("time (µs)", "lower")] = t_ms * 1e3
    if num(f.get("tflops")) is not None:
        out[("TFLOP/s", "higher")] = num(f["tflops"])
    if f.get("verdict"):
        out[("verdict", None)] = f["verdict"]
    for name, ratio in (f.get("peer_ratios") or {}).items():
        out[(f"time ÷ {name}", "lower")] = ratio
    return out


def _ncu_metrics(run: Run) -> Metrics:
    from bsprof.reports.sec_ncu import SOL_BARS, first_launch

    found = first_launch(run)
    if not found:
        return {}
    cols = found[1].get("columns") or {}
    out: Metrics = {}
    for col, label in SOL_BARS:
        if num(cols.get(col)) is not None:
            out[(f"{label} (%)", None)] = num(cols[col])
    for col, label, better in (
        ("registers_per_thread", "registers / thread", None),
        ("warp_cycles_per_issue", "warp cycles / issued instruction", "lower"),
        ("inst_executed", "executed warp instructions", "lower"),
    ):
        if num(cols.get(col)) is not None:
            out[(label, better)] = num(cols[col])
    stalls = sorted(
        ((k[6:], num(v)) for k, v in cols.items() if k.startswith("stall_") and num(v)), key=lambda kv: -kv[1]
    )[:5]
    for reason, v in stalls:
        out[(f"stall {reason} (cycles/inst)", "lower")] = v
    return out


def _sass_metrics(run: Run) -> Metrics:
    from bsprof.reports import sec_sass

    return sec_sass.compare_metrics(run)


def _timing_metrics(run: Run) -> Metrics:
    from bsprof.reports.sec_timing import load

    got = load(run)
    if got is None:
        return {}
    _, t = got
    from bsprof.analyzers.timing.stats import phase_stats

    return {(f"{r['role']} {r['phase']} mean (cycles)", "lower"): r["mean"] for r in phase_stats(t).to_dict("records")}


def _model_metrics(run: Run) -> Metrics:
    from bsprof.reports import sec_model

    return sec_model.compare_metrics(run)


GROUPS: tuple[tuple[str, Callable[[Run], Metrics]], ...] = (
    ("summary", _summary_metrics),
    ("ncu", _ncu_metrics),
    ("sass", _sass_metrics),
    ("timing", _timing_metrics),
    ("model", _model_metrics),
)


def mismatch(a: Run, b: Run) -> list[str]:
    """Why two runs are not the same kernel problem (empty when they are, as far as the artifacts say)."""
    ia, ib = identity(a), identity(b)
    reasons = []
    for key, what in (("family", "kernel family"), ("arch", "architecture"), ("mnkl", "problem shape")):
        if key in ia and key in ib and ia[key] != ib[key]:
            reasons.append(f"{what}: {a.label} has {_show(ia[key])}, {b.label} has {_show(ib[key])}")
    shared = set(a.kinds) & set(b.kinds)
    if not shared:
        reasons.append(f"no artifact kind in common ({a.label}: {', '.join(a.kinds)}; {b.label}: {', '.join(b.kinds)})")
    return reasons


def _show(v: Any) -> str:
    return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


def render(a: Run, b: Run) -> Section:
    sec = Section("compare", "Baseline vs optimized")
    why = mismatch(a, b)
    if why:
        sec.level = "warning"
        sec.add(
            note(
                f"{a.label} and {b.label} are runs of different kernels or problems, so their numbers are not "
                "compared cell by cell; both are shown side by side below. " + "; ".join(why),
                "warning",
            )
        )
        return sec
    rows, classes = [], []
    for group, fn in GROUPS:
        ma, mb = fn(a), fn(b)
        for key in list(dict.fromkeys(list(ma) + list(mb))):
            label, better = key
            va, vb = ma.get(key), mb.get(key)
            na, nb = num(va), num(vb)
            if not na and not nb and not isinstance(va, str) and not isinstance(vb, str):
                continue  # zero (or absent) on both sides says nothing
            if na is not None and nb is not None:
                diff, rel = fmt(nb - na), signed_pct(nb, na)
                cls = ""
                if better and na != nb:
                    cls = "better" if (nb < na) == (better == "lower") else "worse"
            else:
                cls = ""
                if va is None or vb is None:
                    diff, rel = f"only in {(b if va is None else a).label}", ""
                else:
                    diff, rel = ("" if va == vb else "changed"), ""
            rows.append(
                [group, label, fmt(va) if va is not None else "—", fmt(vb) if vb is not None else "—", diff, rel]
            )
            classes.append(cls)
    if not rows:
        sec.add(note("the two runs share no numbers to compare"))
        return sec
    sec.add(
        table(
            rows,
            ["from", "metric", a.label, b.label, f"{b.label} − {a.label}", "change"],
            classes,
            numeric=(2, 3, 4, 5),
            caption="green: better, orange: worse (where a direction is known)",
        )
    )
    return sec


__all__ = ["render", "mismatch"]
