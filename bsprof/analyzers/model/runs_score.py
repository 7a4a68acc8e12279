"""Every stored `bsprof model --validate` run scored the same way, and an interval that holds.

A run's verdict is its own points as they were scored when it ran (``err_det_pct``: the model's
projected wall-time ratio against the measured one, in %): median and max |error| against the target
(median <= 2%, max <= 5%). Every run counts, not the latest of each shape.

The Monte Carlo band (5th-95th percentile of the stochastic model over SM-length replicas) is the
spread of one run of the model, not the uncertainty of a projection: it held few measured points.
``empirical_interval`` replaces it with the projection +/- a half-width in percent of wall time,
the ``quantile`` of |error| over *other* runs' points (leave one run out: a run's own errors never
set the width it is judged by), and ``coverage`` counts how many measured points it holds.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.io import check_input

TARGET_MEDIAN = 2.0
TARGET_MAX = 5.0
# the share of other runs' errors the interval must hold: 0.85 leaves room for a run whose errors
# are larger than the pooled ones and still holds >= 80% of the measured points overall
INTERVAL_QUANTILE = 0.85


@dataclass
class RunScore:
    run: str
    points: int
    median: float
    max: float
    meets: bool
    band_held: int  # measured ratio inside the Monte Carlo band [band_lo, band_hi]
    band_points: int
    band_overlap: int = 0  # the band overlaps the measurement's 95% interval (the older reading)
    errors: list[float] = field(default_factory=list)  # |error| of every scored point, %

    def to_json(self) -> dict:
        return asdict(self)


def score_frame(name: str, frame) -> RunScore:
    """One stored run (its validation.csv as a DataFrame) scored as it came out."""
    pts = frame[frame["direction"] != "noise"]
    errs = [abs(float(e)) for e in pts["err_det_pct"] if math.isfinite(float(e))]
    held = n = overlap = 0
    for _, r in pts.iterrows():
        lo, hi, m, clo, chi = (
            float(r.get(k, math.nan)) for k in ("band_lo", "band_hi", "measured_ratio", "ci_lo", "ci_hi")
        )
        if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(m):
            n += 1
            held += lo <= m <= hi
            if math.isfinite(clo) and math.isfinite(chi):
                overlap += lo <= chi and clo <= hi
    med = _median(errs)
    mx = max(errs) if errs else math.nan
    return RunScore(name, len(errs), med, mx, med <= TARGET_MEDIAN and mx <= TARGET_MAX, held, n, overlap, errs)


def _median(xs: list[float]) -> float:
    import statistics

    return statistics.median(xs) if xs else math.nan


def _quantile(xs: list[float], q: float) -> float:
    import numpy as np

    return float(np.quantile(np.asarray(xs, dtype=float), q)) if xs else math.nan


def empirical_interval(runs: list[RunScore], quantile: float = INTERVAL_QUANTILE) -> dict[str, float]:
    """Per run, the half-width (% of wall time) set by every other run's |errors| at ``quantile``."""
    out = {}
    for r in runs:
        others = [e for o in runs if o.run != r.run for e in o.errors]
        out[r.run] = _quantile(others, quantile)
    return out


def coverage(runs: list[RunScore], widths: dict[str, float]) -> dict:
    """How many measured points the leave-one-run-out interval holds, per run and overall."""
    per = {r.run: sum(e <= widths[r.run] for e in r.errors) for r in runs}
    total = sum(r.points for r in runs)
    held = sum(per.values())
    return {"held": held, "points": total, "share": held / total if total else math.nan, "per_run": per}


def score_all(run_dirs) -> dict:
    """Every stored run: its verdict, the Monte Carlo band's coverage, and the interval that replaces it."""
    import pandas as pd

    runs = []
    for d in sorted(Path(p) for p in run_dirs):
        csv = d / "validation.csv"
        if os.path.lexists(csv):
            check_input(csv, fix="a stored run's validation.csv")  # a FIFO or device: refused, unread
            # the device folder is part of the name: the same problem was validated on two parts
            device = d.parent.name.removesuffix("_timing")
            try:
                runs.append(score_frame(f"{device}/{d.name.removeprefix('validation_')}", pd.read_csv(csv)))
            except (ValueError, KeyError, TypeError, AttributeError, pd.errors.ParserError) as exc:
                # the table is read column by column: one that is not a run's table is named, once
                raise BsprofError(
                    f"{csv}: not a validation table `bsprof model --validate` writes "
                    f"({type(exc).__name__}: {str(exc)[:120]}); copy the run again"
                ) from None
    widths = empirical_interval(runs)
    cov = coverage(runs, widths)
    band_held = sum(r.band_held for r in runs)
    band_n = sum(r.band_points for r in runs)
    pooled = [e for r in runs for e in r.errors]
    return {
        "runs": [r.to_json() | {"interval_pct": widths[r.run], "interval_held": cov["per_run"][r.run]} for r in runs],
        "meets": sum(r.meets for r in runs),
        "count": len(runs),
        "band": {
            "held": band_held,
            "points": band_n,
            "share": band_held / band_n if band_n else math.nan,
            "overlap": sum(r.band_overlap for r in runs),
            "per_run_share": {r.run: (r.band_held / r.band_points if r.band_points else math.nan) for r in runs},
        },
        "interval": {
            "quantile": INTERVAL_QUANTILE,
            "pooled_halfwidth_pct": _quantile(pooled, INTERVAL_QUANTILE),
            **cov,
        },
    }
