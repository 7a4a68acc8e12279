"""On a GPU: the recorder's stamps on the probe kernel, and `bsprof timing` end to end on Hopper."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_probe_records_every_event_with_real_clocks():
    from bsprof.analyzers.timing.buffer import decode_buffer
    from bsprof.analyzers.timing.stats import fit_clock
    from bsprof.kernels.timing_probe import run_probe

    buf, plan = run_probe(num_ctas=4, tiles=5, spin_cycles=2000)
    assert (buf[..., 0] != 0).sum() == 4 * 5 * (2 + 4 + 2 * 4)  # every record of every warp
    t = decode_buffer(buf, plan)
    d = (t["end"] - t["start"]).to_numpy()
    assert np.all(d >= 2000) and np.median(d) < 2000 + 400  # one spin each, plus the recorder
    assert 0.5 < fit_clock(t).cycles_per_ns < 3.0


def test_probe_sampling_keeps_whole_tiles():
    from bsprof.analyzers.timing.buffer import decode_buffer
    from bsprof.kernels.timing_probe import run_probe

    buf, plan = run_probe(num_ctas=2, tiles=9, sample_every=4, spin_cycles=100)
    t = decode_buffer(buf, plan)
    assert sorted(t["tile"].unique()) == [0, 4, 8]
    assert t.groupby("tile").size().nunique() == 1


def test_timing_cli_end_to_end_on_hopper(tmp_path):
    import torch
    from click.testing import CliRunner

    from bsprof.cli import cli

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the bundled runnable kernels are Hopper's")
    res = CliRunner().invoke(
        cli, ["timing", "--family", "fp8-blockwise", "--mnkl", "1024,1024,2048", "-o", str(tmp_path), "--rounds", "5"]
    )
    assert res.exit_code == 0, res.output
    (run,) = list(tmp_path.iterdir())
    doc = json.loads((run / "timing.json").read_text())
    assert doc["bsprof"]["kind"] == "timing" and doc["overhead"]
    assert doc["stats"]["clock"]["cycles_per_ns"] > 0.5
    for name in ("timing.parquet", "timing.csv", "trace.json"):
        assert (run / name).stat().st_size > 0


def test_timing_cli_captures_a_switched_build(tmp_path):
    # `--kernel optimized:epi_split=0`: the timing build of the switched kernel (one warpgroup-pair
    # epilogue again: every consumer warp still records its phases)
    import torch
    from click.testing import CliRunner

    from bsprof.cli import cli

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("switch specs are an fp8-blockwise option")
    res = CliRunner().invoke(
        cli,
        [
            "timing",
            "--family",
            "fp8-blockwise",
            "--kernel",
            "optimized:epi_split=0",
            "--mnkl",
            "1024,1024,2048",
            "-o",
            str(tmp_path),
            "--overhead",
            "none",
        ],
    )
    assert res.exit_code == 0, res.output
    (run,) = list(tmp_path.iterdir())
    assert run.name.startswith("timing_fp8-blockwise_optimized_epi_split_0_1024x1024x2048_")
    doc = json.loads((run / "timing.json").read_text())
    assert doc["variant"] == "optimized:epi_split=0"
    assert {"producer", "mma", "epilogue"} <= {r["role"] for r in doc["stats"]["phases"]}
    # the capture names the tile it ran, so a later `--from` can cost its K block against the MMA floor
    assert doc["config"]["tile_m"] in (64, 128, 192, 256) and doc["config"]["tile_n"] % 16 == 0
    assert "cycles a K block" in res.output
    again = CliRunner().invoke(cli, ["timing", "--from", str(run)])
    assert again.exit_code == 0, again.output
    assert f"a {doc['config']['tile_m']}x{doc['config']['tile_n']} tile's MMA" in again.output


def test_timing_cli_captures_the_three_warpgroup_tile(tmp_path):
    # a 192-row tile runs 16 warps a CTA (three consumer warpgroups): each warp records into its own
    # rows of the buffer, so no CTA's producer is overwritten by the previous CTA's last consumers
    import pandas as pd
    import torch
    from click.testing import CliRunner

    from bsprof.cli import cli

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the bundled runnable kernels are Hopper's")
    res = CliRunner().invoke(
        cli,
        [
            "timing",
            "--kernel",
            "optimized:tile_m=192,tile_n=128,cluster_m=1,cluster_n=2",
            "--mnkl",
            "1000,1000,1024",
            "-o",
            str(tmp_path),
            "--overhead",
            "none",
        ],
    )
    assert res.exit_code == 0, res.output
    (run,) = list(tmp_path.iterdir())
    assert json.loads((run / "timing.json").read_text())["config"]["tile_m"] == 192
    t = pd.read_csv(run / "timing.csv")
    mma_warps = t.loc[t["role"] == "mma", "warp"]
    assert mma_warps.nunique() == 12 and mma_warps.max() == 15
    assert "a 192x128 tile's MMA" in res.output
