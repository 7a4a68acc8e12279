"""The NVFP4 kernel's trace-time geometry: the MMA and CTA tiles, the cluster layouts, the epilogue
subtile, the tensor-memory columns of the accumulators and scale factors, and the shared-memory
stages (how many fit and their layouts). Mixed into :class:`.kernel.Nvfp4Gemm`, whose switches it reads."""

from __future__ import annotations

import cutlass.cute as cute
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as bs_layout
from cutlass.cute.nvgpu import tcgen05

MMA_K_PER_STAGE = 4  # K=64 FP4 MMAs per pipeline stage -> 256 K elements per stage


class Nvfp4Layouts:
    """The host side of the JIT: shapes and layouts computed from the switches before the launch."""

    def _tiled_mma(self, cta_group, mn):
        return sm100_utils.make_blockscaled_trivial_tiled_mma(
            self.ab_dtype, self.ab_dtype, self.a_major, self.b_major, self.sf_dtype, self.sf_vec, cta_group, mn
        )

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
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma.thr_id.shape,)
        )
        tiled_mma_sfb = self._tiled_mma(tcgen05.CtaGroup.ONE, self.mma_mn_sfb)
        self.cluster_layout_sfb_vmnk = cute.tiled_divide(
            cute.make_layout((*self.cluster_shape_mn, 1)), (tiled_mma_sfb.thr_id.shape,)
        )
        self.num_mcast_a = cute.size(self.cluster_layout_vmnk.shape[2])
        self.num_mcast_b = cute.size(self.cluster_layout_vmnk.shape[1])
        self.num_mcast_sfb = cute.size(self.cluster_layout_sfb_vmnk.shape[1])

        self.epi_tile = sm100_utils.compute_epilogue_tile_shape(
            self.cta_tile, self.use_2cta, self.c_layout, self.c_dtype
        )
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
            raise ValueError(
                f"{self.acc_stage} accumulator stages of {self.cta_tile[1]} columns plus {sf_cols} "
                f"scale-factor columns exceed {self.tmem_cols} tensor-memory columns"
            )

        # shared memory: C staging (TMA-store epilogue) + A/B/SFA/SFB stages
        self.c_stage = 2 if self.use_tma_store else 0

        def one():
            return (
                sm100_utils.make_smem_layout_a(tiled_mma, self.mma_tiler, self.ab_dtype, 1),
                sm100_utils.make_smem_layout_b(tiled_mma, self.mma_tiler, self.ab_dtype, 1),
                bs_layout.make_smem_layout_sfa(tiled_mma, self.mma_tiler, self.sf_vec, 1),
                bs_layout.make_smem_layout_sfb(tiled_mma, self.mma_tiler, self.sf_vec, 1),
            )

        a1, b1, sfa1, sfb1 = one()
        ab_bytes = (
            cute.size_in_bytes(self.ab_dtype, a1)
            + cute.size_in_bytes(self.ab_dtype, b1)
            + cute.size_in_bytes(self.sf_dtype, sfa1)
            + cute.size_in_bytes(self.sf_dtype, sfb1)
        )
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
        self.c_smem_staged = (
            sm100_utils.make_smem_layout_epi(self.c_dtype, self.c_layout, self.epi_tile, self.c_stage)
            if self.use_tma_store
            else None
        )
        return tiled_mma, tiled_mma_sfb
