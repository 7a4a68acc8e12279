"""Advice for a verdict, chosen by class, kernel kind and architecture; each line cites its number.

The table is data: (class, unit or "*", kind, archs, text). ``kind`` is "gemm" (MMA instructions
execute), "other", "*", the MMA family a GEMM issues ("wgmma", "tcgen05", "mma.sync", "dmma":
the knobs differ, and mma.sync/DMMA kernels have none of wgmma's), or "attention" (a GEMM whose
name or instruction mix says attention: its line replaces the plain GEMM and MMA-family ones of the
same class and unit), or a trait of the launch (:data:`TRAITS`, each a small rule over declared
metrics: what dominates a DRAM-bound GEMM's bytes, how exp is computed, whether ncu found uncoalesced
accesses); a replacing trait's line (:data:`REPLACING`) takes the place of the plain GEMM line. A flag's
entry with a unit applies only where the verdict's unit is that one, and then replaces the flag's
generic line. ``archs`` are the architectures the advice exists on ("sm_90" wgmma knobs, "sm_100"
tcgen05/TMEM/2-CTA MMA, "*" everywhere). Texts are formatted with the launch's numbers
(:func:`_numbers`), so each names what it rests on. GEMM advice appears only where MMAs execute;
2-CTA MMA, TMEM and UTC* only on sm_100; occupancy advice only when the verdict flagged it.
"""

from __future__ import annotations

import copy
import math
import re

from bsprof.analyzers.ncu.facts import (
    MMA_FAMILIES,
    MMA_OPCODE,
    THRESHOLDS,
    dram_split,
    global_atomics,
    is_attention,
    known,
    l2_refetch,
    launch_problem,
    level_bytes,
    metric,
    opcodes,
    operand_bytes,
    register_loads,
    spill_traffic,
    stall_shares,
)
from bsprof.fmt import fmt_bytes

ANY = "*"

ADVICE: tuple[tuple[str, str, str, str, str], ...] = (
    # 1. the GPU is not filled
    (
        "launch-bound",
        ANY,
        ANY,
        ANY,
        "fuse this launch into its neighbour, batch several into one, or capture the sequence in a CUDA graph: "
        "{dur_us} us of which no SM is active for {fixed_us} us ({fixed_pct}%) and the SMs are active {active_pct}% "
        "on average is mostly fixed launch cost",
    ),
    (
        "under-filled",
        "launch",
        ANY,
        ANY,
        "the idle SM-time is mostly the launch's own: no SM active for {fixed_us} us ({fixed_pct}%) of {dur_us} us, "
        "so more or smaller tiles would not shorten it; capture the sequence in a CUDA graph, fuse this launch "
        "with its neighbour, or give it more work per launch (batch)",
    ),
    (
        "under-filled",
        ANY,
        "gemm",
        ANY,
        "more tiles for the SMs: a smaller tile (N or M) or split-K/stream-K so {sms} SMs share the work evenly "
        "(SM-time idle {idle_pct}%)",
    ),
    (
        "under-filled",
        ANY,
        "wgmma",
        "sm_90",
        "on sm_90, pick the wgmma N tile so that the tile count divides into waves of {sms} CTAs "
        "({ctas} CTAs, busiest SM active {max_active_pct}% vs average {active_pct}%)",
    ),
    (
        "under-filled",
        ANY,
        "other",
        ANY,
        "more CTAs: {ctas} CTA(s) for {sms} SMs leave the SM-time {idle_pct}% idle; split the loop across CTAs "
        "(grid-stride or a two-pass reduction)",
    ),
    # 2. what limits the busy SMs
    (
        "compute-bound",
        "tensor",
        "gemm",
        ANY,
        "the tensor pipe is the limit ({unit_pct}% of active, {unit_elapsed}% of elapsed): remaining time is in "
        "the prologue/epilogue and tail; fuse the epilogue work (bias, activation, output quantization) here",
    ),
    ("compute-bound", "tensor", "wgmma", "sm_90", "wgmma knobs on sm_90 this launch does not use yet: {wgmma_knobs}"),
    (
        "compute-bound",
        "tensor",
        "attention",
        ANY,
        "an attention kernel with the tensor pipe the limit ({unit_pct}% of active, {unit_elapsed}% of elapsed): "
        "the time outside its two matrix products is the softmax between them (XU pipe {xu_pct}% of active, MUFU "
        "{mufu_pct}% of executed instructions, {mufu_per_mma} per MMA instruction); overlap one warpgroup's softmax "
        "with the other warpgroup's MMAs (ping-pong between warpgroups, and within one the softmax of a block under "
        "the next block's MMAs, as FlashAttention-3 does), and take exp2 of logits pre-scaled by log2(e)/sqrt(d) "
        "(one FFMA before each MUFU.EX2)",
    ),
    (
        "compute-bound",
        "tensor",
        "tcgen05",
        "sm_100",
        "tcgen05 knobs on sm_100: 2-CTA MMA (cta_group::2) and a double-buffered TMEM accumulator so the "
        "epilogue overlaps the next tile's MMAs",
    ),
    (
        "compute-bound",
        "tensor",
        "dmma",
        ANY,
        "fp64 runs as DMMA ({mma_count} instructions; wgmma has no fp64): at {unit_pct}% of active the fp64 tensor "
        "pipe is this GPU's fp64 ceiling; only a lower precision (TF32/BF16 with error-compensated splitting) is faster",
    ),
    (
        "compute-bound",
        "fma",
        ANY,
        ANY,
        "the FMA pipe is the limit ({unit_pct}% of active): fewer FP32 instructions per result; for a matrix "
        "product move it to the tensor cores (TF32/BF16 MMA)",
    ),
    (
        "compute-bound",
        "xu",
        ANY,
        ANY,
        "the XU pipe (transcendentals, conversions) is the limit ({unit_pct}% of active; MUFU {mufu_pct}% of "
        "executed instructions): fewer transcendentals per result (reuse one, or a cheaper function), fast-math "
        "intrinsics instead of accurate library calls",
    ),
    (
        "compute-bound",
        "xu",
        "exp-range-reduced",
        ANY,
        "the MUFU instructions come with {fp32_per_mufu} FP32 instructions (FFMA/FMUL) each, the range reduction "
        "of an accurate exp: exp2 with the scale folded into one FMA instead of exp",
    ),
    (
        "compute-bound",
        "alu",
        ANY,
        ANY,
        "the ALU pipe is the limit ({unit_pct}% of active): fewer integer/compare/select instructions (index "
        "math hoisted out of loops, predication instead of selects)",
    ),
    (
        "compute-bound",
        "lsu",
        ANY,
        ANY,
        "the LSU pipe is the limit ({unit_pct}% of active): wider (16-byte) loads and stores, fewer shared-memory "
        "instructions per byte",
    ),
    (
        "compute-bound",
        "issue",
        ANY,
        ANY,
        "instruction issue is the limit ({issue_pct}% of issue slots, no single pipe above {unit_bound}%): "
        "fewer instructions per element (vectorized loads, less index math, more work per thread)",
    ),
    (
        "compute-bound",
        "fp64",
        ANY,
        ANY,
        "the FP64 pipe is the limit ({unit_pct}% of active): fewer fp64 operations per result, fp32 where the "
        "accuracy allows (twice the fp64 rate on an H100, far more on GPUs with few FP64 units), and matrix "
        "products on the fp64 tensor pipe (DMMA)",
    ),
    (
        "compute-bound",
        ANY,
        ANY,
        ANY,
        "the {unit} pipe is the limit ({unit_pct}% of active cycles): fewer instructions on that pipe",
    ),
    (
        "memory-bound",
        "dram",
        ANY,
        ANY,
        "DRAM is the limit ({unit_pct}% of peak{dram_bytes}): move fewer bytes (fuse with the producer "
        "or consumer, lower-precision storage); no in-kernel change beats this bandwidth",
    ),
    (
        "memory-bound",
        "dram",
        "gemm",
        ANY,
        "a GEMM at DRAM {dram_pct}% streams its operands at bandwidth ({dram_read} read, {dram_write} written): "
        "the floor is bytes / bandwidth; fewer operand bytes: reuse each operand read for more of the output "
        "(more rows or columns per launch, a larger tile along the dimension that is re-read), or store the "
        "operands in fewer bits{weight_bits}",
    ),
    (
        "memory-bound",
        "dram",
        "weight-reads",
        ANY,
        "a GEMM at DRAM {dram_pct}% streams its weights at bandwidth (B, {n} x {k}, is {b_share}% of the operand "
        "bytes at M = {m}; {dram_read} read): the floor is bytes / bandwidth; batch more rows (M) per weight read, "
        "or store the weights in fewer bits{weight_bits}",
    ),
    (
        "memory-bound",
        "dram",
        "output-writes",
        ANY,
        "a GEMM at DRAM {dram_pct}% whose bytes are its output ({dram_write} written, {write_pct}% of the "
        "{dram_moved} moved; {dram_read} read): the floor is output bytes / bandwidth; write fewer output bytes: "
        "a narrower output dtype, the consumer fused into the epilogue so the output is not written and read "
        "back, a larger K per output written (concatenate the products that sum into it; no split-K partials)",
    ),
    (
        "memory-bound",
        "dram",
        "attention",
        ANY,
        "an attention kernel at DRAM {dram_pct}% streams the K/V cache at bandwidth: the floor is bytes / bandwidth; "
        "read each K/V block for more query rows at once (the query heads that share a K/V head, several decode "
        "tokens a step), or store the cache in fewer bits{weight_bits}",
    ),
    (
        "memory-bound",
        "l2",
        ANY,
        ANY,
        "L2 is the limit ({unit_pct}% of peak vs DRAM {dram_pct}%): reuse data in shared memory/registers, or "
        "order CTAs for locality",
    ),
    ("memory-bound", "l2", "uncoalesced", ANY, "coalesce the global accesses: {uncoalesced}"),
    (
        "memory-bound",
        "l1",
        ANY,
        ANY,
        "L1/shared is the limit ({unit_pct}% of peak): fewer or wider shared/L1 accesses, avoid bank conflicts",
    ),
    (
        "memory-bound",
        "l1",
        "uncoalesced",
        ANY,
        "coalesce the global accesses (L1 carries every global load's sectors): {uncoalesced}",
    ),
    (
        "latency-bound",
        ANY,
        ANY,
        ANY,
        "latency: issue slots {issue_pct}% busy, {eligible} eligible warps per cycle, top stall {stall} "
        "({stall_pct}% of cycles between issues): more independent work in flight per warp",
    ),
    (
        "latency-bound",
        "long_scoreboard",
        ANY,
        ANY,
        "waiting on global/local memory (long_scoreboard, {stall_pct}% of the cycles between issues): more loads "
        "in flight before first use, prefetch, or more warps",
    ),
    (
        "latency-bound",
        "barrier",
        ANY,
        ANY,
        "warps wait at CTA barriers ({stall_pct}% of the cycles between issues): rebalance the work between "
        "barriers or split roles (producer/consumer)",
    ),
    (
        "latency-bound",
        "gmma",
        "gemm",
        "sm_90",
        "warps wait on wgmma results ({stall_pct}% of the cycles between issues): deeper pipelining between the "
        "MMA and its consumers",
    ),
    (
        "latency-bound",
        ANY,
        "gemm",
        ANY,
        "for this MMA kernel (tensor pipe {tensor_pct}% of active): deeper shared-memory pipeline (more stages) "
        "and more MMA work per load",
    ),
    # flags
    (
        "spill-traffic",
        ANY,
        ANY,
        ANY,
        "register spills are most of the traffic: {local_bytes} of local memory through L1/L2 ({spill_share}% of the "
        "{l2_bytes} through L2, L1 hit {l1_hit}%) from {spills} spill instructions; remove them first (fewer live "
        "values per thread: a smaller block per warp or more warps per row), then re-measure the bandwidth",
    ),
    (
        "l2-refetch",
        ANY,
        ANY,
        ANY,
        "the SMs read {l2_sm_bytes} from L2 for {operand_bytes} of operands ({refetch}x; {operand_source}): the loads "
        "are TMA, so coalescing and shared-memory reuse are done already; the same tiles are fetched from L2 once per "
        "CTA instead of once for the CTAs that share them (L2 misses {l2_miss_bytes} against {dram_read} read from "
        "DRAM). Check how those CTAs are placed and launched: tile order (CTAs sharing an A or B tile running at the "
        "same time), the launch geometry (a cluster launch places CTAs by cluster, not as a plain grid), or a cluster "
        "with TMA multicast that fetches a shared tile once",
    ),
    (
        "global-atomics",
        ANY,
        ANY,
        ANY,
        "{atomics} global atomics ({atomic_pct}% of global memory instructions) with warps waiting on {stall} "
        "({stall_pct}% of the cycles between issues): atomics to few addresses serialize in a few L2 slices; "
        "privatize (accumulate per CTA in shared memory, or sort by destination and reduce segments), then one "
        "global atomic per destination per CTA",
    ),
    (
        "mma-sync",
        ANY,
        "mma.sync",
        "sm_90",
        "this kernel issues mma.sync ({mma_op}, {mma_count} instructions), not wgmma: on sm_90 only wgmma "
        "(HGMMA/QGMMA/IGMMA) reaches the tensor peak; a wgmma kernel for this precision (an sm_90 build of the "
        "library, CUTLASS sm90 or CuTe DSL) is the upgrade, not tuning this one (tensor pipe {tensor_pct}% busy)",
    ),
    (
        "mma-sync",
        "dram",
        "mma.sync",
        "sm_90",
        "this kernel issues mma.sync ({mma_op}, {mma_count} instructions), not wgmma, but at DRAM {dram_pct}% the "
        "bytes set its time, not the MMA family (tensor pipe {tensor_pct}% busy): a wgmma kernel would stream the "
        "same bytes at the same bandwidth, so the bytes are the lever",
    ),
    (
        "register-loads",
        ANY,
        "fragment-loads",
        ANY,
        "the operands go from global memory straight into the MMA's registers: {ldg} global loads (LDG, "
        "{ldg_per_mma} per MMA instruction) against {sts} shared-memory stores, {smem_block} of shared memory a "
        "CTA, so no operand tile is staged and data that several warps of a CTA use is loaded once per warp, "
        "through L1 ({l1_pct}% of peak). That is how this kernel is built, not the fall-back for unaligned rows, "
        "and padding will not change it; a kernel that stages operand tiles in shared memory (TMA or cp.async: "
        "each tile loaded once per CTA and read by all its warps) is the change",
    ),
    (
        "register-loads",
        ANY,
        "staged-loads",
        ANY,
        "the operands reach shared memory through registers: {ldg} global loads (LDG, {ldg_per_mma} per MMA "
        "instruction) and no TMA or cp.async, the path GEMM libraries fall back to when a row or base address is "
        "not 16-byte aligned (TMA and cp.async need it); pad each operand's leading dimension to a multiple of 16 "
        "bytes (8 fp16/bf16, 4 fp32 or 16 fp8 elements) so the library can pick its TMA kernel",
    ),
    (
        "gemm-l2-reuse",
        ANY,
        ANY,
        ANY,
        "the SMs read {l2_sm_bytes} from L2 for {operand_bytes} of operands ({refetch}x; {operand_source}) with the "
        "tensor pipe at {tensor_pct}%: a BM x BN tile reads A once for each tile along N and B once for each along M, "
        "so a small tile re-reads both many times; a larger CTA tile is more MMA work per byte loaded",
    ),
    (
        "gemm-l2-reuse",
        ANY,
        "wgmma",
        "sm_90",
        "on sm_90 the levers this launch leaves open: {wgmma_knobs}; and operands by TMA (it loads them "
        "another way), which multicast needs",
    ),
    (
        "grid-limited",
        ANY,
        ANY,
        ANY,
        "the grid limits the warps: {ctas} CTAs of {warps_per_cta} warp(s) are {waves} waves, ~{warps_per_sm} warps "
        "per SM ({occ_pct}% of warp slots in use) while resources allow {ctas_per_sm} CTAs per SM; split the work "
        "over more CTAs or more warps per CTA to put more loads in flight",
    ),
    (
        "low-occupancy",
        ANY,
        ANY,
        ANY,
        "raise occupancy ({occ_pct}% achieved of {theo_pct}% theoretical; CTAs per SM limited by {limiter}): "
        "fewer registers or shared memory per CTA, or more CTAs",
    ),
    (
        "smem-bank-conflicts",
        ANY,
        ANY,
        ANY,
        "shared-memory bank conflicts ({conflict_pct}% of wavefronts): swizzle or pad the conflicting buffer",
    ),
    ("register-spills", ANY, ANY, ANY, "register spills ({spills} spill instructions): fewer live values per thread"),
)

SPLIT_K = ("split-K", "when K is large (K = {k} > {large_k}) and the tile grid is small")


# --- traits: small rules over declared metrics that pick a more specific line ------------------------

# DRAM bytes written at or above this share of the bytes a DRAM-bound GEMM moves: the output is what
# streams (the short-K GEMM 16384x16384x64 of the corpus writes 515 of its 527 MB), so the lever is the output's
# bytes (dtype, fused consumer, K per output), not the operands' (the 1x1 conv, 82 of 185 MB written, stays below)
DRAM_WRITE_SHARE = 0.5
# B (N x K, the weights of y = x W^T) at or above this share of the operand bytes A + B, with the problem
# known: the reads are a weight matrix read for few rows (N >= 4 M), and "more rows per weight read" is the
# lever; below it, or with the shape unknown, the line names operand reads, not weights (a 1x1 conv as a
# GEMM of 200,704 x 256 x 256 reads 103 MB of activations against 128 KB of weights)
WEIGHT_OPERAND_SHARE = 0.8
# FP32 instructions (FFMA, FMUL) per MUFU at or above which exp is computed with range reduction around
# MUFU.EX2 (an accurate expf: triton_exp32_sum_16M issues 6.0); exp2 on pre-scaled input needs one FFMA
# or none (triton_ex2_chain64_16M: 0, FADD only), so "exp2 instead of exp" is said only above this
EXP_RANGE_REDUCTION_FP32_PER_MUFU = 2.0
# ncu rules whose numbers come from sectors per request (excessive sectors, bytes used per sector):
# "coalesce" is said only where one of them fired (a fully coalesced 16-sector LDG.128 stream gets none)
UNCOALESCED_RULES = ("UncoalescedGlobalAccess", "MemoryCacheAccessPattern")
# the share of the sectors moved that must be wasted before "coalesce" is said: the rules also fire
# on a CUB histogram's 441 excess sectors of 4.6M and on a store stream using 31.8 of each 32 bytes
UNCOALESCED_MIN_WASTE = 0.10
# shared-memory stores (STS) per global load (LDG) below which a GEMM's LDG-loaded operands are not
# staged in shared memory but go straight into MMA fragments (the int4 tinygemm of the corpus: 0.002, 5 KB of
# shared memory a CTA); the unaligned-row fall-backs of cuBLAS store one STS per 7-8 LDG (0.13-0.14)
FRAGMENT_STS_PER_LDG = 0.02
# replacing traits, most specific first: the first one whose line matches takes the place of the plain
# GEMM line (and the MMA-family line) of its class and unit; the others add a line beside the plain one
REPLACING = ("output-writes", "attention", "weight-reads")


def _b_share(row) -> float:
    """B's (N x K) share of the operand bytes A + B, where the launch names its problem."""
    mnkl = launch_problem(row)
    if not mnkl:
        return math.nan
    m, n, _, _ = mnkl
    return n / (m + n) if m + n else math.nan


def _fp32_per_mufu(row) -> float:
    ops = opcodes(row)
    mufu = ops.get("MUFU", 0.0)
    return (ops.get("FFMA", 0.0) + ops.get("FMUL", 0.0)) / mufu if mufu else math.nan


def uncoalesced_text(rules: list[dict] | None) -> str | None:
    """ncu's own sectors-per-request finding with its number, where one of :data:`UNCOALESCED_RULES` fired
    about global memory (local memory's pattern is the spills') and wastes at least
    :data:`UNCOALESCED_MIN_WASTE` of the sectors moved."""
    for name in UNCOALESCED_RULES:
        for r in rules or []:
            msg, title = r.get("message") or "", r.get("title") or ""
            if r.get("rule") != name or "Local" in title or "Shared" in title:
                continue
            if m := re.search(r"(\d+) excessive sectors \((\d+)% of the total (\d+) sectors\)", msg):
                if int(m.group(1)) >= UNCOALESCED_MIN_WASTE * int(m.group(3)):
                    return (
                        f"ncu counts {int(m.group(1)):,} sectors beyond what the requests need, {m.group(2)}% "
                        f"of the {int(m.group(3)):,} they moved ({name})"
                    )
            elif m := re.search(r"only ([\d.]+) of the 32 bytes transmitted per sector are utilized", msg):
                if float(m.group(1)) <= 32 * (1 - UNCOALESCED_MIN_WASTE):
                    return f"only {m.group(1)} of the 32 bytes of each sector moved are used ({name}: {title})"
    return None


def launch_traits(v, row, rules: list[dict] | None = None) -> set[str]:
    """The traits of the launch that pick a more specific advice line (the ``kind`` column's extra values)."""
    out = set()
    if v.kind == "gemm":
        if is_attention(row):
            out.add("attention")
        _, _, wshare = dram_split(row)
        if known(wshare) and wshare >= DRAM_WRITE_SHARE:
            out.add("output-writes")
        elif known(b := _b_share(row)) and b >= WEIGHT_OPERAND_SHARE:
            out.add("weight-reads")
        ldg, _ = register_loads(row)
        if ldg:
            staged = opcodes(row).get("STS", 0.0) >= FRAGMENT_STS_PER_LDG * ldg
            out.add("staged-loads" if staged else "fragment-loads")
    if known(f := _fp32_per_mufu(row)) and f >= EXP_RANGE_REDUCTION_FP32_PER_MUFU:
        out.add("exp-range-reduced")
    if uncoalesced_text(rules):
        out.add("uncoalesced")
    return out


def _n(x: float, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}f}"


def _numbers(v, row, k: int | None, rules: list[dict] | None = None) -> dict:
    shares = stall_shares(row)
    ops_all = opcodes(row)
    mma_all = sum(x for op, x in ops_all.items() if MMA_OPCODE.match(op))
    mufu, total = ops_all.get("MUFU", 0.0), sum(ops_all.values())
    dram_r, dram_w, wshare = dram_split(row)
    mnkl = launch_problem(row) or [None] * 4
    stall = v.unit if v.cls == "latency-bound" and v.unit else next(iter(shares), "n/a")
    f = v.fill
    unit_pct = v.busy.get("value", math.nan)
    share = f.active_share if not math.isnan(f.active_share) else 1.0
    conf, wav = metric(row, "smem_bank_conflicts"), metric(row, "smem_wavefronts")
    mma_ops = {
        op: n for op, n in opcodes(row).items() if any(rx.match(op) and fam == v.mma for rx, fam in MMA_FAMILIES)
    }
    mma_op = max(mma_ops, key=mma_ops.get) if mma_ops else "n/a"
    local, spill_share = spill_traffic(row)
    atomics, atomic_share = global_atomics(row)
    l2_sm, refetch, _ = l2_refetch(row)
    ldg, ldg_per_mma = register_loads(row)
    ops, ops_src = operand_bytes(row)
    warps_per_cta = (
        math.ceil(metric(row, "block_x") * metric(row, "block_y") * metric(row, "block_z") / 32)
        if all(not math.isnan(metric(row, f"block_{a}")) for a in "xyz")
        else math.nan
    )
    return {
        "dur_us": _n(metric(row, "duration_ns") / 1e3, 1),
        "active_pct": _n(100 * f.active_share),
        "fixed_us": _n(f.launch_fixed_us, 1),
        "fixed_pct": _n(100 * f.launch_fixed_share),
        "sms": f.sms or "?",
        "ctas": f.ctas or "?",
        "fill": f.text or "n/a",
        "idle_pct": _n(100 * (1 - f.active_share)),
        "max_active_pct": _n(100 * f.max_active_share),
        "tensor_pct": _n(metric(row, "pipe_tensor_pct")),
        "theo_pct": _n(metric(row, "theoretical_occupancy_pct")),
        "limiter": occupancy_limiter(row),
        "unit": v.busy.get("unit", v.unit),
        "unit_pct": _n(unit_pct),
        "unit_elapsed": _n(unit_pct * share),
        "l2_pct": _n(metric(row, "l2_throughput_pct")),
        "dram_pct": _n(metric(row, "dram_throughput_pct")),
        "dram_bytes": "" if math.isnan(level_bytes(row, "dram")) else f", {fmt_bytes(level_bytes(row, 'dram'))} moved",
        "issue_pct": _n(metric(row, "issue_active_pct")),
        "eligible": _n(metric(row, "eligible_warps_per_cycle"), 2),
        "stall": stall,
        "stall_pct": _n(100 * shares.get(stall, math.nan)),
        "occ_pct": _n(metric(row, "achieved_occupancy_pct")),
        "conflict_pct": _n(100 * conf / wav if wav else math.nan),
        "spills": _n(metric(row, "spill_instructions")),
        "unit_bound": _n(THRESHOLDS["unit_bound_pct"]),
        "k": k,
        "large_k": _n(THRESHOLDS["large_k"]),
        "mma_op": mma_op,
        "mma_count": f"{sum(mma_ops.values()):,.0f}" if mma_ops else "n/a",
        "local_bytes": fmt_bytes(local),
        "spill_share": _n(100 * spill_share),
        "l2_bytes": fmt_bytes(level_bytes(row, "l2")),
        "l1_hit": _n(metric(row, "l1_hit_pct")),
        "atomics": _n(atomics),
        "atomic_pct": _n(100 * atomic_share),
        "l2_sm_bytes": fmt_bytes(l2_sm),
        "refetch": _n(refetch, 1),
        "operand_bytes": fmt_bytes(ops),
        "operand_source": ops_src,
        "l2_miss_bytes": fmt_bytes(32.0 * metric(row, "l2_read_miss_sectors_sm")),
        "dram_read": fmt_bytes(dram_r),
        "warps_per_cta": _n(warps_per_cta),
        "waves": _n(f.waves, 2),
        "ctas_per_sm": f.ctas_per_sm or "?",
        "wgmma_knobs": wgmma_knobs(row),
        "weight_bits": _weight_bits(row),
        "ldg": f"{ldg:,.0f}",
        "ldg_per_mma": _n(ldg_per_mma, 2),
        "sts": f"{ops_all.get('STS', 0.0):,.0f}",
        "smem_block": fmt_bytes(metric(row, "smem_per_block_bytes")),
        "l1_pct": _n(metric(row, "l1_throughput_pct")),
        "warps_per_sm": _n(f.ctas / f.sms * warps_per_cta, 1) if f.ctas and f.sms else "n/a",
        "dram_write": fmt_bytes(dram_w),
        "dram_moved": fmt_bytes(dram_r + dram_w),
        "write_pct": _n(100 * wshare),
        "m": mnkl[0],
        "n": mnkl[1],
        "b_share": _n(100 * _b_share(row)),
        "xu_pct": _n(metric(row, "pipe_xu_pct")),
        "mufu_pct": _n(100 * mufu / total, 1) if total else "n/a",
        "mufu_per_mma": _n(mufu / mma_all, 1) if mma_all else "n/a",
        "fp32_per_mufu": _n(_fp32_per_mufu(row), 1),
        "uncoalesced": uncoalesced_text(rules) or "n/a",
    }


# a CTA of at most this many warps has room for another consumer warpgroup beside a producer warpgroup
# and two consumers: a third lets each warpgroup's wgmma wait lie under two others' MMAs (an FP8 block-scaled
# GEMM at 8192^3 on the H100: tensor pipe 86.6% of elapsed with two, 93.7% with three)
MORE_WARPGROUPS_BELOW = 16


def wgmma_knobs(row) -> str:
    """The sm_90 wgmma levers the launch's shape leaves open, each with the number that shows it: more
    consumer warpgroups where the CTA has room for them, TMA multicast where no cluster shares tiles."""
    knobs = ["a wider N tile per warpgroup"]
    threads = metric(row, "block_x") * metric(row, "block_y") * metric(row, "block_z")
    warps = math.ceil(threads / 32) if not math.isnan(threads) else math.nan
    if math.isnan(warps) or warps < MORE_WARPGROUPS_BELOW:
        knobs.append(
            "another consumer warpgroup, so each one's wgmma wait lies under the others' MMAs"
            + ("" if math.isnan(warps) else f" ({warps} warps a CTA now)")
        )
    cluster = metric(row, "cluster_size")
    l2 = _n(metric(row, "l2_throughput_pct"))
    if math.isnan(cluster) or cluster <= 1:
        return ", ".join(knobs + [f"TMA multicast across a cluster to halve L2 traffic (L2 at {l2}%)"])
    return ", ".join(knobs) + f"; it runs clusters of {cluster:.0f} CTAs already (L2 at {l2}%)"


def _weight_bits(row) -> str:
    """What the operands are stored in now, where the launch says (its MMA opcodes or problem)."""
    prec = row.get("precision") if hasattr(row, "get") else None
    return f" (they are {prec} now)" if isinstance(prec, str) and prec else ""


def occupancy_limiter(row) -> str:
    lims = {k: metric(row, f"occupancy_limit_{k}") for k in ("registers", "shared_mem", "warps", "blocks", "barriers")}
    lims = {k: v for k, v in lims.items() if not math.isnan(v)}
    if not lims:
        return "n/a"
    low = min(lims.values())
    return " and ".join(k.replace("_", " ") for k, v in lims.items() if v == low) + f" ({low:.0f} CTA/SM)"


def applies(entry, v, traits: set[str] = frozenset()) -> bool:
    cls, unit, kind, arch, _ = entry
    keys = {v.cls} | set(v.flags)
    if cls not in keys:
        return False
    if unit != ANY and unit not in (v.unit, *(v.co_units if cls == v.cls else ())):
        return False
    kind_ok = kind in (ANY, v.kind) or kind in traits or (v.kind == "gemm" and kind == v.mma)
    return kind_ok and (arch == ANY or arch == v.arch)


def entry_id(entry) -> str:
    """The name of an advice line: its table entry's class/unit/kind (``memory-bound/l2/uncoalesced``)."""
    return "/".join(entry[:3])


def advise(v, row, *, k: int | None = None, rules: list[dict] | None = None) -> list[str]:
    """The advice lines for verdict ``v`` of ``row``, most specific first, each with its number.
    ``rules``: ncu's rule results for the launch (its sectors-per-request findings decide "coalesce")."""
    return [text for _, text in advise_entries(v, row, k=k, rules=rules)]


def advise_entries(v, row, *, k: int | None = None, rules: list[dict] | None = None) -> list[tuple[str, str]]:
    """:func:`advise` with each line's name (:func:`entry_id`): (id, text)."""
    nums = _numbers(v, row, k, rules)
    traits = launch_traits(v, row, rules)
    picked = [e for e in ADVICE if applies(e, v, traits)]
    if (other := (v.busy or {}).get("balanced_with")) and other.get("unit"):
        # a balanced launch: the side within the margin of the verdict's limits it as much, so its lines
        # (the pipe-specific ones: a generic line adds nothing to the verdict's own) follow the verdict's
        shadow = copy.copy(v)
        shadow.cls, shadow.unit, shadow.co_units, shadow.flags = other["class"], other["unit"], other["co_units"], []
        picked += [e for e in ADVICE if e not in picked and e[1] != ANY and applies(e, shadow, traits)]
    # the most specific replacing trait's line takes the place of the plain GEMM and MMA-family lines of its
    # class and unit (an attention kernel's softmax, a GEMM whose bytes are its output or its weights)
    best: dict[tuple[str, str], str] = {}
    for trait in REPLACING:
        for e in picked:
            if e[2] == trait:
                best.setdefault(e[:2], trait)
    picked = [
        e
        for e in picked
        if not (e[:2] in best and (e[2] in ("gemm", v.mma) or (e[2] in REPLACING and e[2] != best[e[:2]])))
    ]
    # a flag's line for the verdict's unit replaces the flag's generic one
    unit_flags = {e[0] for e in picked if e[0] in v.flags and e[0] != v.cls and e[1] != ANY}
    picked = [e for e in picked if not (e[0] in unit_flags and e[1] == ANY)]
    if "spill-traffic" in v.flags:
        # the bytes are the kernel's own spills: "move fewer bytes / no in-kernel change" would mislead,
        # and the spill-traffic line already cites the spill count
        picked = [e for e in picked if e[0] not in ("memory-bound", "register-spills")]
    if "l2-refetch" in v.flags or "gemm-l2-reuse" in v.flags:
        # coalescing and shared-memory reuse are what TMA already does, and a GEMM's L2 bytes are set by
        # its tile: the refetch line replaces them
        picked = [e for e in picked if e[:2] != ("memory-bound", "l2")]
    if v.cls == "under-filled" and v.unit == "launch":
        picked = [e for e in picked if not (e[0] == "under-filled" and e[1] == ANY)]
    # the generic compute line only where no pipe-specific one matched
    if any(e[0] == "compute-bound" and e[1] != ANY for e in picked):
        picked = [e for e in picked if not (e[0] == "compute-bound" and e[1] == ANY)]
    out = [(entry_id(e), e[4].format(**nums)) for e in picked]
    # split-K only where the tile grid may be small: not where the tiles are known to fill two rounds or more
    rounds = (v.fill.tiles or {}).get("tiles_per_cta_max", 0)
    if (
        v.kind == "gemm"
        and v.cls in ("under-filled", "compute-bound")
        and k is not None
        and k > nums_large_k()
        and rounds < 2
    ):
        out.append(("split-K", f"{SPLIT_K[0]} {SPLIT_K[1].format(**nums)}"))
    return out


def nums_large_k() -> float:
    return THRESHOLDS["large_k"]
