"""The kernel's configuration: the switches of :mod:`.config`, grouped by what they change, with the
geometry they imply. ``kernel.Fp8BlockwiseGemm`` takes one; ``launch.py`` builds it from the
resolved switches."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from bsprof.kernels.fp8_blockwise.config import (
    SFB_SMEM_KB,
    can_implement,
    consumer_wgs,
    epi_stages,
    max_smem_stages,
    shifted_start,
    two_scale_blocks,
    wave_rows,
)

# The warps (start, end) of each role's WarpScope: warpgroup 0 produces, the rest consume. Every
# module that holds a role's code opens the role's scope itself, because line info names only the
# innermost source line: `bsprof sass --by roles` finds a scope only in the file of the code.
PRODUCER_WARPS = (0, 4)
CONSUMER_WARPS = (4, 12)


@dataclass(frozen=True)
class TileConfig:
    """The CTA tile and its cluster.

    ``tile_m``: 64 (one consumer warpgroup, the whole tile one 64-row wave), 128 or 256 (one or two
    128-row waves of two consumer warpgroups) or 192 (one wave of three). ``tile_n``: a multiple of
    16 up to 256 whose tiles touch at most two 128-wide B-scale blocks. ``cluster_m`` x
    ``cluster_n``: 2x1 multicasts B, 1x2 multicasts A, 2x2 both; ``launch_cluster`` launches a 1x1
    configuration with the cluster attribute (a plain grid otherwise). ``a_rows``: rows of A one TMA
    box brings when the problem has fewer rows than a one-box tile (0: the whole wave; the
    launcher's ``trim_a``). ``shift_last_m``: a shape-specialized build's last M tile, were it to
    run past M, computes rows M - tile_m .. M - 1 instead (:func:`shifted_start`)."""

    tile_m: int = 128
    tile_n: int = 128
    cluster_m: int = 1
    cluster_n: int = 1
    launch_cluster: bool = False
    a_rows: int = 0
    shift_last_m: bool = False


@dataclass(frozen=True)
class PipelineConfig:
    """The shared-memory ring between the producer and the consumers.

    ``ab_stage``: ring depth (0: as many stages as shared memory holds). ``uniform_desc``: partition
    the smem operands for a warp-uniform thread index (wgmma descriptors in uniform registers).
    ``elect_release``: one elected lane per warp releases a stage on every CTA of the cluster.
    ``peek``: test the next stage's full barrier right after releasing this one, before the
    promotion. ``ring_unroll``: unroll the K-loop by the ring depth where a tile's K blocks are a
    multiple of it (static shapes: every stage index a constant). ``consumer_regs`` /
    ``producer_regs``: the setmaxnreg split."""

    ab_stage: int = 0
    uniform_desc: bool = False
    elect_release: bool = False
    peek: bool = False
    ring_unroll: bool = False
    consumer_regs: int = 232
    producer_regs: int = 40


@dataclass(frozen=True)
class ScaleConfig:
    """Where the block scales come from and how a K block's product is applied.

    ``promote``: "serial" (wgmma into a fresh block accumulator, wait, then
    ``total += blk * sfa * sfb``) or "rescale" (no block accumulator: the totals, kept divided by
    the current block's scale product, are multiplied by s_(k-1)/s_k before block k accumulates
    into them). ``sfa_tma``: a stage's A scales arrive by TMA with it (shape-specialized builds).
    ``sfb_tma``: its B scale too (a 16-byte box of 4 K blocks). ``sfb_smem``: stage the tile's B
    scales in smem once per tile, ``sfb_kb`` K blocks of them."""

    promote: str = "serial"
    sfa_tma: bool = False
    sfb_tma: bool = False
    sfb_smem: bool = False
    sfb_kb: int = SFB_SMEM_KB


@dataclass(frozen=True)
class EpilogueConfig:
    """How a tile's bf16 output reaches global memory.

    ``epilogue``: "direct" (registers to global memory) or "tma" (a ring of 3-4 smem sub-tiles,
    stored by TMA). ``epi_split`` (coop, tma): each consumer warpgroup stores its own 64 rows of a
    wave (its own smem ring, store warp and named barrier)."""

    epilogue: str = "direct"
    epi_split: bool = False


@dataclass(frozen=True)
class ScheduleConfig:
    """Who computes which tile.

    ``schedule``: "coop" (the consumer warpgroups share every tile) or "pingpong" (each owns whole
    128-row tiles; they take turns on the tensor cores and one's epilogue runs under the other's
    K-loop). ``swizzle``: the persistent tile order's group of N tiles (bsprof.kernels.tile_order).
    ``split_k``: work units per output tile, each over its own range of K blocks (serial split-K)."""

    schedule: str = "coop"
    swizzle: int = 1
    split_k: int = 1


@dataclass(frozen=True)
class ProbeConfig:
    """Instrumentation compiled in: ``timing`` (the event recorder, bsprof.kernels.timing_recorder,
    sampling every ``sample_every``-th tile) and clock64 spins of ``delay_kloop`` cycles per K block
    and ``delay_phase1`` cycles in epilogue phase 1 (0: no code)."""

    timing: bool = False
    delay_kloop: int = 0
    delay_phase1: int = 0
    sample_every: int = 1


GROUPS = (
    ("tile", TileConfig),
    ("pipeline", PipelineConfig),
    ("scales", ScaleConfig),
    ("epi", EpilogueConfig),
    ("schedule", ScheduleConfig),
    ("probe", ProbeConfig),
)


@dataclass(frozen=True)
class GemmConfig:
    """Every switch of one build of the kernel, grouped, and the geometry it implies.

    Constraints (:meth:`can_implement` says which one a configuration breaks, in one line):

    - ``tile_m`` is 64, 128, 192 or 256; 192 takes the coop schedule and the serial promotion
    - ``tile_n`` is a multiple of 16 up to 256 whose tiles touch at most two 128-wide B-scale
      blocks, and no wider than the accumulators' registers allow (``MAX_TILE_N``)
    - the cluster is 1x1, 2x1, 1x2 or 2x2
    - ping-pong takes tile_m 128, tile_n <= 128, the serial promotion, cluster 1x1, no B-scale stash
    - the rescale takes tile widths that divide 128, or 256
    - split-K (1 .. ``MAX_SPLIT_K``) takes the coop schedule and the serial promotion
    - ``sfa_tma`` takes the coop schedule; ``sfb_tma`` takes ``sfa_tma``, a width dividing 128 and
      no split-K; ``peek`` the serial promotion; ``epi_split`` the coop schedule, the TMA
      epilogue, two or more consumer warpgroups and no split-K
    - ``a_rows`` trims the A box only of a tile loaded in one box a stage (64 rows, or 128 in the
      coop schedule) without A multicast, to a multiple of 8 below the wave's rows
    - ``epi_split`` and ``swizzle`` are resolved per problem by the launcher first (no "auto", no 0)
    """

    tile: TileConfig = field(default_factory=TileConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    scales: ScaleConfig = field(default_factory=ScaleConfig)
    epi: EpilogueConfig = field(default_factory=EpilogueConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)

    @classmethod
    def from_switches(cls, **switches) -> "GemmConfig":
        """The configuration of these switches (the flat names :func:`resolve` returns);
        raises ValueError naming the combination that cannot be built."""
        groups: dict[str, dict] = {name: {} for name, _ in GROUPS}
        owner = {f.name: name for name, kind in GROUPS for f in fields(kind)}
        for key, val in switches.items():
            if key not in owner:
                raise TypeError(f"unknown fp8-blockwise kernel switch {key!r}")
            groups[owner[key]][key] = val
        config = cls(**{name: kind(**groups[name]) for name, kind in GROUPS})
        why = config.can_implement()
        if why:
            raise ValueError(why)
        return config

    def switches(self) -> dict:
        """The flat switches (``from_switches(**c.switches()) == c``)."""
        return {f.name: getattr(getattr(self, name), f.name) for name, kind in GROUPS for f in fields(kind)}

    def can_implement(self) -> str | None:
        """Why this configuration cannot be built (one line naming the combination and what to
        change), or None. The Constraints above, checked in :func:`can_implement` and here."""
        if self.epi.epi_split == "auto" or int(self.schedule.swizzle) < 1:
            return (
                "epi_split='auto' and swizzle=0 are resolved per problem by the launcher; "
                "pass epi_split 0 or 1 and swizzle >= 1"
            )
        why = can_implement(self.switches())
        if why:
            return why
        rows = int(self.tile.a_rows)
        if (
            rows
            and rows != self.wave_m
            and (self.waves != 1 or self.tile.cluster_n != 1 or rows % 8 or not 8 <= rows < self.wave_m)
        ):
            return (
                f"a_rows={rows} needs a tile loaded in one box a stage (64 rows, or 128 in the coop schedule) "
                "without A multicast (cluster_n=1), and a multiple of 8 below its rows"
            )
        return None

    # --- the geometry the switches imply -------------------------------------------------------
    @property
    def pingpong(self) -> bool:
        return self.schedule.schedule == "pingpong"

    @property
    def consumer_wgs(self) -> int:
        """Consumer warpgroups of a CTA, 64 rows each per wave (ping-pong: two, one tile each)."""
        return consumer_wgs(self.tile.tile_m)

    @property
    def wave_m(self) -> int:
        """Rows one round of wgmma covers: 64 per warpgroup side by side (ping-pong: one's 64)."""
        return wave_rows(self.tile.tile_m, self.pingpong)

    @property
    def waves(self) -> int:
        """Waves of a tile through one block accumulator (DeepGEMM's WAVE_BLOCK_M)."""
        return self.tile.tile_m // self.wave_m

    @property
    def a_rows(self) -> int:
        """Rows of A (and its scales) one TMA box brings: the wave's, or ``tile.a_rows``."""
        return int(self.tile.a_rows) or self.wave_m

    @property
    def two_sfb(self) -> bool:
        """A tile may straddle two 128-wide B-scale blocks (it reads two B scales)."""
        return two_scale_blocks(self.tile.tile_n)

    @property
    def epi_per_wg(self) -> bool:
        """Each consumer warpgroup stores its own rows (own smem ring, store warp and barrier)."""
        return self.pingpong or bool(self.epi.epi_split)

    @property
    def epi_rows(self) -> int:
        return 64 if self.epi_per_wg else self.wave_m

    @property
    def epi_stage(self) -> int:
        return epi_stages(self.scales.sfa_tma)

    @property
    def consumer_regs(self) -> int:
        """Registers a consumer thread asks for: four warpgroups share 64K, so 152 with three
        consumers (a consumer's one wave of 64 totals and 64 block registers fits without spills)."""
        return min(self.pipeline.consumer_regs, 152) if self.consumer_wgs == 3 else self.pipeline.consumer_regs

    @property
    def launch_cluster(self) -> bool:
        """Launched with the cluster attribute: clusters of 2 or 4 always, 1x1 when asked."""
        return bool(self.tile.launch_cluster) or self.tile.cluster_m * self.tile.cluster_n > 1

    def max_stages(self) -> int:
        """The ring depth shared memory holds beside the epilogue buffers and the B-scale stash."""
        return max_smem_stages(
            self.tile.tile_m,
            self.tile.tile_n,
            wave_m=self.wave_m,
            epi_per_wg=self.epi_per_wg,
            sfa_tma=self.scales.sfa_tma,
            sfb_tma=self.scales.sfb_tma,
            sfb_smem=self.scales.sfb_smem,
            epilogue=self.epi.epilogue,
            sfb_kb=self.scales.sfb_kb,
        )

    def ab_stages(self) -> int:
        """The ring depth this build gets: ``ab_stage`` capped by the budget, or the budget."""
        most = self.max_stages()
        asked = self.pipeline.ab_stage
        return most if asked <= 0 else min(asked, most)

    def shift_rows(self, m_total) -> int:
        """Where the last M tile starts when it is shifted up to end at M (0: not shifted; see
        :func:`shifted_start`). ``m_total`` is an int only in a shape-specialized build."""
        if not (self.tile.shift_last_m and isinstance(m_total, int)):
            return 0
        return shifted_start(m_total, self.tile.tile_m, self.tile.cluster_m, self.schedule.schedule, self.epi.epilogue)
