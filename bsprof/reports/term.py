"""Terminal views that fit the terminal: a table keeps every cell whole and leaves out whole
columns, least important first, rather than letting rich cut a number to ``4,36…`` or fold it over
two lines; a line of ``a · b · c`` parts breaks between parts, never inside one.

Width: a terminal's own; piped output (a CI log, ``| less``) is laid out for ``$COLUMNS`` when set,
else :data:`PIPED_WIDTH` (bsprof.cli sets it before any console exists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Column, Table

# The width of piped output when COLUMNS is not set: rich's own fallback (80) folded the wide
# tables; 100 keeps a README excerpt or a CI log readable without a horizontal scroll.
PIPED_WIDTH = 100


def needed_width(console: Console, table: Table) -> int:
    """The narrowest the table can be drawn without cutting or folding a ``no_wrap`` cell: those
    columns at their widest cell (header lines included), the others (prose) at their longest word."""
    options = console.options.update_width(100_000)
    total = table._extra_width
    for column in table.columns:
        m = table._measure_column(console, options, column)
        total += m.maximum if column.no_wrap else m.minimum
    return total


def fit_table(
    console: Console, table: Table, drop: Sequence[int] = (), names: Mapping[int, str] | None = None
) -> list[str]:
    """Remove columns of ``table`` (indexes as added, in the order given: least important first)
    until it fits ``console.width`` with every ``no_wrap`` cell whole. Returns the names of the
    columns left out, for a note that names them (:func:`left_out_note`): ``names[index]`` where
    given (a header that alone would not say which column, e.g. several headed "err"), else the
    header."""
    names = names or {}
    order: list[tuple[int, Column]] = [(i, table.columns[i]) for i in drop if 0 <= i < len(table.columns)]
    dropped: list[str] = []
    while order and needed_width(console, table) > console.width:
        index, column = order.pop(0)
        table.columns.remove(column)
        dropped.append(names.get(index) or " ".join(str(column.header).split()))
    for k, column in enumerate(table.columns):
        column._index = k  # rich pads the first and last column by position
    return dropped


def left_out_note(dropped: Iterable[str], where: str = "--json has them") -> str:
    """One dim line naming what a narrow terminal left out and how to see it."""
    names = [d for d in dropped if d]
    if not names:
        return ""
    return (
        f"[dim]left out at this width: {', '.join(names)} (a wider terminal or COLUMNS=N shows "
        f"{'them' if len(names) > 1 else 'it'}; {where})[/dim]"
    )


def pack(parts: Iterable[str], width: int, sep: str = " · ", indent: str = "") -> str:
    """``parts`` joined by ``sep`` into lines of at most ``width`` characters, broken only between
    parts (a part longer than a line gets a line of its own)."""
    lines: list[str] = []
    cur = ""
    for part in parts:
        if not part:
            continue
        cand = part if not cur else cur + sep + part
        # room kept for the separator that ends a line when the next part does not fit
        if cur and len(cand) + len(sep.rstrip()) > width:
            lines.append(cur + sep.rstrip())
            cur = indent + part
        else:
            cur = cand
    if cur:
        lines.append(cur)
    return "\n".join(lines)


def say(console: Console, text: str, *, indent: str = "", hang: str | None = None, style: str | None = None) -> None:
    """Print prose wrapped to the console between words (a number never parts), continuation
    lines indented under the first line's text (``hang``: their indent; default ``indent`` + 2)."""
    import textwrap

    hang = indent + "  " if hang is None else hang
    lines = textwrap.wrap(
        text,
        width=max(20, console.width),
        initial_indent=indent,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]
    console.print("\n".join(lines), markup=False, highlight=False, style=style, soft_wrap=True)
