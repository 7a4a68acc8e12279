"""Stochastic equilibrium: the event-graph recurrence run on per-warp random phase times.

Replicas stand for SMs: ``replicas`` independent runs of ``steps`` tiles each, advanced together
as numpy arrays, so one Python step moves every replica (and every grid point of a sweep) by one
tile. Each step draws every epilogue warp's own Phase 1/2, so the accumulator barrier sees the
*max* over warps and slow tails delay the MMA warp exactly as they do on the GPU. Baseline and
projections share the same draws (common random numbers): ratios are not blurred by sampling noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bsprof.analyzers.model.params import ModelParams

WARMUP = 24
REPLICAS = 256
Z95 = 1.6448536269514722
BIG = 1e30


@dataclass
class Knobs:
    """Per grid point scale and add of each phase (arrays of shape (G,)), plus warp count."""

    scale: dict
    add: dict
    epi_warps: int


def steps_for(tiles: int, replicas: int = REPLICAS) -> int:
    return WARMUP + max(2, math.ceil(tiles / replicas))


def lognormal_sigma(mean: float, p95: float) -> float:
    """sigma of a lognormal with this mean and 95th percentile (0 when p95 <= mean)."""
    r = math.log(max(p95, 1e-9) / max(mean, 1e-9))
    if r <= 0:
        return 0.0
    disc = Z95 * Z95 - 2 * r
    return Z95 - math.sqrt(disc) if disc > 0 else Z95


def draw(p: ModelParams, steps: int, replicas: int, epi_warps: int, seed: int = 0) -> dict:
    """Base draws: tma0/kloop (steps, replicas), phase1/phase2 (steps, replicas, epi_warps)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    T, R, N = steps, replicas, epi_warps
    if p.samples is not None:
        s = p.samples
        n, W = s.phase1.shape
        idx = rng.integers(0, n, size=(T, R))
        cols = np.arange(N) % W
        # warps beyond the measured ones come from other tiles, so they are not copies
        tile_of = np.where(np.arange(N)[None, None, :] < W, idx[:, :, None], rng.integers(0, n, size=(T, R, N)))
        return {
            "tma0": s.tma0[idx].astype(float),
            "kloop": s.kloop[idx].astype(float),
            "phase1": s.phase1[tile_of, cols[None, None, :]].astype(float),
            "phase2": s.phase2[tile_of, cols[None, None, :]].astype(float),
        }
    f = p.fitted
    W = p.epi.warps
    means = np.array([p.epi.phase1[w % W] for w in range(N)])
    sig = np.array([lognormal_sigma(f.phase1_mean[w % W], f.phase1_p95[w % W]) for w in range(N)])
    # the fitted shape (sigma) is kept; the mean is the model's current per-warp mean
    mu = np.log(np.maximum(means, 1e-9)) - sig**2 / 2
    c = min(max(f.corr, 0.0), 1.0)
    x = math.sqrt(c) * rng.standard_normal((T, R, 1)) + math.sqrt(1 - c) * rng.standard_normal((T, R, N))
    out = {"phase1": np.exp(mu + sig * x)}

    def cv_draw(mean, cv, shape):
        if cv <= 0:
            return np.full(shape, float(mean))
        s2 = math.log(1 + cv * cv)
        return np.exp(math.log(max(mean, 1e-9)) - s2 / 2 + math.sqrt(s2) * rng.standard_normal(shape))

    p2 = np.array([p.epi.phase2[w % W] for w in range(N)])
    out["phase2"] = cv_draw(1.0, f.phase2_cv, (T, R, N)) * p2
    out["kloop"] = cv_draw(p.mma.kloop, f.kloop_cv, (T, R))
    out["tma0"] = cv_draw(p.mma.tma0, f.tma0_cv, (T, R))
    return out


def simulate(
    base: dict,
    p: ModelParams,
    knobs: Knobs,
    *,
    acc_stages: int | None = None,
    epi_overhead: float | None = None,
    mma_overhead: float | None = None,
    handoff: float | None = None,
    phase2_blocking: float | None = None,
    warmup: int = WARMUP,
) -> dict:
    """Run the recurrence for every grid point; returns per (G, replicas) period and waits."""
    import numpy as np

    st = p.structure
    S = max(1, int(acc_stages if acc_stages is not None else st.acc_stages))
    h = float(st.handoff if handoff is None else handoff)
    ell = float(p.epi.overhead if epi_overhead is None else epi_overhead)
    om = float(p.mma.overhead if mma_overhead is None else mma_overhead)
    rho = float(st.release_frac)
    sig = float(st.phase2_blocking if phase2_blocking is None else phase2_blocking) if st.release_after_phase2 else 0.0
    T, R = base["kloop"].shape
    G = len(knobs.scale["kloop"])

    def col(knob, dims):
        sc = np.asarray(knobs.scale[knob], float).reshape((G,) + (1,) * dims)
        ad = np.asarray(knobs.add[knob], float).reshape((G,) + (1,) * dims)
        return sc, ad

    (s_t0, a_t0), (s_k, a_k) = col("tma0", 1), col("kloop", 1)
    (s_p1, a_p1), (s_p2, a_p2) = col("phase1", 2), col("phase2", 2)
    N = base["phase1"].shape[2]
    m_prev = np.zeros((G, R))
    T_e = st.epilogue_tokens
    e_hist = [np.full((G, R, N), -ell) for _ in range(T_e)]  # epilogue ends of the last T_e tiles
    e_prev = e_hist[0]
    ring = [np.full((G, R), -BIG) for _ in range(S)]
    mma_wait = np.zeros((G, R))
    ml_wait = np.zeros((G, R))
    gated = np.zeros((G, R))
    # least-squares slope of tile-done time (last warp's Phase 2 end) over the measured tiles:
    # endpoint differences would carry the jitter of whichever side is not binding
    n_meas = T - warmup
    ibar = (n_meas - 1) / 2.0
    sxx = sum((j - ibar) ** 2 for j in range(n_meas))
    sxy = np.zeros((G, R))
    for i in range(T):
        mk = np.maximum(base["tma0"][i] * s_t0 + a_t0, 0.0) + np.maximum(base["kloop"][i] * s_k + a_k, 0.0)
        p1 = np.maximum(base["phase1"][i] * s_p1 + a_p1, 0.0)
        p2 = np.maximum(base["phase2"][i] * s_p2 + a_p2, 0.0)
        ready = m_prev + om
        freed = ring[i % S] + h
        a = np.maximum(ready, freed)
        m = a + mk
        u = np.maximum(m[..., None] + h, e_hist[i % T_e] + ell)
        ring[i % S] = (u + rho * p1 + sig * p2).max(axis=-1)
        e = u + p1 + p2
        if i >= warmup:
            mma_wait += a - ready
            gated += freed > ready
            ml_wait += (u - e_prev).mean(axis=-1)
        m_prev, e_prev = m, e
        e_hist[i % T_e] = e
        if i >= warmup:
            # with T_e warpgroups storing in turn, tile-done times zig-zag around the line;
            # the mean over the last T_e tiles does not
            sxy += (i - warmup - ibar) * sum(h.max(axis=-1) for h in e_hist) / T_e
    return {
        "period": sxy / sxx,
        "epi_wait": mma_wait / n_meas,
        "ml_wait": ml_wait / n_meas,
        "gated": gated / n_meas,
        "tiles": n_meas * R,
        "done": e.max(axis=-1),
    }  # the last tile's output stored: the run's makespan
