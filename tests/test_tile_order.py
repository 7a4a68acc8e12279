"""The persistent tile order (bsprof/kernels/tile_order.py) that both bundled kernel families walk:
every output tile exactly once, a cluster's CTAs on one cluster tile, the group's L2 property, and
the same order, entry for entry, as the CuTe DSL scheduler it replaces (while the wheel has it)."""

import warnings
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bsprof.kernels.tile_order import TileOrder


def _walk(order: TileOrder, tiles_mnl, clusters: int) -> list[list[list[tuple]]]:
    """Each of ``clusters`` persistent clusters' entries in the order it runs them, an entry being its
    CTAs' tiles (m, n, l): what the kernels' loops over ``start`` and ``cta_tile`` visit."""
    cm, cn = order.cluster_mn
    return [
        [
            [order.tile(i, tiles_mnl, (x, y)) for y in range(cn) for x in range(cm)]
            for i in range(c, order.units(tiles_mnl), clusters)
        ]
        for c in range(clusters)
    ]


def _tiles_of(order: TileOrder, tiles_mnl, clusters: int) -> Counter:
    return Counter(t for cluster in _walk(order, tiles_mnl, clusters) for entry in cluster for t in entry)


@settings(max_examples=300, deadline=None)
@given(
    tm=st.integers(1, 40),
    tn=st.integers(1, 40),
    tl=st.integers(1, 3),
    cm=st.sampled_from([1, 2]),
    cn=st.sampled_from([1, 2]),
    group=st.integers(1, 9),
    max_clusters=st.integers(1, 80),
)
def test_every_tile_runs_once_and_padding_only_past_the_problem(tm, tn, tl, cm, cn, group, max_clusters):
    order = TileOrder((cm, cn), group)
    tiles = (tm, tn, tl)
    x, y, clusters = order.grid(tiles, max_clusters)
    assert (x, y) == (cm, cn) and 1 <= clusters <= max_clusters
    seen = _tiles_of(order, tiles, clusters)
    real = {(m, n, batch) for m in range(tm) for n in range(tn) for batch in range(tl)}
    assert all(seen[t] == 1 for t in real)
    # whatever else runs is a cluster's CTAs past M or N; a group adds no padding
    extra = set(seen) - real
    assert all(seen[t] == 1 and (t[0] >= tm or t[1] >= tn) for t in extra)
    assert all(t[0] < -(-tm // cm) * cm and t[1] < -(-tn // cn) * cn for t in extra)
    mc, nc, _ = order.clusters_mnl(tiles)
    assert sum(seen.values()) == order.units(tiles) * cm * cn == mc * cm * nc * cn * tl


@settings(max_examples=100, deadline=None)
@given(
    tm=st.integers(1, 30),
    tn=st.integers(1, 30),
    cm=st.sampled_from([1, 2]),
    cn=st.sampled_from([1, 2]),
    group=st.integers(1, 8),
    clusters=st.integers(1, 70),
)
def test_a_clusters_ctas_share_its_cluster_tile(tm, tn, cm, cn, group, clusters):
    """Multicast needs it: the CTAs of a 1x2 cluster share their M tile (A), of a 2x1 their N tile."""
    order = TileOrder((cm, cn), group)
    for cluster in _walk(order, (tm, tn, 1), clusters):
        for entry in cluster:
            assert len(entry) == cm * cn
            assert len({(m // cm, n // cn, batch) for m, n, batch in entry}) == 1
            assert {(m % cm, n % cn) for m, n, _ in entry} == {(x, y) for x in range(cm) for y in range(cn)}


def test_grouped_rounds_read_fewer_a_strips():
    """The reason for the group: 66 clusters (1x2) on 4096x7168 in 256x128 tiles touch 10 M tiles
    and 14 N tiles per round with a group of 7 cluster columns; M-major order touches all 16 M
    tiles (and 10 N tiles), so it streams all of A again every round."""
    tiles = (16, 56, 1)
    grouped, plain = TileOrder((1, 2), 7), TileOrder((1, 2), 1)
    first = [grouped.tile(i, tiles, (0, y)) for i in range(66) for y in range(2)]
    assert len({m for m, _, _ in first}) == 10 and len({n for _, n, _ in first}) == 14
    first = [plain.tile(i, tiles, (0, y)) for i in range(66) for y in range(2)]
    assert len({m for m, _, _ in first}) == 16 and len({n for _, n, _ in first}) == 10


@settings(max_examples=100, deadline=None)
@given(
    tm=st.integers(1, 40),
    tn=st.integers(1, 40),
    tl=st.integers(1, 3),
    cm=st.sampled_from([1, 2]),
    cn=st.sampled_from([1, 2]),
)
def test_the_dividers_path_walks_the_same_order(tm, tn, tl, cm, cn):
    """A kernel built for run-time extents divides by the cluster counts with the DSL's fast
    dividers (two divmods); Python's divmod stands in for them here."""
    order = TileOrder((cm, cn))
    tiles = (tm, tn, tl)
    mc, nc, _ = order.clusters_mnl(tiles)
    assert order.kernel_walk(tiles)[2] == ()  # constant extents: no dividers
    for i in range(order.units(tiles)):
        assert order.cluster_tile(i, tiles, (mc, nc)) == order.cluster_tile(i, tiles)


def _deepgemm_order(block: int, m_blocks: int, n_blocks: int, group: int) -> tuple[int, int]:
    """DeepGEMM's tile of a block index for multicast on A (tiles grouped along N), as its
    scheduler (deep_gemm/include/deep_gemm/scheduler/gemm.cuh, get_swizzled_block_idx) computes
    it; written here from reading that code, for the comparison below. (Left out: its split of
    an odd-width group for SM90 multicast pairs, which groups of whole 1x2 clusters never have.)"""
    per_group = m_blocks * group
    first = block // per_group * group
    inner = block % per_group
    width = min(group, n_blocks - first)
    return inner // width, first + inner % width


@pytest.mark.parametrize(
    "m_tiles,n_tiles,group",
    [
        (16, 56, 16),  # 4096x7168 in DeepGEMM's 256x128 tiles: groups of 16 N tiles, the last 8 wide
        (16, 32, 16),  # 4096x4096
        (22, 64, 16),
        (5, 9, 8),  # an odd last group
    ],
)
def test_a_group_in_tiles_is_deepgemms_order(m_tiles, n_tiles, group):
    """With 1x2 clusters and A multicast, a group of g/2 cluster columns walks the tiles in
    DeepGEMM's order (block b of its persistent loop = CTA tile b of ours), the narrower last
    group included."""
    order = TileOrder((1, 2), group // 2)
    ours = [
        t[:2]
        for i in range(order.units((m_tiles, n_tiles, 1)))
        for t in (order.tile(i, (m_tiles, n_tiles, 1), (0, 0)), order.tile(i, (m_tiles, n_tiles, 1), (0, 1)))
    ]
    if n_tiles % 2:
        ours = [t for t in ours if t[1] < n_tiles]  # our pair's CTA past N; DeepGEMM skips it
    assert ours == [_deepgemm_order(b, m_tiles, n_tiles, group) for b in range(m_tiles * n_tiles)]


def test_group_below_one_is_refused():
    with pytest.raises(ValueError, match="group 0"):
        TileOrder((1, 1), 0)


@pytest.mark.parametrize(
    "tiles,cluster,group",
    [
        ((5, 5, 2), (1, 2), 3),  # N rounded up to whole clusters, a batch
        ((16, 56, 1), (1, 2), 7),  # 4096x7168 in 256x128 tiles, 1x2 clusters, the launcher's group
        ((22, 64, 1), (1, 2), 8),  # 8192^2 in 192x128 tiles (the last M tile short)
        ((9, 4, 3), (2, 1), 1),  # M-major, batched, 2x1 clusters (M rounded up to the cluster)
        ((3, 15, 1), (2, 2), 4),
    ],
)
def test_the_same_order_as_the_cute_dsl_scheduler_it_replaces(tiles, cluster, group):
    """Entry for entry against the deprecated ``PersistentTileSchedulerParams`` layout, traced on
    the CPU with static extents: so swapping the wheel's scheduler for ours moved no tile where
    the group divides the cluster columns (the only groups the launcher picks; elsewhere the DSL's
    scheduler ran padding columns and ours runs a narrower last group)."""
    cute = pytest.importorskip("cutlass.cute")
    import cutlass
    import cutlass.utils as utils

    if not hasattr(utils, "PersistentTileSchedulerParams"):
        pytest.skip("this CuTe DSL wheel no longer has the scheduler this order was copied from")
    seen: list = []

    @cute.jit
    def trace(
        tm: cutlass.Constexpr,
        tn: cutlass.Constexpr,
        tl: cutlass.Constexpr,
        cm: cutlass.Constexpr,
        cn: cutlass.Constexpr,
        g: cutlass.Constexpr,
    ):
        layout = utils.PersistentTileSchedulerParams((tm, tn, tl), (cm, cn, 1), g, True).problem_layout_ncluster_mnl
        seen.append(cute.size(layout))
        for i in cutlass.range_constexpr(cute.size(layout)):
            seen.append(tuple(cute.flatten(layout.get_flat_coord(i))))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecation, and the long static loop
        trace(*tiles, *cluster, group)
    order = TileOrder(cluster, group)
    assert seen[0] == order.units(tiles)
    assert seen[1:] == [order.cluster_tile(i, tiles) for i in range(order.units(tiles))]
