"""Shared-resource ceiling of the epilogue: per-warp time against the number of warps sharing a path.

A phase bound by a bandwidth all epilogue warps share does not get shorter per warp when warps are
added: splitting a tile's Phase 1 over N warps instead of W gives each warp W/N of the work, but
each chunk of it now takes t(N)/t(W) as long, where t(n) is the measured per-warp time of a fixed
work with n warps sharing the SM. ``phase1(N) = phase1(W) * (W/N) * t(N)/t(W)``: with no ceiling
t is flat and the old W/N rescaling comes back; at the ceiling t grows like n and Phase 1 stays put.

The curve is measured (``bsprof model --measure-ceiling``, kernels/epi_ceiling.py) on the H100 for
the register -> shared-memory store of a Hopper TMA-store epilogue. A Blackwell epilogue reads
TMEM instead: that curve has not been measured (no B200 here), so on the B200 default the H100
curve stands in for it and every such projection says so. Warp counts outside the measured range
are extrapolated (linearly from the last two points) and flagged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class CeilingCurve:
    warps: tuple[int, ...]  # warps sharing the SM's path
    cycles: tuple[float, ...]  # median per-warp cycles of the fixed work at that count
    spread: tuple[float, ...]  # max - min over repeats (the noise of each point)
    device: str
    what: str

    def per_warp(self, n: float) -> tuple[float, bool]:
        """t(n) and whether it is extrapolated (n outside the measured warp counts)."""
        ws, cs = self.warps, self.cycles
        if n <= ws[0]:
            return cs[0], n < ws[0]
        for (w0, c0), (w1, c1) in zip(zip(ws, cs), zip(ws[1:], cs[1:])):
            if w0 <= n <= w1:
                return c0 + (c1 - c0) * (n - w0) / (w1 - w0), False
        (w0, c0), (w1, c1) = (ws[-2], cs[-2]), (ws[-1], cs[-1])
        return c1 + (c1 - c0) * (n - w1) / (w1 - w0), True

    def phase_scale(self, old: int, new: int) -> tuple[float, bool]:
        """Factor on each warp's Phase 1 when the tile's work moves from ``old`` to ``new`` warps."""
        t_new, x_new = self.per_warp(new)
        t_old, x_old = self.per_warp(old)
        return (old / new) * (t_new / t_old), (x_new or x_old)

    def saturation(self, rise: float = 1.1) -> int | None:
        """Smallest measured warp count whose per-warp time exceeds ``rise`` x the single warp's."""
        for w, c in zip(self.warps, self.cycles):
            if c > rise * self.cycles[0]:
                return w
        return None

    def to_json(self) -> dict:
        return {
            "warps": list(self.warps),
            "cycles": list(self.cycles),
            "spread": list(self.spread),
            "device": self.device,
            "what": self.what,
            "saturates_at": self.saturation(),
        }

    @classmethod
    def from_json(cls, d: dict) -> "CeilingCurve":
        return cls(
            tuple(int(w) for w in d["warps"]),
            tuple(float(c) for c in d["cycles"]),
            tuple(float(s) for s in d.get("spread", [0.0] * len(d["warps"]))),
            str(d.get("device", "?")),
            str(d.get("what", "")),
        )


def curve_from_samples(per_n: dict[int, list[float]], *, device: str, what: str) -> CeilingCurve:
    """Curve from ``{warps: [per-repeat median per-warp cycles]}``."""
    ws = sorted(per_n)
    return CeilingCurve(
        tuple(ws),
        tuple(statistics.median(per_n[w]) for w in ws),
        tuple(max(per_n[w]) - min(per_n[w]) for w in ws),
        device,
        what,
    )


SHIPPED = "epi_ceiling_h100.json"
SHIPPED_CURVE = "alu1"  # the store-heavy mix: an epilogue's Phase 1 is mostly data movement


@lru_cache(maxsize=1)
def shipped_curve() -> CeilingCurve | None:
    """The curve measured on the H100 and shipped with bsprof (None if this build lacks it)."""
    path = Path(__file__).resolve().parents[2] / "data" / "model" / SHIPPED
    if not path.is_file():
        return None
    from bsprof.artifacts import load

    return CeilingCurve.from_json(load(path, "epi_ceiling")["curves"][SHIPPED_CURVE])
