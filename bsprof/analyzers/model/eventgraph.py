"""Deterministic equilibrium: the pipeline as a timed event graph, period = maximum cycle mean.

Events of tile i (times, cycles): ``A`` the MMA warp owns an accumulator stage, ``M`` its last MMA
is done ("mainloop done"), ``U_w`` epilogue warp w starts Phase 1, ``R`` the accumulator stage is
free again (the barrier fires when the *last* warp arrives, so R is a max over warps), ``E_w`` warp
w finished Phase 2. Arcs ``x -> y (weight, tokens)`` mean ``y_i >= x_{i-tokens} + weight``:

    M -> A   (overhead_mma, 1)        the MMA warp works one tile after another
    A -> M   (tma0 + kloop, 0)
    M -> U_w (handoff, 0)             "mainloop done" reaches the epilogue
    U_w -> R (release_w, 0)           release_w = release_frac*phase1_w (+ phase2_w on Hopper)
    R -> A   (handoff, acc_stages)    tile i+S may start once tile i's accumulator is free
    U_w -> E_w (phase1_w + phase2_w, 0)
    E_w -> U_w (overhead_epi, 1)      each epilogue warp works one tile after another

In max-plus algebra x(i) = A0 x(i) ⊕ A1 x(i-1) with arcs of k >= 2 tokens split into k one-token
arcs; the steady-state period is the eigenvalue of A0* A1, its maximum cycle mean (Karp). The
elementary cycles are few, which gives the closed form

    period = max( tma0+kloop+overhead_mma,                                   MMA chain
                  max_w overhead_epi+phase1_w+phase2_w,                       epilogue warp chain
                  max_w (tma0+kloop+2*handoff+release_w) / acc_stages )       accumulator cycle

``solve`` uses the closed form and ``max_cycle_mean`` checks it (the tests compare the two).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from bsprof.analyzers.model.params import ModelParams

NEG = -math.inf
TIE = 1e-6


@dataclass
class Equilibrium:
    period: float
    binding: str  # "producer" (MMA chain alone) or "epilogue" (a cycle through the epilogue)
    critical: str  # "mma-chain", "epilogue-chain" or "accumulator-cycle"
    deficit: float  # cycles/tile the non-binding side can grow before the binding side changes
    kloop_slack: float  # cycles/tile the K-loop can grow before it costs wall time
    phase1_slack: float  # cycles/tile Phase 1 (every warp) can grow before it costs wall time
    epi_wait: float  # MMA warp waiting for a free accumulator, per tile
    ml_wait: float  # epilogue warps' time between tiles (measured ml_wait: latency + idle)
    cycles: dict  # mean of each elementary cycle family

    def to_json(self) -> dict:
        return asdict(self)


def release_cycles(p: ModelParams, w: int) -> float:
    s = p.structure
    return s.release_frac * p.epi.phase1[w] + (s.phase2_blocking * p.epi.phase2[w] if s.release_after_phase2 else 0.0)


def solve(p: ModelParams) -> Equilibrium:
    """Closed-form maximum cycle mean plus the waits and slacks around it."""
    s, m, e = p.structure, p.mma, p.epi
    S = max(1, int(s.acc_stages))
    mk = m.tma0 + m.kloop
    mma_chain = mk + m.overhead
    epi_chains = [(e.overhead + e.phase1[w] + e.phase2[w]) / s.epilogue_tokens for w in range(e.warps)]
    acc = [(mk + 2 * s.handoff + release_cycles(p, w)) / S for w in range(e.warps)]
    epi_chain, acc_cycle = max(epi_chains), max(acc)
    period = max(mma_chain, epi_chain, acc_cycle)
    if mma_chain >= period - TIE and not (s.release_after_phase2 and acc_cycle >= period - TIE):
        binding, critical = "producer", "mma-chain"
    else:
        binding = "epilogue"
        critical = "accumulator-cycle" if acc_cycle >= epi_chain - TIE else "epilogue-chain"
    kloop_slack = min(period - mma_chain, S * (period - acc_cycle))
    rel_per_p1 = 1.0 if s.release_after_phase2 else s.release_frac
    p1_slack = period - epi_chain
    if rel_per_p1 > 0:
        p1_slack = min(p1_slack, S * (period - acc_cycle) / rel_per_p1)
    deficit = kloop_slack if binding == "epilogue" else p1_slack
    if s.release_after_phase2:
        # a Hopper consumer runs its own epilogue: that time is work, not waiting
        own = sum(e.phase1[w] + e.phase2[w] for w in range(e.warps)) / e.warps
        epi_wait = max(0.0, period - mma_chain - (own if s.name == "hopper-coop" else 0.0))
        ml_wait = (
            0.0
            if s.name == "hopper-coop"
            else period - sum(e.phase1[w] + e.phase2[w] for w in range(e.warps)) / e.warps
        )
    else:
        epi_wait = period - mma_chain  # MMA idle per tile
        ml_wait = period - sum(e.phase1[w] + e.phase2[w] for w in range(e.warps)) / e.warps
    return Equilibrium(
        period,
        binding,
        critical,
        max(0.0, deficit),
        max(0.0, kloop_slack),
        max(0.0, p1_slack),
        max(0.0, epi_wait),
        max(0.0, ml_wait),
        {"mma_chain": mma_chain, "epilogue_chain": epi_chain, "accumulator_cycle": acc_cycle},
    )


# --------------------------------------------------------------------------------------------
# The general form: build the event graph and take its maximum cycle mean (Karp).
# --------------------------------------------------------------------------------------------


def build_graph(p: ModelParams) -> tuple[list[str], list[tuple[int, int, float, int]]]:
    """Nodes and arcs ``(src, dst, weight, tokens)`` of the timed event graph of ``p``."""
    s, m, e = p.structure, p.mma, p.epi
    W = e.warps
    names = ["A", "M", "R"] + [f"U{w}" for w in range(W)] + [f"E{w}" for w in range(W)]
    A, M, R = 0, 1, 2
    U = [3 + w for w in range(W)]
    E = [3 + W + w for w in range(W)]
    arcs = [(M, A, m.overhead, 1), (A, M, m.tma0 + m.kloop, 0), (R, A, s.handoff, max(1, int(s.acc_stages)))]
    for w in range(W):
        arcs += [
            (M, U[w], s.handoff, 0),
            (U[w], R, release_cycles(p, w), 0),
            (U[w], E[w], e.phase1[w] + e.phase2[w], 0),
            (E[w], U[w], e.overhead, s.epilogue_tokens),
        ]
    return names, arcs


def max_cycle_mean(n: int, arcs: list[tuple[int, int, float, int]]) -> float:
    """Eigenvalue of a timed event graph: split multi-token arcs, form A0* ⊗ A1, run Karp."""
    import numpy as np

    split: list[tuple[int, int, float, int]] = []
    for src, dst, wgt, tok in arcs:
        if tok <= 1:
            split.append((src, dst, wgt, tok))
            continue
        prev = src
        for k in range(tok - 1):  # dummy places, each holding one token
            split.append((prev, n, wgt if k == 0 else 0.0, 1))
            prev = n
            n += 1
        split.append((prev, dst, 0.0, 1))
    A0 = np.full((n, n), NEG)
    A1 = np.full((n, n), NEG)
    for src, dst, wgt, tok in split:
        T = A1 if tok else A0
        T[dst, src] = max(T[dst, src], wgt)

    def mp(X, Y):  # max-plus product
        return np.max(X[:, :, None] + Y[None, :, :], axis=1)

    star = np.full((n, n), NEG)
    np.fill_diagonal(star, 0.0)
    power = star.copy()
    for _ in range(n):  # A0 is acyclic (no token-free cycle), so its star is a finite sum
        power = mp(A0, power)
        if not np.isfinite(power).any():
            break
        star = np.maximum(star, power)
    A = mp(star, A1)
    # Karp with a virtual source: D_0 = 0 everywhere, D_k = A ⊗ D_{k-1}
    D = np.full((n + 1, n), NEG)
    D[0] = 0.0
    for k in range(1, n + 1):
        D[k] = np.max(A + D[k - 1][None, :], axis=1)
    best = NEG
    for v in range(n):
        if not math.isfinite(D[n, v]):
            continue
        worst = math.inf
        for k in range(n):
            if math.isfinite(D[k, v]):
                worst = min(worst, (D[n, v] - D[k, v]) / (n - k))
        best = max(best, worst)
    return best


def period_karp(p: ModelParams) -> float:
    names, arcs = build_graph(p)
    return max_cycle_mean(len(names), arcs)


def makespan(p: ModelParams, tiles: int) -> float:
    """Cycles from the first tile's start to the last tile's stored output, for ``tiles`` tiles
    run from an idle start with every phase at its mean: the Monte Carlo recurrence
    (``montecarlo.simulate``) on one replica of constant draws. Unlike ``tiles x period`` it keeps
    the pipeline fill and the last epilogue, which no later tile hides when the tensor cores bind
    (ping-pong, Blackwell)."""
    import numpy as np

    from bsprof.analyzers.model import montecarlo as mc
    from bsprof.analyzers.model.params import PHASE_KNOBS

    n, e = int(tiles), p.epi
    base = {
        "tma0": np.full((n, 1), p.mma.tma0),
        "kloop": np.full((n, 1), p.mma.kloop),
        "phase1": np.tile(np.asarray(e.phase1, float), (n, 1, 1)),
        "phase2": np.tile(np.asarray(e.phase2, float), (n, 1, 1)),
    }
    same = mc.Knobs({k: [1.0] for k in PHASE_KNOBS}, {k: [0.0] for k in PHASE_KNOBS}, e.warps)
    with np.errstate(divide="ignore", invalid="ignore"):  # one tile: no period slope to fit
        return float(mc.simulate(base, p, same, warmup=max(0, n - 2))["done"][0, 0])
