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

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bsprof.analyzers.model.params import ModelParams
from bsprof.errors import BsprofError


@dataclass
class Point:
    direction: str          # "forward", "reverse" (fresh repeats) or "noise" (plain vs a second plain build)
    knob: str               # "kloop", "phase1", "both" or "none"
    calib: str              # key of the timing table the model is calibrated on
    delay_kloop: int        # the device knobs of the target build (cycles per K block / per tile)
    delay_phase1: int
    delta_kloop: float      # nominal change, cycles per tile on the K-loop (the injected cost)
    delta_phase1: float     # nominal change, cycles per tile on epilogue Phase 1
    base_us: float          # mean over repeats of the calibration build's wall time
    meas_us: float          # mean over repeats of the target build's wall time
    base_reps: list = field(default_factory=list)   # per-repeat median wall time, µs
    meas_reps: list = field(default_factory=list)
    oracle_kloop: float = float("nan")   # the target build's measured phase changes
    oracle_phase1: float = float("nan")
    # filled by evaluate()
    measured_ratio: float = float("nan")
    ci_lo: float = float("nan")
    ci_hi: float = float("nan")
    projected_det: float = float("nan")      # bare period ratio of the equilibrium
    projected_wall_det: float = float("nan")  # the model's projection: cycles / clock ratio
    projected_cycles_det: float = float("nan")  # its cycles: 1 + term_period + term_tail
    term_period: float = float("nan")
    term_tail: float = float("nan")
    term_clock: float = float("nan")          # projected_wall_det - projected_cycles_det
    clock_ratio: float = float("nan")         # projected sustained clock after / before
    projected_oracle: float = float("nan")
    projected_trivial: float = float("nan")
    band_lo: float = float("nan")            # Monte Carlo 5th / 95th percentile, wall-mapped
    band_hi: float = float("nan")
    err_det_pct: float = float("nan")
    err_oracle_pct: float = float("nan")
    err_trivial_pct: float = float("nan")
    err_ci_pct: float = float("nan")          # half-width of the error's 95% interval (measurement noise)
    binding_before: str = ""
    binding_after: str = ""
    critical_before: str = ""
    flip: bool = False
    busy: float = float("nan")
    extra: dict = field(default_factory=dict)


# Student t, two-sided 95%, by degrees of freedom (n - 1)
_T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


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
        raise BsprofError(f"the model (bsprof.analyzers.model) is not available in this build ({exc}); "
                          "update bsprof") from None
    import functools

    # the Monte Carlo band is computed here only, to check its coverage
    return calibrate, functools.partial(project, band=True)


def _get(obj, *path, default=None):
    for key in path:
        if obj is None:
            return default
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    return default if obj is None else obj


def _as_json(projection) -> dict:
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
    pj = _as_json(project(params, deltas))
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


WALL_SPAN_SLACK = 1.10   # a capture's wall beyond its busiest CTA's span by more than this held a launch gap


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


def evaluate(points: list[Point], tables: dict, *, calibrate=None, project=None,
             capture_wall_us: dict | None = None, limits=None) -> list[Point]:
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
    doc = json.loads((run_dir / "validation.json").read_text())
    frame = pd.read_csv(run_dir / "validation.csv")
    return doc, reclock(frame, limits_for(doc.get("device"), doc.get("device_limits")))


def _wall(params, deltas: dict, period_ratio: float, n: int, wall_cycles: float, tile: float,
          busy: float) -> tuple[float, float, float]:
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
    ghz = [float(p.extra[k]) for p in points for k in ("ghz_base", "ghz_meas")
           if k in p.extra and not math.isnan(float(p.extra[k]))]
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
        out["band"] = {"covered": inside, "n": len(cov), "coverage": inside / len(cov),
                       "keep": inside / len(cov) >= BAND_MIN_COVERAGE}
    d, t = out["det"], out["trivial"]["flip"]
    beats = (not flips) or (d["flip"]["median_abs_pct"] is not None and t["median_abs_pct"] is not None
                            and d["flip"]["median_abs_pct"] < t["median_abs_pct"])
    # None: no point in this run flips the binding side (the model and the trivial rule agree by
    # construction; the run cannot tell them apart, and says so)
    out["det"]["beats_trivial_on_flips"] = beats if flips else None
    out["det"]["pass"] = bool(d["n"] >= MIN_POINTS and d["median_abs_pct"] is not None
                              and d["median_abs_pct"] <= TARGET_MEDIAN_PCT and d["max_abs_pct"] <= TARGET_MAX_PCT
                              and beats)
    clk = [abs(e) for e in (clocked_error_pct(p) for p in scored) if not math.isnan(e)]
    if clk:
        out["clocked"] = {"median_abs_pct": statistics.median(clk), "max_abs_pct": max(clk), "n": len(clk)}
    sus = [abs(e) for e in (sustained_cycle_error_pct(p) for p in scored) if not math.isnan(e)]
    if sus:
        out["sustained_cycles"] = {"median_abs_pct": statistics.median(sus), "max_abs_pct": max(sus), "n": len(sus)}
    cyc = [abs(e) for e in (cycle_error_pct(p) for p in scored) if not math.isnan(e)]
    if cyc:
        lo, hi = clock_spread(scored)
        out["cycles"] = {"median_abs_pct": statistics.median(cyc), "max_abs_pct": max(cyc), "n": len(cyc),
                         "ghz_min": lo, "ghz_max": hi}
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
    need = ("direction", "knob", "calib", "delay_kloop", "delay_phase1", "delta_kloop", "delta_phase1",
            "base_us", "meas_us")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise BsprofError(f"validation table lacks columns {', '.join(missing)}; give a validation.csv "
                          "written by `bsprof model --validate`")
    pts = []
    for r in df.to_dict("records"):
        extra = {k[2:]: v for k, v in r.items() if k.startswith("x_")}
        pts.append(Point(direction=str(r["direction"]), knob=str(r["knob"]), calib=str(r["calib"]),
                         delay_kloop=int(r["delay_kloop"]), delay_phase1=int(r["delay_phase1"]),
                         delta_kloop=float(r["delta_kloop"]), delta_phase1=float(r["delta_phase1"]),
                         base_us=float(r["base_us"]), meas_us=float(r["meas_us"]),
                         base_reps=_reps(r.get("base_reps")), meas_reps=_reps(r.get("meas_reps")),
                         oracle_kloop=float(r.get("oracle_kloop", math.nan)),
                         oracle_phase1=float(r.get("oracle_phase1", math.nan)), extra=extra,
                         busy=float(r.get("busy", math.nan))))
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


# --- blocks the power controller held below the limit -------------------------------------------
#
# A power-capped build in its sustained state draws the board limit: the controller raises its
# clock until the draw meets the limit. A block in which the same build ran at a clock well below
# its own usual one *and* drew well under the limit, with NVML flagging the power cap, was not set
# by its own draw: the controller held it there (its state carried over from what ran before, or a
# limit other than board power). Such a block measures a state the user's kernel, run back to back
# with itself, does not settle in. Its wall time cannot be rescaled by its clock either: in the
# 8192^3 ping-pong baseline's held blocks wall x NVML clock reads 6-9% fewer cycles than its other
# blocks (the reported clock under-reads the rate the kernel ran at; the draw agrees with the wall
# time, not with the reading), so the block is left out of the point's pairs instead.

POWER_CAP_BIT = 0x4          # NVML clock-event reason: software power cap
HELD_CLOCK_DROP = 0.05       # block mean clock this share below the median block of its code ...
HELD_POWER_MARGIN = 0.05     # ... and its draw this share of (limit - floor) under the limit
SAME_CODE = {"plain_b": "plain"}   # a second build of the baseline's code: its blocks are the baseline's too


def _block_mhz(b: dict) -> float | None:
    m = b.get("mhz_mean") or b.get("mhz")
    return float(m) if m else None


def _block_counter_mhz(b: dict) -> float | None:
    m = b.get("counter_mhz")
    return float(m) if m else None


def _block_watts(b: dict) -> float | None:
    w = b.get("watts_mean") or b.get("watts")
    return float(w) if w else None


STAMP_WORDS = 6   # per stamp block (bsprof.kernels.clock_stamp): clock, timer at entry; clock, timer at exit; SM id; pad


def _stamps(arr):
    import numpy as np

    a = np.asarray(arr, dtype=np.int64).reshape(-1, STAMP_WORDS)
    return a[(a[:, 0] != 0) & (a[:, 1] != 0) & (a[:, 2] != 0) & (a[:, 3] != 0)]


def counter_mhz(before, after) -> tuple[float | None, float | None]:
    """(mean SM clock in MHz, nanoseconds) over the interval between two clock stamps launched on one
    stream around a timed block: per SM, its cycle counter's advance from the first stamp's exit to
    the second's entry over the global timer's; the median over the SMs both stamps reached (their
    counters share one clock; they differ in offset). (None, None) when no SM pairs up."""
    import statistics

    a, b = _stamps(before), _stamps(after)
    first = {}
    for c0, t0, c1, t1, sm, _ in a:
        if sm not in first or t1 > first[sm][1]:
            first[int(sm)] = (int(c1), int(t1))
    rates, spans = [], []
    for c0, t0, c1, t1, sm, _ in b:
        if int(sm) in first:
            c, t = first[int(sm)]
            if t0 > t and c0 > c:
                rates.append((int(c0) - c) / (int(t0) - t) * 1000.0)
                spans.append(float(int(t0) - t))
    if not rates:
        return None, None
    return statistics.median(rates), statistics.median(spans)


def spin_counter_mhz(stamp) -> float | None:
    """The SM clock during one stamp kernel that spun: median over its blocks of the cycles spun
    over the nanoseconds they took (every SM busy spinning, far under the power limit: the top clock
    in the counter's units)."""
    import statistics

    r = [(int(c1) - int(c0)) / (int(t1) - int(t0)) * 1000.0 for c0, t0, c1, t1, _s, _p in _stamps(stamp)
         if t1 > t0 and c1 > c0]
    return statistics.median(r) if r else None


def held_blocks(blocks: dict, limits, same_code: dict | None = None) -> dict[tuple[str, str], list[int]]:
    """Blocks held below the power limit: ``{(set, build): [repeat, ...]}`` over ``blocks``
    (``{"forward": {build: [reading, ...]}, "reverse": ...}``, the run's ``sustained_blocks``).

    A block is held when its build is power-capped in it (mean clock below ``CAPPED_BELOW`` of the top
    clock, the power-cap reason set), its mean clock is ``HELD_CLOCK_DROP`` or more below the median
    block clock of its code (every block of it in every set: the median, so a minority of held blocks
    does not move the reference), and its mean draw is ``HELD_POWER_MARGIN`` x (limit - floor) or more
    under the limit. A clock that fell with the draw while the limit left room was not the limit's
    doing. Blocks recorded without means use their medians."""
    from bsprof.analyzers.model.clock import CAPPED_BELOW

    if not blocks or limits is None:
        return {}
    same_code = SAME_CODE if same_code is None else same_code
    per_code: dict[str, list[float]] = {}
    for reads in blocks.values():
        for k, bl in (reads or {}).items():
            per_code.setdefault(same_code.get(k, k), []).extend(m for m in map(_block_mhz, bl) if m)
    ref = {k: statistics.median(v) for k, v in per_code.items() if v}
    room = HELD_POWER_MARGIN * (limits.power_limit_w - limits.floor_w)
    out: dict[tuple[str, str], list[int]] = {}
    for name, reads in blocks.items():
        for k, bl in (reads or {}).items():
            f0 = ref.get(same_code.get(k, k))
            for i, b in enumerate(bl):
                m, w = _block_mhz(b), _block_watts(b)
                if not (m and w and f0):
                    continue
                capped = m < CAPPED_BELOW * limits.max_mhz and int(b.get("reasons") or 0) & POWER_CAP_BIT
                if capped and m <= (1.0 - HELD_CLOCK_DROP) * f0 and w <= limits.power_limit_w - room:
                    out.setdefault((name, k), []).append(i)
    return out


def pooled_clocks(*sets: dict, same_code: dict | None = None,
                  skip: dict[tuple[str, str], list[int]] | None = None,
                  names: tuple[str, ...] = (), clock: str = "nvml") -> dict[str, dict]:
    """Per build: its time-averaged SM clock and board power over every block of its code, in every
    repeat set given (a second plain build counts as the plain build), leaving out the blocks in
    ``skip`` (``{(set name, build): [repeat, ...]}``, ``names[i]`` naming ``sets[i]``).

    Why pooled, and why the mean: a power-capped clock dithers between steps faster than NVML is
    polled, so one set's median of 5 blocks x ~20 readings is a sample of it, not its average: on
    the H100 at 4096^3 the same plain code read 1,740 MHz (forward set), 1,845 (its second build,
    same set) and 1,905 (reverse set) while their wall times agreed within 1.7% (docs/model.md).
    Wall time is cycles over the time-averaged clock: the mean of readings taken at even intervals,
    pooled over all of that code's running. Blocks recorded before means were kept contribute their
    medians.

    ``clock="counter"`` (the diagnostic ``counter_vs_nvml`` only; the clock term reads NVML's): the SM
    cycle counter's clock (``counter_mhz``, each block's cycles over its nanoseconds), pooled as total
    cycles over total time; blocks without a counter reading are left out (their power too, so clock
    and power describe the same blocks)."""
    same_code = SAME_CODE if same_code is None else same_code
    skip = skip or {}
    acc: dict[str, dict] = {}
    for idx, reads in enumerate(sets):
        name = names[idx] if idx < len(names) else str(idx)
        for k, blocks in (reads or {}).items():
            a = acc.setdefault(same_code.get(k, k), {"m": [], "w": [], "n": [], "ns": [], "blocks": 0, "reasons": 0})
            for i, b in enumerate(blocks):
                m = _block_counter_mhz(b) if clock == "counter" else _block_mhz(b)
                if not m or i in skip.get((name, k), ()):
                    continue
                n = max(1, int(b.get("readings") or 1))
                a["m"].append(m)
                a["w"].append(_block_watts(b))
                a["n"].append(n)
                a["ns"].append(float(b.get("counter_ns") or 0.0))
                a["blocks"] += 1
                a["reasons"] |= int(b.get("reasons") or 0)
    out = {}
    for k, a in acc.items():
        if not a["m"]:
            continue
        wm = [(w, n) for w, n in zip(a["w"], a["n"]) if w]
        if clock == "counter" and all(t > 0 for t in a["ns"]):
            mhz = sum(m * t for m, t in zip(a["m"], a["ns"])) / sum(a["ns"])   # total cycles / total time
        else:
            mhz = sum(m * n for m, n in zip(a["m"], a["n"])) / sum(a["n"])
        out[k] = {"mhz": mhz, "clock": clock,
                  "watts": sum(w * n for w, n in wm) / sum(n for _, n in wm) if wm else None,
                  "mhz_block_spread": [min(a["m"]), max(a["m"])],
                  "readings": sum(a["n"]), "blocks": a["blocks"], "reasons": a["reasons"]}
    return out


def point_builds(p: Point) -> tuple[str, str, str]:
    """(repeat set, calibration build, measured build) of a point, by the run's build names."""
    if p.direction == "noise":
        return "forward", "plain", "plain_b"
    key = "plain" if not (p.delay_kloop or p.delay_phase1) else f"kloop{p.delay_kloop}_phase1{p.delay_phase1}"
    return ("reverse", p.calib, "plain") if p.direction == "reverse" else ("forward", "plain", key)


def held_pairs(p: Point, walls: dict, held: dict, same_code: dict | None = None) -> tuple[list, list, int]:
    """The point's per-repeat (base, measured) walls without the held blocks, and how many repeats
    were dropped. ``walls``: ``{"forward": {build: [µs, ...]}, "reverse": ...}``. Where the
    calibration build's block is held but a second build of its code ran unheld in the same repeat
    (the plain build's twin), that block stands in for it: same code, same repeat, same neighbours."""
    same_code = SAME_CODE if same_code is None else same_code
    name, base, meas = point_builds(p)
    w = walls.get(name) or {}
    if base not in w or meas not in w:
        return list(p.base_reps), list(p.meas_reps), 0
    twins = [k for k, c in same_code.items() if c == base and k != meas and k in w]
    bad = lambda k, i: i in held.get((name, k), ())   # noqa: E731
    b_out, m_out, dropped = [], [], 0
    for i, (b, m) in enumerate(zip(w[base], w[meas])):
        if bad(base, i):
            alt = [w[t][i] for t in twins if i < len(w[t]) and not bad(t, i)]
            b = alt[0] if alt else None
        if b is None or bad(meas, i):
            dropped += 1
            continue
        b_out.append(b)
        m_out.append(m)
    return b_out, m_out, dropped


def rescore_held(doc: dict, limits) -> dict:
    """The run scored without the blocks held below the power limit (``held_blocks``, judged on NVML's
    readings against ``limits``, NVML's): each point's ratio from its remaining repeats, its
    calibration build's pooled NVML clock from its remaining blocks, the model's
    stored cycles turned into wall time with that clock. Returns ``{"blocks": [...],
    "points": [...], "summary": ...}``; a run without per-block readings gives ``blocks`` None."""
    import pandas as pd

    blocks = doc.get("sustained_blocks")
    frame = pd.DataFrame(doc.get("points") or [])
    if not blocks or frame.empty or limits is None:
        return {"blocks": None, "points": [], "summary": {}}
    held = held_blocks(blocks, limits)
    walls = {"forward": doc.get("wall_us_forward") or {}, "reverse": doc.get("wall_us_reverse") or {}}
    pooled = pooled_clocks(blocks.get("forward"), blocks.get("reverse"), skip=held, names=("forward", "reverse"))
    pts = from_frame(frame)
    cyc_col = "projected_cycles_det" if "projected_cycles_det" in frame.columns else "projected_wall_det"
    for p, row in zip(pts, frame.to_dict("records")):
        p.base_reps, p.meas_reps, dropped = held_pairs(p, walls, held)
        p.extra["held_repeats"] = dropped
        p.measured_ratio, p.ci_lo, p.ci_hi = ratio_stats(p.base_reps, p.meas_reps)
        p.flip = bool(row.get("flip", False))
        src = pooled.get(point_builds(p)[1]) or {}
        if src.get("mhz"):
            p.extra["mhz_base"], p.extra["watts_base"] = src["mhz"], src.get("watts")
        cyc = float(row[cyc_col])
        p.projected_cycles_det, p.clock_ratio = cyc, base_clock_ratio(p, cyc, limits)
        p.projected_wall_det = cyc / p.clock_ratio
        p.term_clock = p.projected_wall_det - cyc
        m = p.measured_ratio
        p.err_det_pct = 100.0 * (p.projected_wall_det / m - 1.0)
        if math.isfinite(p.ci_hi):
            p.err_ci_pct = 100.0 * p.projected_wall_det * (p.ci_hi - p.ci_lo) / 2.0 / (m * m)
        for key in ("projected_trivial", "projected_oracle"):
            setattr(p, key, float(row.get(key, math.nan)))
        # the trivial and oracle projections as stored, against the re-measured ratio
        p.err_trivial_pct = 100.0 * (p.projected_trivial / m - 1.0)
        p.err_oracle_pct = 100.0 * (p.projected_oracle / m - 1.0)
    listed = [{"set": s, "build": k, "repeat": i} for (s, k), idx in sorted(held.items()) for i in idx]
    return {"blocks": listed, "points": pts, "summary": summary(pts)}


def counter_vs_nvml(*sets: dict) -> dict[str, float]:
    """A diagnostic, not a model input: per build, its SM cycle counter's pooled clock (the clock stamps
    around each block) over NVML's pooled reading, for the runs that recorded both. A ping-pong
    8192^3 run read 0.89-0.93 in GEMM blocks while the stamps' own spin read 1.000 (docs/model.md,
    "The clock term"): the counter tracks the walls, NVML's reading is not the rate cycles turn into time, and a
    clock term in the counter's units has no measured top for a GEMM."""
    counter, nvml = pooled_clocks(*sets, clock="counter"), pooled_clocks(*sets)
    return {k: c["mhz"] / nvml[k]["mhz"] for k, c in counter.items() if (nvml.get(k) or {}).get("mhz")}


def counter_summary(ratio: dict[str, float], limits: dict | None) -> dict:
    """``counter_vs_nvml``'s range over the builds, beside the stamp spin's counter over NVML's top
    (``limits``: the run's recorded device limits)."""
    spin, top = (limits or {}).get("top_counter_mhz"), (limits or {}).get("max_mhz")
    return {"min": min(ratio.values()), "max": max(ratio.values()), "spin": spin / top if spin and top else None}


def sustained_cycles(base_us: list, base_reads: list | None, meas_us: list, meas_reads: list | None) -> dict:
    """The point's measured *cycle* ratio in the sustained blocks: per repeat, (wall x counter clock)
    of the measured build over the calibration build's, and their mean (``sust_cycle_ratio``). What
    the model's cycles (before its clock term) should match where the sustained state runs the
    captures' cycles; {} without counter clocks."""
    rs = []
    for i, (wb, wm) in enumerate(zip(base_us, meas_us)):
        if i < len(base_reads or ()) and i < len(meas_reads or ()):
            fb, fm = _block_counter_mhz(base_reads[i]), _block_counter_mhz(meas_reads[i])
            if fb and fm and wb > 0:
                rs.append(wm * fm / (wb * fb))
    return {"sust_cycle_ratio": statistics.fmean(rs)} if rs else {}


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


def held_summary(doc: dict, limits) -> dict | None:
    """What ``rescore_held`` changes, for the run's summary: the rule, the held blocks, the model's
    errors without them (overall, on the flip points, per point with the repeats each dropped) and
    the target check on that score; None for a run without per-block readings."""
    res = rescore_held(doc, limits)
    if res["blocks"] is None:
        return None
    s = res["summary"]
    return {"rule": {"clock_drop": HELD_CLOCK_DROP, "power_margin": HELD_POWER_MARGIN,
                     "power_cap_bit": POWER_CAP_BIT},
            "blocks": res["blocks"], "det": s["det"], "noise_floor_pct": s.get("noise_floor_pct"),
            "per_point": [{"direction": p.direction, "knob": p.knob, "held_repeats": p.extra.get("held_repeats", 0),
                           "repeats_left": len(p.base_reps), "measured_ratio": p.measured_ratio,
                           "clock_ratio": p.clock_ratio, "err_det_pct": p.err_det_pct}
                          for p in res["points"]]}
