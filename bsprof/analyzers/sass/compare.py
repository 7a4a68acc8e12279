"""Baseline -> optimized: category, opcode, K-loop and feature deltas between two analyses."""

from __future__ import annotations

from bsprof.analyzers.sass.analyze import FunctionAnalysis


def _delta_map(a: dict[str, int], b: dict[str, int]) -> dict[str, dict[str, int]]:
    keys = sorted(set(a) | set(b), key=lambda k: -(abs(b.get(k, 0) - a.get(k, 0))))
    return {k: {"a": a.get(k, 0), "b": b.get(k, 0), "delta": b.get(k, 0) - a.get(k, 0)} for k in keys}


REGION_NAMES = {"kloop": "K-loop", "unrolled": "tile loop with K unrolled", "no_mma": "no MMA region"}


def _region(fa: FunctionAnalysis) -> tuple[str, list[int], object]:
    """The region a K-loop comparison stands on, and its kind: the K-loop; with K fully unrolled, the
    tile loop that issues every MMA (or nothing, when the MMAs sit in no loop)."""
    kind = fa.kloop_status
    lp = fa.kloop if kind == "kloop" else fa.tile_loop if kind == "unrolled" else None
    return kind, (list(lp.instructions) if lp is not None else []), lp


def _kloop_summary(fa: FunctionAnalysis) -> dict:
    kind, idx, lp = _region(fa)
    mma = sum(1 for i in idx if fa.instructions[i].category == "mma")
    d = {
        "kind": kind,
        "region": REGION_NAMES[kind],
        "loop": lp.id if lp is not None else None,
        "text": fa.kloop_summary()["text"],
        "kloops": len(fa.kloops),
        "instructions": len(idx),
        "mma": mma,
        "overhead_per_mma": round((len(idx) - mma) / mma, 2) if mma else None,
        "categories": fa.categories(idx),
    }
    if fa.executed is not None and idx:
        d["executed"] = fa.executed_in(idx)
    return d


def _mismatch(ka: dict, kb: dict, per_tile: bool = False) -> str | None:
    """Why two regions must not be subtracted, or None when they are the same kind; ``per_tile``:
    both sides' output tiles are known, so the executed instructions per tile stand in for them."""
    if ka["kind"] == kb["kind"]:
        return None
    instead = (
        "the executed instructions per output tile compare instead"
        if per_tile
        else "Compare whole kernels, or per tile with ncu reports (--tiles, or --mnkl with --tile-mn)"
    )
    return (
        f"not comparable: A's is a {ka['region']}, B's a {kb['region']} (A: {ka['text']}; B: {kb['text']}); "
        f"subtracting them would compare unlike regions. {instead}"
    )


def compare(a: FunctionAnalysis, b: FunctionAnalysis, tiles: tuple[int | None, int | None] = (None, None)) -> dict:
    """A -> B; ``tiles``: each side's output tiles (its launch's), for the executed instructions per
    tile where both sides ran under ncu."""
    ka, kb = _kloop_summary(a), _kloop_summary(b)
    per_tile = all(tiles) and a.executed is not None and b.executed is not None
    out = {
        "a": {"name": a.name, "arch": a.arch, "source": a.source},
        "b": {"name": b.name, "arch": b.arch, "source": b.source},
        "instructions": {
            "a": len(a.instructions),
            "b": len(b.instructions),
            "delta": len(b.instructions) - len(a.instructions),
        },
        "categories": _delta_map(a.categories(), b.categories()),
        "opcodes": {
            k: v
            for k, v in _delta_map(a.opcode_counts(with_modifiers=False), b.opcode_counts(with_modifiers=False)).items()
            if v["delta"]
        },
        "kloop": _kloop_delta(ka, kb, per_tile),
        "features": {
            k: {"a": bool(a.features[k].present), "b": bool(b.features[k].present)}
            for k in a.features
            if k in b.features
        },
        "loops": {"a": len(a.loops), "b": len(b.loops)},
        # per-K-block work in other warps (sm_100 blockwise promotion): a change can move it alone
        "promotion": _promotion_delta(a, b),
    }
    if a.executed is not None and b.executed is not None:
        out["executed"] = {
            "a": int(sum(a.executed)),
            "b": int(sum(b.executed)),
            "delta": int(sum(b.executed)) - int(sum(a.executed)),
        }
        out["executed_opcodes"] = executed_opcodes(a, b)
    if per_tile:
        ea, eb = out["executed"]["a"] / tiles[0], out["executed"]["b"] / tiles[1]
        out["executed_per_tile"] = {"a": round(ea, 1), "b": round(eb, 1), "delta": round(eb - ea, 1)}
    if a.roles is not None and b.roles is not None:
        from collections import Counter

        out["roles"] = _delta_map(dict(Counter(a.roles)), dict(Counter(b.roles)))
    return out


def executed_opcodes(a: FunctionAnalysis, b: FunctionAnalysis) -> dict:
    """Executed instructions by opcode (ncu SourceCounters on both sides), and per executed MMA:
    the dynamic counterpart of the static opcode deltas. Per MMA, two kernels that split the same
    problem differently (unrolled or not, another tile) compare instruction for instruction: what
    the static K-loop cannot show (wait loops that spin, a body run more often than it reads)
    shows here. Sorted by the per-MMA change (by the absolute one when a side ran no MMA)."""
    ea, eb = a.executed_by_opcode(), b.executed_by_opcode()
    ma, mb = (fa.executed_in(i.index for i in fa.instructions if i.category == "mma") or 0 for fa in (a, b))
    rows = {}
    for op in set(ea) | set(eb):
        va, vb = ea.get(op, 0), eb.get(op, 0)
        r = {"a": va, "b": vb, "delta": vb - va}
        if ma and mb:
            r.update(
                a_per_mma=round(va / ma, 3), b_per_mma=round(vb / mb, 3), delta_per_mma=round(vb / mb - va / ma, 3)
            )
        # per MMA where both ran MMAs: the same count over twice the MMAs is a change, twice the
        # count over twice the MMAs is none
        if (va * mb == vb * ma) if ma and mb else va == vb:
            continue
        rows[op] = r
    # ties (by name) keep the order, and so the rows shown, the same from run to run
    key = (
        (lambda kv: (-abs(kv[1]["delta_per_mma"]), kv[0])) if ma and mb else (lambda kv: (-abs(kv[1]["delta"]), kv[0]))
    )
    per_mma = None
    if ma and mb:
        per_mma = {"a": round(sum(ea.values()) / ma, 2), "b": round(sum(eb.values()) / mb, 2)}
    return {"mma": {"a": ma, "b": mb}, "per_mma": per_mma, "opcodes": dict(sorted(rows.items(), key=key))}


def _promotion_delta(a: FunctionAnalysis, b: FunctionAnalysis) -> dict:
    na, nb = (sum(lp.size for lp in fa.promotion_loops) for fa in (a, b))
    return {"a": na, "b": nb, "delta": nb - na, "loops": {"a": len(a.promotion_loops), "b": len(b.promotion_loops)}}


def _kloop_delta(ka: dict, kb: dict, per_tile: bool = False) -> dict:
    why = _mismatch(ka, kb, per_tile)
    if why is not None or ka["kind"] == "no_mma":
        return {
            "a": ka,
            "b": kb,
            "comparable": False,
            "mismatch": why,
            "instructions_delta": None,
            "mma_delta": None,
            "categories": {},
        }
    return {
        "a": ka,
        "b": kb,
        "comparable": True,
        "mismatch": None,
        "instructions_delta": kb["instructions"] - ka["instructions"],
        "mma_delta": kb["mma"] - ka["mma"],
        "categories": _delta_map(ka["categories"], kb["categories"]),
    }


def pair_functions(
    aa: list[FunctionAnalysis], bb: list[FunctionAnalysis]
) -> list[tuple[FunctionAnalysis, FunctionAnalysis]]:
    """Pair by name when both sides share names, else by the most MMA-heavy kernel of each side."""
    names_b = {fa.name: fa for fa in bb}
    pairs = [(fa, names_b[fa.name]) for fa in aa if fa.name in names_b]
    if pairs:
        return pairs
    key = lambda fa: (fa.mma_count, len(fa.instructions))  # noqa: E731
    return [(max(aa, key=key), max(bb, key=key))]
