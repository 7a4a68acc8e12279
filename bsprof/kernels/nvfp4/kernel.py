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
This module holds the launch and the prologue every warp runs (barriers, pipelines, partitions);
the roles are :mod:`.producer` (TMA warp), :mod:`.mma` (MMA warp) and :mod:`.epilogue`, the
host-side shapes and layouts :mod:`.layouts`.

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

from bsprof.kernels.nvfp4.epilogue import EPI_WARPS, EPILOGUE_WARPS, EpilogueWarps
from bsprof.kernels.nvfp4.layouts import Nvfp4Layouts
from bsprof.kernels.nvfp4.mma import MMA_WARP, MmaWarp
from bsprof.kernels.nvfp4.producer import TMA_WARP, TmaWarp
from bsprof.kernels.tile_order import TileOrder, tile_counts
from bsprof.kernels.timing_recorder import TimingRecorder

WARPS_PER_CTA = 6

DTYPES = {
    "Float16": cutlass.Float16,
    "BFloat16": cutlass.BFloat16,
    "Float32": cutlass.Float32,
    "Float8E4M3FN": cutlass.Float8E4M3FN,
    "Float8E8M0FNU": cutlass.Float8E8M0FNU,
}


class Nvfp4Gemm(Nvfp4Layouts, TmaWarp, MmaWarp, EpilogueWarps):
    """The kernel of one set of switches; its roles and host-side geometry are in the mixins."""

    def __init__(
        self,
        *,
        tile_m: int = 128,
        tile_n: int = 128,
        cluster_m: int = 1,
        cluster_n: int = 1,
        ab_stage: int = 4,
        acc_stage: int = 1,
        epilogue: str = "simt",
        cache_hint: bool = False,
        sf_dtype: str = "Float8E4M3FN",
        sf_vec: int = 16,
        c_dtype: str = "Float16",
        timing: bool = False,
        delay_kloop: int = 0,
        delay_phase1: int = 0,
        sample_every: int = 1,
    ):
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

    @cute.jit
    def __call__(
        self,
        a_ptr: cute.Pointer,
        b_ptr: cute.Pointer,
        sfa_ptr: cute.Pointer,
        sfb_ptr: cute.Pointer,
        c_ptr: cute.Pointer,
        tbuf_ptr: cute.Pointer,
        mnkl: Tuple[cutlass.Int32, cutlass.Int32, cutlass.Int32, cutlass.Int32],
        tile_slots: cutlass.Int32,
        max_active_clusters: cutlass.Constexpr,
        stream: cuda.CUstream,
    ):
        m, n, k, batches = mnkl
        tiled_mma, tiled_mma_sfb = self._setup()
        # A (M, K, L) and B (N, K, L) K-major; D (M, N, L) row-major
        a = cute.make_tensor(a_ptr, cute.make_ordered_layout((cute.assume(m, 32), k, batches), order=(1, 0, 2)))
        b = cute.make_tensor(b_ptr, cute.make_ordered_layout((cute.assume(n, 32), k, batches), order=(1, 0, 2)))
        c = cute.make_tensor(c_ptr, cute.make_ordered_layout((m, cute.assume(n, 32), batches), order=(1, 0, 2)))
        sfa = cute.make_tensor(sfa_ptr, bs_layout.tile_atom_to_shape_SF(a.shape, self.sf_vec))
        sfb = cute.make_tensor(sfb_ptr, bs_layout.tile_atom_to_shape_SF(b.shape, self.sf_vec))

        tma = self._tma_atoms(tiled_mma, tiled_mma_sfb, (a, b, sfa, sfb), c)

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
            cute.size_in_bytes(self.c_dtype, self.c_smem_staged) + 1024 if self.use_tma_store else 0
        )
        if cutlass.const_expr(self.smem_bytes > self.smem_capacity):
            raise ValueError(f"shared memory {self.smem_bytes} B > {self.smem_capacity} B: lower ab_stage")
        tbuf = cute.make_tensor(tbuf_ptr, cute.make_layout(1))

        self.kernel(
            tiled_mma,
            tiled_mma_sfb,
            *tma,
            tbuf,
            tile_slots,
            self.cluster_layout_vmnk,
            self.cluster_layout_sfb_vmnk,
            self.a_smem_staged,
            self.b_smem_staged,
            self.sfa_smem_staged,
            self.sfb_smem_staged,
            self.c_smem_staged,
            self.epi_tile,
            tile_walk,
        ).launch(
            grid=grid,
            block=[self.threads_per_cta, 1, 1],
            cluster=(*self.cluster_shape_mn, 1),
            stream=stream,
            min_blocks_per_mp=1,
        )

    def _tma_atoms(self, tiled_mma, tiled_mma_sfb, operands, c) -> tuple:
        """The TMA atoms and tensors of A, B, SFA, SFB (``operands``, in that order; multicast where
        the cluster shares them) and D (TMA-store epilogue; None and ``c`` otherwise), in the
        kernel's argument order, and the bytes one stage's loads bring (``self.tma_bytes``)."""
        a, b, sfa, sfb = operands
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
        tma_sfa, gSFA_tma = cute.nvgpu.make_tiled_tma_atom_A(
            a_op, sfa, sfa_smem, self.mma_tiler, tiled_mma, vshape, internal_type=cutlass.Int16
        )
        tma_sfb, gSFB_tma = cute.nvgpu.make_tiled_tma_atom_B(
            sfb_op,
            sfb,
            sfb_smem,
            self.mma_tiler_sfb,
            tiled_mma_sfb,
            self.cluster_layout_sfb_vmnk.shape,
            internal_type=cutlass.Int16,
        )
        nthr = cute.size(tiled_mma.thr_id.shape)
        self.tma_bytes = (
            cute.size_in_bytes(self.ab_dtype, a_smem)
            + cute.size_in_bytes(self.ab_dtype, b_smem)
            + cute.size_in_bytes(self.sf_dtype, sfa_smem)
            + cute.size_in_bytes(self.sf_dtype, sfb_smem)
        ) * nthr

        tma_c = None
        gC_tma = c
        if self.use_tma_store:
            epi_smem = cute.slice_(self.c_smem_staged, (None, None, 0))
            tma_c, gC_tma = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileS2GOp(), c, epi_smem, self.epi_tile)
        return tma_a, gA_tma, tma_b, gB_tma, tma_sfa, gSFA_tma, tma_sfb, gSFB_tma, tma_c, gC_tma

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
        mA: cute.Tensor,  # (M, K, L) e2m1, K-major: A's TMA view
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,  # (N, K, L) e2m1, K-major: B's TMA view
        tma_sfa: cute.CopyAtom,
        mSFA: cute.Tensor,  # (M, K / sf_vec, L) scale factors, tcgen05 128x4 atoms: A's TMA view
        tma_sfb: cute.CopyAtom,
        mSFB: cute.Tensor,  # (N, K / sf_vec, L) scale factors, tcgen05 128x4 atoms: B's TMA view
        tma_c,
        mC: cute.Tensor,  # (M, N, L) c_dtype, N-major (D's TMA-store view with epilogue="tma")
        tbuf: cute.Tensor,  # the timing buffer (int64; the recorder uses its address)
        tile_slots: cutlass.Int32,
        cluster_layout_vmnk: cute.Layout,
        cluster_layout_sfb_vmnk: cute.Layout,
        a_smem_staged: cute.ComposedLayout,  # (MMA, MMA_M, MMA_K, stages) e2m1
        b_smem_staged: cute.ComposedLayout,  # (MMA, MMA_N, MMA_K, stages) e2m1
        sfa_smem_staged: cute.Layout,
        sfb_smem_staged: cute.Layout,
        c_smem_staged,  # (epi_m, epi_n, c_stage) or None (epilogue="simt")
        epi_tile: cute.Tile,
        tile_walk: tuple,
    ):
        # on self, not a local: the DSL would try to carry a Python object through runtime `if`s
        self.rec = TimingRecorder(self.timing, WARPS_PER_CTA, tile_slots, self.sample_every)
        warp_idx, tidx, bidx, cta_linear = self._thread_ids()
        atoms = (tma_a, tma_b, tma_sfa, tma_sfb)
        if warp_idx == TMA_WARP:
            self._prefetch_descriptors(atoms, tma_c)

        nthr = cute.size(tiled_mma.thr_id.shape)
        mma_coord_v = bidx % nthr
        is_leader_cta = mma_coord_v == 0
        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        cl_vmnk = cluster_layout_vmnk.get_flat_coord(cta_rank)
        cl_sfb_vmnk = cluster_layout_sfb_vmnk.get_flat_coord(cta_rank)

        smem = cutlass.memory.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        ab_pipe, acc_pipe, tmem = self._pipelines(storage, cluster_layout_vmnk)

        sA, sB, sSFA, sSFB, sC = self._smem_tensors(
            smem, storage, (a_smem_staged, b_smem_staged, sfa_smem_staged, sfb_smem_staged), c_smem_staged
        )
        masks = self._multicast_masks(cluster_layout_vmnk, cluster_layout_sfb_vmnk, cl_vmnk, cl_sfb_vmnk)
        tCgA, tCgB, tCgSFA, tCgSFB, tCgC, k_tiles = self._mma_partitions(
            tiled_mma, tiled_mma_sfb, mma_coord_v, (mA, mB, mSFA, mSFB), mC
        )
        tma_parts = self._tma_partitions(
            atoms,
            (tCgA, tCgB, tCgSFA, tCgSFB),
            (sA, sB, sSFA, sSFB),
            cluster_layout_vmnk,
            cluster_layout_sfb_vmnk,
            cl_vmnk,
            cl_sfb_vmnk,
        )

        tCrA = tiled_mma.make_fragment_A(sA)
        tCrB = tiled_mma.make_fragment_B(sB)
        acc_shape = tiled_mma.partition_shape_C(self.mma_tiler[:2])
        tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, self.acc_stage))

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)
        walk = self.tile_order.kernel_side(tile_walk, self._tiles_mnl(mC))
        timing = (tbuf, cta_linear, warp_idx)

        # the roles; each opens its WarpScope in its own module, so that `bsprof sass --by roles`
        # (line info names only the innermost source line) finds it in the file of the role's code
        if warp_idx == TMA_WARP:
            self.producer(atoms, tma_parts, masks, ab_pipe, k_tiles, walk, nthr, timing)
        if warp_idx == MMA_WARP:
            self._mma_warp(
                tmem,
                tiled_mma,
                (tCrA, tCrB, tCtAcc_fake),
                (sSFA, sSFB),
                (sfa_smem_staged, sfb_smem_staged),
                ab_pipe,
                acc_pipe,
                is_leader_cta,
                k_tiles,
                walk,
                timing,
            )
        if warp_idx < EPILOGUE_WARPS:
            self._epilogue_warps(tmem, tCtAcc_fake, tidx, tma_c, tCgC, sC, epi_tile, acc_pipe, walk, nthr, timing)

    @cute.jit
    def _thread_ids(self):
        """(warp index, thread index, block index along x, the CTA's linear index in the grid: the
        timing rows' key)."""
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, bidz = cute.arch.block_idx()
        gdx, gdy, _ = cute.arch.grid_dim()
        cta_linear = bidx + bidy * gdx + bidz * gdx * gdy
        return warp_idx, tidx, bidx, cta_linear

    @cute.jit
    def _prefetch_descriptors(self, atoms, tma_c):
        """Prefetch the TMA descriptors of A, B, their scales and (TMA-store epilogue) D."""
        tma_a, tma_b, tma_sfa, tma_sfb = atoms
        cpasync.prefetch_descriptor(tma_a)
        cpasync.prefetch_descriptor(tma_b)
        cpasync.prefetch_descriptor(tma_sfa)
        cpasync.prefetch_descriptor(tma_sfb)
        if cutlass.const_expr(self.use_tma_store):
            cpasync.prefetch_descriptor(tma_c)

    @cute.jit
    def _smem_tensors(self, smem, storage, staged, c_smem_staged):
        """The shared-memory tensors of A, B, SFA, SFB (``staged``: their layouts, in that order)
        and the C staging buffer (None with the SIMT epilogue)."""
        a_smem_staged, b_smem_staged, sfa_smem_staged, sfb_smem_staged = staged
        sA = storage.sA.get_tensor(a_smem_staged.outer, swizzle=a_smem_staged.inner)
        sB = storage.sB.get_tensor(b_smem_staged.outer, swizzle=b_smem_staged.inner)
        sSFA = storage.sSFA.get_tensor(sfa_smem_staged)
        sSFB = storage.sSFB.get_tensor(sfb_smem_staged)
        sC = None
        if cutlass.const_expr(self.use_tma_store):
            sC = smem.allocate_tensor(
                element_type=self.c_dtype, layout=c_smem_staged.outer, byte_alignment=1024, swizzle=c_smem_staged.inner
            )
        return sA, sB, sSFA, sSFB, sC

    @cute.jit
    def _mma_partitions(self, tiled_mma, tiled_mma_sfb, mma_coord_v, operands, mC):
        """The global tiles of A, B, SFA, SFB (``operands``, in that order) and D, partitioned for
        this CTA's MMA slice, and the K tiles of the problem."""
        mA, mB, mSFA, mSFB = operands
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
        return tCgA, tCgB, tCgSFA, tCgSFB, tCgC, k_tiles

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
    def _pipelines(self, storage, cluster_layout_vmnk):
        """The A/B ring, the accumulator ring and the tensor-memory allocator, their barriers
        initialized. Returns (ab_pipe, acc_pipe, tmem)."""
        # A/B ring: TMA (one thread) produces, the MMA warp consumes; every CTA whose tile a multicast
        # writes into must see the release
        ab_pipe = pipeline.PipelineTmaUmma.create(
            barrier_storage=storage.ab_full.data_ptr(),
            num_stages=self.ab_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mcast_a + self.num_mcast_b - 1),
            tx_count=self.tma_bytes,
            cta_layout_vmnk=cluster_layout_vmnk,
            defer_sync=True,
        )
        acc_pipe = pipeline.PipelineUmmaAsync.create(
            barrier_storage=storage.acc_full.data_ptr(),
            num_stages=self.acc_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, 32 * len(EPI_WARPS) * (2 if self.use_2cta else 1)
            ),
            cta_layout_vmnk=cluster_layout_vmnk,
            defer_sync=True,
        )
        tmem = cutlass.memory.TmemAllocator(
            storage.tmem_holding.ptr,
            barrier_for_retrieve=self.tmem_alloc_barrier,
            allocator_warp_id=EPI_WARPS[0],
            is_two_cta=self.use_2cta,
            two_cta_tmem_dealloc_mbar_ptr=storage.tmem_dealloc.ptr,
        )
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
        tAsA, tAgA = cpasync.tma_partition(
            tma_a, cl_vmnk[2], a_cta_layout, cute.group_modes(sA, 0, 3), cute.group_modes(tCgA, 0, 3)
        )
        tBsB, tBgB = cpasync.tma_partition(
            tma_b, cl_vmnk[1], b_cta_layout, cute.group_modes(sB, 0, 3), cute.group_modes(tCgB, 0, 3)
        )
        tAsSFA, tAgSFA = cpasync.tma_partition(
            tma_sfa, cl_vmnk[2], a_cta_layout, cute.group_modes(sSFA, 0, 3), cute.group_modes(tCgSFA, 0, 3)
        )
        tAsSFA = cute.filter_zeros(tAsSFA)
        tAgSFA = cute.filter_zeros(tAgSFA)
        tBsSFB, tBgSFB = cpasync.tma_partition(
            tma_sfb, cl_sfb_vmnk[1], sfb_cta_layout, cute.group_modes(sSFB, 0, 3), cute.group_modes(tCgSFB, 0, 3)
        )
        tBsSFB = cute.filter_zeros(tBsSFB)
        tBgSFB = cute.filter_zeros(tBgSFB)
        return tAsA, tAgA, tBsB, tBgB, tAsSFA, tAgSFA, tBsSFB, tBgSFB
