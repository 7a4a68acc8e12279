"""Extraction from the real H100 reports in tests/data (recorded with ncu 2025.3.1, --set full)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from bsprof.analyzers.ncu import metrics as M
from bsprof.analyzers.ncu.extract import extract, list_kernels, opcode_counts
from bsprof.analyzers.ncu.peaks import peak_tflops
from bsprof.analyzers.ncu_loader import load_report
from bsprof.errors import BsprofError

FLOPS_4096 = 2.0 * 4096**3


@pytest.fixture(scope="module")
def cublas(data_dir):
    return extract(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", flops=FLOPS_4096)


@pytest.fixture(scope="module")
def tiny(data_dir):
    return extract(data_dir / "h100_cute_tiny.ncu-rep.xz")


def test_one_row_per_launch_with_launch_facts(cublas):
    t = cublas.table
    assert isinstance(t, pd.DataFrame) and len(t) == 1
    r = t.iloc[0]
    assert r["kernel"] == "nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT"
    assert r["arch"] == "sm_90" and r["compute_capability"] == "9.0"
    assert r["device"] == "NVIDIA H100 80GB HBM3"
    assert (r["grid_x"] * r["grid_y"] * r["grid_z"]) == 132
    assert (r["block_x"], r["cluster_x"], r["cluster_y"]) == (384, 2, 1)
    assert r["registers_per_thread"] == 168
    assert r["smem_dynamic_bytes"] == 213220
    assert r["duration_ns"] == pytest.approx(103552.0)
    assert r["replay_passes"] == 38


def test_throughput_occupancy_and_tensor_pipe(cublas):
    r = cublas.table.iloc[0]
    assert r["sol_compute_pct"] == pytest.approx(81.08, abs=0.01)
    assert r["sol_memory_pct"] == pytest.approx(65.41, abs=0.01)
    assert r["tensor_pipe_metric"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    assert r["tensor_pipe_pct"] == pytest.approx(86.50, abs=0.01)
    # on Hopper the GEMM's SM SOL *is* the tensor pipe
    assert r["tensor_pipe_elapsed_pct"] == pytest.approx(r["sol_compute_pct"])
    assert r["achieved_occupancy_pct"] == pytest.approx(14.77, abs=0.01)
    assert r["theoretical_occupancy_pct"] == pytest.approx(18.75)
    assert 0 < r["l2_hit_pct"] < 100 and 0 < r["l1_hit_pct"] < 100
    assert r["dram_throughput_pct"] == pytest.approx(23.49, abs=0.01)
    assert r["spill_instructions"] == 0


def test_stall_breakdown_sums_to_cycles_per_issue(cublas):
    r = cublas.table.iloc[0]
    stalls = {c: r[c] for c in cublas.table.columns if c.startswith("stall_")}
    assert "stall_gmma" in stalls  # Hopper-only reason
    assert max(stalls, key=stalls.get) == "stall_barrier"
    assert sum(stalls.values()) == pytest.approx(r["warp_cycles_per_issue"], rel=0.01)


def test_opcodes_include_qgmma(cublas):
    ops = opcode_counts(cublas.table.iloc[0])
    assert ops["QGMMA"] == 1048576
    # 4096^3 * 2 FLOPs over 1M QGMMA warp instructions: 64x128x32 per warpgroup instr / 4 warps
    assert FLOPS_4096 / ops["QGMMA"] == pytest.approx(131072)
    assert list(ops)[0] == "FADD"  # sorted by count


def test_derived_tflops_and_peak(cublas):
    r = cublas.table.iloc[0]
    assert r["tflops"] == pytest.approx(FLOPS_4096 / 103552e-9 / 1e12)
    assert r["precision"] == "fp8" and r["peak_tflops"] == 1979
    assert r["pct_of_peak"] == pytest.approx(100 * r["tflops"] / 1979)


def test_no_flops_means_nan_not_zero(tiny):
    r = tiny.table.iloc[0]
    assert math.isnan(r["tflops"]) and math.isnan(r["pct_of_peak"])


def test_raw_metrics_keyed_by_ncu_names(cublas):
    raw = cublas.raw_metrics[0]
    assert raw["gpu__time_duration.sum"] == pytest.approx(103552.0)
    assert raw["launch__registers_per_thread"] == 168
    assert M.stall_metric("barrier") in raw


def test_tiny_kernel_edge_cases(tiny):
    r = tiny.table.iloc[0]
    assert r["block_x"] == 32 and r["grid_x"] == 1
    assert r["cluster_x"] == 0  # not a cluster launch: 0, not NaN
    assert r["tensor_pipe_pct"] == 0
    assert r["notes"] == ""


def test_missing_metrics_become_nan_with_a_note(data_dir):
    """Drop metrics from a real launch by looking them up on an arch whose names the report lacks."""
    ctx = load_report(data_dir / "h100_cute_tiny.ncu-rep.xz")
    from bsprof.analyzers.ncu.extract import launch_row
    from bsprof.analyzers.ncu_loader import iter_actions

    action = next(iter_actions(ctx))
    orig = M.arch_key
    try:
        M.arch_key = lambda major: "sm_100"  # an H100 report has no sm__pipe_tc_* / TMEM metrics
        row, raw, missing = launch_row(action, 0, None, None)
    finally:
        M.arch_key = orig
    assert math.isnan(row["tmem_pct"]) and math.isnan(row["tensor_inst_issue_pct"])
    # sm_100's tensor-pipe column falls back to the generic name when sm__pipe_tc_* is absent
    assert row["tensor_pipe_metric"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    assert any("sm__mem_tensor_cycles_active" in m for m in missing)
    assert "tmem_pct" in row["notes"]
    # what is there is still read
    assert row["duration_ns"] == pytest.approx(2656.0)


def test_filter_and_kernel_listing(data_dir):
    path = data_dir / "h100_cublas_fp8_4096.ncu-rep.xz"
    assert len(extract(path, filter="nvjet").table) == 1
    with pytest.raises(BsprofError, match="matches no kernel.*nvjet_sm90_qqtst"):
        extract(path, filter="^gemm_that_is_not_there$")
    with pytest.raises(BsprofError, match="not a valid regular expression"):
        extract(path, filter="(")
    assert list_kernels(load_report(path)) == ["nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT"]


def test_peak_table():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp8") == 1979
    assert peak_tflops("NVIDIA H100 PCIe", "fp8") == 1513
    assert peak_tflops("NVIDIA H200", "fp8") == 1979
    assert peak_tflops("NVIDIA B200", "fp4") == 9000
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "fp8") is None


def test_triage_list_per_arch():
    h, b = M.triage_metric_names("sm_90"), M.triage_metric_names("sm_100")
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in h
    assert "sm__pipe_tc_cycles_active.avg.pct_of_peak_sustained_active" in b
    assert M.stall_metric("gmma") in h and M.stall_metric("gmma") not in b
    assert len(h) == len(set(h))
    # every verdict input on sm_90 is collected by triage (or by its sections)
    for m in M.metrics_for_arch("sm_90"):
        if m.verdict:
            assert any(n in h for n in m.names) or m.names[0] in M.TRIAGE_SKIP, m.column
    # the SOL breakdowns (10 replay passes on H100) stay out; the verdict falls back without them
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" not in h


def test_shared_memory_pipe_counts_the_wgmma_operand_reads(cublas, data_dir):
    # the LSU shared-memory wavefronts include the QGMMA's smem operand reads: on cuBLAS' FP8
    # GEMM the pipe is 65% busy, though its own LDS/STS are a small part of those wavefronts
    r = cublas.table.iloc[0]
    assert r["smem_pipe_pct"] == pytest.approx(64.59, abs=0.01)
    assert r["smem_wavefronts"] == 13364100
    # not in bsprof's triage metric list: absent, not guessed
    triage = extract(data_dir / "h100_bsprof_fp8_optimized_triage.ncu-rep.xz").table.iloc[0]
    assert math.isnan(triage["smem_pipe_pct"])
