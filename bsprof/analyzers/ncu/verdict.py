"""Bottleneck verdict for one launch: a class, the numbers and thresholds that decided it, and the
candidate optimizations the class points to.

Like ncu's own ``sections/*.py`` rules, each rule is a tiny function over the extracted metrics; all
thresholds live in :data:`THRESHOLDS`. Classes, checked in order:

(SOL: ncu's sm__throughput / gpu__compute_memory_throughput; where a triage report lacks them, compute
SOL = max(tensor pipe elapsed, issue slots) and memory SOL = max(DRAM, L2, L1 throughput).)

1. memory-bound        memory SOL >= sol_bound_pct and >= compute SOL
2. compute-bound       compute SOL >= sol_bound_pct (near-peak flag when the tensor pipe or the
                       TFLOP/s is >= near_peak_pct)
3. occupancy-limited   neither SOL high, and the grid leaves SMs idle (waves < min_waves) or
                       achieved occupancy < low_occupancy_pct with < min_eligible_warps ready per cycle
4. latency/sync-bound  neither SOL high; "sync" when barrier/membar/sleep stalls are >= sync_stall_share
                       of the cycles between issues, else "latency" (named by the top stall reason)

Flags added on top of the class: smem bank conflicts (-> swizzle), register spills.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# One table. Values from Nsight Compute's guidance (SOL >= 60 % is "the" limiter, >= 80 % is
# "high throughput") and the optimization roadmap our users follow (bank conflicts > 10 % -> swizzle).
THRESHOLDS: dict[str, float] = {
    "sol_bound_pct": 60.0,        # a unit at >= this % of its speed of light bounds the kernel
    "near_peak_pct": 80.0,        # tensor pipe busy (or % of peak TFLOP/s) at which a GEMM is "near peak"
    "sync_stall_share": 0.35,     # barrier+membar+sleeping share of warp cycles per issued instruction
    "low_occupancy_pct": 10.0,    # achieved occupancy below this counts as low
    "min_eligible_warps": 0.5,    # eligible warps per scheduler cycle below this: schedulers starve
    "min_waves": 0.5,             # CTAs per SM slot: below this, half the GPU is idle
    "smem_conflict_pct": 10.0,    # bank conflicts as % of shared wavefronts
    "large_k": 4096.0,            # split-K is a candidate above this K
}

SYNC_REASONS = ("barrier", "membar", "sleeping")

CANDIDATES: dict[str, list[str]] = {
    "memory-bound": [
        "epilogue subtile tuning (more, smaller epilogue subtiles so stores overlap the next tile)",
        "TMA prefetch (issue the next tile's loads / descriptor prefetch earlier)",
        "cache hints (L2 eviction priority / persistence for the operand reused across CTAs)",
    ],
    "compute-bound": [
        "trim non-MMA instructions in the K-loop (see `bsprof sass` for the per-iteration budget)",
        "larger MMA tile / 2-CTA MMA so each issued MMA does more work",
    ],
    "near-peak": [
        "fusion (bias, activation, output quantization in the epilogue)",
        "split-K when K is large",
        "cluster shape tuning (multicast reuse vs. scheduling granularity)",
    ],
    "sync": [
        "warp-role rebalancing (producer / MMA / epilogue warp counts)",
        "pipeline depth (more shared-memory stages between TMA and MMA)",
        "epilogue/MMA overlap (double-buffered accumulator so the next tile's MMAs start early)",
    ],
    "latency": [
        "pipeline depth (more stages in flight to hide load latency)",
        "TMA prefetch",
    ],
    "occupancy-limited": [
        "fill the GPU: persistent tile scheduler over all SMs, or smaller tiles / split-K for more CTAs",
        "cut registers or shared memory per CTA if the occupancy limiter allows another CTA",
    ],
    "smem-bank-conflicts": ["shared-memory swizzle (128B/64B/32B) for the conflicting buffers"],
    "register-spills": ["remove register spills (fewer live accumulators per thread, or setmaxnreg rebalancing)"],
}


@dataclass
class Evidence:
    what: str            # column name
    value: float
    op: str              # ">=", "<", ...
    threshold: float
    threshold_name: str

    def __str__(self) -> str:
        return f"{self.what} = {_fmt(self.value)} {self.op} {_fmt(self.threshold)} ({self.threshold_name})"


@dataclass
class Verdict:
    cls: str                                   # memory-bound | compute-bound | occupancy-limited | latency/sync-bound
    detail: str = ""                           # e.g. "sync", "latency (long_scoreboard)", "near-peak"
    flags: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"class": self.cls, "detail": self.detail, "flags": self.flags,
                "evidence": [str(e) for e in self.evidence], "candidates": self.candidates,
                "thresholds": dict(THRESHOLDS)}


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.1f}"


def _get(row, key: str) -> float:
    v = row.get(key, math.nan) if hasattr(row, "get") else math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _ge(row, col: str, thr: str, value: float | None = None) -> Evidence | None:
    v = _get(row, col) if value is None else value
    if math.isnan(v) or v < THRESHOLDS[thr]:
        return None
    return Evidence(col, v, ">=", THRESHOLDS[thr], thr)


def _lt(row, col: str, thr: str) -> Evidence | None:
    v = _get(row, col)
    if math.isnan(v) or v >= THRESHOLDS[thr]:
        return None
    return Evidence(col, v, "<", THRESHOLDS[thr], thr)


def compute_sol(row) -> tuple[float, str]:
    """(value, column): ncu's SM SOL, or (triage reports lack it) the busier of the tensor pipe and
    the issue slots, the two SM units a GEMM can saturate."""
    v = _get(row, "sol_compute_pct")
    if not math.isnan(v):
        return v, "sol_compute_pct"
    parts = [(x, c) for c in ("tensor_pipe_elapsed_pct", "issue_active_pct") if not math.isnan(x := _get(row, c))]
    return max(parts) if parts else (math.nan, "sol_compute_pct")


def memory_sol(row) -> tuple[float, str]:
    """(value, column): ncu's memory SOL, or the busiest of DRAM / L2 / L1 throughput."""
    v = _get(row, "sol_memory_pct")
    if not math.isnan(v):
        return v, "sol_memory_pct"
    parts = [(x, c) for c in ("dram_throughput_pct", "l2_throughput_pct", "l1_throughput_pct") if not math.isnan(x := _get(row, c))]
    return max(parts) if parts else (math.nan, "sol_memory_pct")


# --- rules: each returns the evidence that fired it, or None -------------------------------------

def rule_memory_bound(row) -> list[Evidence] | None:
    (mem, mcol), (comp, ccol) = memory_sol(row), compute_sol(row)
    ev = _ge(row, mcol, "sol_bound_pct", mem)
    if ev is None or (not math.isnan(comp) and comp > mem):
        return None
    return [ev, Evidence(f"{mcol} - {ccol}", mem - (0.0 if math.isnan(comp) else comp), ">=", 0.0, "memory over compute")]


def rule_compute_bound(row) -> list[Evidence] | None:
    comp, col = compute_sol(row)
    ev = _ge(row, col, "sol_bound_pct", comp)
    return [ev] if ev else None


def rule_near_peak(row) -> list[Evidence] | None:
    ev = _ge(row, "tensor_pipe_pct", "near_peak_pct") or _ge(row, "pct_of_peak", "near_peak_pct")
    return [ev] if ev else None


def rule_occupancy_limited(row) -> list[Evidence] | None:
    waves = _lt(row, "waves_per_sm", "min_waves")
    if waves:
        return [waves]
    occ, elig = _lt(row, "achieved_occupancy_pct", "low_occupancy_pct"), _lt(row, "eligible_warps_per_cycle", "min_eligible_warps")
    return [occ, elig] if occ and elig else None


def stall_shares(row) -> dict[str, float]:
    """stall reason -> share of the warp cycles per issued instruction (NaN-free, largest first)."""
    stalls = {k[len("stall_"):]: _get(row, k) for k in (row.keys() if hasattr(row, "keys") else []) if k.startswith("stall_")}
    stalls = {k: v for k, v in stalls.items() if not math.isnan(v)}
    total = _get(row, "warp_cycles_per_issue")
    if math.isnan(total) or total <= 0:
        total = sum(stalls.values())
    if total <= 0:
        return {}
    return dict(sorted(((k, v / total) for k, v in stalls.items()), key=lambda kv: -kv[1]))


def rule_sync_bound(row) -> list[Evidence] | None:
    shares = stall_shares(row)
    if not shares:
        return None
    share = sum(shares.get(r, 0.0) for r in SYNC_REASONS)
    if share < THRESHOLDS["sync_stall_share"]:
        return None
    return [Evidence("share of stalls in " + "+".join(SYNC_REASONS), share, ">=", THRESHOLDS["sync_stall_share"], "sync_stall_share")]


def rule_smem_conflicts(row) -> list[Evidence] | None:
    conf, wav = _get(row, "smem_bank_conflicts"), _get(row, "smem_wavefronts")
    if math.isnan(conf) or math.isnan(wav) or wav <= 0:
        return None
    ev = _ge(row, "smem_conflict_pct", "smem_conflict_pct", 100.0 * conf / wav)
    return [ev] if ev else None


def rule_register_spills(row) -> list[Evidence] | None:
    v = _get(row, "spill_instructions")
    if math.isnan(v):
        v = _get(row, "local_spill_requests")
    return [Evidence("spill_instructions", v, ">", 0.0, "any spill")] if not math.isnan(v) and v > 0 else None


def classify(row, *, k: int | None = None) -> Verdict:
    """Verdict for one extracted row (a dict or a pandas Series). ``k``: the GEMM's K, when known."""
    if ev := rule_memory_bound(row):
        v = Verdict("memory-bound", evidence=ev, candidates=list(CANDIDATES["memory-bound"]))
    elif ev := rule_compute_bound(row):
        v = Verdict("compute-bound", evidence=ev)
        if near := rule_near_peak(row):
            v.detail = "near-peak"
            v.evidence += near
            v.candidates = [c for c in CANDIDATES["near-peak"]
                            if not (c.startswith("split-K") and k is not None and k <= THRESHOLDS["large_k"])]
        else:
            v.candidates = list(CANDIDATES["compute-bound"])
    elif ev := rule_occupancy_limited(row):
        v = Verdict("occupancy-limited", evidence=ev, candidates=list(CANDIDATES["occupancy-limited"]))
    else:
        sol = Evidence("max(compute, memory) SOL", max(_nz(compute_sol(row)[0]), _nz(memory_sol(row)[0])),
                       "<", THRESHOLDS["sol_bound_pct"], "sol_bound_pct")
        v = Verdict("latency/sync-bound", evidence=[sol])
        if ev := rule_sync_bound(row):
            v.detail, v.candidates = "sync", list(CANDIDATES["sync"])
            v.evidence += ev
        else:
            shares = stall_shares(row)
            top = next(iter(shares), None)
            v.detail = f"latency ({top})" if top else "latency"
            if top:
                v.evidence.append(Evidence(f"share of stalls in {top}", shares[top], ">=", 0.0, "largest stall reason"))
            v.candidates = list(CANDIDATES["latency"])
    for flag, rule in (("smem-bank-conflicts", rule_smem_conflicts), ("register-spills", rule_register_spills)):
        if ev := rule(row):
            v.flags.append(flag)
            v.evidence += ev
            v.candidates += CANDIDATES[flag]
    return v


def _nz(x: float) -> float:
    return 0.0 if math.isnan(x) else x
