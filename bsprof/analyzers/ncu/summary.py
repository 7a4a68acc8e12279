"""The ``bsprof ncu`` JSON contract and the summary files beside the .ncu-rep.

``{"bsprof": {"kind": "ncu", "version": 1}, "report": ..., "launches": [{"kernel", "duration_ns",
"registers_per_thread", "grid", "block", "verdict", "metrics": {ncu metric name: value}, ...}]}``
Keys beyond those (cluster, verdict_detail, derived, columns, rules, notes) extend it; none is renamed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bsprof.analyzers.ncu.extract import Extraction, opcode_counts
from bsprof.analyzers.ncu.verdict import classify
from bsprof.analyzers.ncu_loader import report_stem
from bsprof.artifacts import save, tag

KIND = tag("ncu")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):  # numpy scalar
        return _clean(v.item())
    return v


def _dims(row, prefix: str) -> list[int | None]:
    out = []
    for axis in "xyz":
        v = _clean(row.get(f"{prefix}_{axis}"))
        out.append(int(v) if v is not None else None)
    return out


def verdicts(ex: Extraction, *, k: int | None = None) -> list:
    """Each launch's verdict (:func:`~.verdict.classify`), in the table's order."""
    return [
        classify(row, k=k, rules=ex.rules[i] if i < len(ex.rules) else None)
        for i, (_, row) in enumerate(ex.table.iterrows())
    ]


def launch_dicts(ex: Extraction, *, k: int | None = None, found: list | None = None) -> list[dict]:
    """The JSON of every launch; ``found``: their verdicts where the caller has them already."""
    found = found if found is not None else verdicts(ex, k=k)
    launches = []
    for i, (_, row) in enumerate(ex.table.iterrows()):
        verdict = found[i]
        cols = {c: _clean(v) for c, v in row.items() if not c.startswith("inst_op_")}
        launches.append(
            {
                "kernel": row["kernel"],
                "duration_ns": _clean(row.get("duration_ns")),
                "registers_per_thread": _clean(row.get("registers_per_thread")),
                "grid": _dims(row, "grid"),
                "block": _dims(row, "block"),
                "cluster": _dims(row, "cluster"),
                "verdict": verdict.cls,
                "label": verdict.label,
                "verdict_detail": verdict.as_dict(),
                "metrics": {n: _clean(v) for n, v in ex.raw_metrics[i].items()},
                "derived": {
                    **{
                        key: cols.get(key)
                        for key in (
                            "flops",
                            "flops_source",
                            "mma_flops",
                            "tflops",
                            "precision",
                            "precision_source",
                            "peak_tflops",
                            "pct_of_peak",
                            "mnkl",
                        )
                    },
                    "flops_check": flops_check(cols),
                },
                "columns": cols,
                "inst_executed_by_opcode": opcode_counts(row),
                "rules": ex.rules[i] if i < len(ex.rules) else [],
                "notes": [n for n in (row.get("notes") or "").split("; ") if n],
            }
        )
    return launches


def sequence_prices(ex: Extraction, found: list) -> list[dict]:
    """Launches that run as one sequence, two or more: those in the same NVTX range (a report without
    ranges: all its launches, in launch order). What fusing them into one launch and batching them
    behind one fixed cost would buy (:func:`~.price.price_sequence`), where a single launch's line can
    only say "cannot bound". ``found``: every launch's verdict (their own lines carry ncu's estimate)."""
    from bsprof.analyzers.ncu.price import price_sequence_with_ncu

    groups: dict[str, list[int]] = {}
    for i, (_, row) in enumerate(ex.table.iterrows()):
        rng = row.get("nvtx")
        groups.setdefault(rng if isinstance(rng, str) else "", []).append(i)
    out = []
    for rng, idx in groups.items():
        if len(idx) < 2:
            continue
        rows = [ex.table.iloc[i] for i in idx]
        prices = price_sequence_with_ncu(rows, [found[i].prices for i in idx])
        durations = [_clean(r.get("duration_ns")) for r in rows]
        out.append(
            {
                "range": rng or None,
                "launches": idx,
                "duration_us": sum(d for d in durations if d) / 1e3,
                "prices": {pid: p.as_dict() for pid, p in prices.items()},
            }
        )
    return out


def summary_json(ex: Extraction, *, k: int | None = None, **extra: Any) -> dict:
    found = verdicts(ex, k=k)  # classified once: the launches' lines and their sequences' prices
    doc = {"bsprof": dict(KIND), "report": ex.report, **extra, "launches": launch_dicts(ex, k=k, found=found)}
    if seqs := sequence_prices(ex, found):
        doc["sequences"] = seqs
    return doc


def analyze_report(
    report: str | Path,
    *,
    filter: str | None = None,
    flops: float | None = None,
    precision: str | None = None,
    mnkl: str | None = None,
) -> tuple[Extraction, dict]:
    """An existing .ncu-rep (or a bsprof result directory holding one) -> (extraction, summary JSON):
    per launch the metric columns, the verdict with its evidence and advice, and ncu's own rules.
    FLOPs come from ``flops``, else the result directory's summary.json, else the launch's NVTX range.
    ``mnkl`` ("M,N,K[,L]") names the problem of launches whose NVTX range does not (the operands'
    bytes, K for split-K advice)."""
    from bsprof.analyzers.ncu.compare import recorded_flops
    from bsprof.analyzers.ncu.extract import extract, rates
    from bsprof.analyzers.ncu_loader import resolve_report

    given = flops
    flops = flops or recorded_flops(report)
    path = str(resolve_report(report))
    ex = extract(path, filter=filter, flops=flops, precision=precision)
    t = ex.table
    t["flops_source"] = [
        "--flops" if given else ("result directory" if flops else ("NVTX range" if f == f else None))
        for f in t["flops"]
    ]
    if mnkl:
        t["mnkl"] = [m if isinstance(m, str) and m else mnkl for m in t["mnkl"]]
        # --mnkl names the problem, so it names its FLOPs too where nothing else did: 2*M*N*K*L
        m, n, k, batches = ([int(x) for x in mnkl.split(",")] + [1])[:4]
        f = 2.0 * m * n * k * batches
        for i in t.index[t["flops"].isna()]:
            t.loc[i, "flops"] = f
            t.loc[i, "flops_source"] = f"--mnkl {m},{n},{k},{batches} (2*M*N*K*L)"
            t.loc[i, "tflops"], t.loc[i, "pct_of_peak"] = rates(f, t.loc[i, "duration_ns"], t.loc[i, "peak_tflops"])
    return ex, summary_json(ex)


# a FLOP count more than this many times what the executed MMA instructions account for (their count x the
# FLOPs of their SASS shape) is not this launch's: a mistyped --flops, or a problem split over several launches.
# 1.5 leaves room for MMA work the count misses (a second MMA opcode, padding rounds the other way)
FLOPS_OVER_MMA_RATIO = 1.5


def flops_check(cols: dict) -> str | None:
    """One warning line where the FLOPs the TFLOP/s rests on cannot be this launch's: more than
    FLOPS_OVER_MMA_RATIO x what its executed MMAs do, or over 100% of the peak."""
    f, mma, pct = (_clean(cols.get(k)) for k in ("flops", "mma_flops", "pct_of_peak"))
    if not f:
        return None
    src = cols.get("flops_source") or "given"
    if mma and f > FLOPS_OVER_MMA_RATIO * mma:
        return (
            f"warning: {f:.3g} FLOP ({src}) is {f / mma:.1f}x the {mma:.3g} FLOP the executed MMA instructions "
            f"account for ({cols.get('mma_sass') or cols.get('mma_opcode')} x count); TFLOP/s and % of peak rest on it"
        )
    if pct is not None and pct > 100.0:
        return (
            f"warning: {f:.3g} FLOP ({src}) gives {pct:.0f}% of the {cols.get('precision')} peak, more than the "
            "GPU can do; the FLOP count is not this launch's"
        )
    return None


def write_summary(ex: Extraction, out_dir: Path, stem: str, payload: dict) -> list[Path]:
    """Write ``<stem>.parquet`` (``<stem>.csv`` where no Parquet engine is installed, e.g. a bare GPU
    host) and ``<stem>.json`` atomically into ``out_dir``."""
    from bsprof.io import atomic_path

    out_dir = Path(out_dir)
    try:
        import pyarrow  # noqa: F401

        table = out_dir / f"{stem}.parquet"
        with atomic_path(table) as tmp:
            ex.table.to_parquet(tmp, index=False)
    except ImportError:
        table = out_dir / f"{stem}.csv"
        with atomic_path(table) as tmp:
            ex.table.to_csv(tmp, index=False)
    payload["table"] = table.name
    js = save(out_dir / f"{stem}.json", payload)
    return [table, js]


def write_analysis(ex: Extraction, payload: dict, out: str | Path) -> Path:
    """`bsprof ncu --report X -o DIR`: the summary files of an analyzed report in a fresh
    ``DIR/report_<stem>_<time>`` directory (removed again if writing fails)."""
    import time

    from bsprof.io import results_dir

    stem = report_stem(ex.report)
    with results_dir(out, f"report_{stem}_{time.strftime('%Y%m%d-%H%M%S')}") as staged:
        write_summary(ex, staged.path, "summary", payload)
    return staged.path
