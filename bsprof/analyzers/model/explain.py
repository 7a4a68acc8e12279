"""Why a projection is what it is: the equilibrium's cycles term by term, and the fitted terms.

``cycle_walk`` lists each elementary cycle family of the event graph (eventgraph.solve's closed
form) with the cycles of every arc on it and its tokens, so period = max over cycles of
(sum of arcs) / tokens can be checked by hand, before and after a change.

``fitted_terms`` names every model input that no table measures: the latency that closes the
measured period (whichever of MMA-loop overhead, epilogue-loop overhead, consumer-loop hand-off or
Phase-2 overlap the structure puts it on), the assumed barrier hand-off, and the release point.
Each comes with its size and how much of the projection rests on it: the projected change with
the term as fitted against the same projection with the term zeroed.
"""

from __future__ import annotations

from dataclasses import replace

from bsprof.analyzers.model.eventgraph import release_cycles, solve
from bsprof.analyzers.model.params import ModelParams


def cycle_walk(p: ModelParams) -> list[dict]:
    """Every cycle family: ``{cycle, arcs: [(name, cycles)], tokens, mean, critical}``."""
    s, m, e = p.structure, p.mma, p.epi
    S = max(1, int(s.acc_stages))
    eq = solve(p)
    wmax_chain = max(range(e.warps), key=lambda w: e.phase1[w] + e.phase2[w])
    wmax_rel = max(range(e.warps), key=lambda w: release_cycles(p, w))
    out = [
        {
            "cycle": "mma-chain",
            "tokens": 1,
            "arcs": [("TMA0", m.tma0), ("K-loop", m.kloop), ("MMA-loop overhead", m.overhead)],
        },
        {
            "cycle": "epilogue-chain",
            "tokens": s.epilogue_tokens,
            "arcs": [
                (f"Phase 1 (slowest warp, {wmax_chain})", e.phase1[wmax_chain]),
                ("Phase 2", e.phase2[wmax_chain]),
                ("epilogue-loop overhead", e.overhead),
            ],
        },
        {
            "cycle": "accumulator-cycle",
            "tokens": S,
            "arcs": [
                ("TMA0", m.tma0),
                ("K-loop", m.kloop),
                ("barrier hand-off x2", 2 * s.handoff),
                (_release_name(p, wmax_rel), release_cycles(p, wmax_rel)),
            ],
        },
    ]
    for c in out:
        c["sum"] = sum(v for _, v in c["arcs"])
        c["mean"] = c["sum"] / c["tokens"]
        c["critical"] = c["cycle"] == eq.critical
    return out


def _release_name(p: ModelParams, w: int) -> str:
    s = p.structure
    if s.release_after_phase2:
        return f"epilogue until the accumulator is free (Phase 1 + {s.phase2_blocking:.0%} of Phase 2, warp {w})"
    return f"Phase 1 until release ({s.release_frac:.0%}, warp {w})"


def fitted_terms(p: ModelParams, deltas: dict | None = None) -> list[dict]:
    """The inputs no table measured, each with its size, what it was fitted to, its share of the
    baseline period and the projected change of ``deltas`` without it (deterministic)."""
    from bsprof.analyzers.model.project import apply, parse_deltas

    d = parse_deltas(deltas or {})
    st = p.structure
    lam = p.observed_tile
    terms = []
    to = f"the measured {lam:,.0f}-cycle tile period" if lam else "nothing (no measured period)"
    if p.mma.overhead > 0:
        terms.append(
            ("MMA-loop overhead", p.mma.overhead, "fitted", to, lambda q: replace(q, mma=replace(q.mma, overhead=0.0)))
        )
    if p.epi.overhead > 0:
        terms.append(
            (
                "epilogue-loop overhead",
                p.epi.overhead,
                "fitted",
                to,
                lambda q: replace(q, epi=replace(q.epi, overhead=0.0)),
            )
        )
    if st.release_after_phase2 and st.phase2_blocking < 1.0:
        terms.append(
            (
                "Phase 2 the next K-loop waits for",
                st.phase2_blocking,
                "fitted (fraction)",
                to,
                lambda q: replace(q, structure=replace(q.structure, phase2_blocking=1.0)),
            )
        )
    if st.handoff > 0:
        how = (
            "fitted"
            if st.release_after_phase2
            else "assumed (not measured; any value up to the slack gives the same period)"
        )
        terms.append(
            (
                "barrier hand-off",
                st.handoff,
                how,
                to if st.release_after_phase2 else "—",
                lambda q: replace(q, structure=replace(q.structure, handoff=0.0)),
            )
        )
    if not st.release_after_phase2:
        terms.append(("accumulator release point", st.release_frac, "assumed (fraction of Phase 1)", "—", None))
    out = []
    base_change = _change(p, d, apply)
    for name, size, how, fitted_to, zero in terms:
        row = {
            "term": name,
            "size": size,
            "how": how,
            "fitted_to": fitted_to,
            "share_of_period": (size / solve(p).period) if zero and "fraction" not in how else None,
            "projected_change": base_change,
        }
        if zero is not None:
            q = zero(p)
            try:
                row["projected_change_without"] = _change(q, d, apply)
            except Exception:  # noqa: BLE001 - a change that is invalid without the term
                row["projected_change_without"] = None
        out.append(row)
    return out


def _change(p: ModelParams, d: dict, apply) -> float:
    return solve(apply(p, d)).period / solve(p).period - 1.0
