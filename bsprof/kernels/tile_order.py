"""The persistent tile order of the bundled kernels: which output tile a CTA runs next.

A persistent grid of G clusters walks one list of cluster tiles: cluster c takes entries c, c + G,
c + 2G, ... Entry ``i`` is the cluster tile

    l = i // (Mc * Nc),   r = i % (Mc * Nc)
    group 1:  m = r % Mc,   n = r // Mc                                          (M-major)
    group g:  f = (r // (g * Mc)) * g,   w = min(g, Nc - f),   j = r - f * Mc
              m = j // w,   n = f + j % w

over Mc x Nc x L cluster tiles: consecutive clusters walk g cluster columns before the next
cluster row, so a round of the grid reads fewer A strips from DRAM (a problem whose A and B
overflow L2). A group that does not divide Nc leaves a last group w < g columns wide, as
DeepGEMM's scheduler does. A CTA's tile is its cluster's tile times the cluster shape plus the
CTA's place in the cluster (``block_idx % cluster shape``); a cluster's CTAs past M or N run
tiles the kernels clip.

Where g divides Nc (and for g = 1) this is the order of CuTe DSL's ``StaticPersistentTileScheduler``
(which the 4.8 wheel deprecates and will drop; that scheduler rounded Nc up to the group and ran
the padding as whole tiles), written as plain index arithmetic so the kernels keep their tile
order, and with it every timing in docs/perf.md, whatever the wheel does. The same arithmetic runs
on Python ints (the host's grid and the tests) and on the DSL's integers (in a kernel; the kernel
makes the results warp-uniform).
"""

from __future__ import annotations

from dataclasses import dataclass


def _ceil_div(a, b: int):
    return (a + b - 1) // b


def tile_counts(extents_mnl, tile_mn, split: int = 1) -> tuple:
    """Tiles of ``tile_mn`` along M and N over ``extents_mnl`` (M, N, L: Python ints or a kernel's
    run-time extents), and the batch times ``split`` (split-K's units of a tile are the outermost
    mode): the ``tiles_mnl`` a :class:`TileOrder` walks."""
    return _ceil_div(extents_mnl[0], tile_mn[0]), _ceil_div(extents_mnl[1], tile_mn[1]), extents_mnl[2] * split


def _min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    import cutlass  # a run-time value in a kernel: the DSL's minimum

    return cutlass.min(a, b)


@dataclass(frozen=True)
class TileOrder:
    """The walk over ``tiles_mnl`` (CTA tiles along M, N and the batch) for clusters of
    ``cluster_mn`` CTAs, grouping ``group`` cluster columns (1: plain M-major order)."""

    cluster_mn: tuple[int, int] = (1, 1)
    group: int = 1

    def __post_init__(self) -> None:
        if self.group < 1:
            raise ValueError(f"tile order group {self.group}: must be >= 1")

    def clusters_mnl(self, tiles_mnl) -> tuple:
        """Cluster tiles along M, N and L."""
        cm, cn = self.cluster_mn
        return _ceil_div(tiles_mnl[0], cm), _ceil_div(tiles_mnl[1], cn), tiles_mnl[2]

    def padded_tiles(self, tiles_mnl) -> tuple:
        """CTA tiles along M, N and L that the walk covers (rounded up to whole clusters)."""
        mc, nc, batch = self.clusters_mnl(tiles_mnl)
        return mc * self.cluster_mn[0], nc * self.cluster_mn[1], batch

    def units(self, tiles_mnl):
        """Entries of the walk (cluster tiles)."""
        mc, nc, batch = self.clusters_mnl(tiles_mnl)
        return mc * nc * batch

    def grid(self, tiles_mnl, max_active_clusters) -> tuple:
        """The launch grid: the cluster shape in x and y, as many clusters in z as run at once
        or as there are entries, whichever is fewer."""
        cm, cn = self.cluster_mn
        return cm, cn, _min(self.units(tiles_mnl), max_active_clusters)

    def cluster_tile(self, i, tiles_mnl, divisors: tuple = ()) -> tuple:
        """The cluster tile (m, n, l) of entry ``i``; ``divisors``: the cluster counts along M and
        N as dividers (:meth:`kernel_walk`), M-major order only."""
        if divisors:
            q, m = divmod(i, divisors[0])
            batch, n = divmod(q, divisors[1])
            return m, n, batch
        mc, nc, _ = self.clusters_mnl(tiles_mnl)
        batch, r = i // (mc * nc), i % (mc * nc)
        if self.group == 1:
            return r % mc, r // mc, batch
        g = self.group
        first = (r // (g * mc)) * g
        j = r - first * mc
        if isinstance(nc, int) and nc % g == 0:
            return j // g, first + j % g, batch  # every group full: divide by the constant
        width = _min(g, nc - first)
        return j // width, first + j % width, batch

    def tile(self, i, tiles_mnl, in_cluster, divisors: tuple = ()) -> tuple:
        """The CTA tile (m, n, l) of entry ``i`` for the CTA at ``in_cluster`` (x, y) of its cluster."""
        m, n, batch = self.cluster_tile(i, tiles_mnl, divisors)
        cm, cn = self.cluster_mn
        return m * cm + in_cluster[0], n * cn + in_cluster[1], batch

    # -- in a kernel (CuTe DSL; imported here so the host side needs no cutlass) --------------
    def kernel_arg(self, tiles_mnl) -> tuple:
        """What the host passes the kernel: nothing where the extents are constants (the kernel
        derives them again from its output tensor and ptxas folds every division), else
        :meth:`kernel_walk` of them. As kernel parameters they stay in the constant bank, as
        CuTe DSL's own scheduler parameters did; derived inside a kernel built for run-time
        shapes they are held in registers through the tile loop (the baseline build's K-loop
        then ran 11 more static instructions)."""
        if all(isinstance(x, int) for x in tiles_mnl):
            return ()
        return self.kernel_walk(tiles_mnl)

    def kernel_walk(self, tiles_mnl) -> tuple:
        """(extents, entries, dividers) for :meth:`start` and :meth:`cta_tile`. The dividers are
        the DSL's fast dividers of the cluster counts along M and N, for run-time extents in
        M-major order (a division by a run-time value is a long instruction sequence); empty
        where the counts are constants or the order is grouped (as CuTe DSL's scheduler did)."""
        if all(isinstance(x, int) for x in tiles_mnl):
            return tiles_mnl, self.units(tiles_mnl), ()
        import cutlass
        import cutlass.cute as cute

        tiles_mnl = tuple(cutlass.Int32(x) for x in tiles_mnl)
        mc, nc, _ = self.clusters_mnl(tiles_mnl)
        divisors = (
            () if self.group > 1 else (cute.fast_divmod_create_divisor_v2(mc), cute.fast_divmod_create_divisor_v2(nc))
        )
        return tiles_mnl, self.units(tiles_mnl), divisors

    def kernel_side(self, tile_walk: tuple, tiles_mnl) -> tuple:
        """In the kernel: the host's :meth:`kernel_arg` if it passed one, else the walk of the
        kernel's own (constant) ``tiles_mnl``. (A plain function: in a kernel body the DSL would
        turn the choice into a run-time select.)"""
        return tile_walk if tile_walk else self.kernel_walk(tiles_mnl)

    def start(self, walk: tuple) -> tuple:
        """This CTA's walk: its first entry (its cluster's index in the grid, ``block_idx.z``),
        the entries in all and the stride (the clusters in the grid). Loop ``while unit < units``."""
        import cutlass
        import cutlass.cute as cute

        _, _, first = cute.arch.block_idx()
        _, _, clusters = cute.arch.grid_dim()
        return cutlass.Int32(first), walk[1], clusters

    def cta_tile(self, unit, walk: tuple) -> tuple:
        """This CTA's tile (m, n, l) of entry ``unit``, warp-uniform."""
        import cutlass
        import cutlass.cute as cute

        bidx, bidy, _ = cute.arch.block_idx()
        in_cluster = (bidx % self.cluster_mn[0], bidy % self.cluster_mn[1])
        return tuple(
            cute.arch.make_warp_uniform(cutlass.Int32(x)) for x in self.tile(unit, walk[0], in_cluster, walk[2])
        )
