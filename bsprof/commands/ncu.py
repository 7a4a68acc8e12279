"""`bsprof ncu`: profile a bundled kernel with Nsight Compute, or read / compare .ncu-rep files.
Parses options, calls one analyzer or the runner, renders through bsprof.reports.ncu_text."""

from __future__ import annotations

import math
import re

import click

from bsprof import artifacts
from bsprof.analyzers.ncu.peaks import PRECISIONS
from bsprof.errors import BsprofError
from bsprof.kernels.api import VARIANTS
from bsprof.options import FiniteFloat, count


@click.command(name="ncu")
@click.option(
    "--kernel",
    "variant",
    default=None,
    help=f"profile this bundled kernel (needs a GPU and ncu): {' | '.join(VARIANTS)}, on "
    "fp8-blockwise optionally with switches, e.g. optimized:epi_split=0",
)
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option(
    "--mnkl",
    default=None,
    help="M,N,K[,L]; default: the family's default problem (--report: the problem of launches whose NVTX "
    "range does not name it)",
)
@click.option(
    "--set",
    "set_name",
    type=click.Choice(["triage", "full"]),
    default="triage",
    show_default=True,
    help="triage: only what the verdict needs (few replay passes); full: ncu's full set + source",
)
@click.option("--clock-control", type=click.Choice(["none", "base"]), default="none", show_default=True)
@click.option(
    "-o",
    "--output",
    "out",
    default=None,
    help="directory to write results into (a fresh subdirectory per run; --kernel default: bsprof-results)",
)
@click.option(
    "--warmup", type=count(0, 1_000_000), default=3, show_default=True, help="launches before the measured one"
)
@click.option("--report", default=None, help="analyze this .ncu-rep (or the one in a bsprof result directory)")
@click.option(
    "--filter", "filter_", default=None, help="regex on kernel names and NVTX ranges (with --report / --compare)"
)
@click.option(
    "--filter-b",
    "filter_b",
    default=None,
    help="with --compare: the regex that picks B's launch (default: --filter), e.g. two launches of one report",
)
@click.option(
    "--flops",
    type=FiniteFloat(),
    default=None,
    help="FLOPs of one launch, for TFLOP/s and % of peak (--report; default: from the report's NVTX range "
    "or result directory)",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default=None,
    help="peak to compare against (default: from the executed MMA opcodes: HGMMA bf16/fp16, QGMMA fp8, "
    "IGMMA/IMMA int8, DMMA fp64, UTC*)",
)
@click.option("--compare", nargs=2, default=None, metavar="A B", help="two .ncu-rep files or result directories")
@click.option(
    "--label",
    "labels",
    nargs=2,
    default=None,
    metavar="LA LB",
    help="names of A and B in --compare (default: the result directory or file names)",
)
@click.option("--json", "as_json", is_flag=True, help="print the summary JSON")
def command(
    variant,
    family,
    mnkl,
    set_name,
    clock_control,
    out,
    warmup,
    report,
    filter_,
    flops,
    precision,
    compare,
    labels,
    as_json,
    filter_b,
) -> None:
    """Run or read Nsight Compute: metrics per launch, the bottleneck verdict (GPU fill, the busy SMs'
    limiting unit, latency) with the numbers and thresholds that decided it, advice that fits the
    kernel and GPU, ncu's own rules beside it, and A/B comparison."""
    from rich.console import Console

    from bsprof.reports import ncu_text

    console = Console(stderr=as_json, highlight=False)
    modes = [m for m in (variant, report, compare) if m]
    if len(modes) != 1:
        raise BsprofError("give exactly one of --kernel VARIANT (e.g. optimized), --report FILE.ncu-rep, --compare A B")
    if (
        not variant
        and click.get_current_context().get_parameter_source("set_name") is not click.core.ParameterSource.DEFAULT
    ):
        raise BsprofError(
            "--set picks what a profiling run (--kernel) collects; a report already holds its sections: drop --set"
        )
    if flops is not None and flops <= 0:
        raise BsprofError("--flops must be positive (FLOPs of one launch, e.g. 2*M*N*K)")
    if mnkl:
        from bsprof.kernels.api import parse_mnkl

        parse_mnkl(mnkl)  # the same bounds as every verb's --mnkl, before a report is read or ncu started
    if compare:
        from bsprof.analyzers.ncu.compare import compare as run_compare

        cmp = run_compare(compare[0], compare[1], filter=filter_, flops=flops, labels=labels, filter_b=filter_b)
        if as_json:
            click.echo(artifacts.dumps(_compare_json(cmp)))
        else:
            ncu_text.print_compare(console, cmp)
        return
    if report:
        from bsprof.analyzers.ncu.summary import analyze_report, write_analysis

        if mnkl and not re.fullmatch(r"\d+(,\d+){2,3}", mnkl):
            raise BsprofError(f"--mnkl {mnkl!r}: give M,N,K or M,N,K,L as integers, e.g. 128,4096,7168")
        if out:
            from bsprof.io import check_output_dir

            check_output_dir(out)  # before the analysis: a refused path costs no reading of a large report
        ex, payload = analyze_report(report, filter=filter_, flops=flops, precision=precision, mnkl=mnkl)
        if out:
            payload["output_dir"] = str(write_analysis(ex, payload, out))
    else:
        from bsprof.profile.ncu_runner import profile_bundled

        payload = profile_bundled(
            variant,
            family,
            mnkl,
            set_name,
            clock_control,
            out or "bsprof-results",
            warmup,
            emit=lambda s: console.print(s, highlight=False, markup=False),
        )
    if as_json:
        click.echo(artifacts.dumps(payload))
        return
    for launch in payload["launches"]:
        ncu_text.print_launch(console, launch)
    ncu_text.print_sequences(console, payload)
    if payload.get("output_dir"):
        console.print(f"wrote {payload['output_dir']}", markup=False)


def _compare_json(cmp) -> dict:
    from bsprof.analyzers.ncu.summary import KIND

    rows = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in cmp.table.to_dict("records")
    ]
    return {
        "bsprof": dict(KIND),
        "compare": {
            "title": cmp.title,
            "a": {
                "label": cmp.a_label,
                "report": cmp.a_name,
                "kernel": cmp.a_kernel,
                "verdict": cmp.a_verdict.as_dict(),
            },
            "b": {
                "label": cmp.b_label,
                "report": cmp.b_name,
                "kernel": cmp.b_kernel,
                "verdict": cmp.b_verdict.as_dict(),
            },
            "metrics": rows,
            "notes": cmp.notes,
        },
        "launches": [],
    }
