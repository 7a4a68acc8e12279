"""The model's structure away from its calibration point: the measured epilogue shared-path ceiling
behind --epi-warps, warp counts a structure cannot take, --explain's cycle walk, and the fitted
terms and provenance every projection carries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_bsprof

from bsprof.analyzers.model import default_params, project
from bsprof.analyzers.model.ceiling import shipped_curve
from bsprof.analyzers.model.explain import cycle_walk, fitted_terms
from bsprof.errors import BsprofError

H100 = Path(__file__).parent / "data" / "h100_timing"


def test_shipped_curve_is_an_h100_measurement_with_a_ceiling():
    """Per-warp time of a fixed store-heavy work on the H100: the SM's throughput (warps / time)
    stops growing past ~5 warps, so per-warp time at 16 warps is > 4x a lone warp's."""
    c = shipped_curve()
    assert c is not None and "H100" in c.device and c.warps[0] == 1 and c.warps[-1] >= 16
    thr = {w: w / t for w, t in zip(c.warps, c.cycles)}
    assert c.cycles[-1] > 4 * c.cycles[0]
    assert thr[16] < 1.1 * thr[5] and thr[5] > 2.5 * thr[1]
    t, extrapolated = c.per_warp(20)
    assert extrapolated and t > c.cycles[-1]
    assert c.per_warp(7) == (pytest.approx((c.cycles[5] + c.cycles[6]) / 2), False)


def test_more_epilogue_warps_stop_paying_at_the_shared_path():
    """The B200 default: splitting Phase 1/2 over 6 warps instead of 4 was projected at +17% by a
    perfect W/N split; through the measured ceiling it buys nothing (the users' notes record 6
    concurrent epilogue warps regressing), and 16 warps buy no more than 8."""
    p = default_params()
    six = project(p, {"epi_warps": 6}, stochastic=False)
    assert six.wall_ratio > 0.99
    c = six.extra["ceiling"]
    assert c["split"] == pytest.approx(4 / 6) and c["phase1_scale"] > 0.99 and c["stand_in"]
    assert not c["extrapolated"]
    eight = project(p, {"epi_warps": 8}, stochastic=False).wall_ratio
    sixteen = project(p, {"epi_warps": 16}, stochastic=False).wall_ratio
    assert sixteen == pytest.approx(eight, abs=0.01)
    assert project(p, {"epi_warps": 24}, stochastic=False).extra["ceiling"]["extrapolated"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--epi-warps", "3"], "at least 4 epilogue warps"),
        (["--epi-warps", "31"], "CTA holds 32 warps"),
        # every count below the structure's floor says why, with the same range as above it
        (["--epi-warps", "0"], "at least 4 epilogue warps; use 4..30"),
        (["--epi-warps", "99999999999"], "CTA holds 32 warps, 2 of them producer and MMA; use 4..30"),
        (["--acc-stages", "9"], "out of range; use 1..8"),
        (["--phase1", "-120%"], "makes it negative"),
        (["--kloop", "-5000"], "makes it negative"),
        (
            ["--from", str(H100 / "validation_pingpong" / "tables" / "plain.parquet"), "--epi-warps", "8"],
            "runs its own epilogue",
        ),
    ],
)
def test_changes_the_structure_cannot_take_get_one_line(args, words):
    code, out, err = run_bsprof(["model", *args])
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert words in assert_one_line_error(code, err)


def test_explain_walks_the_cycles_before_and_after_a_flip():
    """Ping-pong 4096^3 from the H100: the tensor core's chain binds; Phase 1 +40k cycles makes
    the warpgroup's K-loop + epilogue cycle (two tokens) bind instead, and every cycle's mean is
    its arcs' sum over its tokens."""
    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model.project import apply, parse_deltas
    from bsprof.analyzers.timing.io import read_table

    p = calibrate(read_table(H100 / "validation_pingpong" / "tables" / "plain.parquet"), stochastic=False)
    before = cycle_walk(p)
    after = cycle_walk(apply(p, parse_deltas({"phase1": 40_000})))
    crit = lambda w: next(c for c in w if c["critical"])  # noqa: E731
    assert crit(before)["cycle"] == "mma-chain" and crit(after)["cycle"] == "accumulator-cycle"
    for c in before + after:
        assert c["mean"] == pytest.approx(sum(v for _, v in c["arcs"]) / c["tokens"])
    pj = project(p, {"phase1": 40_000}, stochastic=False)
    assert crit(after)["mean"] == pytest.approx(pj.det_after.period)
    assert max(c["mean"] for c in after) == pytest.approx(pj.det_after.period)


def test_explain_flag_prints_both_walks():
    r = subprocess.run(
        [sys.executable, "-m", "bsprof", "model", "--phase1", "-300", "--explain", "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"before", "after", "period_before", "period_after"} <= set(doc["explain"])
    assert r.stderr.strip() == ""  # --json: the walks are in the JSON, nothing else is printed
    r = subprocess.run(
        [sys.executable, "-m", "bsprof", "model", "--phase1", "-300", "--explain"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "Critical cycle walk, before" in r.stdout and "Critical cycle walk, after" in r.stdout


def test_b200_default_names_its_fitted_term_and_provenance():
    """The 958-cycle epilogue-loop overhead is fitted to the measured tile period: named as such,
    with its share of the period and the projection without it."""
    p = default_params()
    terms = {t["term"]: t for t in fitted_terms(p, {"phase1": -300})}
    ov = terms["epilogue-loop overhead"]
    assert ov["how"] == "fitted" and ov["size"] == pytest.approx(958, abs=5)
    assert ov["share_of_period"] == pytest.approx(958 / 6067, abs=0.002)
    assert ov["projected_change_without"] != pytest.approx(ov["projected_change"], abs=1e-4)
    assert terms["barrier hand-off"]["how"].startswith("assumed")
    r = subprocess.run([sys.executable, "-m", "bsprof", "model", "--json"], capture_output=True, text=True)
    doc = json.loads(r.stdout)
    assert "fitted" in doc["provenance"] and "not predictions" in doc["provenance"]["outcomes"]
    assert any(t["term"] == "epilogue-loop overhead" for t in doc["fitted_terms"])


def test_bad_ceiling_warps_raise_in_the_api():
    with pytest.raises(BsprofError):
        project(default_params(), {"epi_warps": 2}, stochastic=False)


def test_explain_without_a_change_walks_only_the_baseline():
    r = subprocess.run([sys.executable, "-m", "bsprof", "model", "--explain", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["explain"]["after"] is None and doc["explain"]["before"]
    r = subprocess.run([sys.executable, "-m", "bsprof", "model", "--explain"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Critical cycle walk, before" in r.stdout and "Critical cycle walk, after" not in r.stdout
    assert "no change given" in r.stdout
