"""`bsprof bench`: correctness, then timing against the peers, for a bundled kernel."""

from __future__ import annotations

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import KERNEL_HELP
from bsprof.kernels.fp8_blockwise.quant import INPUTS
from bsprof.options import IntTuple, count


@click.command(name="bench")
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option("--kernel", "spec", default="optimized", show_default=True, help=KERNEL_HELP)
@click.option(
    "--mnkl",
    default=None,
    help="M,N,K[,L]; default: the family's default problem (with --plan, several: 'M,N,K;M,N,K;...')",
)
@click.option(
    "--mma-tiler", type=IntTuple(2, 1, 1024, "256,128"), default=None, help="tile M,N (family default if omitted)"
)
@click.option("--cluster", type=IntTuple(2, 1, 16, "2,1"), default=None, help="cluster M,N (family default if omitted)")
@click.option("--sf-dtype", default=None, help="NVFP4 only: Float8E4M3FN or Float8E8M0FNU")
@click.option("--sf-vec", type=count(1, 1024), default=None, help="NVFP4 only: 16 (NVFP4) or 32 (MXFP4)")
@click.option("--c-dtype", default=None, help="output dtype: Float16, BFloat16 or Float32")
@click.option("--warmup", type=count(0, 1_000_000), default=10, show_default=True)
@click.option("--iters", type=count(1, 1_000_000), default=50, show_default=True)
@click.option(
    "--rounds",
    type=count(1, 1000),
    default=None,
    help="fp8-blockwise: time every kernel this many times, interleaved, and keep each one's median "
    "round; 2 or more also print each kernel's spread and the specs paired round by round "
    "(default: 3)",
)
@click.option(
    "--placements",
    type=count(1, 64),
    default=None,
    help="fp8-blockwise: copies of the operands (the same values, each its own allocation) the rounds "
    "take in turn: where they sit in memory can decide a DRAM-bound problem (default: 3 with 3 "
    "or more rounds, else 1)",
)
@click.option(
    "--close-calls",
    is_flag=True,
    help="fp8-blockwise: also time the configurations the tile choice could not rank against its pick "
    "(modelled within 3%: the 'close call' of its reason), each paired round by round with it",
)
@click.option("--skip-ref-check", is_flag=True, help="skip the correctness check against the reference")
@click.option("--seed", type=count(0), default=0, show_default=True)
@click.option(
    "--inputs",
    type=click.Choice(INPUTS),
    default="randn",
    show_default=True,
    help="fp8-blockwise: randn (DeepSeek-quantized Gaussians) or int (integers in [-2, 2] with unit "
    "scales, the CuTe DSL examples' data: every kernel runs faster on them under a power cap)",
)
@click.option(
    "--cute-example",
    default=None,
    envvar="BSPROF_CUTE_EXAMPLE",
    help="fp8-blockwise: NVIDIA's CuTe DSL Hopper dense_gemm_persistent.py (or a CUTLASS checkout), "
    "timed as the peer without block scaling [env: BSPROF_CUTE_EXAMPLE]",
)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option(
    "-o",
    "--output",
    "out",
    default=None,
    help="also write bench.json into a fresh directory under this one (for `bsprof report`)",
)
@click.option(
    "--plan",
    is_flag=True,
    help="print the tile, cluster and switches this problem would run with, and why, then stop (no GPU: name --family)",
)
@click.option(
    "--sms",
    type=count(1, 4096),
    default=None,
    help="with --plan: the GPU's SM count (default: H100's 132 for fp8-blockwise, B200's 148 for nvfp4)",
)
def command(
    family,
    spec,
    mnkl,
    mma_tiler,
    cluster,
    sf_dtype,
    sf_vec,
    c_dtype,
    warmup,
    iters,
    rounds,
    placements,
    close_calls,
    skip_ref_check,
    seed,
    inputs,
    cute_example,
    as_json,
    out,
    plan,
    sms,
) -> None:
    """Check a bundled kernel against its reference, then time it beside cuBLAS (and DeepGEMM on Hopper)."""
    from rich.console import Console

    from bsprof import artifacts
    from bsprof.kernels.api import Target

    if sms is not None and not plan:
        raise BsprofError("--sms goes with --plan (a run reads the SM count from its GPU)")
    if plan and (rounds is not None or placements is not None or close_calls):
        raise BsprofError(
            "--rounds, --placements and --close-calls time kernels; --plan only prints the choice "
            "(and names its close calls): drop one"
        )
    if plan and family == "auto":
        raise BsprofError(
            "--plan runs without a GPU to pick the family from: add --family fp8-blockwise or --family nvfp4"
        )
    config = {
        k: v
        for k, v in {
            "mma_tiler": mma_tiler,
            "cluster": cluster,
            "sf_dtype": sf_dtype,
            "sf_vec": sf_vec,
            "c_dtype": c_dtype,
        }.items()
        if v is not None
    }
    if plan:
        from bsprof.kernels.api import family_module
        from bsprof.reports.bench_text import render_plan

        # one plan per problem: a model's layers, the cases of a config map, side by side
        shapes = [s for s in (mnkl or "").split(";") if s.strip()] or [mnkl]
        extra = {} if sms is None else {"num_sms": sms}
        docs = []
        for shape in shapes:
            target = Target.parse(family, spec, shape, config)
            doc = family_module(target.family).plan(target.variant, target.mnkl, **extra, **target.knobs)
            doc["kernel"] = target.spec
            docs.append(doc)
        if as_json:
            click.echo(artifacts.dumps(docs[0] if len(docs) == 1 else docs))
        else:
            for doc in docs:
                render_plan(Console(highlight=False), doc)
        return
    if out is not None:
        from bsprof.io import check_output_dir

        check_output_dir(out)  # before the GPU run: a refused path costs no minutes of timing
    if mnkl and ";" in mnkl:
        raise BsprofError(
            "--mnkl takes one problem to time; several ('M,N,K;M,N,K') go with --plan, or time them "
            "with benchmarks/fp8_blockwise.py --shapes"
        )
    target = Target.parse(family, spec, mnkl, config)

    from bsprof.profile.bench import BenchRequest, run
    from bsprof.reports.bench_text import render

    if target.picked_from_gpu:
        click.echo(f"family: {target.family} (picked from the GPU)", err=True)
    doc, failed = run(
        BenchRequest(
            target=target,
            warmup=warmup,
            iters=iters,
            skip_ref_check=skip_ref_check,
            seed=seed,
            inputs=inputs,
            cute_example=cute_example,
            rounds=rounds,
            placements=placements,
            close_calls=close_calls,
        )
    )
    render(Console(stderr=as_json, highlight=False), doc)
    if failed:
        raise BsprofError(failed[0])
    if out is not None:
        import time

        from bsprof.io import results_dir
        from bsprof.kernels.api import spec_label

        with results_dir(
            out, f"bench_{target.family}_{spec_label(target.spec)}_{target.shape}_{time.strftime('%Y%m%d-%H%M%S')}"
        ) as staged:
            artifacts.save(staged.path / "bench.json", doc)
        run_dir = staged.path
        click.echo(f"wrote {run_dir / 'bench.json'}", err=True)
    if as_json:
        click.echo(artifacts.dumps(doc))
