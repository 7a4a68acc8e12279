"""Model inputs: one dataclass per pipeline side, plus the structure knobs that tie them together.

A *structure* is a set of (acc_stages, release point, hand-off) values over the same timed event
graph (see ``eventgraph``):

==================  ==========  =============================  ===================================
structure           acc_stages  accumulator frees at            who runs the epilogue
==================  ==========  =============================  ===================================
blackwell           1 or 2      ``release_frac`` of Phase 1     separate epilogue warps (TMEM acc)
hopper-coop         1           end of Phase 2                  the consumer warpgroups themselves
hopper-pingpong     2           end of Phase 2                  the other consumer warpgroup
==================  ==========  =============================  ===================================

A Hopper consumer warpgroup keeps its accumulator in registers: it cannot start the next K-loop
until its own epilogue has stored them, so "the accumulator is free" means "Phase 2 is done", and
ping-pong's two warpgroups are exactly two accumulator stages sharing one tensor core.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

STRUCTURES: tuple[str, ...] = ("blackwell", "hopper-coop", "hopper-pingpong")

# Phases a projection may move, and the flag names the CLI uses for them.
PHASE_KNOBS: tuple[str, ...] = ("tma0", "kloop", "phase1", "phase2")


@dataclass(frozen=True)
class Structure:
    name: str = "blackwell"
    acc_stages: int = 2
    release_frac: float = 1.0  # fraction of each warp's Phase 1 done when it releases the accumulator
    release_after_phase2: bool = False
    handoff: float = 100.0  # cycles from a barrier's last arrival to the waiter running (each barrier)
    phase2_blocking: float = 1.0  # Hopper: fraction of Phase 2 the next K-loop waits for (stores in flight overlap)

    @property
    def epilogue_tokens(self) -> int:
        """How many tiles' epilogues may run at once: Blackwell's epilogue warps take the tiles
        one after another (1); a ping-pong warpgroup runs its own tiles' epilogues, so the two
        warpgroups' epilogues overlap (acc_stages)."""
        return max(1, int(self.acc_stages)) if self.name == "hopper-pingpong" else 1

    @classmethod
    def named(cls, name: str, acc_stages: int | None = None, **kw: Any) -> "Structure":
        if name == "hopper-coop":
            base = cls(name, 1, 1.0, True, 0.0)
        elif name == "hopper-pingpong":
            base = cls(name, 2, 1.0, True, 0.0)
        elif name == "blackwell":
            base = cls(name)
        else:
            raise ValueError(name)
        if acc_stages is not None:
            base = replace(base, acc_stages=int(acc_stages))
        return replace(base, **{k: v for k, v in kw.items() if v is not None})

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "acc_stages": self.acc_stages,
            "release_frac": self.release_frac,
            "release_after_phase2": self.release_after_phase2,
            "handoff": self.handoff,
            "phase2_blocking": self.phase2_blocking,
        }


@dataclass(frozen=True)
class MmaSide:
    """Per-tile averages of the MMA (or Hopper consumer) warp, cycles."""

    tma0: float
    kloop: float
    overhead: float = 0.0  # per-tile MMA-loop time outside acc_wait/tma0/kloop (calibrated)


@dataclass(frozen=True)
class EpilogueSide:
    """Per-warp averages of the epilogue warps, cycles; ``overhead`` is the per-tile epilogue-loop
    latency outside Phase 1/2 (calibrated: the part of the measured ml_wait that is not idle)."""

    phase1: tuple[float, ...]
    phase2: tuple[float, ...]
    overhead: float = 0.0

    @property
    def warps(self) -> int:
        return len(self.phase1)


@dataclass
class Samples:
    """Per-tile draws the Monte Carlo resamples: whole tiles, so per-tile correlation between warps
    survives. ``phase1``/``phase2`` are (tiles, warps); ``tma0``/``kloop`` are (tiles,)."""

    tma0: Any
    kloop: Any
    phase1: Any
    phase2: Any


@dataclass
class Fitted:
    """A distribution fitted to avg and p95 (when no samples exist): per-warp lognormal marginals
    joined by a Gaussian copula with pairwise correlation ``corr`` (matched to the per-tile spread)."""

    phase1_mean: tuple[float, ...]
    phase1_p95: tuple[float, ...]
    corr: float
    phase2_cv: float = 0.0
    kloop_cv: float = 0.0
    tma0_cv: float = 0.0


@dataclass
class ModelParams:
    structure: Structure
    mma: MmaSide
    epi: EpilogueSide
    observed_tile: float | None = None  # measured tile period, cycles
    observed: dict = field(default_factory=dict)  # measured waits etc. (for the printout)
    wall_ms: float | None = None
    samples: Samples | None = None
    fitted: Fitted | None = None
    sto_epi_overhead: float | None = None  # epilogue overhead re-fitted so the Monte Carlo matches observed_tile
    sto_mma_overhead: float | None = None
    source: str = "embedded B200 default"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "structure": self.structure.to_json(),
            "tma0": self.mma.tma0,
            "kloop": self.mma.kloop,
            "mma_overhead": self.mma.overhead,
            "phase1_per_warp": list(self.epi.phase1),
            "phase2_per_warp": list(self.epi.phase2),
            "epi_overhead": self.epi.overhead,
            "epi_warps": self.epi.warps,
            "sto_epi_overhead": self.sto_epi_overhead,
            "sto_mma_overhead": self.sto_mma_overhead,
            "observed_tile": self.observed_tile,
            "observed": self.observed,
            "wall_ms": self.wall_ms,
            "distribution": "empirical" if self.samples is not None else "fitted",
            "notes": list(self.notes),
        }
