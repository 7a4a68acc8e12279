"""The NVFP4 kernel's TMA warp: every tile's K tiles of A, B and their scale factors into the
``ab_stage``-deep shared-memory ring, multicast across the cluster where the layout shares them.
Mixed into :class:`.kernel.Nvfp4Gemm`."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.utils.profiling import Scope, WarpScope

from bsprof.kernels.timing_recorder import EV

TMA_WARP = 5  # the warp that runs this role

# L2 cache-policy operands for TMA loads (the createpolicy encodings CUTLASS uses)
L2_EVICT_FIRST = 0x12F0000000000000
L2_EVICT_LAST = 0x14F0000000000000


class TmaWarp:
    """The producer role of :class:`.kernel.Nvfp4Gemm` (warp 5)."""

    @cute.jit
    def producer(self, atoms, parts, masks, ab_pipe, k_tiles, walk, nthr: cutlass.Constexpr, timing):
        """The TMA warp: every tile's K tiles of A, B, SFA and SFB into the ring. ``atoms``, ``masks``
        and ``parts`` (their (smem, global) TMA partitions) in that order; ``timing``: (tbuf,
        cta_linear, warp_idx)."""
        tma_a, tma_b, tma_sfa, tma_sfb = atoms
        tAsA, tAgA, tBsB, tBgB, tAsSFA, tAgSFA, tBsSFB, tBgSFB = parts
        a_mask, b_mask, sfa_mask, sfb_mask = masks
        tbuf, cta_linear, warp_idx = timing
        with WarpScope("TmaWarp", warp_start=TMA_WARP, warp_end=TMA_WARP + 1):
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
                            cute.copy(
                                tma_a,
                                gA_t[(None, state.count)],
                                tAsA[(None, state.index)],
                                tma_bar_ptr=bar,
                                mcast_mask=a_mask,
                                cache_policy=cutlass.Int64(L2_EVICT_FIRST),
                            )
                            cute.copy(
                                tma_b,
                                gB_t[(None, state.count)],
                                tBsB[(None, state.index)],
                                tma_bar_ptr=bar,
                                mcast_mask=b_mask,
                                cache_policy=cutlass.Int64(L2_EVICT_LAST),
                            )
                        else:
                            cute.copy(
                                tma_a,
                                gA_t[(None, state.count)],
                                tAsA[(None, state.index)],
                                tma_bar_ptr=bar,
                                mcast_mask=a_mask,
                            )
                            cute.copy(
                                tma_b,
                                gB_t[(None, state.count)],
                                tBsB[(None, state.index)],
                                tma_bar_ptr=bar,
                                mcast_mask=b_mask,
                            )
                        cute.copy(
                            tma_sfa,
                            gSFA_t[(None, state.count)],
                            tAsSFA[(None, state.index)],
                            tma_bar_ptr=bar,
                            mcast_mask=sfa_mask,
                        )
                        cute.copy(
                            tma_sfb,
                            gSFB_t[(None, state.count)],
                            tBsSFB[(None, state.index)],
                            tma_bar_ptr=bar,
                            mcast_mask=sfb_mask,
                        )
                        state.advance()
                self.rec.record(tbuf, cta_linear, warp_idx, tile_count, EV.load_end)
                tile_count += 1
                unit += step
            ab_pipe.producer_tail(state)
