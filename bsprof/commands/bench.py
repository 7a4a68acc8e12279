"""`bsprof bench`: correctness, then timing against the peers, for a bundled kernel."""

from __future__ import annotations

import json

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import VARIANTS
from bsprof.kernels.fp8_blockwise.quant import INPUTS


def _pair(text: str | None, name: str) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise BsprofError(f"--{name} {text!r} must be two integers, e.g. --{name} 256,128") from None
    return a, b


@click.command(name="bench")
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option("--kernel", "variant", default="optimized", show_default=True,
              help=f"{' | '.join(VARIANTS)}; on fp8-blockwise optionally with switches after ':', "
                   "e.g. optimized:epi_split=0,swizzle=8 (docs/kernels-fp8-blockwise.md lists them)")
@click.option("--mnkl", default=None, help="M,N,K[,L]; default: the family's default problem")
@click.option("--mma-tiler", default=None, help="tile M,N (family default if omitted)")
@click.option("--cluster", default=None, help="cluster M,N (family default if omitted)")
@click.option("--sf-dtype", default=None, help="NVFP4 only: Float8E4M3FN or Float8E8M0FNU")
@click.option("--sf-vec", type=int, default=None, help="NVFP4 only: 16 (NVFP4) or 32 (MXFP4)")
@click.option("--c-dtype", default=None, help="output dtype: Float16, BFloat16 or Float32")
@click.option("--warmup", type=int, default=10, show_default=True)
@click.option("--iters", type=int, default=50, show_default=True)
@click.option("--skip-ref-check", is_flag=True, help="skip the correctness check against the reference")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--inputs", type=click.Choice(INPUTS), default="randn", show_default=True,
              help="fp8-blockwise: randn (DeepSeek-quantized Gaussians) or int (integers in [-2, 2] with unit "
                   "scales, the CuTe DSL examples' data: every kernel runs faster on them under a power cap)")
@click.option("--cute-example", default=None, envvar="BSPROF_CUTE_EXAMPLE",
              help="fp8-blockwise: NVIDIA's CuTe DSL Hopper dense_gemm_persistent.py (or a CUTLASS checkout), "
                   "timed as the peer without block scaling [env: BSPROF_CUTE_EXAMPLE]")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.option("-o", "--output", "out", default=None,
              help="also write bench.json into a fresh directory under this one (for `bsprof report`)")
def command(family, variant, mnkl, mma_tiler, cluster, sf_dtype, sf_vec, c_dtype, warmup, iters,
            skip_ref_check, seed, inputs, cute_example, as_json, out) -> None:
    """Check a bundled kernel against its reference, then time it beside cuBLAS (and DeepGEMM on Hopper)."""
    from rich.console import Console

    from bsprof.kernels.api import family_for_capability, family_module, parse_kernel_spec, parse_mnkl, spec_label
    from bsprof.profile.bench import BenchRequest, run
    from bsprof.gpu import device_info

    if warmup < 0 or iters < 1:
        raise BsprofError("--warmup must be >= 0 and --iters >= 1")
    parse_kernel_spec(variant, None if family == "auto" else family)
    if family == "auto":
        family = family_for_capability(device_info()["capability"])
        click.echo(f"family: {family} (picked from the GPU)", err=True)
        parse_kernel_spec(variant, family)
    module = family_module(family)
    config = {k: v for k, v in {
        "mma_tiler": _pair(mma_tiler, "mma-tiler"), "cluster": _pair(cluster, "cluster"),
        "sf_dtype": sf_dtype, "sf_vec": sf_vec, "c_dtype": c_dtype,
    }.items() if v is not None}
    req = BenchRequest(family=family, variant=variant,
                       mnkl=parse_mnkl(mnkl) if mnkl else tuple(module.DEFAULT_MNKL),
                       warmup=warmup, iters=iters, skip_ref_check=skip_ref_check, seed=seed, config=config,
                       inputs=inputs, cute_example=cute_example)
    result = run(req, Console(stderr=as_json))
    text = json.dumps(result, indent=2, default=str)
    if out is not None:
        import time

        from bsprof.io import unique_dir, write_text_atomic

        shape = "x".join(map(str, req.mnkl))
        run_dir = unique_dir(out, f"bench_{family}_{spec_label(variant)}_{shape}_{time.strftime('%Y%m%d-%H%M%S')}")
        write_text_atomic(run_dir / "bench.json", text)
        click.echo(f"wrote {run_dir / 'bench.json'}", err=True)
    if as_json:
        click.echo(text)
