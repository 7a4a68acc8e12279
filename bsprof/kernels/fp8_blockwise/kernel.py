"""The FP8-blockwise Hopper GEMM in CuTe DSL: D (bf16) = A · Bᵀ with DeepSeek-V3 block scales.

One persistent, warp-specialized kernel; every optimization is a constructor switch, so the
"baseline" and "optimized" variants (see ``config.py``) are the same source with different knobs.

CTA = 3 warpgroups (2 for a 64-row tile, 4 for a 192-row one). Warpgroup 0 is the producer (warp 0 issues the TMA loads
of A and B into an ``ab_stage``-deep shared-memory ring guarded by mbarriers; the other three warps
only give their registers away). Warpgroups 1 and 2 are the consumers: each owns 64 rows of a 128-row wave and
issues wgmma (QGMMA in SASS) for one 128-wide K block into a fresh register accumulator, waits
for it, then promotes it into the float32 total with the block scales,
``total += blk * sfa[row, kb] * sfb[n_blk, kb]`` (DeepGEMM-style promotion). A 256-row tile is two
waves through the same block accumulator. The thread's A scales are read from the stage (they
arrive by TMA with it) or loaded from global memory two K blocks before use; its B scales come
from the stage (by TMA), a per-tile smem stash or global memory. The epilogue is either a direct
(SIMT) store of the bf16 tile to global memory or a staged smem + TMA store.

Switches:
``tile_m``        64 (one consumer warpgroup: the whole tile is its 64-row wave), 128 or 256
                  (one or two 128-row waves of two consumer warpgroups), or 192 (one wave of
                  three consumer warpgroups: each one's wgmma wait and promotion lies under two
                  other warpgroups' wgmma instead of one)
``tile_n``        a multiple of 16 up to 256 whose tiles cross at most one 128-wide B-scale
                  boundary (config.can_implement has the register and scale-block rules)
``cluster_m/_n``  2x1 multicasts B, 1x2 multicasts A, 2x2 both
``ab_stage``      depth of the smem ring (0 = as many as the shared-memory budget allows)
``epilogue``      "direct" (registers -> global), "tma" (3-4 x rows x 32 smem ring -> TMA store)
``promote``       "serial": wait for the K block's wgmma, then promote (the other warpgroup keeps
                  the tensor cores busy); "rescale": no block accumulator: the totals, kept
                  divided by the current block's scale product, are multiplied by s_(k-1)/s_k
                  before block k's wgmma accumulates into them (fits a 128x256 tile; all of K
                  accumulates in the tensor cores, so the error grows with K: the launcher caps K)
``sfa_tma``       the A scales of a stage arrive by TMA with it (smem reads in the K-loop instead
                  of global loads); needs a shape-specialized build (and the operands' aligned
                  scale rows, quant.aligned_scales)
``swizzle``       persistent-scheduler swizzle
``sfb_smem``      stage the tile's B scales in smem once per tile (``sfb_kb`` K blocks of them)
``consumer_regs``/``producer_regs``  the setmaxnreg split
``schedule``      "coop": both consumer warpgroups share every tile (64 rows each per wave) and
                  run the epilogue together; "pingpong": each warpgroup owns whole 128-row tiles
                  (two 64-row waves), the warpgroups take turns on the tensor cores (an ordered
                  pair of named barriers) and one's epilogue runs under the other's K-loop
``uniform_desc``  partition the smem operands for a warp-uniform thread index (wgmma descriptors in
                  uniform registers, no R2UR in the K-loop); measured neutral, off by default
``sfb_tma``       the B scale of a stage arrives by TMA with it (a 16-byte box of 4 K blocks'
                  scales): no per-tile smem stash, no named barrier or global load at a tile start;
                  needs sfa_tma, tile_n dividing 128 and K % 512 == 0
``elect_release`` one elected lane per warp releases a stage on every CTA of the cluster (the
                  library's lane-indexed release costs an S2R in the K-loop at 232 registers)
``peek``          test the next stage's full barrier (non-blocking) right after releasing this
                  one, before the promotion, and skip the blocking wait when it had landed
``epi_split``     coop: each warpgroup stores its own 64 rows of a wave (own smem ring, store warp,
                  named barrier): no CTA-wide barrier at a tile end
``launch_cluster`` launch a 1x1 configuration with the cluster attribute (1x1x1 clusters); off, it
                  launches as a plain grid (clusters of 2 or 4 always carry the attribute)
``split_k``       work units per output tile, each over its own range of K blocks (serial split-K
                  for problems whose tiles alone leave SMs idle): a unit stores its fp32 partial
                  in a global workspace and counts itself in on the tile's counter; the last to
                  arrive sums every partial in split order (the same bits whichever unit that is),
                  stores the tile and resets the counter for the next launch
``timing``        compile in the event recorder (``bsprof.kernels.timing_recorder``)
``delay_kloop``   extra clock64-spin cycles per K block in the consumer K-loop (0 = no code)
``delay_phase1``  extra clock64-spin cycles in epilogue phase 1 (0 = no code)
"""


from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.fp8_blockwise.config import (SFB_SMEM_KB, SFB_TMA_SLOT, can_implement, consumer_wgs,
                                                 epi_stages, epi_tile_cols, wave_rows,
                                                 max_smem_stages, shifted_start, split_range,
                                                 two_scale_blocks)
from bsprof.kernels.tile_order import TileOrder, tile_counts
from bsprof.kernels.timing_recorder import EV, TimingRecorder

BLOCK_K = 128           # scale block along K == CTA tile K
SFB_TMA_GROUP = 4       # B scales per TMA box (16 bytes, the smallest box): K blocks 4j..4j+3


class Fp8BlockwiseGemm:
    def __init__(
        self,
        *,
        tile_n: int = 128,
        cluster_m: int = 1,
        cluster_n: int = 1,
        tile_m: int = 128,
        ab_stage: int = 0,
        epilogue: str = "direct",
        promote: str = "serial",
        timing: bool = False,
        delay_kloop: int = 0,
        delay_phase1: int = 0,
        sample_every: int = 1,
        consumer_regs: int = 232,
        producer_regs: int = 40,
        swizzle: int = 1,
        sfb_smem: bool = False,
        schedule: str = "coop",
        uniform_desc: bool = False,
        sfa_tma: bool = False,
        elect_release: bool = False,
        peek: bool = False,
        sfb_tma: bool = False,
        epi_split: bool = False,
        launch_cluster: bool = False,
        split_k: int = 1,
        shift_last_m: bool = False,
        sfb_kb: int = SFB_SMEM_KB,
        a_rows: int = 0,
        ring_unroll: bool = False,
    ):
        if epi_split == "auto" or int(swizzle) < 1:
            raise ValueError("epi_split='auto' and swizzle=0 are resolved per problem by the launcher; "
                             "pass epi_split 0 or 1 and swizzle >= 1")
        why = can_implement(dict(
            tile_m=tile_m, tile_n=tile_n, cluster_m=cluster_m, cluster_n=cluster_n, epilogue=epilogue,
            promote=promote, schedule=schedule, swizzle=swizzle, sfb_smem=sfb_smem, sfa_tma=sfa_tma,
            sfb_tma=sfb_tma, peek=peek, epi_split=epi_split, split_k=split_k))
        if why:
            raise ValueError(why)
        self.tile_n = tile_n
        self.cluster_m = cluster_m
        self.cluster_n = cluster_n
        self.tile_m = tile_m
        self.pingpong = schedule == "pingpong"
        self.uniform_desc = bool(uniform_desc)
        # A scales ride the TMA of their stage (DeepGEMM does the same): the K-loop reads them
        # from smem after the stage's barrier instead of from global memory two blocks ahead
        self.sfa_tma = bool(sfa_tma)
        # a wave is the rows one round of wgmma covers: 128 in coop (two warpgroups x 64), 64 in
        # ping-pong (one warpgroup). A 256-row coop tile is two 128-row waves (DeepGEMM's
        # WAVE_BLOCK_M): each warpgroup runs 64 rows of wave 0, then of wave 1, reusing one block
        # accumulator; a 128-row ping-pong tile is two 64-row waves of one warpgroup
        # A 64-row tile is one warpgroup's wave (DeepGEMM's BLOCK_M = 64 at small M): a CTA of
        # one producer and one consumer warpgroup, so twice the CTAs share M = 128 and each reads
        # its A rows from smem once per K block instead of each of two warpgroups reading B
        self.one_wg = tile_m == 64
        # consumer warpgroups, 64 rows each per wave
        self.consumer_wgs = consumer_wgs(tile_m)
        self.wave_m = wave_rows(tile_m, self.pingpong)
        self.waves = tile_m // self.wave_m
        # rows of A (and its scales) one TMA box brings: the whole wave, or for a problem of fewer
        # rows than a one-wave tile (config.a_box_rows) only the rows up to M, rounded to 8. The
        # wave's other smem rows are never written: the products they feed land in accumulator
        # rows past M, which are never stored (each output row reads only its own A row)
        self.a_rows = int(a_rows) or self.wave_m
        if self.a_rows != self.wave_m and (self.waves != 1 or cluster_n != 1 or self.a_rows % 8
                                           or not 8 <= self.a_rows < self.wave_m):
            raise ValueError(f"a_rows={a_rows} needs a tile loaded in one box a stage (64 rows, or 128 in the "
                             "coop schedule) without A multicast (cluster_n=1), and a multiple of 8 below its rows")
        self.ab_stage_req = ab_stage
        self.epilogue = epilogue
        self.promote = promote
        self.timing = bool(timing)
        self.delay_kloop = int(delay_kloop)
        self.delay_phase1 = int(delay_phase1)
        self.sample_every = int(sample_every)
        self.consumer_regs = consumer_regs
        if self.consumer_wgs == 3:
            # four warpgroups share 64K registers: 40 + 3 x 152 per thread (a consumer's one
            # wave of 64 totals and 64 block registers compiles without spills at 152)
            self.consumer_regs = min(consumer_regs, 152)
        self.swizzle = int(swizzle)
        # B scales of the tile's N block(s) for every K block, staged in smem at tile start
        # (DeepGEMM does the same): the K-loop reads them with LDS instead of a uniform LDG
        # whose R2UR move stalls on the load (ncu: long-scoreboard on the scale FMUL)
        self.sfb_smem = bool(sfb_smem)
        self.sfb_kb = int(sfb_kb)        # K blocks the stash holds (config.sfb_stash_kb)
        # a shape-specialized build whose last M tile would run past M computes rows M - tile_m ..
        # M - 1 instead (_shift_rows): its A and A-scale boxes then stay inside the operands
        self.shift_last_m = bool(shift_last_m)
        # a tile whose columns may straddle two 128-wide B-scale blocks reads two B scales
        self.two_sfb = two_scale_blocks(tile_n)
        self.producer_regs = producer_regs
        # A stage is released by one elected lane per warp, arriving on each CTA of the cluster
        # by constant rank. The library's release picks lanes 0..n-1 by thread index, a value
        # ptxas rematerializes with S2R inside the K-loop at 232 registers (ncu: the S2R -> LOP3
        # chain sat between the second wave's QGMMA issues)
        self.elect_release = bool(elect_release)
        # test (without blocking) the next stage's full barrier right after releasing this one,
        # before the promotion: the barrier read's latency hides behind 128 FFMA instead of
        # holding the next block's issue (ncu: TRYWAIT + its branch were 5% of the samples;
        # DeepGEMM's 8-way unrolled K-loop gets the same from ptxas)
        self.peek = bool(peek)
        # K-loop unrolled by the ring depth where a tile's K blocks are a multiple of it (static
        # shapes): every trip starts at the same stage, so each block's stage index is a constant
        # and its barrier, scale and descriptor addresses fold into immediates (DeepGEMM's K-loop
        # runs 16 fewer instructions a K block so); elsewhere the loop takes one block a trip
        self.ring_unroll = bool(ring_unroll)
        # the B scale of each stage rides its TMA too (a 16-byte box of 4 K blocks' scales): no
        # per-tile stash, so the tile start has no named barrier and no global load
        self.sfb_tma = bool(sfb_tma)
        # A 1x1 configuration launches as a plain grid, as DeepGEMM launches it: launched as 1x1x1
        # clusters, the two CTAs of a B tile were served from L2 twice instead of once (ncu, 64x64
        # tiles at 128x4096x7168: 87 MB read from L2 against 48 MB, 16.7 us against 12.9)
        self.launch_cluster = bool(launch_cluster) or cluster_m * cluster_n > 1
        self.split_k = int(split_k)

        self.acc_dtype = cutlass.Float32
        self.tile_shape_mnk = (tile_m, tile_n, BLOCK_K)
        self.cluster_shape_mn = (cluster_m, cluster_n)
        self.tile_order = TileOrder(self.cluster_shape_mn, self.swizzle)
        self.atom_layout_mnk = (1, 1, 1) if self.pingpong or self.one_wg else (self.consumer_wgs, 1, 1)
        self.num_mma_warp_groups = self.consumer_wgs
        self.threads_per_wg = 128
        self.threads_per_cta = (1 + self.num_mma_warp_groups) * self.threads_per_wg
        # the consumers that share a tile: their stage releases, epilogue barrier and TMA store
        self.num_mma_threads = self.num_mma_warp_groups * self.threads_per_wg
        self.load_warp_id = 0
        self.epi_store_warp_id = 4
        self.buffer_align_bytes = 1024
        self.epi_stage = epi_stages(sfa_tma)
        # B is the operand shared by the CTAs of a 2x1 cluster (same N tile, different M tiles)
        # (a 1x2 cluster shares the A tile: same M tile, two N tiles)
        self.num_mcast_ctas_a = cluster_n
        self.num_mcast_ctas_b = cluster_m
        self.epilog_sync_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=self.num_mma_threads)
        # coop: each warpgroup stores its own 64 rows of a wave (its own smem ring, store warp and
        # named barrier, as ping-pong does), so nothing ties the two warpgroups together at a tile
        # end and one's epilogue can run while the other is still in its K-loop
        self.epi_split = bool(epi_split)
        self.epi_per_wg = self.pingpong or self.epi_split
        self.epi_rows = 64 if self.epi_per_wg else self.wave_m
        # threads that store one C tile: one warpgroup (ping-pong, epi_split) or both
        self.epi_threads = self.threads_per_wg if self.epi_per_wg else self.num_mma_threads
        # a ping-pong epilogue shares the SM's issue slots with the other warpgroup's K-loop: its
        # injected delay naps between clock reads so it costs time, not issue bandwidth
        self.phase1_backoff_ns = 64 if self.pingpong else 0

    # ----------------------------------------------------------------------------------------
    # host-side setup
    # ----------------------------------------------------------------------------------------
    def _setup(self):
        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype, self.b_dtype,
            self.a_layout.sm90_mma_major_mode(), self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype, self.atom_layout_mnk, tiler_mn=(64, self.tile_n),
        )
        self.cta_layout_mnk = cute.make_layout((*self.cluster_shape_mn, 1))
        self.epi_tile = (self.epi_rows, epi_tile_cols(self.tile_n))
        # ping-pong: each warpgroup has its own ring of epilogue buffers
        self.epi_buffers = self.epi_stage * (self.num_mma_warp_groups if self.epi_per_wg else 1)
        max_stage = max_smem_stages(self.tile_m, self.tile_n, wave_m=self.wave_m, epi_per_wg=self.epi_per_wg,
                                    sfa_tma=self.sfa_tma, sfb_tma=self.sfb_tma, sfb_smem=self.sfb_smem,
                                    epilogue=self.epilogue, sfb_kb=self.sfb_kb)
        self.ab_stage = max_stage if self.ab_stage_req <= 0 else min(self.ab_stage_req, max_stage)
        if self.ab_stage < 2:
            raise ValueError(f"tile {self.tile_m}x{self.tile_n} leaves room for {self.ab_stage} smem stages; need >= 2")

        a_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.a_layout, self.a_dtype, BLOCK_K), self.a_dtype)
        self.a_smem_layout_staged = cute.tile_to_shape(
            a_atom, (self.wave_m, BLOCK_K, self.ab_stage * self.waves), order=(0, 1, 2))
        # one TMA box of A: the first a_rows rows of a wave's buffer (the same swizzled rows)
        self.a_box_layout = cute.tile_to_shape(a_atom, (self.a_rows, BLOCK_K), order=(0, 1))
        b_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.b_layout, self.b_dtype, BLOCK_K), self.b_dtype)
        self.b_smem_layout_staged = cute.tile_to_shape(
            b_atom, (self.tile_n, BLOCK_K, self.ab_stage), order=(0, 1, 2))
        c_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.c_layout, self.c_dtype, self.epi_tile[1]), self.c_dtype)
        self.epi_smem_layout_staged = cute.tile_to_shape(
            c_atom, (*self.epi_tile, self.epi_buffers), order=(0, 1, 2))
        # one column of wave_m A scales per (stage, wave), indexed like the A buffers
        self.sfa_smem_layout_staged = cute.make_layout((self.wave_m, 1, self.ab_stage * self.waves))
        # one 4-float box of B scales per stage (N block, K blocks 4j..4j+3), K contiguous
        self.sfb_smem_layout_staged = cute.make_layout(
            (1, SFB_TMA_GROUP, self.ab_stage), stride=(SFB_TMA_GROUP, 1, SFB_TMA_SLOT))

    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,      # (M, K, L) fp8, K-major
        b: cute.Tensor,      # (N, K, L) fp8, K-major
        sfa: cute.Tensor,    # (M, K/128, L) f32, M-major
        sfb: cute.Tensor,    # (ceil(N/128), K/128, L) f32
        c: cute.Tensor,      # (M, N, L) bf16, N-major
        tbuf: cute.Tensor,   # timing event buffer (int64); unused in plain builds
        ws: cute.Tensor,     # split-K fp32 partials (flat); unused when split_k == 1
        cnt: cute.Tensor,    # split-K arrivals per output tile (int32, zero between launches)
        tile_slots: cutlass.Int32,
        max_active_clusters: cutlass.Constexpr,
        stream,
    ):
        self.a_dtype = a.element_type
        self.b_dtype = b.element_type
        self.c_dtype = c.element_type
        self.a_layout = tensor_utils.LayoutEnum.from_tensor(a)
        self.b_layout = tensor_utils.LayoutEnum.from_tensor(b)
        self.c_layout = tensor_utils.LayoutEnum.from_tensor(c)
        self._setup()

        a_smem_layout = cute.slice_(self.a_smem_layout_staged, (None, None, 0))
        b_smem_layout = cute.slice_(self.b_smem_layout_staged, (None, None, 0))
        a_op = (cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp() if self.num_mcast_ctas_a > 1
                else cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp())
        tma_atom_a, tma_tensor_a = cute.nvgpu.cpasync.make_tiled_tma_atom(
            a_op, a, self.a_box_layout, (self.a_rows, BLOCK_K), num_multicast=self.num_mcast_ctas_a)
        b_op = (cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp() if self.num_mcast_ctas_b > 1
                else cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp())
        tma_atom_b, tma_tensor_b = cute.nvgpu.cpasync.make_tiled_tma_atom(
            b_op, b, b_smem_layout, (self.tile_n, BLOCK_K), num_multicast=self.num_mcast_ctas_b)
        tma_atom_sfa, tma_tensor_sfa = tma_atom_a, tma_tensor_a   # placeholders when unused
        if cutlass.const_expr(self.sfa_tma):
            tma_atom_sfa, tma_tensor_sfa = cute.nvgpu.cpasync.make_tiled_tma_atom(
                cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), sfa,
                cute.make_layout((self.a_rows, 1)), (self.a_rows, 1))
        tma_atom_sfb, tma_tensor_sfb = tma_atom_a, tma_tensor_a   # placeholders when unused
        if cutlass.const_expr(self.sfb_tma):
            tma_atom_sfb, tma_tensor_sfb = cute.nvgpu.cpasync.make_tiled_tma_atom(
                cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), sfb,
                cute.slice_(self.sfb_smem_layout_staged, (None, None, 0)), (1, SFB_TMA_GROUP))
        epi_smem_layout = cute.slice_(self.epi_smem_layout_staged, (None, None, 0))
        tma_atom_c, tma_tensor_c = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), c, epi_smem_layout, self.epi_tile)

        # swizzle > 1: consecutive clusters walk `swizzle` cluster columns before the next M tile,
        # so one wave touches ~132/swizzle A strips and `swizzle` B strips (L2 reuse on big problems)
        tiles = self._work_tiles(c)
        grid = self.tile_order.grid(tiles, max_active_clusters)
        tile_walk = self.tile_order.kernel_arg(tiles)

        epi_cosize = cute.cosize(self.epi_smem_layout_staged) if self.epilogue != "direct" else 8
        sfb_words = 2 * self.sfb_kb if self.sfb_smem and not self.sfb_tma else 4
        sfa_words = cute.cosize(self.sfa_smem_layout_staged) if self.sfa_tma else 4
        sfbt_words = SFB_TMA_SLOT * self.ab_stage if self.sfb_tma else 4

        @cute.struct
        class SharedStorage:
            mainloop_pipeline_array_ptr: cute.struct.MemRange[cutlass.Int64, self.ab_stage * 2]
            # ping-pong: the tensor-core turn of even / odd tiles (one mbarrier each)
            turn_mbar: cute.struct.MemRange[cutlass.Int64, 2]
            sA: cute.struct.Align[
                cute.struct.MemRange[self.a_dtype, cute.cosize(self.a_smem_layout_staged)],
                self.buffer_align_bytes]
            sB: cute.struct.Align[
                cute.struct.MemRange[self.b_dtype, cute.cosize(self.b_smem_layout_staged)],
                self.buffer_align_bytes]
            sC: cute.struct.Align[cute.struct.MemRange[self.c_dtype, epi_cosize], self.buffer_align_bytes]
            sSFB: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfb_words], 16]
            sSFA: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfa_words], 128]
            sSFBT: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfbt_words], 128]
            # split-K: whether this unit arrived last, from the thread that counted it in
            split_last: cute.struct.MemRange[cutlass.Int32, 1]

        self.shared_storage = SharedStorage

        self.kernel(
            tma_atom_a, tma_tensor_a, tma_atom_b, tma_tensor_b, tma_atom_c, tma_tensor_c,
            tma_atom_sfa, tma_tensor_sfa, tma_atom_sfb, tma_tensor_sfb, sfa, sfb, c, tbuf, (ws, cnt), tile_slots,
            self.tiled_mma, self.cta_layout_mnk,
            self.a_smem_layout_staged, self.b_smem_layout_staged, self.epi_smem_layout_staged, tile_walk,
        ).launch(
            grid=grid,
            block=[self.threads_per_cta, 1, 1],
            cluster=(*self.cluster_shape_mn, 1) if self.launch_cluster else None,
            min_blocks_per_mp=1,
            stream=stream,
        )

    # ----------------------------------------------------------------------------------------
    # device kernel
    # ----------------------------------------------------------------------------------------
    @cute.kernel
    def kernel(
        self,
        tma_atom_a: cute.CopyAtom,
        mA_mkl: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB_nkl: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC_tma: cute.Tensor,
        tma_atom_sfa: cute.CopyAtom,
        mSFA_tma: cute.Tensor,
        tma_atom_sfb: cute.CopyAtom,
        mSFB_tma: cute.Tensor,
        mSFA: cute.Tensor,
        mSFB: cute.Tensor,
        mC_mnl: cute.Tensor,
        tbuf: cute.Tensor,
        split_ws: tuple,
        tile_slots: cutlass.Int32,
        tiled_mma: cute.TiledMma,
        cta_layout_mnk: cute.Layout,
        a_smem_layout_staged: cute.ComposedLayout,
        b_smem_layout_staged: cute.ComposedLayout,
        epi_smem_layout_staged: cute.ComposedLayout,
        tile_walk: tuple,
    ):
        # on self, not a local: the DSL would try to carry a Python object through runtime `if`s
        self.rec = TimingRecorder(self.timing, self.threads_per_cta // 32, tile_slots, self.sample_every)
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        bidx, bidy, bidz = cute.arch.block_idx()
        gdx, gdy, _ = cute.arch.grid_dim()
        cta_linear = bidx + bidy * gdx + bidz * gdx * gdy

        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_b)
            if cutlass.const_expr(self.epilogue != "direct"):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_c)
            if cutlass.const_expr(self.sfa_tma):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_sfa)
            if cutlass.const_expr(self.sfb_tma):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_sfb)

        cta_rank_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord_mnk = cta_layout_mnk.get_flat_coord(cta_rank_in_cluster)
        b_mcast_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord_mnk, mode=0)
        b_mcast_mask = b_mcast_mask if cutlass.const_expr(self.num_mcast_ctas_b > 1) else 0
        a_mcast_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord_mnk, mode=1)
        a_mcast_mask = a_mcast_mask if cutlass.const_expr(self.num_mcast_ctas_a > 1) else 0

        a_smem_layout = cute.slice_(a_smem_layout_staged, (None, None, 0))
        b_smem_layout = cute.slice_(b_smem_layout_staged, (None, None, 0))
        tma_copy_bytes = self.waves * self.a_rows * BLOCK_K + cute.size_in_bytes(self.b_dtype, b_smem_layout)
        if cutlass.const_expr(self.sfa_tma):
            tma_copy_bytes += self.waves * self.a_rows * 4
        if cutlass.const_expr(self.sfb_tma):
            tma_copy_bytes += SFB_TMA_GROUP * 4

        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        mcast_size = self.num_mcast_ctas_a + self.num_mcast_ctas_b - 1
        # every consumer warp that read a stage releases it: both warpgroups in coop, the one
        # that owns the tile in ping-pong
        consumer_arrive_cnt = mcast_size * (1 if self.pingpong else self.num_mma_warp_groups) * 4
        mainloop_pipeline = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.mainloop_pipeline_array_ptr.data_ptr(),
            num_stages=self.ab_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumer_arrive_cnt),
            tx_count=tma_copy_bytes,
            cta_layout_vmnk=cute.make_layout((1, *cta_layout_mnk.shape)),
            defer_sync=True,
        )
        if cutlass.const_expr(self.pingpong):
            if warp_idx == 0:
                with cute.arch.elect_one():
                    for j in cutlass.range_constexpr(2):
                        # every thread of the warpgroup that hands the turn over arrives
                        cute.arch.mbarrier_init(storage.turn_mbar.data_ptr() + j, self.threads_per_wg)
                cute.arch.mbarrier_init_fence()
        pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mn, is_relaxed=True)

        sA = storage.sA.get_tensor(a_smem_layout_staged.outer, swizzle=a_smem_layout_staged.inner)
        sB = storage.sB.get_tensor(b_smem_layout_staged.outer, swizzle=b_smem_layout_staged.inner)

        # (bM, bK, RestM, RestK, RestL) etc.
        gA_mkl = cute.local_tile(mA_mkl, (self.a_rows, BLOCK_K), (None, None, None))
        gB_nkl = cute.local_tile(mB_nkl, (self.tile_n, BLOCK_K), (None, None, None))

        a_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (0, None, 0)).shape)
        sA_box = sA
        if cutlass.const_expr(self.a_rows != self.wave_m):
            sA_box = cute.local_tile(sA, (self.a_rows, BLOCK_K), (0, 0, None))
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_atom_a, cluster_coord_mnk[1], a_cta_layout,
            cute.group_modes(sA_box, 0, 2), cute.group_modes(gA_mkl, 0, 2))
        b_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (None, 0, 0)).shape)
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_atom_b, cluster_coord_mnk[0], b_cta_layout,
            cute.group_modes(sB, 0, 2), cute.group_modes(gB_nkl, 0, 2))

        # the layout is rebuilt here: a host-side layout object cannot be used inside the kernel
        sSFA = storage.sSFA.get_tensor(cute.make_layout((self.wave_m, 1, self.ab_stage * self.waves)))
        tFsF, tFgF = None, None
        if cutlass.const_expr(self.sfa_tma):
            gSFA = cute.local_tile(mSFA_tma, (self.a_rows, 1), (None, None, None))
            sSFA_box = sSFA
            if cutlass.const_expr(self.a_rows != self.wave_m):
                sSFA_box = cute.local_tile(sSFA, (self.a_rows, 1), (0, 0, None))
            tFsF, tFgF = cute.nvgpu.cpasync.tma_partition(
                tma_atom_sfa, 0, cute.make_layout(1),
                cute.group_modes(sSFA_box, 0, 2), cute.group_modes(gSFA, 0, 2))
        sSFBT = storage.sSFBT.get_tensor(cute.make_layout(
            (1, SFB_TMA_GROUP, self.ab_stage), stride=(SFB_TMA_GROUP, 1, SFB_TMA_SLOT)))
        tGsG, tGgG = None, None
        if cutlass.const_expr(self.sfb_tma):
            # (box, N block, group of 4 K blocks, L)
            gSFB = cute.local_tile(mSFB_tma, (1, SFB_TMA_GROUP), (None, None, None))
            tGsG, tGgG = cute.nvgpu.cpasync.tma_partition(
                tma_atom_sfb, 0, cute.make_layout(1),
                cute.group_modes(sSFBT, 0, 2), cute.group_modes(gSFB, 0, 2))

        warp_group_idx = cute.arch.make_warp_uniform(tidx // self.threads_per_wg)
        k_tile_cnt = cute.size(gA_mkl, mode=[3])
        # wave-row A tiles: the second wave of a tile can lie wholly past M; it then
        # re-loads the last real A tile (never stored) instead of indexing past the tensor,
        # which static layouts do not tolerate
        a_mtiles = cute.size(gA_mkl, mode=[2])
        self.m_shift = self._shift_rows(cute.size(mA_mkl, mode=[0]))
        self.m_last = (cute.size(mA_mkl, mode=[0]) + self.tile_m - 1) // self.tile_m - 1 if self.m_shift else 0
        tAgA_s, tFgF_s = tAgA, tFgF
        if cutlass.const_expr(self.m_shift > 0):
            # the shifted last tile's wave w is wave-row tile w of a view that starts at its first row
            gA_s = cute.local_tile(cute.domain_offset((self.m_shift, 0, 0), mA_mkl), (self.wave_m, BLOCK_K),
                                   (None, None, None))
            _, tAgA_s = cute.nvgpu.cpasync.tma_partition(
                tma_atom_a, cluster_coord_mnk[1], a_cta_layout,
                cute.group_modes(sA, 0, 2), cute.group_modes(gA_s, 0, 2))
            if cutlass.const_expr(self.sfa_tma):
                gSFA_s = cute.local_tile(cute.domain_offset((self.m_shift, 0, 0), mSFA_tma), (self.wave_m, 1),
                                         (None, None, None))
                _, tFgF_s = cute.nvgpu.cpasync.tma_partition(
                    tma_atom_sfa, 0, cute.make_layout(1),
                    cute.group_modes(sSFA, 0, 2), cute.group_modes(gSFA_s, 0, 2))

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)

        scope = WarpScope("ProducerWarp", warp_start=0, warp_end=4)
        if warp_group_idx == 0:
            cute.arch.setmaxregister_decrease(self.producer_regs)
        if warp_idx == self.load_warp_id:
            walk = self.tile_order.kernel_side(tile_walk, self._work_tiles(mC_mnl))
            unit, units, step = self.tile_order.start(walk)
            prod_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stage)
            tile_count = cutlass.Int32(0)
            while unit < units:
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
                tile_coord_mnl = self.tile_order.cta_tile(unit, walk)
                k_cnt = k_tile_cnt
                kb0 = 0
                if cutlass.const_expr(self.split_k > 1):
                    tile_coord_mnl, kb0, k_cnt, _ = self._split_unit(tile_coord_mnl, k_tile_cnt)
                tBgB_nkl = tBgB[(None, tile_coord_mnl[1], None, tile_coord_mnl[2])]
                prod_state.reset_count()
                with Scope("load"):
                    for k_tile in range(k_cnt):
                        mainloop_pipeline.producer_acquire(prod_state)
                        bar = mainloop_pipeline.producer_get_barrier(prod_state)
                        kidx = prod_state.count
                        if cutlass.const_expr(self.split_k > 1):
                            kidx = kb0 + prod_state.count
                        # A smem buffer (stage, wave) = stage * waves + wave; wave w of the tile is
                        # the 128-row A tile (tile_m_idx * waves + w)
                        for w in cutlass.range_constexpr(self.waves):
                            a_tile = cutlass.min(tile_coord_mnl[0] * self.waves + w, a_mtiles - 1)
                            dst = prod_state.index * self.waves + w
                            if cutlass.const_expr(self.m_shift > 0):
                                if tile_coord_mnl[0] == self.m_last:
                                    self._load_a_wave(tma_atom_a, tAgA_s, tAsA, tma_atom_sfa, tFgF_s, tFsF, w, kidx,
                                                      tile_coord_mnl[2], dst, bar, a_mcast_mask)
                                else:
                                    self._load_a_wave(tma_atom_a, tAgA, tAsA, tma_atom_sfa, tFgF, tFsF, a_tile, kidx,
                                                      tile_coord_mnl[2], dst, bar, a_mcast_mask)
                            else:
                                self._load_a_wave(tma_atom_a, tAgA, tAsA, tma_atom_sfa, tFgF, tFsF, a_tile, kidx,
                                                  tile_coord_mnl[2], dst, bar, a_mcast_mask)
                        cute.copy(tma_atom_b, tBgB_nkl[(None, kidx)],
                                  tBsB[(None, prod_state.index)], tma_bar_ptr=bar, mcast_mask=b_mcast_mask)
                        if cutlass.const_expr(self.sfb_tma):
                            # a tile's N block is one B-scale block (tile_n <= 128, aligned)
                            nb = tile_coord_mnl[1] * self.tile_n // 128
                            cute.copy(tma_atom_sfb,
                                      tGgG[(None, nb, prod_state.count // SFB_TMA_GROUP, tile_coord_mnl[2])],
                                      tGsG[(None, prod_state.index)], tma_bar_ptr=bar)
                        mainloop_pipeline.producer_commit(prod_state)
                        prod_state.advance()
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.load_end)
                tile_count += 1
                unit += step
            mainloop_pipeline.producer_tail(prod_state)

        scope.switch("ConsumerWarpgroups", warp_start=4, warp_end=12)
        if warp_group_idx > 0:
            cute.arch.setmaxregister_increase(self.consumer_regs)
            self.consumer(
                tiled_mma, sA, sB, storage, epi_smem_layout_staged, tma_atom_c, mC_tma,
                (sSFA, sSFBT), mSFA, mSFB, mC_mnl, mainloop_pipeline, k_tile_cnt,
                tidx, warp_idx, warp_group_idx, cta_linear, tbuf, split_ws, tile_walk,
            )
        scope.close()

    @cute.jit
    def consumer(
        self, tiled_mma, sA, sB, storage, epi_smem_layout_staged, tma_atom_c, mC_tma,
        sSF, mSFA, mSFB, mC_mnl, mainloop_pipeline, k_tile_cnt,
        tidx, warp_idx, warp_group_idx, cta_linear, tbuf, split_ws, tile_walk,
    ):
        sSFA, sSFBT = sSF
        # the thread's index among the threads that share a tile (both warpgroups, or its own)
        mma_tidx = tidx - self.threads_per_wg
        if cutlass.const_expr(self.pingpong):
            mma_tidx = tidx % self.threads_per_wg
        # Two MMA objects with the ACCUMULATE field fixed once, outside every loop: calling
        # tiled_mma.set() inside staged loops makes values escape their region.
        mma_first = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype, self.b_dtype,
            self.a_layout.sm90_mma_major_mode(), self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype, self.atom_layout_mnk, tiler_mn=(64, self.tile_n))
        mma_first.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, False)
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        mmas = (mma_first, tiled_mma)
        thr_mma = tiled_mma.get_slice(mma_tidx)
        # The smem operands of a wgmma are the same for every thread of a warpgroup: partition
        # them for the warpgroup's first thread, an index the compiler knows is warp-uniform, so
        # the wgmma descriptors live in uniform registers (no R2UR between the wgmma wait and the
        # next issue; DeepGEMM gets the same with __shfl_sync)
        wg_first = 0
        if cutlass.const_expr(not self.pingpong):
            wg_first = cute.arch.make_warp_uniform((warp_group_idx - 1) * self.threads_per_wg)
        thr_mma_ab = tiled_mma.get_slice(wg_first) if cutlass.const_expr(self.uniform_desc) else thr_mma
        tCsA = thr_mma_ab.partition_A(sA)
        tCsB = thr_mma_ab.partition_B(sB)
        tCrA = tiled_mma.make_fragment_A(tCsA)
        tCrB = tiled_mma.make_fragment_B(tCsB)
        num_k_blocks = cute.size(tCrA, mode=[2])

        # per-thread coordinates of the accumulator elements inside the CTA tile
        cC = cute.make_identity_tensor((self.wave_m, self.tile_n))
        tCcC = thr_mma.partition_C(cC)
        acc_shape = tCcC.shape
        acc_totals = [cute.make_rmem_tensor(acc_shape, self.acc_dtype) for _ in range(self.waves)]
        acc_blk = cute.make_rmem_tensor(acc_shape, self.acc_dtype)
        # wgmma C fragment: elements (i // 2) % 2 == 0 sit on row r_lo, the others on r_lo + 8
        r_lo = tCcC[0][0]
        r_hi = tCcC[2][0]

        m_limit = cute.size(mSFA, mode=[0]) - 1
        nb_limit = cute.size(mSFB, mode=[0]) - 1

        read_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.ab_stage)

        sC = None
        tiled_copy_r2s = None
        if cutlass.const_expr(self.epilogue != "direct"):
            sC = storage.sC.get_tensor(epi_smem_layout_staged.outer, swizzle=epi_smem_layout_staged.inner)
            tma_store_pipeline = pipeline.PipelineTmaStore.create(
                num_stages=self.epi_stage,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.epi_threads))

        # Epilogue partitions are built once, before any tiled_mma.set() inside the K-loop: values
        # staged inside a loop must not escape it.
        gC_mnl = cute.local_tile(mC_mnl, (self.wave_m, self.tile_n), (None, None, None))
        tCgC_all = thr_mma.partition_C(gC_mnl)
        c_mtiles = cute.size(gC_mnl, mode=[2])
        epi = None
        if cutlass.const_expr(self.epilogue != "direct"):
            copy_atom_r2s = sm90_utils.sm90_get_smem_store_op(
                self.c_layout, elem_ty_d=self.c_dtype, elem_ty_acc=self.acc_dtype)
            copy_atom_C = cute.make_copy_atom(
                cute.nvgpu.warp.StMatrix8x8x16bOp(self.c_layout.is_m_major_c(), 4), self.c_dtype)
            copy_mma = tiled_mma
            copy_tidx = mma_tidx
            if cutlass.const_expr(self.epi_split):
                # one warpgroup's 64 rows: its accumulator fragment is the same registers as a
                # 64-row MMA's, so the copy is laid out for one warpgroup
                copy_mma = sm90_utils.make_trivial_tiled_mma(
                    self.a_dtype, self.b_dtype,
                    self.a_layout.sm90_mma_major_mode(), self.b_layout.sm90_mma_major_mode(),
                    self.acc_dtype, (1, 1, 1), tiler_mn=(64, self.tile_n))
                copy_tidx = mma_tidx % self.threads_per_wg
            tiled_copy_C_atom = cute.make_tiled_copy_C_atom(copy_atom_C, copy_mma)
            tiled_copy_r2s = cute.make_tiled_copy_S(copy_atom_r2s, tiled_copy_C_atom)
            thr_copy_r2s = tiled_copy_r2s.get_slice(copy_tidx)
            tRS_sD = thr_copy_r2s.partition_D(sC)
            tRS_rAccs = [tiled_copy_r2s.retile(acc) for acc in acc_totals]
            rD_shape = cute.shape(thr_copy_r2s.partition_S(sC))
            gC_tma = cute.local_tile(mC_tma, (self.epi_rows, self.tile_n), (None, None, None))
            epi = (tiled_copy_r2s, tRS_sD, tRS_rAccs, rD_shape, gC_tma)
            self.epi_shifted = epi
            if cutlass.const_expr(self.m_shift > 0):
                gC_tma_s = cute.local_tile(cute.domain_offset((self.m_shift, 0, 0), mC_tma),
                                           (self.epi_rows, self.tile_n), (None, None, None))
                self.epi_shifted = (tiled_copy_r2s, tRS_sD, tRS_rAccs, rD_shape, gC_tma_s)

        sSFB = storage.sSFB.get_tensor(cute.make_layout(2 * self.sfb_kb if self.sfb_smem else 4))
        sfb_src = sSFB if cutlass.const_expr(self.sfb_smem) else mSFB

        # epilogue sync and store warp: per warpgroup in ping-pong (each stores its own tiles) and
        # with epi_split (each stores its own rows)
        wg = warp_group_idx - 1
        self.epi_bar = self.epilog_sync_barrier
        self.epi_store_warp = self.epi_store_warp_id
        self.epi_buf0 = 0
        if cutlass.const_expr(self.epi_per_wg):
            self.epi_bar = pipeline.NamedBarrier(barrier_id=4 + wg, num_threads=self.threads_per_wg)
            self.epi_store_warp = warp_group_idx * 4
            self.epi_buf0 = wg * self.epi_stage
        if cutlass.const_expr(not self.epilogue == "tma"):
            tma_store_pipeline = None
        consume = (tiled_mma, mmas, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, tCcC, r_lo, r_hi,
                   m_limit, nb_limit, mainloop_pipeline, k_tile_cnt, mSFA, mSFB, sSFB, sfb_src, mC_mnl,
                   tCgC_all, c_mtiles, epi, sC, tma_atom_c, tma_store_pipeline, mma_tidx, warp_idx,
                   cta_linear, tbuf, sSFA, sSFBT)

        walk = self.tile_order.kernel_side(tile_walk, self._work_tiles(mC_mnl))
        unit, units, step = self.tile_order.start(walk)
        tile_count = cutlass.Int32(0)
        stored = cutlass.Int32(0)
        if cutlass.const_expr(not self.pingpong):
            while unit < units:
                # registers are the accumulator: nothing to wait for on Hopper (one clock read)
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, (EV.tile_start, EV.acc_acquired))
                tile_idx = self.tile_order.cta_tile(unit, walk)
                unit += step
                if cutlass.const_expr(self.split_k == 1):
                    read_state = self._consume_tile(consume, tile_idx, tile_count, read_state, tile_count,
                                                    False, False)
                else:
                    # the epilogue's smem ring turns with the tiles this CTA stored, not the units it ran
                    tile_idx, kb0, k_cnt, s = self._split_unit(tile_idx, k_tile_cnt)
                    read_state = self._consume_tile(consume, tile_idx, stored, read_state, tile_count,
                                                    False, False, (kb0, k_cnt))
                    if self._split_fixup(acc_totals, mma_tidx, mC_mnl, split_ws, storage, tile_idx, s):
                        self._store_tile(consume, tile_idx, stored, tile_count)
                        stored += 1
                tile_count += 1
        else:
            # Ping-pong: both warpgroups walk the CTA's whole tile list; tile t belongs to warpgroup
            # t % 2. The tensor cores are handed over in tile order by two mbarriers (t's owner
            # waits on turn[t % 2], which the owner of t - 1 arrives on when its K-loop is done),
            # so the shared smem ring is consumed in order. The other warpgroup's tiles only
            # advance the ring position. (mbarriers, not named barriers: a bar.sync lets the warp
            # run ahead to its next memory operation, so the timing build would stamp the turn
            # before it was granted.)
            turn = storage.turn_mbar.data_ptr()
            self.turn_mbar = turn
            mine_count = cutlass.Int32(0)
            while unit < units:
                tile_idx = self.tile_order.cta_tile(unit, walk)
                unit += step
                if tile_count % 2 == wg:
                    self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
                    if tile_count > 0:
                        # completion k of turn[wg] is tile 2k + 1 (wg 1) or 2k + 2 (wg 0)
                        cute.arch.mbarrier_wait(turn + wg, (mine_count + 1 + wg) % 2)
                    self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.acc_acquired)
                    read_state = self._consume_tile(consume, tile_idx, mine_count, read_state, tile_count,
                                                    True, unit < units)
                    mine_count += 1
                else:
                    for _ in range(k_tile_cnt):
                        read_state.advance()
                tile_count += 1

        if cutlass.const_expr(self.epilogue == "tma"):
            tma_store_pipeline.producer_tail()

    @cute.jit
    def _load_a_wave(self, tma_atom_a, tAgA, tAsA, tma_atom_sfa, tFgF, tFsF, a_tile, kidx, l_idx, dst, bar,
                     a_mcast_mask):
        """One wave-row A tile of a stage and, with ``sfa_tma``, its A scales."""
        cute.copy(tma_atom_a, tAgA[(None, a_tile, kidx, l_idx)], tAsA[(None, dst)], tma_bar_ptr=bar,
                  mcast_mask=a_mcast_mask)
        if cutlass.const_expr(self.sfa_tma):
            cute.copy(tma_atom_sfa, tFgF[(None, a_tile, kidx, l_idx)], tFsF[(None, dst)], tma_bar_ptr=bar)

    def _shift_rows(self, m_total) -> int:
        """Where the last M tile starts when it is shifted up to end at M (0: not shifted; see
        config.shifted_start). ``m_total`` is an int only in a shape-specialized build."""
        if not (self.shift_last_m and isinstance(m_total, int)):
            return 0
        return shifted_start(m_total, self.tile_m, self.cluster_shape_mn[0],
                             "pingpong" if self.pingpong else "coop", self.epilogue)

    @cute.jit
    def _tile_m0(self, tile_m_idx):
        """The first row of M tile ``tile_m_idx`` (the shifted last tile's, see _shift_rows)."""
        m0 = tile_m_idx * self.tile_m
        if cutlass.const_expr(self.m_shift > 0):
            if tile_m_idx == self.m_last:
                m0 = tile_m_idx * 0 + self.m_shift
        return m0

    @cute.jit
    def _consume_tile(self, consume, tile_coord_mnl, tiles_done, read_state, tile_count,
                      handover: cutlass.Constexpr, has_next, krange=None):
        """One tile of one consumer: scales, K-loop, epilogue. ``handover`` (ping-pong): arrive on
        the next tile's turn barrier when the K-loop is done, if there is a next tile. ``krange``
        (split-K): the unit's (first K block, K blocks); its epilogue is the caller's, after the
        partials are summed. Returns the read state."""
        (tiled_mma, mmas, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, tCcC, r_lo, r_hi,
         m_limit, nb_limit, mainloop_pipeline, k_tile_cnt, mSFA, mSFB, sSFB, sfb_src, mC_mnl,
         tCgC_all, c_mtiles, epi, sC, tma_atom_c, tma_store_pipeline, mma_tidx, warp_idx,
         cta_linear, tbuf, sSFA, sSFBT) = consume
        m0 = self._tile_m0(tile_coord_mnl[0])
        n0 = tile_coord_mnl[1] * self.tile_n
        l_idx = tile_coord_mnl[2]
        rows = []
        for w in cutlass.range_constexpr(self.waves):
            rows.append(cutlass.min(m0 + w * self.wave_m + r_lo, m_limit))
            rows.append(cutlass.min(m0 + w * self.wave_m + r_hi, m_limit))
        rows = tuple(rows)
        # clamped: a swizzled scheduler may hand out whole tiles past N (their stores are
        # clipped/predicated, their scale reads must stay in bounds)
        nb0 = cutlass.min(n0 // 128, nb_limit)
        nb1 = cutlass.min(n0 // 128 + 1, nb_limit)
        # first tile column that belongs to the next 128-wide B-scale block
        split = 128 - n0 % 128
        for w in cutlass.range_constexpr(self.waves):
            acc_totals[w].fill(0.0)
        sfb_view = sfb_src
        if cutlass.const_expr(self.sfb_tma):
            sfb_view = sSFBT        # the stage brings its B scale: nothing to stage per tile
        elif cutlass.const_expr(self.sfb_smem):
            # previous tile's readers are done before the stash is rewritten
            self.epilog_sync_barrier.arrive_and_wait()
            kb_total = cute.size(mSFB, mode=[1])
            for kb in range(mma_tidx, kb_total, self.num_mma_threads):
                sSFB[kb] = mSFB[(nb0, kb, l_idx)]
                if cutlass.const_expr(self.two_sfb):
                    sSFB[self.sfb_kb + kb] = mSFB[(nb1, kb, l_idx)]
            self.epilog_sync_barrier.arrive_and_wait()
        if cutlass.const_expr(self.split_k > 1):
            # the unit's K blocks from 0: scale tensors indexed by K block start at its first
            kb0, k_tile_cnt = krange
            mSFA = cute.domain_offset((0, kb0, 0), mSFA)
            if cutlass.const_expr(self.sfb_smem):
                sfb_view = cute.domain_offset(kb0, sfb_view)
            else:
                sfb_view = cute.domain_offset((0, kb0, 0), sfb_view)
        with Scope("kloop"):
            if cutlass.const_expr(self.promote == "rescale"):
                read_state = self.kloop_rescale(mmas, tCrA, tCrB, num_k_blocks, acc_totals,
                                                mainloop_pipeline, read_state, k_tile_cnt, (sSFA, mSFA), sfb_view,
                                                rows, r_lo, r_hi, nb0, nb1, l_idx,
                                                tbuf, cta_linear, warp_idx, tile_count)
            elif cutlass.const_expr(self.sfa_tma and self.promote == "serial"):
                read_state = self.kloop_staged(mmas, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                               mainloop_pipeline, read_state, k_tile_cnt, sSFA, sfb_view,
                                               r_lo, r_hi, nb0, nb1, l_idx, split,
                                               tbuf, cta_linear, warp_idx, tile_count)
            else:
                read_state = self.kloop_serial(mmas, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                               mainloop_pipeline, read_state, k_tile_cnt, mSFA, sfb_view,
                                               rows, nb0, nb1, l_idx, split,
                                               tbuf, cta_linear, warp_idx, tile_count)
        if cutlass.const_expr(handover):
            # every wgmma of this tile has completed (the last wave waited for them): the next
            # tile's owner may take the tensor cores
            if has_next:
                cute.arch.mbarrier_arrive(self.turn_mbar + (tile_count + 1) % 2)
        self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.kloop_end)
        if cutlass.const_expr(self.split_k == 1):
            self._store_tile(consume, tile_coord_mnl, tiles_done, tile_count)
        return read_state

    def _work_tiles(self, c) -> tuple:
        """Work units along M, N and L of the output ``c`` (the host's tensor or the kernel's):
        its tiles, with split-K's units of a tile as the outermost mode, (m, n, l * split_k + s)."""
        return tile_counts(tuple(cute.size(c, mode=[i]) for i in range(3)), (self.tile_m, self.tile_n), self.split_k)

    @cute.jit
    def _split_unit(self, unit, k_tile_cnt):
        """Work unit (m, n, l * split_k + s) -> (output tile (m, n, l), first K block, K blocks, s)."""
        l_idx = unit[2] // self.split_k
        s = unit[2] % self.split_k
        kb0, k_cnt = split_range(s, k_tile_cnt, self.split_k)
        return (unit[0], unit[1], l_idx), kb0, k_cnt, s

    @cute.jit
    def _split_fixup(self, acc_totals, mma_tidx, mC_mnl, split_ws, storage, tile_coord_mnl, s):
        """Serial split-K: store this unit's fp32 partial, count the unit in on its tile's counter,
        and, in the unit that arrives last, replace the registers with the sum of all partials in
        split order 0..split_k-1 (its own read back like the others, so the bits do not depend
        on the order of arrival). Returns whether this unit stores the tile.

        Workspace: one slice per (tile, unit, wave) holding every consumer thread's accumulator
        fragment, element-major (element i of thread t at i * threads + t: a warp's stores and
        loads are 128 contiguous bytes). The consumers write the unit's partial and meet at a
        barrier; one thread then counts the unit in with an acq_rel atomic at gpu scope (its
        release is cumulative over the stores the barrier ordered before it; its acquire
        invalidates the SM's L1), and a second barrier hands the answer to every thread: so the
        unit that reads the count split_k - 1 sees every partial of the tile. (CUTLASS's serial
        split-K semaphore works the same way. A gpu-scope fence in every thread as well cost
        two more MEMBAR.ALL.GPU on the unit's critical path.)"""
        ws, cnt = split_ws
        m_tiles, n_tiles, _ = self.tile_order.padded_tiles(self._work_tiles(mC_mnl))
        tile = (tile_coord_mnl[2] * n_tiles + tile_coord_mnl[1]) * m_tiles + tile_coord_mnl[0]
        nel = cute.size(acc_totals[0])
        thr = self.num_mma_threads
        for w in cutlass.range_constexpr(self.waves):
            base = ((tile * self.split_k + s) * self.waves + w) * nel * thr + mma_tidx
            for i in cutlass.range_constexpr(nel):
                ws[base + i * thr] = acc_totals[w][i]
        self.epilog_sync_barrier.arrive_and_wait()
        flag = storage.split_last.get_tensor(cute.make_layout(1))
        if mma_tidx == 0:
            arrived = cute.arch.atomic_add(cnt.iterator + tile, cutlass.Int32(1), sem="acq_rel", scope="gpu")
            last_one = cutlass.Int32(0)
            if arrived == self.split_k - 1:
                # every unit of the tile is in: ready for the next launch (stream order)
                cnt[tile] = cutlass.Int32(0)
                last_one = cutlass.Int32(1)
            flag[0] = last_one
        self.epilog_sync_barrier.arrive_and_wait()
        last = flag[0] != 0
        if last:
            for w in cutlass.range_constexpr(self.waves):
                base = (tile * self.split_k * self.waves + w) * nel * thr + mma_tidx
                step = self.waves * nel * thr      # from one unit's slice to the next's
                for i in cutlass.range_constexpr(nel):
                    total = ws[base + i * thr]
                    for j in cutlass.range_constexpr(1, self.split_k):
                        total = total + ws[base + j * step + i * thr]
                    acc_totals[w][i] = total
        return last

    @cute.jit
    def _store_tile(self, consume, tile_coord_mnl, tiles_done, tile_count):
        """The epilogue of one output tile: every wave's totals to D (bf16)."""
        (tiled_mma, mmas, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, tCcC, r_lo, r_hi,
         m_limit, nb_limit, mainloop_pipeline, k_tile_cnt, mSFA, mSFB, sSFB, sfb_src, mC_mnl,
         tCgC_all, c_mtiles, epi, sC, tma_atom_c, tma_store_pipeline, mma_tidx, warp_idx,
         cta_linear, tbuf, sSFA, sSFBT) = consume
        # 64-row C tiles (epi_split stores per warpgroup): a half wave wholly past M stores nothing
        c_mtiles64 = (cute.size(mC_mnl, mode=[0]) + 63) // 64
        m0 = tile_coord_mnl[0] * self.tile_m
        n0 = tile_coord_mnl[1] * self.tile_n
        with Scope("epilogue"):
            for w in cutlass.range_constexpr(self.waves):
                # the epilogue works on wave-row C tiles: wave w of this tile is C tile
                # (tile_m_idx * waves + w, tile_n_idx, l)
                c_coord = (tile_coord_mnl[0] * self.waves + w, tile_coord_mnl[1], tile_coord_mnl[2])
                # the last wave that stores anything records the tile's epilogue events
                last_wave = True
                if cutlass.const_expr(w < self.waves - 1):
                    last_wave = c_coord[0] + 1 >= c_mtiles
                if cutlass.const_expr(self.epi_split):
                    # this warpgroup's share of the wave is 64-row C tile (wave tile x warpgroups) + warpgroup
                    wg = warp_idx // 4 - 1
                    c_coord = ((tile_coord_mnl[0] * self.waves + w) * self.num_mma_warp_groups + wg,
                               tile_coord_mnl[1], tile_coord_mnl[2])
                    if cutlass.const_expr(w < self.waves - 1):
                        last_wave = c_coord[0] + self.num_mma_warp_groups >= c_mtiles64
                if cutlass.const_expr(self.epilogue == "direct"):
                    if c_coord[0] < c_mtiles:
                        self.epilogue_direct(tCgC_all, tCcC, acc_totals[w], mC_mnl, m0 + w * self.wave_m, n0,
                                             c_coord, tbuf, cta_linear, warp_idx, tile_count, last_wave)
                else:
                    epi_base = tiles_done * self.waves + w
                    # a wave wholly past M stores nothing (uniform across the CTA; across the
                    # warpgroup with epi_split)
                    c_limit = c_mtiles64 if cutlass.const_expr(self.epi_split) else c_mtiles
                    if cutlass.const_expr(self.m_shift > 0):
                        if tile_coord_mnl[0] == self.m_last:
                            # every wave of the shifted tile lies inside M: C tile w (2w + warpgroup)
                            # of the view that starts at its first row
                            c_s = (w, tile_coord_mnl[1], tile_coord_mnl[2])
                            if cutlass.const_expr(self.epi_split):
                                c_s = (w * self.num_mma_warp_groups + warp_idx // 4 - 1, tile_coord_mnl[1],
                                       tile_coord_mnl[2])
                            self.epilogue_tma(self.epi_shifted, w, sC, tma_atom_c, c_s,
                                              mma_tidx, warp_idx, tma_store_pipeline, epi_base,
                                              tbuf, cta_linear, tile_count, w == self.waves - 1)
                        elif c_coord[0] < c_limit:
                            self.epilogue_tma(epi, w, sC, tma_atom_c, c_coord,
                                              mma_tidx, warp_idx, tma_store_pipeline, epi_base,
                                              tbuf, cta_linear, tile_count, last_wave)
                    elif c_coord[0] < c_limit:
                        self.epilogue_tma(epi, w, sC, tma_atom_c, c_coord,
                                          mma_tidx, warp_idx, tma_store_pipeline, epi_base,
                                          tbuf, cta_linear, tile_count, last_wave)

    # ----------------------------------------------------------------------------------------
    @cute.jit
    def _load_scales(self, mSFA, mSFB, rows, nb0, nb1, kb, l_idx):
        """(sa_lo, sa_hi per wave ..., sb0, sb1) of K block ``kb`` for this thread's rows."""
        return self._load_sfa(mSFA, rows, kb, l_idx) + self._load_sfb(mSFB, nb0, nb1, kb, l_idx)

    @cute.jit
    def _load_sfa(self, mSFA, rows, kb, l_idx):
        out = []
        for r in cutlass.range_constexpr(2 * self.waves):
            out.append(mSFA[(rows[r], kb, l_idx)])
        return tuple(out)

    @cute.jit
    def _load_sfb(self, mSFB, nb0, nb1, kb, l_idx):
        out = []
        if cutlass.const_expr(self.sfb_smem):
            sb0 = mSFB[kb]                       # here mSFB is the smem stash
            sb1 = sb0
            if cutlass.const_expr(self.two_sfb):
                sb1 = mSFB[self.sfb_kb + kb]
        else:
            sb0 = mSFB[(nb0, kb, l_idx)]
            sb1 = sb0
            if cutlass.const_expr(self.two_sfb):
                sb1 = mSFB[(nb1, kb, l_idx)]
        out.append(sb0)
        out.append(sb1)
        return tuple(out)

    @cute.jit
    def _issue(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc, stage_index, wave: int = 0,
               commit: cutlass.Constexpr = True):
        """One wave's wgmma of a K block; ``tiled_mma`` = (first, rest) MMA objects."""
        mma_first, mma_rest = tiled_mma
        for kb_i in cutlass.range_constexpr(num_k_blocks):
            # the first wgmma of a K block overwrites: a fresh accumulator per scale block
            mma = mma_first if kb_i == 0 else mma_rest
            # A has one smem buffer per (stage, wave); B one per stage
            cute.gemm(mma, acc, tCrA[(None, None, kb_i, stage_index * self.waves + wave)],
                      tCrB[(None, None, kb_i, stage_index)], acc)
        if cutlass.const_expr(commit):
            cute.nvgpu.warpgroup.commit_group()

    @cute.jit
    def _promote(self, acc_total, acc_blk, sa_lo, sa_hi, sb0, sb1, split):
        s00 = sa_lo * sb0
        s10 = sa_hi * sb0
        s01 = s00
        s11 = s10
        if cutlass.const_expr(self.two_sfb):
            s01 = sa_lo * sb1
            s11 = sa_hi * sb1
        n = cute.size(acc_total)
        # a tile whose width does not divide 128 starts inside a scale block, so where the next
        # block begins (split) moves with the tile; but it starts at a multiple of
        # gcd(tile_n, 128) and split is one too. So a group before the first such step always
        # takes the first scale, one from column 128 on the second, and the groups in between
        # test split only against the step below their first column: the tests and selects
        # are shared by groups (one per step, two at 128x192) instead of one per group, where
        # they were 48 FSEL and 24 ISETP of the promotion's 237 instructions at 128x192
        step = math.gcd(self.tile_n, 128)
        picked = {}
        for g in cutlass.range_constexpr(n // 4):
            # fragment order: (col pair, row half, 8-col group): i = c + 2*h + 4*g
            lo = s00
            hi = s10
            if cutlass.const_expr(self.tile_n == 256 and g * 8 >= 128):
                lo = s01
                hi = s11
            if cutlass.const_expr(self.two_sfb and self.tile_n % 128 != 0 and g * 8 >= 128):
                lo = s01
                hi = s11
            elif cutlass.const_expr(self.two_sfb and self.tile_n % 128 != 0 and g * 8 >= step):
                below = g * 8 // step * step
                if cutlass.const_expr(below not in picked):
                    second = split <= below
                    picked[below] = (cutlass.select_(second, s01, s00), cutlass.select_(second, s11, s10))
                lo, hi = picked[below]
            for c in cutlass.range_constexpr(2):
                acc_total[g * 4 + c] = acc_total[g * 4 + c] + acc_blk[g * 4 + c] * lo
                acc_total[g * 4 + 2 + c] = acc_total[g * 4 + 2 + c] + acc_blk[g * 4 + 2 + c] * hi

    @cute.jit
    def _release(self, mainloop_pipeline, state):
        """Give a stage back to the producer(s): one arrival per warp on the empty barrier of every
        CTA whose producer wrote into this stage: the CTAs of this CTA's cluster row (A multicast)
        and column (B multicast); in a 2x2 cluster, not the diagonal one."""
        if cutlass.const_expr(self.elect_release):
            bar = mainloop_pipeline.consumer_get_barrier(state)
            with cute.arch.elect_one():
                if cutlass.const_expr(self.cluster_m * self.cluster_n == 1):
                    cute.arch.mbarrier_arrive(bar)
                elif cutlass.const_expr(self.cluster_m * self.cluster_n == 2):
                    for r in cutlass.range_constexpr(2):
                        cute.arch.mbarrier_arrive(bar, r)
                else:
                    # ranks are column-major over (cluster_m, cluster_n): rank = m + 2 n
                    me = cute.arch.block_idx_in_cluster()
                    for r in cutlass.range_constexpr(4):
                        if (r % 2 == me % 2) or (r // 2 == me // 2):
                            cute.arch.mbarrier_arrive(bar, r)
        else:
            mainloop_pipeline.consumer_release(state)

    @cute.jit
    def _serial_block(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                      mainloop_pipeline, read_state, sc, split, wait: cutlass.Constexpr = True,
                      landed=None):
        """One K block, serial promotion. Returns the next read state and, with ``peek``, whether
        the next stage had already landed when this block's last wave finished (``landed``: that
        answer from the block before, so the wait can be skipped)."""
        if cutlass.const_expr(wait):
            if cutlass.const_expr(self.peek):
                mainloop_pipeline.consumer_wait(read_state, landed)
            else:
                mainloop_pipeline.consumer_wait(read_state)
        landed = cutlass.Boolean(False)
        for w in cutlass.range_constexpr(self.waves):
            cute.nvgpu.warpgroup.fence()
            self._issue(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, read_state.index, w)
            cute.nvgpu.warpgroup.wait_group(0)
            if cutlass.const_expr(w == self.waves - 1):
                self._release(mainloop_pipeline, read_state)
                read_state.advance()
                if cutlass.const_expr(self.peek):
                    landed = cute.arch.mbarrier_test_wait(
                        mainloop_pipeline.producer_get_barrier(read_state), read_state.phase)
                self.rec.spin(self.delay_kloop)
            self._promote(acc_totals[w], acc_blk, sc[2 * w], sc[2 * w + 1], sc[-2], sc[-1], split)
        return read_state, landed

    @cute.jit
    def _stage_scales(self, sSFA, stage_index, mSFB, r_lo, r_hi, nb0, nb1, kb, l_idx):
        sc = []
        for w in cutlass.range_constexpr(self.waves):
            buf = stage_index * self.waves + w
            sc.append(sSFA[(r_lo, 0, buf)])
            sc.append(sSFA[(r_hi, 0, buf)])
        if cutlass.const_expr(self.sfb_tma):
            sb = mSFB[(0, kb % SFB_TMA_GROUP, stage_index)]     # the stage's 4-block box
            return tuple(sc) + (sb, sb)
        return tuple(sc) + self._load_sfb(mSFB, nb0, nb1, kb, l_idx)

    @cute.jit
    def kloop_staged(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                     mainloop_pipeline, read_state, k_tile_cnt, sSFA, mSFB, r_lo, r_hi,
                     nb0, nb1, l_idx, split, tbuf, cta_linear, warp_idx, tile_count):
        """Serial promotion with the A scales taken from the stage (``sfa_tma``), read from smem
        once the stage has landed and before it is released. (Reading the next block's scales
        right after this block's last wave, to hide the load behind the promotion, measured
        3-4% slower.)"""
        read_state.reset_count()
        first = 0
        if cutlass.const_expr(self.timing):
            # timing build: the first block is peeled so tma0 is stamped after its scale reads are
            # issued (the clock read's latency overlaps theirs instead of adding to every tile: a
            # branch on kb == 0 inside the loop cost 4-6% instead); the plain build keeps one loop
            mainloop_pipeline.consumer_wait(read_state)
            sc0 = self._stage_scales(sSFA, read_state.index, mSFB, r_lo, r_hi, nb0, nb1, 0, l_idx)
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
            read_state, _ = self._serial_block(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                               mainloop_pipeline, read_state, sc0, split, False)
            first = 1
        landed = cutlass.Boolean(False)
        ring = self.ab_stage
        if cutlass.const_expr(self.ring_unroll and isinstance(k_tile_cnt, int) and k_tile_cnt % ring == 0
                              and self.split_k == 1):
            # a tile starts at stage 0 (each tile takes a multiple of the ring), so every trip
            # starts at stage `first`: a constant index, its phase the one runtime bit
            trips = (k_tile_cnt - first) // ring
            for t in cutlass.range(trips, unroll=1):
                read_state = pipeline.PipelineState(ring, read_state.count, cutlass.Int32(first), read_state.phase)
                for s in cutlass.range_constexpr(ring):
                    kb = first + t * ring + s
                    read_state, landed = self._staged_block(
                        tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, mainloop_pipeline, read_state,
                        sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split, kb, landed)
            first = first + trips * ring
        for kb in cutlass.range(first, k_tile_cnt, unroll=1):
            read_state, landed = self._staged_block(
                tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, mainloop_pipeline, read_state,
                sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split, kb, landed)
        return read_state

    @cute.jit
    def _staged_block(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, mainloop_pipeline,
                      read_state, sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split, kb, landed):
        if cutlass.const_expr(self.peek):
            mainloop_pipeline.consumer_wait(read_state, landed)
        else:
            mainloop_pipeline.consumer_wait(read_state)
        sc = self._stage_scales(sSFA, read_state.index, mSFB, r_lo, r_hi, nb0, nb1, kb, l_idx)
        return self._serial_block(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                  mainloop_pipeline, read_state, sc, split, False)

    @cute.jit
    def _block_scales(self, sSFA, mSFA, stage_index, mSFB, rows, r_lo, r_hi, nb0, nb1, kb, l_idx):
        if cutlass.const_expr(self.sfa_tma):
            return self._stage_scales(sSFA, stage_index, mSFB, r_lo, r_hi, nb0, nb1, kb, l_idx)
        return self._load_scales(mSFA, mSFB, rows, nb0, nb1, kb, l_idx)

    @cute.jit
    def _scale_products(self, sc, prev):
        """Per wave, row half and N block (w, h, j -> index 4w + 2h + j): the block's scale
        product, or the previous one where it is zero (a zero scale comes with zero data, whose
        block adds nothing at any weight; keeping the carried scale avoids 0/0)."""
        out = []
        for w in cutlass.range_constexpr(self.waves):
            for h in cutlass.range_constexpr(2):
                for j in cutlass.range_constexpr(2):
                    s = sc[2 * w + h] * sc[2 * self.waves + j]
                    out.append(cutlass.select_(s == cutlass.Float32(0.0), prev[4 * w + 2 * h + j], s))
        return tuple(out)

    @cute.jit
    def _rescale(self, acc, f, w: int):
        """``acc`` (wave ``w``'s accumulator) times ``f[4w + 2h + j]`` per row half h, N block j."""
        n = cute.size(acc)
        for g in cutlass.range_constexpr(n // 4):
            j = 1 if cutlass.const_expr(self.tile_n == 256 and g * 8 >= 128) else 0
            for h in cutlass.range_constexpr(2):
                for c in cutlass.range_constexpr(2):
                    acc[g * 4 + 2 * h + c] = acc[g * 4 + 2 * h + c] * f[4 * w + 2 * h + j]

    @cute.jit
    def kloop_rescale(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc_totals, mainloop_pipeline,
                      read_state, k_tile_cnt, sfa, mSFB, rows, r_lo, r_hi, nb0, nb1, l_idx,
                      tbuf, cta_linear, warp_idx, tile_count):
        """Rescaled accumulation (``promote="rescale"``): wgmma accumulates every K block straight
        into the totals, which are kept divided by the current block's scale product s_k:
        before block k the totals are multiplied by s_(k-1) / s_k, after the last block by
        s_(K-1). One FMUL per element and block, as the serial promotion's FFMA, but no block
        accumulator, so a warpgroup issues all its waves of a K block behind one wgmma wait (and a
        128x256 tile fits as one m64n256 wave). The next block's scales are read before this
        block's wgmma is waited for. The A scales come from the stage (``sfa_tma``) or, without
        it, from global memory after the stage has landed."""
        sSFA, mSFA = sfa
        accumulate = (tiled_mma[1], tiled_mma[1])    # every wgmma after the tile's first block
        read_state.reset_count()
        release_state = read_state.clone()
        ones = (cutlass.Float32(1.0),) * (4 * self.waves)
        mainloop_pipeline.consumer_wait(read_state)
        self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
        sc = self._block_scales(sSFA, mSFA, read_state.index, mSFB, rows, r_lo, r_hi, nb0, nb1, 0, l_idx)
        s_prev = self._scale_products(sc, ones)
        cute.nvgpu.warpgroup.fence()
        for w in cutlass.range_constexpr(self.waves):
            self._issue(tiled_mma, tCrA, tCrB, num_k_blocks, acc_totals[w], read_state.index, w, False)
        cute.nvgpu.warpgroup.commit_group()
        read_state.advance()
        for kb in range(1, k_tile_cnt):
            mainloop_pipeline.consumer_wait(read_state)
            sc = self._block_scales(sSFA, mSFA, read_state.index, mSFB, rows, r_lo, r_hi, nb0, nb1, kb, l_idx)
            s_cur = self._scale_products(sc, s_prev)
            ratio = []
            for i in cutlass.range_constexpr(4 * self.waves):
                ratio.append(s_prev[i] * cute.arch.rcp_approx(s_cur[i]))
            s_prev = s_cur
            cute.nvgpu.warpgroup.wait_group(0)
            self._release(mainloop_pipeline, release_state)
            release_state.advance()
            self.rec.spin(self.delay_kloop)
            for w in cutlass.range_constexpr(self.waves):
                self._rescale(acc_totals[w], tuple(ratio), w)
            cute.nvgpu.warpgroup.fence()
            for w in cutlass.range_constexpr(self.waves):
                self._issue(accumulate, tCrA, tCrB, num_k_blocks, acc_totals[w], read_state.index, w, False)
            cute.nvgpu.warpgroup.commit_group()
            read_state.advance()
        cute.nvgpu.warpgroup.wait_group(0)
        self._release(mainloop_pipeline, release_state)
        release_state.advance()
        self.rec.spin(self.delay_kloop)       # the K-th block's delay: one per K block, as serial
        for w in cutlass.range_constexpr(self.waves):
            self._rescale(acc_totals[w], s_prev, w)
        return read_state

    @cute.jit
    def kloop_serial(self, tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                     mainloop_pipeline, read_state, k_tile_cnt, mSFA, mSFB,
                     rows, nb0, nb1, l_idx, split,
                     tbuf, cta_linear, warp_idx, tile_count):
        read_state.reset_count()
        last = k_tile_cnt - 1
        # Scales are loaded two K blocks before their promotion, into two register sets used
        # alternately (K blocks taken in pairs), so no register copy of a just-loaded value ends
        # up in front of a QGMMA: the global-load latency hides behind whole blocks.
        ta = self._load_scales(mSFA, mSFB, rows, nb0, nb1, 0, l_idx)
        tb = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(1, last), l_idx)
        mainloop_pipeline.consumer_wait(read_state)
        self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
        landed = cutlass.Boolean(True)   # the first stage was just waited for
        for pair in range(k_tile_cnt // 2):
            kb = pair * 2
            read_state, landed = self._serial_block(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                                    mainloop_pipeline, read_state, ta, split, True, landed)
            ta = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(kb + 2, last), l_idx)
            read_state, landed = self._serial_block(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                                    mainloop_pipeline, read_state, tb, split, True, landed)
            tb = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(kb + 3, last), l_idx)
        if k_tile_cnt % 2 == 1:
            read_state, _ = self._serial_block(tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals,
                                               mainloop_pipeline, read_state, ta, split, True, landed)
        # returned and re-bound by the caller: a state only mutated inside a callee is not
        # carried through the caller's persistent tile loop
        return read_state

    # ----------------------------------------------------------------------------------------
    @cute.jit
    def epilogue_direct(self, tCgC_all, tCcC, acc_total, mC_mnl, m0, n0, tile_coord_mnl,
                        tbuf, cta_linear, warp_idx, tile_count, last_wave):
        # phase 1: accumulator -> bf16 registers (frees nothing on Hopper, but it is the
        # register-side work the model calls phase 1)
        rD = cute.make_rmem_tensor(acc_total.shape, self.c_dtype)
        rD.store(acc_total.load().to(self.c_dtype))
        self.rec.spin(self.delay_phase1, self.phase1_backoff_ns)
        if last_wave:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.phase1_end)
        # phase 2: predicated stores straight to global memory
        M = cute.size(mC_mnl, mode=[0])
        N = cute.size(mC_mnl, mode=[1])
        tCgC = tCgC_all[(None, None, None, *tile_coord_mnl)]
        if m0 + self.wave_m <= M and n0 + self.tile_n <= N:
            cute.autovec_copy(rD, tCgC)
        else:
            for i in cutlass.range_constexpr(cute.size(rD)):
                crd = tCcC[i]
                if m0 + crd[0] < M and n0 + crd[1] < N:
                    tCgC[i] = rD[i]
        if last_wave:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.phase2_end)

    @cute.jit
    def epilogue_tma(self, epi, wave, sC, tma_atom_c, tile_coord_mnl,
                     mma_tidx, warp_idx, tma_store_pipeline, epi_base,
                     tbuf, cta_linear, tile_count, last_wave):
        tiled_copy_r2s, tRS_sD, tRS_rAccs, rD_shape, gC_tma = epi
        tRS_rAcc = tRS_rAccs[wave]
        tRS_rD = cute.make_rmem_tensor(rD_shape[:3], self.acc_dtype)
        tRS_rD_out = cute.make_rmem_tensor(rD_shape[:3], self.c_dtype)
        size_tRS_rD = cute.size(tRS_rD)
        gC_tile = gC_tma[(None, None, *tile_coord_mnl)]
        tCgC_epi = cute.zipped_divide(gC_tile, self.epi_tile)
        bSG_sD, bSG_gD = cute.nvgpu.cpasync.tma_partition(
            tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), tCgC_epi)
        epi_tile_num = cute.size(tCgC_epi, mode=[1])
        epi_tile_shape = tCgC_epi.shape[1]
        epi_tile_layout = cute.make_layout(epi_tile_shape, stride=(epi_tile_shape[1], 1))
        num_prev_epi_tiles = epi_base * epi_tile_num
        if cutlass.const_expr(wave == 0):
            self.rec.spin(self.delay_phase1, self.phase1_backoff_ns)
        for epi_idx in cutlass.range_constexpr(epi_tile_num):
            for v in cutlass.range_constexpr(size_tRS_rD):
                tRS_rD[v] = tRS_rAcc[epi_idx * size_tRS_rD + v]
            tRS_rD_out.store(tRS_rD.load().to(self.c_dtype))
            epi_buffer = self.epi_buf0 + (num_prev_epi_tiles + epi_idx) % self.epi_stage
            cute.copy(tiled_copy_r2s, tRS_rD_out, tRS_sD[(None, None, None, epi_buffer)])
            cute.arch.fence_proxy("async.shared", space="cta")
            self.epi_bar.arrive_and_wait()
            gmem_coord = epi_tile_layout.get_hier_coord(epi_idx)
            if warp_idx == self.epi_store_warp:
                cute.copy(tma_atom_c, bSG_sD[(None, epi_buffer)], bSG_gD[(None, gmem_coord)])
                tma_store_pipeline.producer_commit()
                tma_store_pipeline.producer_acquire()
            self.epi_bar.arrive_and_wait()
        # the whole accumulator is in smem / in flight: phase 1 ends here; the TMA stores drain
        # asynchronously (phase 2 is their issue)
        if last_wave:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, (EV.phase1_end, EV.phase2_end))
