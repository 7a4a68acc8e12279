"""Validation arithmetic: ratios, errors, summary, the sweep plan, and re-scoring from a CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bsprof.analyzers import validation as V
from bsprof.errors import BsprofError
from bsprof.profile.validate import _delay_for, plan_sweep


def serial_model():
    """A deliberately simple model (tile = kloop + phase1 means) with #6's JSON contract, so the
    arithmetic around the model can be checked by hand."""
    def calibrate(table):
        d = (table["end"] - table["start"])
        k = d[(table["role"] == "mma") & (table["phase"] == "kloop")].mean()
        p = d[(table["role"] == "epilogue") & (table["phase"] == "phase1")].mean()
        return {"tile": k + p}

    def project(params, deltas):
        new = params["tile"] + deltas.get("kloop", 0) + deltas.get("phase1", 0)
        side = {"wall_ratio": new / params["tile"], "baseline_tile_cycles": params["tile"],
                "projected_tile_cycles": new, "binding_before": "epilogue", "binding_after": "epilogue"}
        return {"deterministic": side, "stochastic": dict(side, wall_ratio=new / params["tile"] * 1.001,
                                                             wall_ratio_p05=0.99, wall_ratio_p95=1.01)}
    return calibrate, project


def table(kloop=4000, phase1=1000):
    rows = []
    for tile in range(4):
        rows.append((0, 0, 4, "mma", tile, "kloop", 100, 100 + kloop))
        rows.append((0, 0, 4, "epilogue", tile, "phase1", 200 + kloop, 200 + kloop + phase1))
    return pd.DataFrame(rows, columns=["sm", "cta", "warp", "role", "tile", "phase", "start", "end"])


def test_evaluate_scores_forward_and_reverse_points():
    cal, proj = serial_model()
    tables = {"plain": table(), "slow": table(kloop=4500)}
    pts = [
        V.Point("forward", "kloop", "plain", 10, 0, 500.0, 0.0, base_us=100.0, meas_us=110.0),
        V.Point("reverse", "kloop", "slow", 0, 0, -500.0, 0.0, base_us=110.0, meas_us=100.0),
    ]
    V.evaluate(pts, tables, calibrate=cal, project=proj)
    f, r = pts
    assert f.measured_ratio == pytest.approx(1.10)
    assert f.projected_det == pytest.approx(5500 / 5000)
    assert f.err_det_pct == pytest.approx(0.0, abs=1e-9)
    assert f.err_sto_pct == pytest.approx(0.1, abs=1e-6)
    assert r.projected_det == pytest.approx(5000 / 5500)
    assert r.err_det_pct == pytest.approx(100 * ((5000 / 5500) / (100 / 110) - 1), abs=1e-9)
    s = V.summary(pts)
    assert s["n"] == 2 and s["det"]["max_abs_pct"] == pytest.approx(0.0, abs=1e-9)
    assert s["det"]["pass"] is False  # fewer than 12 points never passes


def test_summary_target_thresholds():
    pts = [V.Point("forward", "kloop", "plain", 1, 0, 1.0, 0.0, 1.0, 1.0) for _ in range(12)]
    for i, p in enumerate(pts):
        p.err_det_pct = 1.0 if i < 11 else -4.9
        p.err_sto_pct = 1.0 if i < 11 else 5.1
    s = V.summary(pts)
    assert s["det"]["pass"] and s["det"]["median_abs_pct"] == 1.0 and s["det"]["max_abs_pct"] == 4.9
    assert not s["sto"]["pass"]


def test_frame_roundtrip_recomputes_the_same_errors(tmp_path):
    cal, proj = serial_model()
    pts = [V.Point("forward", "phase1", "plain", 0, 300, 0.0, 320.0, 100.0, 106.0, extra={"d_mma_kloop": 3.0})]
    V.evaluate(pts, {"plain": table()}, calibrate=cal, project=proj)
    V.to_frame(pts).to_csv(tmp_path / "v.csv", index=False)
    back = V.from_frame(pd.read_csv(tmp_path / "v.csv"))
    assert back[0].extra == {"d_mma_kloop": 3.0}
    V.evaluate(back, {"plain": table()}, calibrate=cal, project=proj)
    assert back[0].err_det_pct == pytest.approx(pts[0].err_det_pct)
    with pytest.raises(BsprofError, match="lacks columns"):
        V.from_frame(pd.DataFrame({"knob": ["kloop"]}))


def test_missing_calibration_table_is_an_error():
    cal, proj = serial_model()
    with pytest.raises(BsprofError, match="no timing table"):
        V.evaluate([V.Point("reverse", "kloop", "nope", 0, 0, -1.0, 0.0, 1.0, 1.0)], {}, calibrate=cal, project=proj)


def test_spin_cost_fit_and_delay_inversion():
    slope, icpt = V.spin_cost_fit({64: 64 * 1.01 + 30, 256: 256 * 1.01 + 30, 1024: 1024 * 1.01 + 30})
    assert slope == pytest.approx(1.01) and icpt == pytest.approx(30)
    d, cost = _delay_for(500.0, {"slope": slope, "intercept": icpt})
    assert d == 470 and cost == pytest.approx(470 * 1.01 + 30)  # (500-30)/1.01 = 465.3 -> 2 digits
    assert _delay_for(5.0, {"slope": slope, "intercept": icpt})[0] == 1  # never a zero (= no code) delay


def test_sweep_crosses_the_deficit_on_the_slack_side():
    spin = {"slope": 1.0, "intercept": 20.0}
    plan = plan_sweep(tile=20_000, deficit=1_000, binding="epilogue", k_blocks=32, spin=spin)
    kl = [v["delta_kloop"] for v in plan if v["knob"] == "kloop"]
    assert min(kl) < 1_000 < max(kl) and max(kl) >= 3_000  # from below to well above the deficit
    assert all(v["delay_kloop"] >= 1 for v in plan if v["knob"] != "phase1")
    assert len(plan) >= 12
    # injected cost = k_blocks * spin cost of the per-block delay
    v = plan[0]
    assert v["delta_kloop"] == pytest.approx(32 * (v["delay_kloop"] + 20))
    no_deficit = plan_sweep(tile=20_000, deficit=0, binding="", k_blocks=32, spin=spin)
    assert max(v["delta_phase1"] for v in no_deficit) == pytest.approx(0.25 * 20_000, rel=0.05)
    with pytest.raises(BsprofError):
        plan_sweep(tile=0, deficit=0, binding="", k_blocks=1, spin=spin)


def test_validate_orchestration_with_a_simulated_gpu(monkeypatch, tmp_path):
    """validate.run end to end with the GPU pieces replaced by a simulated serial kernel whose
    wall time is tiles x (kloop + phase1): the serial model must then score ~0 error."""
    import json

    from bsprof.profile import timing_capture as tc
    from bsprof.profile import validate

    cal, proj = serial_model()
    monkeypatch.setattr(V, "model_api", lambda: (cal, proj))
    monkeypatch.setattr("bsprof.gpu.device_info",
                        lambda: {"name": "SimGPU", "capability": (9, 0), "sm_count": 132})
    spin = {"slope": 1.0, "intercept": 10.0, "samples": {}, "record_floor": 30.0}

    class Sim:
        def __init__(self, timing, delay_kloop=0, delay_phase1=0):
            self.k = 4000 + 32 * (delay_kloop + 10 if delay_kloop else 0)
            self.p = 1000 + (delay_phase1 + 10 if delay_phase1 else 0)
            self.kernel_name = "sim"

        def launch(self):
            pass

    def prepare(family, variant, mnkl, timing=False, delay_kloop=0, delay_phase1=0):
        return Sim(timing, delay_kloop, delay_phase1)

    monkeypatch.setattr(tc, "prepare", prepare)
    monkeypatch.setattr(tc, "capture", lambda p: tc.Capture(table(p.k, p.p), None, None, "sim"))
    monkeypatch.setattr(tc, "raw_launcher", lambda p: p)
    monkeypatch.setattr(tc, "median_us", lambda launchers, **kw: {k: 8 * (p.k + p.p) / 1755.0
                                                                   for k, p in launchers.items()})
    doc = validate.run(kernel="optimized", family="fp8-blockwise", mnkl="4096,4096,4096", out_dir=tmp_path,
                       spin=spin)
    assert doc["summary"]["n"] >= 12
    assert doc["summary"]["det"]["max_abs_pct"] < 1e-9  # the simulated kernel IS the serial model
    assert doc["summary"]["det"]["pass"]
    kinds = {(p["direction"], p["knob"]) for p in doc["points"]}
    assert ("reverse", "kloop") in kinds and ("forward", "both") in kinds
    run_dir = tmp_path / next(iter(p.name for p in tmp_path.iterdir()))
    assert json.loads((run_dir / "validation.json").read_text())["bsprof"]["kind"] == "validation"
    # the same measurements re-scored from disk give the same errors
    again = validate.rescore(run_dir)
    assert again["summary"]["det"]["max_abs_pct"] < 1e-9


def test_reference_averages_every_capture_that_leaves_the_phase_alone():
    from bsprof.profile.validate import reference_phases

    measured = {
        "plain": {"mma.kloop": 1000.0, "epilogue.phase1": 200.0, "mma.tma0": 50.0},
        "kloop10_phase10": {"mma.kloop": 1500.0, "epilogue.phase1": 210.0},
        "kloop0_phase1300": {"mma.kloop": 1040.0, "epilogue.phase1": 520.0},
        "kloop10_phase1300": {"mma.kloop": 1530.0, "epilogue.phase1": 530.0},
    }
    ref = reference_phases(measured)
    assert ref["mma.kloop"] == pytest.approx((1000 + 1040) / 2)      # plain + phase1-only
    assert ref["epilogue.phase1"] == pytest.approx((200 + 210) / 2)  # plain + kloop-only
    assert ref["mma.tma0"] == 50.0                                    # the rest: plain


H100 = Path(__file__).parent / "data" / "h100_timing"


def test_shipped_h100_validation_rescores_to_its_own_summary():
    """The optimized kernel's 4096^3 sweep from the H100 (tables included): the arithmetic re-run
    on this machine gives the numbers the GPU run wrote, and they meet the issue's target."""
    from bsprof.profile.validate import rescore

    doc = json.loads((H100 / "validation" / "validation.json").read_text())
    again = rescore(H100 / "validation")["summary"]
    assert again["n"] == doc["summary"]["n"] >= 12
    assert again["det"]["median_abs_pct"] == pytest.approx(doc["summary"]["det"]["median_abs_pct"], abs=1e-6)
    assert again["det"]["max_abs_pct"] == pytest.approx(doc["summary"]["det"]["max_abs_pct"], abs=1e-6)
    assert again["det"]["pass"] and again["sto"]["pass"]


def test_shipped_pingpong_sweep_flips_the_binding_side():
    """The ping-pong kernel's sweep crosses the model's deficit: forward Phase-1 points on both
    sides of it, the binding side producer -> epilogue past it."""
    frame = pd.read_csv(H100 / "validation_pingpong" / "validation.csv")
    doc = json.loads((H100 / "validation_pingpong" / "validation.json").read_text())
    deficit = doc["model_baseline"]["deficit"]
    p1 = frame[(frame["direction"] == "forward") & (frame["knob"] == "phase1")]
    assert (p1["delta_phase1"] < deficit).any() and (p1["delta_phase1"] > deficit).any()
    past = p1[p1["delta_phase1"] > 1.2 * deficit]
    assert (past["binding_before"] == "producer").all() and (past["binding_after"] == "epilogue").all()
    below = p1[p1["delta_phase1"] < 0.8 * deficit]
    assert (below["binding_after"] == "producer").all()


def test_cycle_domain_check_on_the_shipped_captures():
    """The shipped 4096^3 captures: each build's busiest-CTA makespan in cycles and the clock it
    ran at; the K-loop-delayed build is longer by at least the cycles its spins inject on that
    CTA, and the cycle-domain errors join the summary only for points that carry them."""
    from bsprof.analyzers.timing.io import read_table

    run = H100 / "validation"
    doc = json.loads((run / "validation.json").read_text())
    tabs = {k: read_table(run / v) for k, v in doc["files"]["calibration_tables"].items()}
    clocks = {k: V.capture_clock(t) for k, t in tabs.items()}
    for cycles, ghz in clocks.values():
        assert cycles > 100_000 and 1.2 < ghz < 2.1      # an H100 SM clock, not a unit slip
    injected = 320 * doc["k_blocks"] * V.busiest_tiles(tabs["plain"])
    assert clocks["kloop320_phase10"][0] - clocks["plain"][0] >= 0.9 * injected

    points = V.from_frame(pd.read_csv(run / "validation.csv"))
    V.evaluate(points, {k: tabs[k] for k in {p.calib for p in points}})
    assert "cycles" not in V.summary(points)               # a run without clock extras
    for p in points:
        if p.direction == "reverse":
            (cb, gb), (cm, gm) = clocks[p.calib], clocks["plain"]
            p.extra.update(cycles_base=cb, cycles_meas=cm, ghz_base=gb, ghz_meas=gm)
            assert V.cycle_error_pct(p) == pytest.approx((p.projected_wall_det * cb / cm - 1) * 100)
    cyc = V.summary(points)["cycles"]
    assert cyc["n"] == 3 and cyc["ghz_min"] == min(g for _, g in clocks.values())


def test_shipped_8192_run_is_off_in_wall_time_but_not_in_cycles():
    """The 8192^3 run of the A-scale-TMA build: its wall-time errors miss the target while the
    same projections against the captures' cycle makespans are within 0.5%, and its builds ran
    at clocks more than 5% apart (the power-limited H100 clocks up when a delay lowers the draw)."""
    frame = pd.read_csv(H100 / "validation_8192" / "validation.csv")
    doc = json.loads((H100 / "validation_8192" / "validation.json").read_text())
    points = V.from_frame(frame)
    for p, wall in zip(points, frame["projected_wall_det"]):
        p.projected_wall_det = float(wall)   # the run's own projections (its tables are not shipped)
    cyc = [abs(V.cycle_error_pct(p)) for p in points]
    assert len(cyc) == doc["summary"]["n"] >= 12
    assert max(cyc) < 0.5 and max(cyc) == pytest.approx(doc["summary"]["cycles"]["max_abs_pct"])
    assert not doc["summary"]["det"]["pass"] and doc["summary"]["det"]["max_abs_pct"] > 5.0
    lo, hi = V.clock_spread(points)
    assert hi > 1.05 * lo
