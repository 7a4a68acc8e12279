"""Persistent, warp-specialized block-scaled FP4 GEMM for Blackwell (sm_100a), CuTe DSL.

D[l] = dequant(A[l], SFA[l]) . dequant(B[l], SFB[l])^T with A (M, K, L) and B (N, K, L) FP4 E2M1,
K-major; SFA/SFB one scale per ``sf_vec`` K elements in the tcgen05 128x4 atom layout
(:mod:`bsprof.kernels.nvfp4.quant`); D (M, N, L) row-major Float16 / BFloat16 / Float32.

Warps: 0-3 epilogue, 4 MMA, 5 TMA. The TMA warp streams A/B/SFA/SFB K-tiles into an
``ab_stage``-deep mbarrier ring; the MMA warp copies each stage's scale factors shared -> tensor
memory (``tcgen05.cp``, SASS UTCCP) and issues ``tcgen05.mma.kind::mxf4(nvf4).block_scale``
(SASS UTCOMMA) into an accumulator in tensor memory; the epilogue warps read the accumulator
(``tcgen05.ld``), convert, and store D either straight to global memory (SIMT) or through shared
memory with TMA stores. Every CTA walks its tiles in a static persistent order (:mod:`..tile_order`).

Switches (constructor arguments; :mod:`.config` says which variant turns on which):
``tile_m`` (256 = 2-CTA MMA), ``tile_n``, ``cluster_m/n`` (multicast), ``ab_stage`` (0 = from
shared-memory capacity), ``acc_stage`` (0 = two stages when tensor memory allows), ``epilogue``
("simt" | "tma"), ``cache_hint`` (L2 policy on the TMA loads), ``timing`` (per-warp per-tile
clock64 events, :mod:`bsprof.kernels.timing_recorder`), ``delay_kloop`` / ``delay_phase1``
(clock64 spin cycles per K-tile in the MMA warp / per epilogue subtile before the accumulator
is released; 0 = no code).
"""

from __future__ import annotations

from typing import Tuple

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as bs_layout
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.tile_order import TileOrder, tile_counts
from bsprof.kernels.timing_recorder import EV, TimingRecorder

WARPS_PER_CTA = 6
EPILOGUE_WARPS = 4   # warps 0..3 (a count, so `warp_idx < EPILOGUE_WARPS` reads as the epilogue role)
EPI_WARPS = tuple(range(EPILOGUE_WARPS))
MMA_WARP = 4
TMA_WARP = 5
MMA_K_PER_STAGE = 4  # K=64 FP4 MMAs per pipeline stage -> 256 K elements per stage

# L2 cache-policy operands for TMA loads (the createpolicy encodings CUTLASS uses)
L2_EVICT_FIRST = 0x12F0000000000000
L2_EVICT_LAST = 0x14F0000000000000

DTYPES = {
    "Float16": cutlass.Float16, "BFloat16": cutlass.BFloat16, "Float32": cutlass.Float32,
    "Float8E4M3FN": cutlass.Float8E4M3FN, "Float8E8M0FNU": cutlass.Float8E8M0FNU,
}


class Nvfp4Gemm:
    def __init__(self, *, tile_m: int = 128, tile_n: int = 128, cluster_m: int = 1, cluster_n: int = 1,
                 ab_stage: int = 4, acc_stage: int = 1, epilogue: str = "simt", cache_hint: bool = False,
                 sf_dtype: str = "Float8E4M3FN", sf_vec: int = 16, c_dtype: str = "Float16",
                 timing: bool = False, delay_kloop: int = 0, delay_phase1: int = 0, sample_every: int = 1):
        self.acc_dtype = cutlass.Float32
        self.ab_dtype = cutlass.Float4E2M1FN
        self.sf_dtype = DTYPES[sf_dtype]
        self.c_dtype = DTYPES[c_dtype]
        self.sf_vec = int(sf_vec)
        self.use_2cta = tile_m == 256
        self.cta_group = tcgen05.CtaGroup.TWO if self.use_2cta else tcgen05.CtaGroup.ONE
        self.mma_mn = (int(tile_m), int(tile_n))
        self.cluster_shape_mn = (int(cluster_m), int(cluster_n))
        self.tile_order = TileOrder(self.cluster_shape_mn)
        self.ab_stage_req = int(ab_stage)
        self.acc_stage_req = int(acc_stage)
        self.use_tma_store = epilogue == "tma"
        self.cache_hint = bool(cache_hint)
        self.timing = bool(timing)
        self.delay_kloop = int(delay_kloop)
        self.delay_phase1 = int(delay_phase1)
        self.sample_every = int(sample_every)
        self.threads_per_cta = 32 * WARPS_PER_CTA
        self.epi_sync = pipeline.NamedBarrier(barrier_id=1, num_threads=32 * len(EPI_WARPS))
        self.tmem_alloc_barrier = pipeline.NamedBarrier(barrier_id=2, num_threads=32 * (len(EPI_WARPS) + 1))
        self.smem_capacity = cutlass.memory.get_smem_capacity_in_bytes("sm_100")
        self.tmem_cols = cute.arch.get_max_tmem_alloc_cols("sm_100")
        self.a_major = OperandMajorMode.K
        self.b_major = OperandMajorMode.K
        self.c_layout = tensor_utils.LayoutEnum.ROW_MAJOR

    # ------------------------------------------------------------------------------------------
    # trace-time set-up (host side of the JIT)
    # ------------------------------------------------------------------------------------------
    def _tiled_mma(self, cta_group, mn):
        return sm100_utils.make_blockscaled_trivial_tiled_mma(
            self.ab_dtype, self.ab_dtype, self.a_major, self.b_major, self.sf_dtype, self.sf_vec, cta_group, mn)

    def _setup(self):
        # the SFB MMA view: one CTA's rows, N rounded up to the 128-row scale atom
        self.mma_mn_sfb = (self.mma_mn[0] // (2 if self.use_2cta else 1), cute.round_up(self.mma_mn[1], 128))
        tiled_mma = self._tiled_mma(self.cta_group, self.mma_mn)
        inst_k = cute.size(tiled_mma.shape_mnk, mode=[2])
        self.mma_tiler = (*self.mma_mn, inst_k * MMA_K_PER_STAGE)
        self.mma_tiler_sfb = (*self.mma_mn_sfb, inst_k * MMA_K_PER_STAGE)
        nthr = cute.size(tiled_mma.thr_id.shape)
        self.cta_tile = (self.mma_tiler[0] // nthr, self.mma_tiler[1], self.mma_tiler[2])
        self.cluster_layout_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma.thr_id.shape,))
        tiled_mma_sfb = self._tiled_mma(tcgen05.CtaGroup.ONE, self.mma_mn_sfb)
        self.cluster_layout_sfb_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma_sfb.thr_id.shape,))
        self.num_mcast_a = cute.size(self.cluster_layout_vmnk.shape[2])
        self.num_mcast_b = cute.size(self.cluster_layout_vmnk.shape[1])
        self.num_mcast_sfb = cute.size(self.cluster_layout_sfb_vmnk.shape[1])

        self.epi_tile = sm100_utils.compute_epilogue_tile_shape(
            self.cta_tile, self.use_2cta, self.c_layout, self.c_dtype)
        self.epi_tile_n = cute.size(self.epi_tile[1])

        # tensor memory: accumulators first, then SFA and SFB columns
        sf_atom_mn = 32
        self.sfa_tmem_cols = (self.cta_tile[0] // sf_atom_mn) * MMA_K_PER_STAGE
        self.sfb_tmem_cols = (self.mma_mn_sfb[1] // sf_atom_mn) * MMA_K_PER_STAGE
        sf_cols = self.sfa_tmem_cols + self.sfb_tmem_cols
        if self.acc_stage_req == 0:
            self.acc_stage = 2 if 2 * self.cta_tile[1] + sf_cols <= self.tmem_cols else 1
        else:
            self.acc_stage = self.acc_stage_req
        self.acc_tmem_cols = self.cta_tile[1] * self.acc_stage
        if self.acc_tmem_cols + sf_cols > self.tmem_cols:
            raise ValueError(f"{self.acc_stage} accumulator stages of {self.cta_tile[1]} columns plus {sf_cols} "
                             f"scale-factor columns exceed {self.tmem_cols} tensor-memory columns")

        # shared memory: C staging (TMA-store epilogue) + A/B/SFA/SFB stages
        self.c_stage = 2 if self.use_tma_store else 0

        def one():
            return (sm100_utils.make_smem_layout_a(tiled_mma, self.mma_tiler, self.ab_dtype, 1),
                    sm100_utils.make_smem_layout_b(tiled_mma, self.mma_tiler, self.ab_dtype, 1),
                    bs_layout.make_smem_layout_sfa(tiled_mma, self.mma_tiler, self.sf_vec, 1),
                    bs_layout.make_smem_layout_sfb(tiled_mma, self.mma_tiler, self.sf_vec, 1))

        a1, b1, sfa1, sfb1 = one()
        ab_bytes = (cute.size_in_bytes(self.ab_dtype, a1) + cute.size_in_bytes(self.ab_dtype, b1)
                    + cute.size_in_bytes(self.sf_dtype, sfa1) + cute.size_in_bytes(self.sf_dtype, sfb1))
        c_bytes = 0
        if self.use_tma_store:
            c1 = sm100_utils.make_smem_layout_epi(self.c_dtype, self.c_layout, self.epi_tile, 1)
            c_bytes = cute.size_in_bytes(self.c_dtype, c1) * self.c_stage
        reserved = 1024  # mbarriers, tmem pointer, alignment slack
        if self.ab_stage_req == 0:
            self.ab_stage = (self.smem_capacity - reserved - c_bytes) // ab_bytes
        else:
            self.ab_stage = self.ab_stage_req
        self.ab_bytes_per_stage = ab_bytes
        if self.ab_stage < 2 or self.ab_stage * ab_bytes + c_bytes + reserved > self.smem_capacity:
            raise ValueError(f"{self.ab_stage} A/B stages of {ab_bytes} B do not fit {self.smem_capacity} B of smem")

        self.a_smem_staged = sm100_utils.make_smem_layout_a(tiled_mma, self.mma_tiler, self.ab_dtype, self.ab_stage)
        self.b_smem_staged = sm100_utils.make_smem_layout_b(tiled_mma, self.mma_tiler, self.ab_dtype, self.ab_stage)
        self.sfa_smem_staged = bs_layout.make_smem_layout_sfa(tiled_mma, self.mma_tiler, self.sf_vec, self.ab_stage)
        self.sfb_smem_staged = bs_layout.make_smem_layout_sfb(tiled_mma, self.mma_tiler, self.sf_vec, self.ab_stage)
        self.c_smem_staged = (sm100_utils.make_smem_layout_epi(self.c_dtype, self.c_layout, self.epi_tile,
                                                               self.c_stage) if self.use_tma_store else None)
        return tiled_mma, tiled_mma_sfb

    @cute.jit
    def __call__(self, a_ptr: cute.Pointer, b_ptr: cute.Pointer, sfa_ptr: cute.Pointer, sfb_ptr: cute.Pointer,
                 c_ptr: cute.Pointer, tbuf_ptr: cute.Pointer, mnkl: Tuple[cutlass.Int32, cutlass.Int32,
                 cutlass.Int32, cutlass.Int32], tile_slots: cutlass.Int32, max_active_clusters: cutlass.Constexpr,
                 stream: cuda.CUstream):
        m, n, k, batches = mnkl
        tiled_mma, tiled_mma_sfb = self._setup()
        # A (M, K, L) and B (N, K, L) K-major; D (M, N, L) row-major
        a = cute.make_tensor(a_ptr, cute.make_ordered_layout((cute.assume(m, 32), k, batches), order=(1, 0, 2)))
        b = cute.make_tensor(b_ptr, cute.make_ordered_layout((cute.assume(n, 32), k, batches), order=(1, 0, 2)))
        c = cute.make_tensor(c_ptr, cute.make_ordered_layout((m, cute.assume(n, 32), batches), order=(1, 0, 2)))
        sfa = cute.make_tensor(sfa_ptr, bs_layout.tile_atom_to_shape_SF(a.shape, self.sf_vec))
        sfb = cute.make_tensor(sfb_ptr, bs_layout.tile_atom_to_shape_SF(b.shape, self.sf_vec))

        vshape = self.cluster_layout_vmnk.shape
        a_smem = cute.slice_(self.a_smem_staged, (None, None, None, 0))
        b_smem = cute.slice_(self.b_smem_staged, (None, None, None, 0))
        sfa_smem = cute.slice_(self.sfa_smem_staged, (None, None, None, 0))
        sfb_smem = cute.slice_(self.sfb_smem_staged, (None, None, None, 0))
        a_op = sm100_utils.cluster_shape_to_tma_atom_A(self.cluster_shape_mn, tiled_mma.thr_id)
        b_op = sm100_utils.cluster_shape_to_tma_atom_B(self.cluster_shape_mn, tiled_mma.thr_id)
        sfb_op = sm100_utils.cluster_shape_to_tma_atom_SFB(self.cluster_shape_mn, tiled_mma.thr_id)
        tma_a, gA_tma = cute.nvgpu.make_tiled_tma_atom_A(a_op, a, a_smem, self.mma_tiler, tiled_mma, vshape)
        tma_b, gB_tma = cute.nvgpu.make_tiled_tma_atom_B(b_op, b, b_smem, self.mma_tiler, tiled_mma, vshape)
        # scale factors move as 16-bit units so a 128x4 atom row is one TMA element pair
        tma_sfa, gSFA_tma = cute.nvgpu.make_tiled_tma_atom_A(a_op, sfa, sfa_smem, self.mma_tiler, tiled_mma,
                                                             vshape, internal_type=cutlass.Int16)
        tma_sfb, gSFB_tma = cute.nvgpu.make_tiled_tma_atom_B(sfb_op, sfb, sfb_smem, self.mma_tiler_sfb,
                                                             tiled_mma_sfb, self.cluster_layout_sfb_vmnk.shape,
                                                             internal_type=cutlass.Int16)
        nthr = cute.size(tiled_mma.thr_id.shape)
        self.tma_bytes = (cute.size_in_bytes(self.ab_dtype, a_smem) + cute.size_in_bytes(self.ab_dtype, b_smem)
                          + cute.size_in_bytes(self.sf_dtype, sfa_smem)
                          + cute.size_in_bytes(self.sf_dtype, sfb_smem)) * nthr

        tma_c = None
        gC_tma = c
        if cutlass.const_expr(self.use_tma_store):
            epi_smem = cute.slice_(self.c_smem_staged, (None, None, 0))
            tma_c, gC_tma = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), c, epi_smem,
                                                        self.epi_tile)

        tiles = self._tiles_mnl(c)
        grid = self.tile_order.grid(tiles, max_active_clusters)
        tile_walk = self.tile_order.kernel_arg(tiles)

        @cute.struct
        class SharedStorage:
            ab_full: cute.struct.MemRange[cutlass.Int64, self.ab_stage]
            ab_empty: cute.struct.MemRange[cutlass.Int64, self.ab_stage]
            acc_full: cute.struct.MemRange[cutlass.Int64, self.acc_stage]
            acc_empty: cute.struct.MemRange[cutlass.Int64, self.acc_stage]
            tmem_dealloc: cutlass.Int64
            tmem_holding: cutlass.Int32
            sA: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(self.a_smem_staged.outer)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(self.b_smem_staged.outer)], 1024]
            sSFA: cute.struct.Align[cute.struct.MemRange[self.sf_dtype, cute.cosize(self.sfa_smem_staged)], 1024]
            sSFB: cute.struct.Align[cute.struct.MemRange[self.sf_dtype, cute.cosize(self.sfb_smem_staged)], 1024]

        self.shared_storage = SharedStorage
        # what the launch will ask for: the struct plus the 1024-aligned C staging buffer
        self.smem_bytes = SharedStorage.size_in_bytes() + (
            cute.size_in_bytes(self.c_dtype, self.c_smem_staged) + 1024 if self.use_tma_store else 0)
        if cutlass.const_expr(self.smem_bytes > self.smem_capacity):
            raise ValueError(f"shared memory {self.smem_bytes} B > {self.smem_capacity} B: lower ab_stage")
        tbuf = cute.make_tensor(tbuf_ptr, cute.make_layout(1))

        self.kernel(tiled_mma, tiled_mma_sfb, tma_a, gA_tma, tma_b, gB_tma, tma_sfa, gSFA_tma, tma_sfb, gSFB_tma,
                    tma_c, gC_tma, tbuf, tile_slots, self.cluster_layout_vmnk, self.cluster_layout_sfb_vmnk,
                    self.a_smem_staged, self.b_smem_staged, self.sfa_smem_staged, self.sfb_smem_staged,
                    self.c_smem_staged, self.epi_tile, tile_walk).launch(
            grid=grid, block=[self.threads_per_cta, 1, 1], cluster=(*self.cluster_shape_mn, 1), stream=stream,
            min_blocks_per_mp=1)

    def _tiles_mnl(self, c) -> tuple:
        """CTA tiles of the output ``c`` along M, N and L (the host's tensor or the kernel's)."""
        return tile_counts(tuple(cute.size(c, mode=[i]) for i in range(3)), self.cta_tile[:2])

    # ------------------------------------------------------------------------------------------
    # device kernel
    # ------------------------------------------------------------------------------------------
    @cute.kernel
    def kernel(
        self,
        tiled_mma: cute.TiledMma,
        tiled_mma_sfb: cute.TiledMma,
        tma_a: cute.CopyAtom,
        mA: cute.Tensor,                    # (M, K, L) e2m1, K-major: A's TMA view
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,                    # (N, K, L) e2m1, K-major: B's TMA view
        tma_sfa: cute.CopyAtom,
        mSFA: cute.Tensor,                  # (M, K / sf_vec, L) scale factors, tcgen05 128x4 atoms: A's TMA view
        tma_sfb: cute.CopyAtom,
        mSFB: cute.Tensor,                  # (N, K / sf_vec, L) scale factors, tcgen05 128x4 atoms: B's TMA view
        tma_c,
        mC: cute.Tensor,                    # (M, N, L) c_dtype, N-major (D's TMA-store view with epilogue="tma")
        tbuf: cute.Tensor,                  # the timing buffer (int64; the recorder uses its address)
        tile_slots: cutlass.Int32,
        cluster_layout_vmnk: cute.Layout,
        cluster_layout_sfb_vmnk: cute.Layout,
        a_smem_staged: cute.ComposedLayout,     # (MMA, MMA_M, MMA_K, stages) e2m1
        b_smem_staged: cute.ComposedLayout,     # (MMA, MMA_N, MMA_K, stages) e2m1
        sfa_smem_staged: cute.Layout,
        sfb_smem_staged: cute.Layout,
        c_smem_staged,                          # (epi_m, epi_n, c_stage) or None (epilogue="simt")
        epi_tile: cute.Tile,
        tile_walk: tuple,
    ):
        # on self, not a local: the DSL would try to carry a Python object through runtime `if`s
        self.rec = TimingRecorder(self.timing, WARPS_PER_CTA, tile_slots, self.sample_every)
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, bidz = cute.arch.block_idx()
        gdx, gdy, _ = cute.arch.grid_dim()
        cta_linear = bidx + bidy * gdx + bidz * gdx * gdy

        if warp_idx == TMA_WARP:
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)
            cpasync.prefetch_descriptor(tma_sfa)
            cpasync.prefetch_descriptor(tma_sfb)
            if cutlass.const_expr(self.use_tma_store):
                cpasync.prefetch_descriptor(tma_c)

        nthr = cute.size(tiled_mma.thr_id.shape)
        mma_coord_v = bidx % nthr
        is_leader_cta = mma_coord_v == 0
        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cl_vmnk = cluster_layout_vmnk.get_flat_coord(cta_rank)
        cl_sfb_vmnk = cluster_layout_sfb_vmnk.get_flat_coord(cta_rank)

        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        ab_pipe, acc_pipe, tmem = self._pipelines(storage, cluster_layout_vmnk)

        sA = storage.sA.get_tensor(a_smem_staged.outer, swizzle=a_smem_staged.inner)
        sB = storage.sB.get_tensor(b_smem_staged.outer, swizzle=b_smem_staged.inner)
        sSFA = storage.sSFA.get_tensor(sfa_smem_staged)
        sSFB = storage.sSFB.get_tensor(sfb_smem_staged)
        sC = None
        if cutlass.const_expr(self.use_tma_store):
            sC = smem.allocate_tensor(element_type=self.c_dtype, layout=c_smem_staged.outer,
                                      byte_alignment=1024, swizzle=c_smem_staged.inner)

        a_mask, b_mask, sfa_mask, sfb_mask = self._multicast_masks(cluster_layout_vmnk, cluster_layout_sfb_vmnk,
                                                                   cl_vmnk, cl_sfb_vmnk)

        # (bM, bK, RestM, RestK, RestL) etc.
        gA = cute.local_tile(mA, cute.slice_(self.mma_tiler, (None, 0, None)), (None, None, None))
        gB = cute.local_tile(mB, cute.slice_(self.mma_tiler, (0, None, None)), (None, None, None))
        gSFA = cute.local_tile(mSFA, cute.slice_(self.mma_tiler, (None, 0, None)), (None, None, None))
        gSFB = cute.local_tile(mSFB, cute.slice_(self.mma_tiler_sfb, (0, None, None)), (None, None, None))
        gC = cute.local_tile(mC, cute.slice_(self.mma_tiler, (None, None, 0)), (None, None, None))
        k_tiles = cute.size(gA, mode=[3])

        thr_mma = tiled_mma.get_slice(mma_coord_v)
        thr_mma_sfb = tiled_mma_sfb.get_slice(mma_coord_v)
        tCgA = thr_mma.partition_A(gA)
        tCgB = thr_mma.partition_B(gB)
        tCgSFA = thr_mma.partition_A(gSFA)
        tCgSFB = thr_mma_sfb.partition_B(gSFB)
        tCgC = thr_mma.partition_C(gC)

        tAsA, tAgA, tBsB, tBgB, tAsSFA, tAgSFA, tBsSFB, tBgSFB = self._tma_partitions(
            (tma_a, tma_b, tma_sfa, tma_sfb), (tCgA, tCgB, tCgSFA, tCgSFB), (sA, sB, sSFA, sSFB),
            cluster_layout_vmnk, cluster_layout_sfb_vmnk, cl_vmnk, cl_sfb_vmnk)

        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, self.acc_stage))

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)
        walk = self.tile_order.kernel_side(tile_walk, self._tiles_mnl(mC))

        # ---------------------------------------------------------------- TMA warp
        if warp_idx == TMA_WARP:
            with WarpScope("TmaWarp", warp_start=TMA_WARP, warp_end=TMA_WARP + 1):
                self.producer(tma_a, tma_b, tma_sfa, tma_sfb, tAgA, tAsA, tBgB, tBsB, tAgSFA, tAsSFA, tBgSFB,
                              tBsSFB, a_mask, b_mask, sfa_mask, sfb_mask, ab_pipe, k_tiles, walk, nthr,
                              tbuf, cta_linear, warp_idx)

        # ---------------------------------------------------------------- MMA warp
        if warp_idx == MMA_WARP:
            with WarpScope("MmaWarp", warp_start=MMA_WARP, warp_end=MMA_WARP + 1):
                self._mma_warp(tmem, tiled_mma, tCrA, tCrB, tCtAcc_fake, sSFA, sSFB, sfa_smem_staged,
                               sfb_smem_staged, ab_pipe, acc_pipe, is_leader_cta, k_tiles, walk, tbuf, cta_linear,
                               warp_idx)

        # ---------------------------------------------------------------- epilogue warps
        if warp_idx < EPILOGUE_WARPS:
            with WarpScope("EpilogueWarps", warp_start=EPI_WARPS[0], warp_end=EPI_WARPS[-1] + 1):
                self._epilogue_warps(tmem, tCtAcc_fake, tidx, warp_idx, tma_c, tCgC, sC, epi_tile, acc_pipe, walk,
                                     nthr, tbuf, cta_linear)

    @cute.jit
    def _multicast_masks(self, cluster_layout_vmnk, cluster_layout_sfb_vmnk, cl_vmnk, cl_sfb_vmnk):
        """The TMA multicast masks of A, B, SFA and SFB (None without multicast or 2-CTA MMA)."""
        a_mask = None
        b_mask = None
        sfa_mask = None
        sfb_mask = None
        if cutlass.const_expr(self.num_mcast_a > 1 or self.num_mcast_b > 1 or self.use_2cta):
            a_mask = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, cl_vmnk, mcast_mode=2)
            b_mask = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, cl_vmnk, mcast_mode=1)
            sfa_mask = cpasync.create_tma_multicast_mask(cluster_layout_vmnk, cl_vmnk, mcast_mode=2)
            sfb_mask = cpasync.create_tma_multicast_mask(cluster_layout_sfb_vmnk, cl_sfb_vmnk, mcast_mode=1)
        return a_mask, b_mask, sfa_mask, sfb_mask

    @cute.jit
    def _epilogue_warps(self, tmem, tCtAcc_fake, tidx, warp_idx, tma_c, tCgC, sC, epi_tile, acc_pipe, walk,
                        nthr: cutlass.Constexpr, tbuf, cta_linear):
        """The epilogue warps: allocate tensor memory (they own it), store every tile, free it."""
        tmem.allocate(self.tmem_cols)
        tmem.wait_for_alloc()
        acc_tmem_ptr = tmem.retrieve_ptr(self.acc_dtype)
        tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
        self.epilogue(tidx, warp_idx, tma_c, tCtAcc_base, tCgC, sC, epi_tile, acc_pipe, walk,
                      nthr, tbuf, cta_linear)
        tmem.relinquish_alloc_permit()
        self.epi_sync.arrive_and_wait()
        tmem.free(acc_tmem_ptr)

    @cute.jit
    def _pipelines(self, storage, cluster_layout_vmnk):
        """The A/B ring, the accumulator ring and the tensor-memory allocator, their barriers
        initialized. Returns (ab_pipe, acc_pipe, tmem)."""
        # A/B ring: TMA (one thread) produces, the MMA warp consumes; every CTA whose tile a multicast
        # writes into must see the release
        ab_pipe = pipeline.PipelineTmaUmma.create(
            barrier_storage=storage.ab_full.data_ptr(), num_stages=self.ab_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mcast_a + self.num_mcast_b - 1),
            tx_count=self.tma_bytes, cta_layout_vmnk=cluster_layout_vmnk, defer_sync=True)
        acc_pipe = pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.acc_full.data_ptr(), num_stages=self.acc_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread,
                                                     32 * len(EPI_WARPS) * (2 if self.use_2cta else 1)),
            cta_layout_vmnk=cluster_layout_vmnk, defer_sync=True)
        tmem = cutlass.memory.TmemAllocator(storage.tmem_holding.ptr, barrier_for_retrieve=self.tmem_alloc_barrier,
                                   allocator_warp_id=EPI_WARPS[0], is_two_cta=self.use_2cta,
                                   two_cta_tmem_dealloc_mbar_ptr=storage.tmem_dealloc.ptr)
        pipeline_init_arrive(cluster_shape_mn=self.cluster_shape_mn, is_relaxed=True)
        return ab_pipe, acc_pipe, tmem

    @cute.jit
    def _tma_partitions(self, atoms, gmem, smem, cluster_layout_vmnk, cluster_layout_sfb_vmnk, cl_vmnk, cl_sfb_vmnk):
        """The TMA partitions of A, B and their scale factors: (smem, global) for each, A's and its
        scales' by this CTA's cluster column (their multicast peers), B's and its scales' by its row.
        ``atoms``, ``gmem`` (the MMA partitions of the global tiles) and ``smem`` in that order."""
        tma_a, tma_b, tma_sfa, tma_sfb = atoms
        tCgA, tCgB, tCgSFA, tCgSFB = gmem
        sA, sB, sSFA, sSFB = smem
        a_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, 0, None, 0)).shape)
        b_cta_layout = cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, None, 0, 0)).shape)
        sfb_cta_layout = cute.make_layout(cute.slice_(cluster_layout_sfb_vmnk, (0, None, 0, 0)).shape)
        tAsA, tAgA = cpasync.tma_partition(tma_a, cl_vmnk[2], a_cta_layout, cute.group_modes(sA, 0, 3),
                                           cute.group_modes(tCgA, 0, 3))
        tBsB, tBgB = cpasync.tma_partition(tma_b, cl_vmnk[1], b_cta_layout, cute.group_modes(sB, 0, 3),
                                           cute.group_modes(tCgB, 0, 3))
        tAsSFA, tAgSFA = cpasync.tma_partition(tma_sfa, cl_vmnk[2], a_cta_layout, cute.group_modes(sSFA, 0, 3),
                                               cute.group_modes(tCgSFA, 0, 3))
        tAsSFA = cute.filter_zeros(tAsSFA)
        tAgSFA = cute.filter_zeros(tAgSFA)
        tBsSFB, tBgSFB = cpasync.tma_partition(tma_sfb, cl_sfb_vmnk[1], sfb_cta_layout,
                                               cute.group_modes(sSFB, 0, 3), cute.group_modes(tCgSFB, 0, 3))
        tBsSFB = cute.filter_zeros(tBsSFB)
        tBgSFB = cute.filter_zeros(tBgSFB)
        return tAsA, tAgA, tBsB, tBgB, tAsSFA, tAgSFA, tBsSFB, tBgSFB

    @cute.jit
    def _mma_warp(self, tmem, tiled_mma, tCrA, tCrB, tCtAcc_fake, sSFA, sSFB, sfa_smem_staged, sfb_smem_staged,
                  ab_pipe, acc_pipe, is_leader_cta, k_tiles, walk, tbuf, cta_linear, warp_idx):
        """The MMA warp: the accumulator and the scale factors' places in tensor memory (after the
        epilogue warps' allocation), their shared -> tensor memory copies, then every tile's MMAs."""
        tmem.wait_for_alloc()
        acc_tmem_ptr = tmem.retrieve_ptr(self.acc_dtype)
        tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
        sfa_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.acc_tmem_cols, dtype=self.sf_dtype)
        tCtSFA = cute.make_tensor(sfa_tmem_ptr, bs_layout.make_tmem_layout_sfa(
            tiled_mma, self.mma_tiler, self.sf_vec, cute.slice_(sfa_smem_staged, (None, None, None, 0))))
        sfb_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.acc_tmem_cols + self.sfa_tmem_cols,
                                       dtype=self.sf_dtype)
        tCtSFB = cute.make_tensor(sfb_tmem_ptr, bs_layout.make_tmem_layout_sfb(
            tiled_mma, self.mma_tiler, self.sf_vec, cute.slice_(sfb_smem_staged, (None, None, None, 0))))
        s2t_sfa, tCsSFA_s2t, tCtSFA_s2t = self._s2t(sSFA, tCtSFA)
        s2t_sfb, tCsSFB_s2t, tCtSFB_s2t = self._s2t(sSFB, tCtSFB)
        self.mma(tiled_mma, tCrA, tCrB, tCtAcc_base, tCtSFA, tCtSFB, s2t_sfa, tCsSFA_s2t, tCtSFA_s2t,
                 s2t_sfb, tCsSFB_s2t, tCtSFB_s2t, ab_pipe, acc_pipe, is_leader_cta, k_tiles,
                 walk, tbuf, cta_linear, warp_idx)

    # ------------------------------------------------------------------------------------------
    @cute.jit
    def producer(self, tma_a, tma_b, tma_sfa, tma_sfb, tAgA, tAsA, tBgB, tBsB, tAgSFA, tAsSFA, tBgSFB, tBsSFB,
                 a_mask, b_mask, sfa_mask, sfb_mask, ab_pipe, k_tiles, walk, nthr: cutlass.Constexpr,
                 tbuf, cta_linear, warp_idx):
        unit, units, step = self.tile_order.start(walk)
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stage)
        tile_count = cutlass.Int32(0)
        while unit < units:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
            crd = self.tile_order.cta_tile(unit, walk)
            mt, nt, lt = crd[0] // nthr, crd[1], crd[2]
            gA_t = tAgA[(None, mt, None, lt)]
            gB_t = tBgB[(None, nt, None, lt)]
            gSFA_t = tAgSFA[(None, mt, None, lt)]
            gSFB_t = tBgSFB[(None, nt, None, lt)]
            state.reset_count()
            with Scope("load"):
                for kt in cutlass.range(0, k_tiles, 1, unroll=1):
                    ab_pipe.producer_acquire(state)
                    bar = ab_pipe.producer_get_barrier(state)
                    if cutlass.const_expr(self.cache_hint):
                        # A tiles are read by one M-row of tiles and then dead: evict first;
                        # B tiles are shared by every M-tile of the wave: keep them
                        cute.copy(tma_a, gA_t[(None, state.count)], tAsA[(None, state.index)], tma_bar_ptr=bar,
                                  mcast_mask=a_mask, cache_policy=cutlass.Int64(L2_EVICT_FIRST))
                        cute.copy(tma_b, gB_t[(None, state.count)], tBsB[(None, state.index)], tma_bar_ptr=bar,
                                  mcast_mask=b_mask, cache_policy=cutlass.Int64(L2_EVICT_LAST))
                    else:
                        cute.copy(tma_a, gA_t[(None, state.count)], tAsA[(None, state.index)], tma_bar_ptr=bar,
                                  mcast_mask=a_mask)
                        cute.copy(tma_b, gB_t[(None, state.count)], tBsB[(None, state.index)], tma_bar_ptr=bar,
                                  mcast_mask=b_mask)
                    cute.copy(tma_sfa, gSFA_t[(None, state.count)], tAsSFA[(None, state.index)], tma_bar_ptr=bar,
                              mcast_mask=sfa_mask)
                    cute.copy(tma_sfb, gSFB_t[(None, state.count)], tBsSFB[(None, state.index)], tma_bar_ptr=bar,
                              mcast_mask=sfb_mask)
                    state.advance()
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.load_end)
            tile_count += 1
            unit += step
        ab_pipe.producer_tail(state)

    # ------------------------------------------------------------------------------------------
    def _s2t(self, sSF, tSF):
        """shared -> tensor memory copy (tcgen05.cp 4x32x128b) of one stage's scale factors."""
        sSF_c = cute.filter_zeros(sSF)
        tSF_c = cute.filter_zeros(tSF)
        atom = cute.make_copy_atom(tcgen05.Cp4x32x128bOp(self.cta_group), self.sf_dtype)
        tiled = tcgen05.make_s2t_copy(atom, tSF_c)
        thr = tiled.get_slice(0)
        src = tcgen05.get_s2t_smem_desc_tensor(tiled, thr.partition_S(sSF_c))
        return tiled, src, thr.partition_D(tSF_c)

    @cute.jit
    def mma(self, tiled_mma, tCrA, tCrB, tCtAcc_base, tCtSFA, tCtSFB, s2t_sfa, tCsSFA_s2t, tCtSFA_s2t, s2t_sfb,
            tCsSFB_s2t, tCtSFB_s2t, ab_pipe, acc_pipe, is_leader_cta, k_tiles, walk, tbuf, cta_linear,
            warp_idx):
        unit, units, step = self.tile_order.start(walk)
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.ab_stage)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.acc_stage)
        tile_count = cutlass.Int32(0)
        while unit < units:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
            tCtAcc = tCtAcc_base[(None, None, None, acc_state.index)]
            ab_state.reset_count()
            with Scope("acc_wait"):
                if is_leader_cta:
                    acc_pipe.producer_acquire(acc_state)
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.acc_acquired)
            tiled_mma.set(tcgen05.Field.ACCUMULATE, False)
            with Scope("kloop"):
                for kt in cutlass.range(0, k_tiles, 1, unroll=1):
                    if is_leader_cta:
                        ab_pipe.consumer_wait(ab_state)
                        if cutlass.const_expr(self.timing):
                            if kt == 0:
                                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
                        stage = (None, None, None, None, ab_state.index)
                        cute.copy(s2t_sfa, tCsSFA_s2t[stage], tCtSFA_s2t)
                        cute.copy(s2t_sfb, tCsSFB_s2t[stage], tCtSFB_s2t)
                        for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
                            crd = (None, None, kb, ab_state.index)
                            cute.gemm(tiled_mma, tCtAcc, [tCrA[crd], tCtSFA[(None, None, kb)]],
                                      [tCrB[crd], tCtSFB[(None, None, kb)]], tCtAcc)
                            tiled_mma.set(tcgen05.Field.ACCUMULATE, True)
                        self.rec.spin(self.delay_kloop)
                        ab_pipe.consumer_release(ab_state)
                    if cutlass.const_expr(self.timing and self.use_2cta):
                        # the odd CTA of a 2-CTA pair issues no MMA: its MMA warp records the
                        # same events (near-zero phases) so every CTA has every role's rows
                        if kt == 0:
                            if not is_leader_cta:
                                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
                    ab_state.advance()
                if is_leader_cta:
                    acc_pipe.producer_commit(acc_state)
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.kloop_end)
            acc_state.advance()
            tile_count += 1
            unit += step
        acc_pipe.producer_tail(acc_state)

    # ------------------------------------------------------------------------------------------
    @cute.jit
    def epilogue(self, tidx, warp_idx, tma_c, tCtAcc_base, tCgC, sC, epi_tile, acc_pipe, walk,
                 nthr: cutlass.Constexpr, tbuf, cta_linear):
        # TMEM -> registers copy, partitioned per epilogue subtile
        t2r_atom = sm100_utils.get_tmem_load_op(self.cta_tile, self.c_layout, self.c_dtype, self.acc_dtype,
                                                epi_tile, self.use_2cta)
        tAcc_epi = cute.flat_divide(tCtAcc_base[((None, None), 0, 0, None)], epi_tile)
        t2r = tcgen05.make_tmem_copy(t2r_atom, tAcc_epi[(None, None, 0, 0, 0)])
        thr_t2r = t2r.get_slice(tidx)
        tTR_tAcc_base = thr_t2r.partition_S(tAcc_epi)
        gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
        tTR_gC_all = thr_t2r.partition_D(gC_epi)
        tTR_rAcc = cute.make_rmem_tensor(tTR_gC_all[(None, None, None, 0, 0, 0, 0, 0)].shape, self.acc_dtype)
        tTR_rC = cute.make_rmem_tensor(tTR_rAcc.shape, self.c_dtype)

        if cutlass.const_expr(self.use_tma_store):
            r2s_atom = sm100_utils.get_smem_store_op(self.c_layout, self.c_dtype, self.acc_dtype, t2r)
            r2s = cute.make_tiled_copy_D(r2s_atom, t2r)
            thr_r2s = r2s.get_slice(tidx)
            tRS_sC = thr_r2s.partition_D(sC)
            tRS_rC = r2s.retile(tTR_rC)
            bSG_sC, bSG_gC_all = cpasync.tma_partition(tma_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2),
                                                       cute.group_modes(gC_epi, 0, 2))
            c_pipe = pipeline.PipelineTmaStore.create(
                num_stages=self.c_stage,
                producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * len(EPI_WARPS)))
        else:
            # each thread owns a contiguous row segment of the subtile: 16-byte vector stores
            simt_atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.c_dtype, num_bits_per_copy=128)

        unit, units, step = self.tile_order.start(walk)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.acc_stage)
        tile_count = cutlass.Int32(0)
        subtiles_done = cutlass.Int32(0)
        while unit < units:
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
            crd = self.tile_order.cta_tile(unit, walk)
            mnl = (crd[0] // nthr, crd[1], crd[2])
            tTR_tAcc = tTR_tAcc_base[(None, None, None, None, None, acc_state.index)]
            tTR_tAcc = cute.group_modes(tTR_tAcc, 3, cute.rank(tTR_tAcc))
            with Scope("ml_wait"):
                acc_pipe.consumer_wait(acc_state)
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.ml_done)
            subtiles = cute.size(tTR_tAcc.shape, mode=[3])
            if cutlass.const_expr(self.use_tma_store):
                bSG_gC = bSG_gC_all[(None, None, None, *mnl)]
                bSG_gC = cute.group_modes(bSG_gC, 1, cute.rank(bSG_gC))
                with Scope("epi_tma"):
                    for st in cutlass.range(subtiles):
                        buf = (subtiles_done + st) % self.c_stage
                        with Scope("phase1"):
                            cute.copy(t2r, tTR_tAcc[(None, None, None, st)], tTR_rAcc)
                            self.rec.spin(self.delay_phase1)
                            if st == subtiles - 1:
                                # last TMEM read of the tile: hand the accumulator back to the MMA warp
                                cute.arch.fence_view_async_tmem_load()
                                acc_pipe.consumer_release(acc_state)
                                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.phase1_end)
                            tRS_rC.store(r2s.retile(tTR_rAcc).load().to(self.c_dtype))
                            cute.copy(r2s, tRS_rC, tRS_sC[(None, None, None, buf)])
                        with Scope("phase2"):
                            # make the generic-proxy smem writes visible to the TMA (async proxy)
                            cute.arch.fence_proxy("async.shared", space="cta")
                            self.epi_sync.arrive_and_wait()
                            if warp_idx == EPI_WARPS[0]:
                                cute.copy(tma_c, bSG_sC[(None, buf)], bSG_gC[(None, st)])
                                c_pipe.producer_commit()
                                c_pipe.producer_acquire()
                            self.epi_sync.arrive_and_wait()
            else:
                tTR_gC = tTR_gC_all[(None, None, None, None, None, *mnl)]
                tTR_gC = cute.group_modes(tTR_gC, 3, cute.rank(tTR_gC))
                with Scope("epi_simt"):
                    for st in cutlass.range(subtiles):
                        with Scope("phase1"):
                            cute.copy(t2r, tTR_tAcc[(None, None, None, st)], tTR_rAcc)
                            self.rec.spin(self.delay_phase1)
                            if st == subtiles - 1:
                                cute.arch.fence_view_async_tmem_load()
                                acc_pipe.consumer_release(acc_state)
                                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.phase1_end)
                            tTR_rC.store(tTR_rAcc.load().to(self.c_dtype))
                        with Scope("phase2"):
                            cute.copy(simt_atom, tTR_rC, tTR_gC[(None, None, None, st)])
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.phase2_end)
            subtiles_done += subtiles
            acc_state.advance()
            tile_count += 1
            unit += step
        if cutlass.const_expr(self.use_tma_store):
            c_pipe.producer_tail()
