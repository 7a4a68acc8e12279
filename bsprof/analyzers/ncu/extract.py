"""An .ncu-rep -> one pandas row per profiled launch (columns documented in :mod:`.metrics`).

A metric the report lacks is NaN and named in the row's ``notes``; nothing here raises for a
missing metric. Reports are opened only through :func:`bsprof.analyzers.ncu_loader.load_report`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from bsprof.analyzers.ncu import metrics as M
from bsprof.analyzers.ncu.peaks import (
    ARCH_PRECISION,
    mma_flops_per_instruction,
    peak_tflops,
    precision_from_opcodes,
    precision_from_sass,
)
from bsprof.errors import BsprofError

_STALL_RE = re.compile(re.escape(M.STALL_PREFIX) + r"(\w+?)" + re.escape(M.STALL_SUFFIX) + "$")


@dataclass
class Extraction:
    """Everything read from one report: the table plus per-launch raw metrics and ncu rule results."""

    table: Any  # pandas.DataFrame, one row per launch
    raw_metrics: list[dict[str, float]] = field(default_factory=list)  # ncu name -> value, per row
    rules: list[list[dict]] = field(default_factory=list)  # per row, see rules.py
    report: str = ""


def _value(action, name: str) -> float | str | None:
    m = action.metric_by_name(name)
    if m is None:
        return None
    try:
        v = m.value()
    except Exception:  # an instanced metric without a top-level value
        return None
    if isinstance(v, str):
        return v
    return None if v is None else float(v)


def _opcodes(action) -> dict[str, float]:
    m = action.metric_by_name(M.OPCODE_METRIC)
    if m is None or not m.has_correlation_ids():
        return {}
    ids = m.correlation_ids()
    return {ids.as_string(i): float(m.as_uint64(i)) for i in range(m.num_instances())}


def stall_reasons(names) -> list[str]:
    """Stall reasons present in a launch's metric names, known ones first."""
    found = {mt.group(1) for n in names if (mt := _STALL_RE.match(n))}
    return [r for r in M.STALL_REASONS if r in found] + sorted(found - set(M.STALL_REASONS))


# what a launch's NVTX ranges may carry: bsprof's launcher names its range
# "bsprof_measured/bsprof mnkl=MxNxKxL flops=F precision=P", so a report read back keeps % of peak
_NVTX_KEYS = {
    "flops": re.compile(r"\bflops=([0-9.eE+]+)"),
    "precision": re.compile(r"\bprecision=([a-z0-9]+)"),
    "mnkl": re.compile(r"\bmnkl=([0-9x,]+)"),
    "tile": re.compile(r"\btile=([0-9]+x[0-9]+)"),
}


def _mma_sass(action, opcode: str) -> dict[str, float]:
    """The most executed ``opcode`` instruction's SASS opcode with modifiers and its executed count
    (SourceCounters): a 16-bit MMA's operand type is in the modifiers, and every MMA's shape (for its
    FLOPs); empty without SourceCounters. Instructions are read most executed first, and a K-loop's MMAs
    are among those, so only a few hundred of a kernel's thousands are disassembled."""
    if not opcode:
        return {}
    try:
        metric = action.metric_by_name("inst_executed")
        n = metric.num_instances() if metric is not None else 0
        if not n or not metric.has_correlation_ids():
            return {}
        ids = metric.correlation_ids()
        for count, i in sorted(((metric.as_uint64(i), i) for i in range(n)), reverse=True):
            words = (action.sass_by_pc(ids.as_uint64(i)) or "").split()
            op = next((w for w in words if not w.startswith("@")), "")
            if op.startswith(opcode):
                return {op: float(count)}
        return {}
    except Exception:  # noqa: BLE001 - a report without SourceCounters keeps the opcode's precision
        return {}


def nvtx_ranges(action) -> list[str]:
    """The push/pop NVTX ranges open at the launch, outermost first, over all domains."""
    try:
        state = action.nvtx_state()
    except Exception:  # noqa: BLE001 - a report without NVTX data
        return []
    if state is None:
        return []
    out: list[str] = []
    for d in state.domains():
        out += list(state.domain_by_id(d).push_pop_ranges())
    return out


def nvtx_problem(ranges: list[str]) -> dict[str, Any]:
    """flops / precision / mnkl named in NVTX ranges (the innermost wins)."""
    found: dict[str, Any] = {}
    for text in ranges:
        for key, rx in _NVTX_KEYS.items():
            if m := rx.search(text):
                found[key] = m.group(1)
    if "flops" in found:
        try:
            found["flops"] = float(found["flops"])
        except ValueError:
            found.pop("flops")
    return found


def _kernel_names(action) -> tuple[str, str]:
    func = action.name(action.NameBase_FUNCTION)
    demangled = action.name(action.NameBase_DEMANGLED)
    return func, demangled


def list_kernels(ctx) -> list[str]:
    from bsprof.analyzers.ncu_loader import iter_actions

    return [_kernel_names(a)[0] for a in iter_actions(ctx)]


def launch_row(action, index: int, flops: float | None, precision: str | None) -> tuple[dict, dict, list[str]]:
    names = set(action.metric_names())
    func, demangled = _kernel_names(action)
    cc_major = _value(action, M.CC_MAJOR_METRIC)
    cc_minor = _value(action, M.CC_MINOR_METRIC)
    arch = M.arch_key(int(cc_major) if cc_major is not None else None)
    device = _value(action, M.DEVICE_NAME_METRIC)
    row: dict[str, Any] = {
        "launch": index,
        "kernel": func,
        "kernel_demangled": demangled,
        "device": device if isinstance(device, str) else None,
        "compute_capability": f"{int(cc_major)}.{int(cc_minor or 0)}" if cc_major is not None else None,
        "arch": arch,
        "replay_passes": _value(action, M.REPLAY_PASSES_METRIC),
    }
    raw: dict[str, float] = {}
    missing: list[str] = []
    for metric in M.metrics_for_arch(arch):
        hit = next((n for n in metric.names if n in names), None)
        val = _value(action, hit) if hit else None
        if isinstance(val, str) or val is None:
            row[metric.column] = math.nan
            missing.append(f"{metric.column} ({metric.names[0]})")
        else:
            row[metric.column] = val
            raw[hit] = val
        if metric.column == "tensor_pipe_pct":
            row["tensor_pipe_metric"] = hit or metric.names[0]
    reasons = stall_reasons(names) or [r for r in M.STALL_REASONS if r != "gmma" or arch == "sm_90"]
    for reason in reasons:
        name = M.stall_metric(reason)
        val = _value(action, name) if name in names else None
        row[f"stall_{reason}"] = math.nan if val is None else val
        if val is None:
            missing.append(f"stall_{reason} ({name})")
        else:
            raw[name] = val
    for pipe, candidates in M.PIPES.items():
        vals = [v for n in candidates if n in names and isinstance(v := _value(action, n), float)]
        row[f"pipe_{pipe}_pct"] = max(vals) if vals else math.nan
    ops = _opcodes(action)
    if not ops:
        missing.append(f"inst_op_* ({M.OPCODE_METRIC}: needs the InstructionStats section)")
    for op, count in ops.items():
        row[f"inst_op_{op}"] = count
    ranges = nvtx_ranges(action)
    row["nvtx"] = " / ".join(ranges)
    from_nvtx = nvtx_problem(ranges)
    flops = flops or from_nvtx.get("flops")
    row["mnkl"] = from_nvtx.get("mnkl")
    row["tile_mn"] = from_nvtx.get("tile")
    # the peak to compare against: --precision, else the range's, else the executed MMA opcodes',
    # else (no opcode table) the format this arch's bundled kernels compute in
    op_prec, op_name = precision_from_opcodes(ops)
    # the top MMA instruction's SASS, read once: its operand type refines the precision, its shape the FLOPs
    mma_top = _mma_sass(action, op_name) if op_prec and op_name != "FFMA" else {}
    if precision:
        prec, source = precision, "--precision"
    elif from_nvtx.get("precision"):
        prec, source = from_nvtx["precision"], "NVTX range"
    elif op_prec:
        prec = precision_from_sass(mma_top, op_prec)
        source = f"executed {op_name}" + ("" if prec == op_prec else f" .{prec.upper()}")
    elif ops:
        prec, source = None, None  # no MMA and no FFMA executed: no arithmetic peak applies
    else:
        prec = ARCH_PRECISION.get(int(cc_major)) if cc_major is not None else None
        source = "architecture default (no opcode table in the report)" if prec else None
    row["precision_source"] = source
    row["mma_opcode"] = op_name if op_prec and op_name != "FFMA" else None
    # the FLOPs the executed MMA instructions account for: the opcode's count x its SASS shape's FLOPs
    # (checked against a FLOP count the user gives, summary.flops_check)
    row["mma_flops"], row["mma_sass"] = math.nan, None
    top = next(iter(mma_top), None)
    if top and (per := mma_flops_per_instruction(top)):
        row["mma_flops"], row["mma_sass"] = per * ops[op_name], top
    peak = peak_tflops(row["device"], prec) if prec else None
    dur = row.get("duration_ns", math.nan)
    row["flops"] = float(flops) if flops else math.nan
    row["precision"] = prec
    row["peak_tflops"] = peak if peak else math.nan
    row["tflops"], row["pct_of_peak"] = rates(flops, dur, peak)
    if flops and peak is None:
        missing.append(f"pct_of_peak (no {prec} peak for {row['device']!r} in bsprof.analyzers.ncu.peaks)")
    row["notes"] = ("missing: " + ", ".join(missing)) if missing else ""
    return row, raw, missing


def rates(flops: float | None, duration_ns: float, peak: float | None) -> tuple[float, float]:
    """(TFLOP/s, % of ``peak``) of a launch doing ``flops`` in ``duration_ns``; NaN where a part is missing."""
    ok = flops and duration_ns and not math.isnan(duration_ns)
    tflops = flops / (duration_ns * 1e-9) / 1e12 if ok else math.nan
    return tflops, (100.0 * tflops / peak if peak and not math.isnan(peak) and not math.isnan(tflops) else math.nan)


def extract(
    report,
    *,
    filter: str | None = None,
    flops: float | None = None,
    precision: str | None = None,
    with_rules: bool = True,
    option: str = "--filter",
) -> Extraction:
    """Read ``report`` (a path or an already loaded ncu_report context) into an :class:`Extraction`.

    ``filter`` is a regular expression searched in the function and demangled kernel names and the
    launch's NVTX ranges (joined by " / "); when it
    matches nothing, BsprofError lists the kernels the report has. ``option``: the command-line
    option that gave ``filter``, named in its errors.
    """
    import pandas as pd

    from bsprof.analyzers.ncu import rules as R
    from bsprof.analyzers.ncu_loader import iter_actions, load_report

    path = ""
    if isinstance(report, (str, os.PathLike)):
        path = str(report)
        ctx = load_report(report)
    else:
        ctx = report
    pattern = None
    if filter:
        try:
            pattern = re.compile(filter)
        except re.error as exc:
            raise BsprofError(f"{option} {filter!r} is not a valid regular expression ({exc})") from None
    rows, raws, rules = [], [], []
    all_names: list[str] = []
    for index, action in enumerate(iter_actions(ctx)):
        func, demangled = _kernel_names(action)
        if func is None or not action.metric_names():
            # ncu_report reads a cut-off file up to the cut: the launch is there, its data is not
            raise BsprofError(
                f"{path or 'report'}: launch {index} has no data (the report is truncated or corrupt); "
                "re-profile and let ncu finish writing it"
            )
        all_names.append(func)
        if pattern and not (
            pattern.search(func) or pattern.search(demangled) or pattern.search(" / ".join(nvtx_ranges(action)))
        ):
            continue
        row, raw, _ = launch_row(action, index, flops, precision)
        rows.append(row)
        raws.append(raw)
        rules.append(R.rule_results(action) if with_rules else [])
    if not all_names:
        raise BsprofError(
            f"{path or 'report'}: the report holds no profiled launches (ncu matched no kernel); "
            "re-profile with a filter that matches a kernel"
        )
    if not rows:
        shown = ", ".join(sorted(set(all_names))[:20])
        raise BsprofError(f"{option} {filter!r} matches no kernel in {path or 'the report'}; its kernels: {shown}")
    table = pd.DataFrame(rows)
    # opcode columns differ per launch: put them last, sorted by total count
    op_cols = [c for c in table.columns if c.startswith("inst_op_")]
    op_cols.sort(key=lambda c: -table[c].fillna(0).sum())
    rest = [c for c in table.columns if c not in op_cols and c != "notes"]
    table = table[rest + op_cols + ["notes"]]
    return Extraction(table=table, raw_metrics=raws, rules=rules, report=path)


def opcode_counts(row) -> dict[str, float]:
    """The ``inst_op_*`` columns of one row as {opcode: executed warp instructions}, NaN dropped."""
    out = {}
    for key, val in row.items():
        if key.startswith("inst_op_") and isinstance(val, float) and not math.isnan(val):
            out[key[len("inst_op_") :]] = val
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
