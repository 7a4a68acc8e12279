"""The process ncu runs: warm-ups, then ONE measured launch inside an NVTX range ncu filters on.

    python -m bsprof.profile.launch --family fp8-blockwise --variant optimized --mnkl 4096,4096,4096,1 \
        --warmup 3 --info /tmp/launch.json

(``bsprof ncu`` passes the kernel whole, ``--target '<Target.to_arg()>'``, so the spec it parsed is
not parsed again here.)

The measured launch is wrapped in the push/pop range :data:`NVTX_RANGE`, so ncu (``--nvtx
--nvtx-include bsprof_measured/``) captures it and nothing else: not the warm-ups, not the input
set-up or reference kernels. It is also bracketed by cudaProfilerStart/Stop, for ncu's
``--profile-from-start off`` (the runner's ``capture="profiler-api"``). What was launched (kernel name, FLOPs, problem, device) goes to
``--info`` as JSON for the runner. Errors: ``error: <one line>`` on stderr, exit code 2.

``--torch-scaled-mm`` profiles ``torch._scaled_mm`` (FP8 e4m3, bf16 out, cuBLAS) instead of a bundled
kernel: a reference point, and what the triage-vs-full measurement uses when no bundled kernel runs.
"""

from __future__ import annotations

import argparse
import sys

NVTX_RANGE = "bsprof_measured"


class _TorchScaledMM:
    """cuBLAS FP8 GEMM through torch._scaled_mm (per-tensor scales), the shape of the fixtures."""

    def __init__(self, mnkl):
        import torch

        m, n, k, batches = mnkl
        if batches != 1:
            raise ValueError("--torch-scaled-mm supports L=1 only")
        dev = torch.device("cuda")
        g = torch.Generator(device=dev).manual_seed(0)
        self.a = torch.randn(m, k, device=dev, generator=g).to(torch.float8_e4m3fn)
        self.b = torch.randn(n, k, device=dev, generator=g).to(torch.float8_e4m3fn).t()  # column-major B
        self.sa = torch.ones((), device=dev)
        self.sb = torch.ones((), device=dev)
        self.flops = 2.0 * m * n * k
        self.kernel_name = "torch._scaled_mm (cuBLAS)"

    def launch(self):
        import torch

        torch._scaled_mm(self.a, self.b, scale_a=self.sa, scale_b=self.sb, out_dtype=torch.bfloat16)


def prepare(target, torch_scaled_mm: bool):
    if torch_scaled_mm:
        return _TorchScaledMM(target.mnkl)
    return target.prepare()


def problem_range(prep, mnkl, family: str, torch_scaled_mm: bool) -> str:
    """``bsprof mnkl=MxNxKxL flops=F precision=P [tile=MxN]``: the measured launch's problem, as an NVTX
    range name, so a report read back later (``bsprof ncu --report``) keeps TFLOP/s and % of peak."""
    from bsprof.analyzers.ncu.peaks import FAMILY_PRECISION

    parts = [f"mnkl={'x'.join(str(int(x)) for x in mnkl)}", f"flops={float(getattr(prep, 'flops', 0.0) or 0.0):.6g}"]
    prec = "fp8" if torch_scaled_mm else FAMILY_PRECISION.get(family)
    if prec:
        parts.append(f"precision={prec}")
    cfg = getattr(prep, "config", None) or {}
    if cfg.get("tile_m") and cfg.get("tile_n"):
        parts.append(f"tile={cfg['tile_m']}x{cfg['tile_n']}")
    return "bsprof " + " ".join(parts)


def run(target, warmup: int, torch_scaled_mm: bool = False) -> dict:
    """Warm up, then launch ``target`` (a :class:`bsprof.kernels.api.Target`) once inside the
    measured range; what was launched, as the runner's ``--info`` JSON."""
    import torch

    from bsprof.gpu import device_info

    info = device_info()
    prep = prepare(target, torch_scaled_mm)
    for _ in range(warmup):
        prep.launch()
    torch.cuda.synchronize()
    # both markers: the NVTX range (ncu --nvtx-include) and the profiler API (ncu --profile-from-start off)
    torch.cuda.nvtx.range_push(NVTX_RANGE)
    # the problem travels inside the report (analyzers.ncu.extract.nvtx_problem reads it back)
    torch.cuda.nvtx.range_push(problem_range(prep, target.mnkl, target.family, torch_scaled_mm))
    torch.cuda.profiler.start()
    prep.launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
    return {
        "kernel_name": getattr(prep, "kernel_name", None),
        "flops": float(getattr(prep, "flops", 0.0) or 0.0),
        "family": "torch-scaled-mm" if torch_scaled_mm else target.family,
        "variant": "cublas" if torch_scaled_mm else target.spec,
        "mnkl": list(target.mnkl),
        "warmup": warmup,
        "device": info["name"],
        "capability": list(info["capability"]),
    }


def main(argv: list[str] | None = None) -> int:
    from bsprof.errors import BsprofError

    p = argparse.ArgumentParser(prog="python -m bsprof.profile.launch")
    p.add_argument("--target", default=None, help="the kernel, as Target.to_arg() wrote it (what bsprof ncu passes)")
    p.add_argument("--family", default="fp8-blockwise", help="without --target: the family ...")
    p.add_argument("--variant", default="optimized", help="... the kernel spec ...")
    p.add_argument("--mnkl", default=None, help="... and the problem, parsed here")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--info", default=None, help="write what was launched here (JSON)")
    p.add_argument("--torch-scaled-mm", action="store_true")
    args = p.parse_args(argv)
    try:
        from bsprof.kernels.api import Target, parse_mnkl

        if args.target:
            target = Target.from_arg(args.target)
        elif args.torch_scaled_mm:  # cuBLAS, no bundled kernel: only the problem matters
            target = Target(family=args.family, variant=args.variant, mnkl=parse_mnkl(args.mnkl or "4096,4096,4096"))
        else:
            target = Target.parse(args.family, args.variant, args.mnkl)
        result = run(target, args.warmup, args.torch_scaled_mm)
    except BsprofError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:  # the kernel's own failure: one line for the runner, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: the launcher failed: {type(exc).__name__}: {first}", file=sys.stderr, flush=True)
        return 2
    if args.info:
        from bsprof.artifacts import dumps
        from bsprof.io import write_text_atomic

        write_text_atomic(args.info, dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
