"""Projections: what deltas on the phases do to the tile period, in both models.

Deltas are per tile, per warp, in cycles (``-300``) or percent (``"-5%"``); ``acc_stages`` and
``epi_warps`` change the structure. ``epi_warps`` splits the same tile over N warps instead of W:
each warp's Phase 1 and Phase 2 (TMEM or register reads, stores: data movement through paths every
epilogue warp of the SM shares) scale by W/N times the shared-path slowdown t(N)/t(W) measured on
the H100 (``ceiling``): a phase bound by a bandwidth all epilogue warps share does not get shorter
per warp when warps are added.

The Monte Carlo band (5th-95th percentile of the period ratio over replicas) is not part of any
output: on the H100 validation it held 0-77% of the measured points (docs/model.md); ``band=True``
computes it for the validation's coverage check only.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace

from bsprof.analyzers.model import montecarlo as mc
from bsprof.analyzers.model.eventgraph import Equilibrium, solve
from bsprof.analyzers.model.params import PHASE_KNOBS, EpilogueSide, ModelParams
from bsprof.errors import BsprofError

DEFAULT_TILES = 50_000
NAMES = {"tma0": "TMA0", "kloop": "K-loop", "phase1": "Phase 1", "phase2": "Phase 2"}
STRUCT_KEYS = ("acc_stages", "epi_warps")


# ---------------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------------


def _one(knob: str, value) -> tuple[float, float]:
    """(scale, add) of a delta: ``-300`` adds cycles, ``"-5%"`` scales."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if not math.isfinite(v):
            raise BsprofError(f"--{knob} {value!r} is not a finite number of cycles")
        return 1.0, v
    text = str(value).strip().replace(",", "").replace("_", "")
    try:
        if text.endswith("%"):
            pct = float(text[:-1])
            if not math.isfinite(pct):
                raise ValueError
            return 1.0 + pct / 100.0, 0.0
        v = float(text.removesuffix("cycles").removesuffix("cyc").strip())
        if not math.isfinite(v):
            raise ValueError
        return 1.0, v
    except ValueError:
        raise BsprofError(f"--{knob} {value!r} is not a delta; give cycles (e.g. -300) or percent (e.g. -5%)") from None


def parse_deltas(deltas: dict | None) -> dict:
    """Normalise ``{"kloop": -300, "phase1": "-5%", "acc_stages": 2, "epi_warps": 5}``."""
    out: dict = {}
    for key, value in (deltas or {}).items():
        k = str(key).replace("-", "_")
        if k in PHASE_KNOBS:
            if value is None:
                continue
            out[k] = _one(k, value)
        elif k in STRUCT_KEYS:
            if value is None:
                continue
            try:
                n = int(value)
            except (TypeError, ValueError):
                raise BsprofError(f"--{k.replace('_', '-')} {value!r} must be a whole number") from None
            # an epilogue warp count is checked against the structure it goes into (check_epi_warps),
            # which can say why a count does not fit
            if k == "acc_stages" and not 1 <= n <= 8:
                raise BsprofError(f"--acc-stages {n} is out of range; use 1..8")
            out[k] = n
        else:
            raise BsprofError(f"unknown delta {key!r}; use {', '.join(PHASE_KNOBS + STRUCT_KEYS)}")
    return out


def parse_sweep(spec: str) -> dict[str, list]:
    """``kloop=-600:0:50,phase1=-600:0:50`` -> {knob: [values]}; one or two axes; ``%`` allowed."""
    axes: dict[str, list] = {}
    for part in [p for p in str(spec).split(",") if p.strip()]:
        if "=" not in part:
            raise BsprofError(f"--sweep part {part!r} needs KNOB=START:STOP:STEP, e.g. kloop=-600:0:50")
        knob, rng = (x.strip() for x in part.split("=", 1))
        knob = knob.replace("-", "_")
        if knob not in PHASE_KNOBS:
            raise BsprofError(f"--sweep knob {knob!r} is not one of {', '.join(PHASE_KNOBS)}")
        bits = rng.split(":")
        pct = any(b.strip().endswith("%") for b in bits)
        try:
            nums = [float(b.strip().rstrip("%")) for b in bits]
        except ValueError:
            raise BsprofError(f"--sweep {part!r}: START:STOP:STEP must be numbers, e.g. {knob}=-600:0:50") from None
        if len(nums) != 3 or nums[2] <= 0 or nums[1] < nums[0]:
            raise BsprofError(f"--sweep {part!r}: give START:STOP:STEP with STOP >= START and STEP > 0")
        span = (nums[1] - nums[0]) / nums[2]  # inf for a tiny STEP over a wide range
        if not (math.isfinite(span) and span < 1e6):
            raise BsprofError(f"--sweep {part!r} has over a million points; use at most 101 per axis (a bigger STEP)")
        n = int(math.floor(span + 1e-9)) + 1
        if n > 101:
            raise BsprofError(f"--sweep {part!r} has {n} points; use at most 101 per axis (a bigger STEP)")
        vals = [nums[0] + i * nums[2] for i in range(n)]
        axes[knob] = [f"{v:g}%" for v in vals] if pct else vals
        if knob in list(axes)[:-1]:
            raise BsprofError(f"--sweep names {knob} twice")
    if not 1 <= len(axes) <= 2:
        raise BsprofError("--sweep takes one or two axes, e.g. kloop=-600:0:50,phase1=-600:0:50")
    return axes


# ---------------------------------------------------------------------------------------------
# applying deltas
# ---------------------------------------------------------------------------------------------


def _check(what: str, base: float, new: float, delta: tuple[float, float]) -> None:
    if new < 0:
        s, a = delta
        shown = f"{(s - 1) * 100:+g}%" if s != 1 else f"{a:+,.0f} cycles"
        # the bound in the unit the delta was given in: a percent cut cannot go below -100%
        bound = "-100%" if s != 1 else f"-{base:,.0f}"
        raise BsprofError(
            f"{shown} on {NAMES.get(what, what)} makes it negative (baseline {base:,.0f} cycles/tile); "
            f"use a delta above {bound}"
        )


def apply(p: ModelParams, deltas: dict) -> ModelParams:
    """The projected parameters (deterministic inputs) for normalised ``deltas``."""
    d = deltas
    q = copy.copy(p)
    ident = (1.0, 0.0)
    st = p.structure
    if "acc_stages" in d:
        st = replace(st, acc_stages=d["acc_stages"])
    s, a = d.get("tma0", ident)
    t0 = p.mma.tma0 * s + a
    _check("tma0", p.mma.tma0, t0, d.get("tma0", ident))
    s, a = d.get("kloop", ident)
    k = p.mma.kloop * s + a
    _check("kloop", p.mma.kloop, k, d.get("kloop", ident))
    W = p.epi.warps
    N = d.get("epi_warps", W)
    f1, _ = warp_scale(p, N)
    f2 = f1  # Phase 2's stores share the SM's store path the same way
    p1, p2 = [], []
    for j in range(N):
        for knob, src, dst, f in (("phase1", p.epi.phase1, p1, f1), ("phase2", p.epi.phase2, p2, f2)):
            s, a = d.get(knob, ident)
            v = src[j % W] * f * s + a
            _check(knob, src[j % W] * f, v, d.get(knob, ident))
            dst.append(v)
    q.structure = st
    q.mma = replace(p.mma, tma0=t0, kloop=k)
    q.epi = EpilogueSide(tuple(p1), tuple(p2), p.epi.overhead)
    return q


MIN_TMEM_WARPS = 4  # a warp reads only its own 32-lane quarter of TMEM: 128 rows need 4 warps
MAX_EPI_WARPS = 30  # 32 warps per CTA, less the producer and MMA warps


def check_epi_warps(p: ModelParams, n: int) -> None:
    """One line for a warp count the structure cannot take."""
    name = p.structure.name
    if name.startswith("hopper"):
        raise BsprofError(
            f"--epi-warps {n}: a {name} consumer warpgroup runs its own epilogue, so its warp count "
            "is the K-loop's too (4 per warpgroup); model ping-pong with --acc-stages 2 instead"
        )
    if n < MIN_TMEM_WARPS:
        raise BsprofError(
            f"--epi-warps {n}: each epilogue warp reads only its own 32 TMEM lanes, so a 128-row "
            f"accumulator needs at least {MIN_TMEM_WARPS} epilogue warps; use {MIN_TMEM_WARPS}..{MAX_EPI_WARPS}"
        )
    if n > MAX_EPI_WARPS:
        raise BsprofError(
            f"--epi-warps {n}: a CTA holds 32 warps, 2 of them producer and MMA; use {MIN_TMEM_WARPS}..{MAX_EPI_WARPS}"
        )


def warp_scale(p: ModelParams, n: int) -> tuple[float, dict]:
    """Factor on each warp's Phase 1 when the tile moves from the calibrated W warps to ``n``, and
    what it rests on: W/n times the measured shared-path slowdown t(n)/t(W)."""
    from bsprof.analyzers.model.ceiling import shipped_curve

    W = p.epi.warps
    if n == W:
        return 1.0, {}
    check_epi_warps(p, n)
    curve = shipped_curve()
    if curve is None:
        return W / n, {"ceiling": "none shipped: W/N (no shared-path limit)"}
    f, extrapolated = curve.phase_scale(W, n)
    return f, {
        "ceiling": {
            "curve": f"{curve.device}: {curve.what}",
            "warps_measured": list(curve.warps),
            "applies_to": "Phase 1 and Phase 2 per warp",
            "split": W / n,
            "shared_path_slowdown": f * n / W,
            "phase1_scale": f,
            "extrapolated": extrapolated,
            "stand_in": p.structure.name == "blackwell",
        }
    }


def _knobs(deltas_list: list[dict], p: ModelParams) -> mc.Knobs:
    import numpy as np

    W = p.epi.warps
    scale = {k: [] for k in PHASE_KNOBS}
    add = {k: [] for k in PHASE_KNOBS}
    for d in deltas_list:
        N = d.get("epi_warps", W)
        for k in PHASE_KNOBS:
            s, a = d.get(k, (1.0, 0.0))
            if k in ("phase1", "phase2"):
                s = s * warp_scale(p, N)[0]
            scale[k].append(s)
            add[k].append(a)
    return mc.Knobs(
        {k: np.array(v) for k, v in scale.items()},
        {k: np.array(v) for k, v in add.items()},
        deltas_list[0].get("epi_warps", W),
    )


def _sto_kw(p: ModelParams) -> dict:
    kw = {}
    if p.sto_epi_overhead is not None:
        kw["epi_overhead"] = p.sto_epi_overhead
    if p.sto_mma_overhead is not None:
        kw["mma_overhead"] = p.sto_mma_overhead
    if "sto_handoff" in p.observed:
        kw["handoff"] = p.observed["sto_handoff"]
    if "sto_phase2_blocking" in p.observed:
        kw["phase2_blocking"] = p.observed["sto_phase2_blocking"]
    return kw


def _run_sto(p: ModelParams, deltas_list: list[dict], tiles: int, seed: int, chunk: int = 48) -> list[dict]:
    """Monte Carlo of every deltas dict (index 0 is the baseline), common random numbers."""
    import numpy as np

    W = p.epi.warps
    R = mc.REPLICAS
    steps = mc.steps_for(tiles, R)
    groups: dict[tuple, list[int]] = {}
    for i, d in enumerate(deltas_list):
        groups.setdefault((d.get("acc_stages"), d.get("epi_warps", W)), []).append(i)
    maxN = max(n for _, n in groups)
    base = mc.draw(p, steps, R, maxN, seed=seed)
    out: list[dict] = [None] * len(deltas_list)  # type: ignore[list-item]
    kw = _sto_kw(p)
    for (S, N), idx in groups.items():
        b = dict(base, phase1=base["phase1"][:, :, :N], phase2=base["phase2"][:, :, :N])
        for c0 in range(0, len(idx), chunk):
            sel = idx[c0 : c0 + chunk]
            r = mc.simulate(b, p, _knobs([deltas_list[i] for i in sel], p), acc_stages=S, **kw)
            for j, i in enumerate(sel):
                out[i] = {k: (v[j] if isinstance(v, np.ndarray) else v) for k, v in r.items()}
    return out


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


def _own(p: ModelParams, eq: Equilibrium) -> float:
    """A coop consumer's own epilogue time per tile (the MC counts it between K-loops)."""
    st = p.structure
    if st.name != "hopper-coop":
        return 0.0
    e = p.epi
    return sum(e.phase1[w] + st.phase2_blocking * e.phase2[w] for w in range(e.warps)) / e.warps + 2 * st.handoff


@dataclass
class Projection:
    params: ModelParams
    deltas: dict
    det_before: Equilibrium
    det_after: Equilibrium
    sto: dict | None = None
    sentence: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def wall_ratio(self) -> float:
        return self.det_after.period / self.det_before.period

    def to_json(self) -> dict:
        b, a = self.det_before, self.det_after
        det = {
            "baseline_tile_cycles": b.period,
            "projected_tile_cycles": a.period,
            "wall_ratio": a.period / b.period,
            "binding_before": b.binding,
            "binding_after": a.binding,
            "deficit": b.deficit,
            "deficit_after": a.deficit,
            "critical_before": b.critical,
            "critical_after": a.critical,
            "epi_wait_before": b.epi_wait,
            "epi_wait_after": a.epi_wait,
            "ml_wait_before": b.ml_wait,
            "ml_wait_after": a.ml_wait,
            "kloop_slack_before": b.kloop_slack,
            "kloop_slack_after": a.kloop_slack,
            "phase1_slack_before": b.phase1_slack,
            "phase1_slack_after": a.phase1_slack,
            "cycles_before": b.cycles,
            "cycles_after": a.cycles,
        }
        doc = {
            "deterministic": det,
            "stochastic": self.sto,
            "deltas": {k: (_show_delta(v) if isinstance(v, tuple) else v) for k, v in self.deltas.items()},
            "structure": self.params.structure.to_json(),
            "sentence": self.sentence,
            "params": self.params.to_json(),
        }
        if self.params.wall_ms:
            doc["wall_ms"] = {
                "baseline": self.params.wall_ms,
                "projected_deterministic": self.params.wall_ms * det["wall_ratio"],
            }
            if self.sto:
                doc["wall_ms"]["projected_stochastic"] = self.params.wall_ms * self.sto["wall_ratio"]
        doc.update(self.extra)
        return doc


def _show_delta(v: tuple[float, float]) -> str:
    s, a = v
    if s != 1.0:
        return f"{(s - 1) * 100:+g}%" + (f" {a:+g}" if a else "")
    return f"{a:+g}"


def _sto_summary(base: dict, proj: dict, own_b: float = 0.0, own_a: float = 0.0, band: bool = False) -> dict:
    """``own_*``: per-tile work a Hopper consumer does between its K-loops (not waiting)."""
    import numpy as np

    pb, pp = base["period"], proj["period"]
    ratio = pp / pb
    out = {
        "baseline_tile_cycles": float(pb.mean()),
        "projected_tile_cycles": float(pp.mean()),
        "wall_ratio": float(pp.mean() / pb.mean()),
        "binding_before": "epilogue" if float(base["gated"].mean()) > 0.5 else "producer",
        "binding_after": "epilogue" if float(proj["gated"].mean()) > 0.5 else "producer",
        "epi_wait_before": float(base["epi_wait"].mean()) - own_b,
        "epi_wait_after": float(proj["epi_wait"].mean()) - own_a,
        "ml_wait_before": float(base["ml_wait"].mean()),
        "ml_wait_after": float(proj["ml_wait"].mean()),
        "mma_gated_fraction_before": float(base["gated"].mean()),
        "mma_gated_fraction_after": float(proj["gated"].mean()),
        "tiles": int(base["tiles"]),
        "replicas": int(len(pb)),
    }
    if band:
        out["wall_ratio_p05"] = float(np.percentile(ratio, 5))
        out["wall_ratio_p95"] = float(np.percentile(ratio, 95))
    return out


def project(
    params: ModelParams,
    deltas: dict | None = None,
    *,
    stochastic: bool = True,
    tiles: int = DEFAULT_TILES,
    seed: int = 0,
    band: bool = False,
) -> Projection:
    """Baseline vs projected equilibrium for ``deltas`` (see ``parse_deltas``)."""
    d = parse_deltas(deltas)
    extra = {}
    if "epi_warps" in d:
        extra = warp_scale(params, d["epi_warps"])[1]
    if tiles < 1000:
        raise BsprofError(f"--tiles {tiles} is too few for a stable Monte Carlo; use at least 1,000")
    before = solve(params)
    after = solve(apply(params, d))
    sto = None
    if stochastic:
        rb, rp = _run_sto(params, [{}, d], tiles, seed)
        sto = _sto_summary(rb, rp, _own(params, before), _own(apply(params, d), after), band=band)
        if params.structure.name == "hopper-coop":  # no separate epilogue warps to wait
            sto["ml_wait_before"] = sto["ml_wait_after"] = 0.0
    pj = Projection(params, d, before, after, sto, extra=extra)
    pj.sentence = explain(pj)
    return pj


@dataclass
class SweepResult:
    axes: dict  # knob -> list of values (as given)
    det_ratio: list  # nested lists [i][j] (j only with two axes)
    sto_ratio: list
    det_binding: list
    baseline_det: float
    baseline_sto: float
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "axes": self.axes,
            "deterministic": {
                "baseline_tile_cycles": self.baseline_det,
                "wall_ratio": self.det_ratio,
                "binding": self.det_binding,
            },
            "stochastic": {"baseline_tile_cycles": self.baseline_sto, "wall_ratio": self.sto_ratio},
            **self.extra,
        }

    def rows(self) -> list[dict]:
        """Long form, one row per grid point (for --csv)."""
        knobs = list(self.axes)
        out = []
        for i, v0 in enumerate(self.axes[knobs[0]]):
            for j, v1 in enumerate(self.axes[knobs[1]] if len(knobs) == 2 else [None]):
                at = (lambda g: g[i][j]) if len(knobs) == 2 else (lambda g: g[i])
                row = {knobs[0]: v0}
                if len(knobs) == 2:
                    row[knobs[1]] = v1
                row.update(
                    det_wall_ratio=at(self.det_ratio),
                    det_binding=at(self.det_binding),
                    sto_wall_ratio=at(self.sto_ratio),
                )
                out.append(row)
        return out


def sweep(
    params: ModelParams,
    axes: dict,
    fixed: dict | None = None,
    *,
    tiles: int = DEFAULT_TILES,
    seed: int = 0,
    stochastic: bool = True,
) -> SweepResult:
    """Projections over a one- or two-axis grid (other deltas held at ``fixed``)."""
    fixed = parse_deltas(fixed)
    knobs = list(axes)
    grid = []
    for v0 in axes[knobs[0]]:
        row = []
        for v1 in axes[knobs[1]] if len(knobs) == 2 else [None]:
            raw = {knobs[0]: v0}
            if len(knobs) == 2:
                raw[knobs[1]] = v1
            d = dict(fixed)
            d.update(parse_deltas(raw))
            row.append(d)
        grid.append(row)
    flat = [d for row in grid for d in row]
    base = solve(params)
    det = [solve(apply(params, d)) for d in flat]
    if stochastic:
        res = _run_sto(params, [{}] + flat, tiles, seed)
        sb = res[0]
        sto = [_sto_summary(sb, r) for r in res[1:]]
    else:
        sto = [{"wall_ratio": math.nan}] * len(flat)
        sb = None
    n1 = len(grid[0])

    def shape(vals):
        rows = [vals[i * n1 : (i + 1) * n1] for i in range(len(grid))]
        return rows if len(knobs) == 2 else [r[0] for r in rows]

    return SweepResult(
        axes={k: list(v) for k, v in axes.items()},
        det_ratio=shape([e.period / base.period for e in det]),
        sto_ratio=shape([s["wall_ratio"] for s in sto]),
        det_binding=shape([e.binding for e in det]),
        baseline_det=base.period,
        baseline_sto=float(sb["period"].mean()) if sb is not None else math.nan,
    )


# ---------------------------------------------------------------------------------------------
# the plain sentence, and the two analyses the embedded measurement is checked against
# ---------------------------------------------------------------------------------------------


def critical_label(structure: str, critical: str, short: bool = False) -> str:
    """Words for a critical cycle, in the structure's own terms."""
    table = {
        ("hopper-coop", "accumulator-cycle"): (
            "consumer loop",
            "the consumer warpgroups' loop (K-loop, then their own epilogue)",
        ),
        ("hopper-pingpong", "accumulator-cycle"): (
            "warpgroup loop",
            "each consumer warpgroup's K-loop + epilogue (two tiles)",
        ),
        ("hopper-pingpong", "mma-chain"): ("tensor core", "the shared tensor core (K-loops back to back)"),
        ("hopper-pingpong", "epilogue-chain"): ("epilogue order", "the ordered epilogues"),
        ("hopper-coop", "mma-chain"): ("consumer loop", "the consumer warpgroups' loop"),
    }
    generic = {
        "mma-chain": ("MMA loop", "the MMA warp's own loop"),
        "epilogue-chain": ("epilogue loop", "the epilogue warps' own loop"),
        "accumulator-cycle": ("acc hand-off", "the accumulator hand-off cycle (MMA -> epilogue -> MMA)"),
    }
    pair = table.get((structure, critical), generic[critical])
    return pair[0] if short else pair[1]


def explain(pj: Projection) -> str:
    b, a = pj.det_before, pj.det_after
    saved = b.period - a.period
    pct = 100 * saved / b.period
    moved = [NAMES[k] for k in PHASE_KNOBS if k in pj.deltas]
    name = pj.params.structure.name
    name_after = name
    if "acc_stages" in pj.deltas:
        if name.startswith("hopper") and pj.deltas["acc_stages"] >= 2:
            moved.append("ping-pong (2 consumer warpgroups alternating)")
            name_after = "hopper-pingpong"
        else:
            moved.append(f"{pj.deltas['acc_stages']} accumulator stage{'' if pj.deltas['acc_stages'] == 1 else 's'}")
    if "epi_warps" in pj.deltas:
        moved.append(f"{pj.deltas['epi_warps']} epilogue warps")
    what = " + ".join(moved) if moved else "no change"
    crit = {c: critical_label(name, c) for c in ("mma-chain", "epilogue-chain", "accumulator-cycle")}
    crit_after = {c: critical_label(name_after, c) for c in ("mma-chain", "epilogue-chain", "accumulator-cycle")}
    if not moved:
        return (
            f"Baseline: {crit[b.critical]} sets the {b.period:,.0f}-cycle tile; the K-loop has "
            f"{b.kloop_slack:,.0f} and Phase 1 {b.phase1_slack:,.0f} cycles/tile of slack before they cost time."
        )
    if abs(saved) < 0.5:
        dw = a.epi_wait - b.epi_wait
        more = f"{abs(dw):,.0f} cycles/tile {'longer' if dw > 0 else 'less'}"
        return (
            f"Does not pay: {crit[b.critical]} binds and the change ({what}) stays off it; "
            f"the MMA warp just waits {more} for the accumulator."
            if b.binding == "epilogue"
            else f"Does not pay: {crit[b.critical]} binds and the change ({what}) stays within the epilogue's slack."
        )
    if saved > 0:
        flip = ""
        if a.binding != b.binding or a.critical != b.critical:
            flip = f"; after it {crit_after[a.critical]} binds"
            if not any(k in pj.deltas for k in STRUCT_KEYS):
                flip += ", so further cuts on the same phase stop paying"
        return f"Pays {pct:.2f}% ({saved:,.0f} cycles/tile): the change ({what}) shortens {crit[b.critical]}{flip}."
    return (
        f"Costs {-pct:.2f}% ({-saved:,.0f} cycles/tile): the change ({what}) lengthens {crit_after[a.critical]}, "
        f"which {'now ' if a.critical != b.critical else ''}binds."
    )


def required_delta(
    params: ModelParams,
    knob: str,
    target_ratio: float,
    *,
    stochastic: bool = False,
    lo: float = -4000.0,
    tiles: int = 20_000,
) -> float | None:
    """Cycles of ``knob`` (negative = shorter) that make the projected wall ratio ``target_ratio``."""

    def ratio(x: float) -> float:
        if stochastic:
            return project(params, {knob: x}, tiles=tiles).sto["wall_ratio"]
        return solve(apply(params, parse_deltas({knob: x}))).period / solve(params).period

    base = getattr(params.mma, knob, None)
    floor = -(base if base is not None else min(params.epi.phase1 if knob == "phase1" else params.epi.phase2))
    lo = max(lo, floor + 1)
    if ratio(lo) > target_ratio:
        return None
    hi = 0.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if ratio(mid) > target_ratio:
            hi = mid
        else:
            lo = mid
        if hi - lo < 0.5:
            break
    return (lo + hi) / 2


def linear_rule(
    params: ModelParams, perturbations: list[float], knob: str = "kloop", factor: float = 4.1
) -> list[dict]:
    """The old rule ``epi_wait ≈ deficit × 4.1`` (deficit = epilogue side ml_wait+Phase 1 minus MMA side
    TMA0+K-loop, as measured) against the model's epi_wait, for perturbations of one phase."""
    obs = params.observed
    ml = obs.get("ml_wait") or 0.0
    rows = []
    for x in perturbations:
        q = apply(params, parse_deltas({knob: x}))
        eq = solve(q)
        p1 = sum(q.epi.phase1) / q.epi.warps
        naive = (ml + p1) - (q.mma.tma0 + q.mma.kloop)
        rows.append(
            {
                "delta": x,
                "naive_deficit": naive,
                "rule_epi_wait": max(0.0, factor * naive),
                "model_epi_wait": eq.epi_wait,
                "difference": eq.epi_wait - max(0.0, factor * naive),
            }
        )
    return rows
