"""`bsprof bench --plan`: the configuration a launch would build for a problem, and why, on a machine
without a GPU. The plan runs the launcher's own resolution (``launch.resolve_build``, which ``prepare``
calls on the GPU), so it is checked against the shapes where the H100 measured the candidates
(tests/test_fp8_quant.py MEASURED_MERGED: the pick ran fastest or within 1% of it)."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, run_bsprof
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _plan(*args: str) -> dict:
    code, out, err = run_bsprof(["bench", "--plan", "--json", *args])
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "mnkl, tile, cluster, split",
    [
        ("128,576,7168", "64x32", "1x1", 3),  # 136 TFLOP/s against 129 and 97 for the others timed
        ("128,2112,7168", "64x64", "1x1", 2),  # 374 against 364, 363, 347
        ("128,4096,7168", "64x64", "1x1", 1),  # 595 against 599 (within 1%), 579, 568
    ],
)
def test_plan_is_the_pick_measured_fastest(mnkl, tile, cluster, split):
    doc = _plan("--family", "fp8-blockwise", "--mnkl", mnkl)
    assert (doc["tile"], doc["cluster"], doc["split_k"]) == (tile, cluster, split)
    assert doc["num_sms"] == 132 and "faster than" in doc["choice"]


def test_plan_text_names_tile_reason_and_switches():
    code, out, err = run_bsprof(["bench", "--plan", "--family", "fp8-blockwise", "--mnkl", "4096,4096,4096"])
    assert code == 0, err
    assert "tile 256x128, cluster 1x2" in out and "chosen: 256x128 tile" in out
    assert "ab_stage=4 (shared-memory budget)" in out and "swizzle=" in out


def test_plan_follows_the_sm_count_and_a_fixed_tile():
    # fewer SMs: 120 tiles of 128x128 no longer fit one round, the choice moves
    full = _plan("--family", "fp8-blockwise", "--mnkl", "333,5120,3584")
    small = _plan("--family", "fp8-blockwise", "--mnkl", "333,5120,3584", "--sms", "114")
    assert full["tile"] == "128x128" and small["num_sms"] == 114 and small["choice"] != full["choice"]
    fixed = _plan(
        "--family", "fp8-blockwise", "--mnkl", "4096,4096,4096", "--kernel", "optimized:tile_m=128,tile_n=192"
    )
    assert (fixed["tile"], fixed["choice"]) == ("128x192", None)


def test_plan_nvfp4_map():
    big = _plan("--family", "nvfp4", "--mnkl", "8192,8192,4096")
    assert (big["tile"], big["cluster"]) == ("256x128", "2x1") and "fill 148 SMs" in big["choice"]
    small = _plan("--family", "nvfp4", "--mnkl", "128,8192,4096")
    assert (small["tile"], small["cluster"]) == ("128x128", "1x1")


@pytest.mark.parametrize(
    "args, says",
    [
        (["--mnkl", "1,2,3"], "--plan runs without a GPU"),
        (
            ["--family", "fp8-blockwise", "--mnkl", "1000,4096,1000"],
            "nearest shape the kernel takes is 1000,4096,1024,1",
        ),
        (["--family", "fp8-blockwise", "--kernel", "optimized:split_k=99", "--mnkl", "128,576,7168"], "split_k=99"),
    ],
)
def test_plan_refuses_in_one_line(args, says):
    code, out, err = run_bsprof(["bench", "--plan", *args])
    assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_plan_names_the_close_calls_and_the_command_that_times_them():
    # 4096x2112x7168: the pick (192x128 2x1) has DeepGEMM's own tile there (128x192 2x1) modelled
    # 1.1% dearer, inside the model's error (tests/test_fp8_quant.py)
    doc = _plan("--family", "fp8-blockwise", "--mnkl", "4096,2112,7168")
    assert doc["close_calls"] == ["tile_m=128,tile_n=192,cluster_m=2,cluster_n=1"]
    assert _plan("--family", "fp8-blockwise", "--mnkl", "4096,4096,4096")["close_calls"] == []
    code, out, err = run_bsprof(["bench", "--plan", "--family", "fp8-blockwise", "--mnkl", "4096,2112,7168"])
    assert code == 0, err
    shown = " ".join(out.split())
    assert "close calls, too near to rank: tile_m=128,tile_n=192,cluster_m=2,cluster_n=1" in shown
    assert "--mnkl 4096,2112,7168,1 --close-calls" in shown


def test_plan_takes_several_problems_as_a_config_map():
    # a model's layers in one call: one plan each, in order; a bad one is named in one line
    docs = _plan("--family", "fp8-blockwise", "--mnkl", "1000,5120,17920;4096,4096,4096;96,12288,4096")
    assert [(d["mnkl"][:3], d["tile"], bool(d["close_calls"])) for d in docs] == [
        ([1000, 5120, 17920], "128x160", False),
        ([4096, 4096, 4096], "256x128", False),
        ([96, 12288, 4096], "128x112", True),
    ]
    code, out, err = run_bsprof(
        ["bench", "--plan", "--family", "fp8-blockwise", "--mnkl", "4096,4096,4096;128,576,7168"]
    )
    assert code == 0, err
    assert "at 4096,4096,4096,1" in out and "at 128,576,7168,1" in out
    code, _, err = run_bsprof(
        ["bench", "--plan", "--family", "fp8-blockwise", "--mnkl", "4096,4096,4096;1000,4096,1000"]
    )
    assert code == 2 and "1000,4096,1024,1" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, says",
    [
        (["--family", "fp8-blockwise", "--mnkl", "4096,4096,4096;128,576,7168"], "go with --plan"),
        (["--plan", "--family", "fp8-blockwise", "--close-calls"], "--plan only prints the choice"),
        (["--family", "nvfp4", "--close-calls"], "drop --close-calls"),
    ],
)
def test_timing_flags_refuse_in_one_line_before_a_gpu(args, says):
    code, _, err = run_bsprof(["bench", *args])
    assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_sms_needs_plan():
    code, _, err = run_bsprof(["bench", "--sms", "100"])
    assert code == 2 and "--sms goes with --plan" in err


DIMS = st.one_of(
    st.sampled_from([0, 1, 7, 16, 63, 64, 65, 127, 128, 129, 333, 1000, 4096, 7168, 2**31]), st.integers(1, 70000)
)


@settings(derandomize=True, deadline=None, database=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=DIMS,
    n=DIMS,
    k=DIMS,
    kernel=st.sampled_from(["optimized", "baseline", "pingpong", "rescaled"]),
    family=st.sampled_from(["fp8-blockwise", "nvfp4"]),
)
def test_any_shape_plans_or_says_why_in_one_line(m, n, k, kernel, family):
    code, out, err = run_bsprof(
        ["bench", "--plan", "--json", "--family", family, "--kernel", kernel, "--mnkl", f"{m},{n},{k}"]
    )
    assert "Traceback" not in err
    if code == 0:
        doc = json.loads(out)
        tm, tn = (int(v) for v in doc["tile"].split("x"))
        assert doc["mnkl"][:3] == [m, n, k] and tm in (64, 128, 256) and 16 <= tn <= 256 and doc["split_k"] >= 1
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "spec, mnkl",
    [
        ("optimized", (8192, 8192, 8192, 1)),
        ("optimized", (8192, 8192, 1024, 1)),
        ("optimized", (128, 576, 7168, 1)),
        ("optimized", (333, 5120, 3584, 1)),
        ("optimized:ab_stage=3", (4096, 4096, 4096, 1)),
        ("optimized:ab_stage=12", (4096, 4096, 4096, 1)),
        ("pingpong", (4096, 4096, 4096, 1)),
        ("baseline", (4096, 4096, 4096, 1)),
        ("rescaled", (4096, 4096, 4096, 1)),
    ],
)
def test_plan_stage_count_is_the_kernels(spec, mnkl):
    # the plan counts stages from the resolved switches; the kernel from its own attributes
    pytest.importorskip("cutlass")
    from bsprof.kernels.fp8_blockwise import config as cfg
    from bsprof.kernels.fp8_blockwise.gemm_config import GemmConfig
    from bsprof.kernels.fp8_blockwise.kernel import Fp8BlockwiseGemm
    from bsprof.kernels.fp8_blockwise.launch import resolve_build

    variant, over = cfg.parse_spec(spec)
    kw, _static, _why, _close = resolve_build(variant, over, mnkl)
    k = Fp8BlockwiseGemm(GemmConfig.from_switches(**kw)).config
    most = cfg.max_smem_stages(
        k.tile.tile_m,
        k.tile.tile_n,
        wave_m=k.wave_m,
        epi_per_wg=k.epi_per_wg,
        sfa_tma=k.scales.sfa_tma,
        sfb_tma=k.scales.sfb_tma,
        sfb_smem=k.scales.sfb_smem,
        epilogue=k.epi.epilogue,
    )
    want = most if k.pipeline.ab_stage <= 0 else min(k.pipeline.ab_stage, most)
    assert cfg.smem_stages(kw) == want == k.ab_stages() >= 2


@pytest.mark.parametrize(
    "args, swizzle, why",
    [
        # A and B overflow L2 and the grid takes 16 rounds: tiles grouped
        (["--mnkl", "8192,8192,8192"], 8, "overflow L2"),
        # 128 tiles on 132 SMs: one round, no group (1.20x faster than grouped on the H100)
        (["--mnkl", "200,8192,8192"], 1, "first round"),
        (["--mnkl", "4096,4096,4096"], 1, "fit in L2"),
        # a user's group is kept and needs no reason
        (["--mnkl", "8192,8192,8192", "--kernel", "optimized:swizzle=4"], 4, None),
    ],
)
def test_plan_says_why_the_tile_order(args, swizzle, why):
    doc = _plan("--family", "fp8-blockwise", *args)
    assert doc["switches"]["swizzle"] == swizzle
    assert (doc["swizzle_why"] is None) if why is None else (why in doc["swizzle_why"])


def test_plan_names_the_b_multicast_rule():
    doc = _plan("--family", "fp8-blockwise", "--mnkl", "1024,6144,4096")
    assert (doc["tile"], doc["cluster"]) == ("128x192", "2x1") and "B multicast" in doc["choice"]


@pytest.mark.parametrize(
    "spec, words",
    [
        ("optimized:trim_a=maybe", "trim_a='maybe': takes 0 or 1"),
        ("optimized:shift_last_m=2", "shift_last_m=2: takes 0 or 1"),
        ("optimized:tile_n=abc", "tile_n='abc': takes a whole number"),
        ("optimized:epi_split=yes", "takes one of 0, 1, 'auto'"),
    ],
)
def test_a_switch_value_the_kernel_cannot_take_is_one_line(spec, words):
    code, _, err = run_bsprof(
        ["bench", "--plan", "--family", "fp8-blockwise", "--kernel", spec, "--mnkl", "88,7168,2048"]
    )
    assert words in assert_one_line_error(code, err)
