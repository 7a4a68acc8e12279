"""`bsprof sass`: classify a kernel's SASS — instruction mix, K-loop budget, MMA detail, features."""

from __future__ import annotations

from pathlib import Path

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP
from bsprof.options import IntTupleOrAuto, count


def _compile_bundled(variant: str, arch: str) -> Path:
    from importlib import import_module

    from bsprof.kernels.api import FAMILIES, FAMILY_BY_MAJOR, parse_kernel_spec

    major = 10 if arch.startswith("sm_10") else 9 if arch.startswith("sm_9") else None
    family = FAMILY_BY_MAJOR.get(major) if major else None
    if family is None:
        raise BsprofError(f"--arch {arch}: bundled kernels exist for sm_100a (nvfp4) and sm_90a (fp8-blockwise)")
    variant, switches = parse_kernel_spec(variant, family)
    try:
        module = import_module(FAMILIES[family])
    except ImportError as exc:
        raise BsprofError(f"the bundled {family} kernels are not importable ({exc}); reinstall bsprof") from None
    from bsprof.kernels.build import cache_root

    # beside the build cache: one small cubin per variant, replaced on rebuild, never a temp-dir leak
    out_dir = cache_root().parent / "sass" / family
    return Path(module.compile_cubin(variant, out_dir, lineinfo=True, **switches))


def _bundled_tile(variant: str, arch: str, mnkl: tuple[int, int, int, int]) -> tuple[int, int]:
    """The output tile (M, N) the bundled variant computes per tile at this problem (its config)."""
    from importlib import import_module

    from bsprof.kernels.api import FAMILIES, FAMILY_BY_MAJOR, parse_kernel_spec

    family = FAMILY_BY_MAJOR[10 if arch.startswith("sm_10") else 9]
    variant, switches = parse_kernel_spec(variant, family)
    config = import_module(FAMILIES[family] + ".config")
    try:
        kw = config.resolve(variant, switches, mnkl)
    except TypeError:  # a family whose tile does not depend on the problem
        kw = config.resolve(variant, switches)
    return int(kw["tile_m"]), int(kw["tile_n"])


def _tiles_per_side(inputs, bundled: dict[int, str], arch, mnkl, tile_mn) -> tuple[list, list[str]]:
    """Each side's output tile (M, N) from --tile-mn (once for every side, or once per side) or a
    bundled kernel's config; None where neither says (the analysis then reads the kernel name or
    refuses). Never a guess."""
    if mnkl is None:
        if tile_mn:
            raise BsprofError("--tile-mn needs --mnkl M,N,K[,L] (the problem the launch computed)")
        return [None] * len(inputs), []
    from bsprof.kernels.api import parse_mnkl

    problem = parse_mnkl(mnkl)
    # "auto": that side's tile from the bundled config or the kernel's name, else refused
    given = [None if t == "auto" else t for t in tile_mn]
    if len(given) > len(inputs):
        raise BsprofError(f"--tile-mn given {len(given)} times for {len(inputs)} input(s); give it once, or once per input (A then B)")
    out, notes = [], []
    for i in range(len(inputs)):
        side = f"{'AB'[i]}: " if len(inputs) == 2 else ""
        tmn = (given[i] if len(given) == len(inputs) else given[0]) if given else None
        if tmn is not None:
            if len(inputs) == 2 and len(given) == 1 and i == 0:
                notes.append(f"tile {tmn[0]}x{tmn[1]} for A and B from the one --tile-mn for both inputs (give it twice, "
                             "A then B, if their tiles differ)")
        elif i in bundled:
            tmn = _bundled_tile(bundled[i], arch, problem)
            notes.append(f"{side}tile {tmn[0]}x{tmn[1]} from the bundled {bundled[i]} kernel's config")
        out.append(tmn)
    return out, notes


@click.command(name="sass")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--function", "function", default=None, help="regex picking the kernel(s) (the launch name for .ncu-rep)")
@click.option("--kernel", "variant", default=None,
              help=f"compile this bundled kernel on the CPU and analyze it (needs --arch); {KERNEL_HELP}")
@click.option("--arch", default=None, type=click.Choice(["sm_100a", "sm_90a"]), help="architecture for --kernel")
@click.option("--source", "source", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="the kernel's Python source, for warp-role/phase attribution (default: the path in the line info)")
@click.option("--ncu", "ncu", type=click.Path(path_type=Path), default=None,
              help="an .ncu-rep of the same build: attach per-PC executed counts and stall samples to a cubin")
@click.option("--launch", type=count(0), default=None, help="which launch of the .ncu-rep (default: all that match)")
@click.option("--tiles", type=count(1), default=None, help="output tiles the launch computed (per-tile budgets)")
@click.option("--mnkl", default=None, help="M,N,K[,L]: derive --tiles from the output tile (--tile-mn, or a bundled kernel's config)")
@click.option("--tile-mn", type=IntTupleOrAuto(2, 1, example="256,256"), multiple=True, help="CTA/cluster output tile M,N for --mnkl, e.g. 256,256; twice (A then B) "
                                               "when comparing kernels with different tiles; 'auto' (the default): "
                                               "a bundled kernel's config or a name that spells it (cuBLAS, DeepGEMM)")
@click.option("--by", type=click.Choice(["loops", "roles"]), default="loops", show_default=True,
              help="regions of the budget table")
@click.option("--mma-detail", is_flag=True, help="the instruction stream between consecutive MMA issues of the K-loop")
@click.option("--features", "show_features", is_flag=True, help="the optimization checklist with evidence lines")
@click.option("--hot", type=click.IntRange(min=1), default=None, metavar="N",
              help="the N instructions with the most stall samples (needs ncu SourceCounters); with two "
                   "reports, each side's")
@click.option("--json", "as_json", is_flag=True, help="print the JSON contract")
@click.option("--csv", "as_csv", is_flag=True, help="print the region table as CSV")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=None,
              help="write sass.json (+ regions.csv) into a fresh directory DIR (never reused)")
def command(inputs, function, variant, arch, source, ncu, launch, tiles, mnkl, tile_mn, by, mma_detail,
            show_features, hot, as_json, as_csv, out_dir) -> None:
    """Classify SASS from a cubin / fatbin / executable / SASS text / .ncu-rep (SourceCounters).

    Two inputs (A B) compare baseline -> optimized. `--kernel VARIANT --arch sm_100a|sm_90a`
    compiles a bundled kernel on the CPU first (rescaled and pingpong are sm_90a only).
    """
    if as_json and as_csv:
        raise BsprofError("--json and --csv are exclusive; pick one")
    bundled: dict[int, str] = {}
    if variant is not None:
        if arch is None:
            raise BsprofError("--kernel needs --arch sm_100a or --arch sm_90a")
        bundled[len(inputs)] = variant
        inputs = (*inputs, _compile_bundled(variant, arch))
    if not inputs:
        raise BsprofError("pass a cubin, SASS listing or .ncu-rep (or --kernel VARIANT --arch ARCH, e.g. --kernel optimized)")
    if len(inputs) > 2:
        raise BsprofError("pass one input, or two to compare (baseline then optimized)")
    if tiles is not None and tiles <= 0:
        raise BsprofError("--tiles must be a positive integer")
    if tiles is not None and (mnkl or tile_mn):
        raise BsprofError("--tiles N and --mnkl/--tile-mn both give the tile count; pass one of them")
    per_side, tile_notes = _tiles_per_side(inputs, bundled, arch, mnkl, tile_mn) if tiles is None else ([], [])

    from bsprof.analyzers.sass.result import analyze_inputs
    from bsprof.kernels.api import parse_mnkl
    from bsprof.reports import sass_text

    result = analyze_inputs(inputs, function=function, source=source, ncu=ncu, launch=launch,
                            tiles=[tiles] * len(inputs), mnkl=parse_mnkl(mnkl) if mnkl and tiles is None else None,
                            tile_mn=per_side, by=by, mma_detail=mma_detail, hot=hot, notes=tile_notes)
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

    console = Console()
    sass_text.render_terminal(console, result, mma_detail=mma_detail, show_features=show_features, hot=bool(hot))
    if written is not None:
        console.print(f"[dim]wrote {written}/sass.json and regions.csv[/dim]")


def _write(out_dir: Path, json_text: str, csv_text: str) -> Path:
    from bsprof.io import unique_dir, write_text_atomic

    d = unique_dir(out_dir.parent, out_dir.name, fallback="sass")
    write_text_atomic(d / "regions.csv", csv_text)
    write_text_atomic(d / "sass.json", json_text)
    return d
