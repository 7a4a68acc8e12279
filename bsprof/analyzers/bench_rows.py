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


def round_spread(row: dict) -> float | None:
    """Slowest over fastest round, minus one (None without several rounds): how far one pass of this
    kernel can move, so how large a difference one run can decide."""
    ms = [x for x in row.get("ms_rounds") or [] if isinstance(x, (int, float))]
    return max(ms) / min(ms) - 1 if len(ms) > 1 and min(ms) > 0 else None
