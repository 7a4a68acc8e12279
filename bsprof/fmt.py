"""How bsprof writes a number, in one place: the report's cells (:func:`fmt`, :func:`pct`), the ncu
views' metrics (:func:`fmt_metric`), the SASS views' counts (:func:`fmt_count`), byte counts
(:func:`fmt_bytes`) and the numbers inside a verdict's reason (:func:`fmt_short`); text from the
input on a terminal line (:func:`lit`); plus the small lookups the report sections share.

On the ground floor: the verdict (an analyzer) and the views (presentation) both write numbers."""

from __future__ import annotations

import math
from typing import Any


def lit(x: Any, width: int = 400) -> str:
    """``x`` (a path, a kernel name, a message: anything from the input) as literal text for a rich
    console line: its brackets never read as markup, and cut to ``width`` characters."""
    from rich.markup import escape

    text = str(x)
    return escape(text if len(text) <= width else text[: width - 1] + "…")


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


def fmt_metric(v: Any, unit: str = "") -> str:
    """A metric in the ncu terminal views: "n/a" when missing, whole floats with thousands separators,
    else three significant digits under 10, one decimal under 1000, none above."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        s = f"{int(v):,}"
    elif isinstance(v, float):
        s = f"{v:,.0f}" if abs(v) >= 1000 else (f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}")
    else:
        s = str(v)
    return f"{s} {unit}".rstrip()


def fmt_count(v: Any) -> str:
    """An instruction count or a ratio of them in the SASS views: millions as "12.3M" from ten
    million up, ratios with two decimals under 100."""
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v / 1e6:,.1f}M" if abs(v) >= 10_000_000 else f"{v:,}"
    return str(v)


def fmt_bytes(n: float) -> str:
    """A byte count with its unit (three significant digits in KB, MB or GB); "n/a" when NaN."""
    if math.isnan(n):
        return "n/a"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_short(x: float) -> str:
    """A number inside a sentence (a verdict's reason): three significant digits, one decimal from 100."""
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.1f}"


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
