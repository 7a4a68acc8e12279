"""Blocks the power controller held below the limit: the rule on the H100's stored sustained-block
runs (every run that recorded per-block readings), and what the validation does with them.

The rule was drawn up on the two ping-pong runs and checked on the two coop runs; every number
it gives on these runs is post hoc (the runs were made before it)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from bsprof.analyzers.model import sustained as SU
from bsprof.analyzers.model import validation as V
from bsprof.analyzers.model.clock import limits_for

H100 = Path(__file__).parent / "data" / "h100_timing"
RUNS = (
    "validation_pingpong_4096_pooled_clock",
    "validation_pingpong_8192_pooled_clock",
    "validation_coop_4096_sustained_blocks",
    "validation_coop_8192x8192x1024_sustained_blocks",
    "validation_coop_8192_sustained_blocks",
)


def _doc(run: str) -> tuple[dict, object]:
    doc = json.loads((H100 / run / "validation.json").read_text())
    return doc, limits_for(doc["device"], doc["device_limits"])


def _walls(doc: dict) -> dict:
    return {"forward": doc["wall_us_forward"], "reverse": doc["wall_us_reverse"]}


def _code_median_wall(doc: dict, build: str) -> float:
    code = SU.SAME_CODE.get(build, build)
    ws = [w for s in _walls(doc).values() for k, v in s.items() if SU.SAME_CODE.get(k, k) == code for w in v]
    return statistics.median(ws)


def test_pingpong_8192_baseline_blocks_held_100w_under_the_limit_are_flagged_and_its_reverse_blocks_not():
    doc, lim = _doc("validation_pingpong_8192_pooled_clock")
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    assert held[("forward", "plain")] == [1, 2, 3, 4]
    assert held[("forward", "plain_b")] == [1]
    assert ("reverse", "plain") not in held
    # the reverse Phase 1 -120k point's calibration build: three of its five blocks ~1,720 MHz at ~608 W
    assert held[("reverse", "kloop0_phase1120000")] == [0, 1, 2]


def test_a_low_draw_at_the_usual_clock_is_not_held():
    """Ping-pong 4096^3 has blocks ~75 W under the limit (K-loop +11k at 625 W) whose clock and wall
    time are those of the build's other blocks: a power threshold alone would flag them; the rule
    wants the clock down with the draw, and flags nothing in that run."""
    doc, lim = _doc("validation_pingpong_4096_pooled_clock")
    low = doc["sustained_blocks"]["forward"]["kloop290_phase10"][1]
    assert low["watts_mean"] < 630 and low["reasons"] & SU.POWER_CAP_BIT
    assert SU.held_blocks(doc["sustained_blocks"], lim) == {}


@pytest.mark.parametrize("run", RUNS)
def test_every_held_block_ran_slower_than_its_code_usually_does(run):
    """The rule reads clocks and power only, never wall times: every block it flags in any stored
    run is > 2% slower than the median block of its code (a held state, not a dither)."""
    doc, lim = _doc(run)
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    walls = _walls(doc)
    for (name, build), reps in held.items():
        for i in reps:
            assert walls[name][build][i] > 1.02 * _code_median_wall(doc, build), (name, build, i)


def _order(keys: list, repeats: int) -> list:
    from bsprof.profile.validate import rotated_order

    return [(k, r) for r in range(repeats) for k in rotated_order(keys, r)]


def test_every_held_block_followed_a_block_that_drew_the_limit():
    """The held state is the controller answering what ran before: in the four runs every held
    block followed a block drawing >= 700 W, and no block after one drawing less was held."""
    after_high, after_low = [0, 0], [0, 0]
    for run in RUNS:
        doc, lim = _doc(run)
        held = SU.held_blocks(doc["sustained_blocks"], lim)
        for name, reads in doc["sustained_blocks"].items():
            seq = _order(list(reads), len(next(iter(reads.values()))))
            for (pk, pr), (k, r) in zip(seq, seq[1:]):
                tally = after_high if reads[pk][pr]["watts_mean"] >= lim.power_limit_w else after_low
                tally[0] += r in held.get((name, k), ())
                tally[1] += 1
    assert after_low[0] == 0 and after_low[1] > 150
    assert after_high[0] >= 15


def test_held_blocks_cannot_be_rescaled_by_their_clock():
    """Why the held blocks are left out rather than scored as cycles x the sustained clock: in the
    8192^3 baseline's held blocks wall x NVML clock reads 6-9% fewer cycles than in its other blocks
    (the reading under-reads the rate it ran at), so rescaling would over-correct them by as much."""
    doc, lim = _doc("validation_pingpong_8192_pooled_clock")
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    blocks, walls = doc["sustained_blocks"], _walls(doc)

    def cycles(name, build, i):
        return walls[name][build][i] * blocks[name][build][i]["mhz_mean"]

    bad = [cycles("forward", "plain", i) for i in held[("forward", "plain")]]
    good = [cycles("reverse", "plain", i) for i in range(5)]
    assert max(bad) < 0.95 * statistics.median(good)


def test_pingpong_8192_without_its_held_blocks_scores_inside_the_target_post_hoc():
    """Post hoc (the run predates the rule): as scored 2.30% / 6.43%; without the 11 held blocks,
    with the baseline's clock pooled over its unheld blocks, 1.61% / 4.45%, and the noise row falls
    from 3.0% to 0.5%. The next fresh run, with predictions written first, is what counts."""
    doc, lim = _doc("validation_pingpong_8192_pooled_clock")
    res = SU.rescore_held(doc, lim)
    s = res["summary"]
    assert doc["summary"]["det"]["max_abs_pct"] > 6.0 and not doc["summary"]["det"]["pass"]
    assert len(res["blocks"]) == 11
    assert s["det"]["median_abs_pct"] < 2.0 and s["det"]["max_abs_pct"] < 5.0 and s["det"]["pass"]
    assert s["noise_floor_pct"] < 1.0
    fwd = [p for p in res["points"] if p.direction == "forward"]
    assert all(p.extra["held_repeats"] >= 1 for p in fwd)  # the baseline's repeat 1 is gone
    assert all(len(p.base_reps) >= 3 for p in fwd)  # the twin build stood in for the rest
    plain = SU.pooled_clocks(
        doc["sustained_blocks"]["forward"],
        doc["sustained_blocks"]["reverse"],
        skip=SU.held_blocks(doc["sustained_blocks"], lim),
        names=("forward", "reverse"),
    )["plain"]
    assert plain["blocks"] == 10 and 1700 < plain["mhz"] < 1760  # was 1,655 with the held blocks


def test_the_first_fresh_run_with_re_timed_repeats_scores_as_it_came_out():
    """Ping-pong 8192^3, re-timed held blocks (the prediction written before it): the baseline held again in its
    forward repeats 1-4 (each right after the both +120k build, 0.2 s settle); the 3 re-timed
    repeats (0.6 s settle, same predecessor) held it in none. As scored 1.77% / 5.21% (misses the
    max, at Phase 1 +249k); without the held blocks 1.69% / 4.22% (meets on that score)."""
    doc, lim = _doc("validation_pingpong_8192_held_blocks")
    assert doc["retimed_repeats"] == {"forward": 3, "reverse": 1}
    assert all(len(v) == 8 for v in doc["wall_us_forward"].values())
    assert all(len(v) == 6 for v in doc["wall_us_reverse"].values())
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    assert held[("forward", "plain")] == [1, 2, 3, 4]
    assert sum(map(len, held.values())) == 7
    pts = V.reclock(pd.read_csv(H100 / "validation_pingpong_8192_held_blocks" / "validation.csv"), lim)
    s = V.summary(pts)["det"]
    assert s["max_abs_pct"] == pytest.approx(5.21, abs=0.01) and not s["pass"]
    assert s["median_abs_pct"] == pytest.approx(1.77, abs=0.01) and s["beats_trivial_on_flips"]
    h = SU.held_summary(doc, lim)["det"]
    assert h["pass"] and h["max_abs_pct"] == pytest.approx(4.22, abs=0.01)
    assert h["median_abs_pct"] == pytest.approx(1.69, abs=0.01)


@pytest.mark.parametrize("run", RUNS[:1] + RUNS[2:])
def test_the_rule_costs_the_runs_that_met_the_target_nothing(run):
    doc, lim = _doc(run)
    res = SU.rescore_held(doc, lim)
    before, after = doc["summary"]["det"], res["summary"]["det"]
    assert after["pass"] and after["max_abs_pct"] <= before["max_abs_pct"] + 1e-9
    assert after["median_abs_pct"] <= before["median_abs_pct"] + 1e-9


def test_runs_without_per_block_readings_are_left_alone():
    doc, lim = _doc("validation_pingpong_8192_pooled_clock")
    old = json.loads((H100 / "validation_pingpong_8192_clock_term" / "validation.json").read_text())
    assert "sustained_blocks" not in old
    assert SU.held_summary(old, lim) is None
    assert SU.held_summary(doc, None) is None


def test_retime_runs_whole_extra_repeats_for_held_blocks(monkeypatch):
    """The protocol: a set with held blocks runs again, whole (every point keeps ratios of blocks
    timed side by side), once per held block of its most-held build and at most RETIME_MAX times,
    continuing the rotation."""
    from bsprof.profile import validate

    doc, _ = _doc("validation_pingpong_8192_pooled_clock")
    reads = {k: list(v) for k, v in doc["sustained_blocks"]["forward"].items()}
    reps = {k: list(v) for k, v in doc["wall_us_forward"].items()}
    calls = []

    def fake(launchers, keys, repeats, rounds=8, first=0, settle_s=validate.SETTLE_S, stamps=None):
        calls.append((repeats, first, settle_s))
        return (
            {k: [1.0] * repeats for k in keys},
            {k: [{"mhz_mean": 1740.0, "watts_mean": 720.0, "reasons": 4, "readings": 20}] * repeats for k in keys},
            "graph",
        )

    monkeypatch.setattr(validate, "sustained_walls", fake)
    extra = validate.retime_held({}, list(reps), reps, reads, doc["device_limits"], 5, max_extra=3)
    assert extra == 3 and calls == [(3, 5, validate.SETTLE_S)]
    assert all(len(v) == 8 for v in reps.values()) and all(len(v) == 8 for v in reads.values())
    # the protocol's own cap: every block now settles 0.6 s, so one extra repeat at most
    reps = {k: list(v) for k, v in doc["wall_us_forward"].items()}
    reads = {k: list(v) for k, v in doc["sustained_blocks"]["forward"].items()}
    assert validate.retime_held({}, list(reps), reps, reads, doc["device_limits"], 5) == validate.RETIME_MAX == 1
    assert validate.SETTLE_S == 0.6
    calm = {k: v[:1] for k, v in doc["sustained_blocks"]["forward"].items()}  # repeat 0: nothing held
    assert validate.retime_held({}, list(calm), {k: [0.0] for k in calm}, calm, doc["device_limits"], 1) == 0


def test_the_reverse_set_is_retimed_for_a_build_held_in_most_of_its_blocks(monkeypatch):
    """The 8192^3 run's reverse source Phase 1 +120k was held in 3 of its 5 reverse blocks (the max
    error, +6.43%). Judged on the reverse set alone its median block is a held one and the rule sees
    nothing; judged, as scoring judges it, over every block of its code (its forward blocks too),
    3 are held and the set gets 3 extra repeats. Blocks held in the earlier set are not this set's."""
    from bsprof.profile import validate

    doc, _ = _doc("validation_pingpong_8192_pooled_clock")
    fwd = doc["sustained_blocks"]["forward"]

    def fake(launchers, keys, repeats, rounds=8, first=0, settle_s=validate.SETTLE_S, stamps=None):
        return (
            {k: [1.0] * repeats for k in keys},
            {k: [{"mhz_mean": 1900.0, "watts_mean": 700.0, "reasons": 4, "readings": 20}] * repeats for k in keys},
            "graph",
        )

    monkeypatch.setattr(validate, "sustained_walls", fake)

    def extra(earlier):
        back = {k: list(v) for k, v in doc["sustained_blocks"]["reverse"].items()}
        reps = {k: list(v) for k, v in doc["wall_us_reverse"].items()}
        return validate.retime_held({}, list(reps), reps, back, doc["device_limits"], 5, earlier=earlier, max_extra=3)

    assert extra({"forward": fwd}) == 3
    assert extra(None) == 1  # only both +120k r3: the build whose blocks were mostly held hides
    calm = {k: [b[0]] for k, b in doc["sustained_blocks"]["reverse"].items()}  # repeat 0 of plain: unheld
    n = validate.retime_held(
        {}, ["plain"], {"plain": [1.0]}, {"plain": calm["plain"]}, doc["device_limits"], 1, earlier={"forward": fwd}
    )
    assert n == 0  # the plain build's held forward blocks are the forward set's, already re-timed


def test_the_validation_output_shows_which_blocks_were_held_out():
    import io

    import pandas as pd
    from rich.console import Console

    from bsprof.reports.model_text import render_validation

    run = H100 / "validation_pingpong_8192_pooled_clock"
    doc, lim = _doc("validation_pingpong_8192_pooled_clock")
    pts = V.reclock(pd.read_csv(run / "validation.csv"), lim)
    summ = V.summary(pts)
    summ["held"] = SU.held_summary(doc, lim)
    buf = io.StringIO()
    render_validation(Console(file=buf, width=260), pts, summ, "ping-pong 8192")
    text = buf.getvalue()
    assert "held out" in text and "plain f1" in text and "11 blocks" in text
    assert "-4 rep" in text and "max 4.45%" in text


REPEAT = "validation_pingpong_8192_held_blocks_repeat"


def test_repeat_of_the_held_blocks_protocol_scores_as_it_came_out():
    """A repeat of the re-timed held-blocks protocol (rotation, 0.2 s settle, NVML clocks; the code and
    commit are in docs/model.md). Fresh ping-pong 8192^3, as it came out: as scored 1.88% / 5.17%
    (misses the max: forward both +19k/+50k, +5.17% +- 4.65), held out 2.18% / 4.56% (misses the
    median). The plain build followed the both +120k build (704-728 W) in every repeat after the
    first and was held in 3 of its 4 such 0.2 s-settle forward blocks and in none of the 3 re-timed
    (0.6 s) ones, the first run's pattern again."""
    doc, lim = _doc(REPEAT)
    assert doc["retimed_repeats"] == {"forward": 3, "reverse": 3}
    assert doc["wall_protocol"]["settle_s"] == 0.2 and "clock_source" not in doc
    pts = V.reclock(pd.read_csv(H100 / REPEAT / "validation.csv"), lim)
    s = V.summary(pts)["det"]
    assert s["median_abs_pct"] == pytest.approx(1.88, abs=0.01) and s["max_abs_pct"] == pytest.approx(5.17, abs=0.01)
    assert not s["pass"] and s["beats_trivial_on_flips"]
    stored = doc["summary"]["det"]  # the device's own score: the CPU re-score agrees with it
    assert (s["median_abs_pct"], s["max_abs_pct"]) == pytest.approx((stored["median_abs_pct"], stored["max_abs_pct"]))
    worst = max(pts, key=lambda p: abs(p.err_det_pct))
    assert (worst.direction, worst.knob, worst.delay_phase1 > 0) == ("forward", "both", True)
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    assert held[("forward", "plain")] == [1, 2, 4] and sum(map(len, held.values())) == 10
    h = SU.held_summary(doc, lim)["det"]
    assert not h["pass"] and h["median_abs_pct"] == pytest.approx(2.18, abs=0.01)
    assert h["max_abs_pct"] == pytest.approx(4.56, abs=0.01)
    # the first run's written prediction put the max at forward Phase 1 +249k, -4% to -6%: it came out -1.15%
    top = next(p for p in pts if p.direction == "forward" and p.delta_phase1 > 240_000)
    assert top.err_det_pct == pytest.approx(-1.15, abs=0.01)


def test_repeat_run_held_blocks_followed_the_limit_and_one_was_barely_slower():
    """The held state after a block at the limit, again: 10 of 77 blocks after a >= 700 W block held,
    none of 81 after a lower draw. The rule never reads walls; 9 of its 10 flagged blocks ran 3.6-8.8%
    slower than their code's median block, one (Phase 1 +25k, forward 3) only 1.6%."""
    doc, lim = _doc(REPEAT)
    held = SU.held_blocks(doc["sustained_blocks"], lim)
    after = {True: [0, 0], False: [0, 0]}
    for name, reads in doc["sustained_blocks"].items():
        seq = _order(list(reads), len(next(iter(reads.values()))))
        for (pk, pr), (k, r) in zip(seq, seq[1:]):
            t = after[reads[pk][pr]["watts_mean"] >= lim.power_limit_w]
            t[0] += r in held.get((name, k), ())
            t[1] += 1
    assert after[True] == [10, 77] and after[False] == [0, 81]
    walls = _walls(doc)
    slow = sorted(walls[n][b][i] / _code_median_wall(doc, b) for (n, b), reps in held.items() for i in reps)
    assert 1.01 < slow[0] < 1.02 and all(x > 1.03 for x in slow[1:])
