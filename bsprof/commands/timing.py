"""`bsprof timing`: per-warp, per-tile phase timing of a bundled kernel, captured on the GPU."""

from __future__ import annotations

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP
from bsprof.options import IntTuple, count


@click.command(name="timing")
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option("--kernel", "spec", default="optimized", show_default=True, help=KERNEL_HELP)
@click.option("--mnkl", default=None, help="M,N,K[,L]; default: the family's default problem")
@click.option(
    "-o",
    "--output",
    "out",
    default=None,
    help="parent directory; each capture (or, with --from, each re-summary) gets a fresh sub-directory "
    "[default: bsprof-results; with --from: none, only printed]",
)
@click.option(
    "--overhead",
    type=click.Choice(["shape", "all", "none"]),
    default="shape",
    show_default=True,
    help="plain vs timing build wall time: on the captured shape, on the three benchmark shapes, or skip",
)
@click.option(
    "--rounds", type=count(3, 100_000), default=30, show_default=True, help="timing rounds for the overhead medians"
)
@click.option(
    "--max-trace-events",
    type=count(100),
    default=200_000,
    show_default=True,
    help="cap on trace.json slices; whole tiles are sampled beyond it",
)
@click.option(
    "--from",
    "from_dir",
    default=None,
    type=click.Path(),
    help="re-summarize an earlier capture (a timing table or results dir) without a GPU",
)
@click.option(
    "--mma-tiler",
    type=IntTuple(2, 1, 1024, "256,128"),
    default=None,
    help="with --from: the tile M,N the capture ran, where its timing.json does not say "
    "(for the K-loop's cycles a K block against the tile's MMA floor)",
)
@click.option("--json", "as_json", is_flag=True, help="print the artifact as JSON")
def command(family, spec, mnkl, out, overhead, rounds, max_trace_events, from_dir, mma_tiler, as_json) -> None:
    """Capture per-warp phase timing (producer / mma / epilogue) of a bundled kernel's timing build.

    Writes timing.parquet, timing.csv, trace.json (ui.perfetto.dev) and timing.json into a fresh
    directory under -o, and prints per-phase statistics, the epilogue-warp spread, tiles per SM,
    the SM clock measured during the run, and the timing build's overhead.
    """
    from rich.console import Console

    from bsprof.artifacts import dumps
    from bsprof.io import check_output_dir
    from bsprof.reports.timing_text import render

    # with --json the artifact alone goes out (stdout); progress lines still go to stderr
    console = Console(stderr=as_json, highlight=False)
    if mma_tiler is not None and from_dir is None:
        raise BsprofError(
            "--mma-tiler names the tile of an earlier capture read with --from; a capture records its own"
        )
    if from_dir is None and out is None:
        out = "bsprof-results"
    if out is not None:
        check_output_dir(out)  # before a capture or a re-summary: a refused path costs no work
    if from_dir is not None:
        from bsprof.analyzers.timing.io import resummarize_to, summarize_file

        if out is None:
            doc, run_dir = summarize_file(from_dir), None
        else:
            doc, run_dir = resummarize_to(from_dir, out, tile=mma_tiler, max_trace_events=max_trace_events)
    else:
        from bsprof.kernels.api import Target
        from bsprof.profile.timing_capture import capture_run

        target = Target.parse(family, spec, mnkl)
        doc, run_dir = capture_run(
            target, out, overhead_on=overhead, rounds=rounds, max_trace_events=max_trace_events, log=console.print
        )
    if as_json:
        if run_dir is not None:
            click.echo(f"wrote {run_dir}/ (timing.parquet, timing.csv, trace.json, timing.json)", err=True)
        click.echo(dumps(doc))
        return
    render(console, doc, run_dir, mma_tiler)
