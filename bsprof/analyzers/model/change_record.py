"""How well each kind of price has held: the change chain's errors on held-out checks, by what a change
touches (``change.KINDS``), so a projection is printed with the record of projections like it.

The record is built (``build_record``) from stored checks whose projections were committed before their
pairs were timed, re-projected with the pricing in this checkout from their committed SASS counts and
base captures; a point whose re-projection still gives what was committed is held out, one the pricing
has moved since (a fit that used it) is counted apart. ``scripts/change_record.py`` writes it to
``bsprof/data/model/change_record.json`` and a test rebuilds it from ``tests/data`` and compares.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache
from pathlib import Path

# what each kind means, as the record prints it
KIND_TEXT = {
    "stage_count": "the stage count",
    "waited_load": "a global load the K-loop waits on",
    "tie": "a barrier tying every consumer warpgroup",
    "store_drain": "global stores from registers",
    "moved_wait": "a moved wait",
    "compound": "two or more changes in one K-loop",
    "spills": "spills",
    "trip_count": "a changed trip count",
    "tile_order": "the tile order",
    "barrier_threads": "a barrier over more or fewer threads",
    "instructions": "instructions only",
}
# a stored point still counts as held out while the pricing re-projects its committed value this closely
AS_COMMITTED_PP = 0.01
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "model" / "change_record.json"


def _stats(points: list[dict]) -> dict:
    errs = [p["err_model_pp"] for p in points]
    return {
        "points": len(points),
        "held_out": sum(bool(p["held_out"]) for p in points),
        "median_pp": round(statistics.median(abs(e) for e in errs), 2),
        "max_pp": round(max(abs(e) for e in errs), 2),
        "bias_pp": round(statistics.fmean(errs), 2),
        "intervals_hold": sum(bool(p["covered"]) for p in points),
    }


def build_record(checks: list[dict]) -> dict:
    """The record from scored checks: each ``{"run", "device", "points": [...]}``, a point holding ``kinds``,
    ``err_model_pp``, ``covered`` (``change.score_run``'s points with the projection's kinds) and
    ``held_out`` (its projection is still what was committed before the timing). Every kind a point touches
    counts it once."""
    pts = [p for c in checks for p in c["points"] if math.isfinite(p.get("err_model_pp", math.nan))]
    by_kind = {k: [p for p in pts if k in p["kinds"]] for k in KIND_TEXT}
    return {
        "runs": [
            {
                "run": c["run"],
                "device": c["device"],
                "points": len(c["points"]),
                "held_out": sum(bool(p["held_out"]) for p in c["points"]),
            }
            for c in checks
        ],
        "all": _stats(pts) if pts else None,
        "kinds": {k: _stats(v) for k, v in by_kind.items() if v},
    }


@lru_cache(maxsize=1)
def shipped_record() -> dict | None:
    """The record shipped with bsprof (None if this build lacks it)."""
    import json

    if not SHIPPED.is_file():
        return None
    return json.loads(SHIPPED.read_text())


def record_lines(kinds: list[str], record: dict | None) -> list[str]:
    """One line per kind the change touches that the record holds, then the record over every point."""
    if not record or not record.get("all"):
        return []
    devices = sorted({r["device"] for r in record["runs"]})

    def line(what: str, s: dict) -> str:
        return (
            f"{what}: {s['points']} ({s['held_out']} held out), |error| median {s['median_pp']:.2f} pp, "
            f"max {s['max_pp']:.2f}, mean {s['bias_pp']:+.2f}; {s['intervals_hold']} in their intervals"
        )

    out = [
        f"checked on {', '.join(devices)} (held out: priced as before the timing; "
        "the rest priced otherwise since, by a fit or a count):"
    ]
    out += [line(KIND_TEXT[k], record["kinds"][k]) for k in kinds if k in record["kinds"]]
    out.append(line("every change", record["all"]))
    return out
