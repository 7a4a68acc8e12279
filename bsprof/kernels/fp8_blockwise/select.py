"""Tile and cluster chosen from the problem's shape alone (pure: no GPU, no compile).

Every configuration the kernel takes (``config.tile_ns``: 64-, 128-, 192- or 256-row tiles, cluster
1x1 / 2x1 / 1x2, optionally split-K) is costed in SM cycles and the cheapest wins. The CTAs of the
persistent grid run ``rounds`` = ceil(clusters / cluster slots) tiles each. Two cost models:

- **Wall time under the power cap** (``fills_gpu``: M x N x L is at least a wave of 256x128 tiles;
  unsplit tiles of two or three consumer warpgroups). Operand bytes a FLOP set the energy and, at
  700 W, the energy sets the clock, so a K block costs the 256x128 tile's (TIMED_KBLOCKS) scaled by
  FLOPs and by the tile's operand traffic (``WallFit``); a tile's end is timed (TILE_ENDS) or fitted
  (``end_128``); a partial last round costs less than its share, since fewer SMs drawing power run a
  higher clock. ``benchmarks/fit_wall_model.py`` refits the constants from the timed pairs in
  tests/data/h100_fp8_wall_grid.json.xz; a pair's ratio is modelled to 0.04 rms (the pipe model:
  0.12-0.15 on the same pairs).
- **Pipes** (everything else: small problems, 64-row tiles, split-K). A K block takes the longest of
  the tensor cores (8,192 FP8 FLOP per SM cycle), the shared-memory port (128 B/cycle) and L2 -> SM
  (~6,150 B/cycle for the chip; a multicast operand is read once per cluster), and never less than
  its issue-wait-release-promote path (BLOCK_LATENCY with two consumer warpgroups; ONE_WG_LATENCY
  plus all its wgmma cycles for a 64-row tile, where nothing overlaps that path).

Rules on top of the costs, each because timing disagreed with the model (numbers in docs/perf.md,
"FP8-blockwise tile choice"):

- Ties: in wall time a cheaper tile always wins and only clusters of one tile tie (2%); in the pipe
  model, within 2% the larger tile, then the cluster, wins (fewer tile starts, less L2 traffic).
  Between cluster axes a tie goes to 1x2 (A multicast) unless B's tile is B_MULTICAST_RATIO x A's.
- 128-row tiles of at most NARROW_UNCLUSTERED columns run as a plain 1x1 grid: clustered they ran
  1.07-1.29x slower, which the model does not see.
- A 128-row plain-grid pick whose last M tile is half padding gives way to a 64-row tile modelled
  within HALF_PADDED_WITHIN (``_half_padded``); the same below 128 rows, where nothing can shift the
  one M tile inside M.
- Below 64 rows A is loaded in boxes trimmed to M (``config.a_box_rows``), which A multicast cannot
  do: no cluster_n > 1 there.
- Split-K is considered only where the tiles leave cluster slots idle in one round; each unit pays
  SPLIT_FIXED_CYCLES plus its fp32 partial (SPLIT_BYTES_PER_CYCLE), and no split launch is modelled
  faster than streaming A and B once (DRAM_BYTES_PER_CYCLE). Within 2%, unsplit wins.
- A pick with another tile modelled within CLOSE_CALL_WITHIN is a close call (``Choice.close``;
  ``bsprof bench --close-calls`` times them): run-to-run clock noise moves a pair by a few percent,
  so the model cannot rank configurations that close.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from bsprof.analyzers.timing.kblock import MMA_RATE
from bsprof.errors import BsprofError
from bsprof.kernels.fp8_blockwise.config import BLOCK_K, TILE_MS, a_box_rows, tile_ns, two_scale_blocks

FP8_FLOP_PER_CYCLE = MMA_RATE["fp8-blockwise"][0]  # dense FP8 wgmma per SM
SMEM_BYTES_PER_CYCLE = 128
L2_BYTES_PER_CYCLE = 6150  # whole chip (DeepGEMM's figure for the H800/H100: 8e6 / 1.3e3)
L2_PER_SM_CAP = 64
EPI_BYTES_PER_CYCLE = 64  # bf16 tile out through smem and TMA
TILE_FIXED_CYCLES = 1000  # tile start + pipeline fill/drain
PREFER_WITHIN = 1.02
# a K block's issue-wait-release-promote path, by CTAs per cluster: two consumer warpgroups take
# at least this, plus half the tile's wgmma cycles without a cluster (each waits for its own
# wgmma, queued behind the other's; in a cluster, timed on 128x16 .. 128x128, it stayed flat);
# one (a 64-row tile) this plus all of them (nothing overlaps its wait and promotion)
BLOCK_LATENCY = {1: 370, 2: 600}
ONE_WG_LATENCY = {1: 300, 2: 340}
TWO_SCALE_COST = 1.05
ONE_WAVE_COST = 1.05
CLUSTER_CHOICES = ((1, 1), (2, 1), (1, 2))
SPLIT_CHOICES = (1, 2, 3, 4, 6, 8)
SPLIT_FIXED_CYCLES = 3000
SPLIT_BYTES_PER_CYCLE = 17
DRAM_BYTES_PER_CYCLE = 1150
# 128-row tiles this narrow run unclustered: in a 1x2 cluster the same 128x128 tile ran 0.78x and
# 0.93x of the plain 1x1 grid (333x5120x3584, 128x32768x512), where wider 128-row tiles and
# 256-row tiles ran within 5% either way; the per-K-block model above ties or favours the cluster
NARROW_UNCLUSTERED = 128
# a tie between cluster axes goes to B multicast from this B / A tile ratio on (_multicast_axis)
B_MULTICAST_RATIO = 1.5
# how close a 64-row plain-grid tile must be modelled to a half-padded 128-row pick to replace it
HALF_PADDED_WITHIN = 1.03
# another tile modelled within this of the pick makes it a close call (named in its reason)
CLOSE_CALL_WITHIN = 1.03
MAX_CLOSE_CALLS = 2
THREE_WG_TILE = (192, 128)
# Cycles of a K block and of a tile's end plus the next tile's start (epilogue phase 1, the wait for
# the first stage), from the timing builds of the 256- and 192-row tiles at 4096x4096x7168 on the
# H100 (the three warpgroups of the 192-row tile overlap their epilogue). Where the pipe model costs the 192-row tile (a problem too small to fill
# the GPU), it scales the 256x128 tile's cost by these (_three_wg_tile)
TIMED_KBLOCKS = {256: 1095, 192: 787}
TILE_ENDS = {256: 3007, 192: 2079}
# Tiles of two or three consumer warpgroups (128, 192 and 256 rows), unsplit, on a problem that
# fills the GPU are costed in wall time under the power cap (_wall_block, _wall_tile_end,
# _wall_rounds), fitted on the current kernel: 12 configurations x 10 layer shapes timed on the H100,
# each paired against 192x128 1x2 in the same rounds, and 47 pairs timed in other calls
# (tests/data/h100_fp8_wall_grid.json.xz). A K block costs the 256x128 tile's x
# (its FLOPs / a 256x128 block's) x height[tile_m] x (1 + per_row x 128 / tile_m + per_column x 128
# / tile_n) / (1 + per_row / 2 + per_column) (WallFit): operand bytes a FLOP set the energy, and
# under the cap the energy sets the clock. Two B scales a block (a width that does not divide 128)
# came out costing nothing more.


@dataclass(frozen=True)
class WallFit:
    """The wall-time model's fitted constants (``benchmarks/fit_wall_model.py`` refits them)."""

    per_row: float = 1.78
    per_column: float = 1.08
    # per tile height: 1 + per_row x 128 / tile_m + per_column x 128 / tile_n is scaled by this
    height: tuple[tuple[int, float], ...] = ((128, 1.0), (192, 1.05), (256, 1.16))
    # 128-row tiles of <= NARROW_UNCLUSTERED columns (a plain grid) ran this much below the terms
    narrow: float = 0.96
    # a 128-row tile's end and the next one's start, per 128 columns (TILE_ENDS for the others)
    end_128: float = 1970
    # a partial last round after full ones costs this share of a full round, plus the rest of one
    # in proportion to the cluster slots it fills (fewer SMs drawing power run a higher clock)
    last_round_base: float = 0.58


WALL = WallFit()


@dataclass(frozen=True)
class Choice:
    tile_m: int
    tile_n: int
    cluster_m: int
    cluster_n: int
    rounds: int  # tiles per CTA (the persistent grid's waves)
    tiles: int
    ctas: int
    cycles: float  # modelled SM cycles of the whole launch
    bound: str  # what sets a K block's time: "power" (wall time under the cap), "mma", "smem", "l2"
    # or "latency"
    split_k: int = 1  # work units per output tile (tiles, ctas and rounds count units)
    close: tuple["Choice", ...] = ()  # other tiles modelled too near to rank against this pick

    @property
    def last_wave_fill(self) -> float:
        """Share of the launched CTAs busy in the last round."""
        return (self.tiles - (self.rounds - 1) * self.ctas) / self.ctas

    def kwargs(self) -> dict:
        return dict(
            tile_m=self.tile_m,
            tile_n=self.tile_n,
            cluster_m=self.cluster_m,
            cluster_n=self.cluster_n,
            split_k=self.split_k,
        )

    def describe(self) -> str:
        work = f"{self.tiles} tiles"
        if self.split_k > 1:
            work = f"{self.tiles // self.split_k} tiles split {self.split_k} ways along K = {self.tiles} work units"
        blocks = (
            "K blocks costed in wall time under the power cap"
            if self.bound == "power"
            else f"{self.bound}-bound K blocks"
        )
        return (
            f"{self.tile_m}x{self.tile_n} tile, cluster {self.cluster_m}x{self.cluster_n}: {work} "
            f"on {self.ctas} CTAs = {self.rounds} round(s), last {self.last_wave_fill:.0%} full, {blocks}"
        )


def cost(
    mnkl,
    tile_m: int,
    tile_n: int,
    cluster_m: int,
    cluster_n: int,
    num_sms: int = 132,
    split_k: int = 1,
    wall_fit: WallFit = WALL,
) -> Choice:
    """The modelled cost of one configuration on this problem (``wall_fit``: the wall-time model's
    constants, for a refit to try others)."""
    m, n, k, batches = mnkl
    cs = cluster_m * cluster_n
    tiles_m = -(-(-(-m // tile_m)) // cluster_m) * cluster_m
    tiles_n = -(-(-(-n // tile_n)) // cluster_n) * cluster_n
    tiles = tiles_m * tiles_n * batches * split_k
    slots = num_sms // cs
    clusters = tiles // cs
    rounds = -(-clusters // slots)
    ctas = min(clusters, slots) * cs
    mma = 2 * tile_m * tile_n * BLOCK_K / FP8_FLOP_PER_CYCLE
    one_wg = tile_m == 64
    latency = ONE_WG_LATENCY[cs] + mma if one_wg else BLOCK_LATENCY[cs] + (mma / 2 if cs == 1 else 0)
    wall = _wall_costed(mnkl, tile_m, split_k, num_sms)
    if wall:
        block, bound = _wall_block(tile_m, tile_n, wall_fit), "power"
        end = _wall_tile_end(tile_m, tile_n, wall_fit)
    else:
        block, bound = _pipe_block(tile_m, tile_n, cluster_m, cluster_n, ctas, mma)
        end = tile_m * tile_n * 2 / EPI_BYTES_PER_CYCLE + TILE_FIXED_CYCLES
    if block < latency:
        block, bound = latency, "latency"
    kb_unit = -(-(k // BLOCK_K) // split_k)
    tile = kb_unit * block + end
    if (tile_m, tile_n) == THREE_WG_TILE and not wall:
        tile, bound = _three_wg_tile(mnkl, cluster_m, cluster_n, num_sms), "mma"
    cycles = (_wall_rounds(rounds, clusters, slots, wall_fit) if wall else rounds) * tile
    if split_k > 1:
        partial = tile_m * tile_n * 4
        cycles += rounds * (SPLIT_FIXED_CYCLES + (1 + split_k) * partial / SPLIT_BYTES_PER_CYCLE)
        cycles = max(cycles, (m + n) * k * batches / DRAM_BYTES_PER_CYCLE)
    return Choice(tile_m, tile_n, cluster_m, cluster_n, rounds, tiles, ctas, cycles, bound, split_k)


def _pipe_block(tile_m: int, tile_n: int, cluster_m: int, cluster_n: int, ctas: int, mma: float) -> tuple[float, str]:
    """Cycles of a K block costed by its pipes (64-row tiles, split work units, problems that do not
    fill the GPU) and the pipe that sets them: the longest of the tensor cores (``mma``, its wgmma
    cycles), the shared-memory port and L2 -> SM, with the timed corrections."""
    streams = tile_m // 64  # 64-row wgmma streams per K block (warpgroups x waves)
    smem = (streams * (64 + tile_n) * BLOCK_K + (tile_m + tile_n) * BLOCK_K) / SMEM_BYTES_PER_CYCLE
    l2_share = min(L2_PER_SM_CAP, L2_BYTES_PER_CYCLE / ctas)
    l2 = (tile_m / cluster_n + tile_n / cluster_m) * BLOCK_K / l2_share
    block, bound = max((mma, "mma"), (smem, "smem"), (l2, "l2"))
    block *= (TWO_SCALE_COST if two_scale_blocks(tile_n) else 1.0) * (ONE_WAVE_COST if tile_m == 128 else 1.0)
    return block, bound


def _three_wg_tile(mnkl, cluster_m: int, cluster_n: int, num_sms: int) -> float:
    """Pipe-model cycles of one 192x128 tile: the 256x128 tile's in the same cluster, scaled by the
    two tiles' cycles from the timing builds at this K (TIMED_KBLOCKS and TILE_ENDS)."""
    ref = cost(mnkl, 256, 128, cluster_m, cluster_n, num_sms)
    blocks = mnkl[2] // BLOCK_K
    timed = {tm: kb * blocks + TILE_ENDS[tm] for tm, kb in TIMED_KBLOCKS.items()}
    return ref.cycles / ref.rounds * timed[192] / timed[256]


def _wall_costed(mnkl, tile_m: int, split_k: int, num_sms: int) -> bool:
    """Whether a configuration is costed in wall time: two or three consumer warpgroups, unsplit,
    on a problem that fills the GPU."""
    return tile_m > 64 and split_k == 1 and fills_gpu(mnkl, num_sms)


def fills_gpu(mnkl, num_sms: int = 132) -> bool:
    """Whether the problem fills a wave of 256x128 tiles on every SM: where its tiles of two or
    three consumer warpgroups are costed in wall time under the cap (fitted there; a smaller problem
    keeps the pipe model its picks were timed on)."""
    m, n, _, batches = mnkl
    return m * n * batches >= num_sms * 256 * 128


def _wall_block(tile_m: int, tile_n: int, fit: WallFit) -> float:
    """Cycles of an unsplit K block of two or three consumer warpgroups, in wall time under the cap:
    the 256x128 tile's timed K block scaled by FLOPs and by the operand terms, which are normalised
    to 256x128's before its height factor (as fitted)."""
    per_flop = (
        dict(fit.height)[tile_m]
        * (1 + fit.per_row * 128 / tile_m + fit.per_column * 128 / tile_n)
        / (1 + fit.per_row / 2 + fit.per_column)
    )
    if tile_m == 128 and tile_n <= NARROW_UNCLUSTERED:
        per_flop *= fit.narrow
    return TIMED_KBLOCKS[256] * tile_m * tile_n / (256 * 128) * per_flop


def _wall_tile_end(tile_m: int, tile_n: int, fit: WallFit) -> float:
    """Cycles of a wall-costed tile's end and the next tile's start."""
    return TILE_ENDS.get(tile_m, fit.end_128 * tile_n / 128)


def _wall_rounds(rounds: int, clusters: int, slots: int, fit: WallFit) -> float:
    """Rounds in full-round units: a partial last round after full ones costs ``last_round_base`` of
    a full one plus the rest in proportion to the slots it fills."""
    if rounds < 2:
        return rounds
    share = (clusters - (rounds - 1) * slots) / slots
    return rounds - 1 + fit.last_round_base + (1 - fit.last_round_base) * share


def _tiles(promote: str):
    """(tile_m, tile_n) pairs offered: every width of each TILE_MS height, and with the serial
    promotion the 192x128 tile, the one width of three warpgroups that was timed."""
    for tm in TILE_MS:
        for tn in tile_ns(tm, promote):
            yield tm, tn
    if promote == "serial":
        yield THREE_WG_TILE


def candidates(mnkl, promote: str = "serial", num_sms: int = 132) -> list[Choice]:
    out = []
    for tm, tn in _tiles(promote):
        if tm > 64 and mnkl[0] <= tm // 2:
            continue  # half the tile's rows or more past M: all padding
        for cm, cn in CLUSTER_CHOICES:
            if cm * cn > 1 and tm == 128 and tn <= NARROW_UNCLUSTERED:
                continue
            if cn > 1 and tm == 64 and a_box_rows(mnkl[0], tm):
                continue  # A multicast would keep the whole-wave A box (trim_a)
            if num_sms % (cm * cn) == 0:
                one = cost(mnkl, tm, tn, cm, cn, num_sms)
                out.append(one)
                # SMs idle: split K (not the 192-row tile, whose split build was never timed)
                if promote == "serial" and one.tiles < num_sms and (tm, tn) != THREE_WG_TILE:
                    out += [
                        cost(mnkl, tm, tn, cm, cn, num_sms, s) for s in SPLIT_CHOICES if 1 < s <= mnkl[2] // BLOCK_K
                    ]
    return out


def close_calls(pick: Choice, cands: list[Choice]) -> list[Choice]:
    """Configurations of another tile (or split) modelled within CLOSE_CALL_WITHIN of ``pick``,
    cheapest first: closer than the model's error, so worth timing beside the pick. Each tile comes
    in the cluster the choice itself would give it (:func:`_preferred` among that tile's near ties)."""
    groups: dict[tuple, list[Choice]] = {}
    for c in cands:
        groups.setdefault((c.tile_m, c.tile_n, c.split_k), []).append(c)
    groups.pop((pick.tile_m, pick.tile_n, pick.split_k), None)
    out = []
    for group in groups.values():
        best = min(c.cycles for c in group)
        if best <= pick.cycles * CLOSE_CALL_WITHIN:
            out.append(_preferred([c for c in group if c.cycles <= best * PREFER_WITHIN]))
    return sorted(out, key=lambda c: c.cycles)[:MAX_CLOSE_CALLS]


def knob_string(c: Choice) -> str:
    """The kernel-spec knobs that build ``c`` (appended to a spec: ``optimized:<these>``)."""
    return ",".join(f"{k}={v}" for k, v in c.kwargs().items() if k != "split_k" or v > 1)


def _close_clause(pick: Choice, close: list[Choice]) -> str:
    def one(c: Choice) -> str:
        split = f" split-K {c.split_k}" if c.split_k > 1 else ""
        side = "cheaper" if c.cycles < pick.cycles else "dearer"
        gap = abs(c.cycles / pick.cycles - 1)
        return f"{c.tile_m}x{c.tile_n} {c.cluster_m}x{c.cluster_n}{split} modelled {gap:.1%} {side}"

    named = ", ".join(one(c) for c in close)
    return f"; close call: {named}, inside the model's error (bench --close-calls times it beside this pick)"


def _preferred(near: list[Choice]) -> Choice:
    """Among configurations modelled within PREFER_WITHIN of the cheapest: unsplit, then the larger
    tile, then the larger cluster, then the multicast axis (:func:`_multicast_axis`)."""
    return max(
        near, key=lambda c: (-c.split_k, c.tile_m * c.tile_n, c.cluster_m * c.cluster_n, _multicast_axis(c), -c.cycles)
    )


def _multicast_axis(c: Choice) -> int:
    """Between clusters of one size within the pick's 2% (where shared memory binds, the model ties
    the two axes), the one to take: 2x1 (B multicast) where the B tile is at least
    B_MULTICAST_RATIO times the A tile, else 1x2 (A multicast, the tuned 256x128 tile's). Timed on
    the H100: 128x192 ran 0.99-1.035x in 2x1 against 1x2 on four shapes (DeepGEMM's pick there),
    128x144 0.95-0.96x at 4096x576x7168."""
    return c.cluster_m if c.tile_n >= B_MULTICAST_RATIO * c.tile_m else c.cluster_n


def _half_padded(m: int, c: Choice) -> str:
    """Why ``c``, a 128-row plain-grid tile, should give way to a 64-row tile modelled as fast: its
    last M tile has its second 64-row wave all padding (0 < M % 128 <= 64), or M is below 128, so
    its one M tile runs past M where no shift can keep it inside; else ''."""
    if c.tile_m != 128 or c.cluster_m * c.cluster_n != 1:
        return ""
    if 0 < m % 128 <= 64:
        return f"its last M tile would have its second wave all padding (M % 128 = {m % 128})"
    if m < 128:
        return f"its one M tile would run past M = {m}"
    return ""


def choose(
    mnkl, promote: str = "serial", num_sms: int = 132, fits: Callable[[Choice], bool] | None = None
) -> tuple[Choice, str]:
    """The configuration for this problem and one line saying why. ``fits``: only configurations
    it accepts (those that can take the switches a user asked for explicitly)."""
    cands = [c for c in candidates(mnkl, promote, num_sms) if fits is None or fits(c)]
    if not cands:
        raise BsprofError(
            f"no tile and cluster of the kernel takes the switches asked for at {tuple(mnkl)}; "
            "drop a switch or fix the tile (tile_m=..,tile_n=..)"
        )
    cheapest = min(cands, key=lambda c: c.cycles)
    near = [c for c in cands if c.cycles <= cheapest.cycles * PREFER_WITHIN]
    if _wall_costed(mnkl, cheapest.tile_m, cheapest.split_k, num_sms):
        # the wall-time model counts what a larger tile saves (tile starts, operand bytes a FLOP), so
        # between tiles the cheaper one wins and only its cluster is a tie-break
        near = [c for c in near if (c.tile_m, c.tile_n, c.split_k) == (cheapest.tile_m, cheapest.tile_n, 1)]
    pick = _preferred(near)
    padded = _half_padded(mnkl[0], pick)
    padded_tile = f"{pick.tile_m}x{pick.tile_n}"
    if padded:
        plain64 = min(
            (c for c in cands if c.tile_m == 64 and c.cluster_m * c.cluster_n == 1),
            key=lambda c: c.cycles,
            default=None,
        )
        if plain64 is not None and plain64.cycles <= pick.cycles * HALF_PADDED_WITHIN:
            pick = plain64
        else:
            padded = ""
    default = cost(mnkl, 256 if mnkl[0] > 128 else 128, 128, 1, 2, num_sms)
    why = pick.describe()
    if pick.split_k > 1:
        whole = min((c for c in cands if c.split_k == 1), key=lambda c: c.cycles, default=None)
        if whole is not None:
            why += (
                f"; split-K modelled {whole.cycles / pick.cycles:.2f}x faster than the best unsplit, "
                f"{whole.tile_m}x{whole.tile_n} ({whole.tiles} tiles on {whole.ctas} CTAs)"
            )
    elif (pick.tile_m, pick.tile_n) != (default.tile_m, default.tile_n) and default.cycles > pick.cycles:
        why += (
            f"; modelled {default.cycles / pick.cycles:.2f}x faster than {default.tile_m}x{default.tile_n} "
            f"({default.rounds} round(s), last {default.last_wave_fill:.0%} full)"
        )
    twin = any(
        (c.tile_m, c.tile_n, c.cluster_m, c.cluster_n, c.split_k)
        == (pick.tile_m, pick.tile_n, pick.cluster_n, pick.cluster_m, pick.split_k)
        for c in near
    )
    if twin and pick.cluster_m > 1 and pick.cluster_n == 1:
        why += f"; 2x1 over 1x2 (B multicast): the B tile is >= {B_MULTICAST_RATIO:g}x the A tile"
    if padded:
        why += (
            f"; 64 rows, not {padded_tile} (modelled within {HALF_PADDED_WITHIN - 1:.0%}): {padded}, where "
            "the 64-row tile ran faster when modelled this close"
        )
    if (pick.tile_m, pick.tile_n) == THREE_WG_TILE:
        why += "; three consumer warpgroups, one 64-row wave each"
    if pick.tile_m == 128 and pick.tile_n <= NARROW_UNCLUSTERED:
        why += f"; unclustered: 128-row tiles of <= {NARROW_UNCLUSTERED} columns timed slower in clusters"
    close = close_calls(pick, cands)
    if close:
        why += _close_clause(pick, close)
    return replace(pick, close=tuple(close)), why
