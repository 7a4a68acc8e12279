"""Pure helpers over a bench artifact's rows (``benchmarks/*.py --json``, ``bsprof bench --json``)."""

from __future__ import annotations


def column_labels(rows: list[dict]) -> list[str]:
    """One label per row, by position: a spec timed twice (how one measures the noise floor) keeps
    both, the second as 'name #2'."""
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        name = str(r.get("name"))
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def _spread(values: list) -> float | None:
    vals = [x for x in values if isinstance(x, (int, float)) and x == x]
    return max(vals) / min(vals) - 1 if len(vals) > 1 and min(vals) > 0 else None


def round_spread(row: dict) -> float | None:
    """Slowest over fastest round, minus one (None without several rounds): how far one pass of this
    kernel can move, so how large a difference one run can decide."""
    return _spread(row.get("ms_rounds") or [])


def cycle_spread(row: dict) -> float | None:
    """The same over each round's cycles (its time times the SM clock read while it ran), None
    without per-round clocks. Small beside ``round_spread``: the rounds moved with the clock (the
    power cap); as large: the kernel itself ran a different number of cycles."""
    ms, mhz = row.get("ms_rounds") or [], row.get("sm_mhz_rounds") or []
    if len(ms) != len(mhz):
        return None
    return _spread([t * f for t, f in zip(ms, mhz) if isinstance(t, (int, float)) and isinstance(f, (int, float))])


def paired_speedups(row: dict, peer: dict) -> list[float]:
    """``peer``'s time over ``row``'s in each round (>1: ``row`` faster). Rounds time every kernel
    back to back, so each ratio is taken at nearly the same clock; empty without several rounds."""
    ms, peer_ms = row.get("ms_rounds") or [], peer.get("ms_rounds") or []
    if len(ms) < 2 or len(ms) != len(peer_ms):
        return []
    return [
        p / m
        for m, p in zip(ms, peer_ms)
        if isinstance(m, (int, float)) and isinstance(p, (int, float)) and m > 0 and p > 0
    ]


def per_copy_speedups(row: dict, peer: dict) -> list[float]:
    """The median of ``paired_speedups`` over the rounds on each copy of the operands, in copy order
    (a run with ``placements`` > 1 records which copy each round ran on); empty where the rounds
    are not spread over copies. Copies far apart say the row is decided by where its operands sit
    in memory, not by the kernels alone."""
    import statistics

    pairs, where = paired_speedups(row, peer), row.get("placement_rounds") or []
    if not pairs or len(where) != len(pairs) or len(set(where)) < 2:
        return []
    return [statistics.median(p for p, c in zip(pairs, where) if c == copy) for copy in sorted(set(where))]


def spread_cell(row: dict) -> str:
    """The round spread as a display string, its cycle spread in brackets where known; "—" without
    several rounds."""
    sp, cyc = round_spread(row), cycle_spread(row)
    return "—" if sp is None else f"{sp:.1%}" + ("" if cyc is None else f" ({cyc:.1%})")


def clock_cells(row: dict, capped_mark: str = " *") -> list[str]:
    """A bench row's SM MHz (marked when the power cap held the clock), W and FLOP per SM-cycle as
    display strings, "—" where a reading is missing."""

    def cell(key: str) -> str:
        v = row.get(key)
        return f"{v:,.0f}" if isinstance(v, (int, float)) and v == v and v else "—"

    capped = capped_mark if "power cap" in (row.get("clock_limiters") or []) else ""
    mhz = cell("sm_mhz")
    return [mhz + capped if mhz != "—" else mhz, cell("watts"), cell("flop_per_sm_cycle")]


def paired_cell(row: dict, first: dict) -> str:
    """``row`` against the first kernel, round by round: the median of first's time over row's
    (>1: row faster) and the rounds' range, e.g. "1.204 (1.159-1.238)"; "—" without several rounds."""
    import statistics

    pairs = paired_speedups(row, first)
    if not pairs:
        return "—"
    return f"{statistics.median(pairs):.3f} ({min(pairs):.3f}-{max(pairs):.3f})"


def tile_config(row: dict) -> tuple[int, int, int, int] | None:
    """(tile_m, tile_n, cluster_m, cluster_n) of one of our rows ('192x128 cluster 1x2 ...'), else None."""
    import re

    found = re.match(r"(\d+)x(\d+) cluster (\d+)x(\d+)", str(row.get("tile") or ""))
    return tuple(int(x) for x in found.groups()) if found else None


def config_pairs(results: list[dict], ref: tuple[int, int, int, int] = (192, 128, 1, 2)) -> list[tuple]:
    """(problem, configuration a, configuration b, a's time over b's as the median over the paired
    rounds) from a bench run's results: where a problem has a 'given' row, the first kernel against
    it; else every other configuration of ours against the row of configuration ``ref`` (a grid
    of fixed configurations). Problems with neither, or without several rounds, give none."""
    import statistics

    out = []
    for res in results:
        ours = [r for r in res.get("rows", []) if r.get("ours") and tile_config(r)]
        given = next((r for r in ours if r.get("name") == "given"), None)
        if given is not None:
            pairs = [(ours[0], given)]
        else:
            base = next((r for r in ours[1:] if tile_config(r) == ref), None)
            pairs = [(r, base) for r in ours[1:] if base is not None and r is not base]
        for a, b in pairs:
            speed = paired_speedups(a, b)
            if speed:
                out.append((tuple(res["mnkl"]), tile_config(a), tile_config(b), 1 / statistics.median(speed)))
    return out
