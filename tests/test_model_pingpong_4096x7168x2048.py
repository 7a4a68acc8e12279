"""The model on a shape no validation run had used (ping-pong 4096x7168x2048 on the H100, a
DeepSeek-V3 shape from DeepGEMM's test list), its prediction written in docs/model.md before the
run. The stored CSV/JSON are the device's own output; these tests re-score them on the CPU and hold
the written prediction against what came out: it missed, and the tests say where."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bsprof.analyzers.model import validation as V

RUN = Path(__file__).parent / "data" / "h100_timing" / "validation_pingpong_4096x7168x2048"


@pytest.fixture(scope="module")
def run() -> tuple[dict, list]:
    return V.rescore_stored(RUN)


def test_as_scored_it_misses_the_target(run):
    """Written: median <= 2% and max <= 5%, about even odds. Came out 2.19% / 8.64%: a miss, which
    the CPU re-score of the device's rows reproduces."""
    doc, pts = run
    assert doc["mnkl"][:3] == [4096, 7168, 2048]
    s = V.summary(pts)["det"]
    assert not s["pass"] and s["n"] == 17 and s["flip"]["n"] == 10
    assert s["median_abs_pct"] == pytest.approx(2.19, abs=0.01) and s["max_abs_pct"] == pytest.approx(8.64, abs=0.01)
    stored = doc["summary"]["det"]
    assert (s["median_abs_pct"], s["max_abs_pct"]) == pytest.approx((stored["median_abs_pct"], stored["max_abs_pct"]))


def test_the_wall_miss_is_the_clock_at_the_largest_epilogue_delay(run):
    """The max sits at forward Phase 1 +48.8k cycles (2.7 tiles of 17,880): measured 1.724x, model
    1.575x. Its cycles are within 3.5% (the captures' and the sustained ones), so the miss is the
    clock term: the plain build ran power-capped at 1,613 MHz, the delayed one, spinning through its
    epilogue, at NVML's 1,980 MHz top, a 22.8% rise the term took at its word while the SM counter
    ran 0.936 of NVML there (0.999 at the plain build's clock). The oracle shares the term and
    misses as much. Every other point is within 4.6%."""
    doc, pts = run
    assert doc["sustained_clocks_pooled"]["kloop0_phase149000"]["mhz"] == 1980.0
    assert doc["counter_vs_nvml"]["plain"] > 0.99 and doc["counter_vs_nvml"]["kloop0_phase149000"] < 0.94
    worst = max(pts, key=lambda p: abs(p.err_det_pct))
    assert worst.direction == "forward" and not worst.delta_kloop and worst.delta_phase1 > 48_000
    assert worst.err_det_pct == pytest.approx(-8.64, abs=0.01) and abs(worst.err_oracle_pct) > 8.0
    assert worst.projected_wall_det == pytest.approx(1.575, abs=0.001) and worst.measured_ratio == pytest.approx(
        1.724, abs=0.001
    )
    assert abs(V.cycle_error_pct(worst)) < 3.5 and abs(V.sustained_cycle_error_pct(worst)) < 3.5
    assert max(abs(p.err_det_pct) for p in pts if p is not worst) < 4.6


def test_the_cycles_miss_at_the_k_loop_delays_is_the_nominal_change(run):
    """Written: in the captures' cycles median <= 1.5%, max <= 3.0%. Came out 2.69% / 9.47%, the
    misses at the K-loop delays (forward 6-6.4% short, reverse 9.5% over): the spins cost more in
    place than the probe's nominal change (the +290 build's K-loop grew 6,787 cycles a tile against
    5,427), and the oracle, given the measured change, is within 2.0% there (0.9, 2.0, 0.8)."""
    doc, pts = run
    moved = [p for p in pts if p.direction != "noise"]
    cyc = [abs(V.cycle_error_pct(p)) for p in moved]
    assert statistics.median(cyc) == pytest.approx(2.69, abs=0.01) and max(cyc) == pytest.approx(9.47, abs=0.01)
    kloop = [p for p in moved if p.delta_kloop and not p.delta_phase1]
    assert all(abs(V.cycle_error_pct(p)) > 5.5 for p in kloop)
    assert all(abs(p.err_oracle_pct) < 2.01 for p in kloop)
    grew = (
        doc["measured_phase_means"]["kloop290_phase10"]["mma.kloop"] - doc["measured_phase_means"]["plain"]["mma.kloop"]
    )
    (fwd,) = [p for p in kloop if p.direction == "forward" and p.delta_kloop > 5_000]
    assert grew / fwd.delta_kloop == pytest.approx(1.25, abs=0.01)


def test_the_model_still_beats_the_trivial_rule_on_the_flips(run):
    """Written: the trivial predictor >= 50% median on the flip points, the model below it (held)."""
    _doc, pts = run
    s = V.summary(pts)
    assert s["trivial"]["flip"]["median_abs_pct"] >= 50
    assert s["det"]["flip"]["median_abs_pct"] < s["trivial"]["flip"]["median_abs_pct"]
