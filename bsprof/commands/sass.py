"""`bsprof sass`: classify a kernel's SASS — instruction mix, K-loop budget, MMA detail, features."""

from __future__ import annotations

from pathlib import Path

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP
from bsprof.options import IntTupleOrAuto, count


@click.command(name="sass")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--function", "function", default=None, help="regex picking the kernel(s) (the launch name for .ncu-rep)")
@click.option(
    "--kernel",
    "variant",
    default=None,
    help=f"compile this bundled kernel on the CPU and analyze it (needs --arch); {KERNEL_HELP}",
)
@click.option("--arch", default=None, type=click.Choice(["sm_100a", "sm_90a"]), help="architecture for --kernel")
@click.option(
    "--source",
    "source",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="the kernel's Python source, for warp-role/phase attribution (default: the path in the line info)",
)
@click.option(
    "--ncu",
    "ncu",
    type=click.Path(path_type=Path),
    default=None,
    help="an .ncu-rep of the same build: attach per-PC executed counts and stall samples to a cubin",
)
@click.option("--launch", type=count(0), default=None, help="which launch of the .ncu-rep (default: all that match)")
@click.option("--tiles", type=count(1), default=None, help="output tiles the launch computed (per-tile budgets)")
@click.option(
    "--mnkl",
    default=None,
    help="M,N,K[,L]: derive --tiles from the output tile (--tile-mn, or a bundled kernel's config)",
)
@click.option(
    "--tile-mn",
    type=IntTupleOrAuto(2, 1, example="256,256"),
    multiple=True,
    help="CTA/cluster output tile M,N for --mnkl, e.g. 256,256; twice (A then B) "
    "when comparing kernels with different tiles; 'auto' (the default): "
    "a bundled kernel's config, a name that spells it (cuBLAS, DeepGEMM; "
    "a report's mangled names too) or the tile bsprof's launcher recorded "
    "in the report",
)
@click.option(
    "--by",
    type=click.Choice(["loops", "roles"]),
    default="loops",
    show_default=True,
    help="regions of the budget table",
)
@click.option("--mma-detail", is_flag=True, help="the instruction stream between consecutive MMA issues of the K-loop")
@click.option(
    "--all-kloops",
    is_flag=True,
    help="with --mma-detail: every K-loop's stream (default: the K-loop the header names; --json has them all)",
)
@click.option("--features", "show_features", is_flag=True, help="the optimization checklist with evidence lines")
@click.option(
    "--hot",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="the N instructions with the most stall samples (needs ncu SourceCounters); with two reports, each side's",
)
@click.option("--json", "as_json", is_flag=True, help="print the JSON contract")
@click.option("--csv", "as_csv", is_flag=True, help="print the region table as CSV")
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="write sass.json (+ regions.csv) into a fresh directory DIR (never reused)",
)
def command(
    inputs,
    function,
    variant,
    arch,
    source,
    ncu,
    launch,
    tiles,
    mnkl,
    tile_mn,
    by,
    mma_detail,
    all_kloops,
    show_features,
    hot,
    as_json,
    as_csv,
    out_dir,
) -> None:
    """Classify SASS from a cubin / fatbin / executable / SASS text / .ncu-rep (SourceCounters, or
    the bsprof ncu result directory holding one), each also as .xz.

    Two inputs (A B) compare baseline -> optimized. `--kernel VARIANT --arch sm_100a|sm_90a`
    compiles a bundled kernel on the CPU first (rescaled and pingpong are sm_90a only).
    """
    if as_json and as_csv:
        raise BsprofError("--json and --csv are exclusive; pick one")
    if all_kloops and not mma_detail:
        raise BsprofError("--all-kloops picks which K-loops --mma-detail lists; add --mma-detail")
    if len(inputs) + (variant is not None) > 2:
        raise BsprofError("pass one input, or two to compare (baseline then optimized)")
    if tiles is not None and (mnkl or tile_mn):
        raise BsprofError("--tiles N and --mnkl/--tile-mn both give the tile count; pass one of them")
    if out_dir is not None:
        from bsprof.io import check_unique_dir

        check_unique_dir(out_dir.parent, out_dir.name, fallback="sass")  # before any compile or analysis
    if source is not None:
        from bsprof.io import check_input

        check_input(source, fix="pass the kernel's Python source file")  # a FIFO or device: refused, unread
    problem = None
    if mnkl is not None:
        from bsprof.kernels.api import parse_mnkl

        problem = parse_mnkl(mnkl)
    bundled = {}
    if variant is not None:
        if arch is None:
            raise BsprofError(
                f"--kernel needs --arch: sm_90a (fp8-blockwise, Hopper) or sm_100a (nvfp4, "
                f"Blackwell), e.g. --kernel {variant} --arch sm_90a"
            )
        from bsprof.kernels.api import compile_for_sass

        cubin, tile = compile_for_sass(variant, arch, problem)
        bundled[len(inputs)] = (tile, variant)
        inputs = (*inputs, cubin)
    if not inputs:
        raise BsprofError(
            "pass a cubin, SASS listing or .ncu-rep, or compile a bundled kernel with "
            "--kernel VARIANT --arch ARCH (e.g. --kernel optimized --arch sm_90a)"
        )

    from bsprof.analyzers.sass.result import analyze_inputs
    from bsprof.reports import sass_text

    result = analyze_inputs(
        inputs,
        function=function,
        source=source,
        ncu=ncu,
        launch=launch,
        tiles=[tiles] * len(inputs),
        mnkl=problem,
        tile_mn=tile_mn,
        bundled_tiles=bundled,
        by=by,
        mma_detail=mma_detail,
        hot=hot,
    )
    # each rendering only when shown or written (at 50,000 instructions each costs ~0.1 s)
    json_text = sass_text.render_json(result) if as_json or out_dir is not None else ""
    csv_text = sass_text.render_csv(result) if as_csv or out_dir is not None else ""
    written = _write(out_dir, json_text, csv_text) if out_dir is not None else None
    if written is not None and (as_json or as_csv):
        click.echo(f"wrote {written}/sass.json and regions.csv", err=True)
    if as_json or as_csv:
        for note in result.notes:
            click.echo(f"note: {note}", err=True)
        click.echo(json_text if as_json else csv_text, nl=not as_csv)
        return
    from rich.console import Console

    # no highlighter: it reads every printed string (opcodes and names from the input) with regexes
    # whose time grows faster than the string
    console = Console(highlight=False)
    sass_text.render_terminal(
        console, result, mma_detail=mma_detail, show_features=show_features, hot=bool(hot), all_kloops=all_kloops
    )
    if written is not None:
        from bsprof.fmt import lit

        console.print(f"[dim]wrote {lit(written)}/sass.json and regions.csv[/dim]")


def _write(out_dir: Path, json_text: str, csv_text: str) -> Path:
    from bsprof.io import results_dir, write_text_atomic

    with results_dir(out_dir.parent, out_dir.name, fallback="sass") as staged:  # appears whole or not at all
        write_text_atomic(staged.path / "regions.csv", csv_text)
        write_text_atomic(staged.path / "sass.json", json_text)
    return staged.path
