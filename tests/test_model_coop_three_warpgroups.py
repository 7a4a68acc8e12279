"""The cooperative kernel's 192x128 tile of three consumer warpgroups on a layer shape
none of the kernels' choices was fitted on (6144x4096x14336 on the H100), its prediction written in
docs/model.md before the run. The stored CSV/JSON are the device's own output, re-scored here on
the CPU. It missed; the model given the measured phase changes (the oracle) met, and the tests say
why the two differ."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsprof.analyzers.model import validation as V

RUN = Path(__file__).parent / "data" / "h100_timing" / "validation_coop_6144x4096x14336"


@pytest.fixture(scope="module")
def run() -> tuple[dict, list]:
    return V.rescore_stored(RUN)


def test_as_scored_it_misses_and_the_oracle_meets(run):
    """Written: median <= 2%, max <= 5%, meets (about 60%). Came out 2.32% / 11.35%; the oracle,
    the same model given each build's measured phase changes, 1.07% / 2.71%."""
    doc, pts = run
    assert doc["mnkl"][:3] == [6144, 4096, 14336] and doc["model_baseline"]["binding"] == "epilogue"
    s = V.summary(pts)
    assert not s["det"]["pass"] and s["det"]["n"] == 12 and s["det"]["flip"]["n"] == 0
    assert s["det"]["median_abs_pct"] == pytest.approx(2.32, abs=0.01)
    assert s["det"]["max_abs_pct"] == pytest.approx(11.35, abs=0.01)
    assert s["oracle"]["median_abs_pct"] <= 2.0 and s["oracle"]["max_abs_pct"] <= 5.0


def test_a_k_loop_spin_grows_the_k_loop_by_six_tenths_of_its_cost_on_three_warpgroups(run):
    """The misses are the K-loop delay points (7-11%): each warpgroup's injected spin runs while the
    other two warpgroups' MMAs keep the tensor pipe busy, so the K-loop phase grew by 19,644 cycles
    a tile against the probe's nominal 33,528 (0.59x; on the one-warpgroup-at-a-time ping-pong at
    4096x7168x2048 it was 1.25x). Every point without a K-loop delay is within 2.7%."""
    doc, pts = run
    grew = (
        doc["measured_phase_means"]["kloop250_phase10"]["mma.kloop"] - doc["measured_phase_means"]["plain"]["mma.kloop"]
    )
    (fwd,) = [p for p in pts if p.direction == "forward" and p.delta_kloop and not p.delta_phase1]
    assert grew / fwd.delta_kloop == pytest.approx(0.59, abs=0.01)
    kloop = [p for p in pts if p.delta_kloop]
    assert kloop and all(abs(p.err_det_pct) > 7.0 for p in kloop)
    assert all(abs(p.err_det_pct) < 2.7 for p in pts if not p.delta_kloop)
