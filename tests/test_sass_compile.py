"""Cubins compiled here on the CPU with CuTe DSL: our own small MMA loops for sm_90a (QGMMA) and
sm_100a (tcgen05 UTCHMMA), and the bundled FP8-blockwise kernel when it is there."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from bsprof.analyzers.sass import analyze_cubin
from bsprof.analyzers.sass.budget import mma_detail, region_rows

TESTS = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernels_on_path():
    # compile_to_cubin imports the entry in a fresh interpreter: it must find tests/sass_kernels
    old_env, old_path = os.environ.get("PYTHONPATH"), list(sys.path)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), old_env) if p)
    sys.path.insert(0, str(TESTS))
    yield
    sys.path[:] = old_path
    if old_env is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old_env


def _build(tmp_path_factory, fn: str, arch: str, **kwargs) -> Path:
    pytest.importorskip("cutlass")
    from bsprof.kernels.build import compile_to_cubin

    out = tmp_path_factory.mktemp("sass") / f"{fn}.{arch}.cubin"
    return compile_to_cubin(f"sass_kernels.mma_loops:{fn}", kwargs, arch, out)


@pytest.fixture(scope="module")
def sm90(kernels_on_path, tmp_path_factory):
    (fa,) = analyze_cubin(_build(tmp_path_factory, "build_sm90", "sm_90a"))
    return fa


@pytest.fixture(scope="module")
def sm100(kernels_on_path, tmp_path_factory):
    (fa,) = analyze_cubin(_build(tmp_path_factory, "build_sm100", "sm_100a"))
    return fa


def test_sm90_qgmma_kloop(sm90):
    assert sm90.arch.startswith("sm_90")
    assert sm90.unclassified == []
    (k,) = sm90.kloops
    # BLOCK_K 128 / 32 per FP8 wgmma = 4 QGMMA per iteration of the runtime-count loop
    assert k.mma == 4 and sm90.count("QGMMA", k.instructions) == 4
    assert sm90.count("WARPGROUP.ARRIVE", k.instructions) >= 1
    assert sm90.features["simt_global_stores"].present and not sm90.features["tma_store_epilogue"].present
    assert not sm90.features["register_spills"].present


def test_sm90_roles_from_scope_blocks(sm90):
    assert sm90.roles_source == "scope"
    (k,) = sm90.kloops
    mma_roles = Counter(sm90.roles[i] for i in k.instructions if sm90.instructions[i].category == "mma")
    # the compiler may hang one MMA on a neighbouring line; most sit in the Scope("mainloop") block
    assert mma_roles.most_common(1)[0][0] == "mainloop"
    roles = {r["region"]: r for r in region_rows(sm90, by="roles")}
    assert "epilogue" in roles and roles["epilogue"]["categories"].get("global", 0) > 0


def test_sm100_tcgen05_kloops(sm100):
    assert sm100.arch == "sm_100a"
    assert sm100.unclassified == []
    ks = sm100.kloops
    # the runtime loop is unrolled by the compiler: a main K-loop and a remainder loop, both MMA loops
    assert len(ks) >= 1 and all(lp.mma > 0 for lp in ks)
    assert sum(lp.mma for lp in ks) == sm100.count("UTCHMMA")
    assert all(sm100.count("UTCHMMA", lp.instructions) == lp.mma for lp in ks)
    assert sm100.count("LDTM") >= 1 and sm100.categories()["tmem"] >= 1
    assert not sm100.features["mma_2cta"].present and not sm100.features["tma_load"].present
    d = mma_detail(sm100)
    assert len(d["kloops"]) == len(ks)


def test_sm100_roles(sm100):
    assert sm100.roles_source == "scope"
    mma_roles = {sm100.roles[i.index] for i in sm100.instructions if i.category == "mma"}
    assert mma_roles == {"mma"}
    assert any(sm100.roles[i.index] == "epilogue" for i in sm100.instructions if i.base == "LDTM")


@pytest.mark.parametrize("hint", [False, True])
def test_sm100_tma_pipeline_and_cache_hint(kernels_on_path, tmp_path_factory, hint):
    (fa,) = analyze_cubin(_build(tmp_path_factory, "build_sm100_tma", "sm_100a", cache_hint=hint, stages=3))
    (k,) = fa.kloops
    assert fa.count("UTMALDG", k.instructions) >= 2 and k.own_mma == fa.count("UTCHMMA", k.instructions) > 0
    # the TMA L2 policy travels in desc[URn]; without one the operand is desc[URZ]
    assert fa.features["tma_cache_hint"].present is hint
    assert all(("desc[URZ]" in e) is (not hint) for e in fa.features["tma_load"].evidence)
    # the smem ring of 3 stages: the K-loop's stage index wraps at 3
    ms = fa.features["multi_stage_pipeline"]
    assert ms.present and ms.value == 3
    assert fa.roles_source == "scope"
    assert {fa.roles[i] for i in k.instructions if fa.instructions[i].base == "UTMALDG"} == {"mainloop"}


def test_bundled_fp8_blockwise(tmp_path):
    pytest.importorskip("cutlass")
    fam = pytest.importorskip("bsprof.kernels.fp8_blockwise")
    if not hasattr(fam, "compile_cubin"):
        pytest.skip("bundled fp8_blockwise kernel not in this build")
    (fa,) = analyze_cubin(fam.compile_cubin("optimized", tmp_path))
    assert fa.count("QGMMA") > 0 and fa.kloops
    assert all(lp.mma > 0 for lp in fa.kloops)
    assert fa.features["tma_load"].present and not fa.features["register_spills"].present
    assert fa.roles_source in ("scope", "warp-if", "function")
    _bundled_kloop_in_tile_loop(fa)


def _bundled_kloop_in_tile_loop(fa):
    """Read from the SASS of both families: the consumer's persistent tile loop holds one K-loop
    (a runtime trip count over k-blocks) that issues the MMAs and stores nothing; the tile loop
    issues at most a peeled first k-block, and the epilogue's stores are outside the K-loop."""
    from bsprof.analyzers.sass.loops import is_output_store

    k, t = fa.kloop, fa.tile_loop
    assert fa.kloop_status == "kloop" and k is not None and t is not None
    assert k.parent == t.id and k.depth == t.depth + 1
    assert k.own_mma == max(lp.own_mma for lp in fa.loops)
    assert not any(is_output_store(fa.instructions[i]) for i in k.own_instructions)
    assert fa.kloop_summary()["text"].startswith(f"K-loop: loop {k.id} ")


def test_bundled_nvfp4_is_block_scaled(tmp_path):
    """The NVFP4 cubin issues block-scaled UTCOMMA with UTCCP scale copies."""
    pytest.importorskip("cutlass")
    from bsprof.kernels import nvfp4 as fam

    (fa,) = analyze_cubin(fam.compile_cubin("optimized", tmp_path))
    assert fa.has("UTCOMMA") and fa.has("UTCCP")
    assert fa.features["block_scaled_mma"].present and fa.features["tmem_copy"].present
    assert fa.kloops and all(lp.mma > 0 for lp in fa.kloops)
    assert not fa.features["register_spills"].present
    _bundled_kloop_in_tile_loop(fa)


def test_a_failed_build_names_the_dsl_error_and_its_line(kernels_on_path, tmp_path):
    """CuTe DSL prints its error above its suggestions; the one line bsprof shows is the error,
    with the file and line of the kernel source that caused it."""
    pytest.importorskip("cutlass")
    from bsprof.errors import BsprofError
    from bsprof.kernels.build import compile_to_cubin

    with pytest.raises(BsprofError) as err:
        compile_to_cubin("sass_kernels.mma_loops:build_bad_branch", {}, "sm_90a", tmp_path / "bad.cubin")
    msg = str(err.value)
    assert "error[" in msg and "mma_loops.py:" in msg, msg
    assert "suggestion" not in msg and "\x1b[" not in msg
    assert not (tmp_path / "bad.cubin").exists()
