"""`bsprof sass`: classify a kernel's SASS — instruction mix, K-loop budget, MMA detail, features."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import click

from bsprof import artifacts
from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP

CSV_FIXED = ["function", "region", "depth", "is_kloop", "instructions", "mma", "overhead_per_mma",
             "executed", "executed_per_tile", "mma_executed", "stall_samples"]


def _pair(text: str | None, name: str) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise BsprofError(f"--{name} {text!r} must be two integers, e.g. --{name} 256,128") from None
    return a, b


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
    compile_cubin = getattr(module, "compile_cubin", None)
    if compile_cubin is None:
        raise BsprofError(f"the bundled {family} kernels are not available in this build yet "
                          f"({FAMILIES[family]}.compile_cubin is missing); pass a cubin instead")
    from bsprof.kernels.build import cache_root

    # beside the build cache: one small cubin per variant, replaced on rebuild, never a temp-dir leak
    out_dir = cache_root().parent / "sass" / family
    return Path(compile_cubin(variant, out_dir, lineinfo=True, **switches))


def _analyze(path: Path, function, source, ncu, launch):
    from bsprof.analyzers.sass import analyze_path
    from bsprof.analyzers.sass.budget import attach_counts
    from bsprof.analyzers.sass.features import refine_with_launch

    kw = {"kernel_source": source}
    if path.suffix == ".ncu-rep" and launch is not None:
        kw["launch"] = launch
    fas = analyze_path(path, function, **kw)
    if ncu is not None:
        from bsprof.analyzers.sass.ncu_source import read_source_counters

        scs = read_source_counters(ncu, launch=launch)
        for fa in fas:
            match = [sc for sc in scs if sc.name == fa.name] or (scs if len(fas) == 1 else [])
            if not match:
                raise BsprofError(f"{ncu}: no launch named {fa.name[:60]}…; pass --function to pick the kernel")
            attach_counts(fa, match[0])
            refine_with_launch(fa.features, fa.launch_info)
    return fas


def _function_json(fa, mma_detail: bool, tiles: int | None, by: str, hot: int | None = None) -> dict:
    from bsprof.analyzers.sass.budget import hot_instructions, mma_detail as detail, region_rows, role_tables

    d = fa.to_dict()
    d.update(role_tables(fa))
    d["regions"] = region_rows(fa, by="loops", tiles=tiles)
    if fa.roles is not None:
        d["role_regions"] = region_rows(fa, by="roles", tiles=tiles)
    if tiles:
        d["tiles"] = tiles
    if mma_detail and fa.kloops:
        d["mma_detail"] = detail(fa)["kloops"]
    if hot:
        d["hot"] = hot_instructions(fa, hot)
    return d


@click.command(name="sass")
@click.argument("inputs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--function", "function", default=None, help="regex picking the kernel(s) (the launch name for .ncu-rep)")
@click.option("--kernel", "variant", default=None,
              help=f"compile this bundled kernel on the CPU and analyze it (needs --arch); {KERNEL_HELP}")
@click.option("--arch", default=None, type=click.Choice(["sm_100a", "sm_90a"]), help="architecture for --kernel")
@click.option("--source", "source", type=click.Path(path_type=Path), default=None,
              help="the kernel's Python source, for warp-role/phase attribution (default: the path in the line info)")
@click.option("--ncu", "ncu", type=click.Path(path_type=Path), default=None,
              help="an .ncu-rep of the same build: attach per-PC executed counts and stall samples to a cubin")
@click.option("--launch", type=int, default=None, help="which launch of the .ncu-rep (default: all that match)")
@click.option("--tiles", type=int, default=None, help="output tiles the launch computed (per-tile budgets)")
@click.option("--mnkl", default=None, help="M,N,K[,L]: derive --tiles with --tile-mn")
@click.option("--tile-mn", default=None, help="CTA/cluster output tile M,N for --mnkl, e.g. 256,256")
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
    if variant is not None:
        if arch is None:
            raise BsprofError("--kernel needs --arch sm_100a or --arch sm_90a")
        inputs = (*inputs, _compile_bundled(variant, arch))
    if not inputs:
        raise BsprofError("pass a cubin, SASS listing or .ncu-rep (or --kernel VARIANT --arch ARCH, e.g. --kernel optimized)")
    if len(inputs) > 2:
        raise BsprofError("pass one input, or two to compare (baseline then optimized)")
    if tiles is None and mnkl is not None:
        from bsprof.analyzers.sass.budget import tiles_from_problem
        from bsprof.kernels.api import parse_mnkl

        tmn = _pair(tile_mn, "tile-mn")
        if tmn is None:
            raise BsprofError("--mnkl needs --tile-mn M,N to derive the tile count (or pass --tiles N)")
        tiles = tiles_from_problem(parse_mnkl(mnkl), tmn)
    if tiles is not None and tiles <= 0:
        raise BsprofError("--tiles must be a positive integer")

    analyses = [_analyze(Path(p), function, source, ncu, launch) for p in inputs]
    if by == "roles" and any(fa.roles is None for fas in analyses for fa in fas):
        raise BsprofError("--by roles needs line info; compile with CUTE_DSL_LINEINFO=1 (nvdisasm -gi)")

    if len(analyses) == 2:
        from bsprof.analyzers.sass.compare import compare, pair_functions

        result = {"bsprof": artifacts.tag("sass"), "mode": "compare",
                  "compare": [compare(a, b) for a, b in pair_functions(analyses[0], analyses[1])],
                  "a": {"source": str(inputs[0]), "functions": [_function_json(fa, mma_detail, tiles, by, hot) for fa in analyses[0]]},
                  "b": {"source": str(inputs[1]), "functions": [_function_json(fa, mma_detail, tiles, by, hot) for fa in analyses[1]]}}
        # the contract's top-level functions are the optimized side's
        result["functions"] = result["b"]["functions"]
    else:
        result = {"bsprof": artifacts.tag("sass"), "source": str(inputs[0]),
                  "functions": [_function_json(fa, mma_detail, tiles, by, hot) for fa in analyses[0]]}
    csv_text = _csv(result, by)
    written = _write(out_dir, result, csv_text) if out_dir is not None else None
    if written is not None and (as_json or as_csv):
        click.echo(f"wrote {written}/sass.json and regions.csv", err=True)
    if as_json:
        click.echo(artifacts.dumps(result, indent=1))
        return
    if as_csv:
        click.echo(csv_text, nl=False)
        return
    from rich.console import Console

    from bsprof.commands import sass_render

    console = Console()
    if "compare" in result:
        sass_render.print_compare(console, result)
        if hot:
            for side in ("a", "b"):
                for fn in result[side]["functions"]:
                    sass_render.print_hot(console, fn, f"{side.upper()} ")
    else:
        sass_render.print_analysis(console, result, by=by, mma_detail=mma_detail, show_features=show_features)
    if written is not None:
        console.print(f"[dim]wrote {written}/sass.json and regions.csv[/dim]")


def _rows_for_csv(result: dict, by: str) -> list[dict]:
    rows = []
    for fn in result["functions"]:
        key = "role_regions" if by == "roles" and "role_regions" in fn else "regions"
        for r in fn[key]:
            row = {k: r.get(k) for k in CSV_FIXED if k != "function"}
            row["function"] = fn["name"]
            for cat, v in r["categories"].items():
                row[f"cat_{cat}"] = v
            for reason, v in (r.get("stalls") or {}).items():
                row[f"stall_{reason}"] = v
            rows.append(row)
    return rows


def _csv(result: dict, by: str) -> str:
    rows = _rows_for_csv(result, by)
    extra = sorted({k for r in rows for k in r} - set(CSV_FIXED), key=lambda k: (not k.startswith("cat_"), k))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIXED + extra, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIXED + extra})
    return buf.getvalue()


def _write(out_dir: Path, result: dict, csv_text: str) -> Path:
    from bsprof.io import unique_dir, write_text_atomic

    d = unique_dir(out_dir.parent if str(out_dir.parent) else Path("."), out_dir.name)
    write_text_atomic(d / "regions.csv", csv_text)
    artifacts.save(d / "sass.json", result, indent=1)
    return d
