"""The epilogue: a tile's float32 totals to D (bf16), wave by wave.

``epilogue="direct"``: each thread converts its accumulator fragment and stores it to global
memory (predicated where the tile runs past M or N). ``epilogue="tma"``: the fragment goes through
``stmatrix`` into a ring of ``epi_stage`` smem sub-tiles, each stored by one warp's TMA; with
``epi_split`` (and in ping-pong) every consumer warpgroup has its own ring, store warp and named
barrier, so nothing ties the warpgroups together at a tile end.

Phase 1 (registers -> bf16, into smem for TMA) and phase 2 (the stores) are what the timing
recorder stamps and the model calls the epilogue's two phases.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS, GemmConfig
from bsprof.kernels.timing_recorder import EV


class Epilogue:
    """One consumer's stores of its tiles."""

    def __init__(self, config: GemmConfig, operands: tuple, epi_tile: tuple, sync_barrier: pipeline.NamedBarrier):
        self.a_dtype, self.b_dtype, self.c_dtype, self.a_layout, self.b_layout, self.c_layout = operands
        self.acc_dtype = cutlass.Float32
        self.epi_tile = epi_tile
        self.kind = config.epi.epilogue
        self.epi_split = bool(config.epi.epi_split)
        self.epi_per_wg = config.epi_per_wg
        self.epi_rows = config.epi_rows
        self.epi_stage = config.epi_stage
        self.tile_m = config.tile.tile_m
        self.tile_n = config.tile.tile_n
        self.wave_m = config.wave_m
        self.waves = config.waves
        self.num_mma_warp_groups = config.consumer_wgs
        self.threads_per_wg = 128
        # threads that store one C tile: one warpgroup (ping-pong, epi_split) or all the consumers
        self.epi_threads = self.threads_per_wg if self.epi_per_wg else self.num_mma_warp_groups * self.threads_per_wg
        self.epi_store_warp_id = 4
        self.epilog_sync_barrier = sync_barrier
        self.delay_phase1 = int(config.probe.delay_phase1)
        # a ping-pong epilogue shares the SM's issue slots with the other warpgroup's K-loop: its
        # injected delay naps between clock reads so it costs time, not issue bandwidth
        self.phase1_backoff_ns = 64 if config.pingpong else 0
        # bound when the kernel is traced: the timing recorder and the shifted last M tile
        self.rec = None
        self.m_shift = 0
        self.m_last = 0

    @cute.jit
    def partitions(self, tiled_mma, thr_mma, mma_tidx, acc_totals, storage, epi_smem_layout_staged, mC_mnl, mC_tma):
        """Everything the stores need, built once per consumer before its tile loop (before any
        tiled_mma.set() inside the K-loop: values staged inside a loop must not escape it).
        Returns (sC, the TMA-store pipeline, the direct path's (wave, tile_n) partitions of D and
        wave-row tiles along M, the TMA path's (copy, smem, retiled totals, fragment shape, D tiles));
        the parts a path does not use are None."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            sC = None
            tiled_copy_r2s = None
            tma_store_pipeline = None
            if cutlass.const_expr(self.kind != "direct"):
                sC = storage.sC.get_tensor(epi_smem_layout_staged.outer, swizzle=epi_smem_layout_staged.inner)
                tma_store_pipeline = pipeline.PipelineTmaStore.create(
                    num_stages=self.epi_stage,
                    producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.epi_threads),
                )

            gC_mnl = cute.local_tile(mC_mnl, (self.wave_m, self.tile_n), (None, None, None))
            tCgC_all = thr_mma.partition_C(gC_mnl)
            c_mtiles = cute.size(gC_mnl, mode=[2])
            epi = None
            if cutlass.const_expr(self.kind != "direct"):
                copy_atom_r2s = sm90_utils.sm90_get_smem_store_op(
                    self.c_layout, elem_ty_d=self.c_dtype, elem_ty_acc=self.acc_dtype
                )
                copy_atom_C = cute.make_copy_atom(
                    cute.nvgpu.warp.StMatrix8x8x16bOp(self.c_layout.is_m_major_c(), 4), self.c_dtype
                )
                copy_mma = tiled_mma
                copy_tidx = mma_tidx
                if cutlass.const_expr(self.epi_split):
                    # one warpgroup's 64 rows: its accumulator fragment is the same registers as a
                    # 64-row MMA's, so the copy is laid out for one warpgroup
                    copy_mma = sm90_utils.make_trivial_tiled_mma(
                        self.a_dtype,
                        self.b_dtype,
                        self.a_layout.sm90_mma_major_mode(),
                        self.b_layout.sm90_mma_major_mode(),
                        self.acc_dtype,
                        (1, 1, 1),
                        tiler_mn=(64, self.tile_n),
                    )
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
                    gC_tma_s = cute.local_tile(
                        cute.domain_offset((self.m_shift, 0, 0), mC_tma),
                        (self.epi_rows, self.tile_n),
                        (None, None, None),
                    )
                    self.epi_shifted = (tiled_copy_r2s, tRS_sD, tRS_rAccs, rD_shape, gC_tma_s)
        return sC, tma_store_pipeline, tCgC_all, c_mtiles, epi

    @cute.jit
    def bind_warpgroup(self, wg, warp_group_idx):
        """The barrier, store warp and first smem buffer of this consumer's stores: per warpgroup
        in ping-pong (each stores its own tiles) and with epi_split (each its own rows), shared by
        all the consumers otherwise. ``wg``: the consumer warpgroup (0-based)."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            self.epi_bar = self.epilog_sync_barrier
            self.epi_store_warp = self.epi_store_warp_id
            self.epi_buf0 = 0
            if cutlass.const_expr(self.epi_per_wg):
                self.epi_bar = pipeline.NamedBarrier(barrier_id=4 + wg, num_threads=self.threads_per_wg)
                self.epi_store_warp = warp_group_idx * 4
                self.epi_buf0 = wg * self.epi_stage

    @cute.jit
    def store_tile(self, tile, tile_coord_mnl, tiles_done, tile_count):
        """The epilogue of one output tile: every wave's totals to D (bf16)."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            acc_totals, tCcC, mC_mnl, tCgC_all, c_mtiles = (
                tile.acc_totals,
                tile.tCcC,
                tile.mC_mnl,
                tile.tCgC_all,
                tile.c_mtiles,
            )
            warp_idx, cta_linear, tbuf = tile.warp_idx, tile.cta_linear, tile.tbuf
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
                        c_coord = (
                            (tile_coord_mnl[0] * self.waves + w) * self.num_mma_warp_groups + wg,
                            tile_coord_mnl[1],
                            tile_coord_mnl[2],
                        )
                        if cutlass.const_expr(w < self.waves - 1):
                            last_wave = c_coord[0] + self.num_mma_warp_groups >= c_mtiles64
                    if cutlass.const_expr(self.kind == "direct"):
                        if c_coord[0] < c_mtiles:
                            self.direct(
                                tCgC_all,
                                tCcC,
                                acc_totals[w],
                                mC_mnl,
                                m0 + w * self.wave_m,
                                n0,
                                c_coord,
                                tbuf,
                                cta_linear,
                                warp_idx,
                                tile_count,
                                last_wave,
                            )
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
                                    c_s = (
                                        w * self.num_mma_warp_groups + warp_idx // 4 - 1,
                                        tile_coord_mnl[1],
                                        tile_coord_mnl[2],
                                    )
                                self.tma(tile, self.epi_shifted, w, c_s, epi_base, tile_count, w == self.waves - 1)
                            elif c_coord[0] < c_limit:
                                self.tma(tile, tile.epi, w, c_coord, epi_base, tile_count, last_wave)
                        elif c_coord[0] < c_limit:
                            self.tma(tile, tile.epi, w, c_coord, epi_base, tile_count, last_wave)

    @cute.jit
    def direct(
        self,
        tCgC_all,
        tCcC,
        acc_total,
        mC_mnl,
        m0,
        n0,
        tile_coord_mnl,
        tbuf,
        cta_linear,
        warp_idx,
        tile_count,
        last_wave,
    ):
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
    def tma(self, tile, epi, wave, tile_coord_mnl, epi_base, tile_count, last_wave):
        """Wave ``wave`` of a tile through the smem ring to D by TMA. ``tile``: the consumer's
        per-thread state (its ring, TMA atom, store pipeline); ``epi``: the partitions to use."""
        sC, tma_atom_c, tma_store_pipeline = tile.sC, tile.tma_atom_c, tile.tma_store_pipeline
        warp_idx, cta_linear, tbuf = tile.warp_idx, tile.cta_linear, tile.tbuf
        tiled_copy_r2s, tRS_sD, tRS_rAccs, rD_shape, gC_tma = epi
        tRS_rAcc = tRS_rAccs[wave]
        tRS_rD = cute.make_rmem_tensor(rD_shape[:3], self.acc_dtype)
        tRS_rD_out = cute.make_rmem_tensor(rD_shape[:3], self.c_dtype)
        size_tRS_rD = cute.size(tRS_rD)
        gC_tile = gC_tma[(None, None, *tile_coord_mnl)]
        tCgC_epi = cute.zipped_divide(gC_tile, self.epi_tile)
        bSG_sD, bSG_gD = cute.nvgpu.cpasync.tma_partition(
            tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), tCgC_epi
        )
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
