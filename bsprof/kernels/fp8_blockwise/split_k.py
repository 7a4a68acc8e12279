"""Work units: the output tiles a persistent CTA walks and, with serial split-K (``split_k`` > 1),
the K ranges a tile's units share and the fix-up that sums their partials in the unit that
arrives last.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
from cutlass.utils.profiling import WarpScope

from bsprof.kernels.fp8_blockwise.config import split_range
from bsprof.kernels.fp8_blockwise.gemm_config import CONSUMER_WARPS, GemmConfig
from bsprof.kernels.tile_order import TileOrder, tile_counts


class WorkUnits:
    """The work units along M, N and L, and split-K's partition and fix-up of them."""

    def __init__(self, config: GemmConfig, tile_order: TileOrder, sync_barrier: pipeline.NamedBarrier):
        self.tile_order = tile_order
        self.tile_m = config.tile.tile_m
        self.tile_n = config.tile.tile_n
        self.waves = config.waves
        self.split_k = int(config.schedule.split_k)
        # the consumer threads that share a tile, and their tile-wide barrier
        self.num_mma_threads = config.consumer_wgs * 128
        self.epilog_sync_barrier = sync_barrier

    def work_tiles(self, c) -> tuple:
        """Work units along M, N and L of the output ``c`` (the host's tensor or the kernel's):
        its tiles, with split-K's units of a tile as the outermost mode, (m, n, l * split_k + s)."""
        return tile_counts(tuple(cute.size(c, mode=[i]) for i in range(3)), (self.tile_m, self.tile_n), self.split_k)

    @cute.jit
    def split_unit(self, unit, k_tile_cnt):
        """Work unit (m, n, l * split_k + s) -> (output tile (m, n, l), first K block, K blocks, s)."""
        l_idx = unit[2] // self.split_k
        s = unit[2] % self.split_k
        kb0, k_cnt = split_range(s, k_tile_cnt, self.split_k)
        return (unit[0], unit[1], l_idx), kb0, k_cnt, s

    @cute.jit
    def fixup(self, acc_totals, mma_tidx, mC_mnl, split_ws, storage, tile_coord_mnl, s):
        """Serial split-K: store this unit's fp32 partial, count the unit in on its tile's counter,
        and, in the unit that arrives last, replace the registers with the sum of all partials in
        split order 0..split_k-1 (its own read back like the others, so the bits do not depend
        on the order of arrival). Returns whether this unit stores the tile.

        Workspace: one slice per (tile, unit, wave) holding every consumer thread's accumulator
        fragment, element-major (element i of thread t at i * threads + t: a warp's stores and
        loads are 128 contiguous bytes). The consumers write the unit's partial and meet at a
        barrier; one thread then counts the unit in with an acq_rel atomic at gpu scope (its
        release is cumulative over the stores the barrier ordered before it; its acquire
        invalidates the SM's L1), and a second barrier hands the answer to every thread: so the
        unit that reads the count split_k - 1 sees every partial of the tile. (CUTLASS's serial
        split-K semaphore works the same way. A gpu-scope fence in every thread as well cost
        two more MEMBAR.ALL.GPU on the unit's critical path.)"""
        with WarpScope("ConsumerWarpgroups", warp_start=CONSUMER_WARPS[0], warp_end=CONSUMER_WARPS[1]):
            ws, cnt = split_ws
            m_tiles, n_tiles, _ = self.tile_order.padded_tiles(self.work_tiles(mC_mnl))
            tile = (tile_coord_mnl[2] * n_tiles + tile_coord_mnl[1]) * m_tiles + tile_coord_mnl[0]
            nel = cute.size(acc_totals[0])
            thr = self.num_mma_threads
            for w in cutlass.range_constexpr(self.waves):
                base = ((tile * self.split_k + s) * self.waves + w) * nel * thr + mma_tidx
                for i in cutlass.range_constexpr(nel):
                    ws[base + i * thr] = acc_totals[w][i]
            self.epilog_sync_barrier.arrive_and_wait()
            flag = storage.split_last.get_tensor(cute.make_layout(1))
            if mma_tidx == 0:
                arrived = cute.arch.atomic_add(cnt.iterator + tile, cutlass.Int32(1), sem="acq_rel", scope="gpu")
                last_one = cutlass.Int32(0)
                if arrived == self.split_k - 1:
                    # every unit of the tile is in: ready for the next launch (stream order)
                    cnt[tile] = cutlass.Int32(0)
                    last_one = cutlass.Int32(1)
                flag[0] = last_one
            self.epilog_sync_barrier.arrive_and_wait()
            last = flag[0] != 0
            if last:
                for w in cutlass.range_constexpr(self.waves):
                    base = (tile * self.split_k * self.waves + w) * nel * thr + mma_tidx
                    step = self.waves * nel * thr  # from one unit's slice to the next's
                    for i in cutlass.range_constexpr(nel):
                        total = ws[base + i * thr]
                        for j in cutlass.range_constexpr(1, self.split_k):
                            total = total + ws[base + j * step + i * thr]
                        acc_totals[w][i] = total
        return last
