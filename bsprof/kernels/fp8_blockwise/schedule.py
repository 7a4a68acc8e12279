"""Which tiles a consumer warpgroup computes, in which order: the two schedules.

``coop``: the consumer warpgroups share every tile (64 rows each per wave) and walk the CTA's
work units together; with split-K a unit's partial is summed into its tile by the unit that
arrives last (:mod:`.split_k`), which stores the tile.

``pingpong``: each warpgroup owns whole 128-row tiles (two 64-row waves). Both walk the CTA's
whole tile list; tile t belongs to warpgroup t % 2, and the tensor cores are handed over in tile
order by two mbarriers, so one warpgroup's epilogue runs under the other's K-loop.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.utils.profiling import WarpScope

from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS
from bsprof.kernels.timing_recorder import EV


class CoopSchedule:
    """Every consumer warpgroup on every work unit of the CTA."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.tile_order = consumer.tile_order
        self.work = consumer.work
        self.split_k = consumer.split_k

    @cute.jit
    def run(self, tile, walk, read_state, wg, split_ws, storage):
        """``tile``: the consumer's ConsumerTile; ``walk``: the CTA's tile order; ``wg``: this
        consumer warpgroup (0-based)."""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            unit, units, step = self.tile_order.start(walk)
            tile_count = cutlass.Int32(0)
            stored = cutlass.Int32(0)
            while unit < units:
                # registers are the accumulator: nothing to wait for on Hopper (one clock read)
                self.consumer.rec.record(
                    tile.tbuf, tile.cta_linear, tile.warp_idx, tile_count, (EV.tile_start, EV.acc_acquired)
                )
                tile_idx = self.tile_order.cta_tile(unit, walk)
                unit += step
                if cutlass.const_expr(self.split_k == 1):
                    read_state = self.consumer.consume_tile(
                        tile, tile_idx, tile_count, read_state, tile_count, False, False
                    )
                else:
                    # the epilogue's smem ring turns with the tiles this CTA stored, not the units it ran
                    tile_idx, kb0, k_cnt, s = self.work.split_unit(tile_idx, tile.k_tile_cnt)
                    read_state = self.consumer.consume_tile(
                        tile, tile_idx, stored, read_state, tile_count, False, False, (kb0, k_cnt)
                    )
                    if self.work.fixup(tile.acc_totals, tile.mma_tidx, tile.mC_mnl, split_ws, storage, tile_idx, s):
                        self.consumer.epilogue.store_tile(tile, tile_idx, stored, tile_count)
                        stored += 1
                tile_count += 1


class PingpongSchedule:
    """Two consumer warpgroups taking turns: tile t is warpgroup t % 2's."""

    def __init__(self, consumer):
        self.consumer = consumer
        self.tile_order = consumer.tile_order

    @cute.jit
    def run(self, tile, walk, read_state, wg, split_ws, storage):
        """``tile``: the consumer's ConsumerTile; ``walk``: the CTA's tile order; ``wg``: this
        consumer warpgroup (0 or 1). The owner of tile t waits on turn[t % 2], which the owner of
        t - 1 arrives on when its K-loop is done (Consumer.consume_tile's handover), so the
        shared smem ring is consumed in order; the other warpgroup's tiles only advance the ring
        position. (mbarriers, not named barriers: a bar.sync lets the warp run ahead to its next
        memory operation, so the timing build would stamp the turn before it was granted.)"""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            unit, units, step = self.tile_order.start(walk)
            tile_count = cutlass.Int32(0)
            turn = storage.turn_mbar.data_ptr()
            self.consumer.turn_mbar = turn
            mine_count = cutlass.Int32(0)
            while unit < units:
                tile_idx = self.tile_order.cta_tile(unit, walk)
                unit += step
                if tile_count % 2 == wg:
                    self.consumer.rec.record(tile.tbuf, tile.cta_linear, tile.warp_idx, tile_count, EV.tile_start)
                    if tile_count > 0:
                        # completion k of turn[wg] is tile 2k + 1 (wg 1) or 2k + 2 (wg 0)
                        cute.arch.mbarrier_wait(turn + wg, (mine_count + 1 + wg) % 2)
                    self.consumer.rec.record(tile.tbuf, tile.cta_linear, tile.warp_idx, tile_count, EV.acc_acquired)
                    read_state = self.consumer.consume_tile(
                        tile, tile_idx, mine_count, read_state, tile_count, True, unit < units
                    )
                    mine_count += 1
                else:
                    for _ in range(tile.k_tile_cnt):
                        read_state.advance()
                tile_count += 1
