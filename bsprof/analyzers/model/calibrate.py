"""Every model input from a timing table, plus the two things no table measures directly: the
structure (from which warps hold which roles) and the per-tile latency that closes the measured
tile period (what the binding cycle spends outside the recorded phases)."""

from __future__ import annotations

import math
from dataclasses import replace

from bsprof.analyzers.model.params import EpilogueSide, Fitted, MmaSide, ModelParams, Samples, Structure
from bsprof.errors import BsprofError

# the closure runs on the same draws a default projection uses (seed 0, 50,000 tiles), so the
# stochastic baseline of `bsprof model` lands on the measured period
MC_CAL_REPLICAS = 256
MC_CAL_TILES = 50_000
MC_CAL_SEED = 0


def detect_structure(table) -> str:
    """``blackwell`` when MMA and epilogue are different warps; a Hopper consumer warp has rows under
    both roles: ``hopper-pingpong`` when consecutive tiles go to disjoint consumer warps, else coop."""
    mma = table[table["role"] == "mma"]
    epi = table[table["role"] == "epilogue"]
    both = set(zip(mma["cta"], mma["warp"])) & set(zip(epi["cta"], epi["warp"]))
    if not both:
        return "blackwell"
    sets = mma.groupby(["cta", "tile"])["warp"].apply(frozenset)
    disjoint = total = 0
    for cta, g in sets.groupby(level=0):
        vals = list(g.sort_index().to_numpy())
        for x, y in zip(vals, vals[1:]):
            total += 1
            disjoint += not (x & y)
    return "hopper-pingpong" if total and disjoint > 0.8 * total else "hopper-coop"


def observed_period(table, stride: int = 1) -> float:
    """Median over CTAs of the slope of MMA-side tile start vs tile index (first tile dropped).
    ``stride`` > 1 (ping-pong: tile t runs on warpgroup t % 2) takes the slope within each
    warpgroup's own tiles: the two warpgroups start their first tiles together, and across them
    the starts zig-zag around the line."""
    import numpy as np

    mma = table[table["role"] == "mma"]
    starts = mma.groupby(["cta", "tile"])["start"].min().reset_index()
    slopes = []
    for (_, _), g in starts.groupby([starts["cta"], starts["tile"] % stride]):
        g = g[g["tile"] > g["tile"].min()].sort_values("tile")
        if len(g) >= 2:
            dt = float(g["tile"].iloc[-1] - g["tile"].iloc[0])
            if dt > 0:
                slopes.append(float(g["start"].iloc[-1] - g["start"].iloc[0]) / dt)
    if not slopes:
        raise BsprofError(
            "timing table has fewer than two tiles per CTA; capture a problem with more tiles "
            "per CTA (a larger --mnkl) so the tile period can be measured"
        )
    return float(np.median(slopes))


def _per_tile(table):
    """(tiles DataFrame index (cta, tile), tma0, kloop, acc_wait, phase1 (n, W), phase2 (n, W), ml_wait)."""
    import numpy as np

    t = table.assign(dur=(table["end"] - table["start"]).astype("float64"))
    mma = t[t["role"] == "mma"]
    per = mma.pivot_table(index=["cta", "tile"], columns="phase", values="dur", aggfunc="max")
    epi = t[t["role"] == "epilogue"].copy()
    epi["rank"] = epi.groupby(["cta", "tile", "phase"])["warp"].rank(method="first").astype(int) - 1
    W = int(epi[epi["phase"] == "phase1"].groupby(["cta", "tile"]).size().mode().iloc[0])
    p1 = epi[epi["phase"] == "phase1"].pivot_table(index=["cta", "tile"], columns="rank", values="dur")
    p1 = p1[[c for c in p1.columns if c < W]].dropna()
    keys = per.index.intersection(p1.index)
    if len(keys) == 0:
        raise BsprofError("timing table: no tile has both MMA and epilogue Phase 1 rows; capture again")
    p2 = epi[epi["phase"] == "phase2"].pivot_table(index=["cta", "tile"], columns="rank", values="dur")
    p2 = p2.reindex(index=keys, columns=range(W)).fillna(0.0) if len(p2) else None

    def col(name: str):
        return per.loc[keys, name].fillna(0.0).to_numpy() if name in per.columns else np.zeros(len(keys))

    ml = epi[epi["phase"] == "ml_wait"]["dur"]
    return {
        "tma0": col("tma0"),
        "kloop": col("kloop"),
        "acc_wait": col("acc_wait"),
        "phase1": p1.loc[keys].to_numpy(dtype=float),
        "phase2": p2.to_numpy(dtype=float) if p2 is not None else np.zeros((len(keys), W)),
        "ml_wait": float(ml.mean()) if len(ml) else None,
        "tiles": len(keys),
        "warps": W,
        "keys": keys,
    }


def pingpong_acc_wait(table, keys):
    """Per tile, how long the tensor cores sat idle waiting for the tile's warpgroup: from the end
    of the previous tile's K-loop (the other warpgroup hands the tensor cores over there) to this
    tile's ``acc_acquired``, floored at 0. That is the model's "MMA waits for a free accumulator".
    The recorded ``acc_wait`` phase is the opposite: the warpgroup waiting for its turn."""
    import numpy as np

    mma = table[table["role"] == "mma"]
    acq = mma[mma["phase"] == "tma0"].groupby(["cta", "tile"])["start"].min()
    kend = mma[mma["phase"] == "kloop"].groupby(["cta", "tile"])["end"].max()
    out = np.zeros(len(keys))
    for i, (cta, tile) in enumerate(keys):
        prev = (cta, tile - 1)
        if prev in kend.index and (cta, tile) in acq.index:
            out[i] = max(0.0, float(acq[(cta, tile)] - kend[prev]))
    return out


def calibrate(
    table,
    structure: str | None = None,
    *,
    acc_stages: int | None = None,
    release_frac: float | None = None,
    handoff: float | None = None,
    stochastic: bool = True,
) -> ModelParams:
    """Model inputs from a (validated) timing table; ``structure`` defaults to what the roles say."""
    from bsprof.analyzers.timing.table import validate

    validate(table)
    name = structure or detect_structure(table)
    d = _per_tile(table)
    if name == "hopper-pingpong":
        d["acc_wait"] = pingpong_acc_wait(table, d["keys"])
    st = Structure.named(name, acc_stages, release_frac=release_frac, handoff=handoff)
    lam = observed_period(table, stride=st.acc_stages if name == "hopper-pingpong" else 1)
    epi_wait = float(d["acc_wait"].mean())
    p = ModelParams(
        structure=st,
        mma=MmaSide(float(d["tma0"].mean()), float(d["kloop"].mean())),
        epi=EpilogueSide(
            tuple(float(x) for x in d["phase1"].mean(axis=0)), tuple(float(x) for x in d["phase2"].mean(axis=0))
        ),
        observed_tile=lam,
        observed={
            "tile": lam,
            "epi_wait": epi_wait,
            "ml_wait": d["ml_wait"],
            "tiles": d["tiles"],
            "tma0": float(d["tma0"].mean()),
            "kloop": float(d["kloop"].mean()),
            "phase1": float(d["phase1"].mean()),
            "phase2": float(d["phase2"].mean()),
            "spread_avg": float((d["phase1"].max(1) - d["phase1"].min(1)).mean()) if d["warps"] > 1 else 0.0,
        },
        samples=Samples(d["tma0"], d["kloop"], d["phase1"], d["phase2"]),
        source="timing table",
        notes=[
            f"structure {name} " + ("(given)" if structure else "(from the table's roles)"),
            f"{d['tiles']:,} tiles x {d['warps']} epilogue warps calibrate the distributions",
        ],
    )
    p = close_deterministic(p, mma_waits=epi_wait > 0.02 * lam)
    return close_stochastic(p) if stochastic else p


def close_deterministic(p: ModelParams, *, mma_waits: bool) -> ModelParams:
    """Put the measured period's unexplained cycles on the binding cycle (see docs/model.md)."""
    from bsprof.analyzers.model.eventgraph import solve

    lam = p.observed_tile
    if lam is None:
        return p
    st, m, e = p.structure, p.mma, p.epi
    mk = m.tma0 + m.kloop
    eq = solve(p)
    gap = lam - eq.period
    if gap < 0 and st.release_after_phase2 and max(e.phase2) > 0:
        # a Hopper consumer's stores are still in flight when its next K-loop starts
        over = -gap * st.acc_stages
        blocking = max(0.0, 1.0 - over / max(e.phase2))
        p.structure = replace(st, phase2_blocking=blocking)
        p.notes.append(
            f"the next K-loop overlaps {100 * (1 - blocking):.0f}% of Phase 2 (stores in flight) "
            "to make the measured period"
        )
        st = p.structure
        gap = lam - solve(p).period
    if gap <= 0:
        if gap < -0.02 * lam:
            p.notes.append(
                f"the recorded phases add up to {eq.period:,.0f} cycles, more than the measured "
                f"{lam:,.0f}-cycle tile: phases overlap more than the structure allows"
            )
        return p
    if st.release_after_phase2:
        S = st.acc_stages
        acc = eq.cycles["accumulator_cycle"]
        if acc >= eq.cycles["mma_chain"]:
            h = (
                st.handoff
                + (lam * S - (mk + 2 * st.handoff + max(e.phase1[w] + e.phase2[w] for w in range(e.warps)))) / 2
            )
            p.structure = replace(st, handoff=max(0.0, h))
            p.notes.append(
                f"consumer-loop latency {2 * p.structure.handoff:,.0f} cycles/tile closes the measured period"
            )
        else:
            p.mma = replace(m, overhead=lam - mk)
            p.notes.append(f"MMA-loop overhead {p.mma.overhead:,.0f} cycles/tile closes the measured period")
    elif mma_waits:
        ell = lam - max(e.phase1[w] + e.phase2[w] for w in range(e.warps))
        p.epi = replace(e, overhead=max(0.0, ell))
        p.notes.append(
            f"the MMA warp waits for the accumulator, so an epilogue-side cycle binds; the epilogue "
            f"loop needs {p.epi.overhead:,.0f} cycles/tile outside Phase 1/2 to make the measured period"
        )
    else:
        p.mma = replace(m, overhead=lam - mk)
        p.notes.append(f"MMA-loop overhead {p.mma.overhead:,.0f} cycles/tile closes the measured period")
    return p


def _closure_knob(p: ModelParams) -> str:
    from bsprof.analyzers.model.eventgraph import solve

    if p.structure.release_after_phase2:
        return "handoff" if solve(p).binding == "epilogue" else "mma_overhead"
    return "epi_overhead" if solve(p).binding == "epilogue" else "mma_overhead"


def close_stochastic(p: ModelParams, iters: int = 6) -> ModelParams:
    """Refit the closing latency so the Monte Carlo's mean period equals the measured one (the
    max over warps and the tails make the stochastic pipeline slower than its averages)."""
    import numpy as np

    from bsprof.analyzers.model import montecarlo as mc

    lam = p.observed_tile
    if lam is None:
        return p
    knob = _closure_knob(p)
    steps = mc.steps_for(MC_CAL_TILES, MC_CAL_REPLICAS)
    base = mc.draw(p, steps, MC_CAL_REPLICAS, p.epi.warps, seed=MC_CAL_SEED)
    ones = {k: np.ones(1) for k in ("tma0", "kloop", "phase1", "phase2")}
    zeros = {k: np.zeros(1) for k in ("tma0", "kloop", "phase1", "phase2")}
    knobs = mc.Knobs(ones, zeros, p.epi.warps)
    val = {"epi_overhead": p.epi.overhead, "mma_overhead": p.mma.overhead, "handoff": p.structure.handoff}[knob]
    gain = p.structure.acc_stages / 2 if knob == "handoff" else 1.0
    for _ in range(iters):
        out = mc.simulate(base, p, knobs, **{knob: val})
        err = lam - float(out["period"].mean())
        if abs(err) < 0.5:
            break
        val = max(0.0, val + gain * err)
        if val == 0.0 and err < 0:
            break
    if knob == "handoff" and val == 0.0 and err < -0.5 and max(p.epi.phase2) > 0:
        # still too slow with no hand-off at all: more of Phase 2 overlaps the next K-loop than the
        # averages say (the max over warps and the tails add what the overlap must take back)
        b = p.structure.phase2_blocking
        for _ in range(iters):
            out = mc.simulate(base, p, knobs, handoff=0.0, phase2_blocking=b)
            err = lam - float(out["period"].mean())
            if abs(err) < 0.5:
                break
            b = min(1.0, max(0.0, b + err * p.structure.acc_stages / max(p.epi.phase2)))
        p.observed["sto_phase2_blocking"] = b
    if knob == "epi_overhead":
        p.sto_epi_overhead = val
    elif knob == "mma_overhead":
        p.sto_mma_overhead = val
    else:
        p.sto_epi_overhead = None
        p.observed["sto_handoff"] = val
    return p


def fit_copula_corr(means, p95s, spread_avg: float, seed: int = 7) -> float:
    """Pairwise correlation of the per-warp Phase 1 copula that reproduces the mean per-tile spread."""
    import numpy as np

    from bsprof.analyzers.model.montecarlo import lognormal_sigma

    rng = np.random.default_rng(seed)
    W = len(means)
    z = rng.standard_normal((20000, 1))
    y = rng.standard_normal((20000, W))
    sig = np.array([lognormal_sigma(m, q) for m, q in zip(means, p95s)])
    mu = np.log(np.asarray(means, float)) - sig**2 / 2

    def spread(c):
        x = math.sqrt(c) * z + math.sqrt(1 - c) * y
        v = np.exp(mu + sig * x)
        return float((v.max(1) - v.min(1)).mean())

    lo, hi = 0.0, 0.999
    if spread(lo) <= spread_avg:
        return 0.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if spread(mid) > spread_avg:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fitted_params(
    structure: Structure,
    *,
    tma0: float,
    kloop: float,
    phase1_mean,
    phase1_p95,
    phase2,
    spread_avg: float,
    observed_tile: float | None,
    epi_wait: float | None,
    wall_ms: float | None = None,
    source: str = "",
    notes=None,
) -> ModelParams:
    """Model inputs from summary statistics (avg/p95 per warp) rather than a table."""
    corr = fit_copula_corr(phase1_mean, phase1_p95, spread_avg)
    p = ModelParams(
        structure=structure,
        mma=MmaSide(float(tma0), float(kloop)),
        epi=EpilogueSide(tuple(map(float, phase1_mean)), tuple(float(phase2) for _ in phase1_mean)),
        observed_tile=observed_tile,
        wall_ms=wall_ms,
        fitted=Fitted(tuple(map(float, phase1_mean)), tuple(map(float, phase1_p95)), corr),
        source=source,
        notes=list(notes or []),
    )
    lam = observed_tile or 0.0
    p = close_deterministic(p, mma_waits=bool(epi_wait and epi_wait > 0.02 * lam))
    return close_stochastic(p)
