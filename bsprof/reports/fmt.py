"""Number formatting and small lookups shared by the report sections."""

from __future__ import annotations

import math
from typing import Any


def num(x: Any) -> float | None:
    """A finite float, or None for missing / NaN / non-numeric."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt(x: Any, digits: int = 3, unit: str = "") -> str:
    v = num(x)
    if v is None:
        return "—" if x is None or isinstance(x, (int, float)) else str(x)
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        s = f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.3g}"
    elif float(v).is_integer():
        s = f"{int(v):,}"
    else:
        s = f"{v:.{digits}g}" if abs(v) < 100 else f"{v:,.1f}"
    return f"{s} {unit}".rstrip() if unit else s


def pct(x: Any, digits: int = 1) -> str:
    v = num(x)
    return "—" if v is None else f"{v:.{digits}f} %"


def signed_pct(new: Any, old: Any) -> str:
    a, b = num(new), num(old)
    if a is None or b is None or b == 0:
        return "—"
    return f"{(a - b) / abs(b) * 100:+.1f} %"


def dig(data: Any, *path: Any, default: Any = None) -> Any:
    """``data[p0][p1]...`` or ``default`` when any step is missing."""
    cur = data
    for p in path:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, (list, tuple)) and isinstance(p, int) and -len(cur) <= p < len(cur):
            cur = cur[p]
        else:
            return default
    return cur


def short_name(name: object, width: int = 64) -> str:
    """A kernel name that fits a table cell: CuTe DSL names run to hundreds of characters."""
    text = str(name or "")
    return text if len(text) <= width else text[: width - 1] + "…"


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 instruction``, ``2 instructions`` (``words``: an irregular plural), the count with commas."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"
