"""Host side of the device event buffer: size it, decode it into the timing table, check it.

The buffer format is defined in :mod:`bsprof.analyzers.timing.schema`: a C-ordered int64 array of
shape ``(num_ctas, warps_per_cta, tile_slots, NUM_EVENTS, 2)``; slot ``(cta, warp, s, event)``
holds the event of the CTA's tile ``s * sample_every`` (whole tiles are sampled, the same ones for
every role). Word 0 is ``clock64``, word 1 ``(smid << 56) | globaltimer_ns``; all-zero = not written.

This module needs numpy and pandas only (no cutlass, no torch), so recorded buffers can be decoded
and checked on any machine.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from bsprof.analyzers.timing.schema import (
    EVENT_ID,
    EVENTS,
    NUM_EVENTS,
    PHASE_EVENTS,
)
from bsprof.errors import BsprofError

RECORD_BYTES = 16
SMID_SHIFT = 56
NS_MASK = (1 << SMID_SHIFT) - 1
DEFAULT_MAX_BYTES = 64 << 20


class BufferPlan(NamedTuple):
    """``(shape, sample_every)``; ``shape = (num_ctas, warps_per_cta, tile_slots, NUM_EVENTS, 2)``."""

    shape: tuple[int, int, int, int, int]
    sample_every: int

    @property
    def num_ctas(self) -> int:
        return self.shape[0]

    @property
    def warps_per_cta(self) -> int:
        return self.shape[1]

    @property
    def tile_slots(self) -> int:
        return self.shape[2]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * 8

    def to_json(self) -> dict:
        return {"shape": list(self.shape), "sample_every": self.sample_every}

    @classmethod
    def from_json(cls, obj: dict) -> "BufferPlan":
        return cls(tuple(int(x) for x in obj["shape"]), int(obj["sample_every"]))  # type: ignore[arg-type]


def plan_buffer(
    num_ctas: int, warps_per_cta: int, tiles_per_cta: int, max_bytes: int = DEFAULT_MAX_BYTES
) -> BufferPlan:
    """Smallest power-of-two whole-tile sampling step whose fixed-slot buffer fits in ``max_bytes``.

    ``tiles_per_cta`` is the most tiles any CTA runs (ceil(tiles / grid) for a static persistent
    scheduler). Every warp keeps all its events of a sampled tile: sampling drops whole tiles,
    never the tail of one warp.
    """
    for name, v in (("num_ctas", num_ctas), ("warps_per_cta", warps_per_cta), ("tiles_per_cta", tiles_per_cta)):
        if int(v) < 1:
            raise BsprofError(f"timing buffer: {name} must be >= 1 (got {v}); check the launch configuration")
    per_tile = num_ctas * warps_per_cta * NUM_EVENTS * RECORD_BYTES
    if per_tile > max_bytes:
        raise BsprofError(
            f"timing buffer: one tile of events needs {per_tile} bytes > max_bytes={max_bytes}; raise max_bytes"
        )
    max_slots = max_bytes // per_tile
    need = max(1, -(-tiles_per_cta // max_slots))
    sample_every = 1 << (need - 1).bit_length()  # a power of two: the device masks and shifts
    slots = -(-tiles_per_cta // sample_every)
    return BufferPlan((int(num_ctas), int(warps_per_cta), int(slots), NUM_EVENTS, 2), int(sample_every))


def _as_array(buffer):
    import numpy as np

    if hasattr(buffer, "detach"):  # a torch tensor (possibly on the GPU)
        buffer = buffer.detach().cpu().numpy()
    return np.asarray(buffer)


def decode_buffer(
    buffer, plan: BufferPlan, *, kernel: str | None = None, variant: str | None = None, strict: bool = True
):
    """Event buffer → timing table (:data:`.schema.COLUMNS` + ``start_ns``/``end_ns``).

    With ``strict`` (the default) a buffer that cannot describe a run faithfully raises a one-line
    :class:`BsprofError`: wrong size (truncated), a written record with a zero clock, a required
    role missing, or roles that disagree on which tiles a CTA ran.
    """
    import numpy as np
    import pandas as pd

    arr = _as_array(buffer)
    want = math.prod(plan.shape)
    if arr.dtype.itemsize != 8 or arr.dtype.kind not in "iu":
        raise BsprofError(f"timing buffer has dtype {arr.dtype}, expected int64; pass the raw recorder buffer")
    if arr.size != want:
        raise BsprofError(
            f"timing buffer holds {arr.size} words but its plan {tuple(plan.shape)} needs {want}: "
            "the buffer is truncated or belongs to another launch; capture it again"
        )
    rec = arr.reshape(plan.shape).view(np.int64)
    clock = rec[..., 0]
    word1 = rec[..., 1].view(np.uint64)
    written = (clock != 0) | (word1 != 0)
    if not written.any():
        raise BsprofError("timing buffer is empty (no event written): was the timing build launched, and synchronized?")
    bad_clock = written & (clock == 0)
    if strict and bad_clock.any():
        cta, warp, slot, ev = (int(x[0]) for x in np.nonzero(bad_clock))
        raise BsprofError(
            f"timing buffer: event {EVENTS[ev]} of CTA {cta} warp {warp} tile slot {slot} has a clock of 0; "
            "the recorder or the kernel is broken, recapture with a fresh zeroed buffer"
        )
    smid = (word1 >> np.uint64(SMID_SHIFT)).astype(np.int64)
    ns = (word1 & np.uint64(NS_MASK)).astype(np.int64)

    frames = []
    for phase, (role, ev0, ev1) in PHASE_EVENTS.items():
        e0, e1 = EVENT_ID[ev0], EVENT_ID[ev1]
        ok = written[..., e1].copy()
        start_ev = np.full(ok.shape, e0)
        if phase == "phase1":
            # A Hopper consumer that runs its own epilogue has no mainloop-done barrier: its
            # Phase 1 starts where its K-loop ended.
            fallback = ~written[..., EVENT_ID["ml_done"]] & written[..., EVENT_ID["kloop_end"]]
            start_ev = np.where(fallback, EVENT_ID["kloop_end"], start_ev)
        if phase == "ml_wait":
            ok &= ~written[..., EVENT_ID["kloop_end"]]
        idx = np.nonzero(ok)
        if len(idx[0]) == 0:
            continue
        se = start_ev[idx]
        has_start = written[idx + (se,)]
        if strict and not has_start.all():
            k = int(np.argmin(has_start))
            raise BsprofError(
                f"timing buffer: CTA {idx[0][k]} warp {idx[1][k]} recorded {ev1} without {EVENTS[se[k]]} "
                f"(tile slot {idx[2][k]}); the kernel's recorder calls are unbalanced"
            )
        sel = tuple(i[has_start] for i in idx)
        se = se[has_start]
        start = clock[sel + (se,)]
        end = clock[sel + (e1,)]
        frames.append(
            pd.DataFrame(
                {
                    "sm": smid[sel + (e1,)],
                    "cta": sel[0].astype(np.int64),
                    "warp": sel[1].astype(np.int64),
                    "role": role,
                    "tile": sel[2].astype(np.int64) * plan.sample_every,
                    "phase": phase,
                    "start": start,
                    "end": end,
                    "start_ns": ns[sel + (se,)],
                    "end_ns": ns[sel + (e1,)],
                }
            )
        )
    if not frames:
        raise BsprofError("timing buffer has events but no complete phase; the kernel's recorder calls are unbalanced")
    table = pd.concat(frames, ignore_index=True)
    if kernel is not None:
        table["kernel"] = kernel
    if variant is not None:
        table["variant"] = variant
    table = table.sort_values(["cta", "tile", "warp", "start"], kind="stable").reset_index(drop=True)
    if strict:
        check_table(table)
    table.attrs["sample_every"] = plan.sample_every
    return table


def check_table(table) -> None:
    """One-line BsprofError unless the table can calibrate the model: the schema checks of
    :func:`bsprof.analyzers.timing.table.validate` (a partial capture fails its every-role-the-
    same-tiles check), plus no zero clocks (what a broken capture looks like)."""
    from bsprof.analyzers.timing.table import validate

    table = validate(table, name="timing table")
    if (table["start"] == 0).any() or (table["end"] == 0).any():
        raise BsprofError("timing table has a clock of 0; the capture is corrupt, capture again")
