"""Bottleneck verdict for one launch: a decision tree over declared metric columns.

Like ncu's own ``sections/*.py`` rules, each step is a small function over the extracted columns
(:mod:`.metrics`); every threshold lives in :data:`THRESHOLDS` (:mod:`.facts`, shared with the advice). The tree, in order:

1. Is the GPU filled?
   a. launch-bound   no SM active (duration x (1 - busiest SM's active / elapsed): launch, CTA
                     dispatch, teardown, ~2 us on an H100) for >= launch_fixed_share of the duration:
                     the fixed cost of a launch dominates (fuse, batch, CUDA graphs). Only a report
                     without the busiest SM's cycles falls back to a duration cut-off.
   b. under-filled   SM-time idle (1 - sm__cycles_active.avg / elapsed) >= idle_share (the CTA count
                     decides only without SM active cycles), and no global memory level (DRAM, L2) is
                     saturated; says both: the SMs that get no CTA, or (a CTA per SM whose extra CTAs
                     find no work) the SMs that do no real work, and the work in SMs; tiles per SM
                     and the last wave's fill where the tile grid is known. The idle SM-time splits
                     into the launch's own (no SM active), tile quantization and the rest
                     (idle_parts); the largest names the launch ("launch and ramp" takes the advice
                     for a launch's fixed cost, not for more tiles).
2. What limits the busy SMs (also reported under 1, as the busy SMs' limiter)?
   - the hottest pipe, % of active cycles (and of elapsed), >= unit_bound_pct -> compute-bound:<pipe>;
     else issue slots >= issue_bound_pct -> compute-bound:issue;
   - the busiest memory level (DRAM, L2, L1/shared), % of peak, >= unit_bound_pct -> memory-bound:<level>;
     where wgmma/HGMMA/QGMMA execute, L1/shared traffic is the MMA's operand path and not counted;
   - the larger of the two wins ("balanced" when within balanced_margin of each other);
   - neither: latency-bound, named by the dominant stall reason, with issue rate and eligible warps.
3. Occupancy last: only for latency-bound launches whose occupancy limiter allows more warps and
   that are not one CTA per SM by design (persistent / large-SMEM kernels); under one wave the grid,
   not registers or shared memory, limits the warps (grid-limited).
Flags beside the class: bank conflicts, register spills (and spill traffic that fills a memory
level), global atomics, L2 refetch (an L2-bound TMA kernel reading its operands from L2 several times
over); a pipe tied with the limiting one is named beside it. The facts give every duration with its
SM cycles, the SM clock and the busiest SM's active cycles.

Advice (:mod:`.advice`) is picked by class, kernel kind (MMA executed or not) and architecture, each
piece citing the number it rests on. ncu's own rules are set beside the verdict (:func:`ncu_view`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from bsprof.analyzers.ncu.advice import advise_entries
from bsprof.analyzers.ncu.facts import (  # noqa: F401  (re-exported: the verdict's public names)
    MMA_FAMILIES,
    MMA_OPCODE,
    SYNC_REASONS,
    THRESHOLDS,
    WGMMA_OPCODE,
    async_loads,
    global_atomics,
    known,
    l2_refetch,
    launch_problem,
    level_bytes,
    loads_by_tma,
    metric,
    opcodes,
    register_loads,
    spill_traffic,
    stall_shares,
)
from bsprof.analyzers.ncu.price import headroom, order_by_price, price_all
from bsprof.fmt import fmt_bytes, fmt_short

CLASSES = ("launch-bound", "under-filled", "compute-bound", "memory-bound", "latency-bound")
MEMORY_LEVELS = (
    ("dram", "dram_throughput_pct", "dram"),
    ("l2", "l2_throughput_pct", "l2_sectors"),
    ("l1", "l1_throughput_pct", None),
)


@dataclass
class Evidence:
    what: str
    value: float
    op: str
    threshold: float
    threshold_name: str

    def __str__(self) -> str:
        return f"{self.what} = {fmt_short(self.value)} {self.op} {fmt_short(self.threshold)} ({self.threshold_name})"


@dataclass
class Fill:
    """How the launch fills the GPU."""

    sms: int | None = None
    ctas: int | None = None
    ctas_per_sm: int | None = None  # the occupancy limit
    active_share: float = math.nan  # sm__cycles_active.avg / elapsed
    max_active_share: float = math.nan  # the busiest SM's active / elapsed
    min_active_share: float = math.nan  # the least busy SM's active / elapsed
    idle_sms: int | None = None  # SMs that never got a CTA
    no_work_sms: int | None = None  # SMs with (almost) no work although they got a CTA (estimate)
    busy_sms: float = math.nan  # the work in SMs at the busiest SM's pace (estimate)
    sm_mhz: float = math.nan  # SM clock: elapsed SM cycles / duration
    launch_fixed_share: float = math.nan  # share of the duration no SM is active (launch, dispatch, teardown)
    launch_fixed_us: float = math.nan
    waves: float = math.nan
    tiles: dict | None = None  # exact tile accounting, when the tile grid is known
    text: str = ""


@dataclass
class Verdict:
    cls: str
    unit: str = ""  # pipe / memory level / stall reason
    detail: str = ""
    flags: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # the numbers in words ("97% of active, 93% of elapsed")
    candidates: list[str] = field(default_factory=list)
    busy: dict = field(default_factory=dict)  # what limits the busy SMs (class, unit, facts)
    fill: Fill = field(default_factory=Fill)
    kind: str = "other"  # gemm | other
    mma: str = ""  # wgmma | tcgen05 | mma.sync | dmma (gemm only)
    co_units: list[str] = field(default_factory=list)  # pipes tied with the limiting one
    arch: str = "other"
    ncu: list[str] = field(default_factory=list)  # agreement with ncu's own rules
    advice_ids: list[str] = field(default_factory=list)  # each candidate's advice line (advice.entry_id)
    prices: list = field(default_factory=list)  # each candidate's price (price.Price), same order
    headroom: object = None  # what any change that keeps the work buys at most (price.headroom)
    missing: list[str] = field(default_factory=list)  # what the report lacks and what that costs

    @property
    def label(self) -> str:
        return f"{self.cls}:{self.unit}" if self.cls in ("compute-bound", "memory-bound") and self.unit else self.cls

    def as_dict(self) -> dict:
        return {
            "class": self.cls,
            "label": self.label,
            "unit": self.unit,
            "detail": self.detail,
            "flags": self.flags,
            "evidence": [str(e) for e in self.evidence],
            "facts": self.facts,
            "candidates": self.candidates,
            "busy": {k: ([str(e) for e in val] if k == "evidence" else val) for k, val in self.busy.items()},
            "fill": {k: v for k, v in vars(self.fill).items() if not (isinstance(v, float) and math.isnan(v))},
            "kind": self.kind,
            "mma": self.mma,
            "co_units": self.co_units,
            "arch": self.arch,
            "ncu": self.ncu,
            "missing": self.missing,
            "advice_ids": self.advice_ids,
            "prices": [p.as_dict() for p in self.prices],
            "headroom": self.headroom.as_dict() if self.headroom is not None else None,
            "thresholds": dict(THRESHOLDS),
        }


def kernel_kind(row) -> str:
    """gemm when MMA instructions executed (or, without an opcode table, the tensor pipe worked)."""
    ops = opcodes(row)
    if ops:
        return "gemm" if any(MMA_OPCODE.match(o) for o in ops) else "other"
    pipe = hottest_pipe(row)
    tensor = metric(row, "pipe_tensor_pct")
    if not known(tensor) and pipe and pipe[0] == "tensor":
        tensor = pipe[1]
    return "gemm" if known(tensor) and tensor >= 5.0 else "other"


def mma_family(row, kind: str | None = None) -> str:
    """The MMA family a GEMM issues most (wgmma, tcgen05, mma.sync, dmma); without an opcode table,
    the family the architecture's fast GEMMs use."""
    if (kind or kernel_kind(row)) != "gemm":
        return ""
    counts: dict[str, float] = {}
    for op, n in opcodes(row).items():
        fam = next((f for rx, f in MMA_FAMILIES if rx.match(op)), None)
        if fam:
            counts[fam] = counts.get(fam, 0.0) + n
    if counts:
        return max(counts, key=counts.get)
    return {"sm_90": "wgmma", "sm_100": "tcgen05"}.get(str(row.get("arch")), "")


def wgmma_operands_from_smem(row) -> bool:
    """wgmma / tcgen05 read their B (and usually A) operand straight from shared memory: that L1/shared
    traffic is the MMA's operand path. mma.sync (HMMA) operands come through registers (LDSM)."""
    ops = opcodes(row)
    if ops:
        return any(WGMMA_OPCODE.match(o) for o in ops)
    return metric(row, "gmma_issue_pct") > 0 or (
        row.get("arch") in ("sm_90", "sm_100") and metric(row, "tensor_pipe_pct") >= 20
    )


# --- 1. is the GPU filled -------------------------------------------------------------------------


def fill_facts(row, tiles: dict | None = None) -> Fill:
    f = Fill(tiles=tiles)
    sms, ctas = metric(row, "sm_count"), metric(row, "grid_size")
    if not known(ctas):
        dims = [metric(row, f"grid_{a}") for a in "xyz"]
        ctas = math.prod(dims) if all(known(d) for d in dims) else math.nan
    f.sms = int(sms) if known(sms) else None
    f.ctas = int(ctas) if known(ctas) else None
    limits = [metric(row, f"occupancy_limit_{k}") for k in ("blocks", "registers", "shared_mem", "warps", "barriers")]
    limits = [x for x in limits if known(x) and x > 0]
    f.ctas_per_sm = int(min(limits)) if limits else None
    act, mx, el = (
        metric(row, "sm_active_cycles_avg"),
        metric(row, "sm_active_cycles_max"),
        metric(row, "sm_elapsed_cycles_avg"),
    )
    if known(act) and known(el) and el > 0:
        f.active_share = min(1.0, act / el)
        f.max_active_share = min(1.0, mx / el) if known(mx) else math.nan
    f.waves = metric(row, "waves_per_sm")
    if f.sms and f.ctas is not None and f.ctas < f.sms:
        f.idle_sms = f.sms - f.ctas
    mn = metric(row, "sm_active_cycles_min")
    if known(f.active_share) and known(mn) and known(mx) and mx > mn:
        f.min_active_share = mn / el
        if f.sms and mn < THRESHOLDS["no_work_sm_share"] * mx:
            # two groups of SMs, the working ones near the busiest and the rest near the least busy:
            # how many work follows from the average (per-SM values are not in the report)
            f.busy_sms = f.sms * (act - mn) / (mx - mn)
            if not f.idle_sms and round(f.sms - f.busy_sms) >= 1:
                f.no_work_sms = round(f.sms - f.busy_sms)
    dur = metric(row, "duration_ns") / 1e3
    if known(dur) and dur > 0 and known(el):
        f.sm_mhz = el / dur
        if known(f.max_active_share):
            f.launch_fixed_share = 1.0 - f.max_active_share
            f.launch_fixed_us = dur * f.launch_fixed_share
    parts = []
    if f.sms and known(f.active_share):
        idle = 1.0 - f.active_share
        if f.idle_sms:
            parts.append(f"{f.idle_sms} of {f.sms} SMs get no CTA ({f.ctas} CTAs)")
        elif f.no_work_sms:
            parts.append(
                f"~{f.no_work_sms} of {f.sms} SMs do no real work although {f.ctas} CTAs launched (the least "
                f"busy SM is active {100 * f.min_active_share:.0f}% of elapsed: CTAs that find no work and exit)"
            )
        parts.append(
            f"SM-time idle {100 * idle:.0f}% (sm__cycles_active avg {100 * f.active_share:.0f}% "
            f"of elapsed, busiest SM {100 * f.max_active_share:.0f}%)"
            if known(f.max_active_share)
            else f"SM-time idle {100 * idle:.0f}%"
        )
        if known(f.busy_sms) and (f.idle_sms or f.no_work_sms):
            parts.append(f"the work of ~{f.busy_sms:.0f} SMs at the busiest SM's pace")
    # cycles beside microseconds: with unlocked clocks the SM clock moves a few % between launches
    if known(f.sm_mhz) and known(mx):
        parts.append(
            f"{dur:.2f} us = {el:,.0f} SM cycles at {f.sm_mhz:,.0f} MHz, busiest SM active {mx:,.0f} cycles "
            f"({mx / f.sm_mhz:.2f} us)"
        )
    if known(f.launch_fixed_us):
        parts.append(
            f"no SM active for {f.launch_fixed_us:.1f} us ({100 * f.launch_fixed_share:.0f}% of the launch; "
            f"launch-bound at >= {100 * THRESHOLDS['launch_fixed_share']:.0f}%, launch_fixed_share)"
        )
    if known(f.waves):
        parts.append(f"{f.waves:.2f} waves of {f.ctas_per_sm or '?'} CTA{'' if f.ctas_per_sm == 1 else 's'} per SM")
        whole, frac = int(f.waves), f.waves - int(f.waves)
        if f.sms and whole >= 1 and 0.02 < frac < 0.98 and not tiles:
            # the last, partial wave: its empty CTA slots leave SMs idle for about 1/(waves) of the time
            per = f.ctas_per_sm or 1
            what = "SMs" if per == 1 else f"CTA slots ({per} per SM)"
            slots = f.sms * per
            parts.append(
                f"the last wave is {100 * frac:.0f}% full: ~{round(slots * (1 - frac))} of {slots} {what} "
                f"idle for ~{100 / (whole + 1):.0f}% of the time"
            )
    cl = metric(row, "cluster_size")
    if known(cl) and cl > 1 and f.ctas:
        parts.append(f"{f.ctas // int(cl)} clusters of {int(cl)} CTAs")
    if tiles:
        parts.append(tile_text(tiles))
    f.text = "; ".join(parts)
    return f


def idle_parts(f: "Fill", tiles: dict | None) -> dict[str, float]:
    """The idle SM-time (1 - sm__cycles_active / elapsed) split into what the report can name, as
    shares of the launch's SM-time: ``launch`` (no SM active: launch, dispatch, teardown, all SMs
    idle), ``quantization`` (the last round's idle CTAs, over the time some SM works, where the tile
    grid is known) and ``rest`` (tail and imbalance). The largest names an under-filled launch."""
    if not known(f.active_share):
        return {}
    idle = 1.0 - f.active_share
    launch = min(idle, f.launch_fixed_share) if known(f.launch_fixed_share) else 0.0
    quant = min(idle - launch, tiles["idle_share"] * (1.0 - launch)) if tiles else 0.0
    return {"launch": launch, "quantization": max(0.0, quant), "rest": max(0.0, idle - launch - quant)}


def tile_text(t: dict) -> str:
    idle = t["ctas"] - round(t["last_round_fill"] * t["ctas"])
    text = (
        f"{t['tiles']} tiles of {t['tile_m']}x{t['tile_n']} on {t['ctas']} persistent CTAs: "
        f"{t['tiles_per_cta_max']} rounds, the last {100 * t['last_round_fill']:.0f}% full "
        f"({100 * t['idle_share']:.0f}% of CTA-rounds idle)"
    )
    if idle:
        text += f": {idle} of {t['ctas']} SMs idle for the last round, ~{100 / t['tiles_per_cta_max']:.0f}% of the time"
    return text


def tile_quantization(mnkl, tile_mn, ctas: int, cluster_mn=(1, 1)) -> dict:
    """Exact tile accounting of a persistent GEMM: tiles (each extent's tile count rounded up to the
    cluster shape, as a clustered scheduler launches them), rounds per CTA, the last round's fill."""
    m, n, _, batches = (list(mnkl) + [1])[:4]
    tm, tn = tile_mn
    cm, cn = cluster_mn
    tiles = math.ceil(math.ceil(m / tm) / cm) * cm * math.ceil(math.ceil(n / tn) / cn) * cn * batches
    rounds = math.ceil(tiles / ctas)
    last = tiles - (rounds - 1) * ctas
    useful = (m * n * batches) / (math.ceil(m / tm) * tm * math.ceil(n / tn) * tn * batches)
    return {
        "tiles": tiles,
        "tile_m": tm,
        "tile_n": tn,
        "ctas": ctas,
        "tiles_per_cta_max": rounds,
        "last_round_fill": last / ctas,
        "idle_share": 1 - tiles / (rounds * ctas),
        "tile_useful_share": useful,
    }


def tiles_from_row(row) -> dict | None:
    """Exact tile accounting where the report names the problem and the tile (a bsprof launch's NVTX
    range: ``mnkl=... tile=MxN``) and the grid is persistent (no more CTAs than SMs)."""
    mnkl, tile = launch_problem(row), row.get("tile_mn") if hasattr(row, "get") else None
    ctas, sms = metric(row, "grid_size"), metric(row, "sm_count")
    if not mnkl or not isinstance(tile, str) or not known(ctas) or (known(sms) and ctas > sms):
        return None
    tm, tn = (int(x) for x in tile.split("x"))
    cluster = tuple(
        int(metric(row, f"cluster_{a}"))
        if known(metric(row, f"cluster_{a}")) and metric(row, f"cluster_{a}") > 0
        else 1
        for a in "xy"
    )
    # the launch's cluster dims are (x, y) = (M, N) for CuTe DSL persistent GEMMs
    return tile_quantization(mnkl, (tm, tn), int(ctas), cluster)


def rule_launch_bound(row, f: Fill) -> list[Evidence] | None:
    """The fixed cost of a launch (front end, CTA dispatch, teardown: ~2 us on an H100) is the time no SM
    has a warp, duration x (1 - busiest SM's active / elapsed). When that is a large share of the
    duration, fusing or batching launches is what helps. A duration cut-off alone would split two
    launches doing the same work at 9.8 and 10.6 us."""
    if known(f.launch_fixed_share):
        if f.launch_fixed_share < THRESHOLDS["launch_fixed_share"]:
            return None
        return [
            Evidence(
                f"share of the duration no SM is active ({f.launch_fixed_us:.1f} us)",
                f.launch_fixed_share,
                ">=",
                THRESHOLDS["launch_fixed_share"],
                "launch_fixed_share",
            )
        ]
    # without the busiest SM's cycles: a short launch whose SMs are mostly idle
    dur = metric(row, "duration_ns") / 1e3
    if not known(dur) or dur >= THRESHOLDS["tiny_duration_us"]:
        return None
    if known(f.active_share) and f.active_share >= THRESHOLDS["tiny_active_share"]:
        return None
    ev = [Evidence("duration_us", dur, "<", THRESHOLDS["tiny_duration_us"], "tiny_duration_us")]
    if known(f.active_share):
        ev.append(
            Evidence("sm_active_share", f.active_share, "<", THRESHOLDS["tiny_active_share"], "tiny_active_share")
        )
    return ev


def rule_under_filled(row, f: Fill) -> list[Evidence] | None:
    """SM time idle (sm__cycles_active over SMs x elapsed) decides; the CTA count only where the report
    lacks SM active cycles. A grid with a CTA per SM whose extra CTAs find no tile leaves the same SMs
    idle as a grid without those CTAs: both say how many SMs work."""
    ev = []
    if known(f.active_share):
        if 1 - f.active_share < THRESHOLDS["idle_share"]:
            return None
        ev.append(Evidence("sm_idle_share", 1 - f.active_share, ">=", THRESHOLDS["idle_share"], "idle_share"))
    if f.idle_sms and f.sms and f.idle_sms / f.sms >= THRESHOLDS["idle_sms_share"]:
        ev.append(Evidence("idle_sms", f.idle_sms, ">=", THRESHOLDS["idle_sms_share"] * f.sms, "idle_sms_share x SMs"))
    elif f.no_work_sms and f.sms and f.no_work_sms >= THRESHOLDS["idle_sms_share"] * f.sms:
        ev.append(
            Evidence(
                "SMs without real work (est.)",
                f.no_work_sms,
                ">=",
                THRESHOLDS["idle_sms_share"] * f.sms,
                "idle_sms_share x SMs",
            )
        )
    if not ev:
        return None
    # a saturated global memory level is the limit whatever the grid: more CTAs would queue on it
    if saturated_global_memory(row) is not None:
        return None
    return ev


def rule_l2_refetch(row, v: "Verdict") -> list[Evidence] | None:
    """An L2-bound kernel that loads by TMA, or any L2-bound GEMM, reading its operands from L2 several
    times over: the same tiles are fetched again for each CTA that needs them (placement, for TMA
    kernels) or each operand byte is read once per tile of the other operand (small tiles)."""
    if v.label != "memory-bound:l2" or not (loads_by_tma(row) or v.kind == "gemm"):
        return None
    _, ratio, _ = l2_refetch(row)
    if not known(ratio) or ratio < THRESHOLDS["l2_refetch_ratio"]:
        return None
    return [Evidence("L2->SM bytes / operand bytes", ratio, ">=", THRESHOLDS["l2_refetch_ratio"], "l2_refetch_ratio")]


def rule_register_loads(row, v: "Verdict") -> list[Evidence] | None:
    """A GEMM whose operands come through registers (LDG, then a store to shared memory) rather than TMA
    or cp.async: libraries fall back to such kernels when a row is not 16-byte aligned."""
    if v.kind != "gemm" or loads_by_tma(row):
        return None
    ldg, per_mma = register_loads(row)
    if not known(per_mma) or per_mma < THRESHOLDS["register_load_per_mma"] or async_loads(row) >= ldg:
        return None
    return [
        Evidence("LDG per MMA instruction", per_mma, ">=", THRESHOLDS["register_load_per_mma"], "register_load_per_mma")
    ]


def saturated_global_memory(row) -> tuple[str, float] | None:
    best = max(
        ((lvl, metric(row, col)) for lvl, col, _ in MEMORY_LEVELS[:2] if known(metric(row, col))),
        key=lambda kv: kv[1],
        default=None,
    )
    return best if best and best[1] >= THRESHOLDS["unit_bound_pct"] else None


# --- 2. what limits the busy SMs ------------------------------------------------------------------


def pipe_values(row) -> list[tuple[str, float]]:
    """(pipe, % of peak over active cycles) for every pipe the report has."""
    keys = row.keys() if hasattr(row, "keys") else []
    pipes = [
        (k[len("pipe_") : -len("_pct")], metric(row, k)) for k in keys if k.startswith("pipe_") and k.endswith("_pct")
    ]
    return [(p, v) for p, v in pipes if known(v)]


def hottest_pipe(row) -> tuple[str, float] | None:
    pipes = pipe_values(row)
    if not pipes:
        # a report without the compute workload section: the tensor pipe from the SOL breakdown
        t, te = metric(row, "tensor_pipe_pct"), metric(row, "tensor_pipe_elapsed_pct")
        share = metric(row, "sm_active_cycles_avg") / metric(row, "sm_elapsed_cycles_avg")
        if not known(t) and known(te) and known(share) and share > 0:
            t = min(100.0, te / share)
        if known(t):
            pipes = [("tensor", t)]
    return max(pipes, key=lambda kv: kv[1]) if pipes else None


def busiest_memory(row) -> tuple[str, float, bool] | None:
    """(level, % of peak, operand_path) of the busiest memory level. Where wgmma executes, L1/shared
    is the MMA's operand path: reported, not ranked."""
    operand = wgmma_operands_from_smem(row)
    levels = [(lvl, metric(row, col)) for lvl, col, _ in MEMORY_LEVELS if known(metric(row, col))]
    ranked = dict((lvl, v) for lvl, v in levels if not (operand and lvl == "l1"))
    if not ranked:
        return None
    lvl, v = max(ranked.items(), key=lambda kv: kv[1])
    dram = ranked.get("dram", math.nan)
    if (
        lvl == "l2"
        and known(dram)
        and dram >= THRESHOLDS["unit_bound_pct"]
        and v - dram < THRESHOLDS["l2_over_dram_pts"]
    ):
        lvl, v = "dram", dram  # the L2 load is the DRAM stream passing through
    return lvl, v, operand


def busy_limit(row, f: Fill) -> dict:
    """What limits the SMs that have work: {class, unit, value, facts, evidence}."""
    share = f.active_share if known(f.active_share) else 1.0
    pipe = hottest_pipe(row)
    issue = metric(row, "issue_active_pct")
    mem = busiest_memory(row)
    facts: list[str] = []
    co: list[str] = []
    comp_unit, comp = None, math.nan
    if pipe:
        only = not any(
            k.startswith("pipe_") and known(metric(row, k)) for k in (row.keys() if hasattr(row, "keys") else [])
        )
        facts.append(
            f"{'tensor pipe (the only pipe this report has)' if only else 'hottest pipe ' + pipe[0]}: "
            f"{pipe[1]:.0f}% of active cycles, {pipe[1] * share:.0f}% of elapsed"
        )
        if pipe[1] >= THRESHOLDS["unit_bound_pct"]:
            comp_unit, comp = pipe
            # pipes tied with the hottest one limit it together: name each (XU beside FMA when a
            # transcendental's software expansion loads the FMA pipe as much as MUFU loads XU)
            for p, val in pipe_values(row):
                # a sub-pipe (fmaheavy of fma) is the same unit, not a second one
                same = p.startswith(pipe[0]) or pipe[0].startswith(p)
                if not same and val >= THRESHOLDS["unit_bound_pct"] and pipe[1] - val < THRESHOLDS["balanced_margin"]:
                    co.append(p)
                    facts.append(
                        f"{p} pipe {val:.0f}% of active, within {THRESHOLDS['balanced_margin']:.0f} points "
                        f"of {pipe[0]}: both limit"
                    )
    if comp_unit is None and known(issue) and issue >= THRESHOLDS["issue_bound_pct"]:
        comp_unit, comp = "issue", issue
    if known(issue):
        facts.append(f"issue slots busy {issue:.0f}%")
    mem_unit, memv = None, math.nan
    if mem:
        by = ", ".join(
            f"{lvl.upper()} {metric(row, col):.0f}%"
            + (f" ({fmt_bytes(level_bytes(row, lvl))})" if known(level_bytes(row, lvl)) else "")
            for lvl, col, _ in MEMORY_LEVELS
            if known(metric(row, col))
        )
        facts.append(
            "memory: "
            + by
            + (
                " — L1/shared is the wgmma operand path (SMEM feeds the MMA), not a memory limit"
                if mem[2] and known(metric(row, "l1_throughput_pct"))
                else ""
            )
        )
        if mem[1] >= THRESHOLDS["unit_bound_pct"]:
            mem_unit, memv = mem[0], mem[1]
    ev: list[Evidence] = []
    if comp_unit is None and mem_unit is None:
        out = {"class": "latency-bound", "unit": top_stall(row) or "", "facts": facts}
        best = max(
            [x for x in (pipe[1] if pipe else math.nan, issue, mem[1] if mem else math.nan) if known(x)],
            default=math.nan,
        )
        if known(best):
            ev.append(
                Evidence(
                    "busiest unit (pipe, issue or memory) %", best, "<", THRESHOLDS["unit_bound_pct"], "unit_bound_pct"
                )
            )
        out["evidence"] = ev
        return out
    if mem_unit is not None and (comp_unit is None or memv >= comp):
        cls, unit, val, other = "memory-bound", mem_unit, memv, comp
    else:
        cls, unit, val, other = "compute-bound", comp_unit, comp, memv
    thr = "issue_bound_pct" if unit == "issue" else "unit_bound_pct"
    col = {"issue": "issue_active_pct"}.get(unit) or (
        f"{unit}_throughput_pct" if cls == "memory-bound" else f"pipe_{unit}_pct"
    )
    ev.append(Evidence(col, val, ">=", THRESHOLDS[thr], thr))
    out = {
        "class": cls,
        "unit": unit,
        "value": val,
        "facts": facts,
        "evidence": ev,
        "co_units": co if cls == "compute-bound" else [],
    }
    if known(other) and abs(val - other) < THRESHOLDS["balanced_margin"]:
        out["balanced"] = (
            f"balanced: {'memory' if cls == 'compute-bound' else 'compute'} at {other:.0f}% is within {THRESHOLDS['balanced_margin']:.0f} points"
        )
        # the other side limits as much: its advice applies too (advice.advise_entries)
        out["balanced_with"] = (
            {"class": "memory-bound", "unit": mem_unit, "co_units": []}
            if cls == "compute-bound"
            else {"class": "compute-bound", "unit": comp_unit, "co_units": co}
        )
    return out


def top_stall(row) -> str | None:
    return next(iter(stall_shares(row)), None)


# --- 3. occupancy, flags ----------------------------------------------------------------------------


def one_cta_per_sm_by_design(row, f: Fill) -> bool:
    """Persistent kernels (a grid of about one CTA per SM) and kernels whose shared memory allows one CTA."""
    smem = metric(row, "occupancy_limit_shared_mem")
    persistent = f.sms is not None and f.ctas is not None and f.ctas <= f.sms and f.ctas >= 0.5 * f.sms
    return persistent or (known(smem) and smem <= 1)


def rule_occupancy(row, f: Fill) -> list[Evidence] | None:
    ach, theo = metric(row, "achieved_occupancy_pct"), metric(row, "theoretical_occupancy_pct")
    if not known(ach) or ach >= THRESHOLDS["low_occupancy_pct"] or one_cta_per_sm_by_design(row, f):
        return None
    # a resource (registers, shared memory, barriers) must cap the warps: at 100 % theoretical the
    # low achieved occupancy comes from the grid or imbalance, which cutting resources does not fix
    if known(theo) and theo >= 100.0:
        return None
    # nor when the grid gives each SM fewer CTAs than its resources allow (under one wave)
    if grid_limits_warps(row, f):
        return None
    ev = [Evidence("achieved_occupancy_pct", ach, "<", THRESHOLDS["low_occupancy_pct"], "low_occupancy_pct")]
    elig = metric(row, "eligible_warps_per_cycle")
    if known(elig) and elig < THRESHOLDS["min_eligible_warps"]:
        ev.append(
            Evidence("eligible_warps_per_cycle", elig, "<", THRESHOLDS["min_eligible_warps"], "min_eligible_warps")
        )
    return ev


def grid_limits_warps(row, f: Fill) -> bool:
    """Less than one wave: every CTA is resident at once and the SMs still have free warp slots."""
    return known(f.waves) and f.waves < 1.0


def rule_grid_limited(row, f: Fill) -> list[Evidence] | None:
    """A latency-bound launch whose few warps per SM come from the grid: more CTAs or warps, not
    fewer registers, put more work in flight."""
    ach = metric(row, "achieved_occupancy_pct")
    if not grid_limits_warps(row, f) or not known(ach) or ach >= THRESHOLDS["low_occupancy_pct"]:
        return None
    return [
        Evidence("waves_per_sm", f.waves, "<", 1.0, "one wave"),
        Evidence("achieved_occupancy_pct", ach, "<", THRESHOLDS["low_occupancy_pct"], "low_occupancy_pct"),
    ]


def rule_global_atomics(row) -> list[Evidence] | None:
    n, share = global_atomics(row)
    if n <= 0 or share < THRESHOLDS["atomic_share"]:
        return None
    return [
        Evidence(
            "global atomics share of global memory instructions",
            share,
            ">=",
            THRESHOLDS["atomic_share"],
            "atomic_share",
        )
    ]


def rule_spill_traffic(row) -> list[Evidence] | None:
    local, share = spill_traffic(row)
    if not known(share) or local <= 0 or share < THRESHOLDS["spill_traffic_share"]:
        return None
    return [
        Evidence(
            "local (spill) bytes share of L2 bytes",
            share,
            ">=",
            THRESHOLDS["spill_traffic_share"],
            "spill_traffic_share",
        )
    ]


def rule_smem_conflicts(row) -> list[Evidence] | None:
    conf, wav = metric(row, "smem_bank_conflicts"), metric(row, "smem_wavefronts")
    if not known(conf) or not known(wav) or wav <= 0:
        return None
    pct = 100.0 * conf / wav
    if pct < THRESHOLDS["smem_conflict_pct"]:
        return None
    return [Evidence("smem_conflict_pct", pct, ">=", THRESHOLDS["smem_conflict_pct"], "smem_conflict_pct")]


def rule_register_spills(row) -> list[Evidence] | None:
    v = metric(row, "spill_instructions")
    if not known(v):
        v = metric(row, "local_spill_requests")
    return [Evidence("spill_instructions", v, ">", 0.0, "any spill")] if known(v) and v > 0 else None


# --- what the report lacks ---------------------------------------------------------------------------

# (what the verdict loses, columns that tell whether the section was collected, ncu section)
SECTION_NEEDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("the pipe that limits the busy SMs", ("pipe_fma_pct", "pipe_alu_pct"), "ComputeWorkloadAnalysis"),
    ("the dominant stall reason (latency)", ("warp_cycles_per_issue",), "WarpStateStats"),
    ("issue rate and eligible warps", ("issue_active_pct", "eligible_warps_per_cycle"), "SchedulerStats"),
    ("L1/shared throughput and bytes per level", ("l1_throughput_pct", "l2_sectors"), "MemoryWorkloadAnalysis"),
    ("the executed MMA opcodes (precision, kernel kind)", ("inst_executed",), "InstructionStats"),
    ("SM active cycles (GPU fill)", ("sm_active_cycles_avg",), "SpeedOfLight"),
)


def missing_sections(row) -> list[str]:
    """What the verdict loses for each ncu section the report lacks, and how to collect it: bsprof's
    triage set reads metrics, not sections, so a section it skips comes with `--set full`."""
    out = []
    has_ops = bool(opcodes(row))
    for loses, cols, section in SECTION_NEEDS:
        lacks = not has_ops if section == "InstructionStats" else all(not known(metric(row, c)) for c in cols)
        if lacks:
            out.append(f"{section}: {loses} (collect it with `ncu --section {section}` or `bsprof ncu --set full`)")
    return out


# --- the tree ------------------------------------------------------------------------------------------


def classify(row, *, k: int | None = None, tiles: dict | None = None, rules: list[dict] | None = None) -> Verdict:
    """Verdict for one extracted row (a dict or a pandas Series). ``k``: the GEMM's K when known;
    ``tiles``: exact tile accounting (:func:`tile_quantization`) for a bundled persistent kernel;
    ``rules``: ncu's own rule results for the launch (:mod:`.rules`), set beside the verdict."""
    if tiles is None:
        tiles = tiles_from_row(row)
    if k is None and (mnkl := launch_problem(row)):
        k = mnkl[2]
    f = fill_facts(row, tiles)
    busy = busy_limit(row, f)
    kind = kernel_kind(row)
    v = Verdict(
        "latency-bound", kind=kind, mma=mma_family(row, kind), arch=str(row.get("arch") or "other"), fill=f, busy=busy
    )
    if ev := rule_launch_bound(row, f):
        v.cls, v.evidence = "launch-bound", ev
        # the fill text carries the duration with its cycles where the report has them
        v.facts.append(f.text if known(f.sm_mhz) else f"{metric(row, 'duration_ns') / 1e3:.1f} us; " + f.text)
    elif ev := rule_under_filled(row, f):
        v.cls, v.evidence = "under-filled", ev
        v.facts.append(f.text)
        parts = idle_parts(f, tiles)
        largest = max(parts, key=parts.get) if parts else None
        if largest == "quantization":
            v.detail = (
                f"tile quantization: the last round of tiles leaves CTAs idle "
                f"({100 * parts['quantization']:.0f}% of SM-time)"
            )
        elif largest == "launch" and not (f.idle_sms or f.no_work_sms):
            v.unit = "launch"  # the advice for a launch's fixed cost, not for more tiles
            v.detail = (
                f"launch and ramp: no SM active for {100 * parts['launch']:.0f}% of the launch "
                f"({f.launch_fixed_us:.1f} us), the largest share of the {100 * (1 - f.active_share):.0f}% "
                "SM-time idle"
                + (f"; tile quantization {100 * parts['quantization']:.0f}%" if parts.get("quantization") else "")
            )
        elif f.idle_sms or f.no_work_sms:
            how = (
                f"{f.idle_sms} get no CTA"
                if f.idle_sms
                else f"~{f.no_work_sms} do no real work: {f.ctas} CTAs, some exit at once"
            )
            work = f", the work of ~{f.busy_sms:.0f} SMs" if known(f.busy_sms) else ""
            idle = f"SM-time idle {100 * (1 - f.active_share):.0f}%{work}; " if known(f.active_share) else ""
            v.detail = f"{idle}of {f.sms} SMs {how}"
        else:
            v.detail = f"{f.sms} SMs idle {100 * (1 - f.active_share):.0f}% of the time on average (tail / imbalance)"
    else:
        v.cls, v.unit = busy["class"], busy.get("unit", "")
        v.evidence = list(busy.get("evidence", []))
        if f.text:
            v.facts.append(f.text)
        if v.cls == "latency-bound":
            shares = stall_shares(row)
            top = next(iter(shares), None)
            sync = sum(shares.get(r, 0.0) for r in SYNC_REASONS)
            v.detail = "sync" if sync >= 0.35 else (f"latency ({top})" if top else "latency")
            if top:
                v.facts.append(
                    f"dominant stall {top}: {100 * shares[top]:.0f}% of "
                    f"{metric(row, 'warp_cycles_per_issue'):.3g} cycles between issues"
                )
            if ev := rule_occupancy(row, f):
                v.flags.append("low-occupancy")
                v.evidence += ev
            elif ev := rule_grid_limited(row, f):
                v.flags.append("grid-limited")
                v.evidence += ev
            if ev := rule_global_atomics(row):
                v.flags.append("global-atomics")
                v.evidence += ev
        elif busy.get("balanced"):
            v.detail = busy["balanced"]
        elif (
            v.cls == "compute-bound"
            and v.unit == "tensor"
            and metric(row, "tensor_pipe_elapsed_pct") >= THRESHOLDS["near_peak_pct"]
        ):
            v.detail = "near-peak"
        v.co_units = list(busy.get("co_units", []))
        if v.co_units and not v.detail:
            v.detail = f"{' and '.join([v.unit, *v.co_units])} pipes tied"
    v.facts += busy.get("facts", [])
    for flag, rule in (("smem-bank-conflicts", rule_smem_conflicts), ("register-spills", rule_register_spills)):
        if ev := rule(row):
            v.flags.append(flag)
            v.evidence += ev
    if "register-spills" in v.flags and v.cls == "memory-bound" and (ev := rule_spill_traffic(row)):
        v.flags.append("spill-traffic")
        v.evidence += ev
    if ev := rule_l2_refetch(row, v):
        # TMA already coalesces and stages: its refetch is placement; a GEMM loading otherwise re-reads by tile size
        v.flags.append("l2-refetch" if loads_by_tma(row) else "gemm-l2-reuse")
        v.evidence += ev
    if ev := rule_register_loads(row, v):
        v.flags.append("register-loads")
        v.evidence += ev
    if v.kind == "gemm" and v.mma == "mma.sync" and v.arch == "sm_90" and v.cls not in ("launch-bound", "under-filled"):
        # whatever limits it, an mma.sync GEMM on sm_90 is capped below the wgmma peak
        v.flags.append("mma-sync")
    # ncu's imbalance rule where it explains the verdict: idle SMs, or atomics piling on a few L2 slices
    want = "SMs" if v.cls == "under-filled" else ("L2 Slices" if "global-atomics" in v.flags else None)
    for r in (rules or []) if want else []:
        if r.get("rule") == "WorkloadImbalance" and (r.get("title") or "").startswith(want):
            v.facts.append(f"ncu WorkloadImbalance ({r.get('speedup_pct') or 0:.0f}% est.): {r.get('message')}")
            break
    entries = advise_entries(v, row, k=k, rules=rules)
    # each line with its price, the largest priced speedup first
    prices = price_all(v, row, [pid for pid, _ in entries], rules)
    order = order_by_price(prices)
    v.advice_ids = [entries[i][0] for i in order]
    v.candidates = [entries[i][1] for i in order]
    v.prices = [prices[i] for i in order]
    v.headroom = headroom([row])
    v.missing = missing_sections(row)
    if rules:
        v.ncu = ncu_view(v, rules)
    return v


# --- ncu's own rules beside ours ---------------------------------------------------------------------

_SOL = (
    ("grid is too small", "under-filled"),
    ("greater than 80.0%", "high-throughput"),
    ("Compute is more heavily utilized", "compute-bound"),
    ("Memory is more heavily utilized", "memory-bound"),
    ("well-balanced", "balanced"),
    ("low compute throughput and memory bandwidth", "latency-bound"),
)


def ncu_sol_class(rules: list[dict]) -> tuple[str | None, str]:
    for r in rules:
        if r.get("rule") == "SOLBottleneck":
            msg = r.get("message") or ""
            for needle, cls in _SOL:
                if needle in msg:
                    return cls, msg
            return None, msg
    return None, ""


def hottest_pipe_text(v: Verdict) -> str | None:
    return next((f[len("hottest pipe ") :].split(",")[0] for f in v.facts if f.startswith("hottest pipe ")), None)


def ncu_view(v: Verdict, rules: list[dict], top: int = 0) -> list[str]:
    """Lines setting ncu's SOLBottleneck and its top estimated speedups beside the verdict."""
    out = []
    cls, msg = ncu_sol_class(rules)
    if cls:
        if cls == v.cls or (cls == "under-filled" and v.cls == "launch-bound"):
            out.append(f"ncu SOLBottleneck agrees ({cls}).")
        elif cls == "high-throughput":
            agree = v.cls in ("compute-bound", "memory-bound")
            out.append(
                f"ncu SOLBottleneck: a unit is above 80% of peak — {'agrees' if agree else 'bsprof differs'}; "
                f"bsprof names the unit: {v.label}."
            )
        elif cls == "balanced":
            out.append(
                f"ncu SOLBottleneck: compute and memory well-balanced; bsprof: {v.label}"
                + (f" ({v.detail})" if v.detail else "")
                + "."
            )
        else:
            why = {
                "under-filled": f"SM-time idle {100 * (1 - v.fill.active_share):.0f}%"
                if known(v.fill.active_share)
                else "",
                "latency-bound": (
                    f"every SM has work (SM-time idle {100 * (1 - v.fill.active_share):.0f}%); few waves "
                    "mean few warps per SM, which is the latency story"
                    if cls == "under-filled" and known(v.fill.active_share)
                    else ""
                ),
                "memory-bound": "a saturated DRAM/L2 limits whatever the grid",
                "compute-bound": "",
            }.get(v.cls, "")
            if v.cls == "compute-bound" and cls == "memory-bound" and v.kind == "gemm":
                why = "ncu's memory SOL counts L1/shared, which here is the wgmma operand path"
            out.append(f"ncu SOLBottleneck says {cls}; bsprof says {v.label}" + (f" ({why})" if why else "") + ".")
    for r in rules:
        m = re.search(r"^(\w[\w ]*?) is the highest-utilized pipeline \(([\d.]+)%\)", r.get("message") or "")
        if r.get("rule") == "HighPipeUtilization" and m:
            pipe = m.group(1)
            ours = v.busy.get("unit") if v.busy.get("class") == "compute-bound" else None
            note = " (ncu's Shared pipe is the logical sum of the FP64 and tensor pipes)" if pipe == "Shared" else ""
            out.append(
                f"ncu HighPipeUtilization: {pipe} {m.group(2)}% of elapsed{note}; bsprof's hottest pipe: "
                + (f"{ours}" if ours else (hottest_pipe_text(v) or "n/a"))
                + "."
            )
    ranked = [r for r in rules if r.get("speedup_pct") and r.get("kind") in ("optimization", "warning")]
    for r in ranked[:top]:
        out.append(
            f"ncu {r['section']}/{r['rule']}: est. {r['speedup_pct']:.0f}% {r.get('speedup_type') or ''} — "
            f"{r.get('title') or r.get('name') or ''}".rstrip(" —")
        )
    return out
