"""The embedded B200 measurement: the calibrated structure reproduces what was observed on it."""

from __future__ import annotations

import pytest

from bsprof.analyzers.model import default_params, project
from bsprof.analyzers.model.default import B200
from bsprof.analyzers.model.eventgraph import period_karp, solve
from bsprof.analyzers.model.project import linear_rule, required_delta


@pytest.fixture(scope="module")
def p():
    return default_params()


def test_calibration_reproduces_the_measured_equilibrium(p):
    eq = solve(p)
    assert eq.period == pytest.approx(B200["tile"])
    assert period_karp(p) == pytest.approx(B200["tile"])
    assert eq.epi_wait == pytest.approx(B200["epi_wait"])  # 6067 - 857 - 4154
    assert abs(eq.ml_wait - B200["ml_wait"]) <= 110  # the averages do not close by 100
    assert eq.binding == "epilogue" and eq.critical == "epilogue-chain"
    sto = project(p, {}).sto
    assert sto["baseline_tile_cycles"] == pytest.approx(B200["tile"], rel=0.005)
    assert abs(sto["epi_wait_before"] - B200["epi_wait"]) < 60


def test_one_stage_with_release_at_phase1_end_cannot_give_the_measured_tile(p):
    one = default_params(acc_stages=1)
    # K-loop + Phase 1 (+ hand-offs) per tile: far above the measured 6,067
    assert solve(one).period > B200["kloop"] + B200["phase1"] > B200["tile"]


def test_kloop_minus_76_alone_leaves_wall_time_unchanged(p):
    j = project(p, {"kloop": -76}).to_json()
    assert j["deterministic"]["wall_ratio"] == pytest.approx(1.0, abs=1e-12)
    assert abs(j["stochastic"]["wall_ratio"] - 1.0) < 0.001
    assert j["deterministic"]["binding_after"] == "epilogue"


def test_phase1_reduction_that_explains_0543_to_0536_is_plausible(p):
    target = 0.536 / 0.543
    det = required_delta(p, "phase1", target)
    sto = required_delta(p, "phase1", target, stochastic=True)
    # about 80 cycles per warp per tile: ~2% of a 4,129-cycle Phase 1, a modest rewrite
    assert -120 < det < -50 and -150 < sto < -50
    assert abs(det) < 0.05 * B200["phase1"]
    j = project(p, {"phase1": det}).to_json()
    assert 0.536 == pytest.approx(0.543 * j["deterministic"]["wall_ratio"], abs=0.0005)


def test_where_the_linear_rule_and_the_model_diverge(p):
    rows = linear_rule(p, [-600, -400, -200, -100, -50, 0, 50, 100, 200, 400, 600], knob="phase1")
    at0 = next(r for r in rows if r["delta"] == 0)
    assert abs(at0["difference"]) < 10  # both fit the calibration point (257 x 4.1 = 1,054)
    big = [r for r in rows if abs(r["difference"]) > 200]
    assert big and min(abs(r["delta"]) for r in big) <= 200
    # the model's epi_wait moves 1:1 with Phase 1 (the epilogue loop binds), the rule 4.1:1
    r100 = next(r for r in rows if r["delta"] == 100)
    assert r100["model_epi_wait"] - at0["model_epi_wait"] == pytest.approx(100, abs=1)
    assert r100["rule_epi_wait"] - at0["rule_epi_wait"] == pytest.approx(410, abs=1)
    # K-loop perturbations: the rule predicts epi_wait from the deficit; the model adds the slack 1:1
    krows = linear_rule(p, [-300, 300], knob="kloop")
    assert all(abs(r["difference"]) > 500 for r in krows)


def test_projection_changes_binding_when_the_kloop_grows_past_its_slack(p):
    eq = solve(p)
    j = project(p, {"kloop": eq.kloop_slack + 200}).to_json()
    assert j["deterministic"]["binding_after"] == "producer"
    assert j["deterministic"]["wall_ratio"] == pytest.approx((B200["tile"] + 200) / B200["tile"])
    assert "wall_ratio_p05" not in j["stochastic"]


def test_percent_and_structural_deltas(p):
    a = project(p, {"phase1": "-5%"}, stochastic=False)
    b = project(p, {"phase1": -0.05 * (sum(p.epi.phase1) / 4)}, stochastic=False)
    assert a.wall_ratio == pytest.approx(b.wall_ratio, abs=0.002)
    five = project(p, {"epi_warps": 5}).to_json()  # same tile over five warps: shorter per-warp Phase 1
    assert five["deterministic"]["wall_ratio"] < 0.95
    one = project(p, {"acc_stages": 1}).to_json()
    assert one["deterministic"]["wall_ratio"] > 1.3 and one["deterministic"]["binding_after"] == "epilogue"
