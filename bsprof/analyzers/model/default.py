"""The embedded measurement: a persistent NVFP4-class GEMM on one B200 SM (per-tile averages, cycles).

What the numbers say about the pipeline (docs/model.md has the full argument):

* The MMA warp's tile is acc_wait 1,056 + TMA0 857 + K-loop 4,154 = 6,067 = the tile period, so
  its only idle time is waiting for the accumulator: an epilogue-side cycle binds.
* K-loop + Phase 1 = 8,283 > 6,067: with one accumulator stage the epilogue would have to free it
  within ~1,000 cycles (< 25%) of Phase 1, before it could have drained a 128x256 fp32
  accumulator (256 registers per thread over 4 warps). Two stages, each freed at the end of
  Phase 1, fit: the accumulator cycle is (5,011 + 2*handoff + Phase 1)/2 ~ 4,700 < 6,067.
* K-loop -76 cycles alone did not change wall time, so the binding cycle does not contain the
  K-loop: it is the epilogue warps' own loop. Phase 1 + Phase 2 = 5,028 < 6,067, so that loop
  holds ~1,040 cycles/tile outside the recorded phases (barrier hand-offs, scheduling, store
  drain): most of what the instrumentation calls ml_wait is latency, not idling.
"""

from __future__ import annotations

import functools

from bsprof.analyzers.model.params import ModelParams, Structure

B200 = {
    "tma0": 857.0,
    "kloop": 4154.0,
    "epi_wait": 1056.0,
    "ml_wait": 1139.0,
    "phase1": 4129.0,
    "phase2": 899.0,
    "tile": 6067.0,
    "warps": ("W2", "W3", "W4", "W5"),
    "phase1_warp_avg": (4252.0, 4288.0, 4424.0, 4392.0),
    "phase1_warp_p95": (5589.0, 5599.0, 5618.0, 5673.0),
    "spread_avg": 615.0,
    "spread_p95": 1606.0,
    "wall_ms": 0.543,
}

# What was measured on this kernel after two changes (wall time, ms): the checks the calibration
# has to pass (tests/test_model_default.py) and that `bsprof model` prints.
OBSERVED = (
    {"change": "K-loop -76 cycles", "deltas": {"kloop": -76}, "before_ms": 0.543, "after_ms": 0.543},
    {"change": "epilogue rewrite", "deltas": None, "knob": "phase1", "before_ms": 0.543, "after_ms": 0.536},
)

# The structure the numbers are consistent with (docs/model.md): two accumulator stages, each freed
# when the last epilogue warp finishes Phase 1. The barrier hand-off is not measured; any value up
# to ~1,000 cycles gives the same equilibrium here (the accumulator cycle has that much slack), so
# a typical mbarrier wake-up of ~100 cycles is used (--handoff overrides it).
ACC_STAGES = 2
RELEASE_FRAC = 1.0
HANDOFF = 100.0

# Where each number of the default comes from, printed with it (`bsprof model`, --explain, JSON).
PROVENANCE = {
    "measured": "per-tile averages from the users' per-warp timing of one B200 SM: TMA0, K-loop, acc wait, "
    "ml_wait, Phase 1 (and per-warp avg/p95), Phase 2, the 6,067-cycle tile, the per-tile warp "
    "spread, wall time 0.543 ms",
    "fitted": "epilogue-loop overhead (~958 cycles/tile) = measured tile - slowest warp's Phase 1 + Phase 2: "
    "fitted so the model reproduces the measured tile period; no B200 outcome was predicted with it",
    "assumed": "2 accumulator stages freed at the end of Phase 1 (the structure the K-loop -76 outcome and the "
    "acc-wait figures are consistent with) and a 100-cycle barrier hand-off (not measured)",
    "outcomes": "the two measured changes (K-loop -76 cycles: no change; the epilogue rewrite: -1.3%) were "
    "used to choose the structure and infer the rewrite's size: they are fits, not predictions",
}


@functools.lru_cache(maxsize=8)
def _cached(acc_stages: int, release_frac: float, handoff: float, structure: str) -> ModelParams:
    from bsprof.analyzers.model.calibrate import fitted_params

    b = B200
    # The per-warp figures come from a separate per-warp capture whose mean (4,339) sits 210 above
    # the aggregate Phase 1 (4,129): keep their shape (spread, tails) and centre them on 4,129 so
    # both models describe the same kernel.
    f = b["phase1"] / (sum(b["phase1_warp_avg"]) / len(b["phase1_warp_avg"]))
    means = tuple(x * f for x in b["phase1_warp_avg"])
    p95s = tuple(x * f for x in b["phase1_warp_p95"])
    st = Structure.named(structure, acc_stages, release_frac=release_frac, handoff=handoff)
    p = fitted_params(
        st,
        tma0=b["tma0"],
        kloop=b["kloop"],
        phase1_mean=means,
        phase1_p95=p95s,
        phase2=b["phase2"],
        spread_avg=b["spread_avg"],
        observed_tile=b["tile"],
        epi_wait=b["epi_wait"],
        wall_ms=b["wall_ms"],
        source="embedded B200 default",
        notes=["B200 persistent NVFP4-class GEMM, one SM, per-tile averages"],
    )
    p.observed = {
        "tile": b["tile"],
        "epi_wait": b["epi_wait"],
        "ml_wait": b["ml_wait"],
        "tma0": b["tma0"],
        "kloop": b["kloop"],
        "phase1": b["phase1"],
        "phase2": b["phase2"],
        "spread_avg": b["spread_avg"],
        "spread_p95": b["spread_p95"],
    }
    return p


def default_params(
    acc_stages: int = ACC_STAGES,
    release_frac: float = RELEASE_FRAC,
    handoff: float = HANDOFF,
    structure: str = "blackwell",
) -> ModelParams:
    import copy

    return copy.deepcopy(_cached(int(acc_stages), float(release_frac), float(handoff), structure))
