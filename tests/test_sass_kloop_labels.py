"""The K-loop, the tile loop and 'K fully unrolled' on kernels from outside this project, against
labels written by hand from their SASS (tests/data/sass/kloop_labels.json, evidence there); and the
honesty rules of `bsprof sass`: unlike regions are not subtracted, a tile size is never guessed,
`--by roles` says what it cannot attribute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bsprof.analyzers.sass import analyze_path, analyze_sass_text
from bsprof.cli import cli

LABELS = json.loads((Path(__file__).parent / "data" / "sass" / "kloop_labels.json").read_text())
DG_1024 = "sass/deepgemm_sm90_fp8_1d2d_8192x8192x1024_jit.sm_90a.cubin.xz"
DG_2048 = "sass/deepgemm_sm90_fp8_1d2d_4096x7168x2048_jit.sm_90a.cubin.xz"
CUTE_FP16 = "sass/nvidia_hopper_dense_fp16_persistent_128x128_c1x1.sm_90a.cubin.xz"
CUTE_FP8 = "sass/nvidia_hopper_dense_fp8_persistent_128x256_c1x2.sm_90a.cubin.xz"


def _label_id(lb: dict) -> str:
    return lb["file"].split(".")[0] + (f"-{lb['function']}" if "function" in lb else "")


def _header(fa, lp) -> str:
    return hex(fa.instructions[lp.header_start].pc)


def _check(fa, label: dict) -> None:
    assert fa.kloop_status == label["status"], fa.kloop_summary()["text"]
    k, t = fa.kloop, fa.tile_loop
    if label["kloop"] is None:
        assert k is None and not fa.kloops
    else:
        assert k is not None and k.kind == "kloop"
        assert _header(fa, k) == label["kloop"]["header"]
        assert k.own_mma == label["kloop"]["own_mma"]
        if "instructions" in label["kloop"]:
            assert k.size == label["kloop"]["instructions"]
    if "mma" in label:
        # "4 HGMMA.64x128x16.F32.BF16": how many MMAs a trip and the one opcode they share
        count, opcode = label["mma"].split(" ", 1)
        ops = {fa.instructions[i].opcode for i in k.own_instructions if fa.instructions[i].category == "mma"}
        assert ops == {opcode} and k.own_mma == int(count)
    if label["tile"] is None:
        assert t is None
    else:
        assert t is not None and t.kind == "tile" and _header(fa, t) == label["tile"]["header"]
        assert t.own_mma == label["tile"]["own_mma"]
        if "instructions" in label["tile"]:
            assert t.size == label["tile"]["instructions"]
    if "kloop_copies" in label:
        assert [_header(fa, lp) for lp in fa.kloop_copies] == label["kloop_copies"]
        assert f"one of {len(label['kloop_copies'])} K-loops" in fa.kloop_summary()["text"]
    if "promotion" in label:
        got = [{"header": _header(fa, lp), "instructions": lp.size} for lp in fa.promotion_loops]
        assert got == label["promotion"], fa.kloop_summary()["text"]
    # the pipeline depth read from the stage-index ring, and whether the MMAs carry scale factors
    if "stages" in label:
        assert fa.features["multi_stage_pipeline"].value == label["stages"], fa.features[
            "multi_stage_pipeline"
        ].evidence
    if "block_scaled" in label:
        assert fa.features["block_scaled_mma"].present is label["block_scaled"]
    if "spills" in label:
        assert fa.features["register_spills"].present is label["spills"]
    for name, present in label.get("features", {}).items():
        assert fa.features[name].present is present, name
    # the budget table shows the K-loop proper first, never the tile loop
    from bsprof.analyzers.sass.budget import region_rows

    rows = region_rows(fa)
    if k is not None:
        assert rows[1]["primary"] and rows[1]["region"].startswith(f"K-loop {k.id} ")
    assert not any(r["region"].startswith("K-loop") for r in rows if r.get("kind") == "tile")


def _labels_with_misses() -> list:
    # a known miss stays in the labels with the right answer; strict, so that a fix has to say so
    return [
        pytest.param(lb, marks=pytest.mark.xfail(strict=True, reason=lb["known_miss"])) if "known_miss" in lb else lb
        for lb in LABELS["labels"]
    ]


@pytest.mark.parametrize("label", _labels_with_misses(), ids=lambda lb: _label_id(lb))
def test_foreign_cubins_match_hand_labels(data_dir, label):
    # a cubin with several kernels (an example's reference kernels, two schedules) names the one
    # labelled by a regex on its mangled name
    (fa,) = analyze_path(data_dir / "sass" / label["file"], label.get("function"))
    _check(fa, label)


@pytest.fixture(scope="module")
def cublas(data_dir):
    (fa,) = analyze_path(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    return fa


def test_cublas_with_counts_kloop_is_the_busiest(cublas):
    lab = LABELS["cublas"]["with_counts"]
    _check(cublas, {**lab, "kloop": lab["kloop"]})
    k = cublas.kloop
    assert cublas.steady_state(k)["hot_instructions"] == lab["kloop"]["hot_instructions"]
    assert {cublas.executed[i] for i in k.own_instructions if cublas.instructions[i].category == "mma"} == {
        lab["kloop"]["mma_executed_each"]
    }
    (second,) = [lp for lp in cublas.kloops if not lp.primary]
    assert (
        _header(cublas, second) == lab["second_kloop"]["header"] and second.size == lab["second_kloop"]["instructions"]
    )
    assert "picked by executed MMAs" in cublas.kloop_summary()["text"]


def test_cublas_without_counts_kloop_is_the_innermost(cublas):
    # the same SASS as a listing with function-relative branch targets (ncu's are absolute): no
    # counts, so the innermost store-free MMA loop is the K-loop
    import re

    base = cublas.function.pc_base

    def rel(text: str) -> str:
        return re.sub(r"0x([0-9a-f]{6,})\b", lambda m: hex(int(m.group(1), 16) - base), text)

    listing = "\n".join(f"/*{i.pc:04x}*/ {rel(i.text)} ;" for i in cublas.instructions)
    (fa,) = analyze_sass_text(listing, arch="sm_90a")
    _check(fa, LABELS["cublas"]["static"])


def _run(*args):
    return CliRunner().invoke(cli, ["sass", *map(str, args)], catch_exceptions=False)


def test_compare_refuses_kloop_vs_unrolled(data_dir):
    res = _run(data_dir / DG_2048, data_dir / DG_1024, "--json")
    assert res.exit_code == 0
    (c,) = json.loads(res.stdout)["compare"]
    kl = c["kloop"]
    assert (kl["a"]["kind"], kl["b"]["kind"]) == ("kloop", "unrolled")
    assert kl["comparable"] is False and kl["instructions_delta"] is None and kl["mma_delta"] is None
    assert "not comparable" in kl["mismatch"] and "K fully unrolled" in kl["mismatch"]
    text = _run(data_dir / DG_2048, data_dir / DG_1024).output
    assert "not comparable" in text and "K-loop instructions" not in text


def test_compare_two_kloops_subtracts_the_kloops(data_dir):
    (c,) = json.loads(_run(data_dir / CUTE_FP16, data_dir / CUTE_FP8, "--json").stdout)["compare"]
    kl = c["kloop"]
    assert kl["comparable"] and kl["mismatch"] is None
    # the K-loops proper (136 and 67 instructions), not the tile loops around them
    assert (kl["a"]["instructions"], kl["b"]["instructions"]) == (136, 67)
    assert kl["instructions_delta"] == 67 - 136


def test_mnkl_without_tile_for_a_foreign_kernel_asks_for_the_flag(data_dir):
    # CuTe DSL names carry no tile: refuse in one line rather than guess
    res = CliRunner().invoke(cli, ["sass", str(data_dir / CUTE_FP16), "--mnkl", "4096,4096,4096"])
    assert res.exit_code == 2 and "output tile" in res.output and "unknown" in res.output and "--tile-mn" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_tile_read_from_names_that_spell_it(data_dir):
    # nvjet_sm90_qqtst_128x128_...: 4096^2 / 128^2 = 1024 tiles, and the executed QGMMA agree
    res = _run(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", "--json", "--mnkl", "4096,4096,4096")
    assert json.loads(res.stdout)["functions"][0]["tiles"] == 1024
    assert "tile 128x128 read from the kernel name (cuBLAS nvjet)" in res.stderr
    # DeepGEMM's template arguments: BLOCK_M 256, BLOCK_N 128 at 8192x8192x1024 (its JIT's kernel.cu)
    res = _run(data_dir / DG_1024, "--json", "--mnkl", "8192,8192,1024")
    assert json.loads(res.stdout)["functions"][0]["tiles"] == 32 * 64


# SourceCounters-only reports of one H100 launch at 2048x7168x2048 each (docs/perf.md):
# DeepGEMM's, whose run printed its config (DG_PRINT_CONFIGS=1: block_m=256,
# block_n=112, 1x2, 3 stages), and ours through bsprof's launcher (its plan: 256x112 1x2)
DG_SRC = "h100_deepgemm_2048x7168x2048_src.ncu-rep.xz"
OURS_SRC = "h100_bsprof_fp8_2048x7168x2048_src.ncu-rep.xz"


def test_tile_of_a_foreign_report_from_its_launch_names(data_dir):
    # ncu shows the launch as sm90_fp8_gemm_1d2d_impl; the template arguments that spell the tile
    # are in its mangled and demangled names: ceil(2048 / 256) x ceil(7168 / 112) = 8 x 64 tiles
    res = _run(data_dir / DG_SRC, "--json", "--mnkl", "2048,7168,2048")
    fn = json.loads(res.stdout)["functions"][0]
    assert fn["name"] == "sm90_fp8_gemm_1d2d_impl" and fn["tiles"] == 8 * 64
    assert "tile 256x112 read from the kernel name (DeepGEMM template)" in res.stderr


def test_tile_of_our_report_from_the_problem_the_launch_recorded(data_dir, tmp_path):
    # our kernel's name spells no tile; bsprof's launcher named problem and tile in the NVTX range
    res = _run(data_dir / OURS_SRC, "--json", "--mnkl", "2048,7168,2048")
    assert json.loads(res.stdout)["functions"][0]["tiles"] == 8 * 64
    assert "tile 256x112 recorded in the report by the launch" in res.stderr
    # a problem the launch did not run would count the wrong tiles: refused in one line
    bad = CliRunner().invoke(cli, ["sass", str(data_dir / OURS_SRC), "--mnkl", "2048,7168,4096"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
    assert "2048,7168,2048,1" in bad.output and "recorded" in bad.output
    # both sides resolved, ours against DeepGEMM, per tile
    d = json.loads(_run(data_dir / OURS_SRC, data_dir / DG_SRC, "--json", "--mnkl", "2048,7168,2048").stdout)
    assert d["a"]["functions"][0]["tiles"] == d["b"]["functions"][0]["tiles"] == 512
    # ... and compared per output tile: DeepGEMM's two-B-scale promotion (112 columns straddle
    # scale blocks) issues more a tile than ours here (37,124 against 32,946 warp-instructions)
    per, ex = d["compare"][0]["executed_per_tile"], d["compare"][0]["executed"]
    assert per["a"] == pytest.approx(ex["a"] / 512, abs=0.1) and per["b"] == pytest.approx(ex["b"] / 512, abs=0.1)
    assert per["b"] > per["a"]
    # a bsprof result directory stands for the one report in it (as `bsprof ncu --report` takes it)
    run = tmp_path / "optimized_fp8-blockwise_2048x7168x2048x1"
    run.mkdir()
    (run / OURS_SRC).write_bytes((data_dir / OURS_SRC).read_bytes())
    assert json.loads(_run(run, "--json", "--mnkl", "2048,7168,2048").stdout)["functions"][0]["tiles"] == 512
    (run / DG_SRC).write_bytes((data_dir / DG_SRC).read_bytes())
    two = CliRunner().invoke(cli, ["sass", str(run)])
    assert two.exit_code == 2 and "expected one .ncu-rep" in two.output


@pytest.mark.parametrize(
    "cubin, mnkl, tiles",
    [
        # sm100_fp8_fp4_gemm_1d1d_impl<MajorA, MajorB, GranKA, GranKB, KAlign, M, N, K, BLOCK_M=128, BLOCK_N=224, ...>
        ("deepgemm_sm100_fp8_1d1d_4096x7168x2048_cpu.sm_100a.cubin.xz", "4096,7168,2048", 32 * 32),
        ("deepgemm_sm100_fp8xfp4_1d1d_4096x2112x7168_cpu.sm_100a.cubin.xz", "4096,2112,7168", 32 * 11),
        # sm90_fp8_gemm_1d1d_impl<M, N, K, groups, BLOCK_M=128, BLOCK_N=152, ...>: ceil(7168 / 152) = 48
        ("deepgemm_sm90_fp8_1d1d_4096x7168x2048_cpu.sm_90a.cubin.xz", "4096,7168,2048", 32 * 48),
        # sm90_fp8_gemm_1d2d_impl<..., BLOCK_M=256, BLOCK_N=112, ...>
        ("deepgemm_sm90_fp8_1d2d_2048x7168x7168_cpu.sm_90a.cubin.xz", "2048,7168,7168", 8 * 64),
    ],
)
def test_tile_read_from_every_deepgemm_gemm_template(data_dir, cubin, mnkl, tiles):
    res = _run(data_dir / "sass" / cubin, "--json", "--mnkl", mnkl)
    assert json.loads(res.stdout)["functions"][0]["tiles"] == tiles
    assert "read from the kernel name (DeepGEMM template)" in res.stderr


def test_tile_mn_per_side_and_shared(data_dir):
    rep = data_dir / "h100_cublas_fp8_4096.ncu-rep.xz"
    res = _run(rep, rep, "--json", "--mnkl", "4096,4096,4096", "--tile-mn", "128,128", "--tile-mn", "256,128")
    d = json.loads(res.stdout)
    assert d["a"]["functions"][0]["tiles"] == 1024 and d["b"]["functions"][0]["tiles"] == 512
    res = _run(rep, rep, "--json", "--mnkl", "4096,4096,4096", "--tile-mn", "128,128")
    assert "one --tile-mn for both inputs" in res.stderr
    # 'auto' for A: its nvjet name spells 128x128; B given
    d = json.loads(
        _run(rep, rep, "--json", "--mnkl", "4096,4096,4096", "--tile-mn", "auto", "--tile-mn", "256,256").stdout
    )
    assert d["a"]["functions"][0]["tiles"] == 1024 and d["b"]["functions"][0]["tiles"] == 256
    res = CliRunner().invoke(cli, ["sass", str(rep), "--tiles", "8", "--mnkl", "4096,4096,4096"])
    assert res.exit_code == 2 and "pass one of them" in res.output


def test_bundled_tile_comes_from_its_build():
    # the tile a per-tile budget uses for a kernel we built is the one that build computes at this
    # problem, and the note says so; a --tile-mn given for that side still wins
    from bsprof.analyzers.sass.result import given_tiles
    from bsprof.kernels.fp8_blockwise import output_tile

    problem = (4096, 2112, 7168, 1)
    tile = output_tile("optimized", problem)
    tile_mn, notes = given_tiles(1, [], {0: (tile, "optimized")}, problem)
    assert tile_mn == [tile] and f"tile {tile[0]}x{tile[1]} from the bundled optimized kernel's build" in notes[0]
    assert given_tiles(1, [(64, 64)], {0: (tile, "optimized")}, problem)[0] == [(64, 64)]
    # the per-problem choice is what the build takes, not the variant's default tile
    assert output_tile("optimized", problem) != output_tile("optimized", (4096, 4096, 4096, 1))


def test_by_roles_without_line_info_says_so(data_dir):
    (fa,) = analyze_path(data_dir / DG_1024)
    res = _run(data_dir / DG_1024, "--by", "roles")
    assert res.exit_code == 0
    assert f"none of the {len(fa.instructions):,} instructions" in res.output and "no line info" in res.output
    assert "by warp role" not in res.output
    (fn,) = json.loads(_run(data_dir / DG_1024, "--by", "roles", "--json").stdout)["functions"]
    assert "role_regions" not in fn and "no line info" in fn["roles_unavailable"]


def test_mma_detail_on_unrolled_k_details_the_tile_loop_and_says_so(data_dir):
    out = _run(data_dir / DG_1024, "--mma-detail").output
    assert "tile loop (K fully unrolled: no K-loop) 1: " in out and "64 MMA" in out
    (fn,) = json.loads(_run(data_dir / DG_1024, "--mma-detail", "--json").stdout)["functions"]
    (d,) = fn["mma_detail"]
    assert d["kind"] == "tile" and d["mma"] == 64 and len(d["gaps"]) == 64
    # no MMAs at all: nothing to detail, and it says why
    out = _run(data_dir / "h100_cute_tiny.ncu-rep.xz", "--mma-detail").output
    assert "no K-loop to detail (no MMA instructions" in out


def _corpus(section: str) -> list[tuple[dict, dict]]:
    import lzma

    c = LABELS[section]
    with lzma.open(Path(__file__).parent / "data" / "sass" / c["data"], "rt") as f:
        launches = {x["op"]: x for x in json.load(f)["launches"]}
    return [(lb, launches[lb["op"]]) for lb in c["labels"]]


def _corpus_id(x) -> str:
    return x.get("op", "") if isinstance(x, dict) else ""


@pytest.mark.parametrize("label, launch", _corpus("h100_gemm_corpus"), ids=_corpus_id)
def test_h100_gemm_corpus_with_counts(label, launch):
    """Real launches with ncu's per-PC counts: the K-loop is the store-free MMA loop whose MMAs
    execute the most, found even where cuBLAS enters it in two places."""
    _check_corpus_launch(label, launch)


@pytest.mark.parametrize("label, launch", _corpus("h200_gemm_corpus"), ids=_corpus_id)
def test_h200_heldout_launches_with_counts(label, launch):
    """Five foreign H200 launches labelled by hand before bsprof ran on them
    (blind_h200_launches_predictions.json): cuBLAS at K = 256, CUTLASS's grouped GEMM, tinygemm's int4 mma.sync
    GEMM, and the backward of cuDNN's and FlashAttention-2's attention, whose K-loop is the loop over
    Q blocks. Header, instructions, MMAs a trip, share and tile loop, all as labelled."""
    _check_corpus_launch(label, launch)


def _check_corpus_launch(label: dict, launch: dict) -> None:
    from bsprof.analyzers.sass.analyze import analyze_function
    from bsprof.analyzers.sass.budget import attach_counts
    from bsprof.analyzers.sass.ncu_source import SourceCounters
    from bsprof.analyzers.sass.parse import function_from_pcs

    fn = function_from_pcs(
        launch["name"], launch["arch"], [p + launch["pc_base"] for p in launch["pcs"]], launch["sass"]
    )
    fa = analyze_function(fn)
    attach_counts(fa, SourceCounters(0, launch["name"], fn, launch["executed"], [{} for _ in launch["executed"]]))
    assert fa.kloop_status == label["status"], fa.kloop_summary()["text"]
    k, t = fa.kloop, fa.tile_loop
    if label["kloop"] is None:
        assert k is None
    else:
        assert _header(fa, k) == label["kloop"]["header"] and k.own_mma == label["kloop"]["own_mma"]
        if "instructions" in label["kloop"]:
            assert k.size == label["kloop"]["instructions"]
        # stores every pass of a loop that carries its sums: not an epilogue (attention backward's dQ)
        assert k.pass_stores == label["kloop"].get("pass_stores", 0)
        mma = [i for i, ins in enumerate(fa.instructions) if ins.category == "mma"]
        share = sum(fa.executed[i] for i in k.own_instructions if i in set(mma)) / sum(fa.executed[i] for i in mma)
        assert share == pytest.approx(label["kloop"]["share"], abs=0.001)
        # the busiest: no other loop's own MMAs execute more
        assert all(
            sum(fa.executed[i] for i in lp.own_instructions if fa.instructions[i].category == "mma")
            <= share * sum(fa.executed[i] for i in mma)
            for lp in fa.loops
        )
    if label["tile"] is None:
        assert t is None
    else:
        assert t is not None and _header(fa, t) == label["tile"]["header"]
        if "own_mma" in label["tile"]:
            assert t.own_mma == label["tile"]["own_mma"]


def _ring_listing(body: list[str], mma: str) -> str:
    lines = [
        "\t.target\tsm_100a",
        "//--------------------- .text.k --------------------------",
        "        /*0000*/                   MOV R2, RZ ;",
        ".L_x_0:",
        f"        /*0010*/                   {mma} ;",
    ]
    lines += [f"        /*{0x20 + 16 * i:04x}*/                   {t} ;" for i, t in enumerate(body)]
    n = 0x20 + 16 * len(body)
    lines += [
        f"        /*{n:04x}*/                   ISETP.NE.AND P1, PT, R5, R6, PT ;",
        f"        /*{n + 16:04x}*/              @P1  BRA `(.L_x_0) ;",
        f"        /*{n + 32:04x}*/                   EXIT ;",
    ]
    return "\n".join(lines)


# tcgen05.mma as ptxas 13.0 prints it: kind::f8f6f4, and kind::mxf8f6f4.block_scale (the same
# opcode with the scale factors' TMEM address after idesc)
PLAIN_QMMA = "UTCQMMA gdesc[UR12], gdesc[UR14], tmem[UR8], tmem[UR6], idesc[UR7], UP0"
SCALED_QMMA = "UTCQMMA gdesc[UR12], gdesc[UR14], tmem[UR8], tmem[UR6], idesc[UR7], tmem[UR10], UP0"


@pytest.mark.parametrize(
    "body, stages",
    [
        # CuTe DSL: increment, compare the incremented value, select it
        (
            ["UIADD3 UR5, UPT, UPT, UR4, 0x1, URZ", "UISETP.NE.AND UP0, UPT, UR5, 0x6, UPT", "USEL UR4, UR5, URZ, UP0"],
            6,
        ),
        # DeepGEMM: compare the index against kNumStages - 1, then increment and select
        (
            ["UISETP.NE.AND UP0, UPT, UR4, 0x5, UPT", "UIADD3 UR5, UPT, UPT, UR4, 0x1, URZ", "USEL UR4, UR5, URZ, UP0"],
            6,
        ),
        # the same with the increment first, into another register
        (["UIADD3 UR5, UR4, 0x1, URZ", "UISETP.NE.AND UP0, UPT, UR4, 0x2, UPT", "USEL UR4, UR5, URZ, UP0"], 3),
        # the increment overwrites the compared register: still the value before it
        (
            ["UISETP.NE.AND UP0, UPT, UR4, 0x3, UPT", "UIADD3 UR4, UPT, UPT, UR4, 0x1, URZ", "USEL UR6, UR4, URZ, UP0"],
            4,
        ),
        # the compared register is rewritten by something else: no ring
        (["UISETP.NE.AND UP0, UPT, UR4, 0x3, UPT", "UMOV UR4, UR9", "USEL UR6, UR4, URZ, UP0"], None),
        # Triton: increment in place, keep while not greater than N - 1 (the select on the negated predicate)
        (
            [
                "UIADD3 UR4, UPT, UPT, UR4, 0x1, URZ",
                "UISETP.GT.AND UP0, UPT, UR4, 0x3, UPT",
                "USEL UR4, UR4, URZ, !UP0",
            ],
            4,
        ),
        (["VIADD R10, R10, 0x1", "ISETP.GT.AND P1, PT, R10, 0x2, PT", "SEL R10, R10, RZ, !P1"], 3),
        # keep while less than N
        (["UIADD3 UR5, UR4, 0x1, URZ", "UISETP.LT.AND UP0, UPT, UR5, 0x5, UPT", "USEL UR4, UR5, URZ, UP0"], 5),
        # an ordered compare of a value that is no increment is a clamp, not a ring
        (["UISETP.GT.AND UP0, UPT, UR4, 0x3, UPT", "USEL UR4, UR4, URZ, !UP0"], None),
        # keep while greater: no ring
        (
            ["UIADD3 UR4, UPT, UPT, UR4, 0x1, URZ", "UISETP.GT.AND UP0, UPT, UR4, 0x3, UPT", "USEL UR4, UR4, URZ, UP0"],
            None,
        ),
    ],
)
def test_stage_ring_before_or_after_the_increment(body, stages):
    (fa,) = analyze_sass_text(_ring_listing(body, PLAIN_QMMA))
    assert len(fa.kloops) == 1
    assert fa.features["multi_stage_pipeline"].value == stages


@pytest.mark.parametrize(
    "body, stages",
    [
        # a power-of-two ring kept by a mask: DeepGEMM's sm_100 bf16 K-loop (two k-blocks a pass) keeps
        # idx & 3 and steps it by XOR 2; the index addresses the full barrier it waits on
        (
            [
                "ULEA UR10, UR14, UR4, 0x3",
                "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR10+0x38000], R5",
                "ULOP3.LUT UR14, UR14, 0x3, URZ, 0xc0, !UPT",
                "ULOP3.LUT UR14, UR14, 0x2, URZ, 0x3c, !UPT",
            ],
            4,
        ),
        # idx = (idx + 1) & 7, the barrier addressed through a shift into a vector register
        (
            [
                "UIADD3 UR5, UPT, UPT, UR4, 0x1, URZ",
                "ULOP3.LUT UR4, UR5, 0x7, URZ, 0xc0, !UPT",
                "USHF.L.U32 UR7, UR4, 0x3, URZ",
                "IMAD.U32 R8, RZ, RZ, UR7",
                "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R8+UR6+0x38000], R5",
            ],
            8,
        ),
        # a stepped, masked counter that addresses no barrier the loop waits on: no ring
        (
            [
                "UIADD3 UR5, UR4, 0x1, URZ",
                "ULOP3.LUT UR4, UR5, 0x3, URZ, 0xc0, !UPT",
                "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R5",
            ],
            None,
        ),
        # a mask of a value the loop does not step (bits of a lane id) feeding the wait: no ring
        (
            [
                "LOP3.LUT R4, R4, 0x1f, RZ, 0xc0, !PT",
                "LEA R8, R4, R9, 0x3",
                "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R8+URZ], R5",
            ],
            None,
        ),
    ],
)
def test_stage_ring_kept_by_a_mask(body, stages):
    (fa,) = analyze_sass_text(_ring_listing(body, PLAIN_QMMA))
    assert len(fa.kloops) == 1
    assert fa.features["multi_stage_pipeline"].value == stages


def test_block_scale_is_read_from_the_scale_factor_operand():
    (plain,) = analyze_sass_text(_ring_listing([], PLAIN_QMMA))
    (scaled,) = analyze_sass_text(_ring_listing([], SCALED_QMMA))
    assert plain.mma_count == scaled.mma_count == 1
    assert plain.features["block_scaled_mma"].present is False
    assert scaled.features["block_scaled_mma"].present is True


def test_compare_shows_the_promotion_loops_beside_the_kloops(data_dir):
    # two blockwise FP8 GEMMs for sm_100 (CuTe DSL, CUTLASS C++): their K-loops are the MMA warps'
    # (82 and 65 instructions), their per-K-block promotion runs in other warps (188 and 229)
    bw_dsl = data_dir / "sass" / "nvidia_blockwise_fp8_persistent_128x128_c1x1.sm_100a.cubin.xz"
    bw_cpp = data_dir / "sass" / "cutlass_sm100_blockwise_fp8_128x128x128_c1x1.sm_100a.cubin.xz"
    (c,) = json.loads(_run(bw_dsl, bw_cpp, "--json").stdout)["compare"]
    assert (c["kloop"]["a"]["instructions"], c["kloop"]["b"]["instructions"]) == (82, 65)
    assert c["promotion"] == {"a": 188, "b": 229, "delta": 41, "loops": {"a": 1, "b": 1}}
    text = _run(bw_dsl, bw_cpp).output
    assert "promotion loop instructions" in text
    # kernels without one get no such row
    assert "promotion loop" not in _run(data_dir / CUTE_FP16, data_dir / CUTE_FP8).output


def _listing(body: list[str], arch: str = "sm_100a", pc: int = 0) -> str:
    """A one-function nvdisasm-style listing: ``body`` instructions at PCs 16 apart from ``pc``,
    items ending in ':' as labels."""
    lines = [f"\t.target\t{arch}", "//--------------------- .text.k --------------------------"]
    for t in body:
        if t.endswith(":"):
            lines.append(t)
        else:
            lines.append(f"        /*{pc:04x}*/                   {t} ;")
            pc += 16
    return "\n".join(lines)


def _flat_listing(store: str, around: bool) -> str:
    """One loop: an MMA every pass, then a store the pass branches around (``around``) or not."""
    skip = "@P2 BRA `(.L_x_1)" if around else "NOP"
    return _listing(
        [
            "MOV R2, RZ",
            ".L_x_0:",
            PLAIN_QMMA,
            "ISETP.NE.AND P2, PT, R7, R8, PT",
            skip,
            store,
            ".L_x_1:",
            "ISETP.NE.AND P1, PT, R5, R6, PT",
            "@P1  BRA `(.L_x_0)",
            "EXIT",
        ]
    )


def test_flattened_tile_and_k_loop_is_a_kloop():
    # Triton's persistent loop: one k-block a pass, the epilogue only when the pass does not branch
    # around it; the same loop storing on every pass has K unrolled into a tile loop
    (fa,) = analyze_sass_text(_flat_listing("UTMASTG.2D [UR4], [UR10]", around=True))
    assert fa.kloop_status == "kloop" and fa.kloop.flattened == 1 and fa.tile_loop is None
    assert "flattened with the tile loop" in fa.kloop_summary()["text"]
    assert fa.features["persistent_tile_loop"].present is True
    (fa,) = analyze_sass_text(_flat_listing("UTMASTG.2D [UR4], [UR10]", around=False))
    assert fa.kloop_status == "unrolled" and fa.tile_loop.flattened == 0


def test_stsm_without_a_global_store_is_staging():
    # Triton's dot_scaled stages the scale factors through shared memory with STSM in the K-loop
    (fa,) = analyze_sass_text(_flat_listing("STSM.16.M88 [R25+0x18000], R28", around=False))
    assert fa.kloop_status == "kloop" and fa.kloop.stores == 0 and fa.kloop.flattened == 0


def _mma_warp_listing(peeled: str, inner: str) -> str:
    """An sm_100 MMA warp: a tile loop that stores nothing (the epilogue is other warps'), issues a
    peeled first k-block and runs the K-loop; ``peeled`` / ``inner`` are the MMAs' accumulate flags."""
    mma = "UTCOMMA.2CTA.4X gdesc[UR38], gdesc[UR36], tmem[UR15], tmem[UR58], idesc[UR59], tmem[UR10], {}"
    body = [
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR22], R9",
        mma.format(peeled),
        "UTCBAR.2CTA.MULTICAST [UR22], URZ, UR12",
        ".L_x_1:",
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR22], R9",
        mma.format(inner),
        mma.format("UPT"),
        "UTCBAR.2CTA.MULTICAST [UR22], URZ, UR12",
        "UISETP.GT.U32.AND UP0, UPT, UR23, 0x1, UPT",
        "BRA.U UP0, `(.L_x_1)",
        "UTCBAR.2CTA.MULTICAST [UR21], URZ, UR16",
        "ISETP.NE.AND P1, PT, R3, 0x2, PT",
        "@P1 BRA `(.L_x_0)",
        "EXIT",
    ]
    return _listing(["MOV R2, RZ", ".L_x_0:", *body])


def test_store_free_loop_starting_the_accumulator_is_the_tile_loop():
    # the peeled first k-block overwrites the accumulator (!UPT), the K-loop's MMAs add into it
    (fa,) = analyze_sass_text(_mma_warp_listing("!UPT", "UP0"))
    assert fa.kloop_status == "kloop" and [lp.kind for lp in fa.loops if lp.mma] == ["tile", "kloop"]
    assert fa.kloop.own_mma == 2 and fa.tile_loop.own_mma == 1
    # both start sums (cuBLAS promotes each k-block's partial sums): the outer loop stays a K-loop,
    # as it does when nothing starts one
    for peeled, inner in (("!UPT", "!UPT"), ("UP0", "UP0")):
        (fa,) = analyze_sass_text(_mma_warp_listing(peeled, inner))
        assert [lp.kind for lp in fa.loops if lp.mma] == ["kloop", "kloop"] and fa.tile_loop is None


def _reducing_listing(first: str, store: str) -> str:
    """One loop of two warp MMAs into R4..R7 (``first`` is the first one's accumulator input) and a
    global reduction every pass."""
    return _listing(
        [
            "MOV R2, RZ",
            ".L_x_0:",
            f"HMMA.16816.F32.BF16 R4, R8, R12, {first}",
            "HMMA.16816.F32.BF16 R4, R16, R20, R4",
            store,
            "ISETP.NE.AND P1, PT, R30, R31, PT",
            "@P1  BRA `(.L_x_0)",
            "EXIT",
        ]
    )


def test_loop_carrying_its_sums_is_a_kloop_whatever_it_stores():
    # FlashAttention-2's backward: dK and dV add up across the loop over Q blocks, in registers
    # nothing else names, while dQ's partial sums go into global memory with REDG every pass
    (fa,) = analyze_sass_text(_reducing_listing("R4", "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R24.64], R28"))
    assert fa.kloop_status == "kloop" and fa.kloop.stores == 0 and fa.kloop.pass_stores == 1
    assert "not its epilogue" in fa.kloop_summary()["text"]
    # the sums restart every pass (RZ): a tile loop with K unrolled and a reduction epilogue
    (fa,) = analyze_sass_text(_reducing_listing("RZ", "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R24.64], R28"))
    assert fa.kloop_status == "unrolled" and fa.tile_loop.stores == 1 and fa.tile_loop.pass_stores == 0
    # carried, but the pass stores the sums themselves (a wide store naming R4..R7): not carried away
    (fa,) = analyze_sass_text(_reducing_listing("R4", "STG.E.128 desc[UR4][R24.64], R4"))
    assert fa.kloop_status == "unrolled"


def test_stage_ring_of_the_kloop_before_the_tile_loops():
    # a tile loop around the K-loop steps a deeper ring of its own (a work-tile queue): the K-loop's wins
    mma = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], R24, UP0"
    ring = [
        "UIADD3 UR5, UPT, UPT, UR4, 0x1, URZ",
        "UISETP.NE.AND UP0, UPT, UR5, 0x{:x}, UPT",
        "USEL UR4, UR5, URZ, UP0",
    ]
    body = (
        [t.replace("UR4", "UR8").replace("UR5", "UR9").format(8) for t in ring]
        + [".L_x_1:", mma]
        + [t.format(6) for t in ring]
        + [
            "ISETP.NE.AND P1, PT, R5, R6, PT",
            "@P1 BRA `(.L_x_1)",
            "UTMASTG.2D [UR4], [UR10]",
            "ISETP.NE.AND P2, PT, R7, R6, PT",
            "@P2 BRA `(.L_x_0)",
            "EXIT",
        ]
    )
    (fa,) = analyze_sass_text(
        _listing(
            ["MOV R2, RZ", ".L_x_0:", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], RZ, !UPT", *body], arch="sm_90a"
        )
    )
    assert fa.kloop is not None and fa.tile_loop is not None
    assert fa.features["multi_stage_pipeline"].value == 6


@pytest.mark.parametrize(
    "policy, hinted",
    [
        # cute's CacheHintSm90::EVICT_NORMAL, as CUTLASS C++ and DeepGEMM pass it on every TMA: the default
        (["UMOV UR12, 0x0", "UMOV UR13, 0x10000000"], False),
        (["UMOV.64 UR12, 0x1000000000000000"], False),
        # EVICT_FIRST, and a policy from a register: hints
        (["UMOV UR12, 0x0", "UMOV UR13, 0x12f00000"], True),
        (["UMOV UR12, 0x0", "R2UR UR13, R7"], True),
    ],
)
def test_tma_policy_evict_normal_is_no_hint(policy, hinted):
    body = [*policy, "UTMALDG.2D [UR16], [UR4], desc[UR12]", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R2"]
    (fa,) = analyze_sass_text(_ring_listing(body, PLAIN_QMMA))
    f = fa.features["tma_cache_hint"]
    assert f.present is hinted and ("EVICT_NORMAL" in f.note) is (not hinted)


@pytest.mark.parametrize(
    "body, simt",
    [
        # stream-K's fixup: the first contributor stores its partials, the others add into the same
        # addresses; the tile goes out by TMA
        (
            [
                "STG.E desc[UR14][R24.64], R133",
                "ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, RZ, desc[UR14][R24.64], R133",
                "UTMASTG.3D [UR20], [UR26]",
            ],
            False,
        ),
        # a store to other addresses is still a SIMT store
        (
            [
                "STG.E desc[UR14][R30.64], R133",
                "ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, RZ, desc[UR14][R24.64], R133",
                "UTMASTG.3D [UR20], [UR26]",
            ],
            True,
        ),
        # no TMA store: the STG may be the output itself (a split-K epilogue adding into C)
        (
            ["STG.E desc[UR14][R24.64], R133", "ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, RZ, desc[UR14][R24.64], R133"],
            True,
        ),
    ],
)
def test_reduction_workspace_stores_are_no_simt_epilogue(body, simt):
    (fa,) = analyze_sass_text(_ring_listing(body, PLAIN_QMMA))
    f = fa.features["simt_global_stores"]
    assert f.present is simt and ("workspace" in f.note) is (body[-1].startswith("UTMASTG") and not simt)


def test_never_executed_pads_are_nops():
    (fa,) = analyze_sass_text(
        _ring_listing(["@!PT LDS RZ, [RZ]", "@!UPT UIADD3 URZ, UPT, UPT, URZ, URZ, URZ", "LDS R4, [R2]"], PLAIN_QMMA)
    )
    cats = [i.category for i in fa.instructions if i.base in ("LDS", "UIADD3")]
    assert cats == ["nop", "nop", "shared"]


@pytest.mark.parametrize("label", LABELS["labels"], ids=lambda lb: _label_id(lb))
def test_every_foreign_cubin_details_and_checks_without_error(data_dir, label):
    # the whole verb on each labelled kernel: the MMA stream of every K-loop, the checklist, JSON
    pick = ["--function", label["function"]] if "function" in label else []
    res = _run(data_dir / "sass" / label["file"], "--mma-detail", "--features", "--json", *pick)
    assert res.exit_code == 0, res.output[-500:]
    (fn,) = json.loads(res.stdout)["functions"]
    for d in fn.get("mma_detail", []):
        assert d["mma"] > 0 and d["instructions"] <= d["loop_instructions"]
        if d["every_pass_only"]:
            # a flattened loop: a pass is charged its own blocks, not the once-a-tile epilogue
            assert d["instructions"] < d["loop_instructions"] and d["mean_between"] < 30


@pytest.mark.parametrize(
    "name, stages",
    [
        # the two the reader was written on, and one held out (compiled after it was written)
        ("deepgemm_sm90_fp8_1d1d_4096x7168x2048_cpu.sm_90a.cubin.xz", 4),
        ("deepgemm_sm90_fp8_1d2d_4096x4096x4096_b128x192_s4_c1.sm_90a.cubin.xz", 4),
        ("deepgemm_sm90_fp8_1d2d_240x4096x16384_b64x128_s8_c1.sm_90a.cubin.xz", 8),
    ],
)
def test_a_k_loop_unrolled_over_its_ring_shows_its_stages_as_consecutive_barriers(data_dir, name, stages):
    # no stage index, so no wrap to read: each stage's full barrier is waited on at its own
    # address, one base plus 8 bytes a stage
    fas = analyze_path(data_dir / "sass" / name)
    fa = max(fas, key=lambda f: f.mma_count)
    feat = fa.features["multi_stage_pipeline"]
    assert feat.value == stages
    assert f"first of {stages} stage barriers" in feat.evidence[0] and "unrolled over its ring" in feat.evidence[0]


def _cutlass_examples() -> dict:
    return json.loads((Path(__file__).parent / "data" / "sass" / "blind_cutlass_examples_predictions.json").read_text())


def test_cutlass_examples_cubins_are_those_labelled(data_dir):
    # the hand answers were written from these builds before bsprof ran; a rebuilt cubin needs new ones
    import hashlib

    from conftest import unxz_bytes

    sums = dict(
        line.split()[::-1]
        for line in (data_dir / "sass" / "blind_cutlass_examples_cubins.sha256").read_text().splitlines()
    )
    preds = _cutlass_examples()["predictions"]
    assert {p["file"].removesuffix(".xz") for p in preds} == set(sums)
    for name, digest in sums.items():
        assert hashlib.sha256(unxz_bytes(data_dir / "sass" / f"{name}.xz")).hexdigest() == digest, name
    labelled = {(lb["file"], lb.get("function")) for lb in LABELS["labels"]}
    assert all((p["file"], p.get("function")) in labelled for p in preds)


def test_fmha_kv_loop_and_what_runs_beside_it(data_dir):
    """CUTLASS example 77's FMHA forward (blind set `blind_cutlass_examples`): the KV loop is the K-loop, two GEMMs a
    pass (Q.K^T into S, P.V into O). Its softmax and correction warps read S and O out of tensor memory
    each KV block and write P and the rescaled O back (STTM): MMA operands, not promoted sums, so no
    promotion loop. The tile loop around the KV loop still reads as a second K-loop (the known miss)."""
    (fa,) = analyze_path(data_dir / "sass" / "cutlass_sm100_fmha_fwd_fp16_256x128x128.sm_100a.cubin.xz", "Fmha")
    k = fa.kloop
    assert (_header(fa, k), k.size, k.own_mma) == ("0x2ad0", 291, 32)
    assert fa.promotion_loops == []
    ttm = [
        lp
        for lp in fa.loops
        if not lp.mma and {"LDTM", "STTM"} <= {fa.instructions[i].base for i in lp.own_instructions}
    ]
    assert {_header(fa, lp) for lp in ttm} >= {"0x9c40", "0xe220"}
    assert [(_header(fa, lp), lp.own_mma) for lp in fa.kloops if not lp.primary] == [("0x1230", 32)]
    assert fa.tile_loop is None
