"""The FP8-blockwise Hopper GEMM in CuTe DSL: D (bf16) = A · Bᵀ with DeepSeek-V3 block scales.

One persistent, warp-specialized kernel; every optimization is a switch of its configuration
(``gemm_config.GemmConfig``), so the ``baseline`` and ``optimized`` variants (``config.VARIANTS``) are
the same source with different switches.

CTA = 3 warpgroups (2 for a 64-row tile, 4 for a 192-row one). Warpgroup 0 is the producer
(:mod:`.producer`: warp 0 issues the TMA loads of A and B into an ``ab_stage``-deep shared-memory
ring guarded by mbarriers; the other three warps only give their registers away). Warpgroups 1
and 2 are the consumers (:mod:`.consumer`): each owns 64 rows of a 128-row wave and, per 128-wide
K block, issues wgmma (QGMMA in SASS) into a fresh register accumulator, waits for it, then
promotes it into the float32 total with the block scales,
``total += blk * sfa[row, kb] * sfb[n_blk, kb]`` (DeepGEMM-style promotion; :mod:`.mainloop`).
A 256-row tile is two waves through the same block accumulator. The epilogue (:mod:`.epilogue`)
stores the bf16 tile directly (SIMT) or through a staged smem ring and TMA stores. The
consumers walk their tiles cooperatively or in ping-pong (:mod:`.schedule`); split-K's work
units and their fix-up are in :mod:`.split_k`.

This module holds the host side (shared-memory layouts, TMA atoms, the launch) and the kernel's
prologue (barriers, pipeline, partitions) that every warp runs before its role.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.utils.profiling import WarpScope

from bsprof.kernels.fp8_blockwise.config import SFB_TMA_SLOT, epi_tile_cols
from bsprof.kernels.fp8_blockwise.consumer import Consumer
from bsprof.kernels.fp8_blockwise.epilogue import Epilogue
from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS, PRODUCER_WARPS, GemmConfig
from bsprof.kernels.fp8_blockwise.mainloop import SFB_TMA_GROUP, MainLoop
from bsprof.kernels.fp8_blockwise.producer import Producer
from bsprof.kernels.fp8_blockwise.split_k import WorkUnits
from bsprof.kernels.tile_order import TileOrder
from bsprof.kernels.timing_recorder import TimingRecorder

BLOCK_K = 128  # scale block along K == CTA tile K


class Fp8BlockwiseGemm:
    """The kernel of one :class:`~bsprof.kernels.fp8_blockwise.gemm_config.GemmConfig`.

    Called (``cute.compile(gemm, *args)``) with A (M, K, L) and B (N, K, L) e4m3, K-major; their
    float32 block scales, A's (M, K/128, L) with M the unit stride and B's (ceil(N/128), K/128, L);
    D (M, N, L) bf16, N-major; the timing buffer, the split-K workspace and counters, the timing
    buffer's tile slots, the persistent grid's cluster count and the stream.
    """

    def __init__(self, config: GemmConfig):
        why = config.can_implement()
        if why:
            raise ValueError(why)
        self.config = config
        self.tile_m = config.tile.tile_m
        self.tile_n = config.tile.tile_n
        self.cluster_shape_mn = (config.tile.cluster_m, config.tile.cluster_n)
        self.pingpong = config.pingpong
        self.one_wg = config.tile.tile_m == 64
        self.wave_m = config.wave_m
        self.waves = config.waves
        self.a_rows = config.a_rows
        self.sfa_tma = bool(config.scales.sfa_tma)
        self.sfb_tma = bool(config.scales.sfb_tma)
        self.sfb_smem = bool(config.scales.sfb_smem)
        self.sfb_kb = int(config.scales.sfb_kb)
        self.epilogue_kind = config.epi.epilogue
        self.epi_per_wg = config.epi_per_wg
        self.epi_rows = config.epi_rows
        self.epi_stage = config.epi_stage

        self.acc_dtype = cutlass.Float32
        self.tile_order = TileOrder(self.cluster_shape_mn, int(config.schedule.swizzle))
        self.atom_layout_mnk = (1, 1, 1) if self.pingpong or self.one_wg else (config.consumer_wgs, 1, 1)
        self.num_mma_warp_groups = config.consumer_wgs
        self.threads_per_wg = 128
        self.threads_per_cta = (1 + self.num_mma_warp_groups) * self.threads_per_wg
        # the consumers that share a tile: their stage releases, epilogue barrier and TMA store
        self.num_mma_threads = self.num_mma_warp_groups * self.threads_per_wg
        self.load_warp_id = 0
        self.buffer_align_bytes = 1024
        # B is the operand shared by the CTAs of a 2x1 cluster (same N tile, different M tiles)
        # (a 1x2 cluster shares the A tile: same M tile, two N tiles)
        self.num_mcast_ctas_a = config.tile.cluster_n
        self.num_mcast_ctas_b = config.tile.cluster_m
        # the consumers' tile-wide barrier: the B-scale stash, the coop epilogue and split-K
        self.epilog_sync_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=self.num_mma_threads)
        self.work = WorkUnits(config, self.tile_order, self.epilog_sync_barrier)

    # ----------------------------------------------------------------------------------------
    # host-side setup
    # ----------------------------------------------------------------------------------------
    def _setup(self):
        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            self.atom_layout_mnk,
            tiler_mn=(64, self.tile_n),
        )
        self.cta_layout_mnk = cute.make_layout((*self.cluster_shape_mn, 1))
        self.epi_tile = (self.epi_rows, epi_tile_cols(self.tile_n))
        # ping-pong: each warpgroup has its own ring of epilogue buffers
        self.epi_buffers = self.epi_stage * (self.num_mma_warp_groups if self.epi_per_wg else 1)
        self.ab_stage = self.config.ab_stages()
        if self.ab_stage < 2:
            raise ValueError(f"tile {self.tile_m}x{self.tile_n} leaves room for {self.ab_stage} smem stages; need >= 2")

        a_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.a_layout, self.a_dtype, BLOCK_K), self.a_dtype
        )
        self.a_smem_layout_staged = cute.tile_to_shape(
            a_atom, (self.wave_m, BLOCK_K, self.ab_stage * self.waves), order=(0, 1, 2)
        )
        # one TMA box of A: the first a_rows rows of a wave's buffer (the same swizzled rows)
        self.a_box_layout = cute.tile_to_shape(a_atom, (self.a_rows, BLOCK_K), order=(0, 1))
        b_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.b_layout, self.b_dtype, BLOCK_K), self.b_dtype
        )
        self.b_smem_layout_staged = cute.tile_to_shape(b_atom, (self.tile_n, BLOCK_K, self.ab_stage), order=(0, 1, 2))
        c_atom = cute.nvgpu.warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(self.c_layout, self.c_dtype, self.epi_tile[1]), self.c_dtype
        )
        self.epi_smem_layout_staged = cute.tile_to_shape(c_atom, (*self.epi_tile, self.epi_buffers), order=(0, 1, 2))
        # one column of wave_m A scales per (stage, wave), indexed like the A buffers
        self.sfa_smem_layout_staged = cute.make_layout((self.wave_m, 1, self.ab_stage * self.waves))
        # one 4-float box of B scales per stage (N block, K blocks 4j..4j+3), K contiguous
        self.sfb_smem_layout_staged = cute.make_layout(
            (1, SFB_TMA_GROUP, self.ab_stage), stride=(SFB_TMA_GROUP, 1, SFB_TMA_SLOT)
        )

        operands = (self.a_dtype, self.b_dtype, self.c_dtype, self.a_layout, self.b_layout, self.c_layout)
        self.mainloop = MainLoop(self.config, self.ab_stage)
        self.producer = Producer(self.config, self.ab_stage, self.work)
        self.epilogue = Epilogue(self.config, operands, self.epi_tile, self.epilog_sync_barrier)
        self.consumer = Consumer(
            self.config,
            self.ab_stage,
            operands,
            self.atom_layout_mnk,
            self.mainloop,
            self.epilogue,
            self.work,
            self.epilog_sync_barrier,
        )

    @cute.jit
    def __call__(
        self,
        a: cute.Tensor,  # (M, K, L) fp8, K-major
        b: cute.Tensor,  # (N, K, L) fp8, K-major
        sfa: cute.Tensor,  # (M, K/128, L) f32, M-major
        sfb: cute.Tensor,  # (ceil(N/128), K/128, L) f32
        c: cute.Tensor,  # (M, N, L) bf16, N-major
        tbuf: cute.Tensor,  # timing event buffer (int64); unused in plain builds
        ws: cute.Tensor,  # split-K fp32 partials (flat); unused when split_k == 1
        cnt: cute.Tensor,  # split-K arrivals per output tile (int32, zero between launches)
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

        tma = self._tma_atoms(a, b, sfa, sfb, c)

        # swizzle > 1: consecutive clusters walk `swizzle` cluster columns before the next M tile,
        # so one wave touches ~132/swizzle A strips and `swizzle` B strips (L2 reuse on big problems)
        tiles = self.work.work_tiles(c)
        grid = self.tile_order.grid(tiles, max_active_clusters)
        tile_walk = self.tile_order.kernel_arg(tiles)

        epi_cosize = cute.cosize(self.epi_smem_layout_staged) if self.epilogue_kind != "direct" else 8
        sfb_words = 2 * self.sfb_kb if self.sfb_smem and not self.sfb_tma else 4
        sfa_words = cute.cosize(self.sfa_smem_layout_staged) if self.sfa_tma else 4
        sfbt_words = SFB_TMA_SLOT * self.ab_stage if self.sfb_tma else 4

        @cute.struct
        class SharedStorage:
            mainloop_pipeline_array_ptr: cute.struct.MemRange[cutlass.Int64, self.ab_stage * 2]
            # ping-pong: the tensor-core turn of even / odd tiles (one mbarrier each)
            turn_mbar: cute.struct.MemRange[cutlass.Int64, 2]
            sA: cute.struct.Align[
                cute.struct.MemRange[self.a_dtype, cute.cosize(self.a_smem_layout_staged)], self.buffer_align_bytes
            ]
            sB: cute.struct.Align[
                cute.struct.MemRange[self.b_dtype, cute.cosize(self.b_smem_layout_staged)], self.buffer_align_bytes
            ]
            sC: cute.struct.Align[cute.struct.MemRange[self.c_dtype, epi_cosize], self.buffer_align_bytes]
            sSFB: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfb_words], 16]
            sSFA: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfa_words], 128]
            sSFBT: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, sfbt_words], 128]
            # split-K: whether this unit arrived last, from the thread that counted it in
            split_last: cute.struct.MemRange[cutlass.Int32, 1]

        self.shared_storage = SharedStorage

        self.kernel(
            *tma,
            sfa,
            sfb,
            c,
            tbuf,
            (ws, cnt),
            tile_slots,
            self.tiled_mma,
            self.cta_layout_mnk,
            self.a_smem_layout_staged,
            self.b_smem_layout_staged,
            self.epi_smem_layout_staged,
            tile_walk,
        ).launch(
            grid=grid,
            block=[self.threads_per_cta, 1, 1],
            cluster=(*self.cluster_shape_mn, 1) if self.config.launch_cluster else None,
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _tma_atoms(self, a, b, sfa, sfb, c) -> tuple:
        """The TMA atoms and tensors of A, B (multicast where the cluster shares them), D and, by
        switch, the A and B scales (A's atom and tensor in their places when a switch is off), in
        the kernel's argument order: (atom, tensor) of A, B, D, A scales, B scales."""
        b_smem_layout = cute.slice_(self.b_smem_layout_staged, (None, None, 0))
        a_op = (
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp()
            if self.num_mcast_ctas_a > 1
            else cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        )
        tma_atom_a, tma_tensor_a = cute.nvgpu.cpasync.make_tiled_tma_atom(
            a_op, a, self.a_box_layout, (self.a_rows, BLOCK_K), num_multicast=self.num_mcast_ctas_a
        )
        b_op = (
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp()
            if self.num_mcast_ctas_b > 1
            else cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        )
        tma_atom_b, tma_tensor_b = cute.nvgpu.cpasync.make_tiled_tma_atom(
            b_op, b, b_smem_layout, (self.tile_n, BLOCK_K), num_multicast=self.num_mcast_ctas_b
        )
        tma_atom_sfa, tma_tensor_sfa = tma_atom_a, tma_tensor_a  # placeholders when unused
        if self.sfa_tma:
            tma_atom_sfa, tma_tensor_sfa = cute.nvgpu.cpasync.make_tiled_tma_atom(
                cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), sfa, cute.make_layout((self.a_rows, 1)), (self.a_rows, 1)
            )
        tma_atom_sfb, tma_tensor_sfb = tma_atom_a, tma_tensor_a  # placeholders when unused
        if self.sfb_tma:
            tma_atom_sfb, tma_tensor_sfb = cute.nvgpu.cpasync.make_tiled_tma_atom(
                cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(),
                sfb,
                cute.slice_(self.sfb_smem_layout_staged, (None, None, 0)),
                (1, SFB_TMA_GROUP),
            )
        epi_smem_layout = cute.slice_(self.epi_smem_layout_staged, (None, None, 0))
        tma_atom_c, tma_tensor_c = cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), c, epi_smem_layout, self.epi_tile
        )
        return (
            tma_atom_a,
            tma_tensor_a,
            tma_atom_b,
            tma_tensor_b,
            tma_atom_c,
            tma_tensor_c,
            tma_atom_sfa,
            tma_tensor_sfa,
            tma_atom_sfb,
            tma_tensor_sfb,
        )

    # ----------------------------------------------------------------------------------------
    # device kernel
    # ----------------------------------------------------------------------------------------
    @cute.kernel
    def kernel(
        self,
        tma_atom_a: cute.CopyAtom,
        mA_mkl: cute.Tensor,  # (M, K, L) e4m3, K-major: A's TMA view
        tma_atom_b: cute.CopyAtom,
        mB_nkl: cute.Tensor,  # (N, K, L) e4m3, K-major: B's TMA view
        tma_atom_c: cute.CopyAtom,
        mC_tma: cute.Tensor,  # (M, N, L) bf16, N-major: D's TMA-store view
        tma_atom_sfa: cute.CopyAtom,
        mSFA_tma: cute.Tensor,  # (M, K/128, L) f32, M-major: A scales' TMA view (sfa_tma)
        tma_atom_sfb: cute.CopyAtom,
        mSFB_tma: cute.Tensor,  # (ceil(N/128), K/128, L) f32: B scales' TMA view (sfb_tma)
        mSFA: cute.Tensor,  # (M, K/128, L) f32, M-major
        mSFB: cute.Tensor,  # (ceil(N/128), K/128, L) f32, K-major
        mC_mnl: cute.Tensor,  # (M, N, L) bf16, N-major
        tbuf: cute.Tensor,  # (words,) int64 timing events; unused in plain builds
        split_ws: tuple,  # split-K: (fp32 partials (flat), int32 arrivals per tile)
        tile_slots: cutlass.Int32,
        tiled_mma: cute.TiledMma,
        cta_layout_mnk: cute.Layout,
        a_smem_layout_staged: cute.ComposedLayout,  # (wave_m, 128, stages * waves) e4m3
        b_smem_layout_staged: cute.ComposedLayout,  # (tile_n, 128, stages) e4m3
        epi_smem_layout_staged: cute.ComposedLayout,  # (epi_rows, epi_cols, epi buffers) bf16
        tile_walk: tuple,
    ):
        # on self, not a local: the DSL would try to carry a Python object through runtime `if`s
        self.rec = TimingRecorder(
            self.config.probe.timing, self.threads_per_cta // 32, tile_slots, self.config.probe.sample_every
        )
        self._bind(rec=self.rec)
        tidx, warp_idx, cta_linear = self._thread_ids()

        self._prefetch_descriptors(warp_idx, tma_atom_a, tma_atom_b, tma_atom_c, tma_atom_sfa, tma_atom_sfb)
        cluster_coord_mnk, a_mcast_mask, b_mcast_mask = self._multicast_masks(cta_layout_mnk)

        storage, mainloop_pipeline = self._pipeline(cta_layout_mnk, b_smem_layout_staged, warp_idx)

        sA = storage.sA.get_tensor(a_smem_layout_staged.outer, swizzle=a_smem_layout_staged.inner)
        sB = storage.sB.get_tensor(b_smem_layout_staged.outer, swizzle=b_smem_layout_staged.inner)
        gA_mkl, a_cta_layout, tAsA, tAgA, tBsB, tBgB = self._partition_ab(
            tma_atom_a, mA_mkl, tma_atom_b, mB_nkl, sA, sB, cta_layout_mnk, cluster_coord_mnk
        )
        sSFA, tFsF, tFgF, sSFBT, tGsG, tGgG = self._partition_scales(
            storage, tma_atom_sfa, mSFA_tma, tma_atom_sfb, mSFB_tma
        )

        warp_group_idx = cute.arch.make_warp_uniform(tidx // self.threads_per_wg)
        k_tile_cnt = cute.size(gA_mkl, mode=[3])
        # wave-row A tiles: the second wave of a tile can lie wholly past M; it then
        # re-loads the last real A tile (never stored) instead of indexing past the tensor,
        # which static layouts do not tolerate
        a_mtiles = cute.size(gA_mkl, mode=[2])
        tAgA_s, tFgF_s = self._partition_shifted(
            mA_mkl, tma_atom_a, tAgA, sA, a_cta_layout, cluster_coord_mnk, tma_atom_sfa, mSFA_tma, tFgF, sSFA
        )

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)

        # the register split and the dispatch; each role opens its WarpScope again in the modules
        # of its code, so that `bsprof sass --by roles` (line info names only the innermost source
        # line) finds the role in the file of each instruction
        scope = WarpScope("ProducerWarp", warp_start=PRODUCER_WARPS[0], warp_end=PRODUCER_WARPS[1])
        if warp_group_idx == 0:
            cute.arch.setmaxregister_decrease(self.config.pipeline.producer_regs)
        if warp_idx == self.load_warp_id:
            self.producer.run(
                (tma_atom_a, tAgA, tAsA, tAgA_s, a_mcast_mask, a_mtiles),
                (tma_atom_sfa, tFgF, tFsF, tFgF_s),
                (tma_atom_b, tBgB, tBsB, b_mcast_mask),
                (tma_atom_sfb, tGgG, tGsG),
                mainloop_pipeline,
                k_tile_cnt,
                mC_mnl,
                tbuf,
                cta_linear,
                warp_idx,
                tile_walk,
            )

        scope.switch("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1])
        if warp_group_idx > 0:
            cute.arch.setmaxregister_increase(self.config.consumer_regs)
            self.consumer.run(
                tiled_mma,
                sA,
                sB,
                storage,
                epi_smem_layout_staged,
                tma_atom_c,
                mC_tma,
                (sSFA, sSFBT),
                mSFA,
                mSFB,
                mC_mnl,
                mainloop_pipeline,
                k_tile_cnt,
                tidx,
                warp_idx,
                warp_group_idx,
                cta_linear,
                tbuf,
                split_ws,
                tile_walk,
            )
        scope.close()

    @cute.jit
    def _thread_ids(self):
        """(thread index, warp index, the CTA's linear index in the grid: the timing rows' key)."""
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        bidx, bidy, bidz = cute.arch.block_idx()
        gdx, gdy, _ = cute.arch.grid_dim()
        cta_linear = bidx + bidy * gdx + bidz * gdx * gdy
        return tidx, warp_idx, cta_linear

    @cute.jit
    def _prefetch_descriptors(self, warp_idx, tma_atom_a, tma_atom_b, tma_atom_c, tma_atom_sfa, tma_atom_sfb):
        """Warp 0 prefetches the TMA descriptors this build uses."""
        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_b)
            if cutlass.const_expr(self.epilogue_kind != "direct"):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_c)
            if cutlass.const_expr(self.sfa_tma):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_sfa)
            if cutlass.const_expr(self.sfb_tma):
                cute.nvgpu.cpasync.prefetch_descriptor(tma_atom_sfb)

    @cute.jit
    def _multicast_masks(self, cta_layout_mnk):
        """This CTA's place in its cluster and the TMA multicast masks of A (its cluster column)
        and B (its row), 0 without multicast. Returns (cluster_coord_mnk, a_mask, b_mask)."""
        cta_rank_in_cluster = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cluster_coord_mnk = cta_layout_mnk.get_flat_coord(cta_rank_in_cluster)
        b_mcast_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord_mnk, mode=0)
        b_mcast_mask = b_mcast_mask if cutlass.const_expr(self.num_mcast_ctas_b > 1) else 0
        a_mcast_mask = cute.make_layout_image_mask(cta_layout_mnk, cluster_coord_mnk, mode=1)
        a_mcast_mask = a_mcast_mask if cutlass.const_expr(self.num_mcast_ctas_a > 1) else 0
        return cluster_coord_mnk, a_mcast_mask, b_mcast_mask

    def _bind(self, **values) -> None:
        """Hand trace-time values (the timing recorder, the shifted last tile) to every unit."""
        for unit in (self.producer, self.mainloop, self.epilogue, self.consumer):
            for name, value in values.items():
                setattr(unit, name, value)

    @cute.jit
    def _pipeline(self, cta_layout_mnk, b_smem_layout_staged, warp_idx):
        """The shared storage and the producer -> consumers ring (its mbarriers initialized; with
        ping-pong, the two turn barriers too). Returns (storage, pipeline)."""
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
        return storage, mainloop_pipeline

    @cute.jit
    def _partition_ab(self, tma_atom_a, mA_mkl, tma_atom_b, mB_nkl, sA, sB, cta_layout_mnk, cluster_coord_mnk):
        """A's and B's tiles in global memory and their TMA partitions into the smem ring: A's by
        this CTA's cluster column (its multicast peers), B's by its row."""
        # (bM, bK, RestM, RestK, RestL) etc.
        gA_mkl = cute.local_tile(mA_mkl, (self.a_rows, BLOCK_K), (None, None, None))
        gB_nkl = cute.local_tile(mB_nkl, (self.tile_n, BLOCK_K), (None, None, None))

        a_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (0, None, 0)).shape)
        sA_box = sA
        if cutlass.const_expr(self.a_rows != self.wave_m):
            sA_box = cute.local_tile(sA, (self.a_rows, BLOCK_K), (0, 0, None))
        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(
            tma_atom_a,
            cluster_coord_mnk[1],
            a_cta_layout,
            cute.group_modes(sA_box, 0, 2),
            cute.group_modes(gA_mkl, 0, 2),
        )
        b_cta_layout = cute.make_layout(cute.slice_(cta_layout_mnk, (None, 0, 0)).shape)
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(
            tma_atom_b, cluster_coord_mnk[0], b_cta_layout, cute.group_modes(sB, 0, 2), cute.group_modes(gB_nkl, 0, 2)
        )
        return gA_mkl, a_cta_layout, tAsA, tAgA, tBsB, tBgB

    @cute.jit
    def _partition_scales(self, storage, tma_atom_sfa, mSFA_tma, tma_atom_sfb, mSFB_tma):
        """The stages' scale slots in smem and, where the scales come by TMA, their partitions:
        (sSFA, tFsF, tFgF, sSFBT, tGsG, tGgG), None where a switch leaves one out."""
        # the layout is rebuilt here: a host-side layout object cannot be used inside the kernel
        sSFA = storage.sSFA.get_tensor(cute.make_layout((self.wave_m, 1, self.ab_stage * self.waves)))
        tFsF, tFgF = None, None
        if cutlass.const_expr(self.sfa_tma):
            gSFA = cute.local_tile(mSFA_tma, (self.a_rows, 1), (None, None, None))
            sSFA_box = sSFA
            if cutlass.const_expr(self.a_rows != self.wave_m):
                sSFA_box = cute.local_tile(sSFA, (self.a_rows, 1), (0, 0, None))
            tFsF, tFgF = cute.nvgpu.cpasync.tma_partition(
                tma_atom_sfa, 0, cute.make_layout(1), cute.group_modes(sSFA_box, 0, 2), cute.group_modes(gSFA, 0, 2)
            )
        sSFBT = storage.sSFBT.get_tensor(
            cute.make_layout((1, SFB_TMA_GROUP, self.ab_stage), stride=(SFB_TMA_GROUP, 1, SFB_TMA_SLOT))
        )
        tGsG, tGgG = None, None
        if cutlass.const_expr(self.sfb_tma):
            # (box, N block, group of 4 K blocks, L)
            gSFB = cute.local_tile(mSFB_tma, (1, SFB_TMA_GROUP), (None, None, None))
            tGsG, tGgG = cute.nvgpu.cpasync.tma_partition(
                tma_atom_sfb, 0, cute.make_layout(1), cute.group_modes(sSFBT, 0, 2), cute.group_modes(gSFB, 0, 2)
            )
        return sSFA, tFsF, tFgF, sSFBT, tGsG, tGgG

    @cute.jit
    def _partition_shifted(
        self, mA_mkl, tma_atom_a, tAgA, sA, a_cta_layout, cluster_coord_mnk, tma_atom_sfa, mSFA_tma, tFgF, sSFA
    ):
        """Where ``shift_last_m`` moves the last M tile up to end at M (config.shifted_start): the
        row it starts at, bound on the units that index by it, and the A (and A-scale) partitions
        of a view that starts there. Returns those partitions (the plain ones without a shift)."""
        m_shift = self.config.shift_rows(cute.size(mA_mkl, mode=[0]))
        m_last = (cute.size(mA_mkl, mode=[0]) + self.tile_m - 1) // self.tile_m - 1 if m_shift else 0
        self._bind(m_shift=m_shift, m_last=m_last)
        tAgA_s, tFgF_s = tAgA, tFgF
        if cutlass.const_expr(m_shift > 0):
            # the shifted last tile's wave w is wave-row tile w of a view that starts at its first row
            gA_s = cute.local_tile(
                cute.domain_offset((m_shift, 0, 0), mA_mkl), (self.wave_m, BLOCK_K), (None, None, None)
            )
            _, tAgA_s = cute.nvgpu.cpasync.tma_partition(
                tma_atom_a, cluster_coord_mnk[1], a_cta_layout, cute.group_modes(sA, 0, 2), cute.group_modes(gA_s, 0, 2)
            )
            if cutlass.const_expr(self.sfa_tma):
                gSFA_s = cute.local_tile(
                    cute.domain_offset((m_shift, 0, 0), mSFA_tma), (self.wave_m, 1), (None, None, None)
                )
                _, tFgF_s = cute.nvgpu.cpasync.tma_partition(
                    tma_atom_sfa, 0, cute.make_layout(1), cute.group_modes(sSFA, 0, 2), cute.group_modes(gSFA_s, 0, 2)
                )
        return tAgA_s, tFgF_s
