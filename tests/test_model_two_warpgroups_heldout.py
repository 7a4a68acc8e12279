"""The cooperative kernel's 256x128 tile of two consumer warpgroups on a shape none
of the tuned validation runs used (4000x8192x6144: M ragged, the last round 76% full), first on the
H100, then unchanged on an H200 (the same GH100 compute and 700 W / 1,980 MHz
limits, HBM3e at 4.8 TB/s and 60 MiB of L2), each prediction written in docs/model.md before its
run. The stored CSV/JSON are the devices' own output, re-scored here on the CPU. Both met, where the
two held-out shapes before them (ping-pong 4096x7168x2048, three warpgroups) missed; the tests say what differed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsprof.analyzers.model import validation as V

DATA = Path(__file__).parent / "data"
# run -> (stored directory, device, the as-scored median and max it came out at, the largest error of
# a point that moves the K-loop)
RUNS = {
    "h100": (DATA / "h100_timing" / "validation_coop_4000x8192x6144", "NVIDIA H100 80GB HBM3", 1.22, 2.84, 2.0),
    "h200": (DATA / "h200_timing" / "validation_coop_4000x8192x6144", "NVIDIA H200", 1.72, 2.90, 3.0),
}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request) -> tuple[dict, list, tuple]:
    path, *expected = RUNS[request.param]
    return (*V.rescore_stored(path), expected)


def test_as_scored_it_meets(run):
    """Written for both: median <= 2%, max <= 5%, meets (about 65% and 60%); in the captures' cycles
    median <= 1.5%, max <= 3.0%. Came out 1.22% / 2.84% on the H100 and 1.72% / 2.90% on the H200, in
    cycles 0.50% / 2.54% and 0.23% / 2.53%, over 13 points, no flip; the epilogue binds on both
    parts, the H200's faster memory notwithstanding."""
    doc, pts, (device, median, max_, _) = run
    assert doc["device"] == device and doc["variant"] == "optimized"
    assert doc["mnkl"][:3] == [4000, 8192, 6144] and doc["model_baseline"]["binding"] == "epilogue"
    s = V.summary(pts)
    assert s["det"]["pass"] and s["det"]["n"] == 13 and s["n_flip"] == 0
    assert s["det"]["median_abs_pct"] == pytest.approx(median, abs=0.01)
    assert s["det"]["max_abs_pct"] == pytest.approx(max_, abs=0.01)
    assert s["cycles"]["median_abs_pct"] <= 1.5 and s["cycles"]["max_abs_pct"] <= 3.0
    assert s["trivial"]["median_abs_pct"] > 3 * s["det"]["median_abs_pct"]


def test_a_k_loop_spin_costs_about_its_nominal_cycles_on_two_warpgroups(run):
    """What separates these runs from the three-warpgroup one: with two warpgroups on the tensor pipe an injected
    K-loop spin grew the K-loop phase by 1.06-1.10x its nominal cycles on both parts (three
    warpgroups: 0.59x; ping-pong, one at a time: 1.25x), so the model's nominal change is nearly the
    phase change and its K-loop points sit within 2% (H100) and 3% (H200) like the rest: the spin's
    cost in place belongs to the tile's structure, not to the part's memory."""
    doc, pts, (*_, kloop_max) = run
    means = doc["measured_phase_means"]
    fwd = sorted(
        (p for p in pts if p.direction == "forward" and p.delta_kloop and not p.delta_phase1),
        key=lambda p: p.delta_kloop,
    )
    grew = [means[k]["mma.kloop"] - means["plain"]["mma.kloop"] for k in ("kloop250_phase10", "kloop290_phase10")]
    ratios = [g / p.delta_kloop for g, p in zip(grew, fwd)]
    assert len(fwd) == 2 and all(1.0 < r < 1.15 for r in ratios), ratios
    assert all(abs(p.err_det_pct) < kloop_max for p in pts if p.delta_kloop)


def test_the_h200s_fallback_limits_are_the_ones_its_run_recorded():
    """A run without NVML limits (`bsprof model --clock` on an H200 table) falls back to the part's
    known limits by device name; they are what the H200 run read there (700 W, 1,980 MHz, a 121.5 W floor)."""
    from bsprof.analyzers.model.clock import limits_for

    doc, _ = V.rescore_stored(RUNS["h200"][0])
    known, rec = limits_for(doc["device"]), doc["device_limits"]
    assert known is not None and known != limits_for("NVIDIA H100 80GB HBM3")
    assert (known.max_mhz, known.power_limit_w) == (rec["max_mhz"], rec["power_limit_w"]) == (1980.0, 700.0)
    assert known.floor_w == pytest.approx(rec["floor_w"], abs=0.5)
