"""The NVFP4 kernel's MMA warp: per ring stage, the scale factors' shared -> tensor memory copies
(``tcgen05.cp``, SASS UTCCP) and the block-scaled MMAs (``tcgen05.mma.kind::mxf4(nvf4).block_scale``,
SASS UTCOMMA) into an accumulator stage in tensor memory. Mixed into :class:`.kernel.Nvfp4Gemm`."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.blockscaled_layout as bs_layout
from cutlass.cute.nvgpu import tcgen05
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.timing_recorder import EV

MMA_WARP = 4  # the warp that runs this role


class MmaWarp:
    """The MMA role of :class:`.kernel.Nvfp4Gemm` (warp 4)."""

    @cute.jit
    def _mma_warp(
        self, tmem, tiled_mma, frags, sSF, sf_smem_staged, ab_pipe, acc_pipe, is_leader_cta, k_tiles, walk, timing
    ):
        """The MMA warp: the accumulator and the scale factors' places in tensor memory (after the
        epilogue warps' allocation), their shared -> tensor memory copies, then every tile's MMAs.
        ``frags``: (tCrA, tCrB, the accumulator fragment); ``sSF`` and ``sf_smem_staged``: SFA's and
        SFB's shared-memory tensors and layouts; ``timing``: (tbuf, cta_linear, warp_idx)."""
        tCrA, tCrB, tCtAcc_fake = frags
        sSFA, sSFB = sSF
        sfa_smem_staged, sfb_smem_staged = sf_smem_staged
        tbuf, cta_linear, warp_idx = timing
        with WarpScope("MmaWarp", warp_start=MMA_WARP, warp_end=MMA_WARP + 1):
            tmem.wait_for_alloc()
            acc_tmem_ptr = tmem.retrieve_ptr(self.acc_dtype)
            tCtAcc_base = cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)
            sfa_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.acc_tmem_cols, dtype=self.sf_dtype)
            tCtSFA = cute.make_tensor(
                sfa_tmem_ptr,
                bs_layout.make_tmem_layout_sfa(
                    tiled_mma, self.mma_tiler, self.sf_vec, cute.slice_(sfa_smem_staged, (None, None, None, 0))
                ),
            )
            sfb_tmem_ptr = cute.recast_ptr(acc_tmem_ptr + self.acc_tmem_cols + self.sfa_tmem_cols, dtype=self.sf_dtype)
            tCtSFB = cute.make_tensor(
                sfb_tmem_ptr,
                bs_layout.make_tmem_layout_sfb(
                    tiled_mma, self.mma_tiler, self.sf_vec, cute.slice_(sfb_smem_staged, (None, None, None, 0))
                ),
            )
            s2t_sfa, tCsSFA_s2t, tCtSFA_s2t = self._s2t(sSFA, tCtSFA)
            s2t_sfb, tCsSFB_s2t, tCtSFB_s2t = self._s2t(sSFB, tCtSFB)
            self.mma(
                tiled_mma,
                tCrA,
                tCrB,
                tCtAcc_base,
                tCtSFA,
                tCtSFB,
                s2t_sfa,
                tCsSFA_s2t,
                tCtSFA_s2t,
                s2t_sfb,
                tCsSFB_s2t,
                tCtSFB_s2t,
                ab_pipe,
                acc_pipe,
                is_leader_cta,
                k_tiles,
                walk,
                tbuf,
                cta_linear,
                warp_idx,
            )

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
    def mma(
        self,
        tiled_mma,
        tCrA,
        tCrB,
        tCtAcc_base,
        tCtSFA,
        tCtSFB,
        s2t_sfa,
        tCsSFA_s2t,
        tCtSFA_s2t,
        s2t_sfb,
        tCsSFB_s2t,
        tCtSFB_s2t,
        ab_pipe,
        acc_pipe,
        is_leader_cta,
        k_tiles,
        walk,
        tbuf,
        cta_linear,
        warp_idx,
    ):
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
                            cute.gemm(
                                tiled_mma,
                                tCtAcc,
                                [tCrA[crd], tCtSFA[(None, None, kb)]],
                                [tCrB[crd], tCtSFB[(None, None, kb)]],
                                tCtAcc,
                            )
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
