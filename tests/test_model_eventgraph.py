"""The deterministic equilibrium: closed form == maximum cycle mean (Karp) on the event graph,
known closed forms of each structure, and the Monte Carlo collapsing onto it without noise."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsprof.analyzers.model import montecarlo as mc
from bsprof.analyzers.model.eventgraph import makespan, max_cycle_mean, period_karp, solve
from bsprof.analyzers.model.params import EpilogueSide, Fitted, MmaSide, ModelParams, Structure
from bsprof.analyzers.model.project import project


def make(
    structure="blackwell",
    S=None,
    rho=None,
    h=100.0,
    t0=800.0,
    k=4000.0,
    p1=(4000.0,) * 4,
    p2=(900.0,) * 4,
    ell=0.0,
    om=0.0,
    blocking=1.0,
):
    if structure != "blackwell":
        rho = None  # a Hopper consumer frees its registers after Phase 2
    st_ = Structure.named(structure, S, release_frac=rho, handoff=h, phase2_blocking=blocking)
    return ModelParams(
        st_, MmaSide(t0, k, om), EpilogueSide(tuple(p1), tuple(p2), ell), fitted=Fitted(tuple(p1), tuple(p1), 0.0)
    )


dur = st.floats(0, 8000, allow_nan=False, allow_infinity=False)


@settings(max_examples=120, deadline=None)
@given(
    structure=st.sampled_from(["blackwell", "hopper-coop", "hopper-pingpong"]),
    S=st.integers(1, 4),
    rho=st.floats(0, 1),
    h=st.floats(0, 800),
    t0=dur,
    k=dur,
    p1=st.lists(dur, min_size=1, max_size=5),
    p2=st.floats(0, 3000),
    ell=st.floats(0, 2000),
    om=st.floats(0, 500),
)
def test_closed_form_is_the_maximum_cycle_mean(structure, S, rho, h, t0, k, p1, p2, ell, om):
    p = make(structure, S, rho, h, t0, k, p1, [p2] * len(p1), ell, om, blocking=rho)
    assert math.isclose(solve(p).period, period_karp(p), rel_tol=1e-9, abs_tol=1e-6)


def test_karp_on_a_hand_made_graph():
    # two cycles: 0->1->0 weight 10 over 1 token (mean 10); 1->2->1 weight 30 over 2 tokens (mean 15)
    arcs = [(0, 1, 4.0, 0), (1, 0, 6.0, 1), (1, 2, 10.0, 0), (2, 1, 20.0, 2)]
    assert max_cycle_mean(3, arcs) == pytest.approx(15.0)


def test_structures_closed_forms():
    coop = solve(make("hopper-coop", t0=300, k=4000, p1=(1000, 1100), p2=(500, 500), h=0))
    assert coop.period == pytest.approx(300 + 4000 + 1100 + 500)
    assert coop.binding == "epilogue" and coop.kloop_slack == 0 and coop.phase1_slack == 0
    # ping-pong: two warpgroups alternate, the tensor core is shared
    K, E = 4300.0, 1600.0
    pp = solve(make("hopper-pingpong", t0=300, k=4000, p1=(1100,), p2=(500,), h=0))
    assert pp.period == pytest.approx(max(K, E, (K + E) / 2)) and pp.binding == "producer"
    # each warpgroup stores its own tiles, so the two epilogues overlap: past the flip the period
    # is a warpgroup's K-loop + epilogue over its two tiles, not one epilogue per tile
    pp2 = solve(make("hopper-pingpong", t0=300, k=1000, p1=(3100,), p2=(500,), h=0))
    assert pp2.period == pytest.approx((1300 + 3600) / 2) and pp2.binding == "epilogue"
    # Blackwell, one stage, release at the end of Phase 1: the accumulator cycle
    bw = solve(make("blackwell", S=1, rho=1.0, h=100, t0=800, k=4000, p1=(4000,) * 4))
    assert bw.period == pytest.approx(800 + 4000 + 200 + 4000) and bw.critical == "accumulator-cycle"


def test_slack_is_where_the_binding_side_changes():
    p = make("blackwell", S=2, ell=1000)
    eq = solve(p)
    assert eq.binding == "epilogue"
    bump = eq.kloop_slack
    under = solve(make("blackwell", S=2, ell=1000, k=4000 + bump - 1))
    over = solve(make("blackwell", S=2, ell=1000, k=4000 + bump + 50))
    assert under.period == pytest.approx(eq.period)
    assert over.period == pytest.approx(eq.period + 50) and over.binding == "producer"


@pytest.mark.parametrize(
    "structure,S", [("blackwell", 1), ("blackwell", 2), ("hopper-coop", 1), ("hopper-pingpong", 2)]
)
def test_monte_carlo_without_noise_is_the_deterministic_period(structure, S):
    p = make(structure, S, rho=0.5, h=50, ell=700)
    pj = project(p, {"kloop": -250}, tiles=5000)
    d, s = pj.to_json()["deterministic"], pj.to_json()["stochastic"]
    assert s["baseline_tile_cycles"] == pytest.approx(d["baseline_tile_cycles"], rel=1e-6)
    assert s["projected_tile_cycles"] == pytest.approx(d["projected_tile_cycles"], rel=1e-6)
    assert s["tiles"] >= 5000


def test_max_over_warps_costs_time_in_the_monte_carlo():
    # same mean per warp, wide independent per-warp tails: the release barrier waits for the slowest
    p = make("blackwell", S=1, rho=1.0, h=0, t0=0, k=1000, p1=(2000.0,) * 4, p2=(0.0,) * 4)
    p.fitted = Fitted((2000.0,) * 4, (3500.0,) * 4, corr=0.0)
    det = solve(p).period
    sto = project(p, {}, tiles=20000).sto["baseline_tile_cycles"]
    assert sto > det + 300
    assert mc.lognormal_sigma(2000, 3500) > 0.3


@pytest.mark.parametrize("structure", ["blackwell", "hopper-coop", "hopper-pingpong"])
def test_makespan_grows_by_the_period(structure):
    p = make(structure, 2, 1.0, 50, 300, 4000, (1200, 1500), (400, 400), 100, 20, blocking=1.0)
    per = solve(p).period
    assert makespan(p, 400) - makespan(p, 200) == pytest.approx(200 * per, rel=1e-9)


def test_makespan_exposes_the_last_epilogue_when_the_tensor_core_binds():
    # ping-pong, tensor-core bound: n K-loops back to back, then the last tile's epilogue
    p = make("hopper-pingpong", t0=0, k=4000, p1=(1000,), p2=(0,), h=0)
    assert makespan(p, 8) == pytest.approx(8 * 4000 + 1000)
    longer = make("hopper-pingpong", t0=0, k=4000, p1=(3000,), p2=(0,), h=0)
    # still tensor-core bound: the period is unchanged, the wall time is not
    assert solve(longer).period == solve(p).period
    assert makespan(longer, 8) - makespan(p, 8) == pytest.approx(2000)
