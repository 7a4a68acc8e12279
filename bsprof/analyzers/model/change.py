"""From a code change to its wall time before it runs: SASS -> cycles per phase -> the model.

Two builds of a kernel (A, the base that was measured; B, the change) are disassembled and every
instruction is put in a phase of the model (``phase_of``: line info and the kernel's scopes, then
the loops): the consumers' K-loop, their per-tile work before it (``tma0``: the tile start and the
first stage's wait), the epilogue (``phase1``), the producer, and the prologue that runs once per
CTA. Each instruction is counted as often as one warp executes it per output tile (``executions``:
a K-loop body ``k_blocks x MMAs per K block / MMAs in the body`` times, a producer's load loop as
many passes, the rest once per tile, the prologue over the CTA's tiles).

The difference per phase, in executed warp-instructions per tile, is priced with what the base
build's timing capture measured (``calibrate_costs``):

- K-loop: cycles per K block above the tensor cores' floor (the part the consumers' own
  instructions and waits add: ``exposed``) spread over the loop's non-MMA instructions per K
  block, times ``KLOOP_MARGINAL``: what one more instruction of this loop costs beyond the MMAs it
  sits between (the exposed part grows faster than the instructions). Bounds: 0 (hidden under the
  MMAs) to the issue slot a consumer warp gets when every consumer warp issues (consumer warps / 4
  sub-partitions, cycles per instruction).
- Epilogue (Phase 1) and tile start (TMA0): the phase's measured cycles per tile over its
  instructions per tile (the epilogue's instructions are its critical chain: STSM, barriers,
  TMA stores). Bounds: the issue slot to 1.5x the measured rate.
- Producer: 0 while its issue time per K block stays under the K block's cycles (it only keeps
  the ring full; the consumers' cycle is the binding one), its count shown.

Four mechanisms beside the instructions are priced from the base capture, each with a share fitted on
one GPU run and checked on others (the constants say where): from its first-load latency
(``first_load_cycles``) a stage count (``ring_delta``; its share by the tile's consumer warpgroups) and a
global load the K-loop waits on; at the SM's
store path a SIMT epilogue's global stores; from its warpgroups' arrival skew (``tie_wait_cycles``) a
named barrier that ties every consumer warpgroup where the base had one per warpgroup. Without a capture
a stage count is only named.

Each estimate names what the change touches beyond its instructions (``KINDS``), by which a projection is
printed with the record of checked projections like it (``change_record``).

What SASS cannot price is named in one line each and widens the interval: a wait or barrier that
moves, a trip count that changes, spills (up to each executed local load/store at the store path's
slow end), a named barrier that ties more warps than the capture can price, a tile order that changes
what hits L2. The widths are choices, stated where they are set.

The projection (``project_change``) runs the cycle deltas (point, low, high) through the
calibrated equilibrium (``project.project``), the capture's busy share and the clock term
(``clock.project_clock``: cycles saved under a power cap partly come back as a lower clock), and
beside it the *instruction-count rule*: every phase's instruction delta x that phase's measured
cycles per instruction, all counted 1:1 on wall time.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bsprof.errors import BsprofError

PHASES = ("tma0", "kloop", "phase1", "producer", "prologue")
PHASE_NAMES = {
    "tma0": "TMA0 (tile start)",
    "kloop": "K-loop",
    "phase1": "Phase 1 (epilogue)",
    "producer": "producer",
    "prologue": "prologue (per CTA)",
}
# FP8 dense wgmma on sm_90: 4,096 multiply-adds per SM per cycle (1,979 TFLOP/s at 1,830 MHz on
# 132 SMs), so a K block of a tm x tn tile needs tm*tn*128/4096 cycles of tensor-core time
FMA_PER_CYCLE = {"fp8": 4096, "bf16": 2048, "fp16": 2048, "tf32": 1024}
BLOCK_K = 128
SUBPARTITIONS = 4  # warp schedulers per SM: one instruction per cycle each
WARPGROUP_WARPS = 4  # one warp's code runs once for these where its phase has no named barrier
CONSUMER_PHASES = ("tma0", "kloop", "phase1")  # the phases the consumer warps run
# interval widths where SASS cannot price a mechanism, as a share of the phase's measured cycles
# per tile (choices, not fits): a moved wait can expose or hide a barrier read's latency per K
# block, bounded by a quarter of the K block's tensor time; a changed stage count can only cost
# load latency the deeper ring hid (fewer stages) or win back the exposed part (more stages)
MOVED_WAIT_SHARE = 0.25
TRIP_SHARE = 0.25
SPILL_SHARE = 0.25
LOAD_SHARE = 0.25
TILE_ORDER_SHARE = 0.03  # of the tile: an L2 hit rate moved by the tile order
# a cluster that multicasts an operand moves fewer bytes from L2 into each CTA's shared memory, and SASS
# shows little of it (the TMA's multicast mask): under the power cap those bytes are clock. The K-loop's
# cycles per unit of relative change in the operand bytes a CTA loads a K block, (low, point, high): from
# the kernel's own 1x1 -> 1x2 measurement (docs/optimizations.md, row 27: a third fewer bytes a CTA, +2-11%
# wall under the power cap on 4096^3, 8192^2x1024 and 8192^3), read through the clock term
MULTICAST_KLOOP_PER_TRAFFIC = (0.05, 0.15, 0.35)
# a cluster of more than two CTAs multicasting both operands: each consumer warp releases a stage on the
# three CTAs that wrote into it, and they run in lockstep. 2x2 against 1x2 (row 36 there): 11-25% slower in wall
# time, in cycles +26% at 8192^3 (5,106 against 6,440 FLOP per SM-cycle) net of its quarter fewer bytes
# a CTA. Of the tile's cycles, (low, point, high)
CLUSTER_LOCKSTEP_SHARE = (0.15, 0.25, 0.40)
# the K-loop's time above the tensor cores' floor grows faster than its instructions: what the consumers
# issue between their MMAs hides under them until the chain between two waits outgrows the MMAs it
# overlaps, so one more instruction exposes more than the loop's average (a power law E ~ n^m has the
# marginal m x E / n). A fit: the K-loop-only changes of the H200 change run (tests/data/h200_changes:
# uniform_desc=0 and ring_unroll=0) imply 1.5, 2.6, 2.2, 2.7 (4096^3 and the two 192x128 problems'
# ring_unroll=0), 5.9 and 7.3 (uniform_desc=0 on the 192x128 tile); the median, 2.6 (2.65 over these six).
# The fit also read elect_release=0 on 4096^3 (-2.4): counted with the cu12 compiler, whose build grows the
# K-loop by 36 instructions a K block where the cu13 build the GPU ran has two fewer (kernels/build.py)
KLOOP_MARGINAL = 2.6
# a ring of S stages refills a stage one K block after the consumers free it, so the K block's period
# is at least the load latency over S - 1 stages: P >= L / (S - 1) (softly: RING_SOFTNESS). L in steady
# state as a share of the base capture's first load (the producer's first load issued -> the consumers' first stage full,
# every CTA loading its whole ring at once into a cold L2): (low, point, high). A fit: the three
# ab_stage=2 points of the H200 change run (tests/data/h200_changes) imply 0.49 (4096^3), 0.52
# (6144x5120x2560) and 0.61 (8192x8192x1024) through the whole projection (docs/model.md, "Code changes
# priced from SASS"); the point is their median, the ends the smallest x 5/6 and the largest x 7/6
RING_LATENCY_SHARE = (0.42, 0.52, 0.71)
# the share above is the fallback: on the bundled kernel's two tiles the first load does not predict the
# ring (on the 192-row tile the five worst two-stage misses came with first loads of 2,300-2,460 cycles, the
# six closest with 2,060-2,250), and three stages need a latency 0.65-0.9 x the first load where two need
# 0.4-0.5. A ring of S stages needs its K block to last T + L / (S - 1): T the time a stage
# takes to arrive at the rate the memory system gives the kernel, L the latency the other stages hide; both
# as shares of the base's measured K block (a base that waits on memory waits more with fewer stages), by
# consumer warpgroups: (T, L). A fit over the 106 stage-count points of the thirteen one-call checks
# (tests/data/changes_*, scripts/change_record.py), through the whole projection: two stages 1.37 and 1.08
# x the base's K block, three 0.88 and 0.77; their median |error| 1.05 pp (max 5.66, mean +0.17) against
# the first-load shares' 1.48 (max 12.12, mean +0.47), 106 of 106 in their intervals; held out on the 18
# stage-count points of four new problems (tests/data/changes_stage_ring), 2.33 (max 4.61) against the
# shares' 1.80 (max 7.87): two stages closer, three 1-2 pp further high (docs/model.md, "Code changes
# priced from SASS"). Keyed by the tile's rows (192: three warpgroups, 256: two), the tiles the fit saw:
# there a K block lasts about as long as the load's latency it must hide. A 128-row tile's K block is
# shorter (714-801 cycles against 1,000-1,120 on the 256-row tile) while its first load is not (2,300-2,480):
# the 256-row terms priced two stages +9% where the two checked 128-row problems measured +23% and +28%
# (tests/data/changes_switches_cu13_tiles, tests/data/changes_store_share) and the first load's share
# +32% and +35%. The 128-row terms solve those two problems' measured K blocks with two and three stages
# (1.51 and 1.07 x the base's, their mean, through the soft maximum): T + L = 1.49, T + L / 2 = 0.90. The
# latency share grows as the tile's rows shrink (0.62, 0.98, 1.18): the same load behind less MMA work. A
# tile not in the table takes the first load's share
RING_NEED_BY_TILE_ROWS = {128: (0.31, 1.18), 192: (0.39, 0.98), 256: (0.46, 0.62)}
# the ends of both terms, with the point: a K block's need 15% under to 20% over
RING_NEED_ENDS = (0.85, 1.0, 1.2)
# how soft that maximum is (P = (C0^p + need^p)^(1/p), ``ring_delta``): a hard maximum left three stages
# free wherever the mean latency over two stages fit under the K block, and those measured 2.1-4.4 pp
# slower on 9 of their 15 stored points. A fit over the 39 stored stage-count points of the eight change
# runs, the share above kept: p = 6 gives a median |error| of 1.55 pp against the hard maximum's 2.01
# (max 12.1 against 16.4, mean bias -0.26 against -1.62, 37 of 39 intervals against 35); p = 3, 4 and 6
# bracket it (docs/model.md, "Code changes priced from SASS")
RING_SOFTNESS = 6.0
# a global store from registers (a SIMT epilogue) drains at the DRAM: every consumer warp's STG costs
# STORE_BYTES of the device's DRAM bandwidth, shared by its SMs, so at SM clock f a warp store takes
# STORE_BYTES x SMs x f / bandwidth cycles, of which the tile waits STORE_DRAIN_SHARE (:func:`store_cycles`):
# 6.3 on an H100 at 1,330 MHz, 4.8 on an H200 at 1,440. One warp's 32 lanes x 4 bytes; the share is a fit
# through the whole projection over the 47 stored points that add SIMT stores (38 epilogue=direct, 9 with
# another switch beside it; scripts/change_record.py's checks): the full DRAM time (share 1) priced them
# +1.51 pp high on average (median |error| 1.66, max 5.70), 0.94 -0.03 (1.07, 4.77), 0.93 -0.29, 0.95
# +0.23, 0.9 -1.06: the L2 takes the last of a tile's stores while the next tile starts. The ends: the point
# x STORE_SPREAD. Where the device or the clock is not known, STORE_WAITED: the H100's (STORE_CYCLES) x the share.
STORE_BYTES = 128.0
STORE_DRAIN_SHARE = 0.94
STORE_SPREAD = (0.85, 1.0, 1.2)
STORE_CYCLES = (5.7, 6.7, 8.0)
STORE_WAITED = tuple(STORE_DRAIN_SHARE * c for c in STORE_CYCLES)
# split-K's fp32 partials (each of a tile's S units writes its own, the last reads the other S - 1 back;
# its own it reads from L2): the time they take at the device's peak DRAM bandwidth x this share (low,
# point, high). The kernel waits for them with no MMA beside it: its consumers store the partial, count the
# unit in and read the others between two K-loops. A fit through the whole projection over the 27 stored
# split-K points (split_k=2..4, 18 on the H100 and 9 on an H200; scripts/change_record.py's checks), with
# the SASS's start and epilogue of one unit not priced: 1.4 priced them -12.1 pp on average (median |error|
# 8.3), 1.5 -2.3 (5.2), 1.6 +7.5 (10.7); the H100's points alone are closest at 1.4-1.5 (median 4.7-4.9),
# the H200's at 1.6 (7.3): the ends hold both
PARTIAL_DRAM_SHARE = (1.3, 1.5, 1.8)
# a global load added to the K-loop whose value each K block waits on (scales by LDG instead of TMA):
# cycles it exposes a K block, as a share of the base capture's first load (low, point, high). A fit: the
# three sfa_tma=0 points of the H200 change run (tests/data/h200_changes), with the tile start's tie and the
# K-loop's instructions priced as above, imply 0.057 (6144x5120x2560), 0.063 (4096^3) and 0.081
# (8192x8192x1024); the point is their median, the ends the smallest x 5/6 and the largest x 7/6
LOADWAIT_SHARE = (0.048, 0.063, 0.095)
# the same for a load whose scoreboard is first waited on after MMAs issued (``scoreboard.waited_before_mma``):
# their time covers its latency, so the point is 0; the high end is what a waited-on load's low end prices
# (the tensor pipe can still drain before the wait is reached)
COVERED_LOAD_SHARE = LOADWAIT_SHARE[0]
# where the control bits count the loads waited on before the next MMA (``BuildCounts.exposed_loads``), the
# share by how many of them a K block exposes (their latencies overlap, so two expose more than one, not
# twice): LOADWAIT_SHARE's three values scaled by it; more than the table holds takes its last scale and lets
# the high end grow with the loads. A fit through the whole projection over the 70 stored points that add
# K-loop loads (scripts/change_record.py's checks; the 192- and 128-row tiles' A scales expose one a K block,
# the 256-row tiles' two): LOADWAIT_SHARE alone (1, 1) priced them at a median |error| of 2.01 pp, max 7.45,
# mean -0.67 (the one-load tiles +1.5 on average, the two-load tiles -1.8); (0.9, 1.2) 1.43 / 5.94 / -0.29;
# (0.95, 1.2) 1.41 / 5.93 / -0.11; (0.85, 1.25) 1.48 / 6.44; (0.8, 1.35) 1.59 / 7.29
# Held out on three new problems (tests/data/changes_loads_exposed): the nine load points within 3.4 pp, where
# one share for every count misses by up to 3.9
LOADWAIT_BY_EXPOSED = {1: 0.95, 2: 1.2}
# a non-blocking probe of the next stage's full barrier, issued among a K block's promotion math, lets each
# consumer warpgroup branch past the blocking wait when the stage has landed; without the probe that wait's
# barrier read sits on the warpgroup's way to its next MMAs once a K block. Cycles it exposes a K block for
# each probe removed (an added probe: the same, saved), by consumer warpgroups (low, point, high); where
# the table has no entry, the point is 0 and the interval the moved wait's. A fit over the stored peek=0
# points (nine single changes on the 256-row tile, two warpgroups; docs/model.md, "Code changes priced from
# SASS"): each implies -11 (K = 1024), 15, 36, 41, 49, 50, 54, 61 and 72 cycles a K block through the whole
# projection; the point is their median, the high end the largest x 7/6, the low end 0. With three
# warpgroups (the 192-row tile) the thirteen stored points imply a median of -2: another warpgroup's MMAs
# cover the wait, and the table leaves it out
PROBE_WAIT_CYCLES_BY_WARPGROUPS: dict[int, tuple[float, float, float]] = {2: (0.0, 49.0, 84.0)}
# a named barrier that ties every consumer warpgroup where the base build had one per warpgroup (the B-scale
# stash's barriers at the tile start, an epilogue not split per warpgroup): each tile every warpgroup waits
# there for the last one, and that wait is lost tensor time, since the split let one warpgroup's tile start
# or epilogue run under the others' MMAs. Its cycles a tile as a share of what the base capture's warpgroups
# would wait (``tie_wait_cycles``) (low, point, high). A fit: the three sfb_tma=0 and three epi_split=0 points
# of the H200 change run (tests/data/h200_changes) imply 0.96-1.11 on the 192x128 tile (three warpgroups) and
# -1.0 and 0.34 on 4096^3 (256x128: two); the point is their median, the high end the largest x 7/6, the low
# end 0 (a tie cannot save time)
TIE_SHARE = (0.0, 0.99, 1.29)
# half-width of the measurement's own noise (percentage points of wall time): a second build of the
# same code measured 0.0-0.8% from the first in 7 of the 8 stored coop runs (1.8% in one), so a
# projection's interval that is to hold a measurement must be this much wider
NOISE_PP = 1.0
# a run's first repeat against its others (the paired change of repeat 0 minus the median of the rest,
# the median over a run's points): within 1.5 pp on twelve of the fourteen stored one-call checks, -9.1
# on changes_probe and -4.0 on changes_stage_ring, where most changes of a problem measured low in repeat
# 0 and pulled the mean of the paired ratios with them. Past this, a run says its first repeat is off
FIRST_REPEAT_OFF_PP = 2.0
# instructions that block until something else happened (an arrive does not: it is not counted)
WAIT_OPS = ("SYNCS.PHASECHK", "BAR.SYNC", "BAR.RED", "DEPBAR", "WARPGROUP.DEPBAR")
SPILL_OPS = ("LDL", "STL")
# switches of the bundled FP8 kernel whose effect is a mechanism SASS does not show
SWITCH_MECHANISMS = {
    "ab_stage": "stages",
    "swizzle": "tile_order",
    "tiles": "tile_order",
    "cluster_m": "multicast",
    "cluster_n": "multicast",
    "split_k": "work_units",
}
# what a change touches beyond its instruction counts (``ChangeEstimate.kinds``), in the order a record of
# checked projections is kept by (``change_record``); "instructions" where it touches none of them
KINDS = (
    "stage_count",
    "waited_load",
    "tie",
    "store_drain",
    "moved_wait",
    "compound",
    "spills",
    "trip_count",
    "tile_order",
    "multicast",
    "barrier_threads",
    "instructions",
)


@dataclass
class BuildCounts:
    """One build's instructions per phase, executed by one warp per output tile."""

    name: str
    per_tile: dict[str, float]  # phase -> warp-instructions per tile
    static: dict[str, int]  # phase -> instructions in the listing
    waits: dict[str, float]  # phase -> barrier/wait instructions per tile
    mma_per_kblock: float
    kloop_per_kblock: float  # non-MMA K-loop instructions per K block
    kblocks_per_pass: float  # K blocks one pass of the K-loop body covers
    spills: int
    stages: int | None
    unknown_loops: list[str] = field(default_factory=list)
    roles: str = ""  # how phases were found ("line info" / "loops only")
    # threads each named barrier (BAR.SYNC id, count) waits for, by phase: which warps a barrier ties
    barrier_threads: dict[str, list[int]] = field(default_factory=dict)
    opcodes: dict[str, Counter] = field(default_factory=dict)  # phase -> opcode -> per tile
    # non-blocking probes of a barrier's phase (an unguarded SYNCS.PHASECHK without .TRYWAIT), by phase, per
    # tile: a probe issued ahead lets a later wait be skipped; None where the counts predate this field
    probes: dict[str, float] | None = None
    # warp-instructions per tile averaged over the warps of each phase: code that one warp of a named
    # barrier's group runs (an equality warp-dispatch `if`, such as the epilogue's store warp) counts
    # 1 / the group's warps, where per_tile counts it once for every warp; None where the counts predate it
    per_warp: dict[str, float] | None = None
    # the K-loop's global loads per tile whose scoreboard is first waited on before the next MMA issues
    # (``scoreboard.waited_before_mma``): their latency holds the tensor pipe back, where a load waited on
    # after MMAs issued is covered by them; None where the listing had no control bits or the counts
    # predate this field
    exposed_loads: float | None = None


def warp_instructions(c: BuildCounts, *others: BuildCounts) -> dict[str, float]:
    """A build's instructions per warp and tile by phase: ``per_warp`` where it and every build it is
    compared with (``others``) have it, else ``per_tile`` (one basis for both sides of a delta)."""
    if c.per_warp is not None and all(o.per_warp is not None for o in others):
        return c.per_warp
    return c.per_tile


@dataclass
class PhaseCost:
    """What one more instruction of a phase costs on the base build (cycles per tile each)."""

    phase: str
    measured_cycles: float  # the phase's cycles per tile in the capture
    instructions: float  # its warp-instructions per tile (SASS)
    cpi: float  # measured_cycles / instructions: the count rule's rate
    point: float
    lo: float
    hi: float
    why: str
    floor_kblock: float = 0.0  # K-loop: the tensor cores' cycles per K block


@dataclass
class PhaseDelta:
    phase: str
    instructions: float  # B - A, warp-instructions per tile
    static: int  # B - A in the listing
    cycles: float  # the projection's cycles per tile
    lo: float
    hi: float
    count_rule: float  # instructions x the phase's measured CPI
    source: str  # where the number came from (one line)
    unpriced: list[str] = field(default_factory=list)
    top_opcodes: list[tuple[str, float]] = field(default_factory=list)
    # the part of (lo, cycles, hi) priced at the DRAM's pace (bytes over the device's bandwidth, in the base's
    # cycles): the SM clock does not speed it up
    dram: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class ChangeEstimate:
    a: str
    b: str
    k_blocks: int
    deltas: list[PhaseDelta]
    costs: dict[str, PhaseCost]
    counts: dict[str, BuildCounts]
    notes: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # KINDS the change touches

    def cycle_deltas(self, which: str = "point", *, dram: bool = True) -> dict[str, float]:
        """{model knob: cycles per tile} for ``project``: the point, ``lo`` or ``hi`` bound; without what is
        priced at the DRAM's pace where ``dram`` is False."""
        out: dict[str, float] = defaultdict(float)
        for d in self.deltas:
            v = d.cycles if which == "point" else d.lo if which == "lo" else d.hi
            if not dram:
                v -= d.dram[1] if which == "point" else d.dram[0] if which == "lo" else d.dram[2]
            knob = {"prologue": "tma0", "producer": None}.get(d.phase, d.phase)
            if knob and v:
                out[knob] += v
        return dict(out)

    def unpriced(self) -> list[str]:
        return [u for d in self.deltas for u in d.unpriced]

    def to_json(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "k_blocks": self.k_blocks,
            "deltas": [asdict(d) for d in self.deltas],
            "costs": {k: asdict(v) for k, v in self.costs.items()},
            "counts": {
                k: {**asdict(v), "opcodes": {p: dict(c) for p, c in v.opcodes.items()}} for k, v in self.counts.items()
            },
            "cycle_deltas": {w: self.cycle_deltas(w) for w in ("point", "lo", "hi")},
            "unpriced": self.unpriced(),
            "notes": list(self.notes),
            "kinds": list(self.kinds),
        }


# --- phases of instructions -------------------------------------------------------------------


def _strong(label: str | None) -> str | None:
    """The phase a role label names outright, or None (a helper's own name: ``__call__()``)."""
    if not label:
        return None
    low = label.lower()
    if "producer" in low or "/load" in low or low.startswith("load"):
        return "producer"
    if "epilogue" in low or "epi_" in low:
        return "phase1"
    if "kloop" in low or "mainloop" in low or "mma" in low:
        return "kloop"
    if "consumer" in low:
        return "tma0"
    return None


def _loop_of(fa) -> list[int | None]:
    """The innermost loop of every instruction (None outside loops)."""
    inner: list[int | None] = [None] * len(fa.instructions)
    depth = [0] * len(fa.instructions)
    for lp in fa.loops:
        for i in lp.instructions:
            if lp.depth > depth[i]:
                inner[i], depth[i] = lp.id, lp.depth
    return inner


def _is_wait_loop(fa, lp) -> bool:
    """A barrier's retry loop (a few instructions around a try-wait): runs once when the data is
    there, so it counts once; its spinning is time the capture measures, not instructions."""
    return (
        lp.size <= 8
        and lp.mma == 0
        and any(fa.instructions[i].opcode.startswith(("SYNCS", "BAR", "NANOSLEEP")) for i in lp.instructions)
    )


def _producer_loop(fa, lp) -> bool:
    return lp.mma == 0 and any(fa.instructions[i].opcode.startswith("UTMALDG") for i in lp.instructions)


def _whole_k_in_one_pass(fa, kset: set[int]) -> bool:
    """Whether the compiler unrolled the whole K into one pass, so the loop the K-loop finder picked is the
    persistent tile loop: no tile loop around it, and the line info puts the epilogue inside it (a K of
    ``BLOCK_K`` x the ring's unroll, 4096x32768x512 on the 192x128 tile). Counted as a K-loop, the tile's
    start and epilogue would price at the K-loop's cost and compare with nothing in a build that loops."""
    if not kset or fa.roles is None or fa.tile_loop is not None:
        return False
    return any(_strong(fa.roles[i]) == "phase1" for i in kset)


def phase_of(fa, one_pass: bool = False) -> list[str]:
    """The model phase of every instruction: line info first (a helper's instructions take the phase
    of the labelled code before them in the same loop), then the loops (the K-loop body; a loop
    that issues TMA loads and no MMA is the producer's; outside every loop the prologue). ``one_pass``:
    the K-loop's body covers the whole K, so a loop the finder took for it may be the tile loop."""
    inner = _loop_of(fa)
    kset = set(fa.kloop.instructions) if fa.kloop is not None else set()
    top: list[int | None] = [None] * len(fa.instructions)
    for lp in sorted(fa.loops, key=lambda lp: -lp.depth):
        for i in lp.instructions:
            top[i] = lp.id  # outermost last: the depth-1 loop holding the instruction
    prod: set[int] = set()
    for lp in fa.loops:
        if _producer_loop(fa, lp) and not kset.intersection(lp.instructions):
            prod.update(lp.instructions)
            par = lp.parent
            while par is not None:  # the producer's own tile loop
                if not any(fa.instructions[i].category == "mma" for i in fa.loops[par].instructions):
                    prod.update(fa.loops[par].instructions)
                par = fa.loops[par].parent
    roles = fa.roles
    whole_k = one_pass and _whole_k_in_one_pass(fa, kset)
    mmas = sorted(i for i in kset if fa.instructions[i].category == "mma") if whole_k else []
    out: list[str] = []
    last: dict[int | None, str] = {}
    for i, ins in enumerate(fa.instructions):
        if inner[i] is None:
            out.append("prologue")
            continue
        strong = _strong(roles[i]) if roles is not None else None
        if i in kset and whole_k:
            # the loop is the tile's: code before its first MMA starts the tile, between its MMAs are the
            # K blocks, after its last the last block's promotion until the epilogue's line info begins
            if i < mmas[0]:
                ph = "phase1" if strong == "phase1" else "tma0"
            elif i <= mmas[-1]:
                ph = "kloop"
            elif strong is not None:
                ph = "phase1" if strong == "phase1" else "kloop"
            else:
                ph = last.get(top[i], "kloop")
        elif i in kset:
            ph = "kloop"
        elif strong == "producer" or (strong is None and i in prod):
            ph = "producer"
        elif strong is not None:
            ph = strong
        else:
            ph = last.get(top[i], "producer" if i in prod else "tma0")
        last[top[i]] = ph
        out.append(ph)
    return out


def _stages_per_pass(fa, lp, fallback: float) -> float:
    """K blocks one pass of a producer's load loop fills: one expect-tx arrive (``SYNCS.ARRIVE.TRANS64``
    without a reduction) per stage it fills; without any, the consumers' K blocks per pass."""
    n = sum(
        1
        for i in lp.instructions
        if fa.instructions[i].opcode.startswith("SYNCS.ARRIVE.TRANS64") and ".RED" not in fa.instructions[i].opcode
    )
    return float(n) if n else max(1e-9, fallback)


def _kloop_mma_per_kblock(fa, tile_m: int | None, consumer_wgs: int | None) -> float:
    """MMAs one consumer warp issues per 128-deep K block: a wave of 64 rows per warpgroup takes
    four 32-deep wgmma per K block; a tile of ``tile_m`` rows over ``consumer_wgs`` warpgroups
    has tile_m / (64 x consumer_wgs) waves. Without the tile: one wave."""
    waves = 1.0
    if tile_m and consumer_wgs:
        waves = max(1.0, tile_m / (64.0 * consumer_wgs))
    return 4.0 * waves


def count_build(
    fa,
    name: str,
    k_blocks: int,
    *,
    tile_m: int | None = None,
    consumer_wgs: int | None = None,
    tiles_per_cta: float = 1.0,
) -> BuildCounts:
    """Warp-instructions per output tile, per phase, of one build (``fa``: an analyzed function)."""
    if fa.kloop is None:
        raise BsprofError(
            f"{name}: no K-loop found in the SASS (K fully unrolled or no MMA); the change "
            "chain prices a K-loop per K block and needs one"
        )
    mma_kb = _kloop_mma_per_kblock(fa, tile_m, consumer_wgs)
    kl = fa.kloop
    kb_per_pass = max(1e-9, kl.mma / mma_kb)
    passes = k_blocks / kb_per_pass
    # a loop that runs more than once a tile is a K-loop whatever else it holds (a K-loop flattened with
    # the tile loop runs its epilogue on the last pass alone)
    phases = phase_of(fa, one_pass=passes <= 1)
    inner = _loop_of(fa)
    mult = [1.0] * len(fa.instructions)
    unknown = []
    by_id = {lp.id: lp for lp in fa.loops}
    kset = set(kl.instructions)
    for i in range(len(fa.instructions)):
        lid = inner[i]
        if lid is None:
            mult[i] = 1.0 / max(1.0, tiles_per_cta)
            continue
        lp = by_id[lid]
        # a wait-retry loop counts as the code around it
        while lp is not None and _is_wait_loop(fa, lp) and lp.parent is not None:
            lp = by_id[lp.parent]
        if i in kset:
            mult[i] = passes
        elif lp is not None and lp.depth >= 2 and _producer_loop(fa, lp):
            mult[i] = k_blocks / _stages_per_pass(fa, lp, kb_per_pass)
        elif lp is not None and lp.depth >= 2 and not _is_wait_loop(fa, lp):
            unknown.append(f"loop {lp.id} ({lp.size} instructions, {phases[i]})")
    per: dict[str, float] = defaultdict(float)
    static: dict[str, int] = defaultdict(int)
    waits: dict[str, float] = defaultdict(float)
    ops: dict[str, Counter] = defaultdict(Counter)
    probes: dict[str, float] = defaultdict(float)
    single: dict[str, float] = defaultdict(float)
    one = fa.one_warp_roles if fa.roles is not None else frozenset()
    kl_non_mma = 0.0
    for i, ins in enumerate(fa.instructions):
        ph = phases[i]
        if ins.opcode.startswith("NOP") or (ins.opcode == "EXIT" and inner[i] is None):
            continue
        per[ph] += mult[i]
        if one and ph in CONSUMER_PHASES and one.intersection(fa.roles[i].split("/")):
            single[ph] += mult[i]
        static[ph] += 1
        ops[ph][ins.base] += mult[i]
        if ins.opcode.startswith(WAIT_OPS) or ins.opcode == "BAR":
            waits[ph] += mult[i]
        # a guarded PHASECHK is a wait loop's retry; an unguarded one without .TRYWAIT only reads the phase
        if ins.opcode.startswith("SYNCS.PHASECHK") and "TRYWAIT" not in ins.opcode and not ins.guard:
            probes[ph] += mult[i]
        if ph == "kloop" and ins.category != "mma":
            kl_non_mma += mult[i]
    bars: dict[str, list[int]] = defaultdict(list)
    for i, ins in enumerate(fa.instructions):
        if ins.opcode.startswith("BAR.SYNC") or ins.opcode.startswith("BAR.RED"):
            n = _bar_threads(ins.operands)
            if n is not None:
                bars[phases[i]].append(n)
    spills = sum(1 for ins in fa.instructions if ins.base in SPILL_OPS)
    from bsprof.analyzers.sass.scoreboard import has_control, waited_before_mma

    exposed = None
    if has_control(fa.function.arch, fa.instructions):
        body = sorted(kl.instructions)
        exposed = sum(
            mult[i]
            for at, i in enumerate(body)
            if fa.instructions[i].base == "LDG" and waited_before_mma(fa.instructions, body, at)
        )
    # the group one warp's code runs once for: the phase's narrowest named barrier (the warps that wait
    # for that warp), else a warpgroup
    group = {p: (min(bars[p]) // 32 if bars.get(p) else WARPGROUP_WARPS) for p in PHASES}
    st = fa.features.get("multi_stage_pipeline") if fa.features else None
    return BuildCounts(
        name=name,
        per_tile={p: float(per.get(p, 0.0)) for p in PHASES},
        static={p: int(static.get(p, 0)) for p in PHASES},
        waits={p: float(waits.get(p, 0.0)) for p in PHASES},
        mma_per_kblock=mma_kb,
        kloop_per_kblock=kl_non_mma / max(1, k_blocks),
        kblocks_per_pass=kb_per_pass,
        spills=spills,
        stages=getattr(st, "value", None) if st is not None else None,
        unknown_loops=sorted(set(unknown)),
        roles="line info" if fa.roles is not None else "loops only",
        opcodes=dict(ops),
        barrier_threads={k: sorted(v) for k, v in bars.items()},
        probes={p: float(probes.get(p, 0.0)) for p in PHASES},
        per_warp={p: float(per.get(p, 0.0) - single.get(p, 0.0) * (1 - 1 / max(1, group[p]))) for p in PHASES},
        exposed_loads=exposed,
    )


def counts_json(c: BuildCounts) -> dict:
    """A build's counts as JSON (what ``counts_from_json`` reads back)."""
    d = asdict(c)
    d["opcodes"] = {ph: dict(ops) for ph, ops in c.opcodes.items()}
    return d


def counts_from_json(d: dict) -> BuildCounts:
    return BuildCounts(**{**d, "opcodes": {ph: Counter(ops) for ph, ops in d.get("opcodes", {}).items()}})


def _bar_threads(operands: str) -> int | None:
    """The thread count of ``BAR.SYNC id, count`` (an immediate); None for a whole-CTA barrier or a
    count in a register."""
    parts = [p.strip() for p in operands.split(",")]
    if len(parts) < 2 or not parts[-1].startswith("0x"):
        return None
    try:
        return int(parts[-1], 16)
    except ValueError:
        return None


# --- what an instruction costs, from the base build's capture -----------------------------------


def calibrate_costs(
    base: BuildCounts,
    measured: dict[str, float],
    k_blocks: int,
    *,
    tile_mn: tuple[int, int],
    consumer_warps: int,
    dtype: str = "fp8",
) -> dict[str, PhaseCost]:
    """Cycles per tile that one more warp-instruction costs in each phase, from the base build's
    measured phase cycles per tile (``measured``: ``{"tma0", "kloop", "phase1", "producer"}``,
    cycles per tile as the timing capture records them) and its SASS counts."""
    issue = max(1.0, consumer_warps / SUBPARTITIONS)
    out: dict[str, PhaseCost] = {}
    floor_kb = tile_mn[0] * tile_mn[1] * BLOCK_K / FMA_PER_CYCLE.get(dtype, 4096)
    kl = float(measured.get("kloop", 0.0))
    c_kb = kl / max(1, k_blocks)
    exposed = max(0.0, c_kb - floor_kb)
    n_kb = max(1e-9, base.kloop_per_kblock)
    n = warp_instructions(base)
    n_kl = n["kloop"]
    out["kloop"] = PhaseCost(
        "kloop",
        kl,
        n_kl,
        kl / n_kl if n_kl else math.nan,
        point=min(issue, KLOOP_MARGINAL * exposed / n_kb),
        lo=0.0,
        hi=issue,
        why=f"{c_kb:,.0f} cycles a K block, {floor_kb:,.0f} of them tensor-core time: "
        f"{exposed:,.0f} exposed over {n_kb:,.0f} instructions, x{KLOOP_MARGINAL:g} at the margin",
        floor_kblock=floor_kb,
    )
    for ph in ("tma0", "phase1"):
        cyc, n_ph = float(measured.get(ph, 0.0)), n[ph]
        cpi = cyc / n_ph if n_ph else math.nan
        pt = cpi if math.isfinite(cpi) else issue
        out[ph] = PhaseCost(
            ph,
            cyc,
            n_ph,
            cpi,
            point=pt,
            lo=min(issue, pt),
            hi=1.5 * pt,
            why=f"{cyc:,.0f} cycles / {n_ph:,.0f} instr a tile",
        )
    cyc, n_ph = float(measured.get("producer", 0.0)), n["producer"]
    out["producer"] = PhaseCost(
        "producer",
        cyc,
        n_ph,
        cyc / n_ph if n_ph else math.nan,
        0.0,
        0.0,
        0.0,
        why="keeps the ring full off the consumers' cycle",
    )
    out["prologue"] = PhaseCost(
        "prologue", 0.0, n["prologue"], issue, issue, 0.0, issue, why="once per CTA, over its tiles"
    )
    return out


# --- the change -------------------------------------------------------------------------------


def _tied_phases(
    a: BuildCounts, b: BuildCounts, consumer_warps: int | None, tie_wait: dict[str, float] | None
) -> list[str]:
    """The phases where B has a named barrier over every consumer warp and A's widest barrier there was
    narrower: a tie the base capture's warpgroups did not pay, which ``tie_wait`` prices."""
    if not consumer_warps or not tie_wait:
        return []
    out = []
    for ph in ("tma0", "phase1"):
        nb, na = max(b.barrier_threads.get(ph, []), default=0), max(a.barrier_threads.get(ph, []), default=0)
        if nb >= 32 * consumer_warps > na and ph in tie_wait:
            out.append(ph)
    return out


def op_delta(a: BuildCounts, b: BuildCounts, phases: tuple[str, ...], ops: tuple[str, ...]) -> float:
    """B - A: how many more of ``ops`` one warp executes a tile in ``phases``."""
    return sum(
        b.opcodes.get(ph, Counter()).get(op, 0.0) - a.opcodes.get(ph, Counter()).get(op, 0.0)
        for ph in phases
        for op in ops
    )


def _top_ops(a: BuildCounts, b: BuildCounts, ph: str, n: int = 3) -> list[tuple[str, float]]:
    oa, ob = a.opcodes.get(ph, Counter()), b.opcodes.get(ph, Counter())
    d = {k: ob.get(k, 0.0) - oa.get(k, 0.0) for k in set(oa) | set(ob)}
    return [(k, round(v, 1)) for k, v in sorted(d.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:n] if abs(v) >= 0.5]


def _add_priced(d: PhaseDelta, low_point_high: list[float], what: str, *, dram: bool = False) -> None:
    """Add a mechanism priced beside the instructions to a phase's delta: its point, its interval (the
    smaller and larger of its ends), and what it is on the delta's source line. ``dram``: priced at the
    DRAM's pace, which the SM clock does not change."""
    lo, pt, hi = min(low_point_high), low_point_high[1], max(low_point_high)
    d.cycles += pt
    d.lo += lo
    d.hi += hi
    if dram:
        d.dram = (d.dram[0] + lo, d.dram[1] + pt, d.dram[2] + hi)
    d.source += f"; {what}: {pt:+,.0f} ({lo:+,.0f}..{hi:+,.0f})"


def loadwait_shares(exposed_per_kblock: float | None) -> tuple[tuple[float, float, float], int]:
    """(low, point, high) share of the first load a waited-on K-loop load exposes a K block, and how many
    loads a K block the control bits say are waited on before the next MMA (0 where they were not read)."""
    if exposed_per_kblock is None:
        return LOADWAIT_SHARE, 0
    n = max(1, round(exposed_per_kblock))
    top = max(LOADWAIT_BY_EXPOSED)
    scale = LOADWAIT_BY_EXPOSED[min(n, top)]
    lo, pt, hi = (scale * s for s in LOADWAIT_SHARE)
    return (lo, pt, hi * max(1.0, n / top)), n


def ring_delta(kloop: PhaseCost, k_blocks: int, sa: int, sb: int, latency: float, arrival: float = 0.0) -> float:
    """Cycles per tile a stage count sa -> sb adds to the K-loop. A ring of S stages needs a K block to
    last ``arrival`` + ``latency`` / (S - 1) (one stage is being refilled while S - 1 feed the MMAs and
    hide its latency; no ring delivers stages faster than ``arrival`` apart; a single stage serializes
    load and MMAs). The K block's period is a soft maximum of that need and the consumers'
    own period: P = (C0^p + need^p)^(1/p), p = RING_SOFTNESS, since a load's latency varies and the
    slow ones stall a ring whose mean need fits. C0 comes from the base's measured period, and no ring
    makes a K block shorter than the tensor cores' floor."""
    c_kb = kloop.measured_cycles / max(1, k_blocks)
    p = RING_SOFTNESS

    def need(stages: int) -> float:
        return c_kb + latency + arrival if stages <= 1 else arrival + latency / (stages - 1)

    own = max(kloop.floor_kblock**p, c_kb**p - need(sa) ** p) if sa > 1 else c_kb**p

    def period(stages: int) -> float:
        return max(kloop.floor_kblock, (own + need(stages) ** p) ** (1 / p))

    # against the measured period: where the base's ring held it at its need, C0 is the floor and
    # period(sa) would sit above what was measured
    return (period(sb) - c_kb) * k_blocks


def probe_cycles(
    a: BuildCounts, b: BuildCounts, consumer_warps: int | None
) -> tuple[float, tuple[float, float, float]] | None:
    """Barrier probes B's K-loop lost (negative) or gained a tile, and the cycles a tile that costs
    (low, point, high) by ``PROBE_WAIT_CYCLES_BY_WARPGROUPS``; None where either build's counts predate
    the probes, none moved, or the table has no entry for the consumer warpgroups."""
    table = PROBE_WAIT_CYCLES_BY_WARPGROUPS.get((consumer_warps or 0) // 4)
    if a.probes is None or b.probes is None or table is None:
        return None
    dp = b.probes.get("kloop", 0.0) - a.probes.get("kloop", 0.0)
    if abs(dp) < 0.5:
        return None
    return dp, (-dp * table[0], -dp * table[1], -dp * table[2])


def first_load_cycles(table) -> float | None:
    """The base capture's load latency at the kernel's start, cycles: per CTA, from its producer's
    first load to the end of its consumers' first tile start (their first stage full); the median over
    CTAs. None without those records."""
    if table is None or not len(table):
        return None
    first = table[table["tile"] == table.groupby(["sm", "cta"])["tile"].transform("min")]
    issued = first[(first["role"] == "producer") & (first["phase"] == "load")].groupby(["sm", "cta"])["start"].min()
    full = first[(first["role"] == "mma") & (first["phase"] == "tma0")].groupby(["sm", "cta"])["end"].min()
    lat = (full - issued).dropna()
    lat = lat[lat > 0]
    return float(lat.median()) if len(lat) else None


def tie_wait_cycles(table) -> dict[str, float]:
    """What a barrier tying every consumer warpgroup would make them wait in the base capture, cycles a
    tile, by the phase it would sit in (``tma0``: the tile start, ``phase1``: the epilogue): per tile, the
    sum over warpgroups (four consecutive warps) of the last one's arrival at the phase minus its own
    (a warpgroup arrives at the mean start of its warps' records); the mean over tiles. {} without two
    consumer warpgroups in the records."""
    if table is None or not len(table):
        return {}
    out: dict[str, float] = {}
    for phase, role in (("tma0", "mma"), ("phase1", "epilogue")):
        sel = table[(table["role"] == role) & (table["phase"] == phase)]
        if not len(sel):
            continue
        arrive = sel.assign(wg=sel["warp"] // 4).groupby(["sm", "cta", "tile", "wg"])["start"].mean()
        per_tile = arrive.groupby(level=["sm", "cta", "tile"])
        wait = (per_tile.transform("max") - arrive).groupby(level=["sm", "cta", "tile"]).sum()
        wait = wait[per_tile.size() >= 2]
        if len(wait):
            out[phase] = float(wait.mean())
    return out


def estimate_change(
    a: BuildCounts,
    b: BuildCounts,
    costs: dict[str, PhaseCost],
    k_blocks: int,
    *,
    mechanisms: tuple[str, ...] = (),
    tile_cycles: float | None = None,
    stages: tuple[int, int] | None = None,
    first_load: float | None = None,
    consumer_warps: int | None = None,
    tie_wait: dict[str, float] | None = None,
    store: tuple[float, float, float] = STORE_WAITED,
    tile_m: int | None = None,
    operand_bytes: tuple[float, float] | None = None,
    cluster_ctas: tuple[int, int] | None = None,
    partial_bytes: tuple[float, float] | None = None,
    work_units: tuple[int, int] | None = None,
) -> ChangeEstimate:
    """The change of cycles per tile in each phase from A to B, with an interval, and the lines
    naming what SASS could not price. ``mechanisms``: what the change is known to touch beyond its
    instructions (``stages``, ``tile_order``: from a bundled kernel's switches); ``first_load``: the
    base capture's first-load latency in cycles (:func:`first_load_cycles`), which prices a stage count
    and a load the K-loop waits on; ``consumer_warps``: the warps whose global stores share the SM's;
    ``tie_wait``: what a barrier tying every consumer warpgroup makes them wait, by phase
    (:func:`tie_wait_cycles` of the base capture), which prices such a barrier where the base had none;
    ``store``: the cycles a warp's global store takes (low, point, high; :func:`store_cycles`); ``tile_m``:
    the output tile's rows, which pick how a stage count is priced (``RING_NEED_BY_TILE_ROWS``);
    ``operand_bytes``: the A and B bytes a CTA loads from L2 a K block, before and after (a cluster's
    multicast changes them), ``cluster_ctas`` the CTAs of a cluster, ``partial_bytes`` the bytes
    split-K's fp32 partials move a tile, before and after, and ``work_units`` the units a tile is split
    into."""
    deltas: list[PhaseDelta] = []
    notes: list[str] = []
    kl = costs["kloop"]
    ta = sorted(n for v in a.barrier_threads.values() for n in v)
    tb = sorted(n for v in b.barrier_threads.values() for n in v)
    tied = _tied_phases(a, b, consumer_warps, tie_wait) if ta != tb and ta and tb else []
    kinds: set[str] = set()
    na, nb = warp_instructions(a, b), warp_instructions(b, a)
    for ph in PHASES:
        dn = nb[ph] - na[ph]
        ds = b.static[ph] - a.static[ph]
        c = costs[ph]
        cyc, lo, hi = dn * c.point, dn * (c.lo if dn >= 0 else c.hi), dn * (c.hi if dn >= 0 else c.lo)
        cr = dn * (c.cpi if math.isfinite(c.cpi) else 0.0)
        if ph == "producer":
            src = (
                (
                    f"{dn:+,.0f} producer instructions a tile, off the consumers' cycle (priced 0; "
                    f"the count rule: {cr:+,.0f})"
                )
                if dn or ds
                else ""
            )
        elif ph == "kloop":
            src = (
                f"{dn / max(1, k_blocks):+,.1f} instr a K block x {c.point:.2f} cycles "
                f"(0..{c.hi:.1f}) x {k_blocks} K blocks"
            )
        else:
            src = f"{dn:+,.1f} instr a tile x {c.point:.2f} cycles ({c.why})"
        every = b.per_tile[ph] - a.per_tile[ph]
        if ph != "producer" and abs(every - dn) >= 0.5:
            # what `bsprof sass A B` shows is the count for every warp: say why this one differs
            src += f"; {every:+,.1f} if every warp ran it: one warp's code counts once for its barrier group"
        d = PhaseDelta(ph, dn, ds, cyc, min(lo, hi), max(lo, hi), cr, src, top_opcodes=_top_ops(a, b, ph))
        dw = b.waits[ph] - a.waits[ph]
        if ph in tied:  # the tie's own barriers are priced with it below, not as waits moved
            dw -= max(0.0, min(dw, op_delta(a, b, (ph,), ("BAR",))))
        if ph in ("kloop", "tma0", "phase1") and abs(dw) >= 0.5:
            # a moved wait exposes or hides a barrier read's latency, bounded by a quarter of a K
            # block's tensor time for each wait it moves, each time it runs
            width = MOVED_WAIT_SHARE * kl.floor_kblock * abs(dw)
            kinds.add("moved_wait")
            d.lo, d.hi = d.lo - width, d.hi + width
            d.unpriced.append(
                f"{PHASE_NAMES[ph]}: {dw:+,.1f} waits/barriers a tile (a wait moved): its "
                f"latency is not in the SASS; interval ±{width:,.0f} cycles"
            )
        if ph == "kloop" and abs(b.mma_per_kblock * k_blocks - a.mma_per_kblock * k_blocks) > 0.5:
            w = TRIP_SHARE * kl.measured_cycles
            kinds.add("trip_count")
            d.lo, d.hi = d.lo - w, d.hi + w
            d.unpriced.append(
                f"K-loop: the MMAs per K block change ({a.mma_per_kblock:g} -> {b.mma_per_kblock:g}): "
                f"a trip count SASS cannot price; interval ±{w:,.0f}"
            )
        deltas.append(d)
    kd = next(d for d in deltas if d.phase == "kloop")
    # a bundled build's ring depth from its configuration, else what the SASS shows
    sa, sb = stages if stages is not None else (a.stages, b.stages)
    if b.spills > a.spills:
        kinds.add("spills")
        # every local load/store a consumer warp executes passes the SM's one L1 path, as a global
        # store does: at most the store path's slow end each (spills in the K-loop ran a kernel 3.4x
        # slower), at least a quarter of the K-loop where the counts say little
        local = op_delta(a, b, ("tma0", "kloop", "phase1"), SPILL_OPS)
        w = max(SPILL_SHARE * kl.measured_cycles, local * (consumer_warps or SUBPARTITIONS) * STORE_CYCLES[2])
        kd.hi += w
        kd.unpriced.append(
            f"spills appear ({a.spills} -> {b.spills} local loads/stores, {local:+,.0f} executed a tile a "
            f"warp): their latency is not priced; interval up to +{w:,.0f} cycles"
        )
    restaged = sa is not None and sb is not None and sa != sb
    if restaged:
        kinds.add("stage_count")
    # where the caller does not know the tile's rows, the tile the fit saw with that many warpgroups
    rows = tile_m or {3: 192, 2: 256}.get((consumer_warps or 0) // 4)
    ring_terms = RING_NEED_BY_TILE_ROWS.get(rows or 0)
    if restaged and ring_terms and kl.measured_cycles > 0:
        c_kb = kl.measured_cycles / max(1, k_blocks)
        arrival, latency = ring_terms
        _add_priced(
            kd,
            [ring_delta(kl, k_blocks, sa, sb, w * latency * c_kb, w * arrival * c_kb) for w in RING_NEED_ENDS],
            f"{sa} -> {sb} stages: a K block at least ({arrival:.2f} + {latency:.2f} / (stages - 1)) x the "
            f"base's {c_kb:,.0f} cycles",
        )
    elif restaged and first_load and first_load > 0:
        _add_priced(
            kd,
            [ring_delta(kl, k_blocks, sa, sb, share * first_load) for share in RING_LATENCY_SHARE],
            f"{sa} -> {sb} stages: a K block at least the load latency over stages - 1 "
            f"({RING_LATENCY_SHARE[1]:.2f} x the first load's {first_load:,.0f} cycles)",
        )
    elif restaged:
        exposed = max(0.0, kl.measured_cycles - kl.floor_kblock * k_blocks)
        if sb < sa:
            w = MOVED_WAIT_SHARE * kl.measured_cycles
            kd.hi += w
            msg = f"up to +{w:,.0f} cycles (a shallower ring hides less load latency)"
        else:
            kd.lo -= exposed
            msg = f"down to -{exposed:,.0f} cycles (at most the K-loop's time above the tensor floor)"
        kd.unpriced.append(
            f"the stage count changes the pipeline ({sa} -> {sb} stages): SASS prices its instructions only; {msg}"
        )
    if restaged and first_load and first_load > 0 and k_blocks <= max(sa, sb):
        # the priced ring is a K-loop's steady state; where the deeper ring holds a tile's whole K, it loads
        # the next tile's K blocks under this tile's epilogue, and the shallower one leaves some of them to
        # load after the next tile starts: up to one first load a tile, exposed or hidden, is not in the SASS
        # (4096x32768x512, 4 K blocks: 4 -> 3 stages measured +24% where the steady state priced +8)
        if sb < sa:
            kd.hi += first_load
        else:
            kd.lo -= first_load
        kd.unpriced.append(
            f"the ring holds a tile's whole K ({k_blocks} K blocks, {sa} -> {sb} stages): what it loads for "
            f"the next tile under this one's epilogue is not priced; interval "
            f"{'up to +' if sb < sa else 'down to -'}{first_load:,.0f} cycles (the first load's) a tile"
        )
    # the warpgroups' skew is paid once a tile: after the first tie they arrive at the next together, so a
    # second tie costs between nothing and its own wait (the larger wait is the one priced)
    if tied:
        kinds.add("tie")
    for i, ph in enumerate(sorted(tied, key=lambda p: -tie_wait[p])):
        shares = TIE_SHARE if i == 0 else (0.0, 0.0, TIE_SHARE[2])
        _add_priced(
            next(d for d in deltas if d.phase == ph),
            [share * tie_wait[ph] for share in shares],
            f"a barrier ties every consumer warpgroup ({max(b.barrier_threads[ph])} threads): each waits for "
            + (
                f"the last, {TIE_SHARE[1]:.2f} x the base capture's {tie_wait[ph]:,.0f} warpgroup-cycles a tile"
                if i == 0
                else f"the last, but a tie earlier in the tile took their skew (up to {tie_wait[ph]:,.0f} cycles)"
            ),
        )
    rest = [ph for ph in set(a.barrier_threads) | set(b.barrier_threads) if ph not in tied]
    if ta != tb and ta and tb and any(a.barrier_threads.get(ph) != b.barrier_threads.get(ph) for ph in rest):
        ta = sorted(n for ph in rest for n in a.barrier_threads.get(ph, []))
        tb = sorted(n for ph in rest for n in b.barrier_threads.get(ph, []))
        # a named barrier that ties more (or fewer) warps together removes (or allows) overlap between
        # them: at most the epilogue's own cycles a tile, which is what one warpgroup can hide under
        # another's K-loop
        w = costs["phase1"].measured_cycles
        kinds.add("barrier_threads")
        pd = next(d for d in deltas if d.phase == "phase1")
        more = max(tb, default=0) > max(ta, default=0)
        pd.lo, pd.hi = (pd.lo, pd.hi + w) if more else (pd.lo - w, pd.hi)
        pd.unpriced.append(
            f"a barrier ties {'more' if more else 'fewer'} threads ({max(ta, default=0)} -> {max(tb, default=0)}): the "
            f"overlap it removes or allows is not in the SASS; interval "
            f"{'up to +' if more else 'down to -'}{w:,.0f} cycles"
        )
    probe = probe_cycles(a, b, consumer_warps)
    if probe is not None:
        kinds.add("moved_wait")
        dp, cycles = probe
        _add_priced(
            kd,
            list(cycles),
            f"{dp / max(1, k_blocks):+,.1f} barrier probes a K block (a wait the consumers could skip "
            f"{'is now waited' if dp < 0 else 'can now be skipped'}): "
            f"{abs(cycles[1] / dp):.0f} cycles a K block with {(consumer_warps or 0) // 4} consumer warpgroups",
        )
    loads = op_delta(a, b, ("kloop",), ("LDG",))
    # where the control bits say where each load is waited on: added loads all waited on after MMAs issued
    # are covered by them (``BuildCounts.exposed_loads``)
    exposed = b.exposed_loads - a.exposed_loads if a.exposed_loads is not None and b.exposed_loads is not None else None
    covered = loads >= 0.5 and exposed is not None and exposed < 0.5
    if loads >= 0.5:
        kinds.add("waited_load")
    if covered and first_load and first_load > 0:
        _add_priced(
            kd,
            [0.0, 0.0, COVERED_LOAD_SHARE * first_load * k_blocks],
            f"{loads / max(1, k_blocks):+,.1f} global loads a K block, each waited on after MMAs issued: "
            f"covered by them (up to {COVERED_LOAD_SHARE:.3f} x the first load's {first_load:,.0f} cycles a K block)",
        )
    elif loads >= 0.5 and first_load and first_load > 0:
        shares, n = loadwait_shares(exposed / k_blocks if exposed is not None and k_blocks else None)
        where = f"before the next MMA issues ({n} a K block)" if n else "(the listing has no control bits to say where)"
        _add_priced(
            kd,
            [share * first_load * k_blocks for share in shares],
            f"{loads / max(1, k_blocks):+,.1f} global loads a K block, waited on {where}: "
            f"{shares[1]:.3f} x the first load's {first_load:,.0f} cycles a K block",
        )
    elif loads >= 0.5:
        # a global load the K-loop waits on: its latency (the capture's first-stage wait stands in for
        # one) can be hidden by the loads in flight or exposed once per K block
        w = LOAD_SHARE * costs["tma0"].measured_cycles * k_blocks
        kd.hi += w
        kd.unpriced.append(
            f"K-loop: {loads / max(1, k_blocks):+,.1f} global loads a K block: their latency is "
            f"not in the SASS; interval up to +{w:,.0f} cycles"
        )
    stg = {ph: op_delta(a, b, (ph,), ("STG",)) for ph in PHASES}
    d_stg = sum(v for ph, v in stg.items() if ph not in ("producer", "prologue"))
    if abs(d_stg) >= 0.5 and consumer_warps:
        kinds.add("store_drain")
        # the stores' cycles at the SM's store path replace what their phases priced them at
        busy = [ph for ph, v in stg.items() if ph not in ("producer", "prologue") and abs(v) >= 0.5]
        priced = sum(stg[ph] * costs[ph].point for ph in busy)
        # the other instructions the change adds where it adds stores (conversions, address math) issue
        # while the stores drain: the longer of the two is the phase's time, not their sum
        other = max(0.0, sum((nb[ph] - na[ph] - stg[ph]) * costs[ph].point for ph in busy))
        drain = [d_stg * consumer_warps * c for c in store]
        _add_priced(
            next(d for d in deltas if d.phase == "phase1"),
            [x - priced - (min(other, x) if x > 0 else 0.0) for x in drain],
            f"{d_stg:+,.0f} global stores a warp x {consumer_warps} warps drained at the DRAM, "
            f"{store[1]:.1f} cycles each"
            + (f", the {other:,.0f} cycles of other instructions beside them hidden under them" if other else ""),
        )
    # each K-loop mechanism is priced on its own and the prices add; on the hardware two in one loop
    # compound or cancel (measured combinations departed from the sum of their parts by -4.2 to +7.5 pp
    # of wall time: tests/data/changes_combined_switches and its parts), which no count shows
    k_dw = b.waits["kloop"] - a.waits["kloop"]
    in_loop = [
        what
        for what, on in (
            (
                f"{kd.instructions / max(1, k_blocks):+,.0f} instructions a K block",
                abs(kd.instructions) >= 5 * k_blocks,
            ),
            ("a waited-on global load", loads >= 0.5 and not covered),
            ("the stage count", restaged),
            ("a moved wait", abs(k_dw) >= 0.5),
        )
        if on
    ]
    if len(in_loop) >= 2:
        kinds.add("compound")
        kd.unpriced.append(
            f"K-loop: {len(in_loop)} changes in one loop ({', '.join(in_loop)}): priced apart and added; "
            "how they compound is not priced"
        )
    if "tile_order" in mechanisms and tile_cycles:
        kinds.add("tile_order")
        w = TILE_ORDER_SHARE * tile_cycles
        td = next(d for d in deltas if d.phase == "tma0")
        td.lo, td.hi = td.lo - w, td.hi + w
        td.unpriced.append(f"the tile order changes what hits L2: not in the SASS; interval ±{w:,.0f} cycles")
    if "work_units" in mechanisms and tile_cycles:
        # split-K shares a tile's K blocks among S work units. The K-loop's code runs once a K block
        # whatever S is, so its delta stands; but the counts hold one unit's start and epilogue where a tile
        # runs S of them, and the last unit's reads of the others' partials: a trip count the SASS does not
        # give. The change is priced instead as its fp32 partials' traffic at the DRAM, which the timings
        # show the kernel waits on with nothing beside it (PARTIAL_DRAM_SHARE)
        kinds.add("trip_count")
        units = work_units or (1, 1)
        if units[1] != units[0]:
            for d in deltas:
                if d.phase in ("tma0", "phase1") and (d.cycles or d.lo or d.hi):
                    d.unpriced.append(
                        f"{PHASE_NAMES.get(d.phase, d.phase)}: {d.instructions:+,.0f} instructions of one work unit "
                        f"({d.cycles:+,.0f} cycles a tile), run by each of a tile's {units[1]} units: a trip count "
                        "the SASS does not give, not priced (the partials' traffic stands for it)"
                    )
                    d.source = f"{d.instructions:+,.1f} instr a unit x {units[1]} units a tile: not priced from SASS"
                    d.cycles = d.lo = d.hi = 0.0
                    d.dram = (0.0, 0.0, 0.0)
        if partial_bytes and store and consumer_warps:
            moved = (partial_bytes[1] - partial_bytes[0]) / STORE_BYTES
            per = [c / STORE_DRAIN_SHARE for c in store]  # one transfer's full time at the device's peak
            _add_priced(
                next(d for d in deltas if d.phase == "phase1"),
                [moved * per[1] * share for share in PARTIAL_DRAM_SHARE],
                f"split-K's fp32 partials: {moved:+,.0f} transfers of {STORE_BYTES:.0f} bytes a tile (each unit "
                f"writes one, the last reads the others'), {PARTIAL_DRAM_SHARE[1]:.2f} x the "
                f"{per[1]:.1f} cycles each takes of the DRAM's peak; time at the DRAM's pace, which the SM "
                "clock does not change",
                dram=True,
            )
        w = TRIP_SHARE * tile_cycles
        kd = next(d for d in deltas if d.phase == "kloop")
        kd.lo, kd.hi = kd.lo - w, kd.hi + w
        kd.unpriced.append(f"split-K: how a CTA's work units overlap is not priced; interval ±{w:,.0f} cycles")
    if "multicast" in mechanisms and operand_bytes and min(operand_bytes) > 0:
        _price_multicast(deltas, kinds, kl, operand_bytes, cluster_ctas, tile_cycles)
    for loops in (sorted(set(b.unknown_loops) - set(a.unknown_loops)),):
        if loops:
            notes.append("loops with a trip count SASS does not give, counted once a tile: " + ", ".join(loops))
    if a.roles != "line info" or b.roles != "line info":
        notes.append("no line info on one side: the phases outside the K-loop come from the loops alone")
    return ChangeEstimate(
        a.name,
        b.name,
        k_blocks,
        deltas,
        costs,
        {"a": a, "b": b},
        notes,
        [k for k in KINDS if k in kinds] or ["instructions"],
    )


def _price_multicast(
    deltas: list,
    kinds: set[str],
    kl: PhaseCost,
    operand_bytes: tuple[float, float],
    cluster_ctas: tuple[int, int] | None,
    tile_cycles: float | None,
) -> None:
    """A cluster change's K-loop price: the relative change in the operand bytes a CTA loads from L2 a K
    block x ``MULTICAST_KLOOP_PER_TRAFFIC`` x the K-loop's measured cycles; a cluster growing past two CTAs
    (or shrinking from more) adds (or sheds) their lockstep, ``CLUSTER_LOCKSTEP_SHARE`` of the tile."""
    kinds.add("multicast")
    rel = operand_bytes[1] / operand_bytes[0] - 1.0
    kd = next(d for d in deltas if d.phase == "kloop")
    if abs(rel) > 1e-9:
        _add_priced(
            kd,
            [share * rel * kl.measured_cycles for share in MULTICAST_KLOOP_PER_TRAFFIC],
            f"operand bytes a CTA loads a K block {operand_bytes[0] / 1024:,.0f} -> {operand_bytes[1] / 1024:,.0f} KiB "
            f"(the cluster's multicast) x {MULTICAST_KLOOP_PER_TRAFFIC[1]:.2f} of the K-loop per unit",
        )
    if cluster_ctas and max(cluster_ctas) > 2 and cluster_ctas[0] != cluster_ctas[1] and tile_cycles:
        sign = 1.0 if cluster_ctas[1] > cluster_ctas[0] else -1.0
        _add_priced(
            kd,
            [sign * share * tile_cycles for share in CLUSTER_LOCKSTEP_SHARE],
            f"a cluster of {max(cluster_ctas)} CTAs releases each stage on every CTA that wrote into it, in "
            f"lockstep ({CLUSTER_LOCKSTEP_SHARE[1]:.2f} of the tile, the kernel's 2x2 against 1x2)",
        )


# --- the projection ---------------------------------------------------------------------------


@dataclass
class BaseMeasurement:
    """What the base build's capture measured, the projection's only measured input besides SASS."""

    tile_cycles: float  # the model's baseline tile period (calibrated)
    busy: float  # share of the wall time that scales with the period
    phases: dict[str, float]  # measured cycles per tile: tma0, kloop, phase1, producer
    mhz: float | None = None  # the base build's sustained SM clock, power
    watts: float | None = None
    limits: dict | None = None  # device limits (model.clock.DeviceLimits as JSON)
    device: str = ""
    first_load: float | None = None  # cycles from the first load issued to the first stage full
    tie_wait: dict[str, float] = field(default_factory=dict)  # tie_wait_cycles of the capture, by phase


@dataclass
class ChangeProjection:
    estimate: ChangeEstimate
    tile_cycles: float
    binding_before: str
    binding_after: str
    cycles_ratio: float  # the equilibrium's period ratio x busy share (+ tail)
    clock_ratio: float
    wall_ratio: float  # projected wall time after / before
    wall_lo: float  # the projection's interval (SASS bounds, unpriced widths)
    wall_hi: float
    noise_pp: float  # the measurement's own half-width added for coverage
    count_rule_ratio: float  # the instruction-count rule
    no_change_ratio: float = 1.0
    sentence: str = ""
    # the checked interval's half-width, pp of wall time: how far held-out prices of the kinds this change
    # touches missed their timings (change_record.checked_halfwidth); None without a record
    checked_pp: float | None = None

    @property
    def wall_pct(self) -> float:
        return 100.0 * (self.wall_ratio - 1.0)

    def covers(self, measured_ratio: float) -> bool:
        lo = 100.0 * (self.wall_lo - 1.0) - self.noise_pp
        hi = 100.0 * (self.wall_hi - 1.0) + self.noise_pp
        return lo <= 100.0 * (measured_ratio - 1.0) <= hi

    def to_json(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "estimate"}
        d["wall_pct"] = self.wall_pct
        d["count_rule_pct"] = 100.0 * (self.count_rule_ratio - 1.0)
        d["interval_pct"] = [100.0 * (self.wall_lo - 1.0), 100.0 * (self.wall_hi - 1.0)]
        if self.checked_pp is not None:
            d["checked_interval_pct"] = [self.wall_pct - self.checked_pp, self.wall_pct + self.checked_pp]
        d["chain"] = self.estimate.to_json()
        return d


def measured_phases(params) -> dict[str, float]:
    """The capture's cycles per tile per phase, as the calibrated model holds them."""
    e = params.epi
    warps = max(1, e.warps)
    return {
        "tma0": float(params.mma.tma0),
        "kloop": float(params.mma.kloop),
        "phase1": float(sum(e.phase1[:warps]) / warps),
        "phase2": float(sum(e.phase2[:warps]) / warps),
    }


def project_change(
    params, est: ChangeEstimate, base: BaseMeasurement, *, noise_pp: float = NOISE_PP, quantiles: dict | None = None
) -> ChangeProjection:
    """The estimate's cycle deltas through the calibrated equilibrium (deterministic), the busy
    share and the clock term; the interval from the low and high deltas; the checked interval from
    ``quantiles`` (``change_record.checked_quantiles``; default: the shipped record's); the count rule beside."""
    from bsprof.analyzers.model.change_record import checked_halfwidth
    from bsprof.analyzers.model.clock import limits_for, project_clock
    from bsprof.analyzers.model.project import project

    lim = limits_for(base.device, base.limits)

    def cycles(deltas: dict) -> tuple[float, object]:
        deltas = {k: v for k, v in deltas.items() if abs(v) > 1e-9}
        pj = project(params, _clamped(params, deltas), stochastic=False)
        return 1.0 + base.busy * (pj.wall_ratio - 1.0), pj

    def wall(which: str) -> tuple[float, float, float, object]:
        cyc, pj = cycles(est.cycle_deltas(which))
        clk = project_clock(cyc, base.mhz, base.watts, lim).ratio
        # what runs at the DRAM's pace keeps its time when the SM clock moves: the cycles the change adds
        # beyond those of the same change without it
        sm = est.cycle_deltas(which, dram=False)
        cyc_sm = cycles(sm)[0] if sm != est.cycle_deltas(which) else cyc
        return cyc_sm / clk + (cyc - cyc_sm), cyc, clk, pj

    w, cyc, clk, pj = wall("point")
    lo = wall("lo")[0]
    hi = wall("hi")[0]
    rule = sum(d.count_rule for d in est.deltas if d.phase != "prologue")
    j = pj.to_json()["deterministic"]
    return ChangeProjection(
        est,
        base.tile_cycles,
        j["binding_before"],
        j["binding_after"],
        cyc,
        clk,
        w,
        min(lo, hi, w),
        max(lo, hi, w),
        noise_pp,
        count_rule_ratio=1.0 + rule / base.tile_cycles,
        sentence=pj.sentence,
        checked_pp=checked_halfwidth(
            list(est.kinds), 100.0 * (w - 1.0), quantiles if quantiles is not None else _shipped_quantiles()
        ),
    )


def _shipped_quantiles() -> dict | None:
    from bsprof.analyzers.model.change_record import shipped_record

    return (shipped_record() or {}).get("checked")


def _clamped(params, deltas: dict) -> dict:
    """A phase cannot shrink below nothing: a low bound past the phase's own cycles is cut there."""
    have = measured_phases(params)
    # an epilogue delta applies to every warp's own Phase 1/2: the warp with the fewest cycles sets the cut
    warps = max(1, params.epi.warps)
    have["phase1"] = float(min(params.epi.phase1[:warps]))
    have["phase2"] = float(min(params.epi.phase2[:warps]))
    out = {}
    for k, v in deltas.items():
        base = have.get(k)
        out[k] = max(v, -0.95 * base) if base is not None and base > 0 else (0.0 if base is not None else v)
    return {k: v for k, v in out.items() if v}


# --- scoring measured pairs -------------------------------------------------------------------


@dataclass
class ChangePoint:
    """One (change, problem) of a validation: projection written before, measurement after."""

    change: str
    problem: str
    projected_pct: float
    lo_pct: float
    hi_pct: float
    noise_pp: float
    count_rule_pct: float
    binding: str
    off_binding: bool  # the change is mostly off the consumers' cycle
    unpriced: int
    measured_pct: float = math.nan
    ci_pct: float = math.nan  # the measurement's 95% half-width
    err_model_pp: float = math.nan
    err_none_pp: float = math.nan
    err_rule_pp: float = math.nan
    covered: bool = False
    sign_ok: bool = True
    # the wall time is cycles over the clock: each side of the projection against the run's own
    # reading of it (NVML's sustained clock of each build), so a miss says which side it is in
    cycles_pct: float = math.nan  # projected change of the cycles
    clock_ratio: float = math.nan  # projected clock after / before
    measured_clock_ratio: float = math.nan
    measured_cycles_pct: float = math.nan
    checked_pp: float = math.nan  # the checked interval's half-width as committed (NaN: none was)
    covered_checked: bool | None = None
    first_repeat_pp: float = math.nan  # repeat 0's paired change minus the median of the others'


def sustained_mhz(reads: list[dict] | None) -> float:
    """The median over a build's timed blocks of their NVML SM clock (NaN where none was read)."""
    import statistics

    from bsprof.analyzers.model.sustained import block_mhz

    vals = [m for r in reads or [] if isinstance(r, dict) and (m := block_mhz(r))]
    return statistics.median(vals) if vals else math.nan


def split_by_clock(p: ChangePoint, base_mhz: float, changed_mhz: float) -> ChangePoint:
    """The measured change split into cycles and clock (in place): cycles = wall x clock."""
    if math.isfinite(p.measured_pct) and base_mhz > 0 and changed_mhz > 0:
        p.measured_clock_ratio = changed_mhz / base_mhz
        p.measured_cycles_pct = 100.0 * ((1.0 + p.measured_pct / 100.0) * p.measured_clock_ratio - 1.0)
    return p


def score_point(p: ChangePoint, base_reps: list[float], meas_reps: list[float]) -> ChangePoint:
    """Fill the measured change (mean of the paired per-repeat ratios, 95% t-interval) and the
    three errors in percentage points of wall time (in place)."""
    from bsprof.analyzers.model.validation import ratio_stats

    m, lo, hi = ratio_stats(base_reps, meas_reps)
    p.measured_pct = 100.0 * (m - 1.0)
    p.ci_pct = 100.0 * (hi - lo) / 2.0 if math.isfinite(hi) else math.nan
    p.err_model_pp = p.projected_pct - p.measured_pct
    p.err_none_pp = -p.measured_pct
    p.err_rule_pp = p.count_rule_pct - p.measured_pct
    p.covered = (p.lo_pct - p.noise_pp) <= p.measured_pct <= (p.hi_pct + p.noise_pp)
    if math.isfinite(p.checked_pp):
        p.covered_checked = abs(p.err_model_pp) <= p.checked_pp
    p.sign_ok = abs(p.measured_pct) <= 1.0 or (p.projected_pct > 0) == (p.measured_pct > 0)
    if len(base_reps) == len(meas_reps) >= 3:
        import statistics

        paired = [100.0 * (m / b - 1.0) for b, m in zip(base_reps, meas_reps)]
        p.first_repeat_pp = paired[0] - statistics.median(paired[1:])
    return p


def summarize(points: list[ChangePoint]) -> dict:
    """The validation's figures: errors of the model and of both baselines over the same points,
    and the targets (median <= 1.0 pp, max <= 3.0 pp, sign right past 1%, coverage >= 80%,
    beats the count rule off the binding side and no worse elsewhere)."""
    import statistics

    pts = [p for p in points if math.isfinite(p.measured_pct)]
    if not pts:
        return {"points": 0}

    def stats(key, sel=None):
        errs = [abs(getattr(p, key)) for p in (pts if sel is None else sel)]
        return {"median": statistics.median(errs), "max": max(errs), "mean": statistics.fmean(errs)} if errs else None

    off = [p for p in pts if p.off_binding]
    on = [p for p in pts if not p.off_binding]
    big = sum(1 for p in pts if abs(p.measured_pct) >= 2.0)
    out = {
        "points": len(pts),
        "measured_ge_2pct": big,
        "model": stats("err_model_pp"),
        "no_change": stats("err_none_pp"),
        "count_rule": stats("err_rule_pp"),
        "model_off_binding": stats("err_model_pp", off),
        "count_rule_off_binding": stats("err_rule_pp", off),
        "model_on_binding": stats("err_model_pp", on),
        "count_rule_on_binding": stats("err_rule_pp", on),
        # where SASS priced the whole change (no unpriced line) and where it named what it could not
        "priced_points": sum(1 for p in pts if not p.unpriced),
        "model_priced": stats("err_model_pp", [p for p in pts if not p.unpriced]),
        "model_unpriced": stats("err_model_pp", [p for p in pts if p.unpriced]),
        "sign_wrong": [f"{p.change} @ {p.problem}" for p in pts if not p.sign_ok],
        "covered": sum(p.covered for p in pts),
        "coverage": sum(p.covered for p in pts) / len(pts),
    }
    checked = [p for p in pts if p.covered_checked is not None]
    if checked:
        out["checked_points"] = len(checked)
        out["checked_covered"] = sum(bool(p.covered_checked) for p in checked)
        out["checked_median_half_pp"] = statistics.median(p.checked_pp for p in checked)
    # where the model's error lies: ln(wall) = ln(cycles) - ln(clock), each side against the run's reading
    split = [p for p in pts if math.isfinite(p.measured_clock_ratio) and math.isfinite(p.cycles_pct)]
    if split:
        cyc = [100.0 * math.log((1 + p.cycles_pct / 100) / (1 + p.measured_cycles_pct / 100)) for p in split]
        clk = [100.0 * math.log(p.measured_clock_ratio / p.clock_ratio) for p in split]
        past = [i for i, p in enumerate(split) if abs(p.err_model_pp) > 3.0]
        out["error_split"] = {
            "points": len(split),
            "cycles_median_pp": statistics.median(abs(v) for v in cyc),
            "clock_median_pp": statistics.median(abs(v) for v in clk),
            "past_3pp": len(past),
            "past_3pp_in_cycles": sum(abs(cyc[i]) >= abs(clk[i]) for i in past),
        }
    # a first repeat that measured the run's changes apart from the others moves every mean with it
    first = [p.first_repeat_pp for p in pts if math.isfinite(p.first_repeat_pp)]
    if first:
        med = statistics.median(first)
        out["first_repeat"] = {"points": len(first), "median_pp": med, "off": abs(med) > FIRST_REPEAT_OFF_PP}
    m = out["model"]
    beats_off = (not off) or out["model_off_binding"]["median"] < out["count_rule_off_binding"]["median"]
    no_worse_on = (not on) or out["model_on_binding"]["median"] <= out["count_rule_on_binding"]["median"] + 0.1
    out["targets"] = {
        "half_measured_ge_2pct": big * 2 >= len(pts),
        "points_ge_30": len(pts) >= 30,
        "median_le_1pp": m["median"] <= 1.0,
        "max_le_3pp": m["max"] <= 3.0,
        "sign_right_past_1pct": not out["sign_wrong"],
        "coverage_ge_80pct": out["coverage"] >= 0.8,
        **({"checked_coverage_ge_80pct": out["checked_covered"] >= 0.8 * len(checked)} if checked else {}),
        "beats_count_rule_off_binding": beats_off,
        "no_worse_on_binding": no_worse_on,
    }
    out["meets"] = all(out["targets"].values())
    return out


def store_cycles(bm: BaseMeasurement) -> tuple[float, float, float]:
    """What a warp's global store costs the base build (low, point, high cycles): STORE_DRAIN_SHARE of the
    time STORE_BYTES take of its device's DRAM bandwidth per SM at its sustained clock; STORE_WAITED where
    either is unknown."""
    from bsprof.analyzers.ncu.peaks import dram_bandwidth

    dev = dram_bandwidth(bm.device)
    if not (dev and bm.mhz and bm.mhz > 0):
        return STORE_WAITED
    bw, sms = dev
    point = STORE_DRAIN_SHARE * STORE_BYTES * sms * bm.mhz * 1e6 / bw
    return (point * STORE_SPREAD[0], point * STORE_SPREAD[1], point * STORE_SPREAD[2])


def base_measurement(
    params,
    table,
    wall_us: float,
    sustained: dict | None,
    limits: dict | None,
    device: str = "",
    producer: float | None = None,
) -> BaseMeasurement:
    """The base build's measured inputs: the calibrated tile, the capture's busy share and phase
    cycles, its sustained clock and power (``sustained``: {"mhz", "watts"}) and the device limits."""
    from bsprof.analyzers.model.project import project
    from bsprof.analyzers.model.validation import busy_fraction

    tile = project(params, {}, stochastic=False).det_before.period
    busy = busy_fraction(table, tile, wall_us) if wall_us and math.isfinite(wall_us) else 1.0
    phases = measured_phases(params)
    if producer is None and table is not None:
        sel = table[(table["role"] == "producer") & (table["phase"] == "load")]
        producer = float((sel["end"] - sel["start"]).mean()) if len(sel) else 0.0
    phases["producer"] = float(producer or 0.0)
    s = sustained or {}
    return BaseMeasurement(
        tile,
        busy,
        phases,
        s.get("mhz"),
        s.get("watts"),
        limits,
        device,
        first_load=first_load_cycles(table),
        tie_wait=tie_wait_cycles(table),
    )


def off_binding(est: ChangeEstimate) -> bool:
    """Whether the change falls mostly off the binding side: more of its instructions (priced by the
    count rule) sit where issue is not what binds (the producer; the K-loop, bound by the tensor
    cores) than in the serial tile start and epilogue."""
    off = sum(abs(d.count_rule) for d in est.deltas if d.phase in ("producer", "kloop"))
    on = sum(abs(d.count_rule) for d in est.deltas if d.phase in ("tma0", "phase1"))
    return off > on


def point_record(change: str, problem: str, pr: ChangeProjection) -> dict:
    """One projection as committed before its measurement (the chain kept compact)."""
    est = pr.estimate
    return {
        "change": change,
        "problem": problem,
        "projected_pct": pr.wall_pct,
        "lo_pct": 100.0 * (pr.wall_lo - 1.0),
        "hi_pct": 100.0 * (pr.wall_hi - 1.0),
        "noise_pp": pr.noise_pp,
        **({"checked_pp": pr.checked_pp} if pr.checked_pp is not None else {}),
        "count_rule_pct": 100.0 * (pr.count_rule_ratio - 1.0),
        "cycles_pct": 100.0 * (pr.cycles_ratio - 1.0),
        "clock_ratio": pr.clock_ratio,
        "binding": pr.binding_before,
        "off_binding": off_binding(est),
        "unpriced": est.unpriced(),
        "kinds": list(est.kinds),
        "tile_cycles": pr.tile_cycles,
        "phases": [
            {
                "phase": d.phase,
                "instructions": round(d.instructions, 1),
                "cycles": round(d.cycles, 1),
                "lo": round(d.lo, 1),
                "hi": round(d.hi, 1),
                "count_rule": round(d.count_rule, 1),
                "source": d.source,
            }
            for d in est.deltas
            if d.instructions or d.unpriced
        ],
    }


def points_from_records(records: list[dict]) -> list[ChangePoint]:
    return [
        ChangePoint(
            r["change"],
            r["problem"],
            r["projected_pct"],
            r["lo_pct"],
            r["hi_pct"],
            r["noise_pp"],
            r["count_rule_pct"],
            r.get("binding", ""),
            bool(r.get("off_binding")),
            len(r.get("unpriced", [])),
            cycles_pct=float(r.get("cycles_pct", math.nan)),
            clock_ratio=float(r.get("clock_ratio", math.nan)),
            checked_pp=float(r.get("checked_pp", math.nan)),
        )
        for r in records
    ]


# --- a pair with no capture of its own: the K-loop alone ----------------------------------------


@dataclass
class KloopOnly:
    """A pair priced without a timing capture of its kernel: the K-loop's change per K block, with
    the bounds that need no measurement (0 to the issue slot) and a point at a borrowed exposed
    share; every other phase named as not priced."""

    a: str
    b: str
    per_kblock_a: float  # non-MMA K-loop instructions per K block
    per_kblock_b: float
    mma_per_kblock: tuple[float, float]
    cycles_per_kblock: float  # point
    lo: float
    hi: float
    borrowed_rate: float
    floor_kblock: float
    k_blocks: int | None
    unpriced: list[str]
    top_opcodes: list[tuple[str, float]]
    priced: list[str] = field(default_factory=list)  # mechanisms priced beside the instructions, a line each

    def to_json(self) -> dict:
        return asdict(self)


def kloop_only(
    a: BuildCounts,
    b: BuildCounts,
    *,
    consumer_warps: int,
    borrowed_rate: float,
    floor_kblock: float,
    k_blocks: int | None = None,
    capture_hint: str = "",
    stages: tuple[int, int] | None = None,
    mechanisms: tuple[str, ...] = (),
) -> KloopOnly:
    """The K-loop of a pair whose kernel has no capture: instructions per K block from the SASS,
    priced at ``borrowed_rate`` cycles each (the exposed share measured on another kernel's
    capture; the bounds 0 and the issue slot do not depend on it)."""
    issue = max(1.0, consumer_warps / SUBPARTITIONS)
    dn = b.kloop_per_kblock - a.kloop_per_kblock
    lo, hi = sorted((0.0, dn * issue))
    point = dn * borrowed_rate
    priced: list[str] = []
    # a removed barrier probe needs no capture: its price is per K block and by warpgroups, as with one
    probe = probe_cycles(a, b, consumer_warps)
    if probe is not None:
        per = max(1, k_blocks or 1)
        dp, ends = probe[0] / per, [c / per for c in probe[1]]
        point, lo, hi = point + ends[1], lo + min(ends), hi + max(ends)
        priced.append(
            f"{dp:+,.1f} barrier probes a K block: {ends[1]:+,.0f} cycles a K block "
            f"({min(ends):+,.0f}..{max(ends):+,.0f}) with {consumer_warps // 4} consumer warpgroups"
        )
    unpriced = [
        "TMA0, Phase 1 and wall time: no timing capture of the base build; "
        + (capture_hint or "bsprof timing records only the bundled kernels")
    ]
    if stages is not None and stages[0] != stages[1]:
        unpriced.append(f"the stage count changes the pipeline ({stages[0]} -> {stages[1]} stages): not in the SASS")
    if "tile_order" in mechanisms:
        unpriced.append("the tile order changes what hits L2: not in the SASS")
    if abs(b.mma_per_kblock - a.mma_per_kblock) > 1e-6 or abs(b.kblocks_per_pass - a.kblocks_per_pass) > 1e-6:
        unpriced.append(
            f"the K-loop body covers {a.kblocks_per_pass:g} -> {b.kblocks_per_pass:g} K blocks a pass: "
            "compared per K block"
        )
    dw = (b.waits["kloop"] - a.waits["kloop"]) / max(1, k_blocks or 1)
    if abs(dw) >= 0.5:
        w = MOVED_WAIT_SHARE * floor_kblock * abs(dw)
        lo, hi = lo - w, hi + w
        unpriced.append(f"K-loop: {dw:+.1f} waits a K block (a wait moved): latency not in the SASS; ±{w:,.0f}")
    if b.spills > a.spills:
        # as with a capture: each local load/store a consumer warp executes at the store path's slow end
        local = op_delta(a, b, ("kloop",), SPILL_OPS) / max(1, k_blocks or 1)
        w = max(0.0, local) * consumer_warps * STORE_CYCLES[2]
        hi += w
        unpriced.append(
            f"spills appear ({a.spills} -> {b.spills} local loads/stores, {local:+,.1f} a K block a warp): "
            f"not priced; interval up to +{w:,.0f}"
        )
    return KloopOnly(
        a.name,
        b.name,
        a.kloop_per_kblock,
        b.kloop_per_kblock,
        (a.mma_per_kblock, b.mma_per_kblock),
        point,
        lo,
        hi,
        borrowed_rate,
        floor_kblock,
        k_blocks,
        unpriced,
        [(op, round(v / max(1, k_blocks or 1), 2)) for op, v in _top_ops(a, b, "kloop", 5)],
        priced,
    )


def score_run(projections: dict, measured: dict) -> dict:
    """Projections written before a run (``project_pairs``) scored against its wall times
    (``measure_pairs``: per problem, each build's per-repeat µs): {"points", "summary"}."""
    pts = points_from_records(projections["points"])
    for p in pts:
        prob = measured.get("problems", {}).get(p.problem) or {}
        walls = prob.get("walls_us") or {}
        if p.change in walls and "base" in walls and len(walls["base"]) == len(walls[p.change]):
            score_point(p, walls["base"], walls[p.change])
            reads = prob.get("reads") or {}
            split_by_clock(p, sustained_mhz(reads.get("base")), sustained_mhz(reads.get(p.change)))
    return {"device": measured.get("device"), "points": [asdict(p) for p in pts], "summary": summarize(pts)}


def stored_measured(d: str | Path) -> tuple[dict, Path]:
    """A stored run's wall times (measured.json, or measured.tar.xz as the GPU call returned it, read within
    the JSON size limit) and the path they came from; one error line where the directory holds neither."""
    import os
    import tarfile

    from bsprof.artifacts import max_json_bytes, parse_json, read_json
    from bsprof.io import open_input, too_large

    d = Path(d)
    measured, where = None, d / "measured.json"
    if os.path.lexists(where):
        measured = read_json(where)
    elif os.path.lexists(d / "measured.tar.xz"):
        where = d / "measured.tar.xz"
        cap = max_json_bytes()
        try:
            with open_input(where) as fh, tarfile.open(fileobj=fh, mode="r:xz") as tf:
                member = next((m for m in tf.getmembers() if m.isfile() and m.name.endswith("measured.json")), None)
                if member is not None:
                    if member.size > cap:
                        raise too_large(f"{where}:{member.name}", member.size, cap, "BSPROF_MAX_JSON_BYTES")
                    measured = parse_json(tf.extractfile(member).read(cap + 1), f"{where}:{member.name}")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BsprofError(f"{where}: not a readable tar.xz ({type(exc).__name__}); copy the run again") from None
    if measured is None:
        raise BsprofError(f"{d}: no measured.json (or measured.tar.xz holding one); the run's wall times are missing")
    return measured, where


def rescore_stored_run(source: str) -> dict:
    """A stored `--validate --changes` run scored again (:func:`score_run`): its directory holds
    projections.json and measured.json, or measured.tar.xz as the GPU call returned it (read within the
    JSON size limit). A directory that holds no run's records is one error line naming what is missing."""
    import os

    from bsprof.artifacts import read_json

    d = Path(source)
    proj_path = d / "projections.json"
    if not os.path.lexists(proj_path):
        raise BsprofError(
            f"{d}: no projections.json; --validate --changes --from takes a stored run's directory "
            "(projections.json with measured.json or measured.tar.xz)"
        )
    proj = read_json(proj_path)
    measured, where = stored_measured(d)
    for path, doc, key in ((proj_path, proj, "points"), (where, measured, "problems")):
        if not isinstance(doc, dict) or not isinstance(doc.get(key), (list if key == "points" else dict)):
            raise BsprofError(
                f"{path}: not what `bsprof model --validate --changes` writes (no {key!r}); copy the run again"
            )
    try:
        scored = score_run(proj, measured)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # the files' inner records are read field by field: one that is not a run's record is named here
        raise BsprofError(
            f"{d}: projections.json and measured.json do not hold a run's records "
            f"({type(exc).__name__}: {str(exc)[:120]}); copy the run again"
        ) from None
    return scored
