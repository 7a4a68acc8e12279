"""`bsprof sass` for the terminal (rich tables), as JSON and as CSV: renderers of one
:class:`~bsprof.analyzers.sass.result.SassResult`, printing only what its data holds."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from bsprof import artifacts
from bsprof.analyzers.sass.budget import ARCH_GROUPS
from bsprof.analyzers.sass.result import CSV_FIXED, SassResult, csv_rows
from bsprof.fmt import fmt_count, plural, short_name
from bsprof.reports.term import fit_table, left_out_note, pack, say

if TYPE_CHECKING:
    from rich.console import Console
# rich is imported where the terminal views need it: --json and --csv never load it (~0.1 s)

# more functions than this: one summary table across them instead of each one's tables
MANY_FUNCTIONS = 4
MAIN_CATS = (
    "mma",
    "uniform",
    "tc_control",
    "tmem",
    "sync",
    "tma",
    "shared",
    "global",
    "local",
    "int",
    "float",
    "conversion",
    "predicate",
    "move",
    "control",
    "special",
    "constant",
    "nop",
    "other",
)


def render_json(result: SassResult) -> str:
    return artifacts.dumps(result.data, indent=1)


def render_csv(result: SassResult) -> str:
    rows = csv_rows(result)
    extra = sorted({k for r in rows for k in r} - set(CSV_FIXED), key=lambda k: (not k.startswith("cat_"), k))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIXED + extra, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIXED + extra})
    return buf.getvalue()


def render_terminal(
    console: Console,
    result: SassResult,
    *,
    mma_detail: bool = False,
    show_features: bool = False,
    hot: bool = False,
    all_kloops: bool = False,
) -> None:
    from rich.markup import escape

    data = result.data
    if result.is_compare:
        print_compare(console, data)
        if hot:
            for side in ("a", "b"):
                for fn in data[side]["functions"]:
                    print_hot(console, fn, f"{side.upper()} ")
    else:
        fns = data["functions"]
        # Past a few functions the per-function tables (instruction mix, feature checklist) bury
        # the overview and cost ~40 ms of rich layout each: one summary table across functions
        # replaces them, and --function REGEX (or --json) gives any function's full tables.
        tables = len(fns) <= MANY_FUNCTIONS
        # a GEMM's cubin often holds helpers beside it (CUTLASS's reference and compare kernels, a
        # scale transpose): with full tables the functions that issue MMAs come first, the rest as
        # one line each, so the first screen is the GEMM's
        with_mma = [fn for fn in fns if fn["mma"]]
        shown, helpers = (with_mma, [fn for fn in fns if not fn["mma"]]) if tables and with_mma else (fns, [])
        for fn in shown:
            _print_function(
                console,
                fn,
                by=result.by,
                mma_detail=mma_detail,
                show_features=show_features,
                tables=tables,
                all_kloops=all_kloops,
            )
        if not tables:
            _print_summary(console, fns, show_features=show_features)
        if helpers:
            console.print(
                f"[dim]also in this input, without MMA instructions ({len(helpers)}; --function REGEX shows one):[/dim]"
            )
            names = distinct_names([fn["name"] for fn in helpers], width=max(24, min(80, console.width - 36)))
            for fn, name in zip(helpers, names):
                console.print(
                    f"  {escape(name)}  {plural(fn['instructions'], 'instruction')}, "
                    f"{plural(len(fn['loops']), 'loop')}",
                    highlight=False,
                )
    for note in result.notes:
        if not result.is_compare or "not comparable" not in note:  # the compare table says it already
            console.print(f"[yellow]note:[/yellow] {escape(note)}")


def _cats_present(rows: list[dict]) -> list[str]:
    seen = {c for r in rows for c, v in r["categories"].items() if v}
    return [c for c in MAIN_CATS if c in seen] + sorted(seen - set(MAIN_CATS))


def _print_summary(console: Console, fns: list[dict], *, show_features: bool) -> None:
    """One row per function, narrow enough for an 80-column terminal (rich squeezing a wider table
    into it made every cell unreadable, and took a quarter of a second); each function's features
    follow as one line apiece."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        title=f"{len(fns)} functions (each one's instruction mix{' and feature checklist' if show_features else ''}: "
        "--function REGEX, or --json)",
        header_style="bold",
    )
    t.add_column("function", no_wrap=True)
    for col in ("inst.", "MMA", "loops", "K-loop", "ovh/MMA"):
        t.add_column(col, justify="right" if col != "K-loop" else "left", no_wrap=True)
    names = distinct_names([fn["name"] for fn in fns], width=max(16, min(40, console.width - 62)))
    features = []
    for fn, name in zip(fns, names):
        prim = next((r for r in fn["regions"] if r.get("primary")), None)
        summary = fn.get("kloop_summary") or {}
        if prim is not None:
            kloop = prim["region"]
        elif summary.get("kind") == "unrolled":
            kloop = f"unrolled (tile loop {summary.get('tile_loop')})"
        else:
            kloop = "—"
        t.add_row(
            escape(name),
            fmt_count(fn["instructions"]),
            fmt_count(fn["mma"]),
            fmt_count(len(fn["loops"])),
            escape(kloop),
            fmt_count(prim["overhead_per_mma"]) if prim else "—",
        )
        present = [(f"[red]{_BAD[k]}[/red]" if k in _BAD else k) for k, v in (fn.get("features") or {}).items() if v]
        features.append(f"  {escape(name)}: {', '.join(present) or 'none'}")
    console.print(t)
    if any((fn.get("kloop_summary") or {}).get("kind") == "unrolled" for fn in fns):
        console.print("[dim]K-loop 'unrolled': K is fully unrolled, no K-loop; the tile loop issues every MMA[/dim]")
    if show_features:
        console.print("[bold]features present[/bold]\n" + "\n".join(features))


# features whose presence is a defect, named in red in the many-function summary
_BAD = {"register_spills": "spills", "wgmma_serialized": "wgmma serialized", "mma_drained": "MMAs drained every pass"}


def distinct_names(names: list[str], width: int = 40) -> list[str]:
    """Each name cut to ``width`` characters so that the cuts still differ: kernels of one template
    (DeepGEMM's instantiations, one CuTe kernel at several tiles) share long mangled prefixes and
    suffixes and differ in the middle, so a long name shows its first few characters and then the
    stretch where it first differs from the names most like it."""
    head = min(12, max(4, width // 3))
    shared_head, shared_tail = _shared(names), _shared([n[::-1] for n in names])
    out = []
    for n, pre, suf in zip(names, shared_head, shared_tail):
        if len(n) <= width:
            out.append(n)
            continue
        differs = min(pre, len(n))
        if max(differs, len(n) - suf) < width:  # it differs within the first width - 1 characters
            out.append(n[: width - 1] + "…")
            continue
        window = width - head - 2
        start = max(head, differs - 3)  # a few characters of context before the difference
        if start + window >= len(n):
            out.append(n[:head] + "…" + n[len(n) - (width - head - 1) :])
        else:
            out.append(n[:head] + "…" + n[start : start + window] + "…")
    return _split_collisions(names, out, width)


def _split_collisions(names: list[str], cuts: list[str], width: int) -> list[str]:
    """Two names of different templates can differ from their nearest neighbours at look-alike
    stretches (``…ELj128ELj1…`` twice): such cuts show, instead of the head, a stretch where the
    colliding names differ from each other, then the stretch where each differs from its neighbour."""
    import os.path
    from collections import defaultdict

    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cuts):
        groups[c].append(i)
    out = list(cuts)
    first = (width - 2) // 2
    second = width - 2 - first
    if second < 4:
        return out
    shared_head = _shared(names)
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:
            n = names[i]
            # where it parts from the colliding name most like it: names less alike part earlier
            others = [len(os.path.commonprefix([n, names[j]])) for j in members if names[j] != n]
            if not others:  # the same name twice (one kernel from two files): nothing tells them apart
                continue
            s1 = max(0, max(others) - 3)
            s2 = max(s1 + first, min(shared_head[i], len(n)) - 3)
            out[i] = n[s1 : s1 + first] + "…" + n[s2 : s2 + second] + "…"
    return _number_the_rest(names, out)


def _number_the_rest(names: list[str], cuts: list[str]) -> list[str]:
    """Cuts of different names that are still equal (look-alike stretches both times) end in their
    order among them instead, so no two kernels share a row label."""
    from collections import defaultdict

    groups: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(cuts):
        groups[c].append(i)
    out = list(cuts)
    for cut, members in groups.items():
        if len(members) > 1 and len({names[i] for i in members}) > 1:
            for k, i in enumerate(members, 1):
                tag = f"#{k}"
                out[i] = cut[: max(1, len(cut) - len(tag))] + tag
    return out


def _shared(names: list[str]) -> list[int]:
    """For each name, the longest prefix it shares with any other name (the neighbours in sorted
    order are the names it shares most with)."""
    import os.path

    best = [0] * len(names)
    order = sorted(range(len(names)), key=names.__getitem__)
    for x, y in zip(order, order[1:]):
        n = len(os.path.commonprefix([names[x], names[y]]))
        best[x], best[y] = max(best[x], n), max(best[y], n)
    return best


def _print_function(
    console: Console,
    fn: dict,
    *,
    by: str,
    mma_detail: bool,
    show_features: bool,
    tables: bool = True,
    all_kloops: bool = False,
) -> None:
    from rich.markup import escape
    from rich.table import Table

    kl = [lp for lp in fn["loops"] if lp["is_kloop"]]
    parts = [
        fn["arch"] or "?",
        plural(fn["instructions"], "instruction"),
        f"{fn['mma']:,} MMA",
        plural(len(fn["loops"]), "loop"),
        plural(len(kl), "K-loop"),
    ]
    if "executed" in fn:
        parts.append(f"{fn['executed']:,} warp-instructions executed")
    head = f"[bold]{escape(short_name(fn['name'], min(90, console.width)))}[/bold]\n" + escape(
        pack(parts, console.width)
    )
    if fn.get("kloop_summary"):
        style = "bold" if fn["kloop_summary"]["kind"] == "kloop" else "bold yellow"
        head += f"\n[{style}]{escape(fn['kloop_summary']['text'])}[/{style}]"
    console.print(head)
    key = "role_regions" if by == "roles" and "role_regions" in fn else "regions"
    rows = fn[key]
    if key == "regions":  # keep the table readable: function, the K-loop, other MMA loops, big loops
        keep = [rows[0]] + [r for r in rows[1:] if r["is_kloop"] or r["mma"] or r.get("kind") in ("tile", "promote")]
        rest = sorted((r for r in rows[1:] if r not in keep), key=lambda r: -r["instructions"])
        rows = keep + rest[: max(0, 8 - len(keep))]
    if key == "role_regions":
        if tables:
            _print_roles(console, rows)
        rows = []
    rows = rows[:7] if tables else []
    cats = _cats_present(rows)
    t = Table(
        title=f"instruction mix by {'warp role / phase' if key == 'role_regions' else 'region'} "
        "(static counts; ◀ = the K-loop)",
        header_style="bold",
    )
    t.add_column("", no_wrap=True, min_width=14)
    for r in rows:
        t.add_column(_region_header(r), justify="right", no_wrap=True)
    t.add_row("instructions", *[fmt_count(r["instructions"]) for r in rows])
    t.add_row("MMA", *[fmt_count(r["mma"]) for r in rows])
    t.add_row("overhead / MMA", *[fmt_count(r["overhead_per_mma"]) for r in rows], end_section=True)
    for c in cats:
        t.add_row(f"  {c}", *[fmt_count(r["categories"].get(c)) if r["categories"].get(c) else "" for r in rows])
    if any("executed" in r for r in rows):
        t.add_section()
        t.add_row("executed (ncu)", *[fmt_count(r.get("executed")) for r in rows])
        if any("executed_per_tile" in r for r in rows):
            t.add_row("executed / tile", *[fmt_count(r.get("executed_per_tile")) for r in rows])
        t.add_row("stall samples", *[fmt_count(r.get("stall_samples")) for r in rows])
        if any(r.get("executed_per_mma") is not None for r in rows):
            t.add_row("executed / MMA", *[fmt_count(r.get("executed_per_mma")) for r in rows])
            t.add_row("hot instructions", *[fmt_count(r.get("hot_instructions")) for r in rows])
    if rows:
        # a narrow terminal leaves out whole regions, never the K-loop: the small loops first, the
        # function's totals last
        primary = [k for k, r in enumerate(rows, 1) if r.get("primary")]
        drop = [k for k in range(len(rows), 1, -1) if k not in primary] + [k for k in (1,) if k not in primary]
        dropped = fit_table(console, t, drop)
        console.print(t)
        if dropped:
            console.print(left_out_note(dropped, "--csv and --json have every region"))
    shown = [r for r in fn[key] if r.get("per_tile_breakdown") and (r["mma"] or r["region"] == "function")]
    if key == "role_regions":  # and the busiest roles
        busy = sorted(
            (r for r in fn[key] if r.get("per_tile_breakdown") and r not in shown),
            key=lambda r: -(r.get("executed") or 0),
        )
        shown += busy[:3]
    for r in shown:
        say(console, f"{r['region']}: {r['per_tile_breakdown']}", indent="  ", hang="    ")
    if fn.get("stalls_by_category"):
        st = Table(title="stall samples by instruction category (top reasons)", header_style="bold")
        st.add_column("category", no_wrap=True)
        st.add_column("samples", justify="right", no_wrap=True)
        st.add_column("top reasons", no_wrap=True)
        cats_shown = list(fn["stalls_by_category"].items())[:10]
        # the reasons are packed by hand, so a reason never parts from its count
        room = (
            console.width
            - 10
            - max([8, *(len(c) for c, _ in cats_shown)])
            - max([7, *(len(fmt_count(sum(r.values()))) for _, r in cats_shown)])
        )
        for cat, reasons in cats_shown:
            top = pack((f"{k} {v:,}" for k, v in list(reasons.items())[:4]), max(20, room), sep=", ")
            st.add_row(cat, fmt_count(sum(reasons.values())), top)
        console.print(st)
    if mma_detail:
        _print_mma_detail(console, fn, all_kloops=all_kloops)
    if "hot" in fn:
        print_hot(console, fn)
    if show_features and tables:
        _print_features(console, fn)
    tail = (
        [f"[yellow]unclassified opcodes (counted as 'other'):[/yellow] {escape(_listed(fn['unclassified']))}"]
        if fn.get("unclassified")
        else []
    )
    tail += [
        f"[dim]note: {escape(note)}[/dim]" for note in fn.get("notes", []) if not note.startswith("opcodes not in")
    ]
    console.print("\n".join(tail + [""]))  # one print, ending in the blank line between functions


def _region_header(r: dict) -> str:
    """A region's column header on two lines, name then address (``K-loop 4 ◀`` / ``@0x0cd0``):
    each whole, so the column is as narrow as its numbers allow."""
    name, at, addr = short_name(r["region"], 24).partition(" @")
    return name + (" ◀" if r.get("primary") else "") + (f"\n@{addr}" if at else "")


def _print_roles(console: Console, rows: list[dict]) -> None:
    from rich.markup import escape
    from rich.table import Table

    rows = sorted(rows, key=lambda r: (-r["mma"], -r["instructions"]))
    dyn = any("executed" in r for r in rows)
    cats = [c for c in _cats_present(rows) if c != "mma"]
    t = Table(title="instruction mix by warp role / phase (line info + the kernel's scopes)", header_style="bold")
    t.add_column("role / phase", overflow="fold", min_width=min(24, max(16, console.width // 4)))
    t.add_column("inst", justify="right", no_wrap=True)
    t.add_column("MMA", justify="right", no_wrap=True)
    for c in cats:
        t.add_column(c[:6], justify="right", no_wrap=True)
    if dyn:
        t.add_column("executed", justify="right", no_wrap=True)
        if any("executed_per_tile" in r for r in rows):
            t.add_column("/tile", justify="right", no_wrap=True)
        t.add_column("stalls", justify="right", no_wrap=True)
    for r in rows:
        cells = [escape(r["region"]), fmt_count(r["instructions"]), fmt_count(r["mma"])]
        cells += [fmt_count(r["categories"].get(c)) if r["categories"].get(c) else "" for c in cats]
        if dyn:
            cells.append(fmt_count(r.get("executed")))
            if any("executed_per_tile" in x for x in rows):
                cells.append(fmt_count(r.get("executed_per_tile")))
            cells.append(fmt_count(r.get("stall_samples")))
        t.add_row(*cells)
    # the rarer categories go first (the columns after them stay), then the per-tile counts
    first_cat = 3
    drop = list(range(first_cat + len(cats) - 1, first_cat - 1, -1))
    if dyn and any("executed_per_tile" in r for r in rows):
        drop.append(first_cat + len(cats) + 1)
    full = {c[:6]: c for c in cats}
    dropped = [full.get(h, h) for h in fit_table(console, t, drop)]
    console.print(t)
    if dropped:
        console.print(left_out_note(dropped, "--json has every category"))


def _print_mma_detail(console: Console, fn: dict, *, all_kloops: bool = False) -> None:
    from rich.console import COLOR_SYSTEMS
    from rich.markup import escape
    from rich.style import Style

    details = fn.get("mma_detail") or []
    if not details:
        why = (fn.get("kloop_summary") or {}).get("text", "no loop issues MMAs")
        console.print(f"[yellow]--mma-detail: no K-loop to detail ({escape(why)})[/yellow]")
        return
    # the K-loop the header names (of copies side by side: the one it says is shown); the others
    # by --all-kloops, and every one in --json
    picked = (fn.get("kloop_summary") or {}).get("kloop")
    rest: list[dict] = []
    if not all_kloops and picked is not None and any(d["loop"] == picked for d in details):
        rest = [d for d in details if d["loop"] != picked]
        details = [d for d in details if d["loop"] == picked]
    width = console.width
    # Written straight to the file, styled by hand: rich's cost per print (~1 ms: measure, wrap,
    # highlight) or per line, times a few lines per K-loop, a title per gap and the streams'
    # thousands of rows, made this view take a second on a listing of many functions.
    colors = COLOR_SYSTEMS.get(console.color_system or "")
    bold, italic = Style(bold=True), Style(italic=True)
    out = []
    left_out: set[str] = set()
    for d in details:
        what = "K-loop" if d.get("kind", "kloop") == "kloop" else "tile loop (K fully unrolled: no K-loop)"
        scope = (
            f" (a pass: the blocks every pass runs and the MMA blocks, of the flattened loop's "
            f"{d['loop_instructions']}: the epilogue and retry paths left out)"
            if d.get("every_pass_only")
            else ""
        )
        first = pack(
            [
                f"{what} {d['loop']}: {plural(d['instructions'], 'instruction')}{scope}",
                f"{d['mma']} MMA",
                f"{d['mean_between']} instructions between MMA issues on average",
            ],
            width,
            sep=", ",
            indent="  ",
        )
        out.append(bold.render(first, color_system=colors))
        out.append(
            _labelled(
                "  per MMA:",
                [f"{k} {v}" for k, v in d["per_mma"].items() if k not in ARCH_GROUPS or d["counts"].get(k)],
                width,
            )
        )
        out.append(_labelled("  categories per MMA:", [f"{k} {v}" for k, v in d["categories_per_mma"].items()], width))
        for key, label in (
            ("stalls_between", "stall samples between MMAs:"),
            ("stalls_on_mma", "stall samples on the MMAs:"),
        ):
            if d.get(key):
                out.append(_labelled(f"  {label}", [f"{k} {v:,}" for k, v in list(d[key].items())[:6]], width))
        if d.get("loads"):
            # from the control bits: a load whose scoreboard is first waited on before the next MMA issues
            held = [x for x in d["loads"] if x["mma_before_wait"] == 0]
            label = f"  loads the next MMA waits for: {len(held)} of {plural(len(d['loads']), 'LDG')}"
            if held:
                items = [f"{x['pc']:#06x} (waited at {x['wait'].split('.')[0]} {x['wait_pc']:#06x})" for x in held]
                out.append(_labelled(label + ":", items, width))
            else:
                least = min(x["mma_before_wait"] for x in d["loads"])
                out.append(_labelled(label, [f"(each waited on after {least}+ MMAs)"], width))
        back_to_back = [str(g) for g, gap in enumerate(d["gaps"]) if gap["between"] == 0]
        if back_to_back:
            out.append(_labelled("  back to back (nothing between this MMA and the next): MMA", back_to_back, width))
        layout = _stream_layout([gap["stream"] for gap in d["gaps"] if gap["between"]], width)
        for g, gap in enumerate(d["gaps"]):
            if gap["between"] == 0:
                continue
            title = (
                f"after MMA {g} ({gap['mma']} @ {gap['mma_pc']:#06x}): {plural(gap['between'], 'instruction')}"
                if gap["mma_pc"] is not None
                else f"after MMA {g}: {plural(gap['between'], 'instruction')}"
            )
            # plain aligned columns, not a rich Table: a big K-loop has tens of thousands of stream
            # rows and rich's per-cell measuring made this view take seconds
            out += [
                italic.render(title, color_system=colors),
                _stream_text(gap["stream"], layout, after=gap.get("mma_index")),
            ]
        left_out.update(layout[0][c] for c in range(len(layout[0])) if c not in layout[2])
    console.file.write("\n".join(out) + "\n")
    if left_out:
        names = [c for c in ("group", "category", "stalls") if c in left_out]
        console.print(
            f"[dim]left out at this width: the {', '.join(names)} column{'s' if len(names) > 1 else ''} "
            "(a wider terminal or COLUMNS=N shows them; --json has every field)[/dim]"
        )
    if rest:
        console.print(
            f"[dim]not shown: K-loop{'s' if len(rest) > 1 else ''} {', '.join(str(d['loop']) for d in rest)} "
            "(--all-kloops lists every K-loop; --json has every stream)[/dim]"
        )


def _labelled(label: str, items: list[str], width: int) -> str:
    """``label item, item, ...`` in lines of at most ``width``, broken between items."""
    return pack([f"{label} {items[0]}", *items[1:]] if items else [label], width, sep=", ", indent="    ")


def _jump(prev: dict | None, nxt: dict, after: int | None) -> str | None:
    """A marker line where the listing jumps (the next instruction does not follow the one above:
    the back edge to the loop head, or blocks of an inner loop or another path skipped)."""
    before = prev["index"] if prev is not None else after
    if before is None or nxt["index"] == before + 1:
        return None
    pcs = (prev["pc"] if prev is not None else None, nxt["pc"])
    to = f"{pcs[1]:#06x}" if pcs[1] is not None else f"instruction {nxt['index']}"
    if nxt["index"] < before:
        return f"  ⋮ back to the loop head at {to}"
    return f"  ⋮ jumps to {to} ({plural(nxt['index'] - before - 1, 'instruction')} skipped)"


def _stream_rows(stream: list[dict], has_ex: bool) -> list[tuple[str, ...]]:
    rows = []
    for x in stream:
        cells = (
            f"{x['pc']:#06x}" if x["pc"] is not None else str(x["index"]),
            f"{x.get('guard', '')} {x['opcode']} {x['operands']}".strip(),
            x["category"],
            x["group"] or "",
        )
        if has_ex:
            cells += (fmt_count(x.get("executed")), ", ".join(f"{k} {v}" for k, v in (x.get("stalls") or {}).items()))
        rows.append(cells)
    return rows


def _stream_layout(streams: list[list[dict]], width: int) -> tuple[list[str], list[int], list[int]]:
    """One layout for every gap of a K-loop: (column names, widths, the columns kept). At a narrow
    width the group, then the category column is left out; the stalls (the last column) go on
    over continuation lines, or are left out too where less than 20 characters (or than their
    longest reason) are left for them;
    an instruction longer than its column is broken between operands."""
    has_ex = any("executed" in x for st in streams for x in st)
    names = ["pc", "instruction", "category", "group"] + (["executed", "stalls"] if has_ex else [])
    rows = [tuple(names)] + [r for st in streams for r in _stream_rows(st, has_ex)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(names))]
    # the instruction column as wide as nine in ten instructions need: the few long ones (a
    # tcgen05 MMA's descriptors) go on over a continuation line rather than push the others out
    lengths = sorted(len(r[1]) for r in rows)
    natural = min(widths[1], 72)
    widths[1] = min(natural, max(36, lengths[int(0.9 * (len(lengths) - 1))]))
    keep = list(range(len(names)))

    def total() -> int:
        return sum(widths[c] for c in keep) + 2 * (len(keep) - 1)

    for name in ("group", "category"):
        if total() > width:
            keep.remove(names.index(name))
    stalls = names.index("stalls") if has_ex else None
    # the instruction column grows back towards its longest where the stalls keep 40 characters
    wanted = widths[stalls] if stalls is not None else 0
    if stalls is not None:
        widths[stalls] = min(wanted, 40)
    # never narrower than its longest unbreakable piece (an opcode or an operand, indented)
    atom = max(len(part) + 2 for r in rows[1:] for part in r[1].split()) if len(rows) > 1 else 0
    widths[1] = max(min(atom, natural), min(max(widths[1], natural), width - (total() - widths[1])))
    if stalls is not None:  # the stalls take what is left (over continuation lines), or go
        widths[stalls] = min(wanted, width - (total() - widths[stalls]))
        reason = max((len(part) + 1 for r in rows[1:] for part in r[stalls].split(", ")), default=0)
        if widths[stalls] < max(20, reason):
            keep.remove(stalls)
    return names, widths, keep


def _stream_text(
    stream: list[dict], layout: tuple[list[str], list[int], list[int]], *, after: int | None = None
) -> str:
    """The stream as aligned columns by ``layout`` (:func:`_stream_layout`), with a marker line
    where the listing jumps (``after``: the MMA it follows)."""
    names, widths, keep = layout
    has_ex = "executed" in names
    rows = [tuple(names)] + _stream_rows(stream, has_ex)
    right = {names.index("executed")} if has_ex else set()
    last = keep[-1]
    lines = []
    for k, r in enumerate(rows):
        if k:
            mark = _jump(stream[k - 2] if k > 1 else None, stream[k - 1], after)
            if mark:
                lines.append(mark)
        cols = {
            c: (
                _operand_lines(r[c], widths[c])
                if c == 1
                else pack(r[c].split(", "), widths[c], sep=", ").splitlines() or [""]
                if c == last and r[c]
                else [r[c]]
            )
            for c in keep
        }
        for n in range(max(len(v) for v in cols.values())):
            cells = [cols[c][n] if n < len(cols[c]) else "" for c in keep]
            lines.append(
                "  ".join(
                    v.rjust(widths[c]) if c in right else v.ljust(widths[c]) for v, c in zip(cells, keep)
                ).rstrip()
            )
    return "\n".join(lines)


def _operand_lines(text: str, width: int) -> list[str]:
    """An instruction in lines of at most ``width``, broken only between its words (guard, opcode,
    operands; an operand keeps its comma), the next lines indented two spaces."""
    if len(text) <= width:
        return [text]
    return pack(text.split(), width, sep=" ", indent="  ").splitlines()


def _print_features(console: Console, fn: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    from bsprof.analyzers.sass.features import DESCRIPTIONS

    t = Table(title="feature checklist", header_style="bold", show_lines=True)
    t.add_column("feature")
    t.add_column("present")
    t.add_column("evidence", overflow="fold")
    for name, info in fn["feature_evidence"].items():
        p = info["present"]
        mark = "[green]yes[/green]" if p else ("[dim]n/a[/dim]" if p is None else "[red]no[/red]")
        if name == "register_spills":
            mark = "[red]yes[/red]" if p else "[green]no[/green]"
        ev = "\n".join(info["evidence"][:4])
        if info.get("note"):
            ev = (ev + "\n" if ev else "") + f"({info['note']})"
        ev = escape(ev)
        t.add_row(DESCRIPTIONS.get(name, name), mark, ev)
    console.print(t)


def print_compare(console: Console, result: dict) -> None:
    """A → B tables; the K-loop rows only where both regions are of one kind."""
    from rich.markup import escape
    from rich.table import Table

    for cmp in result["compare"]:
        a, b = cmp["a"], cmp["b"]
        console.print(f"[bold]A[/bold] {escape(short_name(a['name'], 70))} ({escape(str(a['source']))})")
        console.print(f"[bold]B[/bold] {escape(short_name(b['name'], 70))} ({escape(str(b['source']))})")
        t = Table(title="A → B", header_style="bold")
        t.add_column("")
        t.add_column("A", justify="right", no_wrap=True)
        t.add_column("B", justify="right", no_wrap=True)
        t.add_column("Δ", justify="right")
        ins = cmp["instructions"]
        t.add_row("instructions", fmt_count(ins["a"]), fmt_count(ins["b"]), f"{ins['delta']:+,}")
        kl = cmp["kloop"]
        ka, kb = kl["a"], kl["b"]
        t.add_row("K-loop region", ka["region"], kb["region"], "" if kl["comparable"] else "not comparable")
        if kl["comparable"]:
            name = "K-loop" if ka["kind"] == "kloop" else "tile loop"
            t.add_row(
                f"{name} instructions",
                fmt_count(ka["instructions"]),
                fmt_count(kb["instructions"]),
                f"{kl['instructions_delta']:+,}",
            )
            t.add_row(f"{name} MMA", fmt_count(ka["mma"]), fmt_count(kb["mma"]), f"{kl['mma_delta']:+,}")
            t.add_row(
                f"{name} overhead / MMA", fmt_count(ka["overhead_per_mma"]), fmt_count(kb["overhead_per_mma"]), ""
            )
        pr = cmp.get("promotion") or {}
        if pr.get("a") or pr.get("b"):
            t.add_row("promotion loop instructions", fmt_count(pr["a"]), fmt_count(pr["b"]), f"{pr['delta']:+,}")
        if "executed" in cmp:
            e = cmp["executed"]
            t.add_row("executed", fmt_count(e["a"]), fmt_count(e["b"]), f"{e['delta']:+,}")
        if "executed_per_tile" in cmp:
            e = cmp["executed_per_tile"]
            t.add_row("executed per output tile", fmt_count(e["a"]), fmt_count(e["b"]), f"{e['delta']:+,.1f}")
        for cat, v in cmp["categories"].items():
            if v["delta"]:
                t.add_row(f"  {cat}", fmt_count(v["a"]), fmt_count(v["b"]), f"{v['delta']:+,}")
        for cat, v in kl["categories"].items():
            if v["delta"]:
                t.add_row(f"  K-loop {cat}", fmt_count(v["a"]), fmt_count(v["b"]), f"{v['delta']:+,}")
        console.print(t)
        if kl["mismatch"]:
            console.print(f"[bold yellow]K-loop {escape(kl['mismatch'])}[/bold yellow]")
        changed = {k: v for k, v in cmp["features"].items() if v["a"] != v["b"]}
        if changed:
            console.print(
                _labelled(
                    "features changed:",
                    [f"{k} {'yes' if v['a'] else 'no'}→{'yes' if v['b'] else 'no'}" for k, v in changed.items()],
                    console.width,
                ),
                markup=False,
                highlight=False,
            )
        top = list(cmp["opcodes"].items())[:12]
        if top:
            console.print(
                _labelled("opcode deltas:", [f"{k} {v['delta']:+,}" for k, v in top], console.width),
                markup=False,
                highlight=False,
            )
        if cmp.get("executed_opcodes"):
            _print_executed_opcodes(console, cmp["executed_opcodes"])
        console.print()


def _print_executed_opcodes(console: Console, ex: dict, top: int = 12) -> None:
    """The executed-instruction change by opcode: per executed MMA where both sides ran MMAs."""
    from rich.table import Table

    per = ex["per_mma"]
    rows = list(ex["opcodes"].items())[:top]
    if not rows:
        return
    title = "executed instructions by opcode"
    if per:
        title += f" (per executed MMA: A {per['a']:.2f}, B {per['b']:.2f})"
    t = Table(title=title, header_style="bold")
    for col in ("opcode", "A", "B", "Δ"):
        t.add_column(col, justify="left" if col == "opcode" else "right", no_wrap=True)
    if per:
        for col in ("A / MMA", "B / MMA", "Δ / MMA"):
            t.add_column(col, justify="right", no_wrap=True)
    for op, v in rows:
        cells = [op, fmt_count(v["a"]), fmt_count(v["b"]), f"{v['delta']:+,}"]
        if per:
            cells += [f"{v['a_per_mma']:.2f}", f"{v['b_per_mma']:.2f}", f"{v['delta_per_mma']:+.2f}"]
        t.add_row(*cells)
    dropped = fit_table(console, t, [4, 5, 6, 3])  # per-MMA columns before the counts themselves
    console.print(t)
    if dropped:
        console.print(left_out_note(dropped, "--json has every value"))


def print_hot(console: Console, fn: dict, label: str = "") -> None:
    """The hottest instructions by stall samples (``--hot``): one table row per instruction where
    the table fits the console whole, else a listing of a few lines per instruction."""
    from rich.markup import escape
    from rich.table import Table

    from bsprof.reports.term import needed_width

    if not fn["hot"]:
        console.print(
            f"[dim]{label}--hot: no stall samples in this launch of {escape(short_name(fn['name'], 60))}[/dim]"
        )
        return
    title = f"{label}hottest instructions by stall samples · {short_name(fn['name'], 60)}"
    rows = []
    for h in fn["hot"]:
        rows.append(
            {
                "pc": f"{h['pc']:#06x}" if h["pc"] is not None else "",
                "mark": "◀" if h["kloop"] else "",
                "instruction": f"{h['guard'] + ' ' if h['guard'] else ''}{h['opcode']} {h['operands']}",
                "executed": fmt_count(h["executed"]),
                "samples": fmt_count(h["samples"]),
                "share": f"{h['share']:.1%}",
                "reasons": [f"{k} {v:,}" for k, v in h["reasons"].items()],
                "where": " · ".join(x for x in (h.get("role"), h.get("line")) if x),
            }
        )
    t = Table(title=escape(title), header_style="bold")
    for col, just in (
        ("pc", "left"),
        ("", "left"),
        ("instruction", "left"),
        ("executed", "right"),
        ("samples", "right"),
        ("share", "right"),
        ("top reasons", "left"),
        ("where", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=True)
    for r in rows:
        t.add_row(
            r["pc"],
            r["mark"],
            escape(r["instruction"]),
            r["executed"],
            r["samples"],
            r["share"],
            ", ".join(r["reasons"]),
            escape(r["where"]),
        )
    if needed_width(console, t) <= console.width:
        console.print(t)
        console.print("[dim]◀ = in the K-loop[/dim]")
        return
    # a listing: the numbers on the instruction's line, its reasons and source below it
    width = console.width
    head = ("pc", "", "samples", "share", "executed", "instruction")
    cells = [head] + [(r["pc"], r["mark"], r["samples"], r["share"], r["executed"], r["instruction"]) for r in rows]
    w = [max(len(c[k]) for c in cells) for k in range(5)]
    lead = sum(w) + 2 * 5
    out = [f"{label}hottest instructions by stall samples", short_name(fn["name"], width)]
    for k, c in enumerate(cells):
        fixed = "  ".join(v.rjust(w[i]) if i >= 2 else v.ljust(w[i]) for i, v in enumerate(c[:5]))
        instr = _operand_lines(c[5], max(24, width - lead))
        out.append((fixed + "  " + instr[0]).rstrip())
        out += [" " * lead + more for more in instr[1:]]
        if k:
            r = rows[k - 1]
            indent = " " * (w[0] + 2)
            out += (
                pack(r["reasons"], width - len(indent), sep=", ")
                .replace("\n", "\n" + indent)
                .join([indent, ""])
                .splitlines()
            )
            if r["where"]:
                out += (
                    pack(r["where"].split(" · "), width - len(indent))
                    .replace("\n", "\n" + indent)
                    .join([indent, ""])
                    .splitlines()
                )
    console.print("\n".join(out), markup=False, highlight=False, soft_wrap=True)
    console.print("[dim]◀ = in the K-loop; below each instruction: its top stall reasons, where it is[/dim]")


def _listed(names: list[str], most: int = 20) -> str:
    """At most ``most`` names from the input, and a count of the rest: a line stays a line."""
    more = f" (+{len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more
