"""The producer: warp 0 of warpgroup 0 walks the CTA's work units and, per K block, loads a stage
of the smem ring by TMA: every wave's A rows (and, with ``sfa_tma``, their A scales), the B tile
(and, with ``sfb_tma``, the 16-byte box of B scales the stage falls in), all signalling the
stage's full barrier. A and B are multicast to the cluster's peers (``cluster_n`` / ``cluster_m``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.fp8_blockwise.gemm_config import PRODUCER_WARPS, GemmConfig
from bsprof.kernels.fp8_blockwise.mainloop import SFB_TMA_GROUP
from bsprof.kernels.fp8_blockwise.split_k import WorkUnits
from bsprof.kernels.timing_recorder import EV


class Producer:
    """The TMA loads of the A/B ring (warp 0)."""

    def __init__(self, config: GemmConfig, ab_stage: int, work: WorkUnits):
        self.ab_stage = ab_stage
        self.work = work
        self.tile_order = work.tile_order
        self.waves = config.waves
        self.tile_n = config.tile.tile_n
        self.sfa_tma = bool(config.scales.sfa_tma)
        self.sfb_tma = bool(config.scales.sfb_tma)
        self.split_k = int(config.schedule.split_k)
        # bound when the kernel is traced: the timing recorder and the shifted last M tile
        self.rec = None
        self.m_shift = 0
        self.m_last = 0

    @cute.jit
    def run(
        self,
        a_load,
        sfa_load,
        b_load,
        sfb_load,
        mainloop_pipeline,
        k_tile_cnt,
        mC_mnl,
        tbuf,
        cta_linear,
        warp_idx,
        tile_walk,
    ):
        """Every work unit's K blocks into the ring. ``a_load``: A's TMA atom, its partitions
        (global, smem, global of the shifted last tile), multicast mask and wave-row tiles along M;
        ``sfa_load`` the A scales' atom and partitions (global, smem, shifted), ``b_load`` B's atom,
        partitions and mask, ``sfb_load`` the B scales' atom and partitions (global, smem)."""
        with WarpScope("ProducerWarp", warp_start=PRODUCER_WARPS[0], warp_end=PRODUCER_WARPS[1]):
            tma_atom_a, tAgA, tAsA, tAgA_s, a_mcast_mask, a_mtiles = a_load
            tma_atom_sfa, tFgF, tFsF, tFgF_s = sfa_load
            tma_atom_b, tBgB, tBsB, b_mcast_mask = b_load
            tma_atom_sfb, tGgG, tGsG = sfb_load
            # (A's atom and partitions, the A scales') of every tile, and of the shifted last tile
            a_plain = (tma_atom_a, tAgA, tAsA, tma_atom_sfa, tFgF, tFsF)
            a_shifted = (tma_atom_a, tAgA_s, tAsA, tma_atom_sfa, tFgF_s, tFsF)
            walk = self.tile_order.kernel_side(tile_walk, self.work.work_tiles(mC_mnl))
            unit, units, step = self.tile_order.start(walk)
            prod_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stage)
            tile_count = cutlass.Int32(0)
            while unit < units:
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.tile_start)
                tile_coord_mnl = self.tile_order.cta_tile(unit, walk)
                k_cnt = k_tile_cnt
                kb0 = 0
                if cutlass.const_expr(self.split_k > 1):
                    tile_coord_mnl, kb0, k_cnt, _ = self.work.split_unit(tile_coord_mnl, k_tile_cnt)
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
                                    self._load_a_wave(a_shifted, w, kidx, tile_coord_mnl[2], dst, bar, a_mcast_mask)
                                else:
                                    self._load_a_wave(a_plain, a_tile, kidx, tile_coord_mnl[2], dst, bar, a_mcast_mask)
                            else:
                                self._load_a_wave(a_plain, a_tile, kidx, tile_coord_mnl[2], dst, bar, a_mcast_mask)
                        cute.copy(
                            tma_atom_b,
                            tBgB_nkl[(None, kidx)],
                            tBsB[(None, prod_state.index)],
                            tma_bar_ptr=bar,
                            mcast_mask=b_mcast_mask,
                        )
                        if cutlass.const_expr(self.sfb_tma):
                            # a tile's N block is one B-scale block (tile_n <= 128, aligned)
                            nb = tile_coord_mnl[1] * self.tile_n // 128
                            cute.copy(
                                tma_atom_sfb,
                                tGgG[(None, nb, prod_state.count // SFB_TMA_GROUP, tile_coord_mnl[2])],
                                tGsG[(None, prod_state.index)],
                                tma_bar_ptr=bar,
                            )
                        mainloop_pipeline.producer_commit(prod_state)
                        prod_state.advance()
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.load_end)
                tile_count += 1
                unit += step
            mainloop_pipeline.producer_tail(prod_state)

    @cute.jit
    def _load_a_wave(self, a_src, a_tile, kidx, l_idx, dst, bar, a_mcast_mask):
        """One wave-row A tile of a stage and, with ``sfa_tma``, its A scales. ``a_src``: A's TMA
        atom, global and smem partitions, then the A scales'."""
        tma_atom_a, tAgA, tAsA, tma_atom_sfa, tFgF, tFsF = a_src
        cute.copy(
            tma_atom_a, tAgA[(None, a_tile, kidx, l_idx)], tAsA[(None, dst)], tma_bar_ptr=bar, mcast_mask=a_mcast_mask
        )
        if cutlass.const_expr(self.sfa_tma):
            cute.copy(tma_atom_sfa, tFgF[(None, a_tile, kidx, l_idx)], tFsF[(None, dst)], tma_bar_ptr=bar)
