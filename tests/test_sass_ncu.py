"""SourceCounters from the real H100 reports: per-PC SASS, executed counts, stall samples."""

from __future__ import annotations

import pytest

from bsprof.analyzers.sass import analyze_ncu_report
from bsprof.analyzers.sass.budget import mma_detail, region_rows, stalls_by_category
from bsprof.analyzers.sass.ncu_source import extract, read_source_counters
from bsprof.errors import BsprofError


@pytest.fixture(scope="module")
def cublas(data_dir):
    (fa,) = analyze_ncu_report(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    return fa


def test_source_counters_extraction(data_dir):
    (sc,) = read_source_counters(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    assert sc.name.startswith("nvjet_sm90_qqtst")
    assert sc.function.arch == "sm_90"
    n = len(sc.function.instructions)
    assert n == len(sc.executed) == len(sc.stalls) == 1487
    pcs = [i.pc for i in sc.function.instructions]
    assert pcs == sorted(pcs) and all(b - a == 16 for a, b in zip(pcs, pcs[1:]))
    assert sc.function.instructions[0].opcode == "LDC"
    assert "barrier" in sc.reasons and "long_scoreboard" in sc.reasons
    assert sc.launch_info["launch__grid_size"] == 132
    assert sc.function.pc_base > 0 and pcs[0] == 0  # offsets from the function start, like a cubin


def test_qgmma_kloops_hold_every_executed_mma(cublas):
    fa = cublas
    assert fa.unclassified == []
    assert fa.count("QGMMA") == 8
    # 4096^3 FP8, 128x128 tiles: 1024 tiles x 32 k-tiles x 4 QGMMA x (2 consumer warpgroups x 4 warps)
    mma_idx = [i.index for i in fa.instructions if i.category == "mma"]
    assert sum(fa.executed[i] for i in mma_idx) == 1024 * 32 * 4 * 8
    ks = fa.kloops
    # cuBLAS enters its main K-loop in the middle (software pipelining): the dead block after the
    # loop must not count as an entry, or the loop vanishes from the dominator tree
    assert len(ks) == 2
    in_kloops = {i for lp in ks for i in lp.own_instructions if fa.instructions[i].category == "mma"}
    assert in_kloops == set(mma_idx)
    hot = max(ks, key=lambda lp: fa.executed[lp.own_instructions[0]])
    assert hot.own_mma == 4 and all(
        fa.executed[i] == 219072 for i in hot.own_instructions if fa.instructions[i].category == "mma"
    )
    # the tile loop encloses the K-loops; grid 132 = SM count as well
    tile = [lp for lp in fa.loops if lp.depth == 1 and lp.mma == 8 and not lp.is_kloop]
    assert len(tile) == 1
    assert fa.features["persistent_tile_loop"].present
    assert fa.features["tma_multicast"].present
    assert fa.features["tma_store_epilogue"].present


def test_budget_per_tile_and_stalls(cublas):
    rows = region_rows(cublas, tiles=1024)
    total = rows[0]
    assert total["executed"] == sum(cublas.executed)
    assert total["executed_per_tile"] == pytest.approx(total["executed"] / 1024, abs=0.1)
    assert "QGMMA" in total["per_tile_breakdown"]
    assert total["stall_samples"] == sum(sum(s.values()) for s in cublas.stalls) > 0
    ks = [r for r in rows if r["is_kloop"]]
    assert len(ks) == 2 and all(0 < k["mma_executed"] and k["executed"] < total["executed"] for k in ks)
    cats = stalls_by_category(cublas)
    assert sum(sum(v.values()) for v in cats.values()) == total["stall_samples"]


def test_mma_detail_with_stalls(cublas):
    ds = mma_detail(cublas)["kloops"]
    assert len(ds) == 2
    d = ds[0]
    assert d["mma"] == 4
    # the outer K-loop's stream skips the nested K-loop (its own blocks only)
    assert d["instructions"] < d["loop_instructions"]
    assert sum(g["between"] for g in d["gaps"]) == d["instructions"] - 4
    assert d["stalls_between"] and d["stalls_on_mma"]
    assert all("executed" in x for g in d["gaps"] for x in g["stream"])


def test_tiny_report_edge_cases(data_dir):
    (fa,) = analyze_ncu_report(data_dir / "h100_cute_tiny.ncu-rep.xz")
    assert len(fa.instructions) == 16
    assert fa.loops == [] and fa.kloops == [] and fa.mma_count == 0
    assert fa.executed == [1] * 16
    assert fa.features["persistent_tile_loop"].present is None
    with pytest.raises(BsprofError, match="no loop issues MMAs"):
        mma_detail(fa)


class _NoCounters:
    """An action as ncu_report exposes it when the report was taken without SourceCounters."""

    def name(self):
        return "k"

    def metric_by_name(self, name):
        return None

    def metric_names(self):
        return []


def test_missing_source_counters_names_the_ncu_option():
    with pytest.raises(BsprofError, match=r"--section SourceCounters.*--import-source yes"):
        extract(_NoCounters(), 0, "r.ncu-rep")


def test_kernel_regex_matching_nothing_lists_launches(data_dir):
    with pytest.raises(BsprofError, match="matches none.*nvjet_sm90"):
        read_source_counters(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", kernel="^nope$")


def test_counts_attach_to_a_listing_by_pc_offset(data_dir):
    """`bsprof sass CUBIN --ncu REPORT`: the report's PCs are absolute, the cubin's are offsets."""
    from bsprof.analyzers.sass import analyze_sass_text
    from bsprof.analyzers.sass.budget import attach_counts

    (sc,) = read_source_counters(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    base = sc.function.instructions[0].pc
    listing = "\n".join(f"/*{i.pc - base:04x}*/ {i.text} ;" for i in sc.function.instructions)
    (fa,) = analyze_sass_text(listing, arch="sm_90a")
    attach_counts(fa, sc)
    assert fa.executed == sc.executed
    assert fa.stalls == sc.stalls
    bad = listing.replace("QGMMA", "HGMMA", 1)
    (fb,) = analyze_sass_text(bad, arch="sm_90a")
    with pytest.raises(BsprofError, match="does not match"):
        attach_counts(fb, sc)


def test_steady_state_of_the_hot_kloop(cublas):
    """cuBLAS enters its K-loop at the top and in the middle: no natural loop, an irreducible cycle.
    Found as one, the K-loop is the steady-state body itself (blocks executed at least half as often
    as the MMAs), not the 924-instruction natural loop that also holds the tile loop's way back."""
    hot = max(cublas.kloops, key=lambda lp: cublas.executed[lp.own_instructions[0]])
    assert hot is cublas.kloop and hot.irreducible
    ss = cublas.steady_state(hot)
    assert len(hot.own_instructions) - 1 <= ss["hot_instructions"] == 104
    assert 4 <= ss["hot_categories"]["mma"] == hot.own_mma
    # FP8 promotion into FP32 in the loop: the hot path is mostly FADD/FFMA
    assert ss["hot_categories"]["float"] > ss["hot_instructions"] / 2
    assert 4 < ss["executed_per_mma"] < 60


def test_hot_instructions_rank_the_stall_sites(data_dir):
    # the shipped report of our optimized kernel: its hottest site is the scale
    # product waiting on its load (docs/optimizations.md), then the four wave waits
    from bsprof.analyzers.sass.budget import hot_instructions

    (fa,) = analyze_ncu_report(data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz")
    hot = hot_instructions(fa, 5)
    assert [h["samples"] for h in hot] == sorted((h["samples"] for h in hot), reverse=True)
    by_pc = {ins.pc: i for i, ins in enumerate(fa.instructions)}
    for h in hot:
        assert h["samples"] == sum(fa.stalls[by_pc[h["pc"]]].values())
        assert h["kloop"] and h["role"] == "ConsumerWarpgroups/kloop"
    assert hot[0]["opcode"] == "FMUL" and next(iter(hot[0]["reasons"])) == "long_scoreboard"
    assert [h["opcode"] for h in hot[1:]] == ["WARPGROUP.DEPBAR.LE"] * 4
    total = sum(sum(s.values()) for s in fa.stalls)
    assert abs(hot[0]["share"] - hot[0]["samples"] / total) < 1e-12


def test_roles_come_from_the_source_the_report_embeds(data_dir, monkeypatch):
    # the report carries the kernel source its line numbers index (ncu --import-source); the file
    # at that path on this machine has changed since (or is absent elsewhere), and must not matter
    import bsprof.analyzers.sass.roles as roles

    (fa,) = analyze_ncu_report(data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz")
    assert fa.roles_source == "scope" and "ConsumerWarpgroups/kloop" in fa.roles
    monkeypatch.setattr(roles, "linemap_for", lambda path: None)  # no source file readable here
    (fb,) = analyze_ncu_report(data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz")
    assert fb.roles == fa.roles and fb.roles_source == "scope"


def test_hot_needs_stall_samples_and_shows_each_side(data_dir, tmp_path):
    import json

    from click.testing import CliRunner

    from bsprof.cli import cli

    run = CliRunner().invoke
    cubin = data_dir / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.cubin.xz"
    r = run(cli, ["sass", str(cubin), "--hot", "3"])
    assert r.exit_code == 2 and "--hot needs an .ncu-rep with SourceCounters" in r.output
    a, b = data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz"
    r = run(cli, ["sass", str(a), str(b), "--hot", "3"])
    assert r.exit_code == 0, r.output
    assert "A hottest instructions" in r.output and "B hottest instructions" in r.output
    r = run(cli, ["sass", str(b), "--hot", "3", "--json"])
    (fn,) = json.loads(r.output)["functions"]
    assert len(fn["hot"]) == 3 and fn["hot"][0]["opcode"] == "FMUL"
