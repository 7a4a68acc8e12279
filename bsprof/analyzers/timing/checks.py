"""Value checks on a timing table whose columns and types already passed ``timing.table.validate``:
the clock stamps must describe something a GPU could have recorded. Every problem is one
BsprofError line naming the row and the fix.

- every row names a role and a phase (``check_labels``, before the schema's role/phase checks);
- no negative clock stamps (``clock64`` counts up from the GPU's reset);
- no negative durations, and none longer than ``MAX_DURATION_CYCLES`` (minutes of one phase:
  a corrupted stamp, and sums of such would overflow);
- no zero-cycle K-loop or Phase 1: issuing MMAs or draining an accumulator takes cycles, so a
  zero there means broken stamps (waits and Phase 2 may take zero: measured tables have them);
- within one warp and role, phases follow each other in time: tile by tile, in schema order,
  each starting no earlier than the previous one ended;
- every tile a role recorded has that role's required phases, and every role recorded the same
  tiles of each CTA.
"""

from __future__ import annotations

from bsprof.analyzers.timing.schema import PHASES, REQUIRED_PHASES
from bsprof.errors import BsprofError

# 2**40 cycles is ~9 minutes at 2 GHz: no phase of one tile takes that long
MAX_DURATION_CYCLES = 1 << 40
# phases whose duration cannot be zero on real hardware
NONZERO_PHASES: dict[str, tuple[str, ...]] = {"mma": ("kloop",), "epilogue": ("phase1",)}
CAPTURE_AGAIN = "capture again with `bsprof timing` or drop the row"


def _row(t, i: int) -> str:
    r = t.iloc[i]
    return f"row {i} ({r['role']} {r['phase']}, CTA {r['cta']} warp {r['warp']} tile {r['tile']})"


def _first(mask) -> int | None:
    hits = mask.to_numpy().nonzero()[0]
    return int(hits[0]) if len(hits) else None


def check_labels(t, name: str = "timing table") -> None:
    """Every row names a role and a phase (an empty cell reads as NaN, which no role matches)."""
    for col in ("role", "phase"):
        empty = t[col].isna() | (t[col].astype(str).str.strip() == "")
        i = _first(empty)
        if i is not None:
            raise BsprofError(
                f"{name}: row {i} has an empty {col}; every row needs a role and a phase ({CAPTURE_AGAIN})"
            )


def check_values(t, name: str = "timing table") -> None:
    """Raise BsprofError on the first impossible stamp, order or missing phase in ``t``."""
    import numpy as np
    import pandas as pd

    i = _first((t["start"] < 0) | (t["end"] < 0))
    if i is not None:
        raise BsprofError(f"{name}: {_row(t, i)} has a negative clock stamp; {CAPTURE_AGAIN}")
    dur = t["end"] - t["start"]
    i = _first(dur < 0)
    if i is not None:
        raise BsprofError(f"{name}: {_row(t, i)} ends before it starts (negative duration); {CAPTURE_AGAIN}")
    i = _first(dur > MAX_DURATION_CYCLES)
    if i is not None:
        raise BsprofError(
            f"{name}: {_row(t, i)} lasts {int(dur.iloc[i]):,} cycles (minutes); a stamp is corrupt, {CAPTURE_AGAIN}"
        )
    role, phase = t["role"].astype(str), t["phase"].astype(str)
    nonzero = pd.Series(False, index=t.index)
    for r, phases in NONZERO_PHASES.items():
        nonzero |= (role == r) & phase.isin(phases)
    i = _first(nonzero & (dur == 0))
    if i is not None:
        raise BsprofError(
            f"{name}: {_row(t, i)} takes zero cycles, which a {t['phase'].iloc[i]} cannot; {CAPTURE_AGAIN}"
        )

    # order within a warp: sort each (cta, warp, role) by tile, then by the schema's phase order
    rank = {(r, p): k for r, ps in PHASES.items() for k, p in enumerate(ps)}
    order = np.fromiter((rank.get(k, 0) for k in zip(role, phase)), dtype=np.int64, count=len(t))
    keyed = pd.DataFrame(
        {
            "cta": t["cta"].to_numpy(),
            "warp": t["warp"].to_numpy(),
            "role": role.to_numpy(),
            "tile": t["tile"].to_numpy(),
            "order": order,
            "start": t["start"].to_numpy(),
            "end": t["end"].to_numpy(),
            "pos": np.arange(len(t)),
        }
    )
    keyed = keyed.sort_values(["cta", "warp", "role", "tile", "order"], kind="stable")
    same = (
        (keyed["cta"] == keyed["cta"].shift())
        & (keyed["warp"] == keyed["warp"].shift())
        & (keyed["role"] == keyed["role"].shift())
    )
    dup = same & (keyed["tile"] == keyed["tile"].shift()) & (keyed["order"] == keyed["order"].shift())
    j = _first(dup)
    if j is not None:
        raise BsprofError(
            f"{name}: {_row(t, int(keyed['pos'].iloc[j]))} appears twice; "
            "drop the duplicate rows (one row per warp, tile and phase)"
        )
    early = same & (keyed["start"] < keyed["end"].shift())
    j = _first(early)
    if j is not None:
        prev = int(keyed["pos"].iloc[j - 1])
        raise BsprofError(
            f"{name}: {_row(t, int(keyed['pos'].iloc[j]))} starts before {_row(t, prev)} "
            f"ended: stamps out of order within the warp; {CAPTURE_AGAIN}"
        )

    # every tile of a role has the role's required phases, and mma and epilogue saw the same tiles
    tiles: dict[str, set] = {}
    for r in set(role):
        sub = t[role == r]
        keys = set(zip(sub["cta"], sub["warp"], sub["tile"]))
        for ph in REQUIRED_PHASES.get(r, ()):
            got = sub[sub["phase"].astype(str) == ph]
            lack = keys - set(zip(got["cta"], got["warp"], got["tile"]))
            if lack:
                cta, warp, tile = min(lack)
                raise BsprofError(
                    f"{name}: {r} warp {warp} of CTA {cta} has tile {tile} without a {ph} row; "
                    f"a tile needs every required phase ({CAPTURE_AGAIN})"
                )
        tiles[r] = set(zip(sub["cta"], sub["tile"]))
    ref = "mma" if "mma" in tiles else min(tiles)
    for r in sorted(tiles):
        diff = tiles[ref] ^ tiles[r]
        if diff:
            cta, tile = min(diff)
            have, lack = (ref, r) if (cta, tile) in tiles[ref] else (r, ref)
            raise BsprofError(
                f"{name}: CTA {cta} tile {tile} has {have} rows but no {lack} rows (missing tiles); "
                "every role records the same tiles, capture again"
            )
