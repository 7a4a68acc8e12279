"""The change chain (SASS of two builds -> cycles per phase -> the model) on real artifacts: the
shipped sample (two CPU-compiled sm_90a builds of the bundled kernel and the H200 capture of the
first), a foreign CUTLASS pair, the stored switch-pair validation run, and every stored
delay-injection run."""

from __future__ import annotations

import glob
import json
import shutil
import statistics
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from bsprof.analyzers.model import change as C
from bsprof.cli import cli
from bsprof.profile import validate_changes as VC

DATA = Path(__file__).parent / "data"
SAMPLE = VC.SAMPLE
CHANGES = DATA / "h200_changes"


def run(*args):
    return CliRunner().invoke(cli, ["model", *args], catch_exceptions=False)


# what the shipped sample's H200 capture of the base build measured beside its timing table
SAMPLE_CAPTURE = dict(
    source=SAMPLE,
    tile_mn=(256, 128),
    sustained={"mhz": 1470.0, "watts": 715.0},
    limits={"max_mhz": 1980.0, "power_limit_w": 700.0, "floor_w": 124.5},
    device="NVIDIA H200",
    wall_us=99.2,
)


@pytest.fixture(scope="module")
def sample_chain():
    return VC.change_chain(
        (str(SAMPLE / "optimized.sm_90a.cubin.xz"), str(SAMPLE / "optimized_uniform_desc0.sm_90a.cubin.xz")),
        (4096, 4096, 4096, 1),
        **SAMPLE_CAPTURE,
    )


def test_uniform_desc_adds_r2ur_to_the_kloop_and_is_priced_at_the_exposed_share(sample_chain):
    est, pr = sample_chain["estimate"], sample_chain["projection"]
    kl = next(d for d in est.deltas if d.phase == "kloop")
    # the descriptors leave the uniform registers: R2UR moves come back into every K block
    assert dict(kl.top_opcodes)["R2UR"] > 0
    a, b = est.counts["a"], est.counts["b"]
    assert 150 < a.kloop_per_kblock < b.kloop_per_kblock < 260
    assert a.mma_per_kblock == b.mma_per_kblock == 8  # 256-row tile: two waves of 4 wgmma
    # the K-loop's cost per instruction is its time above the tensor floor over its instructions
    cost = est.costs["kloop"]
    assert cost.floor_kblock == 1024
    assert 0 < cost.point < cost.hi == 2.0 and cost.point < cost.cpi
    assert kl.cycles == pytest.approx(kl.instructions * cost.point)
    # the model prices well under the count rule (instructions x the K-loop's whole CPI), inside its interval
    assert pr.wall_lo <= pr.wall_ratio <= pr.wall_hi
    assert 0 < pr.wall_pct < 100 * (pr.count_rule_ratio - 1) / 5
    assert pr.binding_before == "epilogue" and pr.clock_ratio > 1.0  # power-capped: fewer watts a cycle
    assert not est.unpriced()


def test_a_removed_barrier_probe_is_priced_by_the_consumer_warpgroups():
    """peek=0 compiled on the CPU against the base build: the SASS loses the K-loop's one non-blocking
    barrier probe a K block (an unguarded PHASECHK without .TRYWAIT; a wait's retry carries a guard), and
    on the 256-row tile (two consumer warpgroups) the chain prices the wait it exposes at the table's
    cycles a K block; with three warpgroups the table has no entry and the point stays the instructions'."""
    pytest.importorskip("cutlass")
    mnkl = (4096, 4096, 4096, 1)
    k_blocks = 4096 // C.BLOCK_K
    est = VC.change_chain(("optimized:peek=0",), mnkl, **SAMPLE_CAPTURE)["estimate"]
    a, b = est.counts["a"], est.counts["b"]
    assert a.probes["kloop"] == pytest.approx(k_blocks) and b.probes["kloop"] == 0
    kl = next(d for d in est.deltas if d.phase == "kloop")
    per_kb = C.PROBE_WAIT_CYCLES_BY_WARPGROUPS[2]
    instr = kl.instructions * est.costs["kloop"].point
    assert kl.cycles == pytest.approx(instr + per_kb[1] * k_blocks, abs=1.0)
    assert "-1.0 barrier probes a K block" in kl.source and "moved_wait" in est.kinds
    # the same two builds' counts with three consumer warpgroups: nothing beyond the instructions
    three = C.estimate_change(a, b, est.costs, k_blocks, consumer_warps=12)
    kl3 = next(d for d in three.deltas if d.phase == "kloop")
    assert 3 not in C.PROBE_WAIT_CYCLES_BY_WARPGROUPS and kl3.cycles == pytest.approx(instr)
    # counts written before the probes were counted carry none, and price none
    old = C.counts_from_json({k: v for k, v in C.counts_json(a).items() if k != "probes"})
    assert old.probes is None
    kl_old = next(
        d for d in C.estimate_change(old, b, est.costs, k_blocks, consumer_warps=8).deltas if d.phase == "kloop"
    )
    assert kl_old.cycles == pytest.approx(instr)
    # without a capture (the K-loop alone, per K block) the probe is priced the same way, and printed
    res = VC.change_chain(("optimized:peek=0",), mnkl, tile_mn=(256, 128))
    k = res["kloop_only"]
    assert k.cycles_per_kblock == pytest.approx((k.per_kblock_b - k.per_kblock_a) * k.borrowed_rate + per_kb[1])
    assert k.lo <= k.cycles_per_kblock <= k.hi and len(k.priced) == 1
    out = run("--change", "optimized:peek=0", "--mnkl", "4096,4096,4096").output
    assert "priced: -1.0 barrier probes a K block: +49 cycles a K block" in out


def test_the_store_warps_code_counts_once_for_its_barrier_group():
    """epi_split=0 compiled on the CPU against the base build (256-row tile): the epilogue's store
    (`if warp_idx == self.epi_store_warp:`, one warp of each warpgroup) grows by a dozen instructions a tile
    while every warp's own code shrinks; per warp the store counts a quarter (the epilogue's named barrier
    ties 128 threads), where per_tile counts it for every warp, and the chain prices Phase 1 from the per-warp
    counts on both sides. (The cu12 compiler also grew the store under elect_release=0, by 86; the cu13
    build the GPU runs does not touch it.)"""
    pytest.importorskip("cutlass")
    mnkl = (4096, 9216, 2560, 1)
    est = VC.change_chain(("optimized:epi_split=0",), mnkl, **SAMPLE_CAPTURE)["estimate"]
    a, b = est.counts["a"], est.counts["b"]
    assert a.barrier_threads["phase1"] and min(a.barrier_threads["phase1"]) == 128
    one_a = (a.per_tile["phase1"] - a.per_warp["phase1"]) / 0.75  # the store warp's instructions a tile
    one_b = (b.per_tile["phase1"] - b.per_warp["phase1"]) / 0.75
    assert 40 < one_a < one_b and one_b - one_a > 8  # the store grew
    every = (b.per_tile["phase1"] - one_b) - (a.per_tile["phase1"] - one_a)
    assert every < -15  # the code every warp runs shrank
    assert a.per_warp["kloop"] == a.per_tile["kloop"] and a.per_warp["producer"] == a.per_tile["producer"]
    ph1 = next(d for d in est.deltas if d.phase == "phase1")
    assert ph1.instructions == pytest.approx(b.per_warp["phase1"] - a.per_warp["phase1"])
    assert ph1.instructions < b.per_tile["phase1"] - a.per_tile["phase1"] < 0
    assert est.costs["phase1"].instructions == pytest.approx(a.per_warp["phase1"])
    assert "if every warp ran it: one warp's code counts once for its barrier group" in ph1.source
    # counts written before the per-warp count existed price both sides per tile, as they were
    old = C.counts_from_json({k: v for k, v in C.counts_json(a).items() if k != "per_warp"})
    assert C.warp_instructions(b, old) == b.per_tile and C.warp_instructions(b, a) == b.per_warp


def test_phases_come_from_the_kernels_scopes(sample_chain):
    a = sample_chain["estimate"].counts["a"]
    assert a.roles == "line info"
    # one consumer warp per tile: 32 K blocks of the loop, an epilogue of a few hundred instructions
    assert a.per_tile["kloop"] > 30 * a.kloop_per_kblock
    assert 100 < a.per_tile["phase1"] < 1000 and a.per_tile["producer"] > 0


def test_cli_change_prints_the_chain_then_the_projection_within_80_columns():
    r = CliRunner().invoke(
        cli,
        [
            "model",
            "--change",
            str(SAMPLE / "optimized.sm_90a.cubin.xz"),
            str(SAMPLE / "optimized_uniform_desc0.sm_90a.cubin.xz"),
            "--from",
            str(SAMPLE),
            "--tiles",
            "2000",
        ],
        env={"COLUMNS": "80"},
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.output
    out = r.output
    for s in ("K-loop", "R2UR", "instr a K block", "binding side", "wall time", "instruction-count rule"):
        assert s in out, s
    assert max(len(line) for line in out.splitlines()) <= 80
    j = json.loads(
        CliRunner()
        .invoke(
            cli,
            [
                "model",
                "--change",
                str(SAMPLE / "optimized.sm_90a.cubin.xz"),
                str(SAMPLE / "optimized_uniform_desc0.sm_90a.cubin.xz"),
                "--from",
                str(SAMPLE),
                "--tiles",
                "2000",
                "--json",
            ],
        )
        .stdout
    )
    ch = j["change"]
    assert ch["interval_pct"][0] <= ch["wall_pct"] <= ch["interval_pct"][1]
    assert {d["phase"] for d in ch["chain"]["deltas"]} >= {"kloop", "phase1", "tma0"}
    assert j["deterministic"]["binding_before"] == "epilogue"
    # the price comes with the record of prices like it: K-loop instructions only, checked held out
    assert ch["chain"]["kinds"] == ["instructions"] and list(ch["record"]["checked"]) == ["instructions"]
    assert ch["record"]["all"]["held_out"] >= 30
    assert "instructions only: " in out and "every change: " in out and "held out" in out


def _record_script():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "change_record.py"
    spec = importlib.util.spec_from_file_location("change_record_script", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_record_script_writes_nothing_on_bad_input(tmp_path, monkeypatch, capsys):
    """scripts/change_record.py: --help prints its use and writes nothing (it once took any single argument for
    the record's path); a path it would not write, an unknown flag or a directory that holds no check is
    refused in an error line with exit 2, before the minutes of scoring."""
    script = _record_script()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        script.main(["--help"])
    assert done.value.code == 0 and "--checked-scales" in capsys.readouterr().out
    bad = (
        [str(tmp_path / "missing" / "record.json")],
        ["record.txt"],
        ["--bogus"],
        ["--as-run", str(tmp_path)],
        ["--checked-scales", "record.json"],
        [],
    )
    for argv in bad:
        with pytest.raises(SystemExit) as done:
            script.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert done.value.code == 2 and err[-1].startswith("change_record.py: error: "), argv
    assert not any(tmp_path.iterdir())


def test_the_shipped_record_is_the_held_out_checks_rescored_with_the_pricing_now():
    """bsprof/data/model/change_record.json is what scripts/change_record.py builds from the stored held-out
    checks: a pricing change that moves any of their projections must rebuild it (a point it moved counts
    apart from the held-out ones), and each kind's figures are those checks' points that touch it."""
    from bsprof.analyzers.model.change_record import SHIPPED, record_lines

    script = _record_script()
    checks = script.score_checks(DATA)
    built = script.build(checks)
    assert json.loads(SHIPPED.read_text()) == json.loads(json.dumps(built))
    # every one-call check, in the order the script names them (the per-run pins below)
    assert [r["run"] for r in built["runs"]] == list(script.CHECKS)
    assert script.CHECKS[-3:] == ("changes_tile_widths", "changes_tile_widths_112_160", "changes_deepgemm_shapes")
    assert built["all"]["points"] == 756 and 460 <= built["all"]["held_out"] < 756
    # the probe's fit moved the ring-share check's 256-row peek=0 points (its counts merged with the probes
    # counted since, probes.json); the count per warp (per_warp.json) moved every point with a Phase 1 change;
    # the last check priced its six waited-on loads by warpgroups, reverted since (they count apart); the ring's
    # K-block terms, fitted on every check's stage-count points, moved those and every combination with them.
    # The builds counted again with the GPU's compiler (counts_cu13.json) move nearly every point a little
    # (as_committed), none of them by a fit: held out is decided on the counts committed before the timing.
    # The SIMT store's share of its DRAM time, fitted on every store-drain point of the fifteen checks before
    # it, moved those (the three after were projected with it); the 128-row tile's ring terms moved the five
    # points whose ring depth changes on each of the two 128-row problems they were fitted on, and none of the
    # check that held them out. Split-K's fp32 partials, priced at the DRAM after the unseen pairs' check
    # measured them 17-36 pp above, moved its three split_k=2 points. Where the control bits say a load is first
    # waited on (exposed_loads.json), read after the unseen pairs' check measured the B scale's load at about 0,
    # moved its three sfb_tma=0,sfb_smem=0 points and no other (every sfa_tma=0 load is waited on before an MMA).
    # Split-K's partials kept out of the clock term, after both checks that timed split-K, moved the six split-K
    # points of the second; its work units priced a start and an epilogue each, after the check that held the
    # clock term out, moved that check's nine. Split-K priced as its partials' traffic, fitted on every stored
    # split-K point, moved all 27 (the check after held it out: all twelve as committed). The waited-on load's
    # share by the loads a K block exposes, fitted on every stored point that adds a waited-on load, moved those
    # (the check after held it out: all 33 as committed); the check after it, on tiles few had timed, moved
    # nothing (all 11 of its timed points as committed), nor did its other two problems, timed apart (all 22).
    # The phases of a build with the whole K in one pass, counted apart after the DeepGEMM shapes' check found
    # them counted as K-loop (counts_recounted.json), moved that check's eleven points at K = 512
    assert [r["points"] - r["held_out"] for r in built["runs"]] == [
        23, 6, 34, 8, 0, 17, 12, 11, 15, 18, 15, 15, 18, 4, 12, 8, 8, 0, 9, 6, 6, 9, 9, 0, 0, 0, 0, 11
    ]  # fmt: skip
    assert [r["as_committed"] for r in built["runs"]][-3:] == [11, 22, 22]
    assert sum(r["as_committed"] for r in built["runs"][:-13]) < 100
    # the stage count: every stage-count point of the checks, in-sample but those of the check that held the
    # ring's terms out (and one the terms left where it was) and those of the checks after; the largest miss:
    # the SIMT epilogue at K = 512 (4096x32768x512, the shared memory it frees takes another stage), 43.3 pp
    # low where the kernel is bound by its output's stores; held out, two stages on the 192-row tile at
    # K = 2560 (4864x7168x2560), 6.9 pp high
    st = built["kinds"]["stage_count"]
    assert st["points"] >= 160 and st["held_out"] == 76 and st["max_pp"] == pytest.approx(43.32, abs=0.01)
    assert "stage_count" in built["checked"]["kinds"]  # its quantile from those held out
    assert built["all"]["median_pp"] < st["median_pp"]
    # instructions alone, from the SASS the GPU ran: within 3.4 pp everywhere, no bias; what the intervals miss
    # is elect_release=0, priced -0.1% between SASS bounds under 0.4 pp wide, measured -2.3% to +2.6%
    ins = built["kinds"]["instructions"]
    assert ins["max_pp"] < 3.4 and abs(ins["bias_pp"]) < 0.3 and ins["intervals_hold"] < ins["points"]
    lines = record_lines(["stage_count", "tie"], built)
    assert lines[0].startswith("checked on NVIDIA H100") and "held out" in lines[0]
    assert lines[1].startswith("the stage count: ") and lines[2].startswith("a barrier tying") and len(lines) == 5
    # the checked interval: quantiles from the held-out points; with each check left out of them in turn it
    # still holds >= 80% of that check's points, on each of the larger checks as on the whole record
    ck = built["checked"]
    assert ck["level"] == 0.9 and set(ck["kinds"]) <= set(built["kinds"]) and ck["all"] > 0
    lo = ck["left_out"]
    assert (
        lo["points"] == built["all"]["points"] and lo["covered"] >= 0.85 * lo["points"] and lo["median_half_pp"] < 3.0
    )
    assert all(hit >= 0.75 * n for run, (hit, n) in lo["runs"].items() if n >= 30 and run != "changes_deepgemm_shapes")
    # but on DeepGEMM's shapes, 23 of 33: five points at K = 512 (the SIMT epilogue 43 pp low, two and three
    # stages 9-14 low) and five at N = 2112, all over by 0.03 to 2.4 pp past their half-widths
    assert lo["runs"]["changes_deepgemm_shapes"] == [23, 33]
    # where few other checks timed what its pairs touch (split-K, 2x2), less
    assert lo["runs"]["changes_unseen_pairs"] == [29, 33] and lo["runs"]["changes_clusters_split_k"] == [9, 12]
    assert lo["runs"]["changes_scale_loads"] == [14, 15] and lo["runs"]["changes_split_k_clock"] == [12, 12]
    assert lo["runs"]["changes_split_k_units"] == [9, 9] and lo["runs"]["changes_split_k_partials"] == [12, 12]
    assert lines[4].startswith("the checked interval") and f"held {lo['covered']} of {lo['points']}" in lines[4]
    # the settings it is weighed against (--checked-scales): the shipped line is the record's own left-out figure
    scales = script.checked_scales(checks)
    shipped = next(line for line in scales if "(shipped)" in line)
    assert f"{lo['covered']} of {lo['points']}" in shipped and f"±{lo['median_half_pp']:.2f} pp" in shipped
    assert len(scales) == len(script.CHECKED_SCALES) + 1 and "one quantile for every kind" in scales[-1]


def test_kinds_name_what_a_change_touches_beyond_its_instructions():
    """From the stored counts of the held-out check: the stage count, a waited-on load, a tie, the stores,
    a moved wait; a change that touches none of them is instructions only."""
    counts = json.loads((DATA / "changes_held_out" / "counts.json").read_text())
    doc = json.loads((DATA / "changes_held_out" / "projections_reprojected.json").read_text())
    kinds = {(p["change"], p["problem"]): p["kinds"] for p in doc["points"]}
    p = "7168x6144x1536"
    assert "stage_count" in kinds[("ab_stage=2", p)] and "tie" not in kinds[("ab_stage=2", p)]
    assert {"waited_load", "tie", "moved_wait", "compound"} <= set(kinds[("sfa_tma=0", p)])
    assert "store_drain" in kinds[("epilogue=direct", p)]
    assert kinds[("uniform_desc=0", p)] == ["instructions"]
    assert "moved_wait" in kinds[("peek=0", p)]
    assert len(kinds) == sum(len(pr["b"]) for pr in counts["problems"].values())
    # the ring's latency share follows the tile: two consumer warpgroups (256 rows) 0.45, three 0.52
    src = {
        (r["change"], r["problem"]): " ".join(ph["source"] for ph in r["phases"] if ph["phase"] == "kloop")
        for r in doc["points"]
    }
    assert "(0.46 + 0.62 / (stages - 1)) x the base's" in src[("ab_stage=2", "4096x7168x3072")]
    assert "(0.39 + 0.98 / (stages - 1)) x the base's" in src[("ab_stage=2", p)]


def test_foreign_cutlass_pair_prices_its_kloop_and_names_the_rest():
    d = DATA / "sass"
    res = VC.change_chain(
        (
            str(d / "cutlass_sm90_blockwise_fp8_128x128x128_c1x2.sm_90a.cubin.xz"),
            str(d / "cutlass_sm90_blockwise_fp8_128x128x128_c1x2_noNDEBUG.sm_90a.cubin.xz"),
        ),
        (4096, 4096, 4096, 1),
        tile_mn=(128, 128),
    )
    k = res["kloop_only"]
    # the asserts NDEBUG drops come back into every K block
    assert k.per_kblock_b > k.per_kblock_a
    assert k.floor_kblock == 512 and k.lo <= k.cycles_per_kblock <= k.hi
    assert any("no timing capture" in u for u in k.unpriced)


def test_bad_change_input_is_one_error_line():
    for args, needle in (
        (["--change"], "one bundled spec"),
        ([str(SAMPLE / "optimized.sm_90a.cubin.xz")], "--change"),
        (["--change", str(SAMPLE / "optimized.sm_90a.cubin.xz")], "nothing to compare"),
        (["--change", "optimized:uniform_desc=0"], "--mnkl"),
        (["--change", "optimized:nosuch=1", "--mnkl", "4096,4096,4096"], "nosuch"),
        (
            ["--change", "optimized:peek=0", "--mnkl", "2048,2048,2048", "--from", str(SAMPLE)],
            "not the problem the capture",
        ),
        (["--changes"], "--validate"),
        # a typo in a cubin's path is named as a missing file, not judged as a bundled kernel name
        (["--change", "a.cubin", str(SAMPLE / "optimized.sm_90a.cubin.xz")], "a.cubin: no such file"),
        (["--change", str(SAMPLE / "optimized.sm_90a.cubin.xz"), "dir/b.sass"], "dir/b.sass: no such file"),
        (["--change", "b.cubin", "--mnkl", "4096,4096,4096"], "b.cubin: no such file"),
    ):
        r = CliRunner().invoke(cli, ["model", *args])
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(
    "spec, needle",
    [
        # the base at 4096^3 (256x128, 1x2) already stores by TMA and sets cluster_n=2: nothing changes
        ("optimized:epilogue=tma", "is the same build as"),
        ("optimized:cluster_n=2", "is the same build as"),
        ("optimized:uniform_desc=1,peek=1", "is the same build as"),
        # a tile change moves the tile count, which the SASS of a tile does not price
        ("optimized:tile_n=96", "A runs 256x128 output tiles and B 256x96"),
        ("optimized:tile_m=128,tile_n=160", "A runs 256x128 output tiles and B 128x160"),
        # a switch on another tile than the capture's would be priced with the captured tile's costs
        (
            "optimized:tile_n=96,uniform_desc=0",
            "A runs 256x96 output tiles, but the capture (or --tile-mn) is of 256x128",
        ),
    ],
)
def test_a_change_that_changes_nothing_or_the_tile_is_refused_before_compiling(spec, needle, monkeypatch):
    """A single spec's change that leaves the build as the base is (a switch the base already sets that way),
    moves the output tile, or runs on another tile than the capture's is one line and exit 2, before anything
    compiles: a price of +0.00% from two equal builds would read as a measured no-op, cycles a tile of two tiles
    do not compare, and the costs come from the captured tile."""
    from bsprof.profile import validate_changes as VCm

    def no_compile(*a, **k):
        raise AssertionError("compiled")

    monkeypatch.setattr(VCm, "bundled_cubin", no_compile)
    r = CliRunner().invoke(cli, ["model", "--change", spec, "--mnkl", "4096,4096,4096", "--from", str(SAMPLE)])
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_capture_of_another_tile_is_named_from_its_config(tmp_path, monkeypatch):
    """A `bsprof timing` capture records the tile its build ran under config, not change_sample: a change whose
    base runs another tile is one line before anything compiles, and the same capture recording the base's own
    tile prices it."""
    from bsprof.profile import validate_changes as VCm

    meta = json.loads((SAMPLE / "timing.json").read_text())
    del meta["change_sample"]["tile"]
    meta["config"] = {"tile_m": 192, "tile_n": 128, "cluster_m": 1, "cluster_n": 2}
    (tmp_path / "timing.json").write_text(json.dumps(meta))
    (tmp_path / "timing.parquet").write_bytes((SAMPLE / "timing.parquet").read_bytes())
    compiled = []
    real = VCm.bundled_cubin
    monkeypatch.setattr(VCm, "bundled_cubin", lambda *a, **k: compiled.append(a[0]) or real(*a, **k))
    args = ["model", "--change", "optimized:uniform_desc=0", "--mnkl", "4096,4096,4096", "--from", str(tmp_path)]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    assert "A runs 256x128 output tiles, but the capture (or --tile-mn) is of 192x128" in r.output and not compiled
    meta["config"].update(tile_m=256)
    (tmp_path / "timing.json").write_text(json.dumps(meta))
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0 and "wall time +1.53%" in r.output, (r.output, r.exception)


def test_a_cluster_alone_is_the_change_priced():
    """A spec of cluster knobs alone asks for that change from the launcher's build (1x2 at 4096^3 -> 2x2), which
    the chain prices from the operand bytes the multicast saves; with a switch beside it the cluster is the
    base's too (the change is the switch, on that cluster)."""
    args = ["model", "--change", "optimized:cluster_m=2", "--mnkl", "4096,4096,4096", "--from", str(SAMPLE), "--json"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, (r.output, r.exception)
    ch = json.loads(r.output)["change"]
    assert ch["a"].endswith("cluster_m=1,cluster_n=2") and ch["b"].endswith("cluster_n=2,cluster_m=2")
    assert "multicast" in json.dumps(ch["chain"]) and ch["wall_pct"] > 2


def test_a_capture_whose_recorded_problem_is_infinite_is_one_error_line(tmp_path):
    """timing.json is read as JSON, which spells Infinity: the recorded problem is no problem, said
    in one line (int() of Infinity raises OverflowError, which no verb catches)."""
    meta = json.loads((SAMPLE / "timing.json").read_text())
    meta["mnkl"] = [float("inf"), 4096, 4096, 1]
    (tmp_path / "timing.json").write_text(json.dumps(meta))
    (tmp_path / "timing.parquet").write_bytes((SAMPLE / "timing.parquet").read_bytes())
    cubins = [str(SAMPLE / "optimized.sm_90a.cubin.xz"), str(SAMPLE / "optimized_uniform_desc0.sm_90a.cubin.xz")]
    r = CliRunner().invoke(cli, ["model", "--change", *cubins, "--from", str(tmp_path)])
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    assert "--mnkl" in r.output, r.output


@pytest.mark.parametrize(
    "field, value",
    [("capture_wall_us", "99 us"), ("sustained", {"mhz": "1470"}), ("device_limits", {"max_mhz": 1980.0})],
)
def test_a_damaged_change_sample_is_one_error_line(tmp_path, field, value):
    """The capture's recorded wall time, sustained clock and device limits feed the projection's
    arithmetic: one that is not a number is named, not a TypeError or KeyError from inside it."""
    meta = json.loads((SAMPLE / "timing.json").read_text())
    meta["change_sample"][field] = value
    (tmp_path / "timing.json").write_text(json.dumps(meta))
    (tmp_path / "timing.parquet").write_bytes((SAMPLE / "timing.parquet").read_bytes())
    cubins = [str(SAMPLE / "optimized.sm_90a.cubin.xz"), str(SAMPLE / "optimized_uniform_desc0.sm_90a.cubin.xz")]
    r = CliRunner().invoke(cli, ["model", "--change", *cubins, "--from", str(tmp_path)])
    assert r.exit_code == 2 and "Traceback" not in r.output, (r.output, r.exception)
    assert f"change_sample.{field}" in r.output, r.output


def test_stored_runs_named_with_brackets_show_their_names(tmp_path):
    """A stored run is named by its directories; a bracket in one is text (rich read ``[old]`` as a
    style and dropped it, and ``a[`` / ``]b`` as a closing tag that raised MarkupError)."""
    src = next(p.parent for p in sorted((DATA / "h100_timing").rglob("validation.csv")))
    for parent, name in (("[old]", "v1"), ("a[", "]b")):
        root = tmp_path / parent.strip("[]")
        shutil.copytree(src, root / parent / name)
        r = CliRunner().invoke(cli, ["model", "--validate", "--from", str(root)], env={"COLUMNS": "200"})
        assert r.exit_code == 0, (r.output, r.exception)
        assert f"{parent}/{name}" in r.output, r.output


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("measured")
    with tarfile.open(CHANGES / "measured.tar.xz") as tf:
        tf.extractall(tmp, filter="data")
    proj = json.loads((CHANGES / "projections.json").read_text())
    measured = json.loads((tmp / "measured" / "measured.json").read_text())
    return proj, measured


def test_stored_switch_pair_run_rescored_on_the_cpu(stored_run):
    proj, measured = stored_run
    assert measured["device"] == "NVIDIA H200" and proj["device"] == "NVIDIA H200"
    scored = C.score_run(proj, measured)
    s = scored["summary"]
    assert s["points"] == 33 and s["measured_ge_2pct"] >= 17
    by = {(p["change"], p["problem"]): p for p in scored["points"]}
    direct = by[("epilogue=direct", "8192x8192x1024")]
    assert direct["measured_pct"] > 40 and direct["unpriced"] > 0
    # the run as it came out: the model misses the targets on the changes SASS could not price
    assert not s["meets"] and s["targets"]["coverage_ge_80pct"] and s["targets"]["beats_count_rule_off_binding"]
    assert s["model_priced"]["median"] < s["model_unpriced"]["median"]
    assert s["model"]["median"] < s["no_change"]["median"] < s["count_rule"]["median"]


def test_every_stored_delay_injection_run_is_scored():
    from bsprof.analyzers.model.runs_score import score_all

    r = score_all(glob.glob(str(DATA / "h*_timing" / "validation*")))
    assert r["count"] == 20 and r["meets"] == 10
    names = {x["run"]: x for x in r["runs"]}
    pp8192 = [x for n, x in names.items() if "pingpong" in n and "8192" in n]
    assert sum(x["meets"] for x in pp8192) == 2
    # the Monte Carlo band holds almost no measured point; the leave-one-run-out interval holds >= 80%
    assert r["band"]["share"] < 0.1
    assert r["interval"]["share"] >= 0.8
    assert all(3.0 < x["interval_pct"] < 5.0 for x in r["runs"])


def test_cli_scores_stored_runs_without_a_gpu():
    r = CliRunner().invoke(
        cli, ["model", "--validate", "--from", str(DATA)], env={"COLUMNS": "80"}, catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    assert "10 of 20 runs meet" in r.output and "holds 260 of 307" in r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    r = CliRunner().invoke(
        cli, ["model", "--validate", "--changes", "--from", str(CHANGES)], env={"COLUMNS": "80"}, catch_exceptions=False
    )
    assert r.exit_code == 0, r.output
    assert "epilogue=direct" in r.output and "intervals hold 27 of 33" in r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    r = CliRunner().invoke(cli, ["model", "--validate", "--from", str(SAMPLE)])
    assert r.exit_code == 2 and "no stored --validate run" in r.output


@pytest.fixture(scope="module")
def base_tables(tmp_path_factory):
    import pandas as pd

    tmp = tmp_path_factory.mktemp("bases")
    with tarfile.open(CHANGES / "bases.tar.xz") as tf:
        tf.extractall(tmp, filter="data")
    return {Path(f).stem: pd.read_parquet(f) for f in glob.glob(str(tmp / "bases" / "*.parquet"))}


def test_first_load_latency_is_read_from_the_base_capture(base_tables):
    """Per CTA, the producer's first load issued to the consumers' first stage full: a load's latency at
    the kernel's cold start, 1,600-2,800 cycles on the H200 captures (median over 132 CTAs)."""
    lat = {k: C.first_load_cycles(t) for k, t in base_tables.items()}
    assert set(lat) == {"4096x4096x4096", "8192x8192x1024", "6144x5120x2560"}
    assert all(1500 < v < 3000 for v in lat.values()), lat
    # without the producer's records there is nothing to measure
    t = base_tables["4096x4096x4096"]
    assert C.first_load_cycles(t[t["role"] != "producer"]) is None


def _kloop_cost(cycles_per_kblock: float, floor: float) -> C.PhaseCost:
    return C.PhaseCost("kloop", cycles_per_kblock * 32, 5000, 1.0, 0.3, 0.0, 2.0, "", floor_kblock=floor)


def test_a_shallower_ring_costs_the_latency_its_stages_no_longer_cover():
    """P = (C0^p + (L / (S - 1))^p)^(1/p): 4 -> 2 stages with L above C costs about L - C a K block (a
    little more: the soft maximum); 4 -> 3 with L / 2 under C costs a little, not nothing (slow loads
    stall a ring whose mean fits); one stage serializes load and MMAs; more stages win back what the
    base's ring held it above its floor, never more."""
    cost = _kloop_cost(1000.0, 800.0)
    assert 300.0 * 32 < C.ring_delta(cost, 32, 4, 2, 1300.0) < 400.0 * 32
    assert 0.0 < C.ring_delta(cost, 32, 4, 3, 1300.0) < 20.0 * 32
    assert C.ring_delta(cost, 32, 4, 1, 1300.0) == pytest.approx(1300.0 * 32, rel=0.01)
    # a 2-stage ring whose L = 900 sits just under C = 1000 stalls on its slow loads: four stages win that back
    assert -150.0 * 32 < C.ring_delta(cost, 32, 2, 4, 900.0) < -50.0 * 32
    bound = _kloop_cost(1300.0, 800.0)  # a 2-stage base held at L = 1300 a K block
    assert -(1300.0 - 800.0) * 32 < C.ring_delta(bound, 32, 2, 4, 1300.0) < -(1300.0 - 810.0) * 32
    for s in range(2, 12):  # no ring makes a K block shorter than the tensor cores' floor
        assert C.ring_delta(bound, 32, 2, s, 1300.0) >= -(1300.0 - 800.0) * 32
    # fewer stages never cost less than more
    for s in range(1, 6):
        assert C.ring_delta(cost, 32, 6, s, 2500.0) >= C.ring_delta(cost, 32, 6, s + 1, 2500.0)


def test_switch_pair_run_on_unfitted_problems_rescored():
    """The H100 run on three problems no fit used (tests/data/h100_changes), projected with the pricing
    fitted on the H200 run and committed before the timing: scored from the shipped files."""
    d = Path(__file__).parent / "data" / "h100_changes"
    proj = json.loads((d / "projections.json").read_text())
    with tarfile.open(d / "measured.tar.xz") as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("measured.json"))
        measured = json.load(tf.extractfile(member))
    assert proj["device"] == measured["device"] == "NVIDIA H100 80GB HBM3"
    s = C.score_run(proj, measured)["summary"]
    assert s["points"] == 33 and s["covered"] == 32 and s["measured_ge_2pct"] == 13
    assert s["model"]["median"] == pytest.approx(1.17, abs=0.01) and s["model"]["max"] == pytest.approx(8.58, abs=0.01)
    assert s["model"]["median"] < s["no_change"]["median"] and s["model"]["max"] < s["no_change"]["max"] / 3
    t = s["targets"]
    assert t["coverage_ge_80pct"] and t["beats_count_rule_off_binding"] and t["no_worse_on_binding"]
    assert not (t["median_le_1pp"] or t["max_le_3pp"] or t["sign_right_past_1pct"] or t["half_measured_ge_2pct"])


def test_tie_and_margin_run_on_new_problems_rescored():
    """Ten changes (barriers tying the warpgroups, the K-loop's margin, alone and together) on three
    problems no stored run used, projected with the pricing that added those two mechanisms and
    committed before the timing (tests/data/h100_changes_ties): half and more moved >= 2% and every
    interval holds; the median, the max (two stages at K = 1024) and one sign miss."""
    r = run("--validate", "--changes", "--from", str(DATA / "h100_changes_ties"), "--json")
    assert r.exit_code == 0, r.output
    scored = json.loads(r.output[r.output.index('{\n  "device"') :])
    s = scored["summary"]
    assert s["points"] == 30 and s["covered"] == 30 and s["measured_ge_2pct"] == 22
    assert s["model"]["median"] == pytest.approx(1.48, abs=0.01) and s["model"]["max"] == pytest.approx(16.40, abs=0.01)
    assert s["model"]["median"] < s["no_change"]["median"] / 2 and s["model"]["median"] < s["count_rule"]["median"] / 5
    by = {(p["change"], p["problem"]): p for p in scored["points"]}
    worst = by[("ab_stage=2", "6144x8192x1024")]
    assert worst["measured_pct"] > 20 and worst["projected_pct"] < 6
    t = s["targets"]
    assert t["coverage_ge_80pct"] and t["half_measured_ge_2pct"]
    assert not (t["median_le_1pp"] or t["max_le_3pp"] or t["sign_right_past_1pct"])


def test_every_priced_mechanism_on_new_problems_rescored():
    """Ten changes, each a priced mechanism (two ties paying once among them), on three problems no stored
    run used, projections committed before the timing (tests/data/h100_changes_mechanisms): the sign,
    the intervals, the share that moved and the count-rule comparisons meet; the median and the max (the
    SIMT epilogue's stores) do not."""
    r = run("--validate", "--changes", "--from", str(DATA / "h100_changes_mechanisms"), "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index('{\n  "device"') :])["summary"]
    assert s["points"] == 30 and s["covered"] == 29 and s["measured_ge_2pct"] == 17 and not s["sign_wrong"]
    assert s["model"]["median"] == pytest.approx(1.77, abs=0.01) and s["model"]["max"] == pytest.approx(14.80, abs=0.01)
    t = s["targets"]
    assert t["coverage_ge_80pct"] and t["half_measured_ge_2pct"] and t["sign_right_past_1pct"]
    assert t["beats_count_rule_off_binding"] and t["no_worse_on_binding"]
    assert not (t["median_le_1pp"] or t["max_le_3pp"])
    # wall = cycles / clock, each against the NVML clock the run read for every build: the misses past
    # 3 pp are the cycles' (the SIMT epilogue's stores on the 192-row tile: the clock rose more than
    # projected, 1.27 against 1.18, and still the wall time came out longer)
    sp = s["error_split"]
    assert sp["points"] == 30 and (sp["past_3pp_in_cycles"], sp["past_3pp"]) == (6, 7)
    assert sp["cycles_median_pp"] > sp["clock_median_pp"]
    direct = next(
        p
        for p in json.loads(r.output[r.output.index('{\n  "device"') :])["points"]
        if p["change"] == "epilogue=direct" and p["problem"] == "10240x8192x1024"
    )
    assert direct["measured_clock_ratio"] == pytest.approx(1.271, abs=0.005) and direct["clock_ratio"] < 1.2
    assert direct["measured_cycles_pct"] > direct["cycles_pct"] + 25
    assert (
        "error split, wall = cycles / clock"
        in run("--validate", "--changes", "--from", str(DATA / "h100_changes_mechanisms")).output
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--pairs", "ab_stage=2"], "add --validate --changes"),
        (["--validate", "--changes", "--pairs", "nosuch=1"], "unknown fp8-blockwise option 'nosuch'"),
        (["--validate", "--changes", "--pairs", "peek"], "not switch=value"),
        (["--validate", "--changes", "--pairs", " ; "], "name at least one switch change"),
        # a change one problem's tile cannot take is named with the problem, before any GPU work
        (["--validate", "--changes", "--pairs", "promote=rescale", "--mnkl", "6144,6144,1536"], "6144x6144x1536"),
        # a switch only the problem's launch plan refuses (the scale TMAs need a shape-specialized build)
        (["--validate", "--changes", "--pairs", "static_shapes=0", "--mnkl", "4096,4096,2048"], "sfa_tma=0,sfb_tma=0"),
        # more stages than shared memory holds: the base's own ring, a pair that changes nothing
        (["--validate", "--changes", "--pairs", "ab_stage=6", "--mnkl", "8192,5120,3072"], "the same kernel"),
        # too few tiles for the base capture's tile period (two rounds of the persistent grid), with the
        # default pairs and with named ones, before a GPU is looked for
        (["--validate", "--changes", "--mnkl", "768,6144,3072"], "needs at least 3 rounds"),
        (["--validate", "--changes", "--pairs", "peek=0", "--mnkl", "8192,8192,2048;1024,4096,4096"], "1024x4096x4096"),
    ],
)
def test_validate_changes_pairs_are_checked_before_the_gpu(args, says):
    r = run(*args)
    assert r.exit_code != 0 and says in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


def test_unseen_switch_changes_run_by_the_one_command_rescored():
    """Eight switch changes no check had used (combinations among them), projected and timed by
    `bsprof model --validate --changes --pairs` in one call on an H100: scored from the shipped files.
    The spills of consumer_regs=168 on the 256-row tile ran the kernel 3.4x slower, far past the
    interval the run's pricing gave them."""
    r = run("--validate", "--changes", "--from", str(DATA / "h100_changes_pairs"), "--json")
    assert r.exit_code == 0, r.output
    scored = json.loads(r.output[r.output.index('{\n  "device"') :])
    s = scored["summary"]
    assert s["points"] == 24 and s["covered"] == 19 and s["measured_ge_2pct"] == 14
    by = {(p["change"], p["problem"]): p for p in scored["points"]}
    spill = by[("consumer_regs=168", "2048x8192x4096")]
    assert spill["measured_pct"] > 200 and spill["projected_pct"] < 5 and spill["unpriced"] > 0
    assert s["model_priced"]["max"] < 3.5  # where SASS priced the whole change


def test_spills_get_an_interval_as_wide_as_their_executions(tmp_path):
    """A register cap that spills in the K-loop (consumer_regs=168 on the 256-row tile) is named, and its
    interval reaches what such spills cost on the H100 (+237%): each executed local load/store at the
    store path's slow end. Both builds compiled here, priced with the stored H200 capture of 4096^3."""
    with tarfile.open(CHANGES / "bases.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")
    bases = json.loads((tmp_path / "bases" / "bases.json").read_text())
    bases["problems"] = {k: v for k, v in bases["problems"].items() if k == "4096x4096x4096"}
    doc = VC.project_pairs(bases, tmp_path / "bases", pairs=("consumer_regs=168",), cubin_dir=tmp_path)
    (p,) = doc["points"]
    assert any("spills appear" in u for u in p["unpriced"]), p["unpriced"]
    assert p["hi_pct"] > 240 and p["projected_pct"] < 10


def _projected_on_the_h200_4096(tmp_path, pairs: tuple[str, ...]) -> dict:
    """``pairs`` compiled here and projected with the stored H200 capture of 4096^3 (tests/data/h200_changes)."""
    with tarfile.open(CHANGES / "bases.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")
    bases = json.loads((tmp_path / "bases" / "bases.json").read_text())
    bases["problems"] = {k: v for k, v in bases["problems"].items() if k == "4096x4096x4096"}
    return VC.project_pairs(bases, tmp_path / "bases", pairs=pairs, cubin_dir=tmp_path)


def test_a_cluster_change_is_priced_from_the_bytes_it_multicasts(tmp_path):
    """The cluster's multicast barely shows in SASS (the TMA's mask), yet it moves the operand bytes a
    CTA loads from L2: 1x2 -> 1x1 on the 256x128 tile loads 48 KiB a K block where 32 did, and is priced
    slower with an interval that reaches the kernel's own measurement (+2-11%); 1x2 -> 2x2 loads fewer
    bytes but runs four CTAs in lockstep, priced slower still. Both builds compiled here, priced with the
    stored H200 capture of 4096^3."""
    pairs = ("cluster_m=1,cluster_n=1", "cluster_m=2,cluster_n=2")
    doc = _projected_on_the_h200_4096(tmp_path, pairs)
    off, four = (next(p for p in doc["points"] if p["change"] == sw) for sw in pairs)
    for p in (off, four):
        assert "multicast" in p["kinds"], p
        kl = next(ph for ph in p["phases"] if ph["phase"] == "kloop")
        assert "operand bytes a CTA loads a K block 32 ->" in kl["source"], kl["source"]
    assert 1.5 < off["projected_pct"] < 8 and off["lo_pct"] > 0 and off["hi_pct"] > 8
    assert four["projected_pct"] > off["projected_pct"] and "lockstep" in next(
        ph["source"] for ph in four["phases"] if ph["phase"] == "kloop"
    )


def test_a_load_waited_on_after_the_mmas_issue_is_covered_by_them(tmp_path):
    """Where the K-loop's added loads are first waited on says what they cost. The A scales by LDG
    (sfa_tma=0) are loaded a block ahead, yet the compiler hoists their wait to the top of the next pass,
    before its first wgmma: priced at a waited-on load's share. The B scale by LDG (sfb_tma=0,sfb_smem=0)
    is waited on by the promotion after the K block's wgmmas issued: covered, priced 0 with an interval.
    Both builds compiled here, priced with the stored H200 capture of 4096^3."""
    pairs = ("sfa_tma=0", "sfb_tma=0,sfb_smem=0")
    doc = _projected_on_the_h200_4096(tmp_path, pairs)
    sfa, sfb = (next(p for p in doc["points"] if p["change"] == sw) for sw in pairs)
    kl = {p["change"]: next(ph for ph in p["phases"] if ph["phase"] == "kloop")["source"] for p in (sfa, sfb)}
    assert "waited on before the next MMA issues" in kl["sfa_tma=0"], kl
    assert "waited on after MMAs issued: covered by them" in kl["sfb_tma=0,sfb_smem=0"], kl
    assert kl["sfb_tma=0,sfb_smem=0"].endswith("cycles a K block): +0 (+0..+3,849)")
    assert "waited_load" in sfb["kinds"] and "compound" not in sfb["kinds"]
    assert sfa["projected_pct"] > 4 and abs(sfb["projected_pct"]) < 2 < sfb["hi_pct"]


def test_two_different_kernels_are_named_as_such():
    """--change compares builds of one kernel; given two kernels (ours against cuBLAS's from an ncu
    report) it says so, while two configurations of one kernel (CUTLASS with and without NDEBUG, two
    DeepGEMM tile configurations) pass quietly."""
    sass = DATA / "sass"
    ours = SAMPLE / "optimized.sm_90a.cubin.xz"
    r = run("--change", str(ours), str(DATA / "h100_cublas_fp8_4096.ncu-rep.xz"))
    assert r.exit_code == 0 and "two different kernels" in r.output, r.output
    r = run(
        "--change",
        str(sass / "cutlass_sm90_blockwise_fp8_128x128x128_c1x2.sm_90a.cubin.xz"),
        str(sass / "cutlass_sm90_blockwise_fp8_128x128x128_c1x2_noNDEBUG.sm_90a.cubin.xz"),
        "--tile-mn",
        "128,128",
        "--mnkl",
        "4096,4096,4096",
        "--json",
    )
    assert r.exit_code == 0 and "two different kernels" not in r.output
    assert json.loads(r.output[r.output.index('{\n  "change"') :])["change"]["kernels_differ"] is False
    dg = [
        VC._analyze_build(str(sass / f), (4096, 4096, 4096, 1), None)[0].name
        for f in (
            "deepgemm_sm100_fp8_1d1d_4096x4096x4096_b128x128_s8_c1.sm_100a.cubin.xz",
            "deepgemm_sm100_fp8_1d1d_4096x4096x4096_b128x192_s6_c2A.sm_100a.cubin.xz",
            "deepgemm_sm100_bf16_4096x4096_b128x256x64_s4.sm_100a.cubin.xz",
        )
    ]
    assert not VC.kernels_differ(dg[0], dg[1]) and VC.kernels_differ(dg[0], dg[2])


def test_spills_widen_the_kloop_only_interval_too():
    """Without a capture (the K-loop alone), the spills of consumer_regs=168 widen the K block's interval
    to what their executions can cost, and say so."""
    r = run("--change", "optimized:consumer_regs=168", "--mnkl", "4096,4096,4096", "--json")
    assert r.exit_code == 0, r.output
    k = json.loads(r.output[r.output.index('{\n  "change"') :])["change"]["kloop_only"]
    assert any("spills appear" in u and "interval up to" in u for u in k["unpriced"]), k["unpriced"]
    assert k["hi"] > 5 * 1024  # five tensor-core floors a K block (the issue slot alone gave 240 cycles)


def test_a_tile_pinned_in_the_spec_pins_its_base_too():
    """4096x4096x2048 plans a 256-row tile; a spec that pins 192 rows prices ring_unroll=0 on the 192-row
    tile against the 192-row base, not against the planned tile (which read as +84 instructions a K block)."""
    r = run("--change", "optimized:tile_m=192,ring_unroll=0", "--mnkl", "4096,4096,2048", "--json")
    assert r.exit_code == 0, r.output
    ch = json.loads(r.output[r.output.index('{\n  "change"') :])["change"]
    assert ch["tile"] == [192, 128]
    assert "tile_m=192" in ch["a"] and "ring_unroll" not in ch["a"] and ch["b"].endswith("ring_unroll=0")
    k = ch["kloop_only"]
    assert k["mma_per_kblock"] == [4.0, 4.0]  # one 64-row wave per warpgroup on both sides
    assert 15 < k["per_kblock_b"] - k["per_kblock_a"] < 45


def test_tie_wait_is_read_from_the_base_capture(base_tables):
    """Per tile, the sum over consumer warpgroups of the last one's arrival at the tile start (TMA0) or the
    epilogue (Phase 1) minus its own: what a barrier over all of them would make them wait. With an
    epilogue per warpgroup the H200 bases' warpgroups drift 600-1,050 warpgroup-cycles apart a tile; with
    one warpgroup left in the records there is nothing to tie."""
    waits = {k: C.tie_wait_cycles(t) for k, t in base_tables.items()}
    for k, w in waits.items():
        assert set(w) == {"tma0", "phase1"}, k
        assert all(500 < v < 1100 for v in w.values()), (k, w)
    # three warpgroups (192-row tile) wait more than two (256-row) at the tile start
    assert waits["8192x8192x1024"]["tma0"] > waits["4096x4096x4096"]["tma0"]
    t = base_tables["4096x4096x4096"]
    assert C.tie_wait_cycles(t[t["warp"] < 8]) == {}


def test_a_tied_base_has_no_skew_to_pay(tmp_path):
    """Where the base build already ties its warpgroups once a tile (3072x3072x6144: K > 4096, so one
    epilogue barrier over all three), they reach the tile start together (under 100 warpgroup-cycles a
    tile), and tying them there as well (sfb_tma=0) is priced at almost nothing: it measured +0.9%."""
    with tarfile.open(DATA / "h100_changes" / "bases.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")
    import pandas as pd

    w = C.tie_wait_cycles(pd.read_parquet(tmp_path / "bases" / "3072x3072x6144.parquet"))
    assert (
        w["tma0"]
        < 100
        < 900
        < C.tie_wait_cycles(pd.read_parquet(tmp_path / "bases" / "8192x7168x2048.parquet"))["tma0"]
    )


def _counts(threads: dict[str, list[int]], bars: float = 0.0) -> C.BuildCounts:
    from collections import Counter

    per = {p: 100.0 for p in C.PHASES}
    return C.BuildCounts(
        "x",
        per,
        {p: 100 for p in C.PHASES},
        {p: (bars if p == "tma0" else 0.0) for p in C.PHASES},
        4.0,
        100.0,
        1.0,
        0,
        4,
        barrier_threads=threads,
        opcodes={"tma0": Counter({"BAR": bars})},
    )


def test_a_barrier_over_every_warpgroup_is_priced_at_their_measured_wait():
    """A named barrier over all consumer warps where the base had one per warpgroup (sfb_tma=0's stash at
    the tile start, epi_split=0's epilogue) costs TIE_SHARE x what the base capture's warpgroups would wait
    there; its barriers are not also a moved wait. Without the capture's waits it stays an interval."""
    cost = {p: C.PhaseCost(p, 1000.0, 100.0, 10.0, 1.0, 0.5, 1.5, "") for p in C.PHASES}
    cost["kloop"].floor_kblock = 768.0
    a = _counts({"phase1": [128] * 16})
    b = _counts({"tma0": [384, 384], "phase1": [128] * 16}, bars=2.0)
    est = C.estimate_change(a, b, cost, 16, consumer_warps=12, tie_wait={"tma0": 900.0, "phase1": 700.0})
    tma0 = next(d for d in est.deltas if d.phase == "tma0")
    assert tma0.cycles == pytest.approx(C.TIE_SHARE[1] * 900.0)
    assert tma0.lo == pytest.approx(C.TIE_SHARE[0] * 900.0) and tma0.hi == pytest.approx(C.TIE_SHARE[2] * 900.0)
    assert "ties every consumer warpgroup" in tma0.source and not est.unpriced()
    bare = C.estimate_change(a, b, cost, 16, consumer_warps=12)
    assert next(d for d in bare.deltas if d.phase == "tma0").cycles == 0.0
    assert any("ties more threads" in u for u in bare.unpriced())
    # a barrier over two of three warpgroups is not the tie the capture measured: named, not priced
    part = C.estimate_change(
        a, _counts({"tma0": [256], "phase1": [128] * 16}), cost, 16, consumer_warps=12, tie_wait={"tma0": 900.0}
    )
    assert any("ties more threads" in u for u in part.unpriced())
    # both the tile start and the epilogue tied: the skew is paid once, at the larger wait; the second tie
    # costs between nothing and its own wait
    both = C.estimate_change(
        a,
        _counts({"tma0": [384], "phase1": [384] * 16}),
        cost,
        16,
        consumer_warps=12,
        tie_wait={"tma0": 900.0, "phase1": 700.0},
    )
    t0, p1 = (next(d for d in both.deltas if d.phase == ph) for ph in ("tma0", "phase1"))
    assert t0.cycles == pytest.approx(C.TIE_SHARE[1] * 900.0) and p1.cycles == pytest.approx(0.0)
    assert p1.lo == pytest.approx(0.0) and p1.hi == pytest.approx(C.TIE_SHARE[2] * 700.0)
    assert "took their skew" in p1.source


def test_stored_runs_reprojected_with_the_current_pricing():
    """The stored runs re-projected on the CPU with the pricing now (scripts/reproject_changes.py) and
    scored against their wall times: in-sample wherever a fit used the run (the shares on the H200 run,
    two ties paying once on the ties run, the SIMT epilogue's store drain on every run's epilogue points,
    the ring's soft maximum and its K-block terms on every stage-count point, those of both held-out checks
    included, and a removed barrier probe on the 256-row
    tile's peek=0 points, the one-call checks' counts merged with the probes and the count per warp
    counted since); the SIMT
    epilogue's largest miss is gone
    from the mechanisms run (14.8 pp as committed), the largest three-stage miss of the combined check is
    3.0 pp smaller (10.75 as committed) and the held-out check's max 3.44 (6.59 as committed). Every build's
    SASS is the cu13 compiler's, which the GPU ran (the one-call checks' from counts_cu13.json)."""
    want = {
        ("h200_changes", "projections_refit.json"): (33, 0.64, 33),
        ("h100_changes", "projections_reprojected.json"): (33, 0.79, 32),
        ("h100_changes_pairs", "projections_reprojected.json"): (24, 1.01, 21),
        ("h100_changes_ties", "projections_reprojected.json"): (30, 1.19, 30),
        ("h100_changes_mechanisms", "projections_reprojected.json"): (30, 1.10, 30),
        ("h100_changes_store_drain", "projections_reprojected.json"): (30, 0.68, 30),
        ("changes_combined_switches", "projections_reprojected.json"): (33, 1.28, 33),
        ("changes_combined_switches_parts", "projections_reprojected.json"): (24, 1.20, 24),
        ("changes_stage_counts", "projections_reprojected.json"): (6, 1.29, 6),
        ("changes_held_out", "projections_reprojected.json"): (39, 0.79, 38),
        ("changes_ring_tiles", "projections_reprojected.json"): (48, 0.88, 47),
    }
    for (run, name), (n, median, held) in want.items():
        d = DATA / run
        with tarfile.open(d / "measured.tar.xz") as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith("measured.json"))
            measured = json.load(tf.extractfile(member))
        s = C.score_run(json.loads((d / name).read_text()), measured)["summary"]
        assert s["points"] == n and s["covered"] == held, (run, s["covered"])
        assert s["model"]["median"] == pytest.approx(median, abs=0.01), (run, s["model"])
        if run == "h100_changes_mechanisms":
            assert s["model"]["max"] < 6.0
        if run == "changes_combined_switches":
            assert s["model"]["max"] == pytest.approx(7.66, abs=0.01)
        if run == "changes_held_out":  # 6.59 as committed, before the 256-row tile's ring share
            assert s["model"]["max"] == pytest.approx(3.44, abs=0.01)


# the checks as committed (projections fixed before their pairs were timed): points, moved >= 2%, intervals
# that held, model median / max pp, the signs wrong, and the issue's targets each missed
AS_COMMITTED = {
    # ten changes across the phases on three problems no run or fit used; the max and the sign miss on the
    # 256-row tile (elect_release=0, peek=0)
    "h100_changes_store_drain": (
        30,
        18,
        29,
        0.75,
        4.19,
        ["peek=0 @ 4096x10240x2048"],
        {"max_le_3pp", "sign_right_past_1pct"},
    ),
    "changes_switches_k_range": (36, 24, 36, 0.85, 4.97, [], {"max_le_3pp"}),
    "changes_per_warp": (
        36,
        25,
        35,
        1.15,
        10.72,
        ["peek=0 @ 5120x5120x3072"],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct"},
    ),
    "changes_switches_more_problems": (
        36,
        20,
        35,
        0.72,
        3.07,
        ["elect_release=0 @ 8192x6144x2560"],
        {"max_le_3pp", "sign_right_past_1pct"},
    ),
    "changes_switches_aspect_ratios": (36, 24, 36, 1.06, 4.35, [], {"max_le_3pp", "median_le_1pp"}),
    "changes_switches_short_m": (
        36,
        26,
        35,
        1.08,
        6.76,
        ["elect_release=0 @ 6144x9216x2048"],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct"},
    ),
    "changes_switches_tall_wide": (36, 25, 36, 1.46, 7.29, [], {"max_le_3pp", "median_le_1pp"}),
    # the first checks committed with the checked interval: all 192-row tile, then all 256-row tile
    "changes_switches_192_rows": (
        36,
        24,
        35,
        0.99,
        12.12,
        ["elect_release=0 @ 12288x3072x2048"],
        {"max_le_3pp", "sign_right_past_1pct"},
    ),
    "changes_switches_256_rows": (36, 24, 36, 1.56, 5.16, [], {"max_le_3pp", "median_le_1pp"}),
    # the ring's K-block terms held out: every change priced high in a run whose measured changes sat low
    "changes_stage_ring": (
        36,
        19,
        33,
        2.00,
        5.46,
        ["elect_release=0 @ 5632x8192x2048", "elect_release=0 @ 11264x6144x1536"],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct"},
    ),
    # counted with the cu13 compiler the GPU runs, timed after a warm-up round: every target but the max
    "changes_switches_cu13": (39, 25, 39, 0.83, 4.64, [], {"max_le_3pp"}),
    # three tiles, two of them widths no check had timed: the 128x160 tile's two stages priced with the
    # 256-row tile's ring terms (-19 pp), and ring_unroll=0,peek=0,uniform_desc=0 there measured +22% where
    # its counts priced +4; three changes whose SASS moves little measured +1.5 to +1.8% on that problem
    "changes_switches_cu13_tiles": (
        39,
        26,
        32,
        1.47,
        19.38,
        ["elect_release=0 @ 1280x10240x4096", "ring_unroll=0 @ 1280x10240x4096", "sfb_tma=0 @ 1280x10240x4096"],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct", "checked_coverage_ge_80pct"},
    ),
    # the SIMT store's share held out (within 3.3 pp on the 256- and 128-row tiles, 4.5 high on the 192-row);
    # the 128x192 tile's two stages -14 pp
    "changes_store_share": (
        39,
        23,
        38,
        1.24,
        13.99,
        ["peek=0 @ 8704x4608x3072"],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct"},
    ),
    # the 128-row tile's ring terms held out on two new problems; the combination above again +16 pp on 128x160
    "changes_rows_128": (
        8,
        7,
        7,
        2.16,
        15.62,
        [],
        {"points_ge_30", "max_le_3pp", "median_le_1pp", "checked_coverage_ge_80pct"},
    ),
    # eleven pairs no check had timed, on three new problems: the clusters within 2.6 pp (1x1) and 6.1 (2x2);
    # split-K in two measured +61 to +101% where +14 to +20 was priced, outside its interval; the SFB loaded
    # by LDG without the shared-memory stash priced +8 to +14 (a waited-on load) and measured -1.8 to +1.5
    "changes_unseen_pairs": (
        33,
        20,
        27,
        1.78,
        80.96,
        [
            "shift_last_m=0 @ 2800x10240x2560",
            "peek=0,elect_release=0 @ 4000x7168x3072",
            "sfb_tma=0,sfb_smem=0 @ 2560x12288x4096",
        ],
        {"max_le_3pp", "median_le_1pp", "sign_right_past_1pct", "checked_coverage_ge_80pct", "no_worse_on_binding"},
    ),
    # the multicast and split-K held out on three new problems: the clusters within 6.2 pp; split-K in two and
    # three, its partials priced at the DRAM, measured 1.3-2.0x that (15-108 pp low), in their intervals 4 of 6
    "changes_clusters_split_k": (
        12,
        9,
        9,
        10.85,
        107.84,
        [],
        {"points_ge_30", "median_le_1pp", "max_le_3pp", "coverage_ge_80pct", "checked_coverage_ge_80pct"},
    ),
    # where a K-loop load is first waited on, held out on three new problems: the B scale's loads, waited on
    # after the K block's wgmmas issued and priced covered, within 3.51 pp on nine points (the old rule, every
    # load waited on, would have priced them 5.6-13.5 pp high); the A scales' loads as before, -7.45 to +3.59
    "changes_scale_loads": (
        15,
        7,
        15,
        1.65,
        7.45,
        ["sfb_tma=0,sfb_smem=0,ring_unroll=0 @ 5376x6144x2048"],
        {"points_ge_30", "half_measured_ge_2pct", "median_le_1pp", "max_le_3pp", "sign_right_past_1pct"},
    ),
    # split-K's partials at the DRAM's pace, held out on three new problems: split-K in two, three and four
    # measured 1.17-1.71x its price (11-83 pp low, more the more units), every point in its interval, where the
    # clock dividing the partials gives 1.44-2.38x; the SIMT stores beside it within 2.0 pp
    "changes_split_k_clock": (
        12,
        12,
        12,
        17.11,
        83.32,
        [],
        {"points_ge_30", "median_le_1pp", "max_le_3pp", "checked_coverage_ge_80pct"},
    ),
    # split-K's work units each with a start and an epilogue, held out on three new problems (an H200): split-K
    # in two, three and four 12-82 pp low, 1.18-1.44x its price, where without the units' term every point
    # priced lower still (median 40.3 pp, max 106.6)
    "changes_split_k_units": (
        9,
        9,
        8,
        31.52,
        82.38,
        [],
        {"points_ge_30", "median_le_1pp", "max_le_3pp", "checked_coverage_ge_80pct"},
    ),
    # the waited-on load's share by the loads a K block exposes, held out on three new problems (one per tile):
    # the nine scale-load points within 3.4 pp; the max two stages and the SIMT epilogue on the 192-row tile;
    # the signs missed peek=0 and elect_release=0, measured +1.51 and +1.25 where both are priced about -0.1
    "changes_loads_exposed": (
        33,
        17,
        32,
        0.97,
        6.93,
        ["peek=0 @ 4864x7168x2560", "elect_release=0 @ 1792x10240x3584"],
        {"max_le_3pp", "sign_right_past_1pct"},
    ),
    # the ten switches on the 128x144 tile no check had timed (one problem of three: the device time left):
    # two and three stages within 2.3 pp, the A scales by LDG 4.7-5.1 high, elect_release=0's sign
    "changes_tile_widths": (
        11,
        8,
        9,
        1.46,
        5.12,
        ["elect_release=0 @ 1024x9472x3072"],
        {"points_ge_30", "median_le_1pp", "max_le_3pp", "sign_right_past_1pct"},
    ),
    # the tile-widths check's other two problems, timed apart (256x112 and 128x160 in 2x1 clusters): every sign
    # and 21 of 22 intervals; the A scales by LDG 3.5-3.7 pp low on the 256-row tile, 2.4-3.6 high on the 128-row
    "changes_tile_widths_112_160": (
        22,
        11,
        21,
        1.06,
        3.72,
        [],
        {"points_ge_30", "median_le_1pp", "max_le_3pp"},
    ),
    # three shapes of DeepGEMM's test list, each at an extreme: K = 16384 within 2.6 pp on every point; at
    # K = 512 the compiler left no K-loop and the tile's start and epilogue counted as one (ring_unroll=0 +93%
    # priced, +2.9 measured), since counted apart (counts_recounted.json)
    "changes_deepgemm_shapes": (
        33,
        18,
        31,
        1.45,
        90.33,
        ["elect_release=0 @ 4096x32768x512", "epi_split=0 @ 4096x32768x512", "epi_split=0 @ 4096x2112x7168"],
        {"median_le_1pp", "max_le_3pp", "sign_right_past_1pct", "checked_coverage_ge_80pct", "no_worse_on_binding"},
    ),
    # split-K priced as its partials' traffic, held out on three new problems: split-K in two, three and four
    # 0.80-1.20x its price (-45 to +31 pp, both signs), every point in its interval; the SIMT stores within 1.4 pp
    "changes_split_k_partials": (
        12,
        12,
        12,
        3.89,
        45.47,
        [],
        {"points_ge_30", "median_le_1pp", "max_le_3pp"},
    ),
}


@pytest.mark.parametrize("run", list(AS_COMMITTED))
def test_the_one_call_checks_as_committed(run):
    """Each check scored from its committed projections and timings: its figures, and exactly the issue's
    targets it missed."""
    points, moved, covered, median, max_pp, sign_wrong, missed = AS_COMMITTED[run]
    s = _stored_summary(run)["summary"]
    assert (s["points"], s["measured_ge_2pct"], s["covered"]) == (points, moved, covered)
    assert s["model"]["median"] == pytest.approx(median, abs=0.01)
    assert s["model"]["max"] == pytest.approx(max_pp, abs=0.01)
    assert s["sign_wrong"] == sign_wrong
    assert {k for k, ok in s["targets"].items() if not ok} == missed and s["meets"] == (not missed)


def test_the_unseen_pairs_rescored_with_the_pricing_now():
    """tests/data/changes_unseen_pairs, priced now: the cluster changes as committed (held out: their price
    went in with the counts), inside their intervals; split-K's three points re-priced as its fp32 partials'
    traffic at the DRAM (PARTIAL_DRAM_SHARE, fitted on every stored split-K point, these among them: not held
    out), from +14..+20% as committed to within 5 pp of the +61..+101% measured."""
    run = _record_script().score_check(DATA / "changes_unseen_pairs")
    by = {(p["change"], p["problem"]): p for p in run["points"]}
    clusters = [p for (c, _), p in by.items() if c.startswith("cluster_")]
    assert len(clusters) == 6 and all(p["held_out"] and p["covered"] for p in clusters)
    assert max(abs(p["err_model_pp"]) for p in clusters) < 6.2
    split = [p for (c, _), p in by.items() if c == "split_k=2"]
    assert len(split) == 3 and not any(p["held_out"] for p in split)
    assert all(p["projected_pct"] > 55 and abs(p["err_model_pp"]) < 5 for p in split)


def test_the_covered_loads_held_out_as_committed():
    """tests/data/changes_scale_loads: the B scale by LDG (three pairs on three new problems, one tile each)
    priced covered before the timing, since the control bits put its first wait after the K block's wgmmas:
    all nine within 3.6 pp and in their intervals. Re-projected as if every load were waited on (the rule
    before), the same nine price 5-14 pp high."""
    import copy

    d = DATA / "changes_scale_loads"
    scored = _stored_summary("changes_scale_loads")["points"]
    covered = [p for p in scored if p["change"].startswith("sfb_tma=0,sfb_smem=0")]
    assert len(covered) == 9 and all(p["covered"] for p in covered)
    assert max(abs(p["err_model_pp"]) for p in covered) < 3.6
    counts = json.loads((d / "counts.json").read_text())
    assert all(e["a"]["exposed_loads"] == 0 for e in counts["problems"].values())
    every = copy.deepcopy(counts)
    for e in every["problems"].values():
        for b in (e["a"], *e["b"].values()):
            b["exposed_loads"] = None
    doc = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=every)
    measured, _ = C.stored_measured(d)
    before = [p for p in C.score_run(doc, measured)["points"] if p["change"].startswith("sfb_tma=0,sfb_smem=0")]
    assert all(5 < p["err_model_pp"] < 14 for p in before)


def test_the_multicast_and_split_k_held_out_as_committed():
    """tests/data/changes_clusters_split_k (H100, three new problems, the prices committed before the call):
    the cluster's multicast within 6.3 pp on all six points; split-K in two and three, its fp32 partials
    priced at the DRAM, measured 1.3-2.0x its price on every point as committed; priced since as the partials'
    traffic at the DRAM's pace, with the SASS's start and epilogue of one unit not priced (fitted on every
    stored split-K point, these among them: not held out), 0.9-1.05x."""
    points = _stored_summary("changes_clusters_split_k")["points"]
    clusters = [p for p in points if p["change"].startswith("cluster_")]
    assert len(clusters) == 6 and max(abs(p["err_model_pp"]) for p in clusters) < 6.3
    split = [p for p in points if p["change"].startswith("split_k=")]
    assert len(split) == 6
    assert all(1.3 < p["measured_pct"] / p["projected_pct"] < 2.0 for p in split)
    d = DATA / "changes_clusters_split_k"
    counts = json.loads((d / "counts.json").read_text())
    now = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=counts)["points"]
    now_split = [p for p in now if p["change"].startswith("split")]
    assert all(any("a trip count the SASS does not give" in u for u in p["unpriced"]) for p in now_split)
    by = {(p["change"], p["problem"]): p["measured_pct"] for p in split}
    assert all(0.9 < by[(p["change"], p["problem"])] / p["projected_pct"] < 1.05 for p in now_split)
    # the partials' time is not divided by the clock the lighter power draw raises
    assert all(1 + p["projected_pct"] / 100 > (1 + p["cycles_pct"] / 100) / p["clock_ratio"] + 0.05 for p in now_split)


def test_split_k_at_the_drams_pace_held_out_as_committed(monkeypatch):
    """tests/data/changes_split_k_clock: with the partials' time kept out of the clock term (committed before
    the call), split-K in two, three and four units priced 11-83 pp low on three new problems, 1.17-1.71x its
    price, growing with the units. Priced since as the partials' traffic (fitted on these among others: not
    held out), 0.89-1.18x; re-projected with the clock dividing the partials' time too, 1.25-1.83x."""
    d = DATA / "changes_split_k_clock"
    points = _stored_summary("changes_split_k_clock")["points"]
    split = {(p["change"], p["problem"]): p for p in points if p["change"].startswith("split_k=")}
    assert len(split) == 9 and all(p["covered"] for p in split.values())
    ratios = [p["measured_pct"] / p["projected_pct"] for p in split.values()]
    assert 1.15 < min(ratios) and max(ratios) < 1.75
    for prob in {pr for _, pr in split}:
        assert [split[(f"split_k={n}", prob)]["err_model_pp"] for n in (2, 3, 4)] == sorted(
            split[(f"split_k={n}", prob)]["err_model_pp"] for n in (2, 3, 4)
        )[::-1]  # more units, further below
    direct = [p for p in points if p["change"] == "epilogue=direct"]
    assert len(direct) == 3 and max(abs(p["err_model_pp"]) for p in direct) < 2.1
    counts = json.loads((d / "counts.json").read_text())
    measured, _ = C.stored_measured(d)

    def ratios_now() -> list[float]:
        doc = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=counts)
        for ph in (ph for p in doc["points"] if p["change"].startswith("split_k=") for ph in p["phases"]):
            if ph["phase"] == "phase1":
                assert "split-K's fp32 partials" in ph["source"]
        return [
            p["measured_pct"] / p["projected_pct"]
            for p in C.score_run(doc, measured)["points"]
            if p["change"].startswith("split")
        ]

    now = ratios_now()
    assert len(now) == 9 and 0.85 < min(now) and max(now) < 1.2
    was = C._add_priced
    monkeypatch.setattr(C, "_add_priced", lambda delta, lph, what, dram=False: was(delta, lph, what))
    divided = ratios_now()
    assert all(b > a + 0.1 for a, b in zip(now, divided)) and 1.2 < min(divided) and max(divided) < 1.9


def test_split_k_work_units_held_out_as_committed():
    """tests/data/changes_split_k_units (an H200, three new problems, committed before the call): with each work
    unit priced a start and an epilogue, all nine split-K points priced 12-82 pp low. Priced since as the
    partials' traffic (fitted on these among others: not held out), every point closer, all within 30 pp."""
    d = DATA / "changes_split_k_units"
    points = _stored_summary("changes_split_k_units")["points"]
    assert len(points) == 9 and all(-83 < p["err_model_pp"] < -12 for p in points)
    now = {(p["change"], p["problem"]): p for p in _record_script().score_check(d)["points"]}
    assert all(abs(now[(p["change"], p["problem"])]["err_model_pp"]) < abs(p["err_model_pp"]) for p in points)
    assert max(abs(p["err_model_pp"]) for p in now.values()) < 30 and not any(p["held_out"] for p in now.values())


def test_split_k_priced_as_its_partials_held_out(monkeypatch):
    """tests/data/changes_split_k_partials (H100, three new problems, the price committed before the call):
    split-K in two, three and four units measured 0.80-1.20x its price, on both sides of it, every point
    inside its interval; the largest miss the build whose spills the chain names (3072x10240x3072 in four, 146
    local stores). At the DRAM's peak (share 1) the same nine would price 1.23-1.89x low; the SIMT stores
    beside them within 1.4 pp."""
    d = DATA / "changes_split_k_partials"
    points = _stored_summary("changes_split_k_partials")["points"]
    split = [p for p in points if p["change"].startswith("split_k=")]
    assert len(split) == 9 and all(p["covered"] for p in split)
    ratios = [p["measured_pct"] / p["projected_pct"] for p in split]
    assert 0.79 < min(ratios) < 0.9 and 1.1 < max(ratios) < 1.21
    worst = max(split, key=lambda p: abs(p["err_model_pp"]))
    assert (worst["change"], worst["problem"]) == ("split_k=4", "3072x10240x3072")
    counts = json.loads((d / "counts.json").read_text())
    assert counts["problems"]["3072x10240x3072"]["b"]["split_k=4"]["spills"] > 100
    direct = [p for p in points if p["change"] == "epilogue=direct"]
    assert len(direct) == 3 and max(abs(p["err_model_pp"]) for p in direct) < 1.4
    doc = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=counts)
    for p in (p for p in doc["points"] if p["change"].startswith("split_k=")):
        assert "trip_count" in p["kinds"] and any("a trip count the SASS does not give" in u for u in p["unpriced"])
    monkeypatch.setattr(C, "PARTIAL_DRAM_SHARE", (1.0, 1.0, 1.0))
    measured, _ = C.stored_measured(d)
    at_peak = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=counts)
    low = [p["measured_pct"] / p["projected_pct"] for p in C.score_run(at_peak, measured)["points"]]
    assert len(low) == 12 and sorted(low)[3] > 1.2 and max(low) < 1.95


def test_the_removed_probe_held_out_on_seven_new_problems():
    """The barrier probe's price, committed with the counts before each call (tests/data/changes_probe and
    changes_probe_short_k, H100): peek=0 within 1 pp on all seven new problems, K = 1536 to 4096, both tiles;
    the rest of that check is what the chain still misses: elect_release=0 on the 256-row tile 3-5 pp high
    and epi_split=0's tie, where "no change" does better on changes this small."""
    scored = {run: _stored_summary(run) for run in ("changes_probe", "changes_probe_short_k")}
    peek = [p for s in scored.values() for p in s["points"] if p["change"] == "peek=0"]
    assert len(peek) == 7 and max(abs(p["err_model_pp"]) for p in peek) < 1.0
    assert all(p["projected_pct"] > 1.5 and p["measured_pct"] > 1.0 for p in peek if p["problem"] in _TILE_256)
    s = scored["changes_probe"]["summary"]
    assert s["points"] == 20 and s["no_change"]["median"] < s["model"]["median"]
    worst = {(p["change"], p["problem"]) for p in scored["changes_probe"]["points"] if abs(p["err_model_pp"]) > 3}
    assert {c for c, _ in worst} == {"elect_release=0", "epi_split=0"}


def test_the_switches_held_out_over_k_as_committed():
    """The issue's ten single switches and two probe combinations on three new problems, K = 1536 to 4096
    (tests/data/changes_switches_k_range, H100, one call, projections committed before the timings were
    opened): every target but the max. The three points past 3 pp: elect_release=0 at the shortest K on the
    256-row tile, and a removed probe with sfb_tma=0 on that tile, whose parts each came within 1 pp."""
    worst = {change for change, _ in _misses_past_3pp("changes_switches_k_range")}
    assert worst == {"elect_release=0", "peek=0,sfb_tma=0"}


def test_the_count_per_warp_held_out_as_committed():
    """Instructions counted per warp, committed with the counts before the call (tests/data/changes_per_warp,
    H100): on the 256-row tile elect_release=0 alone and with epi_split=0 priced 2-3 pp closer than the same
    counts price them per tile (measured near 0); the check still misses the median, the max (two stages
    on the 192-row tile) and one sign."""
    d = DATA / "changes_per_warp"
    committed = json.loads((d / "projections.json").read_text())
    counts = json.loads((d / "counts.json").read_text())
    per_tile = json.loads(json.dumps(counts))
    for e in per_tile["problems"].values():
        for c in [e["a"], *e["b"].values()]:
            c.pop("per_warp")
    was = {(p["change"], p["problem"]): p["projected_pct"] for p in committed["points"]}
    doc = VC.project_archive(d / "bases.tar.xz", tuple(counts["pairs"]), counts=per_tile)
    without = {(p["change"], p["problem"]): p["projected_pct"] for p in doc["points"]}
    for change in ("elect_release=0", "elect_release=0,epi_split=0"):
        for problem in ("4096x10240x1536", "7168x7168x2048"):
            assert 1.4 < without[(change, problem)] - was[(change, problem)] < 2.6, (change, problem)


def _captured_kblocks(archive: Path, tmp_path: Path):
    """The stored timing captures in ``archive`` unpacked into ``tmp_path``, and a reader of one capture's K-loop
    cycles a K block as `bsprof timing --from DIR` prints them."""
    import re

    with tarfile.open(archive) as tf:
        tf.extractall(tmp_path, filter="data")

    def per_kblock(name: str) -> int:
        r = CliRunner().invoke(cli, ["timing", "--from", str(tmp_path / name)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return int(re.search(r"K-loop: ([\d,]+) cycles a K block", r.output).group(1).replace(",", ""))

    return per_kblock


def test_the_missed_builds_phase_captures(tmp_path):
    """The timing builds of two of the count per warp check's misses, captured beside their bases
    (tests/data/changes_per_warp/captures_of_missed_builds.tar.xz, H100): elect_release=0's added K-loop
    instructions cost a few cycles a K block, where the chain charges them like uniform_desc=0's, and two
    stages stretch the timing build's K block by 30-56%."""
    per_kblock = _captured_kblocks(DATA / "changes_per_warp" / "captures_of_missed_builds.tar.xz", tmp_path)

    base, elect = per_kblock("s256_base"), per_kblock("s256_elect")
    assert 1_024 < base and abs(elect - base) <= 10
    for b, two in (("s256b_base", "s256b_stage2"), ("s192_base", "s192_stage2")):
        assert 1.25 < per_kblock(two) / per_kblock(b) < 1.6


def test_the_switches_on_more_problems_held_out_as_committed():
    """The issue's ten single switches and two combinations on three more new problems (tests/data/
    changes_switches_more_problems, H200, one call, projections committed before the timings were opened):
    the median met and every interval but one; the max missed by a waited-on load on the 192-row tile and
    one sign by elect_release=0 there (priced about 0, measured +1.2%)."""
    assert list(_misses_past_3pp("changes_switches_more_problems")) == [("sfa_tma=0", "8192x6144x2560")]


def test_the_switches_on_three_aspect_ratios_held_out_as_committed():
    """The issue's ten single switches and two new combinations on three new problems, M/N 0.3 to 2.25
    (tests/data/changes_switches_aspect_ratios, H100, one call, projections committed before the timings
    were opened): every interval and every sign, the median just missed; past 3 pp two stages at the
    shortest M, three stages on the 192-row tile (priced under, as on most stored three-stage points) and
    a waited-on load with elect_release=0 on the 256-row tile."""
    worst = _misses_past_3pp("changes_switches_aspect_ratios")
    assert set(worst) == {
        ("ab_stage=2", "3072x10240x2048"),
        ("sfb_tma=0,elect_release=0", "4096x6144x2560"),
        ("ab_stage=3", "9216x4096x2560"),
    }
    assert worst[("ab_stage=3", "9216x4096x2560")] < -3


def test_the_switches_at_short_m_held_out_as_committed():
    """The issue's ten single switches and two new combinations on three new problems, two of them at
    M = 2048 (tests/data/changes_switches_short_m, H100, one call, projections committed before the timings
    were opened): 35 of 36 intervals; past 3 pp two stages on the 192-row tile (priced high, as on most stored
    two-stage points of that tile) and a waited-on load on the 256-row tile at K = 4096, alone and in a
    K-loop that is not unrolled (priced low); the sign wrong on elect_release=0 on the 192-row tile again
    (priced about 0, measured +1.1%)."""
    worst = _misses_past_3pp("changes_switches_short_m")
    assert set(worst) == {
        ("ab_stage=2", "6144x9216x2048"),
        ("sfa_tma=0", "2048x6144x4096"),
        ("ring_unroll=0,sfa_tma=0", "2048x6144x4096"),
    }
    assert worst[("ab_stage=2", "6144x9216x2048")] > 3 and worst[("sfa_tma=0", "2048x6144x4096")] < -3


def test_the_switches_on_a_tall_a_square_and_a_wide_problem_held_out_as_committed():
    """The issue's ten single switches and two new combinations on three new problems, with the waited-on
    load priced by consumer warpgroups (tests/data/changes_switches_tall_wide, H100, one call, projections
    committed before the timings were opened): every interval and every sign; the median and the max missed,
    all eight misses past 3 pp in the cycles. The waited-on load, refitted by warpgroups before this check
    (reverted since: held out, it scored no better than the one share), priced low on the tall and the square
    problem, alone and most with epi_split=0 beside it; the SIMT epilogue priced high there."""
    worst = _misses_past_3pp("changes_switches_tall_wide")
    assert {c for c, _ in worst} == {
        "sfa_tma=0",
        "sfa_tma=0,epi_split=0",
        "epilogue=direct",
        "ab_stage=2",
        "uniform_desc=0,ring_unroll=0",
    }
    assert all(e < -3 for (c, _), e in worst.items() if "sfa_tma" in c)
    assert min(worst.values()) == pytest.approx(worst[("sfa_tma=0,epi_split=0", "8192x8192x2048")])


@pytest.mark.parametrize(
    "run, covered, missed",
    [
        ("changes_switches_192_rows", 33, {"ring_unroll=0 @ 12288x3072x2048", "ab_stage=2 @ 3584x6144x3072"}),
        ("changes_switches_256_rows", 34, {"elect_release=0 @ 9728x3072x2048", "elect_release=0 @ 5120x6656x2560"}),
    ],
)
def test_the_checked_interval_held_on_checks_committed_with_it(run, covered, missed):
    """The checked interval, committed with each projection before the pairs were timed (tests/data/
    changes_switches_192_rows and changes_switches_256_rows, H100, one call each): it holds 33 and 34 of 36
    points, above its 90% level's 80% floor, where the SASS bounds are several times wider. The 192-row tile's
    misses past 3 pp are two stages priced high, a waited-on load (sfa_tma=0) priced high and the SIMT
    epilogue priced high; the 256-row tile's two stages, alone and with uniform_desc=0, are priced 4.5-5.2 pp
    high and the epilogue with sfb_tma=0 3.2 pp high."""
    scored = _stored_summary(run)
    s = scored["summary"]
    assert (s["checked_points"], s["checked_covered"]) == (36, covered)
    assert s["targets"]["checked_coverage_ge_80pct"]
    outside = {f"{p['change']} @ {p['problem']}" for p in scored["points"] if not p["covered_checked"]}
    assert missed <= outside and len(outside) == 36 - covered
    widths = [p["hi_pct"] - p["lo_pct"] for p in scored["points"]]
    assert s["checked_median_half_pp"] * 2 < sorted(widths)[len(widths) // 2]
    worst = _misses_past_3pp(run)
    assert all(e > 3 for e in worst.values())
    assert {c for c, _ in worst} <= {
        "ab_stage=2",
        "sfa_tma=0",
        "epilogue=direct",
        "ab_stage=2,uniform_desc=0",
        "epilogue=direct,sfb_tma=0",
    }


def test_a_run_says_when_its_first_repeat_measured_apart():
    """Repeat 0's paired change against the median of the other repeats, over every stored one-call check:
    within 1.85 pp on nineteen; on changes_probe, changes_stage_ring and changes_scale_loads most changes of a
    problem measured low in repeat 0 (-9.1, -4.0 and -3.1 pp in the median; the last after a warm-up round),
    on changes_split_k_units high (+2.4, an H200),
    which the mean of the paired ratios carries, and those runs say so (`--validate --changes` prints it)."""
    script = _record_script()
    first = {run: _stored_summary(run)["summary"]["first_repeat"] for run in script.CHECKS}
    off = {"changes_probe", "changes_stage_ring", "changes_scale_loads", "changes_split_k_units"}
    assert {run for run, f in first.items() if f["off"]} == off
    assert first["changes_probe"]["median_pp"] < -8.0 and -5.0 < first["changes_stage_ring"]["median_pp"] < -3.0
    assert -3.5 < first["changes_scale_loads"]["median_pp"] < -2.5
    assert 2.0 < first["changes_split_k_units"]["median_pp"] < 2.6
    assert all(abs(f["median_pp"]) < 1.85 for run, f in first.items() if not f["off"])
    out = CliRunner().invoke(cli, ["model", "--validate", "--changes", "--from", str(DATA / "changes_stage_ring")])
    assert out.exit_code == 0 and "first repeat against the others: median -4.02 pp" in out.output
    assert "time the pairs again" in out.output


def test_the_ring_terms_held_out_on_four_new_problems():
    """The ring priced from the base's own K block, committed with the projections before the pairs were
    timed (tests/data/changes_stage_ring, H100, one call), against the first load's share it replaced on the
    same counts and bases (projections_first_load_share.json, derived on the CPU after the timings): on the
    18 points whose ring depth changes the terms cut the largest miss (two stages at 11264x6144x1536 priced
    +10.5% against +10.2% measured, where the share said +15.4%) and price three stages higher than the share
    did, which this run measured at -0.04 to +2.56% (0.5-8.7% on the stored checks): a higher median, a lower max. Every change of
    the run but three was priced high (on three of the four problems the first repeat measured most changes
    2-7% under the other four), the changes the terms do not touch by 1.8 pp in the mean."""
    d = DATA / "changes_stage_ring"
    measured, _ = C.stored_measured(d)
    terms = C.score_run(json.loads((d / "projections.json").read_text()), measured)["points"]
    share = C.score_run(json.loads((d / "projections_first_load_share.json").read_text()), measured)["points"]
    pairs = [(t, s) for t, s in zip(terms, share) if abs(t["projected_pct"] - s["projected_pct"]) > 0.01]
    assert len(pairs) == 18 and all((t["change"], t["problem"]) == (s["change"], s["problem"]) for t, s in pairs)
    stage_changes = {"ab_stage=2", "ab_stage=3", "ab_stage=2,epi_split=0", "ab_stage=3,sfb_tma=0", "epilogue=direct"}
    assert {t["change"] for t, _ in pairs} == stage_changes

    def errs(i: int, change: str | None = None) -> list[float]:
        return [abs(p[i]["err_model_pp"]) for p in pairs if change is None or p[0]["change"] == change]

    assert max(errs(0)) < 5.0 < 7.5 < max(errs(1))
    assert statistics.median(errs(1)) < statistics.median(errs(0)) < 2.5
    assert max(errs(0, "ab_stage=2")) < 4.0 < 5.0 < max(errs(1, "ab_stage=2"))
    assert min(errs(0, "ab_stage=3")) > max(errs(1, "ab_stage=3"))
    untouched = [t["err_model_pp"] for t in terms if not any(t is u for u, _ in pairs)]
    assert statistics.fmean(untouched) > 1.5 and sum(e > 0 for e in untouched) >= 14


def test_three_stages_lengthen_the_k_block_more_than_their_first_load_says(tmp_path):
    """The timing builds of three stages beside their bases (tests/data/changes_switches_short_m/
    captures_three_stages.tar.xz, H100): the K block grows 15-25% on the 192-row tile and 2-6% on the
    256-row tile. Through the ring's soft maximum that needs a steady load latency of 0.65-0.9 x the first
    load, where the two-stage captures of the count per warp check need 0.4-0.5: the latency a stage count
    is priced with is not one share of the first load."""
    import pandas as pd

    per_kblock = _captured_kblocks(DATA / "changes_switches_short_m" / "captures_three_stages.tar.xz", tmp_path)

    p = C.RING_SOFTNESS
    for tile, grew in (("s192", (1.15, 1.25)), ("s256", (1.02, 1.06))):
        base, three = per_kblock(f"{tile}_base"), per_kblock(f"{tile}_stage3")
        assert grew[0] < three / base < grew[1]
        # the latency L that P(S) = (C0^p + (L / (S - 1))^p)^(1/p) needs to move the K block from 4 to 3 stages
        latency = ((three**p - base**p) / (0.5**p - (1 / 3) ** p)) ** (1 / p)
        first = C.first_load_cycles(pd.read_parquet(tmp_path / f"{tile}_base" / "timing.parquet"))
        assert 0.65 < latency / first < 0.9
    assert per_kblock("s192_unroll0") / per_kblock("s192_base") < 1.03


def test_the_timing_build_does_not_lengthen_a_shallow_ring(tmp_path):
    """The timing build's overhead against the plain build (CUDA graph replays) at the base's ring depth and
    at two stages on both tiles (tests/data/changes_switches_more_problems/timing_overhead_two_stages.tar.xz,
    H200): smaller at two stages, so the stamps are not why two stages were priced high on the H100."""
    with tarfile.open(DATA / "changes_switches_more_problems" / "timing_overhead_two_stages.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")

    def overhead(name: str) -> dict:
        return json.loads((tmp_path / name / "timing.json").read_text())["overhead"][0]

    for tile in ("o192", "o256"):
        base, two = overhead(f"{tile}_base"), overhead(f"{tile}_stage2")
        assert base["mnkl"] == two["mnkl"] and two["overhead_pct"] < base["overhead_pct"] < 2.5
        plain_moved = two["plain_us"] / base["plain_us"] - 1.0
        timing_moved = two["timing_us"] / base["timing_us"] - 1.0
        assert 0.05 < plain_moved and abs(plain_moved - timing_moved) < 0.02


_TILE_256 = {"4096x9216x2560", "5120x9216x2048", "8192x4096x3584", "4096x8192x1536", "7168x4096x1536"}


def _misses_past_3pp(run: str) -> dict:
    """{(change, problem): model error pp} of a stored check's points more than 3 pp off, as committed."""
    scored = _stored_summary(run)
    return {(p["change"], p["problem"]): p["err_model_pp"] for p in scored["points"] if abs(p["err_model_pp"]) > 3}


def _stored_summary(run: str) -> dict:
    d = DATA / run
    with tarfile.open(d / "measured.tar.xz") as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("measured.json"))
        measured = json.load(tf.extractfile(member))
    return C.score_run(json.loads((d / "projections.json").read_text()), measured)


def test_the_combined_switches_check_as_committed():
    """Eleven switch combinations no run had timed, on three new problems (tests/data/changes_combined_switches):
    projections written from the committed counts before any pair was timed, in the same H100 call (their
    sha256 recorded beside them). Scored as committed, the intervals hold every point and the model beats the
    count rule, but the median, the max and the sign miss: the combinations interact on the hardware."""
    import hashlib

    d = DATA / "changes_combined_switches"
    digest = hashlib.sha256((d / "projections.json").read_bytes()).hexdigest()
    assert (d / "projections.sha256").read_text().split()[0] == digest
    scored = _stored_summary("changes_combined_switches")
    s = scored["summary"]
    assert s["points"] == 33 and s["measured_ge_2pct"] == 24 and s["covered"] == 33
    assert s["model"]["median"] == pytest.approx(1.36, abs=0.01) and s["model"]["max"] == pytest.approx(10.75, abs=0.01)
    assert sorted(s["sign_wrong"]) == [
        "peek=0,elect_release=0 @ 3072x8192x4096",
        "peek=0,elect_release=0 @ 5120x10240x1536",
    ]
    t = s["targets"]
    assert t["coverage_ge_80pct"] and t["beats_count_rule_off_binding"] and t["no_worse_on_binding"]
    assert not t["median_le_1pp"] and not t["max_le_3pp"] and not t["sign_right_past_1pct"] and not s["meets"]
    # the largest miss: three stages with the descriptors in vector registers at K = 4096, +12.2% measured
    worst = max(scored["points"], key=lambda p: abs(p["err_model_pp"]))
    assert (worst["change"], worst["problem"]) == ("ab_stage=3,uniform_desc=0", "3072x8192x4096")
    assert worst["measured_pct"] > 10 > 2 > worst["projected_pct"]


def test_the_ring_latency_check_as_committed():
    """Ten single switches and three new combinations on three problems no run used (tests/data/changes_held_out),
    two predictors written in the same H100 call before any pair was timed: the stage count priced from the
    ring's own load latency (a timing-build stamp, no share fitted; the experiment, written as projections.json,
    renamed projections_ring_latency.json when it left the code) and from the first load's fitted share (the
    pricing now, written as projections_first_load.json, renamed projections.json; the sha256 file names them as
    they are now, the digests as written). The measured latency bought
    nothing (median 1.25 against 1.22; on the twelve stage-count points 1.84 against 1.49), so the stamp left
    the kernel; the pricing now, re-derived from the stored bases, gives the committed file's numbers."""
    import hashlib

    d = DATA / "changes_held_out"
    sums = dict(line.split()[1::-1] for line in (d / "projections.sha256").read_text().splitlines())
    for name in ("projections_ring_latency.json", "projections.json"):
        assert hashlib.sha256((d / name).read_bytes()).hexdigest() == sums[name]
    with tarfile.open(d / "measured.tar.xz") as tf:
        measured = json.load(tf.extractfile("run/measured.json"))
    scored = {
        name: C.score_run(json.loads((d / name).read_text()), measured)
        for name in ("projections_ring_latency.json", "projections.json", "projections_reprojected.json")
    }
    ring, now = scored["projections_ring_latency.json"]["summary"], scored["projections.json"]["summary"]
    assert ring["points"] == now["points"] == 39 and now["measured_ge_2pct"] == 24
    assert ring["model"]["median"] == pytest.approx(1.25, abs=0.01) and ring["model"]["max"] == pytest.approx(
        6.28, abs=0.01
    )
    assert now["model"]["median"] == pytest.approx(1.22, abs=0.01) and now["model"]["max"] == pytest.approx(
        6.59, abs=0.01
    )
    assert now["covered"] == 38 and sorted(now["sign_wrong"]) == [
        "elect_release=0 @ 6144x7168x2560",
        "peek=0 @ 4096x7168x3072",
        "peek=0 @ 7168x6144x1536",
    ]
    t = now["targets"]
    assert t["coverage_ge_80pct"] and t["beats_count_rule_off_binding"] and t["points_ge_30"]
    assert not t["median_le_1pp"] and not t["max_le_3pp"] and not t["sign_right_past_1pct"]
    # the two predictors differ only where the stage count changes
    pairs = zip(scored["projections_ring_latency.json"]["points"], scored["projections.json"]["points"])
    moved = {a["change"] for a, b in pairs if abs(a["projected_pct"] - b["projected_pct"]) > 0.1}
    assert moved and all(c.startswith("ab_stage") or c == "epilogue=direct" for c in moved)
    # re-derived from the stored bases with the pricing now and the SASS the GPU ran (counts_cu13.json): within
    # 0.4 pp of the committed file but for the stage counts, which the ring's K-block terms fitted since moved,
    # peek=0 on the 256-row tile, which the barrier probe's price moved, elect_release=0 on the 256-row tile,
    # whose 36 K-loop instructions a K block were the cu12 compiler's, and the SIMT epilogue, whose store's
    # share of its DRAM time was fitted since (on the 192-row tile the count per warp re-priced its Phase 1
    # too); the rest moved by the recount's base K-loop (three instructions a K block fewer from cu13) and the
    # count per warp
    re = {(p["change"], p["problem"]): p["projected_pct"] for p in scored["projections_reprojected.json"]["points"]}
    moved = {
        (p["change"], p["problem"])
        for p in scored["projections.json"]["points"]
        if abs(re[(p["change"], p["problem"])] - p["projected_pct"]) > 0.4
    }
    counts = json.loads((d / "counts.json").read_text())["problems"]
    stages = ("ab_stage=3", "ab_stage=2", "ab_stage=3,sfb_tma=0", "ab_stage=2,epi_split=0")
    fitted = {(c, shape) for c in stages for shape in counts} | {("peek=0", "4096x7168x3072")}
    phantom = {("elect_release=0", "4096x7168x3072")}
    epilogue = {("epilogue=direct", shape) for shape in counts}
    assert moved == fitted | phantom | epilogue
    assert re[("elect_release=0", "4096x7168x3072")] == pytest.approx(-0.10, abs=0.05)  # cu12's: +3.19


def test_the_held_out_misses_are_the_models_not_the_measurements():
    """The held-out pairs timed again in a second H100 call (measured_again.tar.xz, fresh bases and builds):
    the two measurements of a change agree within 0.34 pp (median) and 3 pp on every point, while the model
    misses by up to 6.6 pp in both, on the same points: what is left is the pricing, not noise."""
    d = DATA / "changes_held_out"
    runs = []
    for name in ("measured.tar.xz", "measured_again.tar.xz"):
        with tarfile.open(d / name) as tf:
            measured = json.load(tf.extractfile("run/measured.json"))
        runs.append(C.score_run(json.loads((d / "projections.json").read_text()), measured))
    first, again = ({(p["change"], p["problem"]): p for p in r["points"]} for r in runs)
    assert first.keys() == again.keys() and len(first) == 39
    retest = sorted(abs(again[k]["measured_pct"] - first[k]["measured_pct"]) for k in first)
    assert retest[len(retest) // 2] < 0.4 and retest[-1] < 3.0
    assert runs[1]["summary"]["model"]["median"] == pytest.approx(1.28, abs=0.01)
    # the misses past 3 pp repeat: the stage count on both tiles and the waited-on scale loads
    both = {k for k in first if abs(first[k]["err_model_pp"]) > 3.0 and abs(again[k]["err_model_pp"]) > 3.0}
    assert both == {
        ("ab_stage=2", "4096x7168x3072"),
        ("ab_stage=2,epi_split=0", "4096x7168x3072"),
        ("ab_stage=2,epi_split=0", "6144x7168x2560"),
        ("ab_stage=3", "7168x6144x1536"),
        ("sfa_tma=0", "7168x6144x1536"),
    }


def test_combinations_interact_beyond_the_sum_of_their_parts():
    """The same problems' single switches (tests/data/changes_combined_switches_parts, timed in a second call):
    the projection of a combination stays within 2.2 pp of the sum of its parts' projections, while the
    measured combination departs from the sum of its measured parts by up to 7.5 pp (sfa_tma=0 with
    uniform_desc=0 at K = 1536) -- the interactions the chain does not price."""
    comb = {(p["change"], p["problem"]): p for p in _stored_summary("changes_combined_switches")["points"]}
    parts = {(p["change"], p["problem"]): p for p in _stored_summary("changes_combined_switches_parts")["points"]}
    assert len(parts) == 24
    proj_gap, meas_gap = [], []
    for (change, problem), p in comb.items():
        singles = change.split(",")
        if not all((x, problem) in parts for x in singles):
            continue
        proj_gap.append(p["projected_pct"] - sum(parts[(x, problem)]["projected_pct"] for x in singles))
        meas_gap.append(p["measured_pct"] - sum(parts[(x, problem)]["measured_pct"] for x in singles))
    assert len(meas_gap) == 24
    assert max(map(abs, proj_gap)) < 2.2
    assert max(meas_gap) > 7.0 and min(meas_gap) < -4.0


def test_the_steps_script_projects_as_the_stored_run(tmp_path):
    """benchmarks/change_steps.py project (the CPU step between the two GPU calls) gives the stored
    run's committed projections from its stored base captures (one of its pairs, every problem)."""
    import shutil
    import subprocess
    import sys

    run_dir = DATA / "h100_changes_mechanisms"
    shutil.copy(run_dir / "bases.tar.xz", tmp_path / "bases.tar.xz")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "change_steps.py"
    r = subprocess.run(
        [sys.executable, str(script), "project", str(tmp_path), "--pairs", "sfb_tma=0"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    new = json.loads((tmp_path / "projections.json").read_text())
    stored = {(p["change"], p["problem"]): p for p in json.loads((run_dir / "projections.json").read_text())["points"]}
    assert len(new["points"]) == 3 and new["pairs"] == ["sfb_tma=0"]
    for p in new["points"]:
        assert p["projected_pct"] == pytest.approx(stored[(p["change"], p["problem"])]["projected_pct"], abs=0.3)
    # without a GPU the GPU steps say so in one line (on a GPU host they would capture: not here)
    if shutil.which("nvidia-smi") is None:
        r = subprocess.run(
            [sys.executable, str(script), "bases", "--mnkl", "256,256,256", str(tmp_path / "b")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr


def test_projections_from_committed_counts_match_the_compiled_ones(tmp_path):
    """The one-call protocol: the SASS half counted on the CPU (``count_pairs``, written as JSON and read
    back) gives the same projections as compiling both builds, from a stored run's base captures; a base
    the counts do not hold is one error naming it."""
    import tarfile

    from bsprof.errors import BsprofError
    from bsprof.profile import validate_changes as VC

    with tarfile.open(DATA / "h100_changes_mechanisms" / "bases.tar.xz") as tf:
        tf.extractall(tmp_path, filter="data")
    bases = json.loads((tmp_path / "bases" / "bases.json").read_text())
    key = "4096x8192x2048"
    problems = [tuple(bases["problems"][key]["mnkl"])]
    pairs = ("sfb_tma=0", "uniform_desc=0,ring_unroll=0")
    counts = json.loads(json.dumps(VC.count_pairs(problems, pairs)))
    assert set(counts["problems"][key]["b"]) == set(pairs)
    got = VC.project_pairs(bases, tmp_path / "bases", problems, pairs, counts=counts)
    want = VC.project_pairs(bases, tmp_path / "bases", problems, pairs)
    assert [p["projected_pct"] for p in got["points"]] == [p["projected_pct"] for p in want["points"]]
    assert [p["phases"] for p in got["points"]] == [p["phases"] for p in want["points"]]
    counts["problems"][key]["base"] = "optimized:tile_m=128"
    with pytest.raises(BsprofError, match=key):
        VC.project_pairs(bases, tmp_path / "bases", problems, pairs, counts=counts)


def test_the_checked_interval_is_a_conformal_quantile_of_held_out_misses():
    """From one stored check's scored points: the quantile is the ceil((n + 1) x 0.9)-th smallest score
    (|error| over 1 pp + 0.1 x the projected %), a kind with fewer than eight held-out points has no say, a
    change's half-width is its widest kind's, and a point whose own check is left out is scored against
    quantiles that never saw it."""
    import math

    from bsprof.analyzers.model import change_record as R

    run = _record_script().score_check(DATA / "changes_switches_tall_wide")
    pts = run["points"]
    q = R.checked_quantiles(pts)
    held = [p for p in pts if p["held_out"]]
    scores = sorted(abs(p["err_model_pp"]) / (1 + 0.1 * abs(p["projected_pct"])) for p in held)
    assert q["all"] == pytest.approx(scores[math.ceil((len(scores) + 1) * 0.9) - 1], abs=1e-4)
    for kind in R.KIND_TEXT:
        n = sum(kind in p["kinds"] for p in held)
        assert (kind in q["kinds"]) == (n >= 8 and math.ceil((n + 1) * 0.9) <= n), kind
    two = [k for k in q["kinds"]][:2]
    assert R.checked_halfwidth(two, 10.0, q) == pytest.approx(2.0 * max(q["kinds"][k] for k in two))
    assert R.checked_halfwidth(["spills"], 0.0, q) == pytest.approx(q["all"])
    assert R.checked_halfwidth(two, 0.0, None) is None
    # left out: a check scored against only the others' points; with one check there are no others
    lo = R.left_out_coverage([run])
    assert lo["points"] == 0 and lo["runs"] == {run["run"]: [0, len(pts)]}


def test_measure_pairs_scores_the_repeats_after_the_warm_up_round(monkeypatch):
    """The timed rounds after ``WARMUP_REPEATS`` untimed-for-scoring ones: the warm-up's walls are kept
    apart (``warmup_walls_us``) and every scored list holds ``repeats`` blocks, so a slow first block after
    the builds load cannot lean the paired ratios."""
    from bsprof.profile import validate

    asked = {}

    class Prepared:
        def __init__(self, spec):
            self.spec = spec

    class FakeTarget:
        def __init__(self, spec):
            self.spec = spec

        def prepare(self, timing=False):
            return Prepared(self.spec)

    monkeypatch.setattr(VC.Target, "parse", staticmethod(lambda family, spec, mnkl: FakeTarget(spec)))

    def walls(launchers, keys, repeats, *a, **k):
        asked["repeats"] = repeats
        # the base's first block 8% slow, as repeat 0 of changes_stage_ring ran
        w = {
            key: [110.0 if (key == "base" and r == 0) else 100.0 + i for r in range(repeats)]
            for i, key in enumerate(keys)
        }
        reads = {key: [{"repeat": r} for r in range(repeats)] for key in keys}
        return w, reads, "graph"

    monkeypatch.setattr(validate, "sustained_walls", walls)
    out = VC.measure_pairs([(4096, 4096, 4096, 1)], ["peek=0"], repeats=5)["4096x4096x4096"]
    assert asked["repeats"] == 5 + VC.WARMUP_REPEATS
    assert out["warmup_walls_us"]["base"] == [110.0] and out["walls_us"]["base"] == [100.0] * 5
    assert [r["repeat"] for r in out["reads"]["peek=0"]] == list(range(VC.WARMUP_REPEATS, 5 + VC.WARMUP_REPEATS))


def test_the_check_counted_from_the_gpus_compiler():
    """tests/data/changes_switches_cu13: counts made with the compiler the GPU runs (their "compiler" field, the
    bases' the same), elect_release=0 priced within 0.1 pp of nothing on every problem and measured within
    1.2 pp of it; what it misses past 3 pp are combinations priced as the sum of their parts, which measured
    4.0-4.3 pp above that sum (sfa_tma=0 with elect_release=0); the first repeat measured with the others."""
    d = DATA / "changes_switches_cu13"
    counts = json.loads((d / "counts.json").read_text())
    with tarfile.open(d / "bases.tar.xz") as tf:
        bases = json.load(tf.extractfile("bases/bases.json"))
    assert counts["compiler"] == bases["compiler"] == "nvidia-cutlass-dsl 4.8.1 cu13"
    assert {tuple(p["tile"]) for p in counts["problems"].values()} == {(256, 128), (192, 128), (256, 112)}
    scored = _stored_summary("changes_switches_cu13")
    pts = {(p["change"], p["problem"]): p for p in scored["points"]}
    er = [p for (c, _), p in pts.items() if c == "elect_release=0"]
    assert len(er) == 3 and all(abs(p["projected_pct"]) < 0.15 and abs(p["measured_pct"]) < 1.2 for p in er)
    past3 = {k for k, p in pts.items() if abs(p["err_model_pp"]) > 3.0}
    assert all("," in c for c, _ in past3) and len(past3) == 3
    for problem in ("4608x10240x2560", "7168x5120x2560"):
        both = pts[("sfa_tma=0,elect_release=0", problem)]["measured_pct"]
        parts = pts[("sfa_tma=0", problem)]["measured_pct"] + pts[("elect_release=0", problem)]["measured_pct"]
        assert 3.5 < both - parts < 4.5
    assert not scored["summary"]["first_repeat"]["off"]


def test_the_128_row_ring_terms_held_out_on_two_new_problems(monkeypatch):
    """The ring terms of a 128-row tile, fitted on the two 128-row problems of changes_switches_cu13_tiles and
    changes_store_share (priced with the 256-row terms there: two stages +9% where they measured +23% and +28%),
    then committed with the projections of two new 128-row problems before those were timed
    (tests/data/changes_rows_128, H100): every stage count within 3.5 pp. The same counts and bases priced
    with the 256-row terms miss those two stages by more than 10 pp, low."""
    d = DATA / "changes_rows_128"
    counts = json.loads((d / "counts.json").read_text())
    assert {tuple(p["tile"]) for p in counts["problems"].values()} == {(128, 160), (128, 192)}
    scored = {(p["change"], p["problem"]): p for p in _stored_summary("changes_rows_128")["points"]}
    stages = {k: p for k, p in scored.items() if k[0].startswith("ab_stage")}
    assert len(stages) == 4 and all(abs(p["err_model_pp"]) < 3.5 for p in stages.values())
    assert all(p["measured_pct"] > 20 for (c, _), p in stages.items() if c == "ab_stage=2")
    from bsprof.profile import validate_changes as VC

    monkeypatch.setitem(C.RING_NEED_BY_TILE_ROWS, 128, C.RING_NEED_BY_TILE_ROWS[256])
    measured, _ = C.stored_measured(d)
    doc = VC.project_archive(d / "bases.tar.xz", ("ab_stage=2",), counts=counts)
    old = C.score_run(doc, measured)["points"]
    assert len(old) == 2 and all(p["err_model_pp"] < -10 for p in old)


def test_a_run_timed_after_a_warm_up_round_measures_its_first_repeat_with_the_others():
    """changes_stage_ring timed again with the warm-up round (measured_again.tar.xz): its first repeat within
    0.1 pp of the others where the first timing's was 4.0 pp off, each change within 3.2 pp of the first
    timing (0.82 in the median), the committed projections 1.40 / 6.24 pp against it."""
    d = DATA / "changes_stage_ring"
    proj = json.loads((d / "projections.json").read_text())
    runs = []
    for name in ("measured.tar.xz", "measured_again.tar.xz"):
        with tarfile.open(d / name) as tf:
            runs.append(json.load(tf.extractfile("run/measured.json")))
    first, again = (C.score_run(proj, m) for m in runs)
    assert first["summary"]["first_repeat"]["off"] and not again["summary"]["first_repeat"]["off"]
    assert abs(again["summary"]["first_repeat"]["median_pp"]) < 0.1
    assert all(len(w) == 1 for p in runs[1]["problems"].values() for w in p["warmup_walls_us"].values())
    a = {(p["change"], p["problem"]): p["measured_pct"] for p in first["points"]}
    b = {(p["change"], p["problem"]): p["measured_pct"] for p in again["points"]}
    diffs = sorted(abs(b[k] - a[k]) for k in a)
    assert diffs[len(diffs) // 2] < 1.0 and diffs[-1] < 3.2
    assert again["summary"]["model"]["median"] == pytest.approx(1.40, abs=0.01)
    assert again["summary"]["model"]["max"] == pytest.approx(6.24, abs=0.01)


def test_a_waited_on_load_is_priced_by_the_loads_a_k_block_exposes(monkeypatch):
    """The control bits count the loads waited on before the next MMA: the A scales by LDG expose one a K block on
    the 192- and 128-row tiles and two on the 256-row tile (more with the B scales by LDG beside them). The share
    goes by that count (LOADWAIT_BY_EXPOSED, fitted on the stored load points: in-sample here); one share for
    every count priced the 256-row tile's loads low and the others high."""
    assert C.loadwait_shares(None) == (C.LOADWAIT_SHARE, 0)
    one, two, three = (C.loadwait_shares(n) for n in (1.0, 2.0, 3.0))
    assert one[1] == 1 and two[1] == 2 and three[1] == 3
    assert one[0][1] < C.LOADWAIT_SHARE[1] < two[0][1] == three[0][1] and three[0][2] == pytest.approx(1.5 * two[0][2])
    runs = ("changes_switches_short_m", "changes_scale_loads", "changes_switches_192_rows")

    def sfa_errors() -> dict:
        out = {}
        for run in runs:
            d = DATA / run
            counts = _record_script().merged_counts(d)
            pairs = tuple(p for p in counts["pairs"] if "sfa_tma=0" in p)
            doc = VC.project_archive(d / "bases.tar.xz", pairs, counts=counts)
            measured, _ = C.stored_measured(d)
            for p in C.score_run(doc, measured)["points"]:
                tile = counts["problems"][p["problem"]]["tile"][0]
                out[(run, p["change"], p["problem"])] = (tile, p["err_model_pp"])
        return out

    now = sfa_errors()
    monkeypatch.setattr(C, "LOADWAIT_BY_EXPOSED", {1: 1.0, 2: 1.0})
    one_share = sfa_errors()
    assert len(now) >= 10 and set(now) == set(one_share)
    # one share: the one-load tiles priced high and the two-load tile low, on average
    high = [e for t, e in one_share.values() if t != 256]
    low = [e for t, e in one_share.values() if t == 256]
    assert sum(high) / len(high) > 1 and sum(low) / len(low) < -1
    assert sum(abs(e) for _, e in now.values()) < sum(abs(e) for _, e in one_share.values())


def test_the_loads_a_k_block_exposes_held_out(monkeypatch):
    """tests/data/changes_loads_exposed (H100, three new problems, one per tile; the price committed before the
    call): the nine points that add scale loads within 3.4 pp and inside their intervals. One share for every
    count of exposed loads, the rule before, prices the same nine worse: the 256-row tile's two-load K blocks
    low, the others high."""
    d = DATA / "changes_loads_exposed"
    counts = json.loads((d / "counts.json").read_text())
    pairs = tuple(p for p in counts["pairs"] if "sfa_tma=0" in p or "sfb_tma=0" in p)
    measured, _ = C.stored_measured(d)

    def scored() -> dict:
        doc = VC.project_archive(d / "bases.tar.xz", pairs, counts=counts)
        return {(p["change"], p["problem"]): p for p in C.score_run(doc, measured)["points"]}

    now = scored()
    committed = {(p["change"], p["problem"]): p for p in _stored_summary("changes_loads_exposed")["points"]}
    assert len(now) == 9 and all(now[k]["projected_pct"] == pytest.approx(committed[k]["projected_pct"]) for k in now)
    assert max(abs(p["err_model_pp"]) for p in now.values()) < 3.4 and all(p["covered"] for p in now.values())
    monkeypatch.setattr(C, "LOADWAIT_BY_EXPOSED", {1: 1.0, 2: 1.0})
    one_share = scored()
    wide = [k for k in now if counts["problems"][k[1]]["tile"][0] == 256 and k[0] != "sfb_tma=0"]
    assert len(wide) == 2 and all(one_share[k]["err_model_pp"] < now[k]["err_model_pp"] < 0 for k in wide)

    def total(points: dict) -> float:
        return sum(abs(p["err_model_pp"]) for p in points.values())

    assert total(now) < total(one_share) - 2 and max(abs(p["err_model_pp"]) for p in one_share.values()) > 3.8


def test_a_build_with_the_whole_k_in_one_pass_counts_its_phases_as_a_looping_build_does():
    """At K = 512 on the 192x128 tile the compiler unrolls the ring's four K blocks into one pass and leaves no
    K-loop: the loop holding the MMAs is the tile loop. Counted as a K-loop, the tile start and the epilogue
    were K-loop instructions (0 in Phase 1 against the looping build's 277 a tile), and `ring_unroll=0` priced
    +93% where it measured +2.9 (tests/data/changes_deepgemm_shapes). Told apart inside the tile loop (its
    MMAs' span and the line info), both builds count a tile start and an epilogue of the same size."""
    pytest.importorskip("cutlass")
    from bsprof.analyzers.sass import analyze_cubin

    mnkl, base = (4096, 32768, 512, 1), "optimized:tile_m=192,tile_n=128,cluster_m=1,cluster_n=2"
    count = VC._problem_count(mnkl, 192, 128)
    cubin, _ = VC.bundled_cubin(base, mnkl)
    fa = analyze_cubin(cubin)[0]
    assert fa.kloop.depth == 1 and C._whole_k_in_one_pass(fa, set(fa.kloop.instructions))
    a = C.count_build(fa, base, **count)
    b = VC._counted(base + ",ring_unroll=0", mnkl, count)
    assert a.kblocks_per_pass == 4 and b.kblocks_per_pass == 1
    for ph in ("tma0", "phase1"):
        assert b.per_tile[ph] > 40 and 0.5 < a.per_tile[ph] / b.per_tile[ph] < 1.2, ph
    # the same tile with K = 2048 loops over its K blocks: nothing changes there
    cubin, _ = VC.bundled_cubin(base, (4096, 32768, 2048, 1))
    fa = analyze_cubin(cubin)[0]
    assert fa.kloop.depth == 2 and not C._whole_k_in_one_pass(fa, set(fa.kloop.instructions))


def test_a_stage_count_where_the_ring_holds_a_tiles_whole_k_names_the_refill():
    """4096x32768x512 (4 K blocks a tile, 4 stages): three stages measured +23.9%, two +32.2%. The priced ring
    is a K-loop's steady state; the chain names what it does not price (the next tile's K blocks loaded under
    this tile's epilogue) and widens the interval by the base's first load a tile, which holds both. Re-priced
    from the builds counted again with the counting now (counts_recounted.json)."""
    d = DATA / "changes_deepgemm_shapes"
    counts = _record_script().committed_counts(d)
    doc = VC.project_archive(d / "bases.tar.xz", ("ab_stage=3", "ab_stage=2", "ring_unroll=0"), counts=counts)
    measured, _ = C.stored_measured(d)
    by = {(p["change"], p["problem"]): p for p in C.score_run(doc, measured)["points"]}
    raw = {(p["change"], p["problem"]): p for p in doc["points"]}
    for sw in ("ab_stage=3", "ab_stage=2"):
        short, long_k = by[(sw, "4096x32768x512")], by[(sw, "4096x7168x16384")]
        assert any("whole K (4 K blocks" in u for u in raw[(sw, "4096x32768x512")]["unpriced"])
        assert short["covered"] and short["hi_pct"] > short["measured_pct"] > short["projected_pct"]
        assert not any("whole K" in u for u in raw[(sw, "4096x7168x16384")]["unpriced"])
        assert abs(long_k["err_model_pp"]) < 1.7  # K = 16384: 1.14 and 1.63 pp as committed
    # the one-pass build's phases counted as the looping build's: ring_unroll=0 within 6 pp, not 90
    assert abs(by[("ring_unroll=0", "4096x32768x512")]["err_model_pp"]) < 6
