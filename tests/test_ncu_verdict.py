"""Verdict rules on the real reports and on rows edited from them (each rule's boundary)."""

from __future__ import annotations

import math

import pytest

from bsprof.analyzers.ncu.extract import extract
from bsprof.analyzers.ncu.peaks import peak_tflops, precision_from_opcodes
from bsprof.analyzers.ncu.rules import clean_message, rule_results
from bsprof.analyzers.ncu.verdict import THRESHOLDS, classify, stall_shares, tile_quantization


@pytest.fixture(scope="module")
def cublas(data_dir):
    ex = extract(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", flops=2 * 4096**3)
    return ex.table.iloc[0].to_dict(), ex.rules[0]


@pytest.fixture(scope="module")
def cublas_row(cublas):
    return cublas[0]


def test_cublas_fp8_is_tensor_bound_near_peak_with_both_denominators(cublas):
    row, rules = cublas
    v = classify(row, rules=rules)
    assert (v.label, v.detail, v.kind, v.arch) == ("compute-bound:tensor", "near-peak", "gemm", "sm_90")
    assert any("hottest pipe tensor: 87% of active cycles, 81% of elapsed" in f for f in v.facts)
    # L1/shared (the QGMMA operand path) is shown but not ranked as memory
    assert any("wgmma operand path" in f for f in v.facts)
    assert not any("2-CTA" in c or "TMEM" in c or "tcgen05" in c for c in v.candidates)
    assert any("ncu SOLBottleneck" in line and "agrees" in line for line in v.ncu)


def test_tiny_kernel_is_launch_bound(data_dir):
    ex = extract(data_dir / "h100_cute_tiny.ncu-rep.xz")
    v = classify(ex.table.iloc[0].to_dict(), rules=ex.rules[0])
    assert v.cls == "launch-bound"
    # the evidence is the launch's fixed cost: the share of the duration no SM is active
    assert [e.threshold_name for e in v.evidence] == ["launch_fixed_share"]
    assert v.evidence[0].value >= THRESHOLDS["launch_fixed_share"]
    # a report without the busiest SM's cycles falls back to the named duration cut-off
    row = {k: x for k, x in ex.table.iloc[0].to_dict().items() if k != "sm_active_cycles_max"}
    assert [e.threshold_name for e in classify(row).evidence] == ["tiny_duration_us", "tiny_active_share"]
    assert "CUDA graph" in v.candidates[0]
    assert not any("register" in c for c in v.candidates)


def test_idle_share_boundary(cublas_row):
    el = cublas_row["sm_elapsed_cycles_avg"]
    # (its L2 at 67% would count as a saturated global level: lowered here)
    idle = dict(cublas_row, l2_throughput_pct=40.0, sm_active_cycles_avg=el * (1 - THRESHOLDS["idle_share"]) - 1)
    v = classify(idle)
    assert v.cls == "under-filled" and v.evidence[0].threshold_name == "idle_share"
    assert v.busy["class"] == "compute-bound"  # the busy SMs' limiter stays reported
    busy = dict(idle, sm_active_cycles_avg=el * (1 - THRESHOLDS["idle_share"]) + 1)
    assert classify(busy).cls == "compute-bound"
    # a saturated DRAM limits whatever the grid: memory-bound, not under-filled
    assert classify(dict(idle, dram_throughput_pct=95.0)).label == "memory-bound:dram"


def test_memory_levels_and_operand_path(cublas_row):
    row = dict(cublas_row, pipe_tensor_pct=30.0, tensor_pipe_pct=30.0, l1_throughput_pct=95.0)
    v = classify(row)  # QGMMA executed: L1 at 95% is the operand path, so L2 (67%) leads
    assert v.label == "memory-bound:l2"
    # L2 barely above a saturated DRAM is the DRAM stream passing through
    assert classify(dict(row, dram_throughput_pct=62.0)).label == "memory-bound:dram"
    no_mma = {k: v for k, v in row.items() if not k.startswith("inst_op_")}
    no_mma.update(inst_op_FFMA=10.0, pipe_tensor_pct=0.0, tensor_pipe_pct=0.0)
    assert classify(no_mma).label == "memory-bound:l1"


def test_issue_bound_and_latency(cublas_row):
    low = {k: (0.0 if k.startswith("pipe_") else v) for k, v in cublas_row.items()}
    low.update(tensor_pipe_pct=0.0, dram_throughput_pct=10.0, l2_throughput_pct=10.0, l1_throughput_pct=10.0)
    v = classify(dict(low, issue_active_pct=THRESHOLDS["issue_bound_pct"]))
    assert v.label == "compute-bound:issue"
    v = classify(dict(low, issue_active_pct=20.0))
    assert v.cls == "latency-bound" and v.detail == "latency (barrier)"
    assert stall_shares(low)["barrier"] == pytest.approx(0.3076, abs=1e-3)
    # a persistent one-CTA-per-SM kernel is never told to raise occupancy
    assert "low-occupancy" not in classify(dict(low, issue_active_pct=20.0, achieved_occupancy_pct=5.0)).flags


def test_flags_bank_conflicts_and_spills(cublas_row):
    row = dict(cublas_row, smem_bank_conflicts=0.2 * cublas_row["smem_wavefronts"], spill_instructions=12.0)
    v = classify(row)
    assert v.flags == ["smem-bank-conflicts", "register-spills"]
    assert any("swizzle" in c for c in v.candidates)
    assert "smem-bank-conflicts" not in classify(cublas_row).flags  # 0.7 % on the real kernel


def test_advice_by_architecture(cublas_row):
    # the same numbers as a tcgen05 kernel on sm_100 (an sm_100 kernel issues UTC*MMA, never HGMMA)
    mma = cublas_row["inst_op_QGMMA"]
    sm100_row = {k: v for k, v in cublas_row.items() if k != "inst_op_QGMMA"}
    sm100 = classify(dict(sm100_row, arch="sm_100", inst_op_UTCQMMA=mma))
    assert sm100.mma == "tcgen05" and any("2-CTA" in c for c in sm100.candidates)
    hopper = classify(cublas_row)
    assert hopper.mma == "wgmma" and any("wgmma knobs" in c for c in hopper.candidates)
    assert not any("2-CTA" in c for c in hopper.candidates)
    # the same numbers from an mma.sync kernel: no wgmma knobs to turn, the wgmma kernel is the advice
    sync = classify(dict(sm100_row, inst_op_HMMA=mma))
    assert sync.mma == "mma.sync" and not any("wgmma knobs" in c for c in sync.candidates)
    assert any("issues mma.sync (HMMA" in c for c in sync.candidates)


def test_precision_from_opcodes_and_peaks():
    assert precision_from_opcodes({"HGMMA": 10, "FFMA": 100}) == ("fp16", "HGMMA")
    assert precision_from_opcodes({"QGMMA": 10}) == ("fp8", "QGMMA")
    assert precision_from_opcodes({"UTCOMMA": 1}) == ("fp4", "UTCOMMA")
    assert precision_from_opcodes({"FFMA": 3}) == ("fp32", "FFMA")
    assert precision_from_opcodes({"IADD3": 3}) == (None, None)
    assert precision_from_opcodes({"IMMA": 8, "LDSM": 2}) == ("int8", "IMMA")
    assert precision_from_opcodes({"DMMA": 8, "DMUL": 1}) == ("fp64", "DMMA")
    assert peak_tflops("NVIDIA H100 80GB HBM3", "int8") == 1979
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp64") == 67
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp8") == 1979


def test_tile_quantization_exact():
    t = tile_quantization((4096, 2112, 7168, 1), (128, 256), 132)
    assert t["tiles"] == 32 * 9 and t["tiles_per_cta_max"] == 3
    assert t["last_round_fill"] == pytest.approx((288 - 264) / 132)
    assert math.isclose(t["idle_share"], 1 - 288 / 396)


def test_ncu_rules_with_speedups(data_dir):
    from bsprof.analyzers.ncu_loader import iter_actions, load_report

    ctx = load_report(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    rules = rule_results(next(iter_actions(ctx)))
    assert len(rules) == 12
    top = rules[0]
    assert top["rule"] == "MemoryCacheAccessPattern" and top["speedup_pct"] == pytest.approx(56.72, abs=0.01)
    assert all("@section:" not in r["message"] for r in rules)
    speedups = [r["speedup_pct"] for r in rules if r["speedup_pct"] is not None]
    assert speedups == sorted(speedups, reverse=True)


def test_clean_message_links():
    assert (
        clean_message("see the @section:WarpStateStats:Warp State Statistics@ and @url:Guide:https://x@")
        == "see the Warp State Statistics and Guide"
    )


def test_bundled_kernel_full_and_triage_agree(data_dir):
    full = extract(data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz", flops=2 * 4096**3).table.iloc[0].to_dict()
    tri = extract(data_dir / "h100_bsprof_fp8_optimized_triage.ncu-rep.xz", flops=2 * 4096**3).table.iloc[0].to_dict()
    assert full["inst_op_QGMMA"] == 1048576 and full["precision_source"] == "executed QGMMA"
    vf, vt = classify(full, k=4096), classify(tri, k=4096)
    assert vf.label == vt.label == "compute-bound:tensor"
    assert vt.missing and any(m.startswith("InstructionStats") for m in vt.missing)
    assert not vf.missing


def test_occupancy_only_when_a_resource_caps_warps(cublas_row):
    low = {k: (0.0 if k.startswith("pipe_") else v) for k, v in cublas_row.items()}
    low.update(
        tensor_pipe_pct=0.0,
        dram_throughput_pct=10.0,
        l2_throughput_pct=10.0,
        l1_throughput_pct=10.0,
        issue_active_pct=20.0,
        grid_size=4096.0,
        occupancy_limit_shared_mem=2.0,
        occupancy_limit_registers=2.0,
        achieved_occupancy_pct=10.0,
        theoretical_occupancy_pct=25.0,
    )
    v = classify(low)
    assert v.cls == "latency-bound" and "low-occupancy" in v.flags
    assert any("registers and shared mem (2 CTA/SM)" in c for c in v.candidates)
    assert "low-occupancy" not in classify(dict(low, theoretical_occupancy_pct=100.0)).flags


def test_xu_bound_gets_transcendental_advice_not_gemm_advice(data_dir):
    """A softmax-like kernel whose XU pipe saturates: XU advice, nothing about K-loops or MMA tiles."""
    import json
    import lzma

    entries = json.loads(lzma.decompress((data_dir / "corpus" / "launches.json.xz").read_bytes()))
    row = dict(
        entries["softmax_fp32_4096x1024"]["columns"],
        pipe_xu_pct=85.0,
        sm_active_cycles_avg=1.0,
        sm_elapsed_cycles_avg=1.0,
        l2_throughput_pct=40.0,
    )
    v = classify(row)
    assert v.label == "compute-bound:xu" and v.kind == "other"
    text = " ".join(v.candidates)
    assert "exp2" in text and "85% of active" in text
    assert not any(w in text for w in ("K-loop", "split-K", "2-CTA", "wgmma", "tile"))


def test_tied_pipes_name_units_not_sub_pipes():
    """The fused 32-exp Triton kernel of the corpus: FMA 71.0% and XU 70.5% of active are named
    together; FMA's own sub-pipe (fmaheavy) at the same value is not a second unit."""
    import json
    import lzma
    from pathlib import Path

    entries = json.loads(lzma.decompress((Path(__file__).parent / "data" / "corpus" / "launches.json.xz").read_bytes()))
    row = entries["triton_exp32_sum_16M"]["columns"]
    v = classify(row)
    assert (v.label, v.co_units, v.detail) == ("compute-bound:fma", ["xu"], "fma and xu pipes tied")
    assert any(c.startswith("the XU pipe") for c in v.candidates)
    with_sub = classify(dict(row, pipe_fmaheavy_pct=row["pipe_fma_pct"]))
    assert with_sub.co_units == ["xu"]


def test_a_missing_section_says_how_to_collect_it(cublas_row):
    from bsprof.analyzers.ncu.verdict import missing_sections

    assert missing_sections(cublas_row) == []  # the full set lacks nothing
    no_ops = {k: v for k, v in cublas_row.items() if not k.startswith("inst_op_")}
    no_warp = dict(no_ops, warp_cycles_per_issue=math.nan)
    lines = missing_sections(no_warp)
    assert [line.split(":")[0] for line in lines] == ["WarpStateStats", "InstructionStats"]
    assert all("`ncu --section " in line and "`bsprof ncu --set full`" in line for line in lines)


def test_gb200_is_not_read_as_b200():
    from bsprof.analyzers.ncu.peaks import peak_tflops as sheet

    assert (sheet("NVIDIA GB200", "fp4"), sheet("NVIDIA B200", "fp4")) == (10000.0, 9000.0)
    assert sheet("NVIDIA H100 80GB HBM3", "fp4") is None and sheet("NVIDIA H100 PCIe", "fp8") == 1513.0


def _k256_rows(data_dir) -> dict:
    """Extracted rows of ours and DeepGEMM at 2048x4096x256 on the H100 (a kernel of ~11 us)."""
    import json

    from conftest import unxz_text

    doc = json.loads(unxz_text(data_dir / "h100_ncu_rows_k256.json.xz"))
    return {k: {c: (math.nan if x is None else x) for c, x in r.items()} for k, r in doc["rows"].items()}


def test_an_under_filled_launch_is_named_by_the_largest_share_of_its_idle_time(data_dir):
    # at K = 256 both kernels are under-filled, and most of the idle SM-time is the launch's own
    # (no SM active for ~20%): not tile quantization (ours: 3% of CTA-rounds idle) nor tail
    from bsprof.analyzers.ncu.advice import advise
    from bsprof.analyzers.ncu.verdict import idle_parts, tiles_from_row

    for name, row in _k256_rows(data_dir).items():
        v = classify(row)
        parts = idle_parts(v.fill, tiles_from_row(row))
        assert math.isclose(sum(parts.values()), 1 - v.fill.active_share, rel_tol=1e-9)
        assert v.cls == "under-filled" and v.unit == "launch" and v.detail.startswith("launch and ramp"), name
        assert max(parts, key=parts.get) == "launch" and 0.15 < parts["launch"] < 0.25
        tips = advise(v, row)
        assert tips[0].startswith("the idle SM-time is mostly the launch's own")
        assert not any(t.startswith("more tiles for the SMs") or "wgmma N tile" in t for t in tips), tips
    ours = _k256_rows(data_dir)["ours"]
    assert 0.01 < idle_parts(classify(ours).fill, tiles_from_row(ours))["quantization"] < 0.04


def test_tile_quantization_still_names_a_launch_whose_last_round_is_mostly_empty(data_dir):
    # the same H100 row edited to a long launch (busiest SM active 97%, average 60%) with a tile
    # grid whose last round is 6% full (272 tiles on 132 CTAs): quantization is then the largest
    # share of the idle time, and the verdict says so
    ours = _k256_rows(data_dir)["ours"]
    el = ours["sm_elapsed_cycles_avg"]
    row = dict(ours, sm_active_cycles_max=0.97 * el, sm_active_cycles_avg=0.60 * el)
    tiles = tile_quantization((2048, 4352, 256, 1), (256, 128), 132, (1, 2))
    v = classify(row, tiles=tiles)
    assert v.cls == "under-filled" and v.detail.startswith("tile quantization") and v.unit != "launch"


@pytest.fixture(scope="module")
def fp8_8192_pair(data_dir):
    """Our FP8 kernel at 8192^3 on the H100 under ncu (triage), the previous pick (256x128, two consumer
    warpgroups) and the one the per-problem choice now makes (192x128, three), both in 1x2 clusters."""
    return tuple(
        extract(data_dir / f"h100_bsprof_fp8_8192_{t}_triage.ncu-rep.xz").table.iloc[0].to_dict()
        for t in ("256x128", "192x128")
    )


def test_the_three_warpgroup_tile_keeps_the_tensor_pipe_busier_in_fewer_cycles(fp8_8192_pair):
    two, three = fp8_8192_pair
    vt, v3 = classify(two), classify(three)
    assert vt.label == v3.label == "compute-bound:tensor"
    assert three["pipe_tensor_pct"] > two["pipe_tensor_pct"] + 4  # 95.6 against 90.7 of active
    assert three["sm_elapsed_cycles_avg"] < 0.95 * two["sm_elapsed_cycles_avg"]
    # the clock the power cap left it took most of that back: 2% shorter, not 7%
    assert 0.95 < three["duration_ns"] / two["duration_ns"] < 1.0
    assert v3.fill.tiles["tiles"] == 2752 and v3.fill.tiles["tiles_per_cta_max"] == 21


def test_wgmma_advice_names_only_the_knobs_a_launch_leaves_open(fp8_8192_pair, cublas_row, data_dir):
    two, three = fp8_8192_pair
    one_cta = extract(data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz", flops=2 * 4096**3).table.iloc[0].to_dict()

    def knobs(row):
        (line,) = [c for c in classify(row).candidates if "wgmma knobs" in c]
        return line

    # 16 warps in clusters of 2: neither another warpgroup nor multicast is left to suggest
    assert "another consumer warpgroup" not in knobs(three) and "TMA multicast" not in knobs(three)
    assert "clusters of 2 CTAs already" in knobs(three)
    # 12 warps in clusters of 2: a third warpgroup is; 12 warps unclustered: both are
    assert "another consumer warpgroup" in knobs(two) and "(12 warps a CTA now)" in knobs(two)
    assert "TMA multicast" not in knobs(two)
    assert "another consumer warpgroup" in knobs(one_cta) and "TMA multicast" in knobs(one_cta)
    # 21 rounds of tiles a CTA: split-K is not advice for this grid, even at K = 8192
    assert not any(c.startswith("split-K") for c in classify(three, k=8192).candidates)
    # a foreign GEMM whose tile grid is unknown keeps it, with its condition
    assert any(c.startswith("split-K when K is large") for c in classify(cublas_row, k=8192).candidates)
