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


def launch_dicts(ex: Extraction, *, k: int | None = None) -> list[dict]:
    launches = []
    for i, (_, row) in enumerate(ex.table.iterrows()):
        verdict = classify(row, k=k, rules=ex.rules[i] if i < len(ex.rules) else None)
        cols = {c: _clean(v) for c, v in row.items() if not c.startswith("inst_op_")}
        launches.append({
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
            "derived": {key: cols.get(key) for key in ("flops", "tflops", "precision", "precision_source", "peak_tflops",
                                                       "pct_of_peak", "mnkl")},
            "columns": cols,
            "inst_executed_by_opcode": opcode_counts(row),
            "rules": ex.rules[i] if i < len(ex.rules) else [],
            "notes": [n for n in (row.get("notes") or "").split("; ") if n],
        })
    return launches


def summary_json(ex: Extraction, *, k: int | None = None, **extra: Any) -> dict:
    return {"bsprof": dict(KIND), "report": ex.report, **extra, "launches": launch_dicts(ex, k=k)}


def analyze_report(report: str | Path, *, filter: str | None = None, flops: float | None = None,
                   precision: str | None = None, mnkl: str | None = None) -> tuple[Extraction, dict]:
    """An existing .ncu-rep (or a bsprof result directory holding one) -> (extraction, summary JSON):
    per launch the metric columns, the verdict with its evidence and advice, and ncu's own rules.
    FLOPs come from ``flops``, else the result directory's summary.json, else the launch's NVTX range.
    ``mnkl`` ("M,N,K[,L]") names the problem of launches whose NVTX range does not (the operands'
    bytes, K for split-K advice)."""
    from bsprof.analyzers.ncu.compare import recorded_flops
    from bsprof.analyzers.ncu_loader import resolve_report
    from bsprof.analyzers.ncu.extract import extract

    flops = flops or recorded_flops(report)
    path = str(resolve_report(report))
    ex = extract(path, filter=filter, flops=flops, precision=precision)
    if mnkl:
        ex.table["mnkl"] = [m if isinstance(m, str) and m else mnkl for m in ex.table["mnkl"]]
    return ex, summary_json(ex)


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
    import shutil
    import time

    from bsprof.io import unique_dir

    stem = report_stem(ex.report)
    d = unique_dir(out, f"report_{stem}_{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        write_summary(ex, d, "summary", payload)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    return d
