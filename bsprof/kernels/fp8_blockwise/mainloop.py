"""The consumers' K-loop and promotion: per K block, wait for the stage, issue the wave's wgmma
(QGMMA in SASS), release the stage and apply the block scales to the float32 totals.

Three K-loops, one per place the scales come from and way they apply (``ScaleConfig``):
:meth:`MainLoop.kloop_serial` (scales loaded from global memory two K blocks ahead, serial
promotion), :meth:`MainLoop.kloop_staged` (A scales, and with ``sfb_tma`` the B scale, read from
the stage they arrived with; serial promotion) and :meth:`MainLoop.kloop_rescale` (no block
accumulator: the totals are rescaled by the ratio of consecutive blocks' scale products).
Every K-loop returns the consumer's read state (a state only mutated inside a callee is not
carried through the caller's persistent tile loop).
"""

from __future__ import annotations

import math

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS, GemmConfig
from bsprof.kernels.timing_recorder import EV

SFB_TMA_GROUP = 4  # B scales per TMA box (16 bytes, the smallest box): K blocks 4j..4j+3


class MainLoop:
    """One consumer warpgroup's K-loop over a tile and the promotion of each K block."""

    def __init__(self, config: GemmConfig, ab_stage: int):
        self.ab_stage = ab_stage
        self.waves = config.waves
        self.tile_n = config.tile.tile_n
        self.cluster_m = config.tile.cluster_m
        self.cluster_n = config.tile.cluster_n
        self.peek = bool(config.pipeline.peek)
        self.elect_release = bool(config.pipeline.elect_release)
        self.ring_unroll = bool(config.pipeline.ring_unroll)
        self.sfa_tma = bool(config.scales.sfa_tma)
        self.sfb_tma = bool(config.scales.sfb_tma)
        self.sfb_smem = bool(config.scales.sfb_smem)
        self.sfb_kb = int(config.scales.sfb_kb)
        self.two_sfb = config.two_sfb
        self.split_k = int(config.schedule.split_k)
        self.timing = bool(config.probe.timing)
        self.delay_kloop = int(config.probe.delay_kloop)
        self.rec = None  # the kernel's TimingRecorder, bound when the kernel is traced

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
            sb0 = mSFB[kb]  # here mSFB is the smem stash
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
    def _issue(
        self, tiled_mma, tCrA, tCrB, num_k_blocks, acc, stage_index, wave: int = 0, commit: cutlass.Constexpr = True
    ):
        """One wave's wgmma of a K block; ``tiled_mma`` = (first, rest) MMA objects."""
        mma_first, mma_rest = tiled_mma
        for kb_i in cutlass.range_constexpr(num_k_blocks):
            # the first wgmma of a K block overwrites: a fresh accumulator per scale block
            mma = mma_first if kb_i == 0 else mma_rest
            # A has one smem buffer per (stage, wave); B one per stage
            cute.gemm(
                mma,
                acc,
                tCrA[(None, None, kb_i, stage_index * self.waves + wave)],
                tCrB[(None, None, kb_i, stage_index)],
                acc,
            )
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
    def _serial_block(
        self,
        tiled_mma,
        tCrA,
        tCrB,
        num_k_blocks,
        acc_blk,
        acc_totals,
        mainloop_pipeline,
        read_state,
        sc,
        split,
        wait: cutlass.Constexpr = True,
        landed=None,
    ):
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
                        mainloop_pipeline.producer_get_barrier(read_state), read_state.phase
                    )
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
            sb = mSFB[(0, kb % SFB_TMA_GROUP, stage_index)]  # the stage's 4-block box
            return tuple(sc) + (sb, sb)
        return tuple(sc) + self._load_sfb(mSFB, nb0, nb1, kb, l_idx)

    @cute.jit
    def kloop_staged(
        self,
        tiled_mma,
        tCrA,
        tCrB,
        num_k_blocks,
        acc_blk,
        acc_totals,
        mainloop_pipeline,
        read_state,
        k_tile_cnt,
        sSFA,
        mSFB,
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
    ):
        """Serial promotion with the A scales taken from the stage (``sfa_tma``), read from smem
        once the stage has landed and before it is released. (Reading the next block's scales
        right after this block's last wave, to hide the load behind the promotion, measured
        3-4% slower.)"""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            with Scope("kloop"):
                read_state.reset_count()
                first = 0
                if cutlass.const_expr(self.timing):
                    # timing build: the first block is peeled so tma0 is stamped after its scale reads are
                    # issued (the clock read's latency overlaps theirs instead of adding to every tile: a
                    # branch on kb == 0 inside the loop cost 4-6% instead); the plain build keeps one loop
                    mainloop_pipeline.consumer_wait(read_state)
                    sc0 = self._stage_scales(sSFA, read_state.index, mSFB, r_lo, r_hi, nb0, nb1, 0, l_idx)
                    self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
                    read_state, _ = self._serial_block(
                        tiled_mma,
                        tCrA,
                        tCrB,
                        num_k_blocks,
                        acc_blk,
                        acc_totals,
                        mainloop_pipeline,
                        read_state,
                        sc0,
                        split,
                        False,
                    )
                    first = 1
                landed = cutlass.Boolean(False)
                ring = self.ab_stage
                mma = (tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals)
                scales = (sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split)
                if cutlass.const_expr(
                    self.ring_unroll and isinstance(k_tile_cnt, int) and k_tile_cnt % ring == 0 and self.split_k == 1
                ):
                    # a tile starts at stage 0 (each tile takes a multiple of the ring), so every trip
                    # starts at stage `first`: a constant index, its phase the one runtime bit
                    trips = (k_tile_cnt - first) // ring
                    for t in cutlass.range(trips, unroll=1):
                        read_state = pipeline.PipelineState(
                            ring, read_state.count, cutlass.Int32(first), read_state.phase
                        )
                        for s in cutlass.range_constexpr(ring):
                            kb = first + t * ring + s
                            read_state, landed = self._staged_block(
                                mma, mainloop_pipeline, read_state, scales, kb, landed
                            )
                    first = first + trips * ring
                for kb in cutlass.range(first, k_tile_cnt, unroll=1):
                    read_state, landed = self._staged_block(mma, mainloop_pipeline, read_state, scales, kb, landed)
        return read_state

    @cute.jit
    def _staged_block(self, mma, mainloop_pipeline, read_state, scales, kb, landed):
        """K block ``kb`` with its A scales from the stage. ``mma``: (tiled_mma, tCrA, tCrB,
        num_k_blocks, acc_blk, acc_totals); ``scales``: (sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split)."""
        tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals = mma
        sSFA, mSFB, r_lo, r_hi, nb0, nb1, l_idx, split = scales
        if cutlass.const_expr(self.peek):
            mainloop_pipeline.consumer_wait(read_state, landed)
        else:
            mainloop_pipeline.consumer_wait(read_state)
        sc = self._stage_scales(sSFA, read_state.index, mSFB, r_lo, r_hi, nb0, nb1, kb, l_idx)
        return self._serial_block(
            tiled_mma, tCrA, tCrB, num_k_blocks, acc_blk, acc_totals, mainloop_pipeline, read_state, sc, split, False
        )

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
    def kloop_rescale(
        self,
        tiled_mma,
        tCrA,
        tCrB,
        num_k_blocks,
        acc_totals,
        mainloop_pipeline,
        read_state,
        k_tile_cnt,
        sfa,
        mSFB,
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
    ):
        """Rescaled accumulation (``promote="rescale"``): wgmma accumulates every K block straight
        into the totals, which are kept divided by the current block's scale product s_k:
        before block k the totals are multiplied by s_(k-1) / s_k, after the last block by
        s_(K-1). One FMUL per element and block, as the serial promotion's FFMA, but no block
        accumulator, so a warpgroup issues all its waves of a K block behind one wgmma wait (and a
        128x256 tile fits as one m64n256 wave). The next block's scales are read before this
        block's wgmma is waited for. The A scales come from the stage (``sfa_tma``) or, without
        it, from global memory after the stage has landed."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            with Scope("kloop"):
                sSFA, mSFA = sfa
                accumulate = (tiled_mma[1], tiled_mma[1])  # every wgmma after the tile's first block
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
                self.rec.spin(self.delay_kloop)  # the K-th block's delay: one per K block, as serial
                for w in cutlass.range_constexpr(self.waves):
                    self._rescale(acc_totals[w], s_prev, w)
        return read_state

    @cute.jit
    def kloop_serial(
        self,
        tiled_mma,
        tCrA,
        tCrB,
        num_k_blocks,
        acc_blk,
        acc_totals,
        mainloop_pipeline,
        read_state,
        k_tile_cnt,
        mSFA,
        mSFB,
        rows,
        nb0,
        nb1,
        l_idx,
        split,
        tbuf,
        cta_linear,
        warp_idx,
        tile_count,
    ):
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            with Scope("kloop"):
                read_state.reset_count()
                last = k_tile_cnt - 1
                # Scales are loaded two K blocks before their promotion, into two register sets used
                # alternately (K blocks taken in pairs), so no register copy of a just-loaded value ends
                # up in front of a QGMMA: the global-load latency hides behind whole blocks.
                ta = self._load_scales(mSFA, mSFB, rows, nb0, nb1, 0, l_idx)
                tb = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(1, last), l_idx)
                mainloop_pipeline.consumer_wait(read_state)
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tma0_landed)
                landed = cutlass.Boolean(True)  # the first stage was just waited for
                for pair in range(k_tile_cnt // 2):
                    kb = pair * 2
                    read_state, landed = self._serial_block(
                        tiled_mma,
                        tCrA,
                        tCrB,
                        num_k_blocks,
                        acc_blk,
                        acc_totals,
                        mainloop_pipeline,
                        read_state,
                        ta,
                        split,
                        True,
                        landed,
                    )
                    ta = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(kb + 2, last), l_idx)
                    read_state, landed = self._serial_block(
                        tiled_mma,
                        tCrA,
                        tCrB,
                        num_k_blocks,
                        acc_blk,
                        acc_totals,
                        mainloop_pipeline,
                        read_state,
                        tb,
                        split,
                        True,
                        landed,
                    )
                    tb = self._load_scales(mSFA, mSFB, rows, nb0, nb1, cutlass.min(kb + 3, last), l_idx)
                if k_tile_cnt % 2 == 1:
                    read_state, _ = self._serial_block(
                        tiled_mma,
                        tCrA,
                        tCrB,
                        num_k_blocks,
                        acc_blk,
                        acc_totals,
                        mainloop_pipeline,
                        read_state,
                        ta,
                        split,
                        True,
                        landed,
                    )
        # returned and re-bound by the caller: a state only mutated inside a callee is not
        # carried through the caller's persistent tile loop
        return read_state
