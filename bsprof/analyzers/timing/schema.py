"""The per-warp, per-tile timing table every bsprof component agrees on.

One row per (warp, tile, phase) interval, times in SM cycles (``clock64``):

=========  =======  ============================================================
column     type     meaning
=========  =======  ============================================================
sm         int      SM the CTA ran on (``%smid``)
cta        int      linear CTA index in the launch
warp       int      warp index inside the CTA
role       str      one of ROLES
tile       int      the CTA's n-th tile (0, 1, 2, ... in the persistent loop)
phase      str      one of PHASES[role]
start      int64    cycle the phase began
end        int64    cycle the phase ended (end >= start)
=========  =======  ============================================================

Optional columns: ``start_ns`` / ``end_ns`` (``%globaltimer``), ``kernel``, ``variant``.
A warp may appear under two roles (a Hopper consumer warpgroup runs the K-loop as ``mma`` and
then its epilogue as ``epilogue``).

Phases (the model's vocabulary):

- producer: ``load`` — issuing the TMA loads of a tile.
- mma: ``acc_wait`` — waiting for a free accumulator buffer (the model's ``epi_wait``);
  ``tma0`` — waiting for the tile's first TMA stage to land; ``kloop`` — the K-loop.
- epilogue: ``ml_wait`` — waiting for the mainloop-done barrier; ``phase1`` — accumulator →
  registers → staging (frees the accumulator); ``phase2`` — staging → global memory.
"""

from __future__ import annotations

ROLES: tuple[str, ...] = ("producer", "mma", "epilogue")

PHASES: dict[str, tuple[str, ...]] = {
    "producer": ("load",),
    "mma": ("acc_wait", "tma0", "kloop"),
    "epilogue": ("ml_wait", "phase1", "phase2"),
}

COLUMNS: tuple[str, ...] = ("sm", "cta", "warp", "role", "tile", "phase", "start", "end")
INT_COLUMNS: tuple[str, ...] = ("sm", "cta", "warp", "tile", "start", "end")

# The phases the model cannot do without; the rest are optional.
REQUIRED_PHASES: dict[str, tuple[str, ...]] = {
    "mma": ("kloop",),
    "epilogue": ("phase1",),
}

# ---------------------------------------------------------------------------------------------
# Device-side event buffer (what a kernel's timing build writes; decoded by bsprof.analyzers.
# timing.buffer). Fixed slots, never a ring: slot (cta, warp, sampled_tile, event) holds one
# 16-byte record written by lane 0 with a single vectorized store:
#   word 0: clock64
#   word 1: (smid << 56) | (globaltimer_ns & (2**56 - 1))
# An all-zero record means "not written". Events are phase *boundaries*; PHASE_EVENTS says which
# pair of events bounds each phase.
# ---------------------------------------------------------------------------------------------

EVENTS: tuple[str, ...] = (
    "tile_start",  # 0  role's tile loop iteration begins
    "acc_acquired",  # 1  mma: accumulator buffer free (after acc_wait)
    "tma0_landed",  # 2  mma: first A/B stage of the tile is full
    "kloop_end",  # 3  mma: last MMA of the tile issued/committed
    "ml_done",  # 4  epilogue: mainloop-done barrier passed
    "phase1_end",  # 5  epilogue: accumulator consumed (buffer released)
    "phase2_end",  # 6  epilogue: tile's output stored
    "load_end",  # 7  producer: last TMA load of the tile issued
)
EVENT_ID: dict[str, int] = {name: i for i, name in enumerate(EVENTS)}
NUM_EVENTS = len(EVENTS)

# phase -> (role, start event, end event). A warp that recorded ``kloop_end`` in a tile (a Hopper
# consumer running its own epilogue) gets no ``ml_wait`` row: its "wait for the mainloop" is the
# mainloop itself, which the mma rows already hold.
PHASE_EVENTS: dict[str, tuple[str, str, str]] = {
    "load": ("producer", "tile_start", "load_end"),
    "acc_wait": ("mma", "tile_start", "acc_acquired"),
    "tma0": ("mma", "acc_acquired", "tma0_landed"),
    "kloop": ("mma", "tma0_landed", "kloop_end"),
    "ml_wait": ("epilogue", "tile_start", "ml_done"),
    "phase1": ("epilogue", "ml_done", "phase1_end"),
    "phase2": ("epilogue", "phase1_end", "phase2_end"),
}
