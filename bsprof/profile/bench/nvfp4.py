"""`bsprof bench --family nvfp4`: correctness against the float32 reference, then timing beside
cuBLAS (``torch._scaled_mm`` with FP4 operands and block scales, where this torch supports it).

Runs only on an sm_100 GPU; anywhere else it raises BsprofError (the CLI prints it and exits 2).
"""

from __future__ import annotations

import statistics

from bsprof.artifacts import document
from bsprof.errors import BsprofError, one_line
from bsprof.profile.timer import launch_times_ms

# fall-back estimate: dense FP4 FLOP per SM per clock on sm_100 (2x FP8) at a 1.965 GHz boost clock
FP4_FLOP_PER_SM_CLK = 32768
BOOST_HZ = 1.965e9


def peak_tflops(info: dict) -> tuple[float, str]:
    """Dense FP4 peak of this device: the data sheet's (analyzers.ncu.peaks, the one table), else
    an estimate from its SM count."""
    from bsprof.analyzers.ncu.peaks import peak_tflops as sheet_peak

    sheet = sheet_peak(info.get("name"), "fp4")
    if sheet:
        return sheet, "data sheet"
    return info["sm_count"] * FP4_FLOP_PER_SM_CLK * BOOST_HZ / 1e12, "estimated from SM count"


def _cublas(ops: dict, kw: dict, mnkl):
    """cuBLAS block-scaled FP4 through torch._scaled_mm; (fn, out) or a reason it cannot run."""
    import torch

    m, n, k, batches = mnkl
    if batches != 1:
        return None, "batched (L > 1) problems have no cuBLAS peer here"
    if not hasattr(torch, "float4_e2m1fn_x2"):
        return None, f"torch {torch.__version__} has no float4_e2m1fn_x2 dtype"
    sf_t = torch.float8_e4m3fn if kw["sf_dtype"] == "Float8E4M3FN" else torch.float8_e8m0fnu
    a = ops["a"][0].view(torch.float4_e2m1fn_x2)
    b = ops["b"][0].view(torch.float4_e2m1fn_x2)
    # our scale layout is the 128x4-atom layout cuBLAS also reads ("blocked")
    sfa = ops["sfa"].view(sf_t)
    sfb = ops["sfb"].view(sf_t)
    out_dtype = ops["d"].dtype
    out = torch.empty(m, n, dtype=out_dtype, device="cuda")

    def fn():
        return torch._scaled_mm(a, b.t(), scale_a=sfa, scale_b=sfb, out_dtype=out_dtype, out=out)

    try:
        fn()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - a peer we cannot run is reported, not fatal
        return None, one_line(exc)
    return (fn, out), None


def run(request) -> tuple[dict, list[str]]:
    """`bsprof bench --family nvfp4`: the bench artifact (a wrong product is refused before timing)."""
    from bsprof.gpu import require_capability
    from bsprof.kernels.nvfp4.launch import kernel_kwargs, prepare

    if request.inputs != "randn" or request.cute_example:
        raise BsprofError("--inputs and --cute-example are fp8-blockwise options (Hopper); drop them for nvfp4")
    if request.rounds not in (None, 1) or request.placements not in (None, 1):
        raise BsprofError(
            "--rounds and --placements are fp8-blockwise options (the nvfp4 bench times one pass "
            "on one allocation); drop them for nvfp4"
        )
    if request.close_calls:
        raise BsprofError(
            "--close-calls names the fp8-blockwise tile choice's near ties; the nvfp4 optimized "
            "variant picks from a table (bench --plan shows it): drop --close-calls"
        )
    kernel_kwargs(request.variant, request.config, request.mnkl)  # shape/option errors first, on any machine
    info = require_capability(10, "bsprof bench --family nvfp4 (tcgen05 block-scaled MMA)")
    p = prepare(request.variant, request.mnkl, seed=request.seed, **request.config)
    m, n, k, batches = request.mnkl
    err = None
    if not request.skip_ref_check:
        err = p.check()
        if err > 2e-2:
            raise BsprofError(f"nvfp4 {request.variant} relative error {err:.3e} > 2e-2 on {request.mnkl}: kernel bug")
    times = launch_times_ms(p.launch, request.warmup, request.iters)
    med, best = statistics.median(times), min(times)
    peak, peak_src = peak_tflops(info)
    # ``ms`` and ``ours`` are every bench row's fields (the report reads them); ``ms_median`` stays for
    # readers of the older NVFP4 rows
    row = dict(
        name=request.variant,
        ours=True,
        ms=med,
        ms_median=med,
        ms_min=best,
        tflops=p.flops / med / 1e9,
        pct_peak=100.0 * p.flops / med / 1e9 / peak,
        rel_err=err,
        config=p.kw,
    )
    peer, why = _cublas(p.operands, p.kw, request.mnkl)
    cub = None
    if peer is not None:
        fn, out = peer
        ct = launch_times_ms(fn, request.warmup, request.iters)
        cub = dict(
            name="cublas",
            ours=False,
            ms=statistics.median(ct),
            ms_median=statistics.median(ct),
            ms_min=min(ct),
            tflops=p.flops / statistics.median(ct) / 1e9,
        )
        if not request.skip_ref_check:
            ref = p.operands["d"][0].float()
            cub["rel_err_vs_ours"] = float((out.float() - ref).norm() / ref.norm().clamp(min=1e-30))
        row["vs_cublas"] = cub["ms_median"] / med
    return document(
        "bench",
        {
            "family": "nvfp4",
            "variant": request.variant,
            "device": info,
            "mnkl": list(request.mnkl),
            "warmup": request.warmup,
            "iters": request.iters,
            "rows": [row] + ([cub] if cub else []),
            "skipped": {} if cub else {"cublas": why},
            "peak_tflops": peak,
            "peak_source": peak_src,
        },
    ), []
