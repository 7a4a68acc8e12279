"""Round 10: the cooperative kernel's 256x128 tile of two consumer warpgroups on a shape none of the
tuned validation runs used (4000x8192x6144 on the H100: M ragged, the last round 76% full), its
prediction written in docs/model.md before the run. The stored CSV/JSON are the device's own output,
re-scored here on the CPU. It met, where the two held-out rounds before it (ping-pong, three
warpgroups) missed; the tests say what differed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bsprof.analyzers import validation as V

RUN = Path(__file__).parent / "data" / "h100_timing" / "validation_coop_round10_4000x8192x6144"


@pytest.fixture(scope="module")
def run() -> tuple[dict, list]:
    return V.rescore_stored(RUN)


def test_as_scored_it_meets(run):
    """Written: median <= 2%, max <= 5%, meets (about 65%); in the captures' cycles median <= 1.5%,
    max <= 3.0%. Came out 1.22% / 2.84%, in cycles 0.50% / 2.54%, over 13 points, no flip."""
    doc, pts = run
    assert doc["mnkl"][:3] == [4000, 8192, 6144] and doc["model_baseline"]["binding"] == "epilogue"
    s = V.summary(pts)
    assert s["det"]["pass"] and s["det"]["n"] == 13 and s["n_flip"] == 0
    assert s["det"]["median_abs_pct"] == pytest.approx(1.22, abs=0.01)
    assert s["det"]["max_abs_pct"] == pytest.approx(2.84, abs=0.01)
    assert s["cycles"]["median_abs_pct"] <= 1.5 and s["cycles"]["max_abs_pct"] <= 3.0
    assert s["trivial"]["median_abs_pct"] > 3 * s["det"]["median_abs_pct"]


def test_a_k_loop_spin_costs_about_its_nominal_cycles_on_two_warpgroups(run):
    """What separates this run from round 9: with two warpgroups on the tensor pipe an injected
    K-loop spin grew the K-loop phase by 1.07-1.10x its nominal cycles (three warpgroups: 0.59x;
    ping-pong, one at a time: 1.25x), so the model's nominal change is nearly the phase change and
    its K-loop points sit within 2% like the rest."""
    doc, pts = run
    means = doc["measured_phase_means"]
    fwd = sorted((p for p in pts if p.direction == "forward" and p.delta_kloop and not p.delta_phase1),
                 key=lambda p: p.delta_kloop)
    grew = [means[k]["mma.kloop"] - means["plain"]["mma.kloop"] for k in ("kloop250_phase10", "kloop290_phase10")]
    ratios = [g / p.delta_kloop for g, p in zip(grew, fwd)]
    assert len(fwd) == 2 and all(1.0 < r < 1.15 for r in ratios), ratios
    assert all(abs(p.err_det_pct) < 2.0 for p in pts if p.delta_kloop)
