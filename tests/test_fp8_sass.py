"""CI without a GPU: compile both FP8-blockwise variants (and one timing build) for sm_90a on the CPU
and check in their SASS what each variant claims: QGMMA in the K-loop, no local-memory spills,
the register split, the epilogue path, the 256-row two-wave tile and the timing recorder."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("cutlass")

from bsprof.analyzers.sass import analyze_cubin  # noqa: E402
from bsprof.analyzers.sass.disasm import tool_path  # noqa: E402
from bsprof.kernels import fp8_blockwise  # noqa: E402

pytestmark = pytest.mark.slow

MNKL = (4096, 4096, 4096, 1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Three compiles per session (cached across sessions by bsprof.kernels.build)."""
    out = tmp_path_factory.mktemp("fp8")
    cache: dict = {}

    def get(variant: str, timing: bool = False):
        key = (variant, timing)
        if key not in cache:
            extra = dict(timing=True, delay_kloop=300, delay_phase1=200) if timing else {}
            cubin = fp8_blockwise.compile_cubin(variant, out, mnkl=MNKL, **extra)
            cache[key] = (cubin, analyze_cubin(cubin)[0])
        return cache[key]

    return get


def _res_usage(cubin) -> str:
    return subprocess.run(
        [tool_path("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_qgmma_in_kloop_and_no_spills(built, variant):
    cubin, fa = built(variant)
    assert fa.arch == "sm_90a" or fa.arch.startswith("sm_90")
    assert fa.count("QGMMA") > 0
    assert all(
        ins.opcode.startswith("QGMMA.64x128x32.F32.E4M3.E4M3")
        for ins in fa.instructions
        if ins.opcode.startswith("QGMMA")
    )
    assert fa.kloops and max(k.own_mma for k in fa.kloops) >= 8
    assert not fa.features["register_spills"].present
    # one wait per wave of four QGMMA, never one per QGMMA (ptxas serializes the wgmmas when a call
    # or an accumulator access lands among them)
    assert fa.features["wgmma_serialized"].present is False
    assert fa.count("LDL") == 0 and fa.count("STL") == 0
    assert "LOCAL:0" in _res_usage(cubin)


@pytest.mark.parametrize("variant", ["baseline", "optimized"])
def test_register_split_and_pipeline(built, variant):
    cubin, fa = built(variant)
    text = "\n".join(ins.text for ins in fa.instructions if ins.opcode.startswith("USETMAXREG"))
    # producer warpgroup gives registers away (40), consumers take 232: 128*40 + 256*232 <= 64K
    assert "DEALLOC" in text and "0x28" in text
    assert "ALLOC" in text and "0xe8" in text
    regs = int(_res_usage(cubin).split("REG:")[1].split()[0])
    assert regs <= 168  # launch bound for 384 threads, 1 CTA/SM
    assert fa.features["tma_load"].present and fa.features["persistent_tile_loop"].present
    assert fa.features["multi_stage_pipeline"].value == 4


def test_epilogue_paths(built):
    _, base = built("baseline")
    _, opt = built("optimized")
    assert base.features["simt_global_stores"].present and not base.features["tma_store_epilogue"].present
    assert opt.features["tma_store_epilogue"].present and not opt.features["simt_global_stores"].present
    assert opt.count("STSM") > 0 and opt.count("UTMASTG") > 0


def _inner_kloop(fa):
    """The K-loop proper: the deepest loop that issues MMAs (a peeled first K block puts MMAs in
    the tile loop around it too)."""
    return max(fa.kloops, key=lambda k: (k.depth, k.own_mma))


def _waves_per_kblock(fa, ctas_released: int = 1) -> float:
    """A wave starts with an overwriting wgmma (`RZ, !UPT`); a K block ends with the release of its
    stage: one arrival per CTA it is released on (elect_release: every CTA of the cluster). The
    K-loops may unroll differently, so count per K block."""
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    starts = sum(1 for ins in body if ins.opcode.startswith("QGMMA") and "RZ, !UPT" in ins.operands)
    releases = sum(1 for ins in body if ins.opcode.startswith("SYNCS.ARRIVE")) / ctas_released
    return starts / releases


def test_two_wave_tile_doubles_mma_per_kblock(built):
    # optimized = 256x128 tile as two 128-row waves: twice the waves per K block of the baseline
    _, base = built("baseline")
    _, opt = built("optimized")
    assert _waves_per_kblock(base) == 1
    assert _waves_per_kblock(opt, ctas_released=2) == 2  # 1x2 cluster


def test_timing_build_records_and_plain_build_does_not(built):
    _, plain = built("optimized")
    _, timed = built("optimized", timing=True)
    clock = [i for i in timed.instructions if "SR_GLOBALTIMER" in i.text]
    # one clock read per record site: producer tile_start/load_end, consumer (tile_start +
    # acc_acquired), tma0_landed, kloop_end, (phase1_end + phase2_end); events of the same
    # instant share a read and are two stores
    assert len(clock) >= 6
    assert not any("SR_GLOBALTIMER" in i.text for i in plain.instructions)
    records = timed.count("STG") - plain.count("STG")  # 16-byte event records
    assert records >= len(clock) + 2
    assert not timed.features["register_spills"].present
    # the clock reads and record stores stay out of the wgmma stream: per-warp timing must not
    # serialize the MMAs it measures
    assert timed.features["wgmma_serialized"].present is False


def test_pingpong_schedule(built):
    # each consumer warpgroup owns whole 128-row tiles: two 64-row waves per K block, the turn on
    # the tensor cores handed over by mbarriers, epilogue through smem + TMA, no spills
    cubin, pp = built("pingpong")
    _, base = built("baseline")
    assert all(
        ins.opcode.startswith("QGMMA.64x128x32.F32.E4M3.E4M3")
        for ins in pp.instructions
        if ins.opcode.startswith("QGMMA")
    )
    assert max(k.own_mma for k in pp.kloops) == 2 * max(k.own_mma for k in base.kloops)
    assert pp.features["tma_store_epilogue"].present
    assert not pp.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    # each warpgroup syncs its own epilogue (128 threads); the coop kernels sync both (256)
    bars = [ins.text for ins in pp.instructions if "BAR.SYNC" in ins.text and "WARPGROUP" not in ins.text]
    assert any(t.rstrip(" ;").endswith("0x80") for t in bars)
    assert not any(t.rstrip(" ;").endswith("0x100") for t in bars)


def test_uniform_descriptors_remove_the_r2ur_moves(tmp_path, built):
    # partitioning the smem operands for a warp-uniform thread index keeps the wgmma descriptors
    # in uniform registers: the K-loop loses its R2UR moves (docs/optimizations.md)
    _, uni = built("optimized")  # optimized keeps them on (docs/optimizations.md)
    (opt,) = analyze_cubin(fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=MNKL, uniform_desc=False))
    assert opt.count("R2UR") > 8 and uni.count("R2UR") <= 2
    assert uni.count("QGMMA") == opt.count("QGMMA")

    def kloop_size(fa):
        return len(_inner_kloop(fa).own_instructions)

    assert kloop_size(uni) < kloop_size(opt)


def test_a_scales_arrive_with_the_stage(built):
    # optimized (sfa_tma): the K-loop reads its A scales from smem (LDS) and loads nothing from
    # global memory; the producer issues one more TMA per wave (A, its scales) and B per stage
    _, base = built("baseline")
    _, opt = built("optimized")

    def kloop(fa):
        return [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]

    assert any(ins.opcode.startswith("LDG") for ins in kloop(base))
    assert not any(ins.opcode.startswith("LDG") for ins in kloop(opt))
    assert sum(ins.opcode.startswith("LDS") for ins in kloop(opt)) >= 4
    producer = [
        lp for lp in opt.loops if any(opt.instructions[i].opcode.startswith("UTMALDG") for i in lp.own_instructions)
    ]
    tma = max(sum(opt.instructions[i].opcode.startswith("UTMALDG") for i in lp.own_instructions) for lp in producer)
    assert tma % 6 == 0  # per stage: 2 A waves + 2 A-scale columns + B + a B-scale box


def test_a_multicast_across_the_cluster_pair(built):
    # optimized runs 1x2 clusters (docs/optimizations.md): each stage's two A waves arrive by
    # multicast TMA (the pair shares its A tile); the scales and B stay per-CTA loads
    _, opt = built("optimized")
    _, base = built("baseline")
    assert base.count("UTMALDG.2D.MULTICAST") == 0
    producer = max(
        (lp for lp in opt.loops),
        key=lambda lp: sum(opt.instructions[i].opcode.startswith("UTMALDG") for i in lp.own_instructions),
    )
    ops = [
        opt.instructions[i].opcode
        for i in producer.own_instructions
        if opt.instructions[i].opcode.startswith("UTMALDG")
    ]
    mcast = sum(op.startswith("UTMALDG.2D.MULTICAST") for op in ops)
    assert mcast and mcast * 6 == len(ops) * 2  # per stage: 2 multicast A + 3 scale boxes + B


def test_two_by_two_cluster_multicasts_a_and_b(tmp_path):
    # cluster 2x2 (a switch, docs/optimizations.md): B is multicast down the cluster column as
    # A is along its row, so per stage 3 of the 6 TMA loads are multicast; each consumer warp
    # releases the stage on the 3 CTAs that wrote into it (the diagonal one did not)
    (c22,) = analyze_cubin(fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=(1024, 1024, 1024, 1), cluster_m=2))
    producer = max(
        (lp for lp in c22.loops),
        key=lambda lp: sum(c22.instructions[i].opcode.startswith("UTMALDG") for i in lp.own_instructions),
    )
    ops = [
        c22.instructions[i].opcode
        for i in producer.own_instructions
        if c22.instructions[i].opcode.startswith("UTMALDG")
    ]
    mcast = sum(op.startswith("UTMALDG.2D.MULTICAST") for op in ops)
    assert mcast and mcast * 2 == len(ops)
    assert not c22.features["register_spills"].present


def test_b_scales_arrive_with_the_stage_and_the_tile_start_has_no_barrier(built):
    # sfb_tma (docs/optimizations.md): the per-tile B-scale stash and its two named barriers
    # and global load are gone; the K-loop reads its B scale from the stage like the A scales
    _, base = built("baseline")
    _, opt = built("optimized")

    def named_barriers(fa):
        return sum(ins.opcode.startswith("BAR.SYNC") and " 0x1," in ins.text for ins in fa.instructions)

    assert opt.count("LDG") == 0 and base.count("LDG") > 0
    kloop = [opt.instructions[i] for i in _inner_kloop(opt).own_instructions]
    assert sum(ins.opcode.startswith("LDS") for ins in kloop) >= 5  # 4 A scales + the B scale
    # no named barrier of both warpgroups is left (the tile start had two); what remains is the
    # per-warpgroup epilogue's: 2 per 64x32 sub-tile, 8 sub-tiles, 128 threads each
    assert named_barriers(opt) == 0
    assert (
        sum(ins.opcode.startswith("BAR.SYNC") and ins.text.rstrip(" ;").endswith("0x80") for ins in opt.instructions)
        == 16
    )


def test_epilogue_split_per_warpgroup_drops_the_last_cta_wide_barrier(tmp_path, built):
    # epi_split (docs/optimizations.md, on in optimized up to K = 4096): each consumer
    # warpgroup stores its own 64 rows through its own ring, so no barrier of both warpgroups is
    # left; each syncs its own epilogue (2 named barriers of 128 threads per 64x32 sub-tile, 8
    # sub-tiles a tile) and issues its own stores
    _, split = built("optimized")
    (opt,) = analyze_cubin(fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=MNKL, epi_split=False))

    def bars(fa, threads):
        return [
            ins
            for ins in fa.instructions
            if ins.opcode.startswith("BAR.SYNC") and ins.text.rstrip(" ;").endswith(threads)
        ]

    assert len(bars(opt, "0x100")) == 16 and not bars(opt, "0x80")
    assert not bars(split, "0x100")
    per_wg = bars(split, "0x80")
    assert len(per_wg) == 16 and len({ins.operands.split(",")[0] for ins in per_wg}) == 2
    assert split.count("UTMASTG") == opt.count("UTMASTG") and split.count("STSM") == opt.count("STSM")
    assert not split.features["register_spills"].present


def test_stage_release_and_next_stage_test_stay_off_the_issue_path(tmp_path, built):
    # elect_release + peek (docs/optimizations.md): the library's release picks lanes by
    # thread index, which ptxas re-reads (S2R) inside the K-loop; one elected lane releases
    # instead. The next stage's barrier is tested without blocking (PHASECHK, no TRYWAIT) before
    # the promotion, so the blocking wait at the top of the K-loop is branched around
    _, opt = built("optimized")
    (lib,) = analyze_cubin(
        fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=MNKL, elect_release=False, peek=False)
    )

    def kloop(fa):
        return [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]

    assert any(ins.opcode.startswith("S2R") for ins in kloop(lib))
    assert not any(ins.opcode.startswith(("S2R", "CS2R")) and "SR_TID" in ins.text for ins in kloop(opt))
    assert any(ins.opcode.startswith("ELECT") for ins in kloop(opt))

    def tests(fa):  # unpredicated: a blocking wait's retry path tests with a guard
        return [
            ins
            for ins in kloop(fa)
            if ins.opcode.startswith("SYNCS.PHASECHK") and "TRYWAIT" not in ins.opcode and not ins.guard
        ]

    # one test a K block: `optimized` runs its K-loop unrolled by the ring depth (ring_unroll)
    assert len(tests(opt)) == _inner_kloop(opt).mma // 8 and not tests(lib)
    # the test sits among the promotion's FFMAs, after the stage's release arrivals
    body = kloop(opt)
    at = body.index(tests(opt)[0])
    assert any(ins.opcode.startswith("SYNCS.ARRIVE") for ins in body[:at])
    assert sum(ins.opcode.startswith("FFMA") for ins in body[at:]) >= 8  # ptxas leaves ~18 after it
    assert not opt.features["register_spills"].present


def test_rescaled_build_waits_once_per_k_block_without_block_accumulator(built):
    # promote="rescale" (docs/optimizations.md): both waves of a K block accumulate into their
    # totals (no overwriting `RZ, !UPT` wgmma in the loop) behind one wgmma wait, after the
    # totals' rescale (2 x 64 accumulator registers: FMUL, no promotion FFMA)
    cubin, fa = built("rescaled")
    assert {i.opcode for i in fa.instructions if i.opcode.startswith("QGMMA")} == {"QGMMA.64x128x32.F32.E4M3.E4M3"}
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    qgmma = [i for i in body if i.opcode.startswith("QGMMA")]
    assert len(qgmma) == 8 and not any("RZ, !UPT" in i.operands for i in qgmma)
    assert [i.operands for i in body if i.opcode.startswith("WARPGROUP.DEPBAR")] == ["gsb0, 0x0"]
    assert sum(i.opcode.startswith("FMUL") for i in body) >= 128
    assert not any(i.opcode.startswith("FFMA") for i in body)
    # the serial promotion waits once per wave
    _, opt = built("optimized")
    opt_body = [opt.instructions[i] for i in _inner_kloop(opt).own_instructions]
    blocks = _inner_kloop(opt).mma // 8  # K blocks a trip of its unrolled K-loop
    assert sum(i.opcode.startswith("WARPGROUP.DEPBAR") for i in opt_body) == 2 * blocks


def test_a_tile_width_that_straddles_scale_blocks(tmp_path):
    # 128x144 (a width DeepGEMM uses, chosen for 4096x2112x7168): tiles start anywhere in a
    # 128-wide B-scale block, so two B scales come from the per-tile stash and the 8-column groups
    # pick theirs at run time (FSEL): tiles start at multiples of 16 in a block, so the groups
    # from column 16 to 127 share one test per 16-column step (7 steps x 2 row halves), the
    # first two groups take the first scale and the last two the second with no test; the
    # epilogue stores 16-column sub-tiles; no spills
    cubin = fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=(4096, 2112, 7168, 1), mma_tiler=(128, 144))
    (fa,) = analyze_cubin(cubin)
    assert {i.opcode for i in fa.instructions if i.opcode.startswith("QGMMA")} == {"QGMMA.64x144x32.F32.E4M3.E4M3"}
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    assert sum(i.opcode.startswith("FSEL") for i in body) == 14  # one per group was 36
    assert sum(i.opcode.startswith("FFMA") for i in body) == 72  # 144 columns / 2 threads per row pair
    assert fa.features["tma_store_epilogue"].present


@pytest.mark.parametrize("variant", ["optimized", "baseline"])
def test_one_row_problem_keeps_two_dimensional_tma(tmp_path, variant):
    # M = 1: CuTe folds a static size-1 mode away, so a shape-specialized build once issued
    # one-dimensional TMA copies for A and D (an illegal instruction on the H100); M stays a
    # runtime extent there now, and no tensor copy is 1D (the shape-generic baseline's are 3D)
    (fa,) = analyze_cubin(fp8_blockwise.compile_cubin(variant, tmp_path, mnkl=(1, 256, 512, 1)))
    tma = [ins.opcode for ins in fa.instructions if ins.opcode.startswith(("UTMALDG", "UTMASTG"))]
    assert any(op.startswith("UTMALDG") for op in tma)
    assert not any(".1D" in op for op in tma), sorted(set(tma))


def test_widest_serial_128_row_tile_does_not_spill(tmp_path):
    # 128x192 holds 96 total + 96 block accumulator registers per consumer thread (DeepGEMM's
    # tile at 4096x2112x7168); it spilled in the unpruned kernel, so the width limit rests on this
    cubin = fp8_blockwise.compile_cubin(
        "optimized", tmp_path, mnkl=(4096, 2112, 7168, 1), mma_tiler=(128, 192), cluster=(2, 1)
    )
    (fa,) = analyze_cubin(cubin)
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    assert any(ins.opcode.startswith("QGMMA.64x192x32") for ins in fa.instructions)
    # its tiles start at column 0 or 64 of a scale block: one scale test for the 8 groups in
    # between (2 FSEL, one per row half), 96 promotion FFMA per K block (the K-loop runs the
    # ring's 4 blocks a trip)
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    blocks = _inner_kloop(fa).mma // 4
    assert blocks == 4
    assert sum(i.opcode.startswith("FSEL") for i in body) == 2 * blocks
    assert sum(i.opcode.startswith("FFMA") for i in body) == 96 * blocks


@pytest.mark.parametrize(
    "tile, cluster, mnkl",
    [((64, 64), (1, 2), (128, 4096, 7168, 1)), ((64, 112), (1, 1), (128, 7168, 2048, 1))],
    ids=["64x64-1x2", "64x112-1x1"],
)
def test_one_warpgroup_64_row_tile(tmp_path, tile, cluster, mnkl):
    # DeepGEMM's small-M tile: a CTA of one producer and one consumer warpgroup (256 threads),
    # one 64-row wgmma stream per K block (four k32 QGMMA, one wait, one release per CTA the
    # stage came to), tile_n / 2 promotion FFMA; no local memory at the widths DeepGEMM uses
    cubin = fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=mnkl, mma_tiler=tile, cluster=cluster)
    (fa,) = analyze_cubin(cubin)
    assert {i.opcode for i in fa.instructions if i.opcode.startswith("QGMMA")} == {
        f"QGMMA.64x{tile[1]}x32.F32.E4M3.E4M3"
    }
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    assert fa.features["wgmma_serialized"].present is False
    elf = subprocess.run(
        [tool_path("cuobjdump"), "-elf", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    assert ".reqntid 256, 1, 1" in elf
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    releases = sum(ins.opcode.startswith("SYNCS.ARRIVE") for ins in body) // (cluster[0] * cluster[1])
    assert releases >= 1
    assert sum(ins.opcode.startswith("QGMMA") for ins in body) == 4 * releases
    assert sum(ins.opcode.startswith("WARPGROUP.DEPBAR") for ins in body) == releases
    assert sum(ins.opcode.startswith("FFMA") for ins in body) == tile[1] // 2 * releases
    assert fa.features["tma_store_epilogue"].present


def test_a_narrow_128_row_pick_builds_unclustered(tmp_path):
    # 333x5120x3584: the selection picks 128x128 and, at that width, no cluster (the plain grid ran
    # 1.29x the 1x2 cluster there); the build has two consumer warpgroups of 64-row QGMMA, one
    # stage release per K block to its own CTA only, and no local memory
    plan = fp8_blockwise.plan("optimized", (333, 5120, 3584, 1))
    assert (plan["tile"], plan["cluster"], plan["split_k"]) == ("128x128", "1x1", 1)
    cubin = fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=(333, 5120, 3584, 1))
    (fa,) = analyze_cubin(cubin)
    assert {i.opcode for i in fa.instructions if i.opcode.startswith("QGMMA")} == {"QGMMA.64x128x32.F32.E4M3.E4M3"}
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    assert fa.features["wgmma_serialized"].present is False
    body = [fa.instructions[i] for i in _inner_kloop(fa).own_instructions]
    assert sum(ins.opcode.startswith("QGMMA") for ins in body) == 4
    # one elected arrive per warp on this CTA's empty barrier: no remote (cluster) arrive
    arrives = [ins for ins in body if ins.opcode.startswith("SYNCS.ARRIVE")]
    assert len(arrives) == 1 and not any(".A1T0.RED" in ins.opcode or "REMOTE" in ins.opcode for ins in arrives)


def test_split_k_class_counts_units_in_with_an_atomic_behind_a_gpu_fence(tmp_path, built):
    # split-K (a 64x32 tile split 3 ways at 128x576x7168): the consumers write the unit's fp32
    # partial and meet at a barrier; one thread counts the unit in with an acq_rel atomic at gpu
    # scope: ATOMG.ADD behind a MEMBAR.ALL.GPU (the release) and followed by CCTL.IVALL (the
    # acquire: L1 invalidated before the last unit reads the others' partials). The unsplit
    # build has none of it, and the split adds no spills
    cubin = fp8_blockwise.compile_cubin(
        "optimized", tmp_path, mnkl=(128, 576, 7168, 1), mma_tiler=(64, 32), cluster=(1, 1), split_k=3
    )
    (sk,) = analyze_cubin(cubin)
    _, opt = built("optimized")
    atoms = [ins.text for ins in sk.instructions if ins.opcode.startswith("ATOMG")]
    assert len(atoms) == 1 and ".ADD" in atoms[0] and ".GPU" in atoms[0]
    at = next(i for i, ins in enumerate(sk.instructions) if ins.opcode.startswith("ATOMG"))
    assert any(ins.opcode == "MEMBAR.ALL.GPU" for ins in sk.instructions[at - 4 : at])
    assert sk.instructions[at + 1].opcode.startswith("CCTL.IVALL")
    assert not any(ins.opcode.startswith(("ATOMG", "MEMBAR.ALL.GPU")) for ins in opt.instructions)
    # a 64x32 fragment is 16 floats per thread: 16 partial stores, and 3 x 16 loads in the sum
    assert sk.count("STG") - 1 >= 16 and sk.count("LDG") >= 3 * 16 and sk.count("FADD") >= 2 * 16
    assert all(
        ins.opcode.startswith("QGMMA.64x32x32.F32.E4M3.E4M3")
        for ins in sk.instructions
        if ins.opcode.startswith("QGMMA")
    )
    assert not sk.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)


def test_ragged_m_keeps_the_scales_on_the_stage(tmp_path):
    # M % 4 != 0 once dropped both scale TMAs (the scale rows were M floats apart, not 16-byte
    # aligned) and read the scales with global loads; with each row padded (quant.aligned_scales)
    # a 333-row problem is built like a 4096-row one: no LDG anywhere, the scales read from smem
    from bsprof.kernels.fp8_blockwise.launch import build_kwargs

    mnkl = (333, 5120, 3584, 1)
    kw, static = build_kwargs("optimized", {}, mnkl)
    assert static and kw["sfa_tma"] and kw["sfb_tma"]
    (fa,) = analyze_cubin(fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=mnkl))
    assert fa.count("LDG") == 0
    assert (
        sum(ins.opcode.startswith("LDS") for ins in (fa.instructions[i] for i in _inner_kloop(fa).own_instructions))
        >= 3
    )


def test_one_warpgroup_tile_copies_three_boxes_a_stage(tmp_path):
    # a 64x16 tile (DeepGEMM's at 128x576x7168) stashes its B scales per tile: its producer issues
    # A, A-scale and B copies (DeepGEMM's three) where the B-scale TMA adds a fourth; the K-loop
    # reads the B scale from the stash (one more LDS address, no stage slot)
    def tma_loads(**knobs):
        cubin = fp8_blockwise.compile_cubin(
            "optimized",
            tmp_path / str(len(knobs)),
            mnkl=(128, 576, 7168, 1),
            tile_m=64,
            tile_n=16,
            cluster_m=1,
            cluster_n=1,
            **knobs,
        )
        (fa,) = analyze_cubin(cubin)
        assert {i.opcode for i in fa.instructions if i.opcode.startswith("QGMMA")} == {"QGMMA.64x16x32.F32.E4M3.E4M3"}
        return sum(ins.opcode.startswith("UTMALDG") for ins in fa.instructions)

    stash, by_tma = tma_loads(), tma_loads(sfb_tma=1)
    assert stash * 4 == by_tma * 3, (stash, by_tma)


def test_a_192_row_tile_is_one_wave_of_three_consumer_warpgroups(tmp_path):
    # tile_m=192: four warpgroups (512 threads), the consumers at 152 registers (40 + 3 x 152 of
    # the 512 a thread the register file gives four warpgroups), one wave of 4 QGMMA a K block a
    # warpgroup, the epilogue barrier over the three consumers, and no spills
    cubin = fp8_blockwise.compile_cubin(
        "optimized", tmp_path, mnkl=(4096, 4096, 7168, 1), mma_tiler=(192, 128), cluster=(1, 2)
    )
    (fa,) = analyze_cubin(cubin)
    assert fa.count("QGMMA") == 4 * 4  # 4 a K block; the K-loop runs the ring's 4 blocks a trip
    assert not fa.features["register_spills"].present and "LOCAL:0" in _res_usage(cubin)
    assert any("TRY_ALLOC" in ins.text and "0x98" in ins.text for ins in fa.instructions)
    assert any(ins.opcode.startswith("BAR.SYNC") and ins.text.rstrip(" ;").endswith("0x180") for ins in fa.instructions)
    assert not fa.features["register_spills"].present


def test_ring_unroll_folds_the_stage_index_into_immediates(tmp_path, built):
    # ring_unroll: at 4096^3 a tile's 32 K blocks are a multiple of the 4-stage ring, so the K-loop
    # runs 4 blocks a trip, each at a constant stage: its barrier test names the stage by an
    # immediate offset and the stage arithmetic (ULEA / USEL / UISETP on the ring index) goes
    # (`optimized` unrolls by default: ncu at the base clock 0.981-0.991 of the
    # one-block loop's cycles on the M = 4096 rows)
    _, unrolled = built("optimized")
    (opt,) = analyze_cubin(fp8_blockwise.compile_cubin("optimized", tmp_path, mnkl=MNKL, ring_unroll=0))
    one, four = _inner_kloop(opt), _inner_kloop(unrolled)
    assert (one.mma, four.mma) == (8, 32)

    def per_block(loop):
        return len(loop.own_instructions) / (loop.mma / 8)

    assert per_block(four) < 0.9 * per_block(one)  # 184 against 215 a K block
    body = [unrolled.instructions[i] for i in four.own_instructions]
    tests = [
        ins.text
        for ins in body
        if ins.opcode.startswith("SYNCS.PHASECHK") and "TRYWAIT" not in ins.opcode and not ins.guard
    ]
    assert len(tests) == 4 and all("+0x" in t for t in tests[:3])
    assert not any(ins.opcode.startswith(("USEL", "UISETP")) for ins in body)
    assert not unrolled.features["register_spills"].present


# the module that holds each role's code, and the role's WarpScope
_ROLE_OF_MODULE = {
    "producer.py": "ProducerWarp",
    "mainloop.py": "ConsumerWarpgroups",
    "consumer.py": "ConsumerWarpgroups",
    "schedule.py": "ConsumerWarpgroups",
    "epilogue.py": "ConsumerWarpgroups",
    "split_k.py": "ConsumerWarpgroups",
}


def test_roles_name_the_warp_group_of_every_module(built):
    # line info names only the innermost source line, so a WarpScope opened in kernel.py alone
    # leaves the code of the role modules without its warp group (`bsprof sass --by roles` would
    # show bare phases and helper names): every module opens its role's scope itself
    _, fa = built("optimized")
    assert fa.roles_source == "scope"
    by_module: dict[str, set] = {}
    for role, ins in zip(fa.roles, fa.instructions):
        name = Path(ins.file).name if ins.file else None
        if name in _ROLE_OF_MODULE:
            by_module.setdefault(name, set()).add(role)
    assert {"producer.py", "mainloop.py", "epilogue.py"} <= set(by_module)
    for name, roles in by_module.items():
        assert all(r.split("/")[0] == _ROLE_OF_MODULE[name] for r in roles), (name, sorted(roles))
    # the consumers' K-loop (wgmma issue and promotion), the producer's TMA loads, the epilogue's stores
    kloop = Counter(fa.roles[i] for i in _inner_kloop(fa).own_instructions)
    assert kloop.most_common(1)[0][0] == "ConsumerWarpgroups/kloop", kloop
    mma = {r for r, ins in zip(fa.roles, fa.instructions) if ins.opcode.startswith("QGMMA") and ins.file}
    assert "ConsumerWarpgroups/kloop" in mma
    loads = {r for r, ins in zip(fa.roles, fa.instructions) if ins.opcode.startswith("UTMALDG")}
    assert loads == {"ProducerWarp/load"}, loads
    stores = {r for r, ins in zip(fa.roles, fa.instructions) if ins.opcode.startswith(("UTMASTG", "STSM"))}
    assert stores and all(r.startswith("ConsumerWarpgroups/epilogue") for r in stores), stores


def test_mma_detail_says_which_k_loop_loads_the_next_mma_waits_for(tmp_path, built):
    """From the control bits: with the A scales by LDG (sfa_tma=0) the compiler waits for the loads issued
    last in a pass before the next pass's first wgmma, and `sass --mma-detail` names them with that wait;
    the B scale by LDG (sfb_tma=0,sfb_smem=0) is first waited on after the K block's wgmmas issued."""
    import json

    from click.testing import CliRunner

    from bsprof.cli import cli

    sfa = fp8_blockwise.compile_cubin("optimized", tmp_path / "a", mnkl=MNKL, sfa_tma=False)
    sfb = fp8_blockwise.compile_cubin("optimized", tmp_path / "b", mnkl=MNKL, sfb_tma=False, sfb_smem=False)
    loads = {}
    for name, cubin in (("sfa", sfa), ("sfb", sfb)):
        r = CliRunner().invoke(cli, ["sass", str(cubin), "--mma-detail", "--json"], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        doc = json.loads(r.output)
        (kl,) = doc["functions"][0]["mma_detail"]
        loads[name] = kl["loads"]
    held = [x for x in loads["sfa"] if x["mma_before_wait"] == 0]
    assert held and len(held) < len(loads["sfa"]) and all(x["wait"].startswith("FMUL") for x in held)
    assert loads["sfb"] and all(x["mma_before_wait"] >= 4 for x in loads["sfb"])
    r = CliRunner().invoke(cli, ["sass", str(sfa), "--mma-detail"], catch_exceptions=False)
    assert f"loads the next MMA waits for: {len(held)} of {len(loads['sfa'])} LDGs:" in r.output
    assert f"{held[0]['pc']:#06x} (waited at FMUL {held[0]['wait_pc']:#06x})" in r.output
