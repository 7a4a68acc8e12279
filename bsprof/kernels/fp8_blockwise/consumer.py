"""The consumer warpgroups: per tile, the scales' setup, the K-loop (:mod:`.mainloop`) and the
epilogue (:mod:`.epilogue`); which tiles a warpgroup takes is its schedule (:mod:`.schedule`).

Each consumer thread holds, per wave of its tile, a float32 total of the wgmma C fragment
(rows r_lo and r_lo + 8 of its 64-row share, ``tile_n`` columns) and one block accumulator the
serial promotion reuses for every wave.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.fp8_blockwise.epilogue import Epilogue
from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS, GemmConfig
from bsprof.kernels.fp8_blockwise.mainloop import MainLoop
from bsprof.kernels.fp8_blockwise.schedule import CoopSchedule, PingpongSchedule
from bsprof.kernels.fp8_blockwise.split_k import WorkUnits
from bsprof.kernels.timing_recorder import EV


class ConsumerTile(NamedTuple):
    """What one consumer thread carries from tile to tile (built once, before its tile loop)."""

    tiled_mma: Any
    mmas: tuple  # (first wgmma of a K block: ACCUMULATE off, the rest: on)
    tCrA: Any  # A's smem descriptors: (mma, mma_m, k, stages * waves)
    tCrB: Any  # B's smem descriptors: (mma, mma_n, k, stages)
    num_k_blocks: int  # wgmma k-steps per 128-wide K block (4 of k32)
    acc_blk: Any  # the serial promotion's block accumulator, one wave's fragment
    acc_totals: list  # a float32 total per wave, each the wave's fragment
    tCcC: Any  # (wave_m, tile_n) coordinates of the fragment's elements
    r_lo: Any  # the fragment's two rows in the wave (r_lo + 8 = r_hi)
    r_hi: Any
    m_limit: Any  # last row of A's scales, last N block of B's: reads clamp to them
    nb_limit: Any
    mainloop_pipeline: Any
    k_tile_cnt: Any  # K blocks of the problem
    mSFA: Any  # (M, K/128, L) f32, M-major
    mSFB: Any  # (ceil(N/128), K/128, L) f32
    sSFB: Any  # the per-tile B-scale stash, (2 * sfb_kb,) f32 (sfb_smem)
    sfb_src: Any  # where B scales are read: the stash or mSFB
    mC_mnl: Any  # (M, N, L) bf16, N-major
    tCgC_all: Any  # the direct epilogue's partition of D by (wave_m, tile_n) tiles
    c_mtiles: Any  # wave-row tiles of D along M
    epi: Any  # the TMA epilogue's partitions (Epilogue.partitions)
    sC: Any  # the TMA epilogue's smem ring
    tma_atom_c: Any
    tma_store_pipeline: Any
    mma_tidx: Any  # the thread's index among the threads that share a tile
    warp_idx: Any
    cta_linear: Any
    tbuf: Any
    sSFA: Any  # the stages' A scales, (wave_m, 1, stages * waves) f32 (sfa_tma)
    sSFBT: Any  # the stages' B-scale boxes, (1, 4, stages) f32 (sfb_tma)


class Consumer:
    """One consumer warpgroup's work: its fragments, then its tiles in schedule order."""

    def __init__(
        self,
        config: GemmConfig,
        ab_stage: int,
        operands: tuple,
        atom_layout_mnk: tuple,
        mainloop: MainLoop,
        epilogue: Epilogue,
        work: WorkUnits,
        sync_barrier: pipeline.NamedBarrier,
    ):
        self.a_dtype, self.b_dtype, self.c_dtype, self.a_layout, self.b_layout, self.c_layout = operands
        self.acc_dtype = cutlass.Float32
        self.atom_layout_mnk = atom_layout_mnk
        self.ab_stage = ab_stage
        self.mainloop = mainloop
        self.epilogue = epilogue
        self.work = work
        self.tile_order = work.tile_order
        self.epilog_sync_barrier = sync_barrier
        self.pingpong = config.pingpong
        self.tile_m = config.tile.tile_m
        self.tile_n = config.tile.tile_n
        self.wave_m = config.wave_m
        self.waves = config.waves
        self.threads_per_wg = 128
        self.num_mma_threads = config.consumer_wgs * self.threads_per_wg
        self.uniform_desc = bool(config.pipeline.uniform_desc)
        self.promote = config.scales.promote
        self.sfa_tma = bool(config.scales.sfa_tma)
        self.sfb_tma = bool(config.scales.sfb_tma)
        self.sfb_smem = bool(config.scales.sfb_smem)
        self.sfb_kb = int(config.scales.sfb_kb)
        self.two_sfb = config.two_sfb
        self.epilogue_kind = config.epi.epilogue
        self.split_k = int(config.schedule.split_k)
        self.schedule = PingpongSchedule(self) if self.pingpong else CoopSchedule(self)
        # bound when the kernel is traced: the timing recorder, the shifted last M tile and, in
        # ping-pong, the turn barriers
        self.rec = None
        self.m_shift = 0
        self.m_last = 0
        self.turn_mbar = None

    @cute.jit
    def run(
        self,
        tiled_mma,
        sA,
        sB,
        storage,
        epi_smem_layout_staged,
        tma_atom_c,
        mC_tma,
        sSF,
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
    ):
        """Every tile this warpgroup computes. ``sSF``: the stages' A-scale and B-scale slots."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            sSFA, sSFBT = sSF
            mma_tidx, mmas, thr_mma, tCrA, tCrB, num_k_blocks = self._fragments(tiled_mma, sA, sB, tidx, warp_group_idx)

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

            sC, tma_store_pipeline, tCgC_all, c_mtiles, epi = self.epilogue.partitions(
                tiled_mma, thr_mma, mma_tidx, acc_totals, storage, epi_smem_layout_staged, mC_mnl, mC_tma
            )

            sSFB = storage.sSFB.get_tensor(cute.make_layout(2 * self.sfb_kb if self.sfb_smem else 4))
            sfb_src = sSFB if cutlass.const_expr(self.sfb_smem) else mSFB

            wg = warp_group_idx - 1
            self.epilogue.bind_warpgroup(wg, warp_group_idx)
            tile = ConsumerTile(
                tiled_mma,
                mmas,
                tCrA,
                tCrB,
                num_k_blocks,
                acc_blk,
                acc_totals,
                tCcC,
                r_lo,
                r_hi,
                m_limit,
                nb_limit,
                mainloop_pipeline,
                k_tile_cnt,
                mSFA,
                mSFB,
                sSFB,
                sfb_src,
                mC_mnl,
                tCgC_all,
                c_mtiles,
                epi,
                sC,
                tma_atom_c,
                tma_store_pipeline,
                mma_tidx,
                warp_idx,
                cta_linear,
                tbuf,
                sSFA,
                sSFBT,
            )

            walk = self.tile_order.kernel_side(tile_walk, self.work.work_tiles(mC_mnl))
            self.schedule.run(tile, walk, read_state, wg, split_ws, storage)

            if cutlass.const_expr(self.epilogue_kind == "tma"):
                tma_store_pipeline.producer_tail()

    @cute.jit
    def _fragments(self, tiled_mma, sA, sB, tidx, warp_group_idx):
        """The thread's wgmma operands: (its index among the threads that share a tile, the two
        MMA objects, its C slice, A's and B's smem descriptors, wgmma k-steps per K block)."""
        # the thread's index among the threads that share a tile (both warpgroups, or its own)
        mma_tidx = tidx - self.threads_per_wg
        if cutlass.const_expr(self.pingpong):
            mma_tidx = tidx % self.threads_per_wg
        # Two MMA objects with the ACCUMULATE field fixed once, outside every loop: calling
        # tiled_mma.set() inside staged loops makes values escape their region.
        mma_first = sm90_utils.make_trivial_tiled_mma(
            self.a_dtype,
            self.b_dtype,
            self.a_layout.sm90_mma_major_mode(),
            self.b_layout.sm90_mma_major_mode(),
            self.acc_dtype,
            self.atom_layout_mnk,
            tiler_mn=(64, self.tile_n),
        )
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
        return mma_tidx, mmas, thr_mma, tCrA, tCrB, num_k_blocks

    @cute.jit
    def _tile_m0(self, tile_m_idx):
        """The first row of M tile ``tile_m_idx`` (the shifted last tile's, see GemmConfig.shift_rows)."""
        m0 = tile_m_idx * self.tile_m
        if cutlass.const_expr(self.m_shift > 0):
            if tile_m_idx == self.m_last:
                m0 = tile_m_idx * 0 + self.m_shift
        return m0

    @cute.jit
    def consume_tile(
        self,
        tile,
        tile_coord_mnl,
        tiles_done,
        read_state,
        tile_count,
        handover: cutlass.Constexpr,
        has_next,
        krange=None,
    ):
        """One tile of one consumer: scales, K-loop, epilogue. ``handover`` (ping-pong): arrive on
        the next tile's turn barrier when the K-loop is done, if there is a next tile. ``krange``
        (split-K): the unit's (first K block, K blocks); its epilogue is the caller's, after the
        partials are summed. Returns the read state."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            acc_totals, r_lo, r_hi = tile.acc_totals, tile.r_lo, tile.r_hi
            m_limit, nb_limit, k_tile_cnt, mSFA = tile.m_limit, tile.nb_limit, tile.k_tile_cnt, tile.mSFA
            warp_idx, cta_linear, tbuf = tile.warp_idx, tile.cta_linear, tile.tbuf
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
            sfb_view = self._b_scales(tile, nb0, nb1, l_idx)
            if cutlass.const_expr(self.split_k > 1):
                # the unit's K blocks from 0: scale tensors indexed by K block start at its first
                kb0, k_tile_cnt = krange
                mSFA = cute.domain_offset((0, kb0, 0), mSFA)
                if cutlass.const_expr(self.sfb_smem):
                    sfb_view = cute.domain_offset(kb0, sfb_view)
                else:
                    sfb_view = cute.domain_offset((0, kb0, 0), sfb_view)
            with Scope("kloop"):
                read_state = self._kloop(
                    tile, read_state, k_tile_cnt, mSFA, sfb_view, rows, nb0, nb1, l_idx, split, tile_count
                )
            if cutlass.const_expr(handover):
                # every wgmma of this tile has completed (the last wave waited for them): the next
                # tile's owner may take the tensor cores
                if has_next:
                    cute.arch.mbarrier_arrive(self.turn_mbar + (tile_count + 1) % 2)
            self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.kloop_end)
            if cutlass.const_expr(self.split_k == 1):
                self.epilogue.store_tile(tile, tile_coord_mnl, tiles_done, tile_count)
        return read_state

    @cute.jit
    def _b_scales(self, tile, nb0, nb1, l_idx):
        """Where this tile's K-loop reads its B scales: the stage's box (``sfb_tma``), the
        per-tile stash, filled here from B blocks ``nb0`` and ``nb1`` (``sfb_smem``), or mSFB."""
        sfb_view = tile.sfb_src
        if cutlass.const_expr(self.sfb_tma):
            sfb_view = tile.sSFBT  # the stage brings its B scale: nothing to stage per tile
        elif cutlass.const_expr(self.sfb_smem):
            mSFB, sSFB = tile.mSFB, tile.sSFB
            # previous tile's readers are done before the stash is rewritten
            self.epilog_sync_barrier.arrive_and_wait()
            kb_total = cute.size(mSFB, mode=[1])
            for kb in range(tile.mma_tidx, kb_total, self.num_mma_threads):
                sSFB[kb] = mSFB[(nb0, kb, l_idx)]
                if cutlass.const_expr(self.two_sfb):
                    sSFB[self.sfb_kb + kb] = mSFB[(nb1, kb, l_idx)]
            self.epilog_sync_barrier.arrive_and_wait()
        return sfb_view

    @cute.jit
    def _kloop(self, tile, read_state, k_tile_cnt, mSFA, sfb_view, rows, nb0, nb1, l_idx, split, tile_count):
        """The K-loop of the promotion and scale source this build has; returns the read state.
        ``k_tile_cnt``, ``mSFA`` and ``sfb_view``: the unit's K blocks and their scales."""
        mmas, tCrA, tCrB, num_k_blocks = tile.mmas, tile.tCrA, tile.tCrB, tile.num_k_blocks
        acc_blk, acc_totals, r_lo, r_hi = tile.acc_blk, tile.acc_totals, tile.r_lo, tile.r_hi
        mainloop_pipeline, sSFA = tile.mainloop_pipeline, tile.sSFA
        warp_idx, cta_linear, tbuf = tile.warp_idx, tile.cta_linear, tile.tbuf
        if cutlass.const_expr(self.promote == "rescale"):
            read_state = self.mainloop.kloop_rescale(
                mmas,
                tCrA,
                tCrB,
                num_k_blocks,
                acc_totals,
                mainloop_pipeline,
                read_state,
                k_tile_cnt,
                (sSFA, mSFA),
                sfb_view,
                rows,
                r_lo,
                r_hi,
                nb0,
                nb1,
                l_idx,
                tbuf,
                cta_linear,
                warp_idx,
                tile_count,
            )
        elif cutlass.const_expr(self.sfa_tma and self.promote == "serial"):
            read_state = self.mainloop.kloop_staged(
                mmas,
                tCrA,
                tCrB,
                num_k_blocks,
                acc_blk,
                acc_totals,
                mainloop_pipeline,
                read_state,
                k_tile_cnt,
                sSFA,
                sfb_view,
                r_lo,
                r_hi,
                nb0,
                nb1,
                l_idx,
                split,
                tbuf,
                cta_linear,
                warp_idx,
                tile_count,
            )
        else:
            read_state = self.mainloop.kloop_serial(
                mmas,
                tCrA,
                tCrB,
                num_k_blocks,
                acc_blk,
                acc_totals,
                mainloop_pipeline,
                read_state,
                k_tile_cnt,
                mSFA,
                sfb_view,
                rows,
                nb0,
                nb1,
                l_idx,
                split,
                tbuf,
                cta_linear,
                warp_idx,
                tile_count,
            )
        return read_state
