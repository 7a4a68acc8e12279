"""Validation arithmetic: the model's projected wall-time ratios against measured ones.

Pure functions over measurements (no GPU): ``bsprof.profile.validate`` gathers them on the GPU;
this module calibrates the model on the timing tables, projects each measured point and scores
it. Error of a point = projected ratio / measured ratio - 1 (+2%: the projection expected the
build to be 2% slower, relative to the calibration build, than it was).

A point: the model is calibrated on the timing build of ``calib`` (a key of ``tables``) and asked
for the *nominal* change ``delta_kloop`` / ``delta_phase1`` (cycles per tile: the injected spin's
cost from the probe, what a user knows before building). The measured answer is the ratio of the
two builds' wall times, measured in ``len(base_reps)`` interleaved repeats (one ratio per repeat:
its mean and 95% confidence interval are the measurement). Three projections are scored:

* ``model``: the equilibrium's makespan for the busiest CTA's tiles, mapped to wall time. Three
  terms, from the calibration build and the nominal change only: ``term_period`` = busy x
  (period ratio - 1), the steady state (``busy`` = tiles x period / measured wall cycles of the
  calibration capture: the share of wall time that scales with the period), ``term_tail``, the
  change of the makespan outside tiles x period (pipeline fill, the last tile's exposed epilogue)
  -- together the projected *cycles* -- and ``term_clock``, the power-capped clock's answer to
  the change (``model.clock``: from the calibration build's sustained clock and power and the
  device's limits), which turns those cycles into wall time.
* ``oracle``: the same model handed the perturbed build's *measured* phase changes (not available
  before building; shown to separate the model from the injection's accuracy).
* ``trivial``: wall time moves by the changed phase's delta whenever that phase is on the
  baseline's critical cycle, else not at all (same busy share).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bsprof.analyzers.model.params import ModelParams
from bsprof.errors import BsprofError


@dataclass
class Point:
    direction: str  # "forward", "reverse" (fresh repeats) or "noise" (plain vs a second plain build)
    knob: str  # "kloop", "phase1", "both" or "none"
    calib: str  # key of the timing table the model is calibrated on
    delay_kloop: int  # the device knobs of the target build (cycles per K block / per tile)
    delay_phase1: int
    delta_kloop: float  # nominal change, cycles per tile on the K-loop (the injected cost)
    delta_phase1: float  # nominal change, cycles per tile on epilogue Phase 1
    base_us: float  # mean over repeats of the calibration build's wall time
    meas_us: float  # mean over repeats of the target build's wall time
    base_reps: list = field(default_factory=list)  # per-repeat median wall time, µs
    meas_reps: list = field(default_factory=list)
    oracle_kloop: float = float("nan")  # the target build's measured phase changes
    oracle_phase1: float = float("nan")
    # filled by evaluate()
    measured_ratio: float = float("nan")
    ci_lo: float = float("nan")
    ci_hi: float = float("nan")
    projected_det: float = float("nan")  # bare period ratio of the equilibrium
    projected_wall_det: float = float("nan")  # the model's projection: cycles / clock ratio
    projected_cycles_det: float = float("nan")  # its cycles: 1 + term_period + term_tail
    term_period: float = float("nan")
    term_tail: float = float("nan")
    term_clock: float = float("nan")  # projected_wall_det - projected_cycles_det
    clock_ratio: float = float("nan")  # projected sustained clock after / before
    projected_oracle: float = float("nan")
    projected_trivial: float = float("nan")
    band_lo: float = float("nan")  # Monte Carlo 5th / 95th percentile, wall-mapped
    band_hi: float = float("nan")
    err_det_pct: float = float("nan")
    err_oracle_pct: float = float("nan")
    err_trivial_pct: float = float("nan")
    err_ci_pct: float = float("nan")  # half-width of the error's 95% interval (measurement noise)
    binding_before: str = ""
    binding_after: str = ""
    critical_before: str = ""
    flip: bool = False
    busy: float = float("nan")
    extra: dict = field(default_factory=dict)


# Student t, two-sided 95%, by degrees of freedom (n - 1)
_T95 = {
    1: 12.71,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t95(dof: int) -> float:
    if dof <= 0:
        return math.inf
    keys = [k for k in _T95 if k <= dof]
    return _T95[max(keys)] if keys else _T95[1]


def ratio_stats(base_reps: list, meas_reps: list) -> tuple[float, float, float]:
    """(mean ratio, 95% interval low, high) of the per-repeat ratios meas/base."""
    rs = [m / b for b, m in zip(base_reps, meas_reps) if b > 0]
    if not rs:
        return math.nan, math.nan, math.nan
    mean = statistics.fmean(rs)
    if len(rs) < 2:
        return mean, math.nan, math.nan
    half = t95(len(rs) - 1) * statistics.stdev(rs) / math.sqrt(len(rs))
    return mean, mean - half, mean + half


def model_api():
    """``(calibrate, project)`` from the model package, with a one-line error if it is absent."""
    try:
        from bsprof.analyzers.model import calibrate, project
    except ImportError as exc:
        raise BsprofError(
            f"the model (bsprof.analyzers.model) is not available in this build ({exc}); update bsprof"
        ) from None
    import functools

    # the Monte Carlo band is computed here only, to check its coverage
    return calibrate, functools.partial(project, band=True)


def projection_json(projection) -> dict:
    for name in ("to_json", "to_dict", "as_dict"):
        fn = getattr(projection, name, None)
        if callable(fn):
            return fn()
    if isinstance(projection, dict):
        return projection
    try:
        return asdict(projection)
    except TypeError:
        raise BsprofError("the model's projection has no JSON form; cannot read its wall_ratio") from None


def project_point(params, deltas: dict, project) -> dict:
    """The model's projection for ``deltas`` as the model's JSON contract (deterministic / stochastic)."""
    pj = projection_json(project(params, deltas))
    det, sto = pj.get("deterministic") or {}, pj.get("stochastic") or {}
    return {
        "tile": float(det.get("baseline_tile_cycles", math.nan)),
        "det": float(det.get("wall_ratio", math.nan)),
        "sto": float(sto.get("wall_ratio", math.nan)),
        "sto_p05": float(sto.get("wall_ratio_p05", math.nan)),
        "sto_p95": float(sto.get("wall_ratio_p95", math.nan)),
        "binding_before": str(det.get("binding_before", "")),
        "binding_after": str(det.get("binding_after", "")),
        "critical_before": str(det.get("critical_before", "")),
    }


# phases on each critical cycle of the equilibrium (eventgraph.solve)
ON_CYCLE = {"mma-chain": ("kloop",), "epilogue-chain": ("phase1",), "accumulator-cycle": ("kloop", "phase1")}


def trivial_ratio(deltas: dict, critical: str, tile: float, busy: float) -> float:
    """The trivial predictor: wall time moves by each changed phase's delta when that phase is on
    the baseline's critical cycle, by nothing otherwise."""
    on = ON_CYCLE.get(critical, ("kloop", "phase1"))
    moved = sum(float(v) for k, v in deltas.items() if k in on)
    return 1.0 + busy * moved / tile


def busiest_tiles(table) -> int:
    """Tiles the busiest CTA ran (sampled tables count every ``sample_every``-th tile)."""
    every = int(table.attrs.get("sample_every", 1)) if hasattr(table, "attrs") else 1
    ref = table[table["role"] == "mma"]
    return int(ref.groupby("cta")["tile"].nunique().max()) * every


WALL_SPAN_SLACK = 1.10  # a capture's wall beyond its busiest CTA's span by more than this held a launch gap


def busy_fraction(table, tile_cycles: float, wall_us: float) -> float:
    """Share of the measured wall time that scales with the tile period: tiles of the busiest CTA
    x ``tile_cycles`` over the wall time in cycles (clock fitted from the table's own stamps).

    The wall time is a few timed launches of the capture and can hold a gap in which the kernel
    did not run (a late host launch); the table's own span cannot. Normally the wall is 0-3% longer
    than the busiest CTA's first-to-last event (launch and CTA start-up); past ``WALL_SPAN_SLACK``
    the span stands in for it."""
    from bsprof.analyzers.timing.stats import fit_clock

    if "start_ns" not in table.columns or not math.isfinite(tile_cycles):
        return 1.0  # no globaltimer: no clock to convert the wall time with
    fit = fit_clock(table)
    if fit.cycles_per_ns <= 0 or wall_us <= 0 or tile_cycles <= 0:
        return 1.0
    wall_cycles = wall_us * 1000.0 * fit.cycles_per_ns
    g = table.groupby("cta").agg(s=("start", "min"), e=("end", "max"))
    span = float((g["e"] - g["s"]).max())
    if span > 0 and wall_cycles > WALL_SPAN_SLACK * span:
        wall_cycles = span
    return min(1.0, busiest_tiles(table) * tile_cycles / wall_cycles)


def tail_shift(params, deltas: dict, tiles: int, tile_cycles: float) -> tuple[float, float]:
    """(change of the makespan of ``tiles`` tiles, change of its part outside ``tiles x period``)
    in cycles, deterministic. The second is what a steady-state period misses: the pipeline fill
    and the last tile's epilogue, exposed when nothing follows it (ping-pong and Blackwell; a
    cooperative Hopper tile has its epilogue inside the period already)."""
    from bsprof.analyzers.model.eventgraph import makespan, solve
    from bsprof.analyzers.model.project import apply, parse_deltas

    new = apply(params, parse_deltas(deltas))
    base_ms, new_ms = makespan(params, tiles), makespan(new, tiles)
    base_tail = base_ms - tiles * solve(params).period
    new_tail = new_ms - tiles * solve(new).period
    return new_ms - base_ms, new_tail - base_tail


def _deltas(kloop: float, phase1: float) -> dict:
    d = {}
    if kloop and math.isfinite(kloop):
        d["kloop"] = float(kloop)
    if phase1 and math.isfinite(phase1):
        d["phase1"] = float(phase1)
    return d


def evaluate(
    points: list[Point], tables: dict, *, calibrate=None, project=None, capture_wall_us: dict | None = None, limits=None
) -> list[Point]:
    """Calibrate once per table, project every point three ways, fill in ratios and errors (in place).

    ``capture_wall_us[calib]``: wall time of the calibration capture's own launches, so the busy
    share uses the wall time and the clock of the same launches; a point's own ``busy``
    (re-scoring from a CSV) is kept. ``limits`` (``model.clock.DeviceLimits``): the device's top
    clock and power limit; with them and the calibration build's sustained clock (extras
    ``mhz_base`` / ``watts_base``) the model's cycles become wall time at the projected clock,
    without them the clock term is 0."""
    if calibrate is None or project is None:
        calibrate, project = model_api()
    params, busy, frame = {}, {}, {}
    for p in points:
        if p.calib not in tables:
            raise BsprofError(f"validation point calibrates on {p.calib!r}, which has no timing table")
        if p.calib not in params:
            params[p.calib] = calibrate(tables[p.calib])
            tile = project_point(params[p.calib], {}, _det_only(project))["tile"]
            wall = (capture_wall_us or {}).get(p.calib, p.base_us)
            busy[p.calib] = p.busy if math.isfinite(p.busy) else busy_fraction(tables[p.calib], tile, wall)
            n = busiest_tiles(tables[p.calib])
            frame[p.calib] = (n, n * tile / busy[p.calib], tile)
        if p.base_reps and p.meas_reps:
            p.measured_ratio, p.ci_lo, p.ci_hi = ratio_stats(p.base_reps, p.meas_reps)
        else:
            p.measured_ratio = p.meas_us / p.base_us
        p.busy = busy[p.calib]
        n, wall_cycles, tile = frame[p.calib]
        prm = params[p.calib]
        nominal = _deltas(p.delta_kloop, p.delta_phase1)
        pr = project_point(prm, nominal, project)
        p.projected_det = pr["det"]
        p.binding_before, p.binding_after = pr["binding_before"], pr["binding_after"]
        p.critical_before = pr["critical_before"]
        p.flip = bool(p.binding_before and p.binding_before != p.binding_after)
        cyc, p.term_period, p.term_tail = _wall(prm, nominal, pr["det"], n, wall_cycles, tile, p.busy)
        clock = base_clock_ratio(p, cyc, limits)
        p.projected_cycles_det, p.clock_ratio = cyc, clock
        p.projected_wall_det = cyc / clock
        p.term_clock = p.projected_wall_det - cyc
        d_tail = p.term_tail * wall_cycles
        p.band_lo = (1.0 + p.busy * (pr["sto_p05"] - 1.0) + d_tail / wall_cycles) / clock
        p.band_hi = (1.0 + p.busy * (pr["sto_p95"] - 1.0) + d_tail / wall_cycles) / clock
        p.projected_trivial = trivial_ratio(nominal, p.critical_before, tile, p.busy)
        if p.direction != "noise" and math.isfinite(p.oracle_kloop + p.oracle_phase1):
            measured = _deltas(p.oracle_kloop if p.delta_kloop else 0.0, p.oracle_phase1 if p.delta_phase1 else 0.0)
            po = project_point(prm, measured, _det_only(project))
            o_cyc = _wall(prm, measured, po["det"], n, wall_cycles, tile, p.busy)[0]
            p.projected_oracle = o_cyc / base_clock_ratio(p, o_cyc, limits)
        m = p.measured_ratio
        p.err_det_pct = 100.0 * (p.projected_wall_det / m - 1.0)
        p.err_oracle_pct = 100.0 * (p.projected_oracle / m - 1.0)
        p.err_trivial_pct = 100.0 * (p.projected_trivial / m - 1.0)
        if math.isfinite(p.ci_hi):
            p.err_ci_pct = 100.0 * p.projected_wall_det * (p.ci_hi - p.ci_lo) / 2.0 / (m * m)
    return points


def base_clock_ratio(p: Point, cycle_ratio: float, limits) -> float:
    """Projected sustained clock ratio for a point, from its calibration build's own sustained
    clock and power only (1.0 when the run read no clock or knows no limits)."""
    from bsprof.analyzers.model.clock import project_clock

    def num(key):
        try:
            v = float(p.extra.get(key))
        except (TypeError, ValueError):
            return None
        return v if math.isfinite(v) else None

    return project_clock(cycle_ratio, num("mhz_base"), num("watts_base"), limits).ratio


def reclock(frame, limits) -> list[Point]:
    """Points of a validation.csv with the clock term applied to the projected cycles it stored
    (``projected_cycles_det``, or ``projected_wall_det`` of runs made before the term existed),
    from each point's calibration build's sustained clock (``x_mhz_base`` / ``x_watts_base``):
    re-scores a run whose timing tables were not kept. Measured ratios are recomputed from the
    repeats; the trivial and oracle columns are left as stored."""
    pts = from_frame(frame)
    cyc_col = "projected_cycles_det" if "projected_cycles_det" in frame.columns else "projected_wall_det"
    for p, row in zip(pts, frame.to_dict("records")):
        if p.base_reps and p.meas_reps:
            p.measured_ratio, p.ci_lo, p.ci_hi = ratio_stats(p.base_reps, p.meas_reps)
        else:
            p.measured_ratio = p.meas_us / p.base_us
        cyc = float(row[cyc_col])
        p.flip = bool(row.get("flip", False))
        p.projected_cycles_det, p.clock_ratio = cyc, base_clock_ratio(p, cyc, limits)
        p.projected_wall_det = cyc / p.clock_ratio
        p.term_clock = p.projected_wall_det - cyc
        p.err_det_pct = 100.0 * (p.projected_wall_det / p.measured_ratio - 1.0)
        for key in ("err_oracle_pct", "err_trivial_pct", "projected_trivial", "projected_oracle"):
            setattr(p, key, float(row.get(key, math.nan)))
    return pts


def rescore_stored(run_dir) -> tuple[dict, list[Point]]:
    """A stored `bsprof model --validate` run (its validation.json and validation.csv) and its points
    re-scored with the clock term under the limits the run recorded: how a run whose timing tables
    were not kept is read again on any machine."""
    import pandas as pd

    from bsprof.analyzers.model.clock import limits_for

    run_dir = Path(run_dir)
    from bsprof.artifacts import load

    doc = load(run_dir / "validation.json", "validation")
    frame = pd.read_csv(run_dir / "validation.csv")
    return doc, reclock(frame, limits_for(doc.get("device"), doc.get("device_limits")))


def _wall(
    params, deltas: dict, period_ratio: float, n: int, wall_cycles: float, tile: float, busy: float
) -> tuple[float, float, float]:
    """(cycle ratio, period term, tail term) of a projection (tail 0 for a model without bsprof's graph)."""
    term_period = busy * (period_ratio - 1.0)
    term_tail = 0.0
    if isinstance(params, ModelParams):
        d_ms, d_tail = tail_shift(params, deltas, n, tile)
        term_tail = d_tail / wall_cycles
    return 1.0 + term_period + term_tail, term_period, term_tail


def _det_only(project):
    def fn(params, deltas):
        try:
            return project(params, deltas, stochastic=False)
        except TypeError:  # a project() without the keyword
            return project(params, deltas)

    return fn


def capture_clock(table) -> tuple[float, float]:
    """(cycles, GHz) of a capture: its busiest CTA's first-to-last event span in SM cycles, and the
    clock the build ran at (``fit_clock`` over every ``%globaltimer`` stamp)."""
    from bsprof.analyzers.timing.stats import fit_clock

    if "start_ns" not in table.columns:
        return math.nan, math.nan
    g = table.groupby("cta").agg(s=("start", "min"), e=("end", "max"))
    ghz = fit_clock(table).cycles_per_ns
    return float((g["e"] - g["s"]).max()), (ghz if ghz > 0 else math.nan)


def cycle_error_pct(p: Point) -> float:
    """The projection against the *cycle* makespan ratio of the two builds' captures (extras
    ``cycles_base`` / ``cycles_meas``): what the model computes, without the SM clock, which a
    power-limited GPU moves when an injected delay lowers the draw."""
    base, meas = p.extra.get("cycles_base", math.nan), p.extra.get("cycles_meas", math.nan)
    try:
        ratio = float(meas) / float(base)
    except (TypeError, ZeroDivisionError):
        return math.nan
    cyc = _cycles(p)
    if math.isnan(ratio) or math.isnan(cyc) or ratio <= 0:
        return math.nan
    return (cyc / ratio - 1.0) * 100.0


def _cycles(p: Point) -> float:
    """The model's projection before its clock term (older runs: the wall projection had none)."""
    return p.projected_cycles_det if math.isfinite(p.projected_cycles_det) else p.projected_wall_det


def clocked_error_pct(p: Point) -> float:
    """The model's projection (cycles) turned into wall time with the two builds' *measured*
    sustained clocks (extras ``mhz_base`` / ``mhz_meas``): how much of a point's error the clock
    change explains. A diagnostic, like the oracle: the delayed build's clock is not known before
    building."""
    try:
        fb, fm = float(p.extra["mhz_base"]), float(p.extra["mhz_meas"])
    except (KeyError, TypeError, ValueError):
        return math.nan
    if not (fb > 0 and fm > 0) or math.isnan(_cycles(p)):
        return math.nan
    return (_cycles(p) * fb / fm / p.measured_ratio - 1.0) * 100.0


def clock_spread(points: list[Point]) -> tuple[float, float]:
    """(lowest, highest) GHz any scored build's capture ran at (NaN, NaN without clock extras)."""
    ghz = [
        float(p.extra[k])
        for p in points
        for k in ("ghz_base", "ghz_meas")
        if k in p.extra and not math.isnan(float(p.extra[k]))
    ]
    return (min(ghz), max(ghz)) if ghz else (math.nan, math.nan)


TARGET_MEDIAN_PCT = 2.0
TARGET_MAX_PCT = 5.0
MIN_POINTS = 12
BAND_MIN_COVERAGE = 0.8


def _stats(errs: list[float]) -> dict:
    errs = [abs(e) for e in errs if math.isfinite(e)]
    if not errs:
        return {"n": 0, "median_abs_pct": None, "max_abs_pct": None}
    return {"n": len(errs), "median_abs_pct": statistics.median(errs), "max_abs_pct": max(errs)}


def summary(points: list[Point]) -> dict:
    """Errors of each projection (all scored points and the flip points), the noise floor (the
    null point: plain against a second plain build), the Monte Carlo band's coverage and ``pass``
    against the target (median |error| <= 2%, max <= 5% over >= 12 points, and below the trivial
    predictor's error on the flip points)."""
    scored = [p for p in points if p.direction != "noise"]
    flips = [p for p in scored if p.flip]
    out: dict = {"n": len(scored), "n_flip": len(flips)}
    for key in ("det", "oracle", "trivial"):
        out[key] = _stats([getattr(p, f"err_{key}_pct") for p in scored])
        out[key]["flip"] = _stats([getattr(p, f"err_{key}_pct") for p in flips])
    null = [p for p in points if p.direction == "noise"]
    if null:
        z = null[0]
        out["noise_floor_pct"] = abs(z.measured_ratio - 1.0) * 100.0
        out["noise_ci_pct"] = (z.ci_hi - z.ci_lo) / 2.0 * 100.0 if math.isfinite(z.ci_hi) else None
    cis = [p.err_ci_pct for p in scored if math.isfinite(p.err_ci_pct)]
    out["median_ci_pct"] = statistics.median(cis) if cis else None
    cov = [p for p in scored if math.isfinite(p.band_lo) and math.isfinite(p.ci_lo)]
    if cov:
        inside = sum(1 for p in cov if p.band_lo <= p.ci_hi and p.ci_lo <= p.band_hi)
        out["band"] = {
            "covered": inside,
            "n": len(cov),
            "coverage": inside / len(cov),
            "keep": inside / len(cov) >= BAND_MIN_COVERAGE,
        }
    d, t = out["det"], out["trivial"]["flip"]
    beats = (not flips) or (
        d["flip"]["median_abs_pct"] is not None
        and t["median_abs_pct"] is not None
        and d["flip"]["median_abs_pct"] < t["median_abs_pct"]
    )
    # None: no point in this run flips the binding side (the model and the trivial rule agree by
    # construction; the run cannot tell them apart, and says so)
    out["det"]["beats_trivial_on_flips"] = beats if flips else None
    out["det"]["pass"] = bool(
        d["n"] >= MIN_POINTS
        and d["median_abs_pct"] is not None
        and d["median_abs_pct"] <= TARGET_MEDIAN_PCT
        and d["max_abs_pct"] <= TARGET_MAX_PCT
        and beats
    )
    clk = [abs(e) for e in (clocked_error_pct(p) for p in scored) if not math.isnan(e)]
    if clk:
        out["clocked"] = {"median_abs_pct": statistics.median(clk), "max_abs_pct": max(clk), "n": len(clk)}
    sus = [abs(e) for e in (sustained_cycle_error_pct(p) for p in scored) if not math.isnan(e)]
    if sus:
        out["sustained_cycles"] = {"median_abs_pct": statistics.median(sus), "max_abs_pct": max(sus), "n": len(sus)}
    cyc = [abs(e) for e in (cycle_error_pct(p) for p in scored) if not math.isnan(e)]
    if cyc:
        lo, hi = clock_spread(scored)
        out["cycles"] = {
            "median_abs_pct": statistics.median(cyc),
            "max_abs_pct": max(cyc),
            "n": len(cyc),
            "ghz_min": lo,
            "ghz_max": hi,
        }
    return out


def to_frame(points: list[Point]):
    import pandas as pd

    rows = []
    for p in points:
        d = asdict(p)
        extra = d.pop("extra") or {}
        d["base_reps"] = ";".join(repr(float(x)) for x in p.base_reps)
        d["meas_reps"] = ";".join(repr(float(x)) for x in p.meas_reps)
        d.update({f"x_{k}": v for k, v in extra.items()})
        rows.append(d)
    return pd.DataFrame(rows)


def _reps(v) -> list:
    if isinstance(v, str) and v:
        return [float(x) for x in v.split(";")]
    return []


def from_frame(df) -> list[Point]:
    """Points back from a validation.csv (the measured columns; evaluate() recomputes the rest)."""
    need = (
        "direction",
        "knob",
        "calib",
        "delay_kloop",
        "delay_phase1",
        "delta_kloop",
        "delta_phase1",
        "base_us",
        "meas_us",
    )
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise BsprofError(
            f"validation table lacks columns {', '.join(missing)}; give a validation.csv "
            "written by `bsprof model --validate`"
        )
    pts = []
    for r in df.to_dict("records"):
        extra = {k[2:]: v for k, v in r.items() if k.startswith("x_")}
        pts.append(
            Point(
                direction=str(r["direction"]),
                knob=str(r["knob"]),
                calib=str(r["calib"]),
                delay_kloop=int(r["delay_kloop"]),
                delay_phase1=int(r["delay_phase1"]),
                delta_kloop=float(r["delta_kloop"]),
                delta_phase1=float(r["delta_phase1"]),
                base_us=float(r["base_us"]),
                meas_us=float(r["meas_us"]),
                base_reps=_reps(r.get("base_reps")),
                meas_reps=_reps(r.get("meas_reps")),
                oracle_kloop=float(r.get("oracle_kloop", math.nan)),
                oracle_phase1=float(r.get("oracle_phase1", math.nan)),
                extra=extra,
                busy=float(r.get("busy", math.nan)),
            )
        )
    return pts


def spin_cost_fit(samples: dict[int, float]) -> tuple[float, float]:
    """Least-squares ``cost = slope * d + intercept`` of the clock64 spin, from measured
    ``{d: cycles}``; returns ``(slope, intercept)``."""
    xs = [float(d) for d in samples]
    ys = [float(samples[d]) for d in samples]
    if len(xs) < 2:
        raise BsprofError("spin calibration needs at least two delays")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def sustained_cycle_error_pct(p: Point) -> float:
    """The model's cycles (before its clock term) against the sustained blocks' cycle ratio."""
    try:
        ratio = float(p.extra.get("sust_cycle_ratio"))
    except (TypeError, ValueError):
        return math.nan
    cyc = _cycles(p)
    if not (ratio > 0) or math.isnan(cyc):
        return math.nan
    return (cyc / ratio - 1.0) * 100.0
