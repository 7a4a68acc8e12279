"""The model's clock term: the power-capped sustained clock after a change, on the H100's measured runs."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pandas as pd
import pytest

from bsprof.analyzers.model import validation as V
from bsprof.analyzers.model.clock import DeviceLimits, limits_for, project_clock

H100 = Path(__file__).parent / "data" / "h100_timing"
LIM = DeviceLimits(max_mhz=1980.0, power_limit_w=700.0, floor_w=100.0)


def test_capped_baseline_clocks_up_by_the_cube_root_until_the_top_clock():
    c = project_clock(1.25, 1750.0, 720.0, LIM)
    assert c.capped and c.limited_by == "power limit"
    assert c.ratio == pytest.approx(1.25 ** (1 / 3))
    top = project_clock(2.0, 1750.0, 720.0, LIM)  # 2^(1/3) would pass the top clock
    assert top.ratio == pytest.approx(1980.0 / 1750.0) and top.limited_by == "top clock"
    down = project_clock(0.8, 1750.0, 720.0, LIM)  # faster: the draw rises, the clock falls
    assert down.ratio == pytest.approx(0.8 ** (1 / 3))


def test_uncapped_baseline_never_climbs_and_falls_only_past_the_limit():
    assert project_clock(1.5, 1980.0, 500.0, LIM).ratio == 1.0
    # 500 W of which 400 scale with work: 0.9x the cycles draws 100 + 400/0.9 = 544 W < 700: no change
    assert project_clock(0.9, 1980.0, 500.0, LIM).ratio == 1.0
    # 0.5x: 100 + 800 = 900 W at 1980 MHz; the limit holds 600 W of work: (600 * 0.5 / 400)^(1/3)
    c = project_clock(0.5, 1980.0, 500.0, LIM)
    assert c.ratio == pytest.approx((600 * 0.5 / 400) ** (1 / 3)) and c.limited_by == "power limit"


def test_nothing_known_gives_no_clock_term():
    assert project_clock(1.3, None, None, LIM).ratio == 1.0  # no clock read
    assert project_clock(1.3, 1750.0, 700.0, None).ratio == 1.0  # no device limits
    assert project_clock(0.5, 1980.0, None, LIM).ratio == 1.0  # top clock, no power read
    assert limits_for("NVIDIA H100 80GB HBM3").max_mhz == 1980.0
    assert limits_for("SimGPU") is None
    rec = limits_for("SimGPU", {"max_mhz": 1500, "power_limit_w": 300, "floor_w": 50})
    assert rec == DeviceLimits(1500.0, 300.0, 50.0, "NVML")


def test_clock_term_closes_the_8192_forward_misses():
    """The 8192^3 ping-pong run with sustained clocks: every forward point's projected cycles with
    the clock term from the plain build's own sustained clock (1,747 MHz, power-capped) and the
    data-sheet limits. Without the term the model missed (median 6%, max 10%): the delayed builds
    draw less and the capped H100 clocks them up; with it the forward points meet the target."""
    frame = pd.read_csv(H100 / "validation_pingpong_8192_clocks" / "validation.csv")
    pts = V.reclock(frame, limits_for("NVIDIA H100 80GB HBM3"))
    fwd = [p for p in pts if p.direction == "forward"]
    old = [abs(e) for e in frame.loc[frame["direction"] == "forward", "err_det_pct"]]
    new = [abs(p.err_det_pct) for p in fwd]
    assert statistics.median(old) > 5.0 and max(old) > 9.0
    assert statistics.median(new) < 2.0 and max(new) < 5.0
    # the K-loop points: the projected clock is the one the wall times imply (cycles / wall ratio)
    for p in fwd:
        if p.knob == "kloop":
            implied = p.extra["cycles_meas"] / p.extra["cycles_base"] / p.measured_ratio
            assert p.clock_ratio == pytest.approx(implied, abs=0.015)
            assert p.term_clock < -0.07  # a 22-30% longer launch, 7-9% faster clock
    assert all(p.clock_ratio >= 1.0 for p in fwd)  # every delayed build draws less


def test_old_interleaved_protocol_measured_the_capped_build_at_two_speeds():
    """Why the wall protocol changed: the same plain build, timed in the same run between different
    neighbours (13 builds forward, 7 mostly low-power builds reverse), came out ~4-5% apart at
    8192^3, while the builds that ran at the top clock agreed within 0.3%."""
    for run in ("validation_pingpong_8192", "validation_pingpong_8192_clocks"):
        doc = json.loads((H100 / run / "validation.json").read_text())
        f, r = doc["wall_us_forward"], doc["wall_us_reverse"]
        plain = statistics.fmean(r["plain"]) / statistics.fmean(f["plain"]) - 1
        top = statistics.fmean(r["kloop0_phase1250000"]) / statistics.fmean(f["kloop0_phase1250000"]) - 1
        assert plain < -0.035 and abs(top) < 0.003


def test_evaluate_applies_the_clock_from_the_calibration_builds_reading():
    """evaluate(): the model's wall projection = its cycles / the projected clock ratio, shown as
    its own term; a point without a clock reading keeps term 0."""
    from tests.test_timing_validation import serial_model, table

    cal, proj = serial_model()
    p = V.Point(
        "forward",
        "kloop",
        "plain",
        10,
        0,
        1000.0,
        0.0,
        base_us=100.0,
        meas_us=110.0,
        extra={"mhz_base": 1750.0, "watts_base": 720.0},
    )
    q = V.Point("forward", "kloop", "plain", 10, 0, 1000.0, 0.0, base_us=100.0, meas_us=110.0)
    V.evaluate([p, q], {"plain": table()}, calibrate=cal, project=proj, limits=LIM)
    assert p.projected_cycles_det == pytest.approx(6000 / 5000)
    assert p.clock_ratio == pytest.approx(1.2 ** (1 / 3))
    assert p.projected_wall_det == pytest.approx(1.2 / 1.2 ** (1 / 3))
    assert p.term_clock == pytest.approx(p.projected_wall_det - 1.2)
    assert q.clock_ratio == 1.0 and q.term_clock == 0.0 and q.projected_wall_det == pytest.approx(1.2)
    p.extra.update(cycles_base=1000.0, cycles_meas=1200.0)  # the cycle check sees the cycles, not the clock
    assert V.cycle_error_pct(p) == pytest.approx(0.0, abs=1e-9)


def test_pingpong_8192_meets_the_target_with_the_clock_term():
    """The 8192^3 ping-pong run with the clock term (sustained blocks, clock term, predictions written before
    it): the model meets the target where the first two runs missed it, 70x closer than the trivial
    predictor on the flip points; the clock term carries 7-11% on the big points; the plain build
    timed in both repeat sets agrees within 2% (was 3.8-4.8% with interleaved rounds)."""
    run = H100 / "validation_pingpong_8192_clock_term"
    doc = json.loads((run / "validation.json").read_text())
    s = doc["summary"]
    assert s["det"]["pass"] and s["det"]["median_abs_pct"] < 1.5 and s["det"]["max_abs_pct"] < 5.0
    assert s["n_flip"] >= 6 and s["trivial"]["flip"]["median_abs_pct"] > 50 * s["det"]["flip"]["median_abs_pct"]
    assert s["cycles"]["max_abs_pct"] < 3.0
    frame = pd.read_csv(run / "validation.csv")
    big = frame[(frame["direction"] == "forward") & (frame["delta_phase1"] > 150_000)]
    assert len(big) == 2 and (big["term_clock"] < -0.1).all() and (big["clock_ratio"] > 1.09).all()
    f, r = doc["wall_us_forward"]["plain"], doc["wall_us_reverse"]["plain"]
    assert abs(statistics.fmean(r) / statistics.fmean(f) - 1) < 0.02
    lim = doc["device_limits"]
    assert lim["max_mhz"] == 1980 and lim["power_limit_w"] == 700 and 100 < lim["floor_w"] < 200
    assert doc["sustained_clocks"]["plain"]["mhz"] < 0.98 * lim["max_mhz"]  # power-capped baseline
    # re-scored from the CSV with the recorded limits: the same clock ratios
    again = V.reclock(frame, limits_for(doc["device"], lim))
    for p, row in zip(again, frame.to_dict("records")):
        assert p.clock_ratio == pytest.approx(row["clock_ratio"], rel=1e-9)


def test_busy_share_ignores_a_capture_wall_the_kernel_did_not_run():
    """The clock-term 4096^3 run: the Phase 1 +100k build's capture wall came out 456 µs for a kernel the
    same run timed at 328 µs (its table's busiest CTA spans 72% of that wall; every other capture
    98-101%). The busy share then read 0.657 and the reverse point missed by 12.4%; the table's
    own span bounds it (0.916), and the point lands within 5%."""
    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model.eventgraph import solve
    from bsprof.analyzers.timing.io import read_table

    run = H100 / "validation_pingpong_4096_clock_term"
    doc = json.loads((run / "validation.json").read_text())
    key = "kloop0_phase1100000"
    assert doc["capture_wall_us"][key] > 1.3 * statistics.fmean(doc["wall_us_forward"][key])
    tables = {k: read_table(run / "tables" / f"{k}.parquet") for k in ("plain", key)}
    t = tables[key]
    busy = V.busy_fraction(t, solve(calibrate(t)).period, doc["capture_wall_us"][key])
    assert 0.88 < busy < 0.95
    plain = tables["plain"]
    assert V.busy_fraction(plain, solve(calibrate(plain)).period, doc["capture_wall_us"]["plain"]) == pytest.approx(
        doc["points"][1]["busy"], rel=1e-6
    )  # a sound capture wall is used as it is
    frame = pd.read_csv(run / "validation.csv")
    keep = frame["calib"].isin(tables)
    pts = V.from_frame(frame[keep])
    scored = {(p["direction"], p["calib"]): p["err_det_pct"] for p in doc["points"]}
    assert abs(scored[("reverse", key)]) > 12.0
    for p in pts:
        p.busy = math.nan
    V.evaluate(
        pts, tables, capture_wall_us=doc["capture_wall_us"], limits=limits_for(doc["device"], doc["device_limits"])
    )
    rev = next(p for p in pts if p.calib == key)
    assert abs(rev.err_det_pct) < 5.0
    assert abs(V.cycle_error_pct(rev)) < 3.0


def test_cli_projects_wall_time_at_the_sustained_clock():
    """`bsprof model --clock`: the ping-pong 4096^3 plain table, K-loop +9,567 cycles from a baseline
    sustained at 1,740 MHz (power-capped): the cycles grow 26.7%, the clock by their cube root, and
    wall time by the rest; the JSON carries the term and its inputs."""
    from click.testing import CliRunner

    from bsprof.cli import cli

    table = str(H100 / "validation_pingpong" / "tables" / "plain.parquet")
    res = CliRunner().invoke(
        cli, ["model", "--from", table, "--kloop", "9567", "--clock", "1740@705", "--tiles", "1000", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    c, r = doc["clock"], doc["deterministic"]["wall_ratio"]
    assert c["cycle_ratio"] == pytest.approx(r) and 1.25 < r < 1.29
    assert c["capped"] and c["clock_ratio"] == pytest.approx(r ** (1 / 3))
    assert c["wall_ratio"] == pytest.approx(r / r ** (1 / 3)) and c["term_clock"] < -0.08
    assert c["limits"]["max_mhz"] == 1980 and c["mhz_after"] == pytest.approx(1740 * r ** (1 / 3))
    # a top-clock baseline that does the same change does not clock up
    res = CliRunner().invoke(
        cli, ["model", "--from", table, "--kloop", "9567", "--clock", "1980@600", "--tiles", "1000", "--json"]
    )
    assert json.loads(res.stdout)["clock"]["clock_ratio"] == 1.0


@pytest.mark.parametrize(
    "args, words",
    [
        (["--clock", "17x0"], "--clock '17x0' is not a list of positive numbers"),
        (["--clock", "1700@5@6"], "give MHZ or MHZ@WATTS"),
        (["--clock", "2100"], "above the top clock 1980"),
        (["--gpu-limits", "1980,700"], "--gpu-limits needs --clock"),
        (["--clock", "1700", "--gpu-limits", "1980"], "give TOP_MHZ,LIMIT_W[,FLOOR_W]"),
        (["--clock", "1700", "--sweep", "kloop=-100:0:50"], "--clock applies to one projection"),
    ],
)
def test_cli_clock_bad_input_is_one_line(args, words):
    from click.testing import CliRunner

    from bsprof.cli import cli

    res = CliRunner().invoke(cli, ["model", "--kloop", "-100", "--tiles", "1000", *args])
    if "--sweep" in args:
        res = CliRunner().invoke(cli, ["model", "--tiles", "1000", *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0] and "Traceback" not in res.output


@pytest.mark.parametrize("n", [2, 3, 7, 13])
def test_sustained_blocks_never_run_one_build_twice_in_a_row(n):
    from bsprof.profile.validate import block_order, rotated_order

    keys = [f"b{i}" for i in range(n)]
    for order in (block_order, rotated_order):  # the shuffle, and the rotation older runs used
        seq = [k for r in range(8) for k in order(keys, r)]
        assert all(a != b for a, b in zip(seq, seq[1:]))
        assert all(sorted(order(keys, r)) == sorted(keys) for r in range(8))


def test_pooled_sustained_clock_is_the_time_average_over_every_block_of_the_code():
    """A capped clock dithers: the baseline's clock is the reading-weighted mean over all its blocks,
    forward and reverse sets, its second build counted as itself; blocks without a mean give their
    median."""
    from bsprof.analyzers.model.sustained import pooled_clocks

    fwd = {
        "plain": [
            {"mhz_mean": 1700.0, "watts_mean": 710.0, "mhz": 1740.0, "readings": 20, "reasons": 4},
            {"mhz_mean": 1800.0, "watts_mean": 700.0, "readings": 20},
        ],
        "plain_b": [{"mhz": 1900.0, "watts": 690.0, "readings": 40}],
        "fast": [{"mhz_mean": 1980.0, "watts_mean": 500.0, "readings": 10}],
    }
    back = {
        "plain": [{"mhz_mean": 1850.0, "watts_mean": 705.0, "readings": 20}],
        "fast": [{"mhz_mean": 1960.0, "watts_mean": 520.0, "readings": 30}, {"mhz": None, "readings": 0}],
    }
    out = pooled_clocks(fwd, back)
    assert set(out) == {"plain", "fast"}
    assert out["plain"]["mhz"] == pytest.approx((1700 * 20 + 1800 * 20 + 1900 * 40 + 1850 * 20) / 100)
    assert out["plain"]["watts"] == pytest.approx((710 * 20 + 700 * 20 + 690 * 40 + 705 * 20) / 100)
    assert out["plain"]["blocks"] == 4 and out["plain"]["reasons"] == 4
    assert out["plain"]["mhz_block_spread"] == [1700.0, 1900.0]
    assert out["fast"]["mhz"] == pytest.approx((1980 * 10 + 1960 * 30) / 40) and out["fast"]["blocks"] == 2
    assert pooled_clocks({}) == {}


def test_pingpong_4096_top_clock_points_missed_on_the_baseline_clock_not_the_cycles():
    """The clock-term 4096^3 ping-pong run: Phase 1 +68k and +100k missed by -4.9% / -4.1%. The cycles were
    right (projected +52.9% / +92.7%, the captures +51.9% / +93.0%); the clock term was not: it took
    the plain build at 1,740 MHz (one set's median) to the top clock (x1.138), while the same code
    read 1,845 (its second build, same set) and 1,905 MHz (reverse set) at wall times within 1.7%.
    Pooled over every block of the plain code (1,830 MHz: a re-score after seeing the data, not a
    prediction) the clock ratio is 1.082 and both points land within 1%; the cycles are untouched."""
    from bsprof.analyzers.model.sustained import pooled_clocks

    run = H100 / "validation_pingpong_4096_clock_term"
    doc = json.loads((run / "validation.json").read_text())
    fw, rv = doc["sustained_clocks"], doc["sustained_clocks_reverse"]
    assert fw["plain"]["mhz"] == 1740 and fw["plain_b"]["mhz"] == 1845 and rv["plain"]["mhz"] == 1905
    walls = [
        statistics.fmean(doc["wall_us_forward"]["plain"]),
        statistics.fmean(doc["wall_us_forward"]["plain_b"]),
        statistics.fmean(doc["wall_us_reverse"]["plain"]),
    ]
    assert max(walls) / min(walls) < 1.02
    pool = pooled_clocks({k: [v] for k, v in fw.items()}, {k: [v] for k, v in rv.items()})
    assert pool["plain"]["mhz"] == pytest.approx(1830, abs=2)
    frame = pd.read_csv(run / "validation.csv")
    top = frame[(frame["direction"] == "forward") & (frame["delta_phase1"] > 60_000) & (frame["delta_kloop"] == 0)]
    assert len(top) == 2 and (top["err_det_pct"] < -4.0).all() and (top["clock_ratio"] > 1.13).all()
    for row in top.itertuples():  # the equilibrium's cycles against the captures' makespans
        assert row.projected_cycles_det == pytest.approx(row.x_cycles_meas / row.x_cycles_base, rel=0.01)
    again = top.copy()
    again["x_mhz_base"], again["x_watts_base"] = pool["plain"]["mhz"], pool["plain"]["watts"]
    pts = V.reclock(again, limits_for(doc["device"], doc["device_limits"]))
    for p in pts:
        assert p.clock_ratio == pytest.approx(1980 / 1830, rel=0.002)
        assert abs(p.err_det_pct) < 1.0


def test_pingpong_4096_meets_the_target_with_the_pooled_baseline_clock():
    """Predictions written before it: a fresh 4096^3 ping-pong run meets the target, 100x
    closer than the trivial predictor on its 10 flip points. The baseline clock every point used is
    the reading-weighted mean over the plain code's 10 blocks (forward, its second build, reverse),
    and re-scoring the forward points from the stored calibration table gives the stored errors."""
    from bsprof.analyzers.model.sustained import pooled_clocks
    from bsprof.analyzers.timing.io import read_table

    run = H100 / "validation_pingpong_4096_pooled_clock"
    doc = json.loads((run / "validation.json").read_text())
    s = doc["summary"]
    assert s["det"]["pass"] and s["det"]["median_abs_pct"] < 1.0 and s["det"]["max_abs_pct"] < 3.0
    assert s["n_flip"] == 10 and s["trivial"]["flip"]["median_abs_pct"] > 50 * s["det"]["flip"]["median_abs_pct"]
    blocks = doc["sustained_blocks"]
    pool = pooled_clocks(blocks["forward"], blocks["reverse"])
    plain = doc["sustained_clocks_pooled"]["plain"]
    assert pool["plain"]["mhz"] == pytest.approx(plain["mhz"]) and plain["blocks"] == 15
    assert plain["mhz_block_spread"][1] - plain["mhz_block_spread"][0] > 100  # the capped clock moves
    assert plain["mhz"] < 0.98 * doc["device_limits"]["max_mhz"]
    frame = pd.read_csv(run / "validation.csv")
    fwd = frame[frame["direction"] == "forward"]
    assert (fwd["x_mhz_base"] - plain["mhz"]).abs().max() < 1e-6
    pts = V.from_frame(fwd)
    for p in pts:
        p.busy = math.nan
    V.evaluate(
        pts,
        {"plain": read_table(run / "tables" / "plain.parquet")},
        capture_wall_us=doc["capture_wall_us"],
        limits=limits_for(doc["device"], doc["device_limits"]),
    )
    for p, stored in zip(pts, fwd["err_det_pct"]):
        assert p.err_det_pct == pytest.approx(stored, abs=1e-6)
    top = [p for p in pts if p.knob == "phase1" and p.delta_phase1 > 60_000]
    assert len(top) == 2 and all(
        p.clock_ratio == pytest.approx(1980 / plain["mhz"]) and abs(p.err_det_pct) < 2 for p in top
    )


def test_coop_4096_control_clocks_up_like_pingpong():
    """The coop 4096^3 control, the first coop run timed in sustained blocks: its plain build sits at
    1,331 MHz (power cap), and the delayed builds clock up, so the walls no longer follow the cycles
    (K-loop +11.5k: cycles +28.5%, wall +18.3%). The clock term, written before the run, carries it:
    the model meets the target; the trivial rule, cycles without a clock, misses by 7-10%."""
    run = H100 / "validation_coop_4096_sustained_blocks"
    doc = json.loads((run / "validation.json").read_text())
    s = doc["summary"]
    assert s["det"]["pass"] and s["det"]["max_abs_pct"] < 3.0 and s["trivial"]["max_abs_pct"] > 9.0
    assert doc["sustained_clocks_pooled"]["plain"]["mhz"] < 1400
    frame = pd.read_csv(run / "validation.csv")
    kl = frame[(frame["direction"] == "forward") & (frame["knob"] == "kloop")]
    cycles = kl["x_cycles_meas"] / kl["x_cycles_base"]
    assert (cycles - kl["measured_ratio"] > 0.08).all()  # walls well below the cycles
    assert (kl["term_clock"] < -0.07).all() and (kl["err_det_pct"].abs() < 2.5).all()


def test_coop_8192x8192x1024_meets_the_target_power_capped():
    """Coop 8192^2x1024, first run in sustained blocks (predictions written before it): its plain build
    is power-capped near 1,370 MHz, the delayed builds clock up, and the model with its clock term
    meets the target where the trivial rule misses by up to 11%."""
    doc = json.loads((H100 / "validation_coop_8192x8192x1024_sustained_blocks" / "validation.json").read_text())
    s = doc["summary"]
    assert s["det"]["pass"] and s["det"]["max_abs_pct"] < 3.5 and s["trivial"]["max_abs_pct"] > 10.0
    assert doc["sustained_clocks_pooled"]["plain"]["mhz"] < 1450


def test_pingpong_8192_pooled_clock_misses_on_the_baseline_state_not_the_cycles():
    """The fresh 8192^3 ping-pong run misses (2.30% / 6.43%). Not the equilibrium: in cycles it is
    within 3%. The plain build spent 4 of its 5 forward blocks ~1,510 MHz at ~600 W, 100 W under the
    limit while NVML flags the power cap, and its reverse blocks ~1,740 MHz at ~720 W: its forward
    walls came out ~5% slower than its reverse ones, so every forward ratio reads low (the noise row,
    its second build against it, is 3%). The clock term models a capped build drawing the limit; a
    build held below it is a state it does not describe, and the run scores it as measured."""
    doc = json.loads((H100 / "validation_pingpong_8192_pooled_clock" / "validation.json").read_text())
    s = doc["summary"]
    assert not s["det"]["pass"] and 2.0 < s["det"]["median_abs_pct"] < 2.5 and s["det"]["max_abs_pct"] > 6.0
    assert s["cycles"]["max_abs_pct"] < 3.0 and s["noise_floor_pct"] > 2.5
    assert s["trivial"]["flip"]["median_abs_pct"] > 30 * s["det"]["flip"]["median_abs_pct"]
    limit = doc["device_limits"]["power_limit_w"]
    fwd, rev = doc["sustained_blocks"]["forward"]["plain"], doc["sustained_blocks"]["reverse"]["plain"]
    low = [b for b in fwd if b["watts_mean"] < 0.9 * limit and b["reasons"] & 0x4]
    assert len(low) == 4 and all(b["mhz_mean"] < 1550 for b in low)
    assert all(b["watts_mean"] > 0.98 * limit for b in rev[:4])
    walls_f, walls_r = doc["wall_us_forward"]["plain"], doc["wall_us_reverse"]["plain"]
    assert statistics.fmean(walls_f) / statistics.fmean(walls_r) > 1.04
