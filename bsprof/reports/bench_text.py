"""The bench artifact on the terminal: one renderer for both families' benches (the verb's and
benchmarks/fp8_blockwise.py's); the HTML page's view of the same artifact is :mod:`.sec_bench`."""

from __future__ import annotations


def render(console, doc: dict) -> None:
    """Print a bench artifact (``bsprof bench``): one problem, or a list of them under ``results``."""
    if doc.get("family") == "nvfp4":
        _render_nvfp4(console, doc)
        return
    device = doc.get("device") or {}
    name = device.get("name", "GPU") if isinstance(device, dict) else str(device)
    results = doc["results"] if isinstance(doc.get("results"), list) else [doc]
    first = results[0] if results else {}
    iters, inputs = doc.get("iters", first.get("iters")), doc.get("inputs", first.get("inputs", "randn"))
    over = rounds_phrase(
        doc.get("rounds", first.get("rounds")) or 1, doc.get("placements", first.get("placements")) or 1
    )
    print_table(console, results, f"{doc.get('family', 'bench')} on {name} (median of {iters}{over}, {inputs} inputs)")
    if "close_calls" in doc and not doc["close_calls"]:
        console.print(
            "no close call at this problem: the tile choice models its pick more than 3% ahead of every "
            "other tile (or the spec fixes the tile)"
        )


def rounds_phrase(rounds: int, copies: int) -> str:
    """What a table's medians are of beyond the launches: ", median round of R over C copies of the
    operands", each part only where there is more than one."""
    return (f", median round of {rounds}" if rounds > 1 else "") + (
        f" over {copies} copies of the operands" if copies > 1 else ""
    )


def _render_nvfp4(console, doc: dict) -> None:
    rows = doc.get("rows") or []
    row, cub = rows[0], next((r for r in rows[1:] if r.get("name") == "cublas"), None)
    err = row.get("rel_err")
    console.print(
        f"nvfp4 {row['name']} on {doc['device']['name']} {tuple(doc['mnkl'])}: median {row['ms']:.4f} ms, "
        f"min {row['ms_min']:.4f} ms, {row['tflops']:,.0f} TFLOP/s ({row['pct_peak']:.1f}% of "
        f"{doc['peak_tflops']:,.0f}, {doc['peak_source']})" + (f", rel. err {err:.2e}" if err is not None else "")
    )
    if cub:
        console.print(
            f"cuBLAS (torch._scaled_mm): median {cub['ms']:.4f} ms, {cub['tflops']:,.0f} TFLOP/s; "
            f"ours / cuBLAS speed: {row['vs_cublas']:.3f}x"
        )
    else:
        console.print(f"cuBLAS peer skipped: {(doc.get('skipped') or {}).get('cublas')}")


def _by_label(res: dict) -> dict[str, dict]:
    from bsprof.analyzers.bench_rows import column_labels

    return dict(zip(column_labels(res["rows"]), res["rows"]))


def _grid(console, title: str, results: list[dict], columns: list[tuple[str, object]]) -> None:
    """One table of problems x ``columns`` (header, ``cell(result, by_label) -> str``), laid out to
    fit the console with every cell whole: a problem per row where that fits; else a column per
    problem (a kernel per row, a cell's `` / `` and bracketed parts on lines of their own) where
    that fits; else
    a problem per row again, its columns in as many tables as they need."""
    from rich.table import Table

    from bsprof.reports.term import needed_width

    shapes = [",".join(str(x) for x in res["mnkl"]) for res in results]
    bys = [_by_label(res) for res in results]

    def by_problem(cols: list[tuple[str, object]], head: str) -> Table:
        t = Table(title=head)
        t.add_column("M,N,K,L", no_wrap=True)
        for name, _ in cols:
            t.add_column(name, justify="right", no_wrap=True)
        for shape, res, by in zip(shapes, results, bys):
            t.add_row(shape, *[cell(res, by) for _, cell in cols])
        return t

    t = by_problem(columns, title)
    if needed_width(console, t) <= console.width:
        console.print(t)
        return
    tr = Table(title=title)
    tr.add_column("", no_wrap=True)
    for shape in shapes:  # M,N / K,L on two lines keeps the column as narrow as its numbers
        parts = shape.split(",")
        tr.add_column(",".join(parts[:2]) + ",\n" + ",".join(parts[2:]), justify="right", no_wrap=True)
    for name, cell in columns:
        tr.add_row(
            " ".join(name.split()),
            *[cell(res, by).replace(" / ", "\n").replace(" (", "\n(") for res, by in zip(results, bys)],
        )
    if needed_width(console, tr) <= console.width:
        console.print(tr)
        return
    chunks: list[list[tuple[str, object]]] = [[]]
    for col in columns:
        if chunks[-1] and needed_width(console, by_problem(chunks[-1] + [col], title)) > console.width:
            chunks.append([])
        chunks[-1].append(col)
    for k, chunk in enumerate(chunks):
        console.print(by_problem(chunk, title if k == 0 else "(continued)"))


def print_table(console, results: list[dict], title: str) -> None:
    from bsprof.analyzers.bench_rows import column_labels, round_spread
    from bsprof.reports.term import say

    names: list[str] = []
    for res in results:
        for nm in column_labels(res["rows"]):
            if nm not in names:
                names.append(nm)

    def tflops(nm: str):
        return lambda res, by: "—" if by.get(nm) is None else f"{by[nm]['tflops']:,.0f}"

    def ratio(res, by) -> str:
        opt = by.get("optimized")
        return f"{opt['vs_cublas_blockwise']:.3f}x" if opt and opt["vs_cublas_blockwise"] else "—"

    _grid(
        console, f"{title}: TFLOP/s", results, [(nm, tflops(nm)) for nm in names] + [("optimized /\ncuBLAS bw", ratio)]
    )
    if any(r.get("sm_mhz") for res in results for r in res["rows"]):
        print_clocks(console, results, names)
    if any(round_spread(r) is not None for res in results for r in res["rows"]):
        print_spread(console, results, names)
        ours = [
            nm
            for nm in names
            if any(r.get("ours") for res in results for label, r in _by_label(res).items() if label == nm)
        ]
        if len(ours) > 1:
            print_paired(console, results, names, ours[0])
    if any(r.get("gap_us") is not None for res in results for r in res["rows"]):
        print_launch_gaps(console, results, names)
    hows = {}
    for res in results:
        hows.update({nm: r["launch"] for nm, r in _by_label(res).items() if r.get("launch")})
    if hows:
        say(console, "launched as: " + ", ".join(f"{nm} {how}" for nm, how in hows.items()), indent="  ", hang="    ")
    for res in results:
        for r in res["rows"]:
            if r.get("tile"):
                why = f" (chosen: {r['choice']})" if r.get("choice") else ""
                say(console, f"{tuple(res['mnkl'])} {r['name']}: {r['tile']}{why}", indent="  ", hang="    ")
        errs = ", ".join(
            f"{r['name']}={r['rel_err']:.2e}" if isinstance(r["rel_err"], float) else f"{r['name']}={r['rel_err']}"
            for r in res["rows"]
            if r["rel_err"] is not None
        )
        if errs:
            say(console, f"{tuple(res['mnkl'])} rel. Frobenius error vs float64: {errs}", indent="  ", hang="    ")
        for nm, why in res["skipped"].items():
            say(console, f"{tuple(res['mnkl'])} {nm} skipped: {why}", indent="  ", hang="    ")


def _per_kernel_table(console, results: list[dict], names: list[str], title: str, cell) -> None:
    """One row per problem, one column per timed kernel, ``cell(row) -> str`` (laid out by :func:`_grid`)."""
    _grid(console, title, results, [(nm, (lambda nm: lambda res, by: cell(by.get(nm) or {}))(nm)) for nm in names])


def print_clocks(console, results: list[dict], names: list[str]) -> None:
    """Per kernel: SM clock and power while timed, and FLOP per SM cycle (TFLOP/s without the clock):
    under the power limit a kernel can lose on either."""
    from bsprof.analyzers.bench_rows import clock_cells

    _per_kernel_table(
        console,
        results,
        names,
        "while timed: SM MHz / board W / FLOP per SM-cycle (FP8 dense peak 8,192); * = power-capped",
        lambda r: " / ".join(clock_cells(r, capped_mark="*")),
    )


def print_spread(console, results: list[dict], names: list[str]) -> None:
    """Per kernel: how far its rounds moved (slowest / fastest - 1). A difference between two
    kernels smaller than this is not one a single run decides."""
    from bsprof.analyzers.bench_rows import spread_cell

    _per_kernel_table(
        console,
        results,
        names,
        "round-to-round spread of each kernel's time, slowest / fastest round - 1 "
        "(in brackets: of its cycles, time x SM clock of each round)",
        spread_cell,
    )


def print_paired(console, results: list[dict], names: list[str], first: str) -> None:
    """An A/B of several kernels: each against the first, round by round (the rounds time every
    kernel back to back, so a pair shares the clock that moves the absolute numbers)."""
    from bsprof.analyzers.bench_rows import paired_cell

    others = [nm for nm in names if nm != first]

    def col(nm: str):
        return lambda res, by: paired_cell(by[nm], by[first]) if by.get(first) and nm in by else "—"

    _grid(
        console,
        f"against {first}, round by round: its time / each kernel's (> 1: faster), median (rounds' range)",
        results,
        [(nm, col(nm)) for nm in others],
    )


def print_launch_gaps(console, results: list[dict], names: list[str]) -> None:
    """Per kernel: its GPU duration and the idle gap before it, from CUPTI (``--launch-gaps``):
    an event-timed launch is both, and only the first is the kernel's."""

    def cell(r: dict) -> str:
        if r.get("kernel_us") is None:
            return "—"
        gap = r.get("gap_us")
        return f"{r['kernel_us']:,.1f} / " + ("—" if gap is None else f"{gap:.1f}")

    _per_kernel_table(
        console, results, names, "CUPTI, 30 back-to-back launches: kernel us / gap before it us (median)", cell
    )


def _stages(asked, built) -> str:
    """ab_stage as a build gets it: 0 asks for as many stages as the shared memory holds."""
    if built is None:
        return str(asked)
    if not asked:
        return f"{built} (shared-memory budget)"
    return str(built) if built == asked else f"{built} (asked {asked}; the shared memory holds {built})"


def render_plan(console, doc: dict) -> None:
    """``bench --plan``: one problem's configuration as a launch would build it, and why."""
    from rich.markup import escape

    shape = ",".join(str(x) for x in doc["mnkl"])
    split = f" split-K {doc['split_k']}" if doc.get("split_k", 1) > 1 else ""
    console.print(
        f"[bold]{doc['family']} {escape(doc['kernel'])} at {shape}[/bold] ({doc['num_sms']} SMs): "
        f"tile {doc['tile']}, cluster {doc['cluster']}{split}"
    )
    console.print(
        "  "
        + (
            f"chosen: {escape(doc['choice'])}"
            if doc.get("choice")
            else "fixed by the kernel spec or flags (no per-problem choice)"
        )
    )
    if doc.get("close_calls"):
        console.print(
            f"  close calls, too near to rank: {escape(', '.join(doc['close_calls']))}; time them beside "
            f"the pick with `bsprof bench --family {doc['family']} --kernel {escape(doc['kernel'])} "
            f"--mnkl {shape} --close-calls`"
        )

    def shown(k, v) -> str:
        if k == "ab_stage":
            return _stages(v, doc.get("smem_stages"))
        if k == "swizzle" and doc.get("swizzle_why"):
            return f"{v} ({doc['swizzle_why']})"
        if k == "shift_last_m" and v:
            start = doc.get("shift_start", 0)
            return (
                f"{v} (last M tile computes rows {start}-{start + int(doc['tile'].split('x')[0]) - 1}, "
                "its boxes inside M)"
                if start
                else f"{v} (no M tile to shift here)"
            )
        if k == "a_rows":
            return f"{v} (A boxes stop at M: trim_a)"
        return str(v)

    sw = ", ".join(
        f"{k}={shown(k, v)}"
        for k, v in doc["switches"].items()
        if k not in ("tile_m", "tile_n", "cluster_m", "cluster_n", "split_k")
    )
    if sw:
        console.print(f"  switches: {escape(sw)}")
