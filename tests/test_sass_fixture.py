"""The real Blackwell fixture (CuTe DSL persistent dense GEMM, 2-CTA, sm_100a): the reference numbers
of /work/shared/fixtures/sass/README.md, from the cubin and from its listing."""

from __future__ import annotations

import pytest
from conftest import unxz_text

from bsprof.analyzers.sass import analyze_cubin, analyze_sass_text, features
from bsprof.analyzers.sass.budget import mma_detail, region_rows
from bsprof.analyzers.sass.loops import dominators

FIXTURE = "sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a"  # .cubin.xz and .sass.xz


@pytest.fixture(scope="module")
def fa(data_dir):
    (fa,) = analyze_cubin(data_dir / f"{FIXTURE}.cubin.xz")
    return fa


def test_reference_numbers(fa):
    assert fa.arch == "sm_100a"
    assert len(fa.instructions) == 816
    assert fa.unclassified == []
    (k,) = fa.kloops
    assert k.size == 87
    assert fa.count("UTCHMMA.2CTA", k.instructions) == 4
    assert fa.count("SYNCS.", k.instructions) == 7
    assert fa.count("UTCBAR.2CTA.MULTICAST", k.instructions) == 2
    assert fa.count("R2UR", k.instructions) == 0
    assert k.mma == 4 and fa.mma_count == 4
    # the API the kernel tests use: prefix counts, regex counts, has()
    assert fa.count(r"\.2CTA") == fa.count("UTCHMMA.2CTA") + fa.count("UTCBAR.2CTA") + fa.count(
        "UTMALDG.3D.2CTA"
    ) + fa.count("UTCATOMSWS.2CTA")
    assert fa.has("UTMASTG") and not fa.has("UTCCP") and not fa.has("LDL")
    assert fa.opcode_counts()["UTCHMMA.2CTA"] == 4


def test_listing_gives_the_same_analysis(fa, data_dir):
    (fb,) = analyze_sass_text(unxz_text(data_dir / f"{FIXTURE}.sass.xz"))
    assert fb.categories() == fa.categories()
    assert [(lp.size, lp.mma, lp.depth) for lp in fb.loops] == [(lp.size, lp.mma, lp.depth) for lp in fa.loops]


def test_dominators_are_consistent(fa):
    idom = dominators(fa.function, fa.cfg)
    assert idom[0] == -1
    # every loop header dominates every block of its body
    for lp in fa.loops:
        for b in lp.blocks:
            x = b
            while x not in (-1, lp.header):
                x = idom[x]
            assert x == lp.header


def test_features_with_evidence(fa):
    f = fa.features
    assert f["mma_2cta"].present and "UTCHMMA.2CTA" in f["mma_2cta"].evidence[0]
    assert f["tma_load"].present and f["tma_store_epilogue"].present
    assert not f["simt_global_stores"].present
    assert not f["register_spills"].present
    assert not f["tma_multicast"].present  # cluster 2x1 with 2-CTA MMA: the pair shares, no multicast
    assert not f["block_scaled_mma"].present
    assert f["multi_stage_pipeline"].present
    # the K-loop's smem stage index wraps at 6 (A/B ring) and the accumulator's at 2
    assert f["multi_stage_pipeline"].value == 6
    assert (
        "wraps at 6" in f["multi_stage_pipeline"].evidence[0] and "wraps at 2" in f["multi_stage_pipeline"].evidence[1]
    )
    assert f["persistent_tile_loop"].present
    # evidence carries the source line from the line info
    assert "[bdg.py:" in f["mma_2cta"].evidence[0]
    assert features(fa.source)[fa.name] == fa.feature_flags()


def test_region_rows_and_mma_detail(fa):
    rows = region_rows(fa)
    assert rows[0]["region"] == "function" and rows[0]["instructions"] == 816
    k = [r for r in rows if r["is_kloop"]]
    assert len(k) == 1 and k[0]["instructions"] == 87 and k[0]["overhead_per_mma"] == pytest.approx(83 / 4, abs=0.01)
    d = mma_detail(fa)["kloops"][0]
    assert d["mma"] == 4 and d["mean_between"] == pytest.approx(83 / 4, abs=0.01)
    assert d["counts"]["UTCBAR"] == 2 and d["counts"]["SYNCS"] == 7 and d["counts"]["R2UR"] == 0
    assert sum(g["between"] for g in d["gaps"]) == 87 - 4


def test_no_line_source_falls_back_to_loops(fa):
    # the kernel source (/tmp/cex/bdg.py) is not on this machine: regions are loops, and we say so
    assert fa.roles_source == "loops"
    assert any("regions are loops" in n for n in fa.notes)
    assert fa.roles[fa.kloops[0].instructions[0]].endswith("(K-loop) d1")


def test_json_contract(fa):
    d = fa.to_dict()
    for key in ("name", "arch", "instructions", "categories", "loops", "features", "unclassified"):
        assert key in d
    for lp in d["loops"]:
        for key in ("depth", "instructions", "mma", "categories", "is_kloop"):
            assert key in lp
    assert sum(d["categories"].values()) == 816
    assert all(isinstance(v, bool) for v in d["features"].values())
