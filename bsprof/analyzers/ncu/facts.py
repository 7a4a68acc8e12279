"""What the verdict, its advice and their prices read from one extracted row: the named thresholds, the
opcode families, and small public readers (:func:`metric`: a metric as a float, :func:`known`,
:func:`level_bytes`: bytes per memory level, :func:`launch_problem`, stall shares, atomics and spill
traffic). :mod:`.verdict`, :mod:`.advice` and :mod:`.price` import it; it imports none of them.
"""

from __future__ import annotations

import math
import re

THRESHOLDS: dict[str, float] = {
    "launch_fixed_share": 0.30,  # no SM active for at least this share of the duration: the launch's fixed cost dominates
    "tiny_duration_us": 10.0,  # only without the busiest SM's cycles: a launch this short ...
    "tiny_active_share": 0.70,  # ... with SM active cycles below this share of elapsed is launch-bound
    "idle_share": 0.20,  # SM-time idle at or above this share: the GPU is not filled
    "idle_sms_share": 0.25,  # fewer CTAs than SMs leaving at least this share of SMs idle
    "no_work_sm_share": 0.10,  # an SM active below this share of the busiest SM's cycles did no real work
    "unit_bound_pct": 60.0,  # a pipe or memory level at >= this % of peak bounds the kernel (ncu's SOL line)
    "issue_bound_pct": 70.0,  # issue slots busy at >= this %: instruction-issue bound
    "balanced_margin": 5.0,  # compute and memory within this many points: "balanced"
    "l2_over_dram_pts": 10.0,  # DRAM traffic passes L2: L2 is the limit only this far above DRAM
    "near_peak_pct": 80.0,  # tensor pipe busy (of elapsed) at which a GEMM is near its peak
    "low_occupancy_pct": 25.0,  # achieved occupancy below this is worth raising (when the limiter allows)
    "min_eligible_warps": 0.5,  # eligible warps per scheduler cycle below this: schedulers starve
    "smem_conflict_pct": 10.0,  # bank conflicts as % of shared wavefronts
    "large_k": 4096.0,  # split-K is a candidate above this K
    "spill_traffic_share": 0.25,  # local (spill) bytes at >= this share of L2's bytes: the spills fill the bandwidth
    "atomic_share": 0.10,  # global atomics at >= this share of global memory instructions: name them
    "l2_refetch_ratio": 2.0,  # an L2-bound TMA kernel or GEMM reading >= this many times its operands' bytes from L2
    "register_load_per_mma": 0.25,  # a GEMM issuing >= this many register-path global loads (LDG) per MMA instruction
    "clock_change_pct": 1.0,  # two launches' SM clocks this far apart: compare cycles, not microseconds
}

# pipes that execute MMAs; their presence makes a kernel a "gemm" for advice
MMA_OPCODE = re.compile(r"^(UTC\w*MMA|[HQI]GMMA|HMMA|IMMA|DMMA|BMMA)")
WGMMA_OPCODE = re.compile(r"^([HQIB]GMMA|UTC\w*MMA)")
# which MMA instruction family a GEMM issues: the knobs that exist differ (wgmma's N tile and
# consumer warpgroups, tcgen05's 2-CTA MMA and TMEM; mma.sync and DMMA have neither)
MMA_FAMILIES = (
    (re.compile(r"^[HQIB]GMMA"), "wgmma"),
    (re.compile(r"^UTC\w*MMA"), "tcgen05"),
    (re.compile(r"^DMMA"), "dmma"),
    (re.compile(r"^(HMMA|IMMA|BMMA)"), "mma.sync"),
)
# global atomics (RED: no return value, ATOM: with one); ATOMS is shared memory, not global
# TMA loads (cp.async.bulk.tensor / cp.async.bulk): coalescing and shared-memory reuse are already done
TMA_LOAD_OPCODE = re.compile(r"^(UTMALDG|UBLKCP)")
GLOBAL_ATOMIC_OPCODE = re.compile(r"^(REDG?|ATOMG?)$")
GLOBAL_MEMORY_OPCODE = re.compile(r"^(LDG|STG|LD|ST|REDG?|ATOMG?)$")
SYNC_REASONS = ("barrier", "membar", "sleeping")
# an MMA kernel whose name says attention (FlashAttention, PyTorch's mem-efficient fmha, cuDNN's sdpa,
# paged / MQA decode kernels): what it streams from DRAM is the K/V cache, not a weight matrix
ATTENTION_NAME = re.compile(r"flash|fmha|attention|attn|sdpa|\bmha|mqa|paged_?kv|kv_?cache", re.I)


def metric(row, key: str) -> float:
    """The row's ``key`` as a float; NaN when the row lacks it or it is not a number."""
    v = row.get(key, math.nan) if hasattr(row, "get") else math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def known(x: float) -> bool:
    """Whether a value read by :func:`metric` is there (not NaN)."""
    return not math.isnan(x)


def opcodes(row) -> dict[str, float]:
    """The row's executed instructions by opcode (``inst_op_*`` columns), those above zero."""
    # a pandas row answers each .get() slowly, and a frame of many kernels holds every opcode any of them ran:
    # read it as a dict once (a report directory's rules call this hundreds of times a kernel)
    if hasattr(row, "to_dict"):
        row = row.to_dict()
    keys = row.keys() if hasattr(row, "keys") else []
    return {k[len("inst_op_") :]: v for k in keys if k.startswith("inst_op_") and known(v := metric(row, k)) and v > 0}


def global_atomics(row) -> tuple[float, float]:
    """(global atomic instructions, their share of global memory instructions) from the opcode table."""
    ops = opcodes(row)
    atom = sum(n for op, n in ops.items() if GLOBAL_ATOMIC_OPCODE.match(op))
    mem = sum(n for op, n in ops.items() if GLOBAL_MEMORY_OPCODE.match(op))
    return atom, (atom / mem if mem else 0.0)


def spill_traffic(row) -> tuple[float, float]:
    """(bytes of local-memory traffic, their share of the bytes through L2). Local memory is where
    register spills go; what misses L1 travels through L2 and DRAM like any global access."""
    ld, st, l2 = metric(row, "local_load_sectors"), metric(row, "local_store_sectors"), metric(row, "l2_sectors")
    if not (known(ld) and known(st)):
        return math.nan, math.nan
    local = 32.0 * (ld + st)
    return local, (local / (32.0 * l2) if known(l2) and l2 > 0 else math.nan)


def level_bytes(row, lvl: str) -> float:
    """Bytes through a memory level ("dram": read + written; "l2": its sectors); NaN for another level."""
    if lvl == "dram":
        r, w = metric(row, "dram_bytes_read"), metric(row, "dram_bytes_write")
        return r + w if known(r) and known(w) else math.nan
    if lvl == "l2":
        return 32.0 * metric(row, "l2_sectors")
    return math.nan


def stall_shares(row) -> dict[str, float]:
    """stall reason -> share of the warp cycles per issued instruction (NaN-free, largest first)."""
    keys = row.keys() if hasattr(row, "keys") else []
    stalls = {k[len("stall_") :]: metric(row, k) for k in keys if k.startswith("stall_")}
    stalls = {k: v for k, v in stalls.items() if known(v) and k != "selected"}
    total = metric(row, "warp_cycles_per_issue")
    if not known(total) or total <= 0:
        total = sum(stalls.values())
    if total <= 0:
        return {}
    return dict(sorted(((k, v / total) for k, v in stalls.items()), key=lambda kv: -kv[1]))


# bytes per element of an MMA operand, by the precision a launch names (scale factors not counted)
OPERAND_BYTES = {"fp4": 0.5, "fp8": 1.0, "int8": 1.0, "fp16": 2.0, "bf16": 2.0, "tf32": 4.0, "fp32": 4.0, "fp64": 8.0}


def problem_of(text) -> list[int] | None:
    """[M, N, K, L] of a problem as a launch's NVTX range names it ('2048x4096x256x1', or with
    commas; L defaults to 1), or None when it names none."""
    if not isinstance(text, str) or not text:
        return None
    try:
        vals = [int(x) for x in re.split(r"[x,]", text) if x]
    except ValueError:
        return None
    return (vals + [1])[:4] if len(vals) >= 3 else None


def launch_problem(row) -> list[int] | None:
    """[M, N, K, L] of the problem the row's launch names (its ``mnkl``), or None (:func:`problem_of`)."""
    return problem_of(row.get("mnkl") if hasattr(row, "get") else None)


def loads_by_tma(row) -> bool:
    return any(TMA_LOAD_OPCODE.match(op) for op in opcodes(row))


# a derived SM clock this far above the part's top clock is not a clock reading
CLOCK_ABOVE_TOP = 1.01


def clock_above_top(row) -> str | None:
    """Why the SM clock ncu's numbers imply (elapsed SM cycles over the launch's duration) cannot be
    read as the clock, where it exceeds the part's top clock: on launches of a few microseconds the
    two counters' windows differ (a 2.3 us CUB scan on the H200 implies 2,105 MHz against 1,980)."""
    mhz, top = metric(row, "sm_clock_hz") / 1e6, metric(row, "max_sm_clock_khz") / 1e3
    if not (known(mhz) and known(top)) or top <= 0 or mhz <= CLOCK_ABOVE_TOP * top:
        return None
    return (
        f"above the part's {top:,.0f} MHz top: elapsed cycles over a "
        f"{metric(row, 'duration_ns') / 1e3:,.1f} us launch, not a clock reading"
    )


def register_loads(row) -> tuple[float, float]:
    """(global loads through registers (LDG), that per MMA instruction): a GEMM fed by TMA or cp.async
    (LDGSTS) issues almost none (the H100 corpus: <= 0.07 per MMA); one that loads its operands with
    LDG and moves them to shared memory itself issues one or more per few MMAs."""
    ops = opcodes(row)
    mma = sum(n for op, n in ops.items() if MMA_OPCODE.match(op))
    ldg = sum(n for op, n in ops.items() if op.startswith("LDG") and not op.startswith("LDGSTS"))
    return ldg, (ldg / mma if mma else math.nan)


def async_loads(row) -> float:
    """Global-to-shared loads that bypass the registers: cp.async (LDGSTS) and TMA instructions."""
    return sum(n for op, n in opcodes(row).items() if op.startswith("LDGSTS") or TMA_LOAD_OPCODE.match(op))


def operand_bytes(row) -> tuple[float, str]:
    """(bytes of the operands A + B, where they come from): the problem (mnkl and precision named by the
    launch's NVTX range or --mnkl), else the bytes read from DRAM, which are the distinct bytes a launch
    reads when ncu flushed L2 before it (its default) and a lower bound with a warm L2."""
    mnkl, prec = launch_problem(row), row.get("precision") if hasattr(row, "get") else None
    if mnkl and prec in OPERAND_BYTES:
        m, n, k, batches = mnkl
        return (m * k + n * k) * batches * OPERAND_BYTES[prec], f"A + B of {m}x{n}x{k} at {prec}, scales not counted"
    dram = metric(row, "dram_bytes_read")
    if known(dram) and dram > 0:
        return dram, "DRAM read: the distinct bytes when ncu flushed L2 first (its default); fewer with a warm L2"
    return math.nan, ""


def l2_refetch(row) -> tuple[float, float, str]:
    """(bytes the SMs read from L2, that over the operands' bytes, the operands' source)."""
    sm_read = 32.0 * metric(row, "l2_read_sectors_sm")
    ops, src = operand_bytes(row)
    if not known(sm_read) or not known(ops) or ops <= 0:
        return sm_read, math.nan, src
    return sm_read, sm_read / ops, src


# an MMA kernel whose mix is a softmax between matrix products, whatever its name: the XU pipe at >= this %
# of active and MUFU at >= this share of executed instructions (the H100 corpus's attention kernels: XU
# 9-39%, MUFU 2.1-11.3%, the sm80 flash kernel 20% and 5.5%; its GEMMs at most XU 1.5% and MUFU 1.4%,
# cuBLASLt's bias+GELU epilogue)
ATTENTION_MIX = {"xu_pct": 10.0, "mufu_share": 0.03}


def is_attention(row) -> bool:
    """The launch's kernel name (mangled or demangled) names an attention kernel (``ATTENTION_NAME``), or
    its instruction mix is one (MMAs with the exponentials of a softmax: ``ATTENTION_MIX``)."""
    names = [row.get(k) for k in ("kernel", "kernel_demangled")] if hasattr(row, "get") else []
    if any(isinstance(n, str) and ATTENTION_NAME.search(n) for n in names):
        return True
    ops = opcodes(row)
    total = sum(ops.values())
    if not total or not any(MMA_OPCODE.match(o) for o in ops):
        return False
    return (
        metric(row, "pipe_xu_pct") >= ATTENTION_MIX["xu_pct"]
        and ops.get("MUFU", 0.0) / total >= ATTENTION_MIX["mufu_share"]
    )


def dram_split(row) -> tuple[float, float, float]:
    """(bytes read from DRAM, bytes written to DRAM, the written share of both): dram__bytes_read.sum and
    dram__bytes_write.sum, the columns dram_bytes_read / dram_bytes_write."""
    r, w = metric(row, "dram_bytes_read"), metric(row, "dram_bytes_write")
    return r, w, (w / (r + w) if known(r) and known(w) and r + w > 0 else math.nan)
