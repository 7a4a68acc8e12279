"""`bsprof model`: the producer–consumer equilibrium of a warp-specialized GEMM, and what a change
to the K-loop or epilogue would do to wall time before anyone writes it."""

from __future__ import annotations

import click

from bsprof import artifacts
from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP
from bsprof.options import Delta, FiniteFloat, SweepSpec, count

STRUCTURE_CHOICES = ["auto", "blackwell", "hopper-coop", "hopper-pingpong"]


def _delta_opt(name: str, what: str, note: str = ""):
    return click.option(
        f"--{name}",
        type=Delta(),
        default=None,
        metavar="DELTA",
        help=f"change of {what} per tile: cycles (-300) or percent (-5%)" + (f"; {note}" if note else ""),
    )


@click.command(name="model")
@click.argument("builds", nargs=-1, metavar="[BUILD...]")
@click.option(
    "--change",
    "change",
    is_flag=True,
    help="price a code change from SASS: BUILD is a bundled spec (optimized:uniform_desc=0, against "
    "its base build) or two cubins / SASS listings / specs, A then B; with --from (a capture of "
    "A) every phase is projected, without it the K-loop alone",
)
@click.option(
    "--changes",
    "changes",
    is_flag=True,
    help="with --validate: switch pairs of the bundled FP8 kernel priced from SASS, then timed",
)
@click.option(
    "--tile-mn",
    "tile_mn",
    default=None,
    metavar="M,N",
    help="with --change: the output tile of two cubins whose names do not spell it",
)
@click.option(
    "--from",
    "source",
    default=None,
    type=click.Path(),
    metavar="TIMING",
    help="calibrate on a timing table (.parquet/.csv) or a `bsprof timing` results dir; "
    "default: the embedded B200 measurement",
)
@click.option(
    "--structure",
    type=click.Choice(STRUCTURE_CHOICES),
    default="auto",
    show_default=True,
    help="pipeline structure; auto = from the table's roles (Hopper: same warp under mma and epilogue)",
)
@_delta_opt(
    "kloop",
    "the K-loop",
    "the phase as the timing build measures it: removing N cycles of K-loop "
    "instructions moves it by less where warpgroups share the tensor pipe (docs/model.md, 'Warpgroups sharing the tensor pipe')",
)
@_delta_opt("phase1", "epilogue Phase 1 (every epilogue warp)")
@_delta_opt("tma0", "the first-load (TMA0) wait")
@_delta_opt("phase2", "epilogue Phase 2")
@click.option("--acc-stages", type=int, default=None, help="project with N accumulator stages")
@click.option(
    "--epi-warps",
    type=int,
    default=None,
    help="project with N epilogue warps (work split, limited by the measured shared-path ceiling)",
)
@click.option(
    "--release",
    "release_frac",
    type=FiniteFloat(0.0, 1.0),
    default=None,
    help="calibration: fraction of Phase 1 done when the accumulator is freed (0..1)",
)
@click.option(
    "--handoff", type=FiniteFloat(min=0.0), default=None, help="calibration: barrier hand-off latency, cycles"
)
@click.option(
    "--sweep",
    "sweep_spec",
    type=SweepSpec(),
    default=None,
    metavar="SPEC",
    help="grid of projections, e.g. kloop=-600:0:50,phase1=-600:0:50",
)
@click.option("--html", "html", default=None, type=click.Path(), help="write a plotly heatmap of the sweep")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON (stdout)")
@click.option("--csv", "as_csv", is_flag=True, help="print the result as CSV (stdout)")
@click.option(
    "-o",
    "--output",
    "out",
    default=None,
    type=click.Path(),
    help="also write model.json (+ sweep table) into a fresh directory under this one",
)
@click.option(
    "--tiles", type=count(1000, 5_000_000), default=50_000, show_default=True, help="Monte Carlo tiles per projection"
)
@click.option("--seed", type=count(0), default=0, show_default=True, help="Monte Carlo seed")
@click.option(
    "--validate",
    is_flag=True,
    help="check projections against delay-injected builds on this GPU; "
    "with --from DIR, score every stored run under DIR (no GPU)",
)
@click.option("--kernel", default="optimized", show_default=True, help=f"with --validate: {KERNEL_HELP}")
@click.option(
    "--family",
    type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]),
    default="auto",
    show_default=True,
    help="with --validate: kernel family",
)
@click.option(
    "--mnkl", default=None, help="with --validate or --change: problem M,N,K[,L] (--validate --changes: several, 'A;B')"
)
@click.option(
    "--pairs",
    default=None,
    help="with --validate --changes: the switch changes to time against each base build, 'a=0;b=1,c=2' "
    "(default: the 11 of the shipped validation)",
)
@click.option(
    "--repeats",
    type=int,
    default=5,
    show_default=True,
    help="with --validate: interleaved repeats per point (>= 5; the confidence interval)",
)
@click.option("--explain", is_flag=True, help="walk the equilibrium's cycles before and after the change, in cycles")
@click.option(
    "--clock",
    default=None,
    metavar="MHZ[@W]",
    help="the baseline's sustained SM clock (and board power) under back-to-back launches: also "
    "project wall time at the clock the power limit allows after the change",
)
@click.option(
    "--gpu-limits",
    "gpu_limits",
    default=None,
    metavar="TOP_MHZ,LIMIT_W[,FLOOR_W]",
    help="with --clock: the GPU's top SM clock, power limit and work-independent power (default: H100 SXM)",
)
@click.option(
    "--measure-ceiling",
    is_flag=True,
    help="measure per-warp epilogue time vs warps sharing an SM on this GPU (the --epi-warps ceiling)",
)
def command(
    builds,
    change,
    changes,
    tile_mn,
    source,
    structure,
    kloop,
    phase1,
    tma0,
    phase2,
    acc_stages,
    epi_warps,
    release_frac,
    handoff,
    sweep_spec,
    html,
    as_json,
    as_csv,
    out,
    tiles,
    seed,
    validate,
    kernel,
    family,
    mnkl,
    pairs,
    repeats,
    explain,
    clock,
    gpu_limits,
    measure_ceiling,
) -> None:
    """Project what K-loop / epilogue changes do to wall time.

    \b
    bsprof model                                 # B200 equilibrium, 5% cuts
    bsprof model --kloop -300 --phase1 -200      # baseline vs projected
    bsprof model --from RESULTS_DIR --phase1 -5% --explain
    bsprof model --from RESULTS_DIR --kloop -300 --clock 1750@700
                                                 # wall time, power-capped GPU
    bsprof model --sweep kloop=-600:0:50,phase1=-600:0:50 --html sweep.html
    bsprof model --validate --kernel pingpong    # vs delayed builds (GPU)
    bsprof model --change optimized:uniform_desc=0 --mnkl 4096,4096,4096
        --from RESULTS_DIR                       # a switch's price, per phase
    bsprof model --change A.cubin B.cubin        # K-loop of two builds, SASS
    bsprof model --validate --changes            # priced pairs, timed (GPU)
    """
    from rich.console import Console

    from bsprof.io import check_output_dir, check_output_file

    # --json / --csv print the data alone: the human tables would only be noise beside it
    console = Console(stderr=as_json or as_csv, highlight=False, quiet=as_json or as_csv)
    if as_json and as_csv:
        raise BsprofError("--json and --csv both print to stdout; choose one")
    ctx = click.get_current_context()
    if builds and not change:
        raise BsprofError(
            f"{builds[0]}: builds are priced with --change (e.g. bsprof model --change "
            "optimized:uniform_desc=0 --mnkl 4096,4096,4096 --from RESULTS_DIR)"
        )
    if change:
        from bsprof.commands.model_change import run_change

        run_change(
            console,
            builds,
            source=source,
            mnkl=mnkl,
            tile_mn=tile_mn,
            clock=clock,
            gpu_limits=gpu_limits,
            as_json=as_json,
            out=out,
            tiles=tiles,
            seed=seed,
        )
        return
    if pairs is not None and not (validate and changes):
        raise BsprofError("--pairs names the switch pairs of --validate --changes; add --validate --changes")
    if changes and not validate:
        raise BsprofError("--changes runs with --validate (switch pairs timed on this GPU); add --validate")
    if validate and not changes and source is not None:
        from bsprof.commands.model_change import rescore_runs

        rescore_runs(console, source, as_json)
        return
    if validate and changes and source is not None:
        from bsprof.commands.model_change import rescore_changes

        rescore_changes(console, source, as_json)
        return
    given = [
        f"--{name}"
        for name in ("kernel", "family", "mnkl", "repeats")
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]
    if given and not validate:
        raise BsprofError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with --validate "
            "(the delay-injected builds it runs); add --validate or drop "
            f"{'it' if len(given) == 1 else 'them'}"
        )
    # the output paths before any work: a refused path costs no minutes of Monte Carlo or GPU time
    if out is not None or measure_ceiling or validate:
        check_output_dir(out or "bsprof-results")
    if html:
        check_output_file(html)
    if measure_ceiling:
        from bsprof.profile.measure_ceiling import measure

        measure(out or "bsprof-results", console)
        return
    if validate and changes:
        from bsprof.commands.model_change import run_validate_changes

        run_validate_changes(console, mnkl=mnkl, pairs=pairs, repeats=repeats, out=out or "bsprof-results")
        return
    if validate:
        from bsprof.kernels.api import Target
        from bsprof.profile import validate as V
        from bsprof.reports.model_text import render_validation

        if repeats < 5:  # before the spec: refusing it asks no GPU and compiles nothing
            raise BsprofError(f"--repeats {repeats}: a point needs at least 5 repeats for its confidence interval")
        # the kernel, family and problem resolved once (a bad spec is refused before any GPU work);
        # every build of the validation is this Target's
        target = Target.parse(family, kernel, mnkl)
        doc = V.run(target, out_dir=out or "bsprof-results", console=console, repeats=repeats)
        render_validation(console, doc["scored"], doc["summary"], title=doc["title"])
        console.print(f"wrote {doc['run_dir']}/ (validation.csv, validation.json, tables/)", markup=False)
        return
    if html and not sweep_spec:
        raise BsprofError("--html draws a sweep; add --sweep, e.g. --sweep kloop=-600:0:50,phase1=-600:0:50")

    from bsprof.analyzers.model.run import ModelRequest, run_model
    from bsprof.reports import model_text

    req = ModelRequest(
        source=source,
        structure=structure,
        release_frac=release_frac,
        handoff=handoff,
        sweep=sweep_spec,
        tiles=tiles,
        seed=seed,
        explain=explain,
        clock=clock,
        limits=gpu_limits,
        deltas={
            "kloop": kloop,
            "phase1": phase1,
            "tma0": tma0,
            "phase2": phase2,
            "acc_stages": acc_stages,
            "epi_warps": epi_warps,
        },
    )
    result = run_model(req)
    if html:
        from bsprof.reports.figures_model import sweep_figure, write_html

        write_html(sweep_figure(result.doc, title=f"bsprof model sweep ({result.params.source})"), html)
    model_text.render_model(console, result, html)
    if as_json or as_csv:
        for line in model_text.warning_lines(result):
            click.echo(f"warning: {line}", err=True)
    model_text.emit(result, as_json=as_json, as_csv=as_csv, out=out, artifact_key=artifacts.tag("model"))
