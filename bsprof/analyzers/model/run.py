"""What `bsprof model` computes, as one call: ``run_model(ModelRequest) -> ModelResult``.

The verb parses its options into a request, calls this, and hands the result to
bsprof.reports.model_text (terminal) or writes ``result.doc`` (JSON / CSV / model.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bsprof.analyzers.model.params import ModelParams
from bsprof.errors import BsprofError


@dataclass
class ModelRequest:
    source: str | None = None  # timing table / results dir; None = the embedded B200 default
    structure: str = "auto"
    deltas: dict = field(default_factory=dict)
    release_frac: float | None = None
    handoff: float | None = None
    sweep: str | None = None
    tiles: int = 50_000
    seed: int = 0
    explain: bool = False
    clock: str | None = None  # "MHZ" or "MHZ@WATTS": the baseline's sustained clock (and power)
    limits: str | None = None  # "TOP_MHZ,LIMIT_W[,FLOOR_W]"; default: the H100's


@dataclass
class ModelResult:
    params: ModelParams
    doc: dict  # the JSON contract (--json / model.json)
    rows: list  # long-form rows (--csv)
    projection: object | None = None  # project.Projection
    sweep: object | None = None  # project.SweepResult
    what_if: list | None = None
    checks: list | None = None
    walk: dict | None = None  # --explain: the cycles before and after
    clock: dict | None = None  # --clock: the projection at the sustained clock
    fitted: list = field(default_factory=list)
    provenance: dict | None = None


def check_request(req: ModelRequest) -> None:
    """The combinations of options no single option's type can refuse (each range is the option's)."""
    if req.clock is not None and req.sweep:
        raise BsprofError("--clock applies to one projection, not a --sweep; drop one of them")
    if req.limits is not None and req.clock is None:
        raise BsprofError("--gpu-limits needs --clock (the baseline's sustained clock), e.g. --clock 1750@700")


def _numbers(text: str, flag: str, example: str) -> list[float]:
    import math

    try:
        vals = [float(x) for x in str(text).replace("@", ",").split(",")]
    except ValueError:
        vals = []
    if not vals or not all(math.isfinite(v) and v > 0 for v in vals):
        raise BsprofError(f"{flag} {text!r} is not a list of positive numbers; use e.g. {flag} {example}")
    return vals


def parse_clock(text: str) -> tuple[float, float | None]:
    """``"1750"`` or ``"1750@700"`` -> (MHz, W or None)."""
    vals = _numbers(text, "--clock", "1750@700")
    if len(vals) > 2:
        raise BsprofError(f"--clock {text!r}: give MHZ or MHZ@WATTS, e.g. --clock 1750@700")
    return vals[0], (vals[1] if len(vals) == 2 else None)


def parse_limits(text: str | None):
    """``"1980,700[,124]"`` -> DeviceLimits; None -> the H100's (data sheet, floor measured)."""
    from bsprof.analyzers.model.clock import KNOWN_LIMITS, DeviceLimits

    if text is None:
        return KNOWN_LIMITS["NVIDIA H100 80GB HBM3"]
    vals = _numbers(text, "--gpu-limits", "1980,700,124")
    if len(vals) not in (2, 3):
        raise BsprofError(f"--gpu-limits {text!r}: give TOP_MHZ,LIMIT_W[,FLOOR_W], e.g. --gpu-limits 1980,700,124")
    return DeviceLimits(vals[0], vals[1], vals[2] if len(vals) == 3 else 0.0, "--gpu-limits")


def clock_view(ratio_cycles: float, clock: str, limits: str | None) -> dict:
    """The projection's cycles at the sustained clock the power limit allows after the change."""
    from bsprof.analyzers.model.clock import POWER_EXPONENT, project_clock

    mhz, watts = parse_clock(clock)
    lim = parse_limits(limits)
    if mhz > lim.max_mhz:
        raise BsprofError(
            f"--clock {mhz:g} MHz is above the top clock {lim.max_mhz:g}; give the clock the baseline "
            "sustains, or --gpu-limits for another GPU"
        )
    c = project_clock(ratio_cycles, mhz, watts, lim)
    return {
        "mhz_before": mhz,
        "watts_before": watts,
        "mhz_after": c.mhz_after,
        "clock_ratio": c.ratio,
        "capped": c.capped,
        "limited_by": c.limited_by,
        "cycle_ratio": ratio_cycles,
        "wall_ratio": ratio_cycles / c.ratio,
        "term_clock": ratio_cycles / c.ratio - ratio_cycles,
        "limits": lim.to_json(),
        "power_exponent": POWER_EXPONENT,
    }


def load_params(source, structure: str = "auto", release_frac=None, handoff=None) -> ModelParams:
    """Calibrated inputs: from a timing table, or the embedded B200 default."""
    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model import default as D

    st = None if structure == "auto" else structure
    if source is None:
        if st not in (None, "blackwell"):
            raise BsprofError(
                f"--structure {st} needs a Hopper timing table (--from); the embedded default is Blackwell"
            )
        return D.default_params(
            release_frac=D.RELEASE_FRAC if release_frac is None else release_frac,
            handoff=D.HANDOFF if handoff is None else handoff,
        )
    from bsprof.analyzers.timing.table import load, resolve

    p = calibrate(load(source), st, release_frac=release_frac, handoff=handoff)
    p.source = str(resolve(source))
    return p


def run_model(req: ModelRequest) -> ModelResult:
    from bsprof.analyzers.model import default as D
    from bsprof.analyzers.model.explain import cycle_walk, fitted_terms
    from bsprof.analyzers.model.project import apply, parse_deltas, parse_sweep, project, sweep

    check_request(req)
    params = load_params(req.source, req.structure, req.release_frac, req.handoff)
    deltas = {k: v for k, v in req.deltas.items() if v is not None}
    provenance = D.PROVENANCE if req.source is None else None
    if req.sweep:
        axes = parse_sweep(req.sweep)
        clash = [k for k in axes if k in deltas]
        if clash:
            raise BsprofError(f"--{clash[0]} is also a --sweep axis; drop one of them")
        res = sweep(params, axes, deltas, tiles=req.tiles, seed=req.seed)
        doc = {**res.to_json(), "fixed": deltas, "params": params.to_json()}
        return ModelResult(params, doc, res.rows(), sweep=res, provenance=provenance)

    pj = project(params, deltas, tiles=req.tiles, seed=req.seed)
    doc = pj.to_json()
    fitted = fitted_terms(params, deltas)
    doc["fitted_terms"] = fitted
    if provenance:
        doc["provenance"] = provenance
    out = ModelResult(params, doc, projection_rows(doc), projection=pj, fitted=fitted, provenance=provenance)
    if req.clock is not None:
        out.clock = clock_view(pj.wall_ratio, req.clock, req.limits)
        doc["clock"] = out.clock
    if req.explain:
        # with no change there is no "after": a second copy of the same walk would read as a result
        out.walk = {
            "before": cycle_walk(params),
            "after": cycle_walk(apply(params, parse_deltas(deltas))) if deltas else None,
            "period_before": pj.det_before.period,
            "period_after": pj.det_after.period,
        }
        doc["explain"] = out.walk
    if not deltas:
        out.what_if = what_if(params, req.tiles, req.seed)
        doc["what_if"] = out.what_if
        if req.source is None and req.release_frac is None and req.handoff is None:
            out.checks = observed_checks(params, req.tiles, req.seed)
            doc["observed_checks"] = out.checks
    return out


def what_if(params: ModelParams, tiles: int, seed: int) -> list[dict]:
    """What a 5% cut of each phase (and one more accumulator stage) would buy: the default view."""
    from bsprof.analyzers.model.project import project

    rows = []
    for knob in ("kloop", "phase1", "phase2", "tma0"):
        base = params.mma.tma0 if knob == "tma0" else params.mma.kloop if knob == "kloop" else None
        if base is not None and base <= 0:
            continue
        if knob == "phase2" and max(params.epi.phase2) <= 0:
            continue
        pj = project(params, {knob: "-5%"}, tiles=tiles, seed=seed)
        j = pj.to_json()
        rows.append(
            {"change": f"{knob} -5%", "det": j["deterministic"], "sto": j["stochastic"], "sentence": pj.sentence}
        )
    pj = project(params, {"acc_stages": params.structure.acc_stages + 1}, tiles=tiles, seed=seed)
    j = pj.to_json()
    label = "ping-pong" if params.structure.name == "hopper-coop" else f"acc-stages {params.structure.acc_stages + 1}"
    rows.append({"change": label, "det": j["deterministic"], "sto": j["stochastic"], "sentence": pj.sentence})
    return rows


def observed_checks(params: ModelParams, tiles: int, seed: int) -> list[dict]:
    """The embedded kernel's two measured changes, replayed through the model (fits, not predictions:
    default.PROVENANCE)."""
    from bsprof.analyzers.model.default import OBSERVED
    from bsprof.analyzers.model.project import project, required_delta

    rows = []
    for ob in OBSERVED:
        deltas = ob["deltas"]
        if deltas is None:  # the size of the change was not recorded: what the model needs
            need = required_delta(params, ob["knob"], ob["after_ms"] / ob["before_ms"])
            deltas = {ob["knob"]: round(need)}
        j = project(params, deltas, tiles=tiles, seed=seed).to_json()
        rows.append(
            {
                "change": ob["change"],
                "deltas": deltas,
                "observed_ms": ob["after_ms"],
                "det_ms": ob["before_ms"] * j["deterministic"]["wall_ratio"],
                "sto_ms": ob["before_ms"] * j["stochastic"]["wall_ratio"],
            }
        )
    return rows


def projection_rows(doc: dict) -> list[dict]:
    rows = []
    for model in ("deterministic", "stochastic"):
        d = doc.get(model) or {}
        rows.append(
            {
                "model": model,
                "baseline_tile_cycles": d.get("baseline_tile_cycles"),
                "projected_tile_cycles": d.get("projected_tile_cycles"),
                "wall_ratio": d.get("wall_ratio"),
                "binding_before": d.get("binding_before"),
                "binding_after": d.get("binding_after"),
            }
        )
    return rows
