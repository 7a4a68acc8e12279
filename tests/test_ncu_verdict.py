"""Verdict rules on the real reports and on rows edited from them (each rule's boundary)."""

from __future__ import annotations

import pytest

from bsprof.analyzers.ncu.extract import extract
from bsprof.analyzers.ncu.rules import clean_message, rule_results
from bsprof.analyzers.ncu.verdict import CANDIDATES, THRESHOLDS, classify, stall_shares


@pytest.fixture(scope="module")
def cublas_row(data_dir):
    return extract(data_dir / "h100_cublas_fp8_4096.ncu-rep", flops=2 * 4096**3).table.iloc[0].to_dict()


@pytest.fixture(scope="module")
def tiny_row(data_dir):
    return extract(data_dir / "h100_cute_tiny.ncu-rep").table.iloc[0].to_dict()


def test_cublas_fp8_is_compute_bound_near_peak(cublas_row):
    v = classify(cublas_row)
    assert v.cls == "compute-bound" and v.detail == "near-peak"
    assert any("sol_compute_pct = 81.1 >= 60" in str(e) for e in v.evidence)
    assert any(str(e).startswith("tensor_pipe_pct = 86.5 >= 80") for e in v.evidence)
    assert v.candidates[0].startswith("fusion")
    assert any(c.startswith("split-K") for c in v.candidates)
    # K = 4096 is not "large": split-K drops out
    assert not any(c.startswith("split-K") for c in classify(cublas_row, k=4096).candidates)


def test_tiny_kernel_is_occupancy_limited(tiny_row):
    v = classify(tiny_row)
    assert v.cls == "occupancy-limited"
    assert "waves_per_sm" in str(v.evidence[0])


def test_memory_bound_when_memory_sol_leads(cublas_row):
    row = dict(cublas_row, sol_memory_pct=90.0)
    v = classify(row)
    assert v.cls == "memory-bound"
    assert v.candidates == CANDIDATES["memory-bound"]


def test_memory_sol_falls_back_to_unit_throughputs(cublas_row):
    row = dict(cublas_row, sol_memory_pct=float("nan"), sol_compute_pct=float("nan"), tensor_pipe_elapsed_pct=20.0,
               dram_throughput_pct=75.0)
    assert classify(row).cls == "memory-bound"


def test_sync_bound_vs_latency(cublas_row):
    low = dict(cublas_row, sol_compute_pct=30.0, sol_memory_pct=30.0)
    # real stalls: barrier is 30.8 % of cycles per issue, under the 35 % threshold -> latency
    share = stall_shares(low)["barrier"]
    assert share == pytest.approx(0.3076, abs=1e-3)
    v = classify(low)
    assert v.cls == "latency/sync-bound" and v.detail == "latency (barrier)"
    more_sync = dict(low, stall_barrier=low["stall_barrier"] * 2, warp_cycles_per_issue=low["warp_cycles_per_issue"] + low["stall_barrier"])
    v = classify(more_sync)
    assert v.cls == "latency/sync-bound" and v.detail == "sync"
    assert v.candidates[:3] == CANDIDATES["sync"]


def test_occupancy_limited_by_eligible_warps(cublas_row):
    row = dict(cublas_row, sol_compute_pct=20.0, sol_memory_pct=20.0, achieved_occupancy_pct=5.0, eligible_warps_per_cycle=0.2)
    assert classify(row).cls == "occupancy-limited"
    row["eligible_warps_per_cycle"] = THRESHOLDS["min_eligible_warps"]
    assert classify(row).cls == "latency/sync-bound"


def test_flags_bank_conflicts_and_spills(cublas_row):
    row = dict(cublas_row, smem_bank_conflicts=0.2 * cublas_row["smem_wavefronts"], spill_instructions=12.0)
    v = classify(row)
    assert v.flags == ["smem-bank-conflicts", "register-spills"]
    assert any("swizzle" in c for c in v.candidates)
    assert "smem-bank-conflicts" not in classify(cublas_row).flags  # 0.7 % on the real kernel


def test_ncu_rules_with_speedups(data_dir):
    from bsprof.analyzers.ncu_loader import iter_actions, load_report

    ctx = load_report(data_dir / "h100_cublas_fp8_4096.ncu-rep")
    rules = rule_results(next(iter_actions(ctx)))
    assert len(rules) == 12
    ids = {(r["section"], r["rule"]) for r in rules}
    assert ("SchedulerStats", "IssueSlotUtilization") in ids
    top = rules[0]
    assert top["rule"] == "MemoryCacheAccessPattern" and top["speedup_pct"] == pytest.approx(56.72, abs=0.01)
    assert top["speedup_type"] == "global"
    assert all("@section:" not in r["message"] for r in rules)
    speedups = [r["speedup_pct"] for r in rules if r["speedup_pct"] is not None]
    assert speedups == sorted(speedups, reverse=True)


def test_clean_message_links():
    assert clean_message("see the @section:WarpStateStats:Warp State Statistics@ and @url:Guide:https://x@") == \
        "see the Warp State Statistics and Guide"


# --- the bundled FP8-blockwise optimized kernel, profiled by `bsprof ncu --kernel optimized` on H100 ---
# (tests/data/h100_bsprof_fp8_optimized.ncu-rep: --set full, 38 passes;
#  tests/data/h100_bsprof_fp8_optimized_triage.ncu-rep: a triage run of the same kernel and problem)

def _nosol(row: dict) -> dict:
    """What a current --set triage row lacks: ncu's two SOL breakdowns."""
    return dict(row, sol_compute_pct=float("nan"), sol_memory_pct=float("nan"))


def test_bundled_kernel_full_and_triage_agree(data_dir):
    full = extract(data_dir / "h100_bsprof_fp8_optimized.ncu-rep", flops=2 * 4096**3).table.iloc[0].to_dict()
    tri = extract(data_dir / "h100_bsprof_fp8_optimized_triage.ncu-rep", flops=2 * 4096**3).table.iloc[0].to_dict()
    assert "Fp8BlockwiseGemm" in full["kernel"] and full["kernel"] == tri["kernel"]
    assert full["replay_passes"] == 38 and tri["replay_passes"] < 38
    assert full["inst_op_QGMMA"] == 1048576
    vf, vt = classify(full, k=4096), classify(tri, k=4096)
    assert (vf.cls, vf.detail) == (vt.cls, vt.detail) == ("compute-bound", "")  # tensor pipe 69.5 % < 80
    # and without the SOL breakdowns (today's triage list) the fallbacks decide the same
    for row in (full, tri):
        v = classify(_nosol(row), k=4096)
        assert (v.cls, v.detail) == ("compute-bound", "")
        assert str(v.evidence[0]).startswith("tensor_pipe_elapsed_pct = 65")


def test_cublas_verdict_survives_without_sol(cublas_row):
    v = classify(_nosol(cublas_row))
    assert (v.cls, v.detail) == ("compute-bound", "near-peak")


def test_triage_report_notes_what_it_lacks(data_dir):
    ex = extract(data_dir / "h100_bsprof_fp8_optimized_triage.ncu-rep")
    notes = ex.table.iloc[0]["notes"]
    assert "inst_op_*" in notes and "dram_bytes_read (dram__bytes_read.sum)" in notes
    assert not [c for c in ex.table.columns if c.startswith("inst_op_")]
    rules = ex.rules[0]
    assert {r["section"] for r in rules} <= {"LaunchStats", "Occupancy"}  # only the sections triage collects
