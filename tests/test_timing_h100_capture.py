"""The shipped H100 capture (tests/data/h100_timing: fp8-blockwise optimized, 4096^3, see its
timing.json): decoder, statistics, trace and the validation arithmetic on real data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import unxz_text

from bsprof.analyzers.timing.buffer import BufferPlan, decode_buffer
from bsprof.analyzers.timing.io import read_table
from bsprof.analyzers.timing.stats import epilogue_spread, fit_clock, phase_stats, summarize, tiles_per_sm


@pytest.fixture(scope="module")
def cap(data_dir):
    return data_dir / "h100_timing"


def test_real_buffer_decodes_to_the_shipped_table(cap):
    plan = BufferPlan.from_json(json.loads((cap / "buffer_4ctas.json").read_text()))
    t = decode_buffer(np.load(cap / "buffer_4ctas.npy"), plan)
    ref = read_table(cap / "timing.parquet")
    ref = ref[ref["cta"] < 4]
    key = ["cta", "warp", "role", "tile", "phase"]
    got = t.set_index(key).sort_index()
    want = ref.set_index(key).sort_index()
    assert len(got) == len(want) > 0
    for col in ("sm", "start", "end", "start_ns", "end_ns"):
        assert (got[col].to_numpy() == want[col].to_numpy()).all(), col
    # Hopper layout: warp 0 produces, warps 4-11 run their K-loop and their own epilogue
    assert set(t.loc[t["role"] == "producer", "warp"]) == {0}
    assert set(t.loc[t["role"] == "mma", "warp"]) == set(range(4, 12))
    assert "ml_wait" not in set(t["phase"])


def test_real_buffer_damage_is_caught(cap):
    from bsprof.errors import BsprofError

    plan = BufferPlan.from_json(json.loads((cap / "buffer_4ctas.json").read_text()))
    buf = np.load(cap / "buffer_4ctas.npy")
    with pytest.raises(BsprofError, match="truncated"):
        decode_buffer(buf[:-16], plan)
    bad = buf.reshape(plan.shape).copy()
    bad[2, 0, 1] = 0  # the producer's records of CTA 2 tile 1 are gone
    with pytest.raises(BsprofError, match="missing tiles"):
        decode_buffer(bad, plan)


def test_stats_of_the_real_capture_match_its_artifact(cap):
    t = read_table(cap / "timing.parquet")
    doc = json.loads((cap / "timing.json").read_text())
    s = summarize(t).to_json()
    assert s["rows"] == doc["stats"]["rows"]
    kl = {(r["role"], r["phase"]): r for r in s["phases"]}[("mma", "kloop")]
    assert kl["mean"] == pytest.approx(next(r["mean"] for r in doc["stats"]["phases"] if r["phase"] == "kloop"))
    # the clock was measured, not assumed: an H100 SXM under load runs 1.4-1.98 GHz
    assert 1.3 < fit_clock(t).cycles_per_ns < 2.0
    assert fit_clock(t).cycles_per_ns == pytest.approx(doc["stats"]["clock"]["cycles_per_ns"], rel=1e-9)
    tl = tiles_per_sm(t)
    assert tl["sms"] == 132 and tl["max"] == 4 and tl["min"] == 3  # 512 tiles of 256x128 on 132 SMs
    sp = epilogue_spread(t)
    assert sp["warps_per_tile"] == 8 and 0 < sp["mean"] <= sp["p95"]
    st = phase_stats(t).set_index(["role", "phase"])
    assert st.loc[("mma", "kloop"), "mean"] > 10 * st.loc[("epilogue", "phase1"), "mean"]


def test_shipped_trace_is_openable_and_labelled(cap):
    tr = json.loads(unxz_text(cap / "trace.json.xz"))
    ev = tr["traceEvents"]
    assert {e["ph"] for e in ev} >= {"M", "X", "s", "f"}
    names = {e["name"] for e in ev if e["ph"] == "X"}
    assert {"t0 kloop", "t0 phase1", "t0 load"} <= names
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ev if e["ph"] == "X")
    assert tr["otherData"]["tile_sampling"] and tr["otherData"]["cycles_per_ns"] > 1.0


def test_validation_arithmetic_on_the_shipped_run(cap):
    """Measured ratios and errors follow from the shipped columns (per-repeat wall times); the
    model's projection is 1 + its period term + its tail term; re-calibrating the model on the
    shipped timing tables (16 of 132 CTAs) reproduces the projections."""
    from bsprof.analyzers.model import validation as V
    from bsprof.profile.validate import rescore

    v = pd.read_csv(cap / "validation" / "validation.csv")
    doc = json.loads((cap / "validation" / "validation.json").read_text())
    assert doc["bsprof"] == {"kind": "validation", "version": 2} and len(v) >= 13
    for r in v.to_dict("records"):
        reps_b = [float(x) for x in r["base_reps"].split(";")]
        reps_m = [float(x) for x in r["meas_reps"].split(";")]
        assert r["measured_ratio"] == pytest.approx(np.mean(np.array(reps_m) / np.array(reps_b)))
        assert r["ci_lo"] < r["measured_ratio"] < r["ci_hi"]
    assert np.allclose(v["projected_wall_det"], 1 + v["term_period"] + v["term_tail"])
    assert np.allclose(v["err_det_pct"], 100 * (v["projected_wall_det"] / v["measured_ratio"] - 1))
    scored = v[v["direction"] != "noise"]
    errs = scored["err_det_pct"].abs()
    assert doc["summary"]["det"]["median_abs_pct"] == pytest.approx(errs.median())
    assert doc["summary"]["det"]["max_abs_pct"] == pytest.approx(errs.max())
    fwd, rev = v[v["direction"] == "forward"], v[v["direction"] == "reverse"]
    assert (fwd["measured_ratio"] > 1).all() and (rev["measured_ratio"] < 1).all()
    assert (fwd["projected_det"] > 1).all() and (rev["projected_det"] < 1).all()
    again = rescore(cap / "validation")
    by = {(p.direction, p.knob, p.delay_kloop, p.delay_phase1, p.calib): p for p in again["points"]}
    for r in v.to_dict("records"):
        p = by[(r["direction"], r["knob"], r["delay_kloop"], r["delay_phase1"], r["calib"])]
        assert p.err_det_pct == pytest.approx(r["err_det_pct"], abs=1e-6)
    assert again["summary"]["det"]["median_abs_pct"] <= 2.0 and again["summary"]["det"]["max_abs_pct"] <= 5.0
    assert V.summary(again["points"])["n"] == len(scored)


def test_kloop_cycles_a_k_block_against_the_tiles_mma_floor(cap, tmp_path):
    # the shipped capture ran 256x128 tiles (its README); its timing.json predates the recorded
    # tile, so --mma-tiler names it. A K block's cycles are the kloop phase's mean over K / 128,
    # the floor the tile's FLOPs of one K block at 8,192 dense FP8 FLOP a cycle an SM
    import shutil

    from click.testing import CliRunner

    from bsprof.analyzers.timing.io import summarize_file
    from bsprof.analyzers.timing.kblock import kblock_rate
    from bsprof.cli import cli

    table = read_table(cap)
    mma = table[(table["role"] == "mma") & (table["phase"] == "kloop")]
    per_block = (mma["end"] - mma["start"]).mean() / (4096 // 128)
    doc = summarize_file(cap)
    assert doc["family"] == "fp8-blockwise" and doc["mnkl"][:3] == [4096, 4096, 4096]
    assert kblock_rate(doc) is None  # no tile recorded, none given
    kb = kblock_rate(doc, (256, 128))
    assert kb.k_blocks == 32 and kb.floor == 2 * 256 * 128 * 128 / 8192
    assert kb.cycles == pytest.approx(per_block, rel=1e-9) and 0.5 < kb.share < 1.0
    res = CliRunner().invoke(cli, ["timing", "--from", str(cap), "--mma-tiler", "256,128"])
    assert res.exit_code == 0, res.output
    assert f"K-loop: {per_block:,.0f} cycles a K block (32 a tile); a 256x128 tile's MMA needs 1,024" in res.output
    assert "K-loop:" not in CliRunner().invoke(cli, ["timing", "--from", str(cap)]).output
    # a capture that records its tile (timing.json's config) needs no flag; split-K divides K
    run = tmp_path / "run"
    shutil.copytree(cap, run, ignore=shutil.ignore_patterns("validation*", "buffer_*", "trace*"))
    meta = json.loads((run / "timing.json").read_text())
    meta["config"] = {"tile_m": 256, "tile_n": 128, "split_k": 2}
    (run / "timing.json").write_text(json.dumps(meta))
    kb2 = kblock_rate(summarize_file(run))
    assert kb2.k_blocks == 16 and kb2.cycles == pytest.approx(2 * per_block, rel=1e-9)
    # a family whose MMA rate is not listed gets no line
    assert kblock_rate({**doc, "family": "nvfp4"}, (256, 128)) is None
    bad = CliRunner().invoke(cli, ["timing", "--mma-tiler", "256,128"])
    assert bad.exit_code != 0 and "--mma-tiler names the tile of an earlier capture" in bad.output
