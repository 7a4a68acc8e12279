"""Timing table writers, statistics and the Chrome trace, on decoded buffers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from test_timing_buffer import synth_buffer

from bsprof.analyzers.timing.buffer import decode_buffer
from bsprof.analyzers.timing.io import read_table, write_table, write_timing_run
from bsprof.analyzers.timing.stats import epilogue_spread, fit_clock, phase_stats, tiles_per_sm
from bsprof.analyzers.timing.trace import build_trace
from bsprof.errors import BsprofError


@pytest.fixture()
def table():
    buf, plan = synth_buffer(num_ctas=4, tiles=6, ghz=1.755)
    return decode_buffer(buf, plan, kernel="probe", variant="optimized")


def test_phase_stats_match_the_table(table):
    st = phase_stats(table).set_index(["role", "phase"])
    assert st.loc[("mma", "kloop"), "mean"] == 4000
    assert st.loc[("mma", "tma0"), "p95"] == 800
    p1 = table[table["phase"] == "phase1"]
    d = p1["end"] - p1["start"]
    assert st.loc[("epilogue", "phase1"), "max"] == d.max()
    assert st.loc[("epilogue", "phase1"), "p50"] == pytest.approx(d.median())
    # role / phase order follows the schema
    assert list(st.index.get_level_values(0))[:1] == ["producer"]


def test_spread_is_max_minus_min_over_epilogue_warps(table):
    sp = epilogue_spread(table)
    p1 = table[table["phase"] == "phase1"].assign(d=lambda t: t["end"] - t["start"])
    per = p1.groupby(["cta", "tile"])["d"].agg(lambda s: s.max() - s.min())
    assert sp["tiles"] == 24 and sp["warps_per_tile"] == 4
    assert sp["mean"] == pytest.approx(per.mean())
    assert sp["p95"] == pytest.approx(per.quantile(0.95))


def test_clock_fit_recovers_the_rate_across_unsynchronized_sms(table):
    fit = fit_clock(table)
    assert fit.cycles_per_ns == pytest.approx(1.755, rel=2e-3)
    assert set(fit.offsets) == {1, 3, 5, 7}


def test_tiles_per_sm(table):
    t = tiles_per_sm(table)
    assert t == {"sms": 4, "mean": 6.0, "min": 6, "max": 6, "sample_every": 1}


def test_table_roundtrip_parquet_and_csv(tmp_path, table):
    paths = write_table(table, tmp_path)
    for p in paths.values():
        back = read_table(p)
        assert len(back) == len(table)
        assert (back["end"] - back["start"]).sum() == (table["end"] - table["start"]).sum()
    assert len(read_table(tmp_path)) == len(table)  # a directory works too
    with pytest.raises(BsprofError, match="lacks column"):
        table.drop(columns=["phase"]).to_csv(tmp_path / "bad.csv", index=False)
        read_table(tmp_path / "bad.csv")


def test_trace_has_a_process_per_sm_and_aligned_tile_names(table):
    tr = build_trace(table)
    ev = tr["traceEvents"]
    procs = {e["pid"] for e in ev if e.get("name") == "process_name"}
    assert procs == {1, 3, 5, 7}
    slices = [e for e in ev if e["ph"] == "X"]
    assert len(slices) == len(table)
    # the K-loop and the Phase 1 of tile 2 carry the same tile prefix and colour
    k = next(e for e in slices if e["name"] == "t2 kloop" and e["pid"] == 1)
    p = next(e for e in slices if e["name"] == "t2 phase1" and e["pid"] == 1)
    assert k["cname"] == p["cname"] and p["ts"] >= k["ts"] + k["dur"] - 1e-3
    # durations are converted with the measured clock: 4000 cycles at 1.755 GHz
    assert k["dur"] == pytest.approx(4000 / 1.755 / 1000, rel=5e-3)
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * 24 * (4 + 1)  # per tile: load→mma, and mma→each epilogue warp
    assert tr["otherData"]["tile_sampling"] == "all tiles"
    json.dumps(tr)


def test_trace_cap_samples_whole_tiles_and_says_so(table):
    tr = build_trace(table, max_events=200, flows=False)
    slices = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert len(slices) <= 200
    tiles = {e["args"]["tile"] for e in slices}
    # whole tiles: every kept tile has all its phases on every warp
    for t in tiles:
        assert sum(e["args"]["tile"] == t for e in slices) == (table["tile"] == t).sum()
    assert "sampled" in tr["otherData"]["tile_sampling"]


def test_write_timing_run_artifact(tmp_path, table):
    doc = write_timing_run(
        tmp_path,
        table,
        meta={"family": "x", "kernel_name": "probe"},
        overhead=[{"mnkl": [1, 2, 3, 1], "plain_us": 100.0, "timing_us": 101.0, "overhead_pct": 1.0}],
        raw=np.zeros(4, np.int64),
    )
    got = json.loads((tmp_path / "timing.json").read_text())
    assert got["bsprof"] == {"kind": "timing", "version": 1}
    assert got["stats"]["clock"]["cycles_per_ns"] == pytest.approx(1.755, rel=2e-3)
    for name in ("timing.parquet", "timing.csv", "trace.json", "buffer.npy"):
        assert (tmp_path / name).stat().st_size > 0
    assert doc["files"]["trace"] == "trace.json"


def test_cli_from_reads_an_earlier_capture(tmp_path, table):
    from bsprof.cli import cli

    write_table(table, tmp_path)
    res = CliRunner().invoke(cli, ["timing", "--from", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "kloop" in res.output and "1,755 MHz" in res.output
    res = CliRunner().invoke(cli, ["timing", "--from", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "error:" in res.output


def test_cli_without_gpu_is_one_line(monkeypatch, tmp_path):
    import shutil

    from bsprof import gpu
    from bsprof.cli import cli

    gpu.device_info.cache_clear()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    res = CliRunner().invoke(cli, ["timing", "-o", str(tmp_path)])
    gpu.device_info.cache_clear()
    assert res.exit_code == 2
    assert res.output.strip().startswith("error:") and len(res.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
