"""How well each kind of price has held: the change chain's errors on held-out checks, by what a change
touches (``change.KINDS``), so a projection is printed with the record of projections like it.

The record is built (``build_record``) from stored checks whose projections were committed before their
pairs were timed, re-projected with the pricing in this checkout from the SASS their GPU ran (the committed
counts, or those builds counted again with the GPU's compiler) and their base captures; a point the pricing
still projects as committed from its committed counts is held out, one the pricing has moved since (a fit
that used it, a count it added) is counted apart. ``scripts/change_record.py`` writes it to
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
    "multicast": "the operand bytes a cluster multicasts",
    "barrier_threads": "a barrier over more or fewer threads",
    "instructions": "instructions only",
}
# a stored point still counts as held out while the pricing re-projects its committed value this closely
AS_COMMITTED_PP = 0.01
# the checked interval: a split-conformal interval over the held-out points of the kinds a change touches.
# A point's score is its |error| over 1 pp plus CHECKED_PER_PCT of its projected change (a large change
# misses by more: the stored errors of +20-40% changes run to 5-10 pp, those under 2% to 1-3), and the
# interval is the point +- the CHECKED_LEVEL quantile of the scores x that scale; a kind with fewer than
# CHECKED_MIN_POINTS held-out points leaves its say to the others (every change's, if none has enough).
# Chosen by leaving one stored check out at a time (quantiles from the other checks' held-out points):
# level 0.9 with 0.1 per % covered 89.7% of the 331 points at a median half-width of 2.6 pp; 0, 0.05,
# 0.2 and 0.5 per % covered 92.1, 91.5, 90.3 and 90.0% at 3.8, 3.1, 2.4 and 2.5 (docs/model.md)
CHECKED_LEVEL = 0.9
CHECKED_PER_PCT = 0.1
CHECKED_MIN_POINTS = 8
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


def checked_scale(projected_pct: float, per_pct: float | None = None) -> float:
    """What a point's |error| is divided by for its conformal score, and its quantile multiplied by
    (``per_pct``: the scale's growth per % of projected change, CHECKED_PER_PCT unless given)."""
    return 1.0 + (CHECKED_PER_PCT if per_pct is None else per_pct) * abs(projected_pct)


def _quantile(scores: list[float]) -> float | None:
    """The split-conformal quantile at CHECKED_LEVEL: the ceil((n + 1) x level)-th smallest score (None
    where n is too small for it)."""
    k = math.ceil((len(scores) + 1) * CHECKED_LEVEL)
    return sorted(scores)[k - 1] if 0 < k <= len(scores) else None


def checked_quantiles(points: list[dict], per_pct: float | None = None, by_kind: bool = True) -> dict:
    """{"all": q, "kinds": {kind: q}} over the held-out points' conformal scores; a kind with fewer than
    CHECKED_MIN_POINTS held-out points is left out (every kind without ``by_kind``)."""
    held = [p for p in points if p["held_out"] and math.isfinite(p.get("err_model_pp", math.nan))]

    def score(p: dict) -> float:
        return abs(p["err_model_pp"]) / checked_scale(p["projected_pct"], per_pct)

    kinds = {}
    for k in KIND_TEXT if by_kind else ():
        sel = [score(p) for p in held if k in p["kinds"]]
        if len(sel) >= CHECKED_MIN_POINTS and (q := _quantile(sel)) is not None:
            kinds[k] = round(q, 4)
    q_all = _quantile([score(p) for p in held])
    return {"all": round(q_all, 4) if q_all is not None else None, "kinds": kinds}


def checked_halfwidth(
    kinds: list[str], projected_pct: float, quantiles: dict | None, per_pct: float | None = None
) -> float | None:
    """The checked interval's half-width (pp of wall time) for a projection touching ``kinds``: the
    largest quantile among its kinds that the record holds (every change's where none), x its scale.
    None without quantiles."""
    if not quantiles:
        return None
    qs = [quantiles["kinds"][k] for k in kinds if k in quantiles.get("kinds", {})]
    q = max(qs) if qs else quantiles.get("all")
    return None if q is None else q * checked_scale(projected_pct, per_pct)


def left_out_coverage(checks: list[dict], per_pct: float | None = None, by_kind: bool = True) -> dict:
    """How the checked interval held where its quantiles did not see the points: each check's points
    against quantiles from the other checks' held-out points (with another scale or one quantile for
    every kind where ``per_pct`` / ``by_kind`` say so, to weigh the shipped settings against others)."""
    n = covered = 0
    widths = []
    by_run = {}
    for c in checks:
        others = [p for o in checks if o is not c for p in o["points"]]
        q = checked_quantiles(others, per_pct, by_kind)
        pts = [p for p in c["points"] if math.isfinite(p.get("err_model_pp", math.nan))]
        hit = 0
        for p in pts:
            h = checked_halfwidth(p["kinds"], p["projected_pct"], q, per_pct)
            if h is None:
                continue
            n += 1
            widths.append(h)
            hit += abs(p["err_model_pp"]) <= h
        covered += hit
        by_run[c["run"]] = [hit, len(pts)]
    return {
        "points": n,
        "covered": covered,
        "median_half_pp": round(statistics.median(widths), 2) if widths else None,
        "runs": by_run,
    }


def build_record(checks: list[dict]) -> dict:
    """The record from scored checks: each ``{"run", "device", "points": [...]}``, a point holding ``kinds``,
    ``err_model_pp``, ``covered`` (``change.score_run``'s points with the projection's kinds) and
    ``held_out`` (the pricing still projects, from the counts committed before the timing, what was
    committed) and ``as_committed`` (so does the SASS the GPU ran: no recount moved it). Every kind a point
    touches counts it once."""
    pts = [p for c in checks for p in c["points"] if math.isfinite(p.get("err_model_pp", math.nan))]
    by_kind = {k: [p for p in pts if k in p["kinds"]] for k in KIND_TEXT}
    return {
        "runs": [
            {
                "run": c["run"],
                "device": c["device"],
                "points": len(c["points"]),
                "held_out": sum(bool(p["held_out"]) for p in c["points"]),
                "as_committed": sum(bool(p.get("as_committed", p["held_out"])) for p in c["points"]),
            }
            for c in checks
        ],
        "all": _stats(pts) if pts else None,
        "kinds": {k: _stats(v) for k, v in by_kind.items() if v},
        "checked": {
            "level": CHECKED_LEVEL,
            "per_pct": CHECKED_PER_PCT,
            **checked_quantiles(pts),
            "left_out": left_out_coverage(checks),
        },
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
        f"checked on {', '.join(devices)} (held out: priced as before the timing, from the SASS the GPU ran; "
        "the rest priced otherwise since, by a fit or a count):"
    ]
    out += [line(KIND_TEXT[k], record["kinds"][k]) for k in kinds if k in record["kinds"]]
    out.append(line("every change", record["all"]))
    lo = (record.get("checked") or {}).get("left_out")
    if lo and lo["points"]:
        out.append(
            f"the checked interval (± what {record['checked']['level']:.0%} of held-out prices of the same kinds "
            f"missed by, scaled by the change's size) held {lo['covered']} of {lo['points']} points with their own "
            f"check left out of its quantiles (median ±{lo['median_half_pp']:.2f} pp)"
        )
    return out
