"""The metric table: every column bsprof extracts from an .ncu-rep, the ncu metric names behind it
(per architecture where they differ), its unit and what it means.

A column lists candidate ncu names; the first one present in the launch wins, so one table serves
reports from ``--set full``, from bsprof's ``--set triage`` (explicit ``--metrics``) and from both
Hopper and Blackwell. A column none of whose names is present is NaN and gets a note.

Tensor-pipe utilization is where the architectures differ:

* sm_90 (Hopper, H100/H200): WGMMA (HGMMA/QGMMA/IGMMA) and legacy HMMA all run on the tensor pipe;
  utilization is ``sm__pipe_tensor_cycles_active`` (86.5 % "of peak sustained active" for the cuBLAS FP8
  nvjet kernel in tests/data). ``sm__inst_executed_pipe_tensor_op_gmma`` is the *instruction issue*
  rate (5.4 % there: one QGMMA keeps the pipe busy for many cycles), not utilization.
* sm_100 (Blackwell, B200): tcgen05 UTCMMA instructions are issued to the ``tc`` pipe;
  utilization is ``sm__pipe_tc_cycles_active`` (Nsight Compute adds it for UTCMMA-capable chips,
  SM 10.x). ``sm__pipe_tensor_cycles_active`` still exists there but does not count tcgen05 work
  the same way, so it is only a fallback. Tensor memory (TMEM) activity is
  ``sm__mem_tensor_cycles_active``; issued tcgen05 instructions ``sm__inst_executed_pipe_tc``.
  Check on the target with ``ncu --query-metrics | grep -E 'sm__pipe_(tc|tensor)'``.
"""

from __future__ import annotations

from dataclasses import dataclass

PCT_ACTIVE = ".avg.pct_of_peak_sustained_active"
PCT_ELAPSED = ".avg.pct_of_peak_sustained_elapsed"
SM_COUNT_METRIC_NAME = "device__attribute_multiprocessor_count"


@dataclass(frozen=True)
class Metric:
    column: str
    names: tuple[str, ...]  # candidate ncu names, first present wins
    unit: str
    doc: str
    arch: str = "any"  # "any", "sm_90" or "sm_100": only looked up on that arch
    verdict: bool = False  # the verdict reads it, so --set triage must collect it


def _m(column, names, unit, doc, arch="any", verdict=False) -> Metric:
    return Metric(column, tuple([names] if isinstance(names, str) else names), unit, doc, arch, verdict)


# Scalar metrics, in column order. The ``names`` here are what the JSON "metrics" dict is keyed by.
METRICS: tuple[Metric, ...] = (
    _m("duration_ns", "gpu__time_duration.sum", "ns", "kernel duration (GPU timestamps)", verdict=True),
    _m("sm_clock_hz", "sm__cycles_elapsed.avg.per_second", "Hz", "average SM clock during the launch"),
    _m("dram_clock_hz", "dram__cycles_elapsed.avg.per_second", "Hz", "average DRAM clock during the launch"),
    _m(
        "max_sm_clock_khz",
        "device__attribute_max_gpu_frequency_khz",
        "kHz",
        "the part's top SM clock (a device attribute)",
    ),
    _m("elapsed_cycles", "gpc__cycles_elapsed.max", "cycle", "elapsed GPC cycles"),
    _m("grid_x", "launch__grid_dim_x", "", "grid size x"),
    _m("grid_y", "launch__grid_dim_y", "", "grid size y"),
    _m("grid_z", "launch__grid_dim_z", "", "grid size z"),
    _m("block_x", "launch__block_dim_x", "", "block size x"),
    _m("block_y", "launch__block_dim_y", "", "block size y"),
    _m("block_z", "launch__block_dim_z", "", "block size z"),
    _m("cluster_x", "launch__cluster_dim_x", "", "cluster size x (0: no cluster launch)"),
    _m("cluster_y", "launch__cluster_dim_y", "", "cluster size y"),
    _m("cluster_z", "launch__cluster_dim_z", "", "cluster size z"),
    _m("waves_per_sm", "launch__waves_per_multiprocessor", "", "CTAs / (SMs x CTAs per SM)", verdict=True),
    _m("registers_per_thread", "launch__registers_per_thread", "reg", "registers per thread", verdict=True),
    _m("smem_static_bytes", "launch__shared_mem_per_block_static", "B", "static shared memory per block"),
    _m("smem_dynamic_bytes", "launch__shared_mem_per_block_dynamic", "B", "dynamic shared memory per block"),
    _m("smem_per_block_bytes", "launch__shared_mem_per_block", "B", "shared memory per block incl. driver reserve"),
    _m(
        "local_spill_requests",
        "derived__local_spilling_requests",
        "req",
        "local-memory requests caused by register spills",
    ),
    _m("spill_instructions", "sass__inst_executed_register_spilling", "inst", "executed spill/fill instructions"),
    _m("local_load_sectors", "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "sector", "local-memory load sectors"),
    _m("local_store_sectors", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", "sector", "local-memory store sectors"),
    _m(
        "achieved_occupancy_pct",
        "sm__warps_active" + PCT_ACTIVE,
        "%",
        "achieved occupancy: active warps / max warps",
        verdict=True,
    ),
    _m(
        "theoretical_occupancy_pct",
        "sm__maximum_warps_per_active_cycle_pct",
        "%",
        "theoretical occupancy from the launch's resources",
        verdict=True,
    ),
    _m(
        "sol_compute_pct",
        "sm__throughput" + PCT_ELAPSED,
        "%",
        "SM speed-of-light: busiest SM unit/pipe, % of peak",
        verdict=True,
    ),
    _m(
        "sol_memory_pct",
        "gpu__compute_memory_throughput" + PCT_ELAPSED,
        "%",
        "memory speed-of-light: busiest of DRAM/L2/L1/shared, % of peak",
        verdict=True,
    ),
    _m(
        "dram_throughput_pct",
        ("gpu__dram_throughput" + PCT_ELAPSED, "dram__throughput" + PCT_ELAPSED),
        "%",
        "DRAM throughput, % of peak",
        verdict=True,
    ),
    _m("dram_bytes_read", "dram__bytes_read.sum", "B", "bytes read from DRAM"),
    _m("dram_bytes_write", "dram__bytes_write.sum", "B", "bytes written to DRAM"),
    _m("l2_throughput_pct", "lts__throughput" + PCT_ELAPSED, "%", "L2 throughput, % of peak", verdict=True),
    _m("l1_throughput_pct", "l1tex__throughput" + PCT_ELAPSED, "%", "L1/TEX throughput, % of peak", verdict=True),
    _m("l2_hit_pct", "lts__t_sector_hit_rate.pct", "%", "L2 sector hit rate", verdict=True),
    _m("l1_hit_pct", "l1tex__t_sector_hit_rate.pct", "%", "L1/TEX sector hit rate", verdict=True),
    _m(
        "smem_bank_conflicts",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
        "",
        "shared-memory bank conflicts (LSU path; TMA/GMMA traffic is not counted)",
        verdict=True,
    ),
    # On Hopper the wgmma operand reads from smem are counted here too (~11.7 wavefronts per
    # executed QGMMA warp-instruction on top of the LDS/STS/STSM ones, in the shipped reports)
    _m(
        "smem_wavefronts",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
        "",
        "shared-memory wavefronts on the LSU data pipe (loads, stores and, on Hopper, wgmma operand reads)",
        verdict=True,
    ),
    # how much room an overlap that reads or writes smem (an epilogue under the K-loop) has left
    _m(
        "smem_pipe_pct",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed",
        "%",
        "shared-memory data pipe busy, % of peak (wavefronts incl. wgmma operand reads)",
    ),
    _m(
        "tensor_pipe_pct",
        "sm__pipe_tensor_cycles_active" + PCT_ACTIVE,
        "%",
        "tensor pipe busy, % of active cycles (HGMMA/QGMMA/HMMA on Hopper)",
        arch="sm_90",
        verdict=True,
    ),
    _m(
        "tensor_pipe_pct",
        ("sm__pipe_tc_cycles_active" + PCT_ACTIVE, "sm__pipe_tensor_cycles_active" + PCT_ACTIVE),
        "%",
        "tcgen05 (UTCMMA) pipe busy, % of active cycles",
        arch="sm_100",
        verdict=True,
    ),
    _m(
        "tensor_pipe_pct",
        ("sm__pipe_tc_cycles_active" + PCT_ACTIVE, "sm__pipe_tensor_cycles_active" + PCT_ACTIVE),
        "%",
        "tensor pipe busy on other architectures",
        arch="other",
        verdict=False,
    ),
    _m(
        "tensor_pipe_elapsed_pct",
        "sm__pipe_tensor_cycles_active" + PCT_ELAPSED,
        "%",
        "tensor pipe busy, % of elapsed cycles",
        arch="sm_90",
        verdict=True,
    ),
    _m(
        "tensor_pipe_elapsed_pct",
        ("sm__pipe_tc_cycles_active" + PCT_ELAPSED, "sm__pipe_tensor_cycles_active" + PCT_ELAPSED),
        "%",
        "tcgen05 pipe busy, % of elapsed cycles",
        arch="sm_100",
        verdict=True,
    ),
    _m(
        "tensor_pipe_elapsed_pct",
        ("sm__pipe_tc_cycles_active" + PCT_ELAPSED, "sm__pipe_tensor_cycles_active" + PCT_ELAPSED),
        "%",
        "tensor pipe busy on other architectures",
        arch="other",
    ),
    _m(
        "tensor_inst_issue_pct",
        "sm__inst_executed_pipe_tensor_op_gmma" + PCT_ACTIVE,
        "%",
        "WGMMA instruction issue rate (not utilization)",
        arch="sm_90",
    ),
    _m(
        "tensor_inst_issue_pct",
        "sm__inst_executed_pipe_tc" + PCT_ACTIVE,
        "%",
        "tcgen05 instruction issue rate (not utilization)",
        arch="sm_100",
    ),
    _m("tmem_pct", "sm__mem_tensor_cycles_active" + PCT_ACTIVE, "%", "tensor memory (TMEM) busy", arch="sm_100"),
    _m("tma_pipe_pct", "sm__pipe_tma_cycles_active" + PCT_ACTIVE, "%", "TMA unit busy, % of active cycles"),
    _m(
        "issue_active_pct",
        "smsp__issue_active" + PCT_ACTIVE,
        "%",
        "issue-slot utilization: cycles a scheduler issued",
        verdict=True,
    ),
    _m(
        "eligible_warps_per_cycle",
        "smsp__warps_eligible.avg.per_cycle_active",
        "warp",
        "warps ready to issue per scheduler cycle",
        verdict=True,
    ),
    _m(
        "warp_cycles_per_issue",
        "smsp__average_warp_latency_per_inst_issued.ratio",
        "cycle",
        "cycles between two issues of a warp (sum of all stall reasons)",
        verdict=True,
    ),
    _m("inst_executed", "smsp__inst_executed.sum", "inst", "executed warp instructions"),
    # is the GPU filled: SM-time busy vs elapsed, and how the grid maps onto the SMs
    _m("sm_count", SM_COUNT_METRIC_NAME, "SM", "multiprocessors on the device", verdict=True),
    _m("grid_size", "launch__grid_size", "CTA", "CTAs launched", verdict=True),
    _m("cluster_size", "launch__cluster_size", "CTA", "CTAs per cluster (0 or 1: no cluster)"),
    _m(
        "sm_active_cycles_avg",
        "sm__cycles_active.avg",
        "cycle",
        "cycles an SM had at least one warp, average over SMs",
        verdict=True,
    ),
    _m("sm_active_cycles_max", "sm__cycles_active.max", "cycle", "the busiest SM's active cycles", verdict=True),
    # an SM active only a sliver of the busiest one's cycles did no real work (its CTAs found none and exited)
    _m("sm_active_cycles_min", "sm__cycles_active.min", "cycle", "the least busy SM's active cycles", verdict=True),
    _m("sm_elapsed_cycles_avg", "sm__cycles_elapsed.avg", "cycle", "elapsed SM cycles", verdict=True),
    _m(
        "occupancy_limit_blocks",
        "launch__occupancy_limit_blocks",
        "CTA",
        "CTAs per SM allowed by the hardware's CTA slots",
    ),
    _m("occupancy_limit_registers", "launch__occupancy_limit_registers", "CTA", "CTAs per SM allowed by registers"),
    _m(
        "occupancy_limit_shared_mem",
        "launch__occupancy_limit_shared_mem",
        "CTA",
        "CTAs per SM allowed by shared memory",
    ),
    _m("occupancy_limit_warps", "launch__occupancy_limit_warps", "CTA", "CTAs per SM allowed by warp slots"),
    _m("occupancy_limit_barriers", "launch__occupancy_limit_barriers", "CTA", "CTAs per SM allowed by named barriers"),
    # bytes per memory level
    _m("l2_sectors", "lts__t_sectors.sum", "sector", "32-byte sectors through L2 (all requests)"),
    # what the SMs read from L2 (loads and TMA), against the operands' own bytes: a TMA GEMM that reads
    # its tiles from L2 several times over is told about CTA placement, not coalescing
    _m(
        "l2_read_sectors_sm",
        "lts__t_sectors_srcunit_tex_op_read.sum",
        "sector",
        "32-byte sectors the SMs read from L2 (L1/TEX and TMA requests)",
        verdict=True,
    ),
    _m(
        "l2_read_miss_sectors_sm",
        "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
        "sector",
        "of those, sectors that missed in L2",
        verdict=True,
    ),
    _m(
        "l1_throughput_active_pct",
        "l1tex__throughput" + PCT_ACTIVE,
        "%",
        "L1/TEX throughput, % of peak over active cycles",
    ),
    _m("l2_atomic_pct", "lts__d_atomic_input_cycles_active" + PCT_ELAPSED, "%", "L2 atomic units busy, % of peak"),
    _m(
        "gmma_issue_pct",
        "sm__inst_executed_pipe_tensor_op_gmma" + PCT_ACTIVE,
        "%",
        "WGMMA issue rate (sm_90)",
        arch="sm_90",
    ),
)

# Pipes for "what limits the busy SMs": column pipe_<name>_pct = the larger of the pipe's cycle
# utilization and its instruction issue rate, both % of peak over *active* cycles (ncu's Compute
# Workload Analysis chart). "shared" (the logical sum of the FP64 and tensor pipes on Hopper) and
# TMA are left out: neither is a unit a kernel is told to use less of.
PIPES: dict[str, tuple[str, ...]] = {
    "tensor": (
        "sm__pipe_tensor_cycles_active" + PCT_ACTIVE,
        "sm__pipe_tc_cycles_active" + PCT_ACTIVE,
        "sm__inst_executed_pipe_tensor" + PCT_ACTIVE,
    ),
    "fma": ("sm__pipe_fma_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_fma" + PCT_ACTIVE),
    "fmaheavy": ("sm__pipe_fmaheavy_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_fmaheavy" + PCT_ACTIVE),
    "alu": ("sm__pipe_alu_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_alu" + PCT_ACTIVE),
    "xu": ("sm__pipe_xu_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_xu" + PCT_ACTIVE),
    "lsu": ("sm__pipe_lsu_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_lsu" + PCT_ACTIVE),
    "fp64": ("sm__pipe_fp64_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_fp64" + PCT_ACTIVE),
    "fp16": ("sm__pipe_fp16_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_fp16" + PCT_ACTIVE),
    "uniform": ("sm__pipe_uniform_cycles_active" + PCT_ACTIVE, "sm__inst_executed_pipe_uniform" + PCT_ACTIVE),
    "adu": ("sm__inst_executed_pipe_adu" + PCT_ACTIVE,),
    "cbu": ("sm__inst_executed_pipe_cbu" + PCT_ACTIVE,),
    "tex": ("sm__inst_executed_pipe_tex" + PCT_ACTIVE,),
}
# collected by --set triage too (the pipes a foreign kernel most often saturates)
TRIAGE_PIPES = ("tensor", "fma", "alu", "xu", "lsu")

# Warp-stall reasons: column stall_<reason> = cycles per issued instruction spent in that state
# (ncu's "Warp State Statistics"). Hopper adds "gmma" (waiting on WGMMA); reasons found in a report
# beyond this list are picked up too (see extract.stall_reasons).
STALL_REASONS: tuple[str, ...] = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "gmma",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"


def stall_metric(reason: str) -> str:
    return f"{STALL_PREFIX}{reason}{STALL_SUFFIX}"


OPCODE_METRIC = "sass__inst_executed_per_opcode"  # instanced: one value per SASS opcode
REPLAY_PASSES_METRIC = "profiler__replayer_passes"
DEVICE_NAME_METRIC = "device__attribute_display_name"
CC_MAJOR_METRIC = "device__attribute_compute_capability_major"
CC_MINOR_METRIC = "device__attribute_compute_capability_minor"
SM_COUNT_METRIC = "device__attribute_multiprocessor_count"


def arch_key(cc_major: int | None) -> str:
    return {9: "sm_90", 10: "sm_100"}.get(cc_major or -1, "other")


def metrics_for_arch(arch: str) -> list[Metric]:
    return [m for m in METRICS if m.arch in ("any", arch)]


# Left out of --set triage's --metrics:
# * sm__maximum_warps_per_active_cycle_pct comes from ncu's Occupancy section (triage adds the section);
# * the two SOL breakdowns cost 10 replay passes on their own on H100 (of triage's 17 with them, full's
#   38); without them triage takes 10 passes and the verdict reads compute SOL from the tensor pipe /
#   issue activity and memory SOL from DRAM/L2/L1 throughput (docs/perf.md, benchmarks/ncu.py).
SECTION_ONLY = {"sm__maximum_warps_per_active_cycle_pct"}
TRIAGE_SKIP = SECTION_ONLY | {"sm__throughput" + PCT_ELAPSED, "gpu__compute_memory_throughput" + PCT_ELAPSED}
TRIAGE_SECTIONS = ("LaunchStats", "Occupancy")


def triage_metric_names(arch: str) -> list[str]:
    """What ``--set triage`` passes to ``ncu --metrics``: exactly what the verdict and the headline
    columns read (one name per column: the first candidate, which is the one ncu can collect on
    that arch), plus the stall reasons and launch facts."""
    names: list[str] = []
    for m in metrics_for_arch(arch):
        if m.names[0] in TRIAGE_SKIP:
            continue
        if m.verdict or m.names[0].startswith("launch__"):
            # gpu__dram_throughput is a section-level name; the raw counter rollup is collectable.
            first = m.names[-1] if m.column == "dram_throughput_pct" else m.names[0]
            names.append(first)
    names += [
        "sm__cycles_elapsed.avg.per_second",
        "launch__grid_dim_x",
        "launch__grid_dim_y",
        "launch__grid_dim_z",
        "launch__block_dim_x",
        "launch__block_dim_y",
        "launch__block_dim_z",
    ]
    names += [PIPES[p][-1] for p in TRIAGE_PIPES if p != "tensor"]
    reasons = [r for r in STALL_REASONS if r != "gmma" or arch == "sm_90"]
    names += [stall_metric(r) for r in reasons]
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]
