"""Validation arithmetic: ratios, errors, summary, the sweep plan, and re-scoring from a CSV."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bsprof.analyzers.model import validation as V
from bsprof.errors import BsprofError
from bsprof.profile.validate import delay_for, plan_sweep


def serial_model():
    """A deliberately simple model (tile = kloop + phase1 means) with the model's JSON contract, so the
    arithmetic around the model can be checked by hand."""

    def calibrate(table):
        d = table["end"] - table["start"]
        k = d[(table["role"] == "mma") & (table["phase"] == "kloop")].mean()
        p = d[(table["role"] == "epilogue") & (table["phase"] == "phase1")].mean()
        return {"tile": k + p}

    def project(params, deltas):
        new = params["tile"] + deltas.get("kloop", 0) + deltas.get("phase1", 0)
        side = {
            "wall_ratio": new / params["tile"],
            "baseline_tile_cycles": params["tile"],
            "projected_tile_cycles": new,
            "binding_before": "epilogue",
            "binding_after": "epilogue",
        }
        return {
            "deterministic": side,
            "stochastic": dict(side, wall_ratio=new / params["tile"] * 1.001, wall_ratio_p05=0.99, wall_ratio_p95=1.01),
        }

    return calibrate, project


def table(kloop=4000, phase1=1000):
    rows = []
    for tile in range(4):
        t0 = 100 + tile * (kloop + phase1 + 200)  # one warp's tiles follow each other in time
        rows.append((0, 0, 4, "mma", tile, "kloop", t0, t0 + kloop))
        rows.append((0, 0, 4, "epilogue", tile, "phase1", t0 + 100 + kloop, t0 + 100 + kloop + phase1))
    return pd.DataFrame(rows, columns=["sm", "cta", "warp", "role", "tile", "phase", "start", "end"])


def test_evaluate_scores_forward_and_reverse_points():
    cal, proj = serial_model()
    tables = {"plain": table(), "slow": table(kloop=4500)}
    pts = [
        V.Point(
            "forward",
            "kloop",
            "plain",
            10,
            0,
            500.0,
            0.0,
            base_us=100.0,
            meas_us=110.0,
            base_reps=[100.0, 101.0, 99.0, 100.0, 100.0],
            meas_reps=[110.0, 111.1, 108.9, 110.0, 110.0],
            oracle_kloop=550.0,
            oracle_phase1=0.0,
        ),
        V.Point("reverse", "kloop", "slow", 0, 0, -500.0, 0.0, base_us=110.0, meas_us=100.0),
    ]
    V.evaluate(pts, tables, calibrate=cal, project=proj)
    f, r = pts
    assert f.measured_ratio == pytest.approx(1.10)  # every repeat's ratio is 1.10
    assert f.ci_hi - f.ci_lo == pytest.approx(0.0, abs=1e-9)
    assert f.projected_det == pytest.approx(5500 / 5000)
    assert f.err_det_pct == pytest.approx(0.0, abs=1e-9)
    assert f.projected_oracle == pytest.approx(5550 / 5000)  # the measured change, not the nominal
    # the trivial rule moves wall time by the delta of a phase on the critical cycle (here: both)
    assert f.projected_trivial == pytest.approx(1.10)
    assert r.measured_ratio == pytest.approx(100 / 110)
    assert r.projected_det == pytest.approx(5000 / 5500)
    assert math.isnan(r.ci_lo)  # no repeats: no interval


def test_ratio_interval_widens_with_noise():
    m, lo, hi = V.ratio_stats([100.0] * 5, [101.0, 103.0, 102.0, 99.0, 105.0])
    assert m == pytest.approx(1.02) and lo < 1.02 < hi
    assert hi - lo == pytest.approx(2 * 2.776 * 0.05**0.5 / 5**0.5 * 0.1, rel=1e-3)  # sd 2.236%


def test_summary_target_thresholds():
    cal, proj = serial_model()
    pts = [V.Point("forward", "kloop", "plain", 1, 0, 100.0, 0.0, 1.0, 1.02) for _ in range(12)]
    V.evaluate(pts, {"plain": table()}, calibrate=cal, project=proj)
    s = V.summary(pts)
    assert s["n"] == 12 and s["n_flip"] == 0
    assert s["det"]["median_abs_pct"] == pytest.approx(abs(5100 / 5000 / 1.02 - 1) * 100)
    assert s["det"]["pass"] and s["det"]["beats_trivial_on_flips"] is None  # no flip: cannot tell
    for p in pts[:6]:
        p.flip = True
    assert V.summary(pts)["det"]["beats_trivial_on_flips"] is False  # equal errors do not beat it


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
    d, cost = delay_for(500.0, {"slope": slope, "intercept": icpt})
    assert d == 470 and cost == pytest.approx(470 * 1.01 + 30)  # (500-30)/1.01 = 465.3 -> 2 digits
    assert delay_for(5.0, {"slope": slope, "intercept": icpt})[0] == 1  # never a zero (= no code) delay


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

    from bsprof.kernels import api
    from bsprof.kernels.api import Target
    from bsprof.profile import timing_capture as tc
    from bsprof.profile import validate

    cal, proj = serial_model()
    monkeypatch.setattr(V, "model_api", lambda: (cal, proj))
    monkeypatch.setattr("bsprof.gpu.device_info", lambda: {"name": "SimGPU", "capability": (9, 0), "sm_count": 132})
    spin = {"slope": 1.0, "intercept": 10.0, "samples": {}, "record_floor": 30.0}

    class Sim:
        def __init__(self, timing, delay_kloop=0, delay_phase1=0):
            self.k = 4000 + 32 * (delay_kloop + 10 if delay_kloop else 0)
            self.p = 1000 + (delay_phase1 + 10 if delay_phase1 else 0)
            self.kernel_name = "sim"

        def launch(self):
            pass

    def prepare(target, timing=False, delay_kloop=0, delay_phase1=0):
        return Sim(timing, delay_kloop, delay_phase1)

    target = Target.parse("fp8-blockwise", "optimized", "4096,4096,4096")

    def parsed_again(*args, **kwargs):
        raise AssertionError("the validation parsed the kernel spec again; it takes the Target whole")

    monkeypatch.setattr(api, "parse_kernel_spec", parsed_again)
    monkeypatch.setattr(api, "parse_mnkl", parsed_again)
    monkeypatch.setattr(Target, "prepare", prepare)
    monkeypatch.setattr(tc, "capture", lambda p: tc.Capture(table(p.k, p.p), None, None, "sim"))
    monkeypatch.setattr(tc, "raw_launcher", lambda p: p)
    monkeypatch.setattr(
        tc, "median_us", lambda launchers, **kw: {k: 8 * (p.k + p.p) / 1755.0 for k, p in launchers.items()}
    )
    doc = validate.run(target, out_dir=tmp_path, spin=spin)
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
    assert ref["mma.kloop"] == pytest.approx((1000 + 1040) / 2)  # plain + phase1-only
    assert ref["epilogue.phase1"] == pytest.approx((200 + 210) / 2)  # plain + kloop-only
    assert ref["mma.tma0"] == 50.0  # the rest: plain


H100 = Path(__file__).parent / "data" / "h100_timing"


def test_shipped_h100_validation_rescores_to_its_own_summary():
    """The optimized kernel's 4096^3 run from the H100 (tables included): the arithmetic re-run on
    this machine gives the numbers the GPU run wrote. Its points cannot flip (a coop consumer runs
    K-loop and epilogue in one loop), so the model and the trivial predictor agree on every one."""
    from bsprof.profile.validate import rescore

    doc = json.loads((H100 / "validation" / "validation.json").read_text())
    again = rescore(H100 / "validation")["summary"]
    assert again["n"] == doc["summary"]["n"] >= 12
    for key in ("det", "oracle", "trivial"):
        assert again[key]["median_abs_pct"] == pytest.approx(doc["summary"][key]["median_abs_pct"], abs=1e-6)
        assert again[key]["max_abs_pct"] == pytest.approx(doc["summary"][key]["max_abs_pct"], abs=1e-6)
    assert again["n_flip"] == 0 and again["det"]["beats_trivial_on_flips"] is None
    assert again["det"]["max_abs_pct"] == pytest.approx(again["trivial"]["max_abs_pct"])
    assert again["det"]["pass"]
    assert not again["band"]["keep"]  # the Monte Carlo band missed most measured points


def test_shipped_runs_measure_each_point_five_times_and_the_reverse_fresh():
    for run in ("validation", "validation_pingpong", "validation_pingpong_8192", "validation_8192x1024"):
        pts = V.from_frame(pd.read_csv(H100 / run / "validation.csv"))
        assert all(len(p.base_reps) >= 5 and len(p.meas_reps) >= 5 for p in pts)
        fwd_plain = {tuple(p.base_reps) for p in pts if p.direction == "forward"}
        rev_plain = {tuple(p.meas_reps) for p in pts if p.direction == "reverse"}
        assert len(fwd_plain) == 1 and len(rev_plain) == 1 and fwd_plain.isdisjoint(rev_plain)
        assert sum(p.direction == "noise" for p in pts) == 1


def test_shipped_pingpong_run_tells_the_model_from_the_trivial_rule():
    """The ping-pong kernel's 4096^3 run crosses the deficit both ways: >= 6 points flip the
    binding side, and there the model's error is far below the trivial predictor's; below the
    deficit the trivial rule says 0% while the exposed last tile costs time (the tail term)."""
    frame = pd.read_csv(H100 / "validation_pingpong" / "validation.csv")
    doc = json.loads((H100 / "validation_pingpong" / "validation.json").read_text())
    s = doc["summary"]
    assert s["n_flip"] >= 6 and s["det"]["beats_trivial_on_flips"]
    assert s["det"]["flip"]["median_abs_pct"] < 0.2 * s["trivial"]["flip"]["median_abs_pct"]
    below = frame[(frame["direction"] == "forward") & (frame["knob"] == "phase1") & ~frame["flip"]]
    assert len(below) >= 3 and (below["measured_ratio"] > 1.02).all() and (below["projected_trivial"] == 1.0).all()
    assert (below["term_tail"] > 0.02).all() and (below["err_det_pct"].abs() < below["err_trivial_pct"].abs()).all()


def test_pingpong_8192_misses_in_wall_time_but_not_in_cycles():
    """The 8192^3 ping-pong run: the model's wall-time errors miss the target (median > 5%) while
    the same projections against the captures' cycle makespans stay within 3%: recorded, not
    hidden (docs/model.md)."""
    doc = json.loads((H100 / "validation_pingpong_8192" / "validation.json").read_text())
    s = doc["summary"]
    assert not s["det"]["pass"] and s["det"]["median_abs_pct"] > 5.0
    assert s["cycles"]["max_abs_pct"] < 3.0 and s["n_flip"] >= 6


def test_clocked_error_uses_both_builds_sustained_clocks():
    p = V.Point("forward", "phase1", "plain", 0, 10, 0.0, 10.0, 1.0, 1.0)
    p.projected_wall_det, p.measured_ratio = 1.20, 1.10
    assert math.isnan(V.clocked_error_pct(p))  # no clocks read: no diagnostic
    p.extra.update(mhz_base=1650.0, mhz_meas=1800.0)  # the delayed build clocked up
    assert V.clocked_error_pct(p) == pytest.approx((1.20 * 1650 / 1800 / 1.10 - 1) * 100)


def test_second_8192_run_reads_clocks_and_they_explain_part_of_the_miss():
    """The repeat of the 8192^3 ping-pong run with each build's sustained SM clock: the plain
    build is power-capped below the delayed ones (which draw less), and turning the model's
    cycles into wall time with the measured clocks narrows the median error but not the max."""
    doc = json.loads((H100 / "validation_pingpong_8192_clocks" / "validation.json").read_text())
    clk = doc["sustained_clocks"]
    assert clk["kloop0_phase1250000"]["mhz"] > 1.1 * clk["plain"]["mhz"]
    assert clk["kloop0_phase1250000"]["watts"] < clk["plain"]["watts"]
    s = doc["summary"]
    assert s["clocked"]["median_abs_pct"] < s["det"]["median_abs_pct"]
    assert s["clocked"]["max_abs_pct"] > 5.0 and not s["det"]["pass"]
    points = V.from_frame(pd.read_csv(H100 / "validation_pingpong_8192_clocks" / "validation.csv"))
    for p, r in zip(
        points, pd.read_csv(H100 / "validation_pingpong_8192_clocks" / "validation.csv").to_dict("records")
    ):
        p.projected_wall_det, p.measured_ratio = r["projected_wall_det"], r["measured_ratio"]
    errs = [abs(V.clocked_error_pct(p)) for p in points if p.direction != "noise"]
    assert max(errs) == pytest.approx(s["clocked"]["max_abs_pct"])


def test_shipped_validation_samples_render_in_the_report():
    """The samples are version-2 validation artifacts; the report reads them and draws the model
    beside the trivial predictor, with the measured interval and the flip-point errors."""
    from bsprof.reports.runs import discover
    from bsprof.reports.sec_validation import scatter

    run = discover(Path(__file__).parents[1] / "bsprof" / "data" / "samples" / "run")
    assert not [p for p in run.problems if "validation" in p]
    sec = scatter(run)
    html = "".join(b for b in sec.blocks if isinstance(b, str))
    assert "trivial predictor" in html and "flip points" in html and "noise floor" in html
