"""SourceCounters out of an .ncu-rep: per-PC SASS text, executed warp instructions, stall samples.

ncu stores ``inst_executed`` and every ``smsp__pcsamp_warps_issue_stalled_<reason>`` as instanced
metrics whose correlation ids are PCs; ``action.sass_by_pc(pc)`` gives the instruction text.
The first ``sass_by_pc`` call of a report pays ncu's lazy disassembly (~0.5 s); the rest are cheap.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from bsprof.analyzers.sass.parse import Function, function_from_pcs
from bsprof.errors import BsprofError

STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
MISSING_HINT = (
    "re-profile with `ncu --section SourceCounters --import-source yes` (or `--set full --import-source yes`)"
)


@dataclass
class SourceCounters:
    launch: int
    name: str
    function: Function
    executed: list[int]
    # per instruction: {reason: samples}, only non-zero reasons
    stalls: list[dict[str, int]]
    reasons: list[str] = field(default_factory=list)
    launch_info: dict[str, float] = field(default_factory=dict)
    # the source files the report embeds (ncu --import-source yes): {path as in the line info: text}
    sources: dict[str, str] = field(default_factory=dict)
    # the launch's mangled and demangled names: a template's arguments (DeepGEMM's BLOCK_M,
    # BLOCK_N) are in these, not in the function name ncu shows
    aliases: tuple[str, ...] = ()
    # what the launch's NVTX ranges recorded (bsprof's launcher: mnkl, tile, flops)
    recorded: dict = field(default_factory=dict)


def _metric(action, name: str):
    try:
        return action.metric_by_name(name)
    except Exception:  # noqa: BLE001 - the SWIG layer raises plain exceptions for unknown names
        return None


def _instanced(metric) -> list[tuple[int, int]]:
    n = metric.num_instances()
    if n == 0 or not metric.has_correlation_ids():
        return []
    ids = metric.correlation_ids()
    return [(ids.as_uint64(i), metric.as_uint64(i)) for i in range(n)]


def _arch(action) -> str | None:
    maj, mnr = (
        _metric(action, "device__attribute_compute_capability_major"),
        _metric(action, "device__attribute_compute_capability_minor"),
    )
    try:
        return f"sm_{int(maj.value())}{int(mnr.value())}" if maj is not None and mnr is not None else None
    except Exception:  # noqa: BLE001
        return None


def _attach_line_info(action, fn: Function) -> None:
    """Reports of -lineinfo builds (with --import-source) map PCs to source lines; use them for roles."""
    probe = [ins.pc + fn.pc_base for ins in fn.instructions[:: max(1, len(fn.instructions) // 16)]]
    if not any(_source_loc(action, pc) for pc in probe):
        return
    for ins in fn.instructions:
        loc = _source_loc(action, ins.pc + fn.pc_base)
        if loc is not None:
            ins.file, ins.line = loc
            fn.has_line_info = True


def _source_loc(action, pc) -> tuple[str, int] | None:
    try:
        si = action.source_info(pc)
    except Exception:  # noqa: BLE001
        return None
    if si is None:
        return None
    try:
        return str(si.file_name()), int(si.line())
    except Exception:  # noqa: BLE001
        return None


_LAUNCH_METRICS = (
    "launch__grid_size",
    "launch__block_size",
    "launch__cluster_dim_x",
    "launch__cluster_dim_y",
    "launch__sm_count",
    "launch__grid_dim_x",
    "launch__grid_dim_y",
    "launch__grid_dim_z",
)


def extract(action, launch: int = 0, where: str = "report") -> SourceCounters:
    """SourceCounters of one profiled launch; BsprofError naming the ncu option when absent."""
    name = action.name()
    ie = _metric(action, "inst_executed")
    pairs = _instanced(ie) if ie is not None else []
    if not pairs:
        raise BsprofError(
            f"{where}: launch {launch} ({name}) has no SourceCounters (per-PC inst_executed); {MISSING_HINT}"
        )
    pairs.sort()
    pcs = [p for p, _ in pairs]
    executed = [int(v) for _, v in pairs]
    texts = [action.sass_by_pc(pc) or "" for pc in pcs]
    fn = function_from_pcs(name, _arch(action), pcs, texts)
    _attach_line_info(action, fn)
    index = {pc: i for i, pc in enumerate(pcs)}
    stalls: list[dict[str, int]] = [{} for _ in pcs]
    reasons: list[str] = []
    for mname in action.metric_names():
        if not mname.startswith(STALL_PREFIX) or mname.endswith("_not_issued"):
            continue
        reason = mname[len(STALL_PREFIX) :]
        m = _metric(action, mname)
        if m is None:
            continue
        got = False
        for pc, v in _instanced(m):
            i = index.get(pc)
            if i is not None and v:
                stalls[i][reason] = stalls[i].get(reason, 0) + int(v)
                got = True
        if got:
            reasons.append(reason)
    info = {}
    for k in _LAUNCH_METRICS:
        m = _metric(action, k)
        if m is not None:
            try:
                info[k] = float(m.value())
            except Exception:  # noqa: BLE001
                pass
    return SourceCounters(
        launch=launch,
        name=name,
        function=fn,
        executed=executed,
        stalls=stalls,
        reasons=sorted(reasons),
        launch_info=info,
        sources=_embedded_sources(action),
        aliases=_aliases(action, name),
        recorded=_recorded(action),
    )


def _aliases(action, name: str) -> tuple[str, ...]:
    out = []
    for base in ("NameBase_MANGLED", "NameBase_DEMANGLED"):
        try:
            alias = action.name(getattr(action, base))
        except Exception:  # noqa: BLE001 - an older ncu_report without the enum: the plain name only
            continue
        if alias and alias != name and alias not in out:
            out.append(alias)
    return tuple(out)


def _recorded(action) -> dict:
    from bsprof.analyzers.ncu.extract import nvtx_problem, nvtx_ranges

    return nvtx_problem(nvtx_ranges(action))


def _embedded_sources(action) -> dict[str, str]:
    """The source text the report carries for its line info (empty without --import-source): the
    lines it profiled, which the file on disk may no longer have."""
    try:
        return {str(k): str(v) for k, v in action.source_files().items()}
    except Exception:  # noqa: BLE001 - older reports and the SWIG layer: no embedded sources
        return {}


def read_source_counters(
    path: str | os.PathLike, kernel: str | None = None, launch: int | None = None
) -> list[SourceCounters]:
    """Every launch in the report (or those whose name matches ``kernel``, or the ``launch``-th)."""
    from bsprof.analyzers.ncu_loader import iter_actions, load_report

    ctx = load_report(path)
    actions = list(iter_actions(ctx))
    names = [a.name() for a in actions]
    picked = list(range(len(actions)))
    if kernel is not None:
        try:
            rx = re.compile(kernel)
        except re.error as exc:
            raise BsprofError(f"--function {kernel!r} is not a valid regular expression ({exc})") from None
        picked = [i for i in picked if rx.search(names[i])]
        if not picked:
            raise BsprofError(
                f"--function {kernel!r} matches none of the {len(names)} launch(es) in {path}: "
                + ", ".join(sorted(set(names))[:20])
            )
    if launch is not None:
        if not 0 <= launch < len(actions):
            raise BsprofError(
                f"--launch {launch} is out of range; {path} has {len(actions)} launch(es) (0..{len(actions) - 1})"
            )
        picked = [launch]
    return [extract(actions[i], i, str(path)) for i in picked]
