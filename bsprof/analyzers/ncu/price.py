"""The price of an advice line: the launch's projected time once the advice is followed, as an
interval, from the report alone.

Each unit's time is what the launch asks of it at its peak: ``duration x throughput %`` for DRAM, L2
and L1 (% of peak over elapsed), ``duration x SM-active share x pipe %`` for the pipes and the issue
slots (% over active cycles). A launch takes its fixed cost (no SM active: launch, dispatch, teardown)
plus the time of its binding unit at the share of peak a binding unit reaches (:data:`EFFICIENCY`,
the two ends of the interval). An advice line relieves one limiter: it names what that unit's time
becomes (the bytes the requests need instead of the sectors moved, one atomic per destination per CTA,
the tensor pipe at the precision's peak, the latency hidden by the warps the resources allow ...), and
the projection is the same sum with that unit changed: the next limiter binds. A line whose new time
the report cannot give (how many bytes a fusion saves, which neighbour shares a launch's fixed cost)
says "cannot bound" with why; several launches of one sequence price fusion and batching together
(:func:`price_sequence`).

Beside each price stands ncu's own estimate for the rule that speaks of the same lever
(:data:`NCU_RULES`), read as the share of the duration removed: speedup 1 / (1 - p).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace

from bsprof.analyzers.ncu.facts import (
    WGMMA_OPCODE,
    global_atomics,
    known,
    metric,
    opcodes,
    operand_bytes,
    spill_traffic,
    stall_shares,
)
from bsprof.fmt import fmt_bytes

# the share of a unit's peak a launch reaches when that unit binds it: (slow end, fast end) of the interval,
# over the H100 corpus's launches (tests/data/corpus, >= 20 us) that the verdict finds bound by that unit
# (test_ncu_price.test_efficiency_bands_come_from_the_corpus). L2 (18 launches), L1 (6), a pipe (7) and the
# issue slots (9): the whole range. Percentiles of so few launches drop the one or two that show how far the
# unit reaches, and the afters of the checked pairs reached those ends (an XU pipe at 99%, an L2 at 97%).
# DRAM: the 10th and 90th percentiles over every corpus launch (>= 5 us) whose busiest unit is DRAM at >= 50%
# of its peak (below that nothing binds), 21 launches: the launch a DRAM lever makes is any kernel that ends
# on DRAM (a gather, a privatized scatter, a short reduction), not only one tuned to stream it. The tensor
# pipe: TFLOP/s over the datasheet peak of the corpus's cuBLAS GEMMs (57-84%: the clock drops to ~1.6 GHz
# under the tensor load).
EFFICIENCY: dict[str, tuple[float, float]] = {
    "dram": (0.62, 0.90),
    "l2": (0.69, 0.98),
    "l1": (0.66, 0.96),
    "pipe": (0.62, 0.99),
    "issue": (0.71, 0.85),
    "tensor": (0.60, 0.86),
}
# a launch's fixed cost (no real work: launch, dispatch, teardown), us: the shortest and longest of the
# corpus's launches that move under 1 MB and last under 5 us apart from GEMM and FP8 kernels (sort's
# second pass 2.3, cumsum 2.5, adamw's 2.9, add of 256 floats 3.1, an L2-resident add 3.9, sum of 2,048
# floats 4.0; test_ncu_price.test_fixed_cost_comes_from_the_corpus)
LAUNCH_FIXED_US = (2.3, 4.0)
# a privatized reduction's per-CTA combine (a shared-memory histogram, a register sum per destination), in SM
# cycles an element (one lane of the atomics it replaces): the report of the atomics holds nothing of it, so
# the slow end takes the slowest combine of the checked privatizations (tests/data/price: Triton's register
# sums at 16, 32 and 64 destinations 1.2-5.6; torch's weighted bincount 3.4-3.7, and 7.4 at 2048 destinations) and the fast
# end leaves it free (test_ncu_price.test_combine_cycles_come_from_the_checked_privatizations)
COMBINE_CYCLES = 7.4
# the memory units: what a coalescing rewrite is left with when its instructions do not bind
MEMORY_UNITS = ("dram", "l2", "l1")
# a kernel whose name says it is a matrix product: the FMA pipe's line prices the tensor pipe at TF32
GEMM_NAME = re.compile(r"gemm|sgemm|matmul|xmma|cutlass|_mm_|nvjet", re.I)
# opcodes the FMA pipe executes (FP32 and FP16x2 arithmetic, integer multiply-add)
FMA_PIPE_OPCODE = re.compile(r"^(FFMA|FMUL|FADD|HFMA2|HMUL2|HADD2|IMAD)")
# ncu's rules that speak of each lever, first present wins (advice id prefix -> rule identifiers)
NCU_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("memory-bound/l1/uncoalesced", ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern")),
    ("memory-bound/l2/uncoalesced", ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern")),
    ("memory-bound/l2", ("MemoryCacheAccessPattern", "UncoalescedGlobalAccess")),
    ("memory-bound/l1", ("MemoryCacheAccessPattern", "SharedMemoryConflicts", "UncoalescedGlobalAccess")),
    ("memory-bound/dram", ("MemoryL2Compression",)),
    ("global-atomics", ("WorkloadImbalance", "CPIStall")),
    ("compute-bound/fma", ("FPInstructions", "HighPipeUtilization")),
    ("compute-bound/xu", ("FPInstructions", "HighPipeUtilization")),
    ("compute-bound", ("HighPipeUtilization", "IssueSlotUtilization")),
    ("under-filled", ("LaunchConfiguration",)),
    ("launch-bound", ("LaunchConfiguration",)),
    ("grid-limited", ("AchievedOccupancy", "LaunchConfiguration")),
    ("low-occupancy", ("AchievedOccupancy", "TheoreticalOccupancy")),
    ("latency-bound", ("CPIStall", "IssueSlotUtilization")),
    ("spill-traffic", ("MemoryCacheAccessPattern",)),
    ("register-spills", ("MemoryCacheAccessPattern",)),
    ("register-loads", ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern")),
    ("mma-sync", ("HighPipeUtilization",)),
    ("smem-bank-conflicts", ("SharedMemoryConflicts", "UncoalescedSharedAccess")),
)


NO_RULES = "(no rule results)"  # a --set triage report runs no rules
# the price of any change that keeps the launch's work (its bytes, its instructions): each unit at the share
# of its peak a binding unit reaches (:func:`headroom`)
HEADROOM = "headroom"


@dataclass
class Price:
    """What following one advice line buys: the projected duration (us) and the speedup, each an
    interval (low, high); the limiter relieved and the one that binds then. ``bounded`` False: the
    report cannot bound it, ``why`` says what it lacks."""

    advice: str
    bounded: bool
    low: float = math.nan  # speedup at the slow end
    high: float = math.nan
    t_low_us: float = math.nan  # projected duration, fast end
    t_high_us: float = math.nan
    relieves: str = ""
    binds: str = ""
    why: str = ""
    ncu_rule: str = ""
    ncu_pct: float = math.nan  # ncu's estimated speedup: the share of the duration removed (%)
    # the units' times summed once the line is followed (us): two lines whose one next limiter gives
    # them one price are ordered by the work each leaves
    work_left_us: float = math.nan

    @property
    def mid(self) -> float:
        return math.sqrt(self.low * self.high) if self.bounded else math.nan

    @property
    def ncu_speedup(self) -> float:
        return 1.0 / (1.0 - min(self.ncu_pct, 99.9) / 100.0) if known(self.ncu_pct) else math.nan

    def text(self) -> str:
        ncu = (
            f"; ncu {self.ncu_pct:.0f}% → {_x(self.ncu_speedup)}x"
            if known(self.ncu_pct)
            else "; ncu: no rules run"
            if self.ncu_rule == NO_RULES
            else "; ncu: none"
        )
        if not self.bounded:
            return f"cannot bound: {self.why}{ncu}"
        if self.advice == HEADROOM:
            return f"{_x(self.low)}-{_x(self.high)}x ({self.relieves} → {self.binds})"
        rng = _x(self.low) if _x(self.low) == _x(self.high) else f"{_x(self.low)}-{_x(self.high)}"
        return f"{rng}x ({self.relieves} → {self.binds}){ncu}"

    def as_dict(self) -> dict:
        d = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}
        d["mid"] = None if math.isnan(self.mid) else self.mid
        d["ncu_speedup"] = None if math.isnan(self.ncu_speedup) else self.ncu_speedup
        d["text"] = self.text()
        return d


def _count(n: float) -> str:
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}K" if n >= 1e3 else f"{n:.0f}"


def _x(s: float) -> str:
    return f"{s:.2g}" if s < 10 else f"{s:.0f}"


# --- the launch's units ---------------------------------------------------------------------------


def duration_us(row) -> float:
    return metric(row, "duration_ns") / 1e3


def active_share(row) -> float:
    act, el = metric(row, "sm_active_cycles_avg"), metric(row, "sm_elapsed_cycles_avg")
    return min(1.0, act / el) if known(act) and known(el) and el > 0 else 1.0


def fixed_us(row) -> float:
    """The launch's fixed cost: its duration with no SM active (NaN without the busiest SM's cycles)."""
    mx, el = metric(row, "sm_active_cycles_max"), metric(row, "sm_elapsed_cycles_avg")
    if not (known(mx) and known(el) and el > 0):
        return math.nan
    return duration_us(row) * max(0.0, 1.0 - mx / el)


def fixed_range(row) -> tuple[float, float]:
    """The fixed cost of the launch the advice makes: a short launch's (LAUNCH_FIXED_US). The launch's own
    no-SM-active time is no guide: a long launch's ramp hides most of it (0.8 us of the 555 us transpose),
    a one-CTA launch's tail adds to it (8 us of the 1.4 ms one-CTA sum)."""
    return LAUNCH_FIXED_US


def unit_times(row) -> dict[str, float]:
    """Unit -> the time (us) the launch's work takes on it at 100% of its peak."""
    t, s = duration_us(row), active_share(row)
    out = {}
    for unit, col in (("dram", "dram_throughput_pct"), ("l2", "l2_throughput_pct"), ("l1", "l1_throughput_pct")):
        if known(v := metric(row, col)):
            out[unit] = t * v / 100.0
    if any(WGMMA_OPCODE.match(op) for op in opcodes(row)):
        out.pop("l1", None)  # wgmma reads its operands from shared memory: not a limit (verdict.busiest_memory)
    keys = row.keys() if hasattr(row, "keys") else []
    for k in keys:
        if (
            k.startswith("pipe_")
            and k.endswith("_pct")
            and k not in ("pipe_fmaheavy_pct",)
            and known(v := metric(row, k))
        ):
            out[k[len("pipe_") : -len("_pct")]] = t * s * v / 100.0
    if known(v := metric(row, "issue_active_pct")):
        out["issue"] = t * s * v / 100.0
    return out


def _eff(unit: str) -> tuple[float, float]:
    if unit in EFFICIENCY:
        return EFFICIENCY[unit]
    return EFFICIENCY["pipe"]


def _label(unit: str) -> str:
    return {"dram": "DRAM", "l2": "L2", "l1": "L1", "issue": "issue"}.get(
        unit, unit.upper() if len(unit) <= 3 else unit
    )


def project(
    row,
    times: dict[str, float],
    fixed: tuple[float, float],
    floor: tuple[float, float] | None = None,
    floor_name: str = "latency",
) -> tuple[float, float, str]:
    """(fast, slow) projected duration (us) and what binds: the fixed cost plus the largest unit time
    at its efficiency; ``floor``: a time the launch's own structure needs whatever the units (fast, slow)."""
    fast = max((v / _eff(u)[1] for u, v in times.items()), default=0.0)
    slow = max((v / _eff(u)[0] for u, v in times.items()), default=0.0)
    binds = max(times, key=lambda u: times[u] / math.sqrt(_eff(u)[0] * _eff(u)[1]), default="")
    text = f"{_label(binds)}-bound" if binds else ""
    if floor and floor[1] > slow:
        text = f"{floor_name}-bound" if floor[0] >= fast else f"{text} or {floor_name}"
    if floor:
        fast, slow = max(fast, floor[0]), max(slow, floor[1])
    return fixed[0] + fast, fixed[1] + slow, text


def _priced(
    pid: str,
    row,
    times: dict[str, float],
    relieves: str,
    *,
    floor=None,
    floor_name="latency",
    note: str = "",
    fixed=None,
) -> Price:
    t = duration_us(row)
    fast, slow, binds = project(row, times, fixed or fixed_range(row), floor, floor_name)
    if note:
        binds = f"{binds} {note}".strip()
    return replace(_speedup(pid, t, fast, slow, relieves, binds), work_left_us=sum(times.values()))


def _speedup(pid: str, t: float, fast: float, slow: float, relieves: str, binds: str) -> Price:
    """A bounded price: ``t`` us now, ``fast``..``slow`` us once the line is followed."""
    return Price(pid, True, low=t / slow, high=t / fast, t_low_us=fast, t_high_us=slow, relieves=relieves, binds=binds)


def _cannot(pid: str, why: str) -> Price:
    return Price(pid, False, why=why)


def _pct(row, col: str) -> str:
    v = metric(row, col)
    return f"{v:.0f}%" if known(v) else "?"


# --- what each advice line changes ----------------------------------------------------------------


def uncoalesced_waste(rules: list[dict] | None) -> tuple[float, float]:
    """(sectors beyond what the requests need, sectors moved) from ncu's UncoalescedGlobalAccess finding
    (global memory; local memory's pattern is the spills')."""
    for r in rules or []:
        if r.get("rule") != "UncoalescedGlobalAccess":
            continue
        if m := re.search(r"(\d+) excessive sectors \((\d+)% of the total (\d+) sectors\)", r.get("message") or ""):
            return float(m.group(1)), float(m.group(3))
    return math.nan, math.nan


def _coalesce(pid, row, rules, times):
    excess, total = uncoalesced_waste(rules)
    if not (known(excess) and total > 0):
        return _cannot(pid, "no UncoalescedGlobalAccess result (SourceCounters)")
    keep = 1.0 - excess / total
    need = 32.0 * (total - excess)
    new = dict(times)
    if "l1" in new:
        new["l1"] *= keep
    dram = metric(row, "dram_bytes_read") + metric(row, "dram_bytes_write")
    dram_new = min(dram, need) if known(dram) else need
    if "dram" in new and known(dram) and dram > 0:
        new["dram"] *= dram_new / dram
    # L2 carries the bytes the requests need instead of the sectors moved, at the rate it ran at
    l2 = 32.0 * metric(row, "l2_sectors")
    if "l2" in new:
        new["l2"] *= min(1.0, need / l2) if known(l2) and l2 > 0 else keep
    unit = "l2" if "/l2/" in pid else "l1"
    relieves = f"{_label(unit)} {_pct(row, f'{unit}_throughput_pct')}"
    note = f"at {fmt_bytes(min(dram, need) if known(dram) else need)}"
    p = _priced(pid, row, new, relieves, note=note)
    memory = {u: v for u, v in new.items() if u in MEMORY_UNITS}
    if memory and max(new, key=new.get) not in MEMORY_UNITS:
        # the launch's own instructions would bind it once coalesced, but a coalescing rewrite (a tile staged
        # through shared memory, wider loads) is another kernel whose instructions the report does not hold:
        # the slow end keeps this one's, the fast end is the memory's alone
        q = _priced(pid, row, memory, relieves, note=note)
        p = _speedup(pid, duration_us(row), q.t_low_us, p.t_high_us, relieves, f"{p.binds} or memory-bound")
    return p


def _relieve(pid, row, times, unit, *, to: float = 0.0, note=""):
    new = dict(times)
    if unit in new:
        new[unit] = to
    rel = (
        f"{_label(unit)} {_pct(row, f'{unit}_throughput_pct' if unit in ('dram', 'l2', 'l1') else f'pipe_{unit}_pct')}"
    )
    if unit == "issue":
        rel = f"issue {_pct(row, 'issue_active_pct')}"
    return _priced(pid, row, new, rel, note=note)


def _l2_reuse(pid, row, rules, times):
    dram = metric(row, "dram_bytes_read") + metric(row, "dram_bytes_write")
    l2 = 32.0 * metric(row, "l2_sectors")
    if not (known(dram) and known(l2) and l2 > 0):
        return _relieve(pid, row, times, "l2")
    # reuse in shared memory / locality: L2 passes no more than the DRAM stream
    return _relieve(pid, row, times, "l2", to=times.get("l2", 0.0) * min(1.0, dram / l2))


def flops_fp32(row) -> float:
    ops = opcodes(row)
    return 64.0 * ops.get("FFMA", 0.0) + 32.0 * (ops.get("FMUL", 0.0) + ops.get("FADD", 0.0))


def _peak(row, precision: str) -> float:
    from bsprof.analyzers.ncu.peaks import peak_tflops

    dev = row.get("device") if hasattr(row, "get") else None
    return peak_tflops(dev, precision) if isinstance(dev, str) else None


def _tensor_at_peak(pid, row, times, flops: float, precision: str, relieves: str):
    peak = _peak(row, precision)
    if not peak or not known(flops) or flops <= 0:
        return _cannot(pid, f"no FLOP count, or no {precision} peak for the device")
    # another kernel (the library's tensor-core one): its tiles set its L1/L2 traffic and instructions, so
    # only the DRAM bytes (operands and output) carry over
    new = {u: v for u, v in times.items() if u == "dram"}
    new["tensor"] = flops / (peak * 1e6)
    return _priced(pid, row, new, relieves, note=f"at {precision} {peak:.0f} TFLOP/s")


def _fma_line(pid, row, rules, times):
    name = " ".join(str(row.get(k) or "") for k in ("kernel", "kernel_demangled")) if hasattr(row, "get") else ""
    if GEMM_NAME.search(name) and flops_fp32(row) > 0:
        # a tensor-core GEMM's tiles set its L1/L2 traffic, not the FFMA kernel's: DRAM stays
        return _tensor_at_peak(pid, row, times, flops_fp32(row), "tf32", f"FMA {_pct(row, 'pipe_fma_pct')}")
    return _relieve(pid, row, times, "fma")


def _fma_pipe_insts(ops: dict[str, float]) -> float:
    return sum(n for op, n in ops.items() if FMA_PIPE_OPCODE.match(op))


def _transcendentals(pid, row, times, *, remove_mufu: bool):
    """exp2 with the scale folded in: the FP32 instructions of each MUFU's range reduction but one go;
    fewer transcendentals: each MUFU goes and what it costs becomes one FP32 instruction (a multiply)."""
    ops = opcodes(row)
    mufu, fma_insts, total = ops.get("MUFU", 0.0), _fma_pipe_insts(ops), sum(ops.values())
    # an accurate exp's range reduction is FFMAs, an FMUL and an FADD (x minus its rounded value)
    fp32 = ops.get("FFMA", 0.0) + ops.get("FMUL", 0.0) + ops.get("FADD", 0.0)
    if not mufu or not fma_insts:
        return _cannot(pid, "no MUFU or FP32 instructions in the report's opcode table")
    per = fp32 / mufu
    removed_fp32 = max(0.0, per - 1.0) * mufu
    new = dict(times)
    if "fma" in new:
        new["fma"] *= max(0.0, 1.0 - removed_fp32 / fma_insts)
    new.pop("fmaheavy", None)
    removed = removed_fp32 + (mufu if remove_mufu else 0.0)
    if remove_mufu and "xu" in new:
        new["xu"] = 0.0
    if "issue" in new and total:
        new["issue"] *= max(0.0, 1.0 - removed / total)
    rel = f"XU {_pct(row, 'pipe_xu_pct')}" if remove_mufu else f"{per:.1f} FP32 per MUFU"
    return _priced(pid, row, new, rel)


def _latency_floor(row, factor: float) -> tuple[float, float]:
    """The busy time (SMs active) scaled by ``factor``: what the launch's latency needs then."""
    f = fixed_us(row)
    busy = duration_us(row) - (f if known(f) else 0.0)
    return busy * factor, busy * factor


def _stall_line(pid, row, times, stall: str | None):
    shares = stall_shares(row)
    top = stall if stall in shares else next(iter(shares), None)
    if not top:
        return _cannot(pid, "the report has no warp stall reasons (WarpStateStats)")
    s = shares[top]
    # the fast end hides the stall whole; the slow end hides none of it: more independent work per warp
    # (loads in flight, unrolling) is the compiler's to keep apart, and it may serialize it again, where
    # more warps (grid-limited, low-occupancy) are scheduled apart by the hardware
    fast, _ = _latency_floor(row, 1.0 - s)
    _, slow = _latency_floor(row, 1.0)
    return _priced(pid, row, times, f"{top} {100 * s:.0f}% of stalls", floor=(fast, slow))


def _warps_line(pid, row, times, target_pct: float | None):
    occ, theo = metric(row, "achieved_occupancy_pct"), metric(row, "theoretical_occupancy_pct")
    target = target_pct if target_pct is not None else theo
    if not (known(occ) and known(target) and occ > 0):
        return _cannot(pid, "the report lacks achieved or theoretical occupancy")
    return _priced(pid, row, times, f"{occ:.0f}% of warp slots", floor=_latency_floor(row, min(1.0, occ / target)))


def _under_filled(pid, row, times):
    sms = metric(row, "sm_count")
    act, mx = metric(row, "sm_active_cycles_avg"), metric(row, "sm_active_cycles_max")
    if not (known(sms) and known(act) and known(mx) and mx > 0):
        return _cannot(pid, "the report lacks SM active cycles")
    # the work in SMs at the busiest SM's pace, spread over all of them: the slow end keeps each SM's
    # pace as it is now (a CTA more per SM may hide no latency: the narrow launch's occupancy is no guide
    # to the wide one's); the fast end hides all of it, down to the units' floor
    f = fixed_us(row)
    busy = duration_us(row) - (f if known(f) else 0.0)
    spread = busy * (act / mx)
    return _priced(
        pid,
        row,
        times,
        f"SM-time idle {100 * (1 - active_share(row)):.0f}%",
        floor=(0.0, spread),
        floor_name="per-SM pace",
    )


def _atomics(pid, row, times):
    n, _ = global_atomics(row)
    if not n:
        return _cannot(pid, "no global atomics in the report's opcode table")
    # the atomics leave L2: what remains of it is the DRAM stream passing through
    dram = metric(row, "dram_bytes_read") + metric(row, "dram_bytes_write")
    l2 = 32.0 * metric(row, "l2_sectors")
    new = {u: v for u, v in times.items() if u == "dram"}
    if "l2" in times and known(dram) and known(l2) and l2 > 0:
        new["l2"] = times["l2"] * min(1.0, dram / l2)
    # the per-CTA combine (a shared-memory or register sum per destination) is the new kernel's work: the
    # fast end leaves it free, the slow end spreads it over the SMs at COMBINE_CYCLES an element
    stream = _priced(pid, row, new, f"{_count(n)} atomics")
    combine = combine_us(row, 32.0 * n)
    if not known(combine):
        stream.binds = f"{stream.binds} with a free combine"
        return stream
    slow = max(stream.t_high_us, LAUNCH_FIXED_US[1] + combine)
    binds = f"{stream.binds} or the combine" if slow > stream.t_high_us else stream.binds
    return replace(
        _speedup(pid, duration_us(row), stream.t_low_us, slow, stream.relieves, binds),
        work_left_us=stream.work_left_us,
    )


def combine_us(row, elements: float) -> float:
    """A privatized reduction's combine of ``elements`` values at COMBINE_CYCLES each, spread over the SMs
    at the launch's SM clock (NaN without the SM count or clock)."""
    sms, clk = metric(row, "sm_count"), metric(row, "sm_clock_hz")
    if not (known(sms) and known(clk) and sms > 0 and clk > 0):
        return math.nan
    return elements * COMBINE_CYCLES / (sms * clk) * 1e6


def _spills(pid, row, times):
    local, share = spill_traffic(row)
    if not (known(local) and local > 0):
        return _cannot(pid, "the report lacks local-memory sectors")
    dram = metric(row, "dram_bytes_read") + metric(row, "dram_bytes_write")
    # the fast end: every local sector went to DRAM; the slow end: only the share the SMs' L2 reads missed
    # (a spill that hit L2 never reached DRAM, so removing it leaves the DRAM stream as it was)
    miss = metric(row, "l2_read_miss_sectors_sm") / metric(row, "l2_read_sectors_sm")
    ends = []
    for to_dram in (local, local * (min(1.0, miss) if known(miss) else 1.0)):
        keep = max(0.0, dram - to_dram) / dram if known(dram) and dram > 0 else 1.0 - (share if known(share) else 0.0)
        new = dict(times)
        # the spills' DRAM bytes go, and L2 (which counts the DRAM stream passing through) with them
        for lvl in ("dram", "l2"):
            if lvl in new:
                new[lvl] *= keep
        if "l1" in new:
            new["l1"] *= max(0.0, 1.0 - share) if known(share) else 1.0
        ends.append(
            _priced(pid, row, new, f"{fmt_bytes(local)} of spills", note=f"at {fmt_bytes(max(0.0, dram - to_dram))}")
        )
    fast, slow = ends
    return _speedup(pid, duration_us(row), fast.t_low_us, slow.t_high_us, fast.relieves, slow.binds)


def _smem_conflicts(pid, row, times):
    conf, wav = metric(row, "smem_bank_conflicts"), metric(row, "smem_wavefronts")
    if not (known(conf) and known(wav) and wav > 0):
        return _cannot(pid, "the report lacks shared-memory wavefronts")
    new = dict(times)
    if "l1" in new:
        new["l1"] *= 1.0 - conf / wav
    return _priced(pid, row, new, f"{100 * conf / wav:.0f}% conflicts")


def _staged_loads(pid, row, rules, times):
    """Padding lets the library take its TMA + wgmma kernel: the tensor pipe at the precision's wgmma peak,
    the register-path loads (L1) gone, L2 carrying the sectors the requests need."""
    prec = row.get("precision") if hasattr(row, "get") else None
    return _tensor_at_peak(
        pid, row, times, metric(row, "mma_flops"), prec or "?", f"L1 {_pct(row, 'l1_throughput_pct')}"
    )


def _mma_sync(pid, row, times):
    """A wgmma kernel for the same operands: the tensor pipe at the wgmma peak, the loads as they are."""
    prec = row.get("precision") if hasattr(row, "get") else None
    peak = _peak(row, prec) if prec else None
    flops = metric(row, "mma_flops")
    if not peak or not known(flops):
        return _cannot(pid, "no FLOP count or tensor peak")
    new = dict(times)
    new["tensor"] = flops / (peak * 1e6)
    return _priced(pid, row, new, f"mma.sync, tensor {_pct(row, 'tensor_pipe_pct')}")


def _refetch(pid, row, times):
    sm_read = 32.0 * metric(row, "l2_read_sectors_sm")
    ops, _ = operand_bytes(row)
    if not (known(sm_read) and known(ops) and sm_read > 0):
        return _cannot(pid, "the report lacks the L2 bytes the SMs read or the operands' bytes")
    new = dict(times)
    if "l2" in new:
        new["l2"] *= min(1.0, ops / sm_read)
    return _priced(pid, row, new, f"L2 {_pct(row, 'l2_throughput_pct')}")


def _tensor_near_peak(pid, row, times):
    if pid.startswith("compute-bound/tensor/gemm") or pid.endswith("/dmma"):
        return _cannot(pid, "the MMAs set the time")
    return _priced(
        pid, row, {u: v for u, v in times.items() if u == "tensor"}, f"tensor {_pct(row, 'tensor_pipe_pct')}"
    )


# why a line has no price in one launch's report (kept short: it is shown under the line)
FUSION_WHY = "the fused bytes are not in one launch"
BATCH_WHY = "the batch is not in one launch"


def price_line(pid: str, v, row, rules: list[dict] | None = None) -> Price:
    """The price of the advice line ``pid`` (advice.entry_id) for verdict ``v`` of ``row``."""
    times = unit_times(row)
    cls, unit, kind = (pid.split("/") + ["", ""])[:3]
    if not times or not known(duration_us(row)):
        p = _cannot(pid, "the report lacks the duration or every unit's throughput")
    elif kind == "uncoalesced":
        p = _coalesce(pid, row, rules, times)
    elif cls == "memory-bound" and unit == "l2":
        p = _l2_reuse(pid, row, rules, times)
    elif cls == "memory-bound" and unit == "l1":
        p = _relieve(pid, row, times, "l1")
    elif cls == "memory-bound":
        p = _cannot(pid, FUSION_WHY)
    elif cls == "compute-bound" and unit == "fma":
        p = (
            _transcendentals(pid, row, times, remove_mufu=False)
            if kind == "exp-range-reduced"
            else _fma_line(pid, row, rules, times)
        )
    elif cls == "compute-bound" and unit == "xu":
        p = _transcendentals(pid, row, times, remove_mufu=kind != "exp-range-reduced")
    elif cls == "compute-bound" and unit == "tensor":
        p = _tensor_near_peak(pid, row, times)
    elif cls == "compute-bound":
        p = _relieve(pid, row, times, v.unit if unit == "*" else unit)
    elif cls == "latency-bound":
        p = _stall_line(pid, row, times, None if unit == "*" else unit)
    elif cls == "grid-limited":
        p = _warps_line(pid, row, times, None)
    elif cls == "low-occupancy":
        p = _warps_line(pid, row, times, 100.0)
    elif cls == "under-filled" and unit == "launch":
        p = _cannot(pid, BATCH_WHY)
    elif cls == "under-filled":
        p = _under_filled(pid, row, times)
    elif cls == "launch-bound":
        p = _cannot(pid, BATCH_WHY)
    elif cls == "global-atomics":
        p = _atomics(pid, row, times)
    elif cls in ("spill-traffic", "register-spills"):
        p = _spills(pid, row, times)
    elif cls == "smem-bank-conflicts":
        p = _smem_conflicts(pid, row, times)
    elif cls == "register-loads":
        p = _staged_loads(pid, row, rules, times)
    elif cls == "mma-sync" and unit != "dram":
        p = _mma_sync(pid, row, times)
    elif cls in ("l2-refetch", "gemm-l2-reuse"):
        p = _refetch(pid, row, times)
    else:
        p = _cannot(pid, "no model: the line names no unit time the report gives")
    p.ncu_rule, p.ncu_pct = ncu_estimate(pid, rules)
    return p


def ncu_estimate(pid: str, rules: list[dict] | None) -> tuple[str, float]:
    """(rule, estimated speedup %) of ncu's rule on the same lever (:data:`NCU_RULES`); ("", NaN) when
    the report has no rule results (a --set triage report runs none)."""
    if not rules:
        return NO_RULES, math.nan
    for prefix, names in NCU_RULES:
        if not pid.startswith(prefix):
            continue
        for name in names:
            for r in rules:
                if r.get("rule") == name and r.get("speedup_pct") is not None:
                    return name, float(r["speedup_pct"])
        return "/".join(names), math.nan
    return "", math.nan


def price_all(v, row, ids: list[str], rules: list[dict] | None = None) -> list[Price]:
    return [price_line(pid, v, row, rules) for pid in ids]


def headroom(rows: list) -> Price:
    """What a change that keeps the work of ``rows`` (one launch, or a sequence's launches) buys: the
    launches with their units at the two ends of their bands (:data:`EFFICIENCY`). It prices the changes no
    line names (more warps, more loads in flight, another schedule), and bounds every in-kernel change of a
    launch whose binding unit is already near its reach. A band's share is of the whole duration, the
    fixed cost inside it: the fast end is the binding unit's time at its band's fast end or the shortest
    fixed cost, whichever is longer. The interval is symmetric about 1x (a change that keeps the work may
    lose as much as it could gain: another schedule, fewer loads in flight) down to the unit's band: a
    launch far from its reach loses no more than its binding unit's slow end over its fast end."""
    rows = list(rows)
    t = sum(duration_us(r) for r in rows)
    fast, parts = 0.0, []
    for r in rows:
        times = unit_times(r)
        if not times or not known(duration_us(r)):
            return _cannot(HEADROOM, "the report lacks the duration or every unit's throughput")
        unit = max(times, key=lambda u: times[u] / _eff(u)[1])
        work = times[unit] / _eff(unit)[1]
        fast += max(LAUNCH_FIXED_US[0], work)
        share = 100.0 * times[unit] / duration_us(r)
        parts.append(
            (
                work,
                f"{_label(unit)} {share:.0f}% of peak" if share >= 1 else f"{_label(unit)} <1% of peak",
                f"{100 * _eff(unit)[1]:.0f}%",
                unit,
            )
        )
    work, relieves, binds, unit = max(parts)
    if work < LAUNCH_FIXED_US[0] * len(rows):
        # the launches are mostly their fixed cost: that is what stays
        binds = f"{LAUNCH_FIXED_US[0]:.1f} us fixed cost a launch"
    # what it could lose, no more than its unit's band spans (slow end over fast end)
    low = min(1.0, max(fast / t, _eff(unit)[0] / _eff(unit)[1]))
    return Price(
        HEADROOM,
        True,
        low=low,
        high=max(1.0, t / fast),
        t_low_us=min(t, fast),
        t_high_us=t / low,
        relieves=relieves,
        binds=binds,
    )


def order_key(p: Price) -> tuple[bool, float, float]:
    """Sorts the largest priced speedup (interval midpoint) first; at one price the line that leaves
    the least work; unbounded lines last."""
    left = p.work_left_us if known(p.work_left_us) else math.inf
    return (not p.bounded, -(p.mid if p.bounded else 0.0), left)


def order_by_price(prices: list[Price]) -> list[int]:
    """Indices of the lines in price order (``order_key``), unbounded lines last in their own order."""
    return sorted(range(len(prices)), key=lambda i: order_key(prices[i]))


# --- a sequence of launches: fusion and batching -------------------------------------------------


def price_sequence(rows: list) -> dict[str, Price]:
    """Prices of fusing a sequence of launches (one report, in launch order) into one launch:

    * ``memory-bound/dram/*``: the fused launch reads what the first launch reads from DRAM and writes
      what the last one writes; its arithmetic is the launches' together;
    * ``launch-bound/*/*``: one fixed cost instead of one per launch; the work of all of them spread over
      the SMs (the SM-time of all, or the longest single launch's busiest SM, whichever is longer)."""
    rows = list(rows)
    if len(rows) < 2:
        return {}
    total = sum(duration_us(r) for r in rows)
    if not (known(total) and total > 0):
        # a launch without its duration leaves nothing to divide: say so rather than price NaN
        why = "a launch of the sequence has no duration in the report"
        return {key: Price(advice=key, bounded=False, why=why) for key in ("memory-bound/dram/*", "launch-bound/*/*")}
    fixed = fixed_range(rows[0])
    out = {}
    rates = [
        (metric(r, "dram_bytes_read") + metric(r, "dram_bytes_write"))
        / (duration_us(r) * metric(r, "dram_throughput_pct") / 100)
        for r in rows
        if metric(r, "dram_throughput_pct") > 1.0
    ]
    rates = [x for x in rates if known(x) and x > 0]
    # what the first launch reads from DRAM and the last writes to it (a short stream's last writes stay in
    # L2 when it ends, in the fused launch as in the last one)
    first_read, last_write = metric(rows[0], "dram_bytes_read"), metric(rows[-1], "dram_bytes_write")
    if rates and known(first_read) and known(last_write):
        rate = sorted(rates)[len(rates) // 2]  # bytes per us at the DRAM peak
        nbytes = first_read + last_write
        times = {"dram": nbytes / rate}
        for unit in ("fma", "xu", "alu"):
            times[unit] = sum(unit_times(r).get(unit, 0.0) for r in rows)
        # the slow end keeps every launch's arithmetic; the fast end the DRAM stream alone: the fused
        # launch is another kernel, and each launch's index math, reduction tree and setup are not repeated
        # there (as a coalescing rewrite's instructions are its own)
        _, slow, binds = _project_plain(times, fixed)
        fast, _, _ = _project_plain({"dram": times["dram"]}, fixed)
        if binds != "DRAM-bound":
            binds = f"{binds} or DRAM-bound"
        out["memory-bound/dram/*"] = _speedup(
            "memory-bound/dram/*", total, fast, slow, f"{len(rows)} launches", f"{binds} at {fmt_bytes(nbytes)}"
        )
    busy_max, sm_time = 0.0, 0.0
    for r in rows:
        f = fixed_us(r)
        mx, el, act = (
            metric(r, "sm_active_cycles_max"),
            metric(r, "sm_elapsed_cycles_avg"),
            metric(r, "sm_active_cycles_avg"),
        )
        if not (known(f) and known(mx) and known(el) and el > 0):
            break
        busy_max = max(busy_max, duration_us(r) * mx / el)
        sm_time += duration_us(r) * act / el
    else:
        busy = max(busy_max, sm_time)
        fast, slow = fixed[0] + busy, fixed[1] + busy
        # GPU time only (the line's text says so): the host's time to issue each launch is not in a
        # report, and where it exceeds a launch's duration the launches wait on it
        out["launch-bound/*/*"] = _speedup(
            "launch-bound/*/*", total, fast, slow, f"{len(rows)} fixed costs", f"one launch, {busy:.1f} us of SM work"
        )
    return out


def price_sequence_with_ncu(rows: list, launch_prices: list[list[Price]]) -> dict[str, Price]:
    """:func:`price_sequence` with ncu's estimate beside each price: that of the first launch whose own
    line on the same lever carries one (``launch_prices``: each launch's :func:`price_all`)."""
    out = price_sequence(rows)
    for pid, p in out.items():
        p.ncu_rule, p.ncu_pct = next(
            (
                (q.ncu_rule, q.ncu_pct)
                for prices in launch_prices
                for q in prices
                if q.advice == pid and known(q.ncu_pct)
            ),
            ("", math.nan),
        )
    return out


def _project_plain(times: dict[str, float], fixed: tuple[float, float]) -> tuple[float, float, str]:
    fast = max(v / _eff(u)[1] for u, v in times.items())
    slow = max(v / _eff(u)[0] for u, v in times.items())
    binds = max(times, key=lambda u: times[u])
    return fixed[0] + fast, fixed[1] + slow, f"{_label(binds)}-bound"
