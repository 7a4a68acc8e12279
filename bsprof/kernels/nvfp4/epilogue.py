"""The NVFP4 kernel's epilogue warps: they own the tensor-memory allocation, read each finished
accumulator (``tcgen05.ld``), convert it and store D straight to global memory (SIMT) or through
shared memory with TMA stores. Mixed into :class:`.kernel.Nvfp4Gemm`."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.timing_recorder import EV

EPILOGUE_WARPS = 4  # warps 0..3 (a count, so `warp_idx < EPILOGUE_WARPS` reads as the epilogue role)
EPI_WARPS = tuple(range(EPILOGUE_WARPS))


class EpilogueWarps:
    """The epilogue role of :class:`.kernel.Nvfp4Gemm` (warps 0-3)."""

    @cute.jit
    def _epilogue_warps(
        self, tmem, tCtAcc_fake, tidx, tma_c, tCgC, sC, epi_tile, acc_pipe, walk, nthr: cutlass.Constexpr, timing
    ):
        """The epilogue warps: allocate tensor memory (they own it), store every tile, free it.
        ``timing``: (tbuf, cta_linear, warp_idx)."""
        tbuf, cta_linear, warp_idx = timing
        with WarpScope("EpilogueWarps", warp_start=EPI_WARPS[0], warp_end=EPI_WARPS[-1] + 1):
            tmem.allocate(self.tmem_cols)
            tmem.wait_for_alloc()
            acc_tmem_ptr = tmem.retrieve_ptr(self.acc_dtype)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
            self.epilogue(
                tidx, warp_idx, tma_c, tCtAcc_base, tCgC, sC, epi_tile, acc_pipe, walk, nthr, tbuf, cta_linear
            )
            tmem.relinquish_alloc_permit()
            self.epi_sync.arrive_and_wait()
            tmem.free(acc_tmem_ptr)

    @cute.jit
    def epilogue(
        self,
        tidx,
        warp_idx,
        tma_c,
        tCtAcc_base,
        tCgC,
        sC,
        epi_tile,
        acc_pipe,
        walk,
        nthr: cutlass.Constexpr,
        tbuf,
        cta_linear,
    ):
        t2r, tTR_tAcc_base, gC_epi, tTR_gC_all, tTR_rAcc, tTR_rC = self._tmem_load(tidx, tCtAcc_base, tCgC, epi_tile)
        if cutlass.const_expr(self.use_tma_store):
            r2s, tRS_sC, tRS_rC, bSG_sC, bSG_gC_all, c_pipe = self._smem_store(tidx, tma_c, t2r, tTR_rC, sC, gC_epi)
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

    @cute.jit
    def _tmem_load(self, tidx, tCtAcc_base, tCgC, epi_tile):
        """The accumulator -> registers copy (``tcgen05.ld``) partitioned per epilogue subtile:
        (the copy, its accumulator source, D by subtiles, their partition, the float32 and D-type
        register fragments)."""
        t2r_atom = sm100_utils.get_tmem_load_op(
            self.cta_tile, self.c_layout, self.c_dtype, self.acc_dtype, epi_tile, self.use_2cta
        )
        tAcc_epi = cute.flat_divide(tCtAcc_base[((None, None), 0, 0, None)], epi_tile)
        t2r = tcgen05.make_tmem_copy(t2r_atom, tAcc_epi[(None, None, 0, 0, 0)])
        thr_t2r = t2r.get_slice(tidx)
        tTR_tAcc_base = thr_t2r.partition_S(tAcc_epi)
        gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
        tTR_gC_all = thr_t2r.partition_D(gC_epi)
        tTR_rAcc = cute.make_rmem_tensor(tTR_gC_all[(None, None, None, 0, 0, 0, 0, 0)].shape, self.acc_dtype)
        tTR_rC = cute.make_rmem_tensor(tTR_rAcc.shape, self.c_dtype)
        return t2r, tTR_tAcc_base, gC_epi, tTR_gC_all, tTR_rAcc, tTR_rC

    @cute.jit
    def _smem_store(self, tidx, tma_c, t2r, tTR_rC, sC, gC_epi):
        """The TMA-store epilogue's registers -> shared memory copy, its TMA partitions of the
        staging buffer and of D (``gC_epi``: D by subtiles), and the store pipeline over the
        ``c_stage`` buffers."""
        r2s_atom = sm100_utils.get_smem_store_op(self.c_layout, self.c_dtype, self.acc_dtype, t2r)
        r2s = cute.make_tiled_copy_D(r2s_atom, t2r)
        thr_r2s = r2s.get_slice(tidx)
        tRS_sC = thr_r2s.partition_D(sC)
        tRS_rC = r2s.retile(tTR_rC)
        bSG_sC, bSG_gC_all = cpasync.tma_partition(
            tma_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), cute.group_modes(gC_epi, 0, 2)
        )
        c_pipe = pipeline.PipelineTmaStore.create(
            num_stages=self.c_stage,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * len(EPI_WARPS)),
        )
        return r2s, tRS_sC, tRS_rC, bSG_sC, bSG_gC_all, c_pipe
