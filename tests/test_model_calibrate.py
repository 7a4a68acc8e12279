"""Calibration from timing tables: a small discrete-event generator plays a known pipeline (barrier by
barrier, warp by warp) and writes the schema's rows; the model must find the structure, reproduce
the period, and predict what the generator measures after a change."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bsprof.analyzers.model import calibrate, detect_structure, project
from bsprof.analyzers.model.eventgraph import solve
from bsprof.analyzers.timing.io import write_table


def _rows(out, cta, warp, role, tile, phase, start, end):
    out.append((0, cta, warp, role, tile, phase, int(round(start)), int(round(end))))


def blackwell_table(
    tiles=300, ctas=2, S=2, h=100, ell=900, t0=850, k=4150, p1=4100, p2=900, sd=250, dk=0.0, dp1=0.0, seed=1
):
    """MMA warp 4 and epilogue warps 0-3; the accumulator barrier fires when the last warp has
    finished Phase 1; per-warp Phase 1 is drawn per tile."""
    rng = np.random.default_rng(seed)
    out = []
    for cta in range(ctas):
        base = 1_000_000 * (cta + 1)
        m_prev, e_prev = base, np.full(4, base - ell, float)
        freed = [base - 10**9] * S
        for i in range(tiles):
            start = m_prev
            acq = max(start, freed[i % S] + h)
            landed = acq + t0 + rng.normal(0, 20)
            end_k = landed + k + dk + rng.normal(0, 30)
            _rows(out, cta, 4, "mma", i, "acc_wait", start, acq)
            _rows(out, cta, 4, "mma", i, "tma0", acq, landed)
            _rows(out, cta, 4, "mma", i, "kloop", landed, end_k)
            shared = rng.normal(0, sd)
            last = -np.inf
            e_new = np.empty(4)
            for w in range(4):
                u = max(end_k + h, e_prev[w] + ell)
                d1 = max(100.0, p1 + dp1 + shared + rng.normal(0, sd / 2))
                d2 = p2 + rng.normal(0, 40)
                _rows(out, cta, w, "epilogue", i, "ml_wait", e_prev[w], u)
                _rows(out, cta, w, "epilogue", i, "phase1", u, u + d1)
                _rows(out, cta, w, "epilogue", i, "phase2", u + d1, u + d1 + d2)
                last = max(last, u + d1)
                e_new[w] = u + d1 + d2
            freed[i % S] = last
            m_prev, e_prev = end_k, e_new
    return pd.DataFrame(out, columns=["sm", "cta", "warp", "role", "tile", "phase", "start", "end"])


def hopper_table(mode="coop", tiles=300, ctas=2, t0=300, k=4000, p1=1200, p2=900, dk=0.0, seed=2):
    """Consumer warps 4 and 8 (one per warpgroup) run the K-loop and then their own epilogue.
    coop: both work on every tile; pingpong: tiles alternate between them, tensor core shared."""
    rng = np.random.default_rng(seed)
    out = []
    for cta in range(ctas):
        base = 1_000_000 * (cta + 1)
        free = {4: base, 8: base}
        tc_free = base
        epi_free = base
        for i in range(tiles):
            warps = (4, 8) if mode == "coop" else ((4,) if i % 2 == 0 else (8,))
            start = max(free[w] for w in warps)
            if mode == "pingpong":
                start = max(start, tc_free)
            kd = k + dk + rng.normal(0, 40)
            end_k = start + t0 + kd
            tc_free = end_k
            for w in warps:
                _rows(out, cta, w, "mma", i, "acc_wait", start, start)
                _rows(out, cta, w, "mma", i, "tma0", start, start + t0)
                _rows(out, cta, w, "mma", i, "kloop", start + t0, end_k + rng.normal(0, 10) * (w == 8))
                u = max(end_k, epi_free) if mode == "pingpong" else end_k
                d1 = p1 + rng.normal(0, 60)
                d2 = p2 + rng.normal(0, 30)
                _rows(out, cta, w, "epilogue", i, "phase1", u, u + d1)
                _rows(out, cta, w, "epilogue", i, "phase2", u + d1, u + d1 + d2)
                free[w] = u + d1 + d2
            epi_free = max(free[w] for w in warps)
    return pd.DataFrame(out, columns=["sm", "cta", "warp", "role", "tile", "phase", "start", "end"])


def measured_period(t):
    from bsprof.analyzers.model.calibrate import observed_period

    return observed_period(t)


def test_blackwell_table_calibrates_and_predicts_a_kloop_change():
    t = blackwell_table()
    assert detect_structure(t) == "blackwell"
    p = calibrate(t)
    lam = measured_period(t)
    assert solve(p).period == pytest.approx(lam, rel=1e-6)
    assert p.samples is not None and p.samples.phase1.shape[1] == 4
    sto = project(p, {}, tiles=20000).sto
    assert sto["baseline_tile_cycles"] == pytest.approx(lam, rel=0.01)
    # Phase 1 longer by 300 on the generator: measured ratio vs projected
    t2 = blackwell_table(dp1=300)
    meas = measured_period(t2) / lam
    j = project(p, {"phase1": 300}, tiles=20000).to_json()
    assert j["stochastic"]["wall_ratio"] == pytest.approx(meas, abs=0.01)
    assert j["deterministic"]["wall_ratio"] == pytest.approx(meas, abs=0.02)
    # a K-loop cut inside the slack: the generator does not get faster, nor does the model
    t3 = blackwell_table(dk=-200)
    assert measured_period(t3) / lam == pytest.approx(1.0, abs=0.005)
    assert project(p, {"kloop": -200}, tiles=20000).sto["wall_ratio"] == pytest.approx(1.0, abs=0.005)


def test_blackwell_mma_bound_table():
    t = blackwell_table(ell=0, k=6500, p1=3000)
    p = calibrate(t)
    eq = solve(p)
    assert eq.binding == "producer"
    j = project(p, {"kloop": -300}, tiles=20000).to_json()
    meas = measured_period(blackwell_table(ell=0, k=6200, p1=3000)) / measured_period(t)
    assert j["deterministic"]["wall_ratio"] == pytest.approx(meas, abs=0.01)


@pytest.mark.parametrize("mode", ["coop", "pingpong"])
def test_hopper_tables_pick_their_structure(mode, tmp_path):
    t = hopper_table(mode)
    write_table(t, tmp_path)  # the timing helper's writer; the model reads what it writes
    from bsprof.analyzers.timing.table import load

    t = load(tmp_path)
    assert detect_structure(t) == f"hopper-{mode}"
    p = calibrate(t)
    assert p.structure.name == f"hopper-{mode}"
    lam = measured_period(t)
    assert solve(p).period == pytest.approx(lam, rel=0.02)
    meas = measured_period(hopper_table(mode, dk=-400)) / lam
    j = project(p, {"kloop": -400}, tiles=20000).to_json()
    assert j["deterministic"]["wall_ratio"] == pytest.approx(meas, abs=0.015)
    if mode == "coop":  # everything is serial: a K-loop cut pays 1:1
        assert j["deterministic"]["binding_before"] == "epilogue"
        assert j["deterministic"]["deficit"] == 0
    else:  # K = 4,300 > epilogue 2,100: the shared tensor core binds
        assert j["deterministic"]["binding_before"] == "producer"


def test_pingpong_acc_wait_is_the_tensor_core_idling_for_a_warpgroup():
    import pandas as pd

    from bsprof.analyzers.model.calibrate import pingpong_acc_wait

    # tile 1's warpgroup got the turn 300 cycles after tile 0's K-loop ended (it was still storing);
    # tile 2's warpgroup was already waiting (its own acc_wait phase is long, the model's is 0)
    rows = [
        (0, 0, 4, "mma", 0, "tma0", 0, 100),
        (0, 0, 4, "mma", 0, "kloop", 100, 5000),
        (0, 0, 8, "mma", 1, "tma0", 5300, 5400),
        (0, 0, 8, "mma", 1, "kloop", 5400, 10000),
        (0, 0, 4, "mma", 2, "acc_wait", 6000, 10050),
        (0, 0, 4, "mma", 2, "tma0", 10050, 10100),
        (0, 0, 4, "mma", 2, "kloop", 10100, 15000),
    ]
    t = pd.DataFrame(rows, columns=["sm", "cta", "warp", "role", "tile", "phase", "start", "end"])
    keys = pd.MultiIndex.from_tuples([(0, 0), (0, 1), (0, 2)], names=["cta", "tile"])
    assert list(pingpong_acc_wait(t, keys)) == [0.0, 300.0, 50.0]
