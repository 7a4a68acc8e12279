"""Validation arithmetic: the model's projected wall-time ratios against measured ones.

Pure functions over measurements (no GPU): ``bsprof.profile.validate`` gathers them on the GPU;
this module calibrates the model on the timing tables, projects each measured point and scores
it. Error of a point = projected ratio ÷ measured ratio − 1 (so +2% means the model expected the
build to be 2% slower, relative to the calibration build, than it was).

A point: the model was calibrated on the timing build of ``calib`` (a key of ``tables``), then
asked for ``delta_kloop`` / ``delta_phase1`` cycles per tile; the measured answer is
``meas_us / base_us`` (median wall times of the target and the calibration builds' plain code).

Wall time vs tile period. The model projects the steady-state tile period; a launch also spends
time that does not scale with it (pipeline fill before the first tile, drain after the last,
launch gaps). ``busy`` = (tiles of the busiest CTA x model tile period) / measured wall cycles of
the calibration build is the share that does, and ``projected_wall_* = 1 + busy x (period
ratio - 1)``. Errors are scored on those (``err_*_pct``); ``err_raw_*_pct`` score the bare period
ratio, the model's own ``wall_ratio``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from bsprof.analyzers.model.params import ModelParams
from bsprof.errors import BsprofError


@dataclass
class Point:
    direction: str          # "forward" (slow down from plain) or "reverse" (speed back up to plain)
    knob: str               # "kloop", "phase1" or "both"
    calib: str              # key of the timing table the model is calibrated on
    delay_kloop: int        # the device knobs of the target build (cycles per K block / per tile)
    delay_phase1: int
    delta_kloop: float      # model input: cycles per tile on the K-loop (injected cost)
    delta_phase1: float     # model input: cycles per tile on epilogue Phase 1
    base_us: float          # median wall time of the calibration build (plain code)
    meas_us: float          # median wall time of the target build (plain code)
    # filled by evaluate()
    measured_ratio: float = float("nan")
    projected_det: float = float("nan")
    projected_sto: float = float("nan")
    projected_sto_p05: float = float("nan")
    projected_sto_p95: float = float("nan")
    err_det_pct: float = float("nan")
    err_sto_pct: float = float("nan")
    binding_before: str = ""
    binding_after: str = ""
    busy: float = float("nan")
    projected_wall_det: float = float("nan")
    projected_wall_sto: float = float("nan")
    err_raw_det_pct: float = float("nan")
    err_raw_sto_pct: float = float("nan")
    extra: dict = field(default_factory=dict)


def model_api():
    """``(calibrate, project)`` from the model package (#6), with a one-line error if it is absent."""
    try:
        from bsprof.analyzers.model import calibrate, project
    except ImportError as exc:
        raise BsprofError(f"the model (bsprof.analyzers.model) is not available in this build ({exc}); "
                          "update bsprof") from None
    return calibrate, project


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
    """The model's projection for ``deltas`` as the JSON contract of #6 (deterministic / stochastic)."""
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
    }


def busiest_tiles(table) -> int:
    """Tiles the busiest CTA ran (sampled tables count every ``sample_every``-th tile)."""
    every = int(table.attrs.get("sample_every", 1)) if hasattr(table, "attrs") else 1
    ref = table[table["role"] == "mma"]
    return int(ref.groupby("cta")["tile"].nunique().max()) * every


def busy_fraction(table, tile_cycles: float, wall_us: float) -> float:
    """Share of the measured wall time that scales with the tile period: tiles of the busiest CTA
    x ``tile_cycles`` over the wall time in cycles (clock fitted from the table's own stamps)."""
    from bsprof.analyzers.timing.stats import fit_clock

    if "start_ns" not in table.columns or not math.isfinite(tile_cycles):
        return 1.0  # no globaltimer: no clock to convert the wall time with
    fit = fit_clock(table)
    if fit.cycles_per_ns <= 0 or wall_us <= 0 or tile_cycles <= 0:
        return 1.0
    return min(1.0, busiest_tiles(table) * tile_cycles / (wall_us * 1000.0 * fit.cycles_per_ns))


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


def evaluate(points: list[Point], tables: dict, *, calibrate=None, project=None,
             capture_wall_us: dict | None = None) -> list[Point]:
    """Calibrate once per table, project every point, fill in ratios and errors (in place).

    ``capture_wall_us[calib]``: wall time of the calibration capture's own launches, so the busy
    share uses the wall time and the clock of the same launches (a long sweep can run at another
    clock than a short capture); a point's own ``busy`` (re-scoring from a CSV) is kept."""
    if calibrate is None or project is None:
        calibrate, project = model_api()
    params = {}
    busy = {}
    frame = {}   # calib -> (tiles of the busiest CTA, calibration wall time in cycles)
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
        deltas = {}
        if p.delta_kloop:
            deltas["kloop"] = float(p.delta_kloop)
        if p.delta_phase1:
            deltas["phase1"] = float(p.delta_phase1)
        pr = project_point(params[p.calib], deltas, project)
        p.measured_ratio = p.meas_us / p.base_us
        p.projected_det, p.projected_sto = pr["det"], pr["sto"]
        p.projected_sto_p05, p.projected_sto_p95 = pr["sto_p05"], pr["sto_p95"]
        p.binding_before, p.binding_after = pr["binding_before"], pr["binding_after"]
        p.busy = busy[p.calib]
        # wall time = the busiest CTA's makespan plus what does not scale (launch, ramp): the
        # deterministic projection moves the makespan of its tiles; the stochastic one its
        # period, plus the same fill/tail change
        # (a model given by the caller, without bsprof's event graph, maps its period alone)
        n, wall_cycles, tile = frame[p.calib]
        if isinstance(params[p.calib], ModelParams):
            d_ms, d_tail = tail_shift(params[p.calib], deltas, n, tile)
            p.projected_wall_det = 1.0 + d_ms / wall_cycles
        else:
            d_tail = 0.0
            p.projected_wall_det = 1.0 + p.busy * (p.projected_det - 1.0)
        p.projected_wall_sto = 1.0 + p.busy * (p.projected_sto - 1.0) + d_tail / wall_cycles
        p.err_raw_det_pct = 100.0 * (p.projected_det / p.measured_ratio - 1.0)
        p.err_raw_sto_pct = 100.0 * (p.projected_sto / p.measured_ratio - 1.0)
        p.err_det_pct = 100.0 * (p.projected_wall_det / p.measured_ratio - 1.0)
        p.err_sto_pct = 100.0 * (p.projected_wall_sto / p.measured_ratio - 1.0)
    return points


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
    if math.isnan(ratio) or math.isnan(p.projected_wall_det) or ratio <= 0:
        return math.nan
    return (p.projected_wall_det / ratio - 1.0) * 100.0


def clock_spread(points: list[Point]) -> tuple[float, float]:
    """(lowest, highest) GHz any scored build's capture ran at (NaN, NaN without clock extras)."""
    ghz = [float(p.extra[k]) for p in points for k in ("ghz_base", "ghz_meas")
           if k in p.extra and not math.isnan(float(p.extra[k]))]
    return (min(ghz), max(ghz)) if ghz else (math.nan, math.nan)


def summary(points: list[Point]) -> dict:
    """n, median and max |error| for each model (``det``/``sto``: wall-corrected, ``raw_*``: bare
    period ratio, ``cycles``: against the captures' cycle makespans, a diagnostic); ``pass``
    against the issue's target (H100: median |error| <= 2%, max <= 5% over >= 12 points)."""
    out = {"n": len(points)}
    cyc = [abs(e) for e in (cycle_error_pct(p) for p in points) if not math.isnan(e)]
    if cyc:
        lo, hi = clock_spread(points)
        out["cycles"] = {"median_abs_pct": statistics.median(cyc), "max_abs_pct": max(cyc), "n": len(cyc),
                         "ghz_min": lo, "ghz_max": hi}
    for key in ("det", "sto", "raw_det", "raw_sto"):
        errs = [abs(getattr(p, f"err_{key}_pct")) for p in points
                if not math.isnan(getattr(p, f"err_{key}_pct"))]
        if not errs:
            out[key] = {"median_abs_pct": None, "max_abs_pct": None, "pass": False}
            continue
        med, mx = statistics.median(errs), max(errs)
        out[key] = {"median_abs_pct": med, "max_abs_pct": mx,
                    "pass": bool(len(errs) >= 12 and med <= 2.0 and mx <= 5.0)}
    return out


def to_frame(points: list[Point]):
    import pandas as pd

    rows = []
    for p in points:
        d = asdict(p)
        extra = d.pop("extra") or {}
        d.update({f"x_{k}": v for k, v in extra.items()})
        rows.append(d)
    return pd.DataFrame(rows)


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
                         base_us=float(r["base_us"]), meas_us=float(r["meas_us"]), extra=extra,
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
