"""The power-capped clock: from the equilibrium's cycles to wall time under sustained launches.

The equilibrium works in SM cycles. Wall time is cycles / clock, and a GPU that runs a GEMM back
to back sits at its board power limit: its SM clock is whatever the kernel's draw allows. A
change that stretches a launch from C to r·C cycles with the same tensor-core work spreads that
work's energy over r times the cycles, so at an equal clock the work-dependent draw falls by 1/r
and the power-capped clock rises until the draw is back at the limit (and falls when r < 1).

With that draw ∝ work per cycle × f^γ (dynamic power C·V²·f with the voltage following the clock
across the DVFS range: γ = 3, assumed, not fitted):

    P(f) = floor + (P0 − floor) / r · (f / f0)^γ,   f1 = the highest f with P(f) ≤ limit,

capped at the device's top SM clock. A baseline sustained below ``CAPPED_BELOW`` of the top clock
is power-capped (P0 = the limit: instantaneous readings overshoot it), and then only the ratio
r^(1/γ) matters; a baseline at its top clock is not, and its measured draw P0 says how far its
work may grow before the limit pulls the clock down. ``floor`` is the board power that does not
scale with the work (the device's idle reading, measured).

Inputs: the baseline's sustained clock (and power), measured on the baseline build alone, and the
device's limits. Nothing here is fitted to a projection's outcome. The baseline's clock must be its
time average: a power-capped clock dithers between steps faster than NVML is polled, so a few
readings' median can sit one step off (the 4096^3 ping-pong plain build read 1,740, 1,845 and
1,905 MHz in three sets of blocks at wall times within 1.7%); where the baseline's clock is
under-read, a change that reaches the top clock is projected to gain too much.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

POWER_EXPONENT = 3.0  # P_dyn ∝ V²·f with V ∝ f over the DVFS range
CAPPED_BELOW = 0.98  # sustained below 98% of the top clock: the power limit holds it there


@dataclass(frozen=True)
class DeviceLimits:
    max_mhz: float  # top SM clock (NVML max clock)
    power_limit_w: float  # enforced board power limit
    floor_w: float = 0.0  # board power that does not scale with the kernel's work
    source: str = ""

    def to_json(self) -> dict:
        return asdict(self)


# When a run recorded no NVML limits (older validation runs, `bsprof model --clock`): the part's
# top SM clock and board power limit (NVML on the lent H100 and H200, as the data sheets), and the
# floor measured on each (board power while one thread spins at 1,980 MHz: on the H100 124 and 129 W
# in two reads, on the H200 121.5 W in its validation run).
KNOWN_LIMITS = {
    "NVIDIA H100 80GB HBM3": DeviceLimits(
        1980.0, 700.0, 124.0, "H100 SXM5: NVML 1980 MHz / 700 W; floor measured 124 W"
    ),
    "NVIDIA H200": DeviceLimits(1980.0, 700.0, 121.5, "H200 SXM: NVML 1980 MHz / 700 W; floor measured 121 W"),
}


def limits_for(device: str | None, recorded: dict | None = None) -> DeviceLimits | None:
    """The limits a run recorded (NVML's top clock and power limit, the measured floor), else the
    data-sheet fallback for its device name, else None.

    The top clock is NVML's, like the baseline's sustained clock the clock term compares with it. A
    top in the SM cycle counter's units was tried and measured no-go: a stamp spin on every SM counts
    1,980 MHz, but a GEMM the power limit does not touch counts 1,820-1,840 at NVML's 1,980, so a
    counter baseline against a spin's top projects a change reaching the top to gain ~7% too much
    (docs/model.md, "The clock term")."""
    if recorded and recorded.get("max_mhz") and recorded.get("power_limit_w"):
        return DeviceLimits(
            float(recorded["max_mhz"]),
            float(recorded["power_limit_w"]),
            float(recorded.get("floor_w") or 0.0),
            str(recorded.get("source", "NVML")),
        )
    return KNOWN_LIMITS.get(device or "")


@dataclass(frozen=True)
class ClockProjection:
    ratio: float  # f_after / f_before (1.0 when nothing is known)
    mhz_before: float
    mhz_after: float
    capped: bool  # the baseline is power-capped
    limited_by: str  # "power limit", "top clock", "baseline clock" or "unknown"

    def to_json(self) -> dict:
        return asdict(self)


def project_clock(
    cycle_ratio: float,
    mhz: float | None,
    watts: float | None,
    limits: DeviceLimits | None,
    gamma: float = POWER_EXPONENT,
) -> ClockProjection:
    """The sustained clock after a change that multiplies a launch's cycles by ``cycle_ratio``
    (same tensor-core work), from the baseline's sustained ``mhz`` / ``watts``."""
    nothing = ClockProjection(1.0, mhz or math.nan, mhz or math.nan, False, "unknown")
    if not (limits and mhz and mhz > 0 and cycle_ratio > 0 and math.isfinite(cycle_ratio)):
        return nothing
    capped = mhz < CAPPED_BELOW * limits.max_mhz
    p0 = limits.power_limit_w if capped else watts
    if not p0 or not math.isfinite(p0) or p0 <= limits.floor_w:
        return nothing
    free = (limits.power_limit_w - limits.floor_w) * cycle_ratio / (p0 - limits.floor_w)
    at_limit = mhz * free ** (1.0 / gamma) if free > 0 else 0.0
    # a capped baseline climbs to the top clock at most; one that is not capped never climbs
    ceiling = limits.max_mhz if capped else mhz
    f1 = min(ceiling, at_limit)
    how = "power limit" if at_limit < ceiling else ("top clock" if capped else "baseline clock")
    return ClockProjection(f1 / mhz, mhz, f1, capped, how)
