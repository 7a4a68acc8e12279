"""Benchmarks of the bundled kernels: correctness against the reference, then timing beside the
peers (cuBLAS, DeepGEMM, NVIDIA's CuTe DSL example), in one process so every kernel is measured
under the same clocks.

A kernel family exposes operands, a launch and a reference (:mod:`bsprof.kernels.api`); how they
are timed is profiling, so it lives here, one module per family.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

MODULES: dict[str, str] = {
    "nvfp4": "bsprof.profile.bench.nvfp4",
    "fp8-blockwise": "bsprof.profile.bench.fp8_blockwise",
}


@dataclass
class BenchRequest:
    family: str
    variant: str
    mnkl: tuple[int, int, int, int]
    warmup: int = 10
    iters: int = 50
    skip_ref_check: bool = False
    seed: int = 0
    # family-specific knobs (mma_tiler, cluster, sf_dtype, sf_vec, c_dtype, ...); None = family default
    config: dict = field(default_factory=dict)
    # fp8-blockwise only: the operands (quant.INPUTS) and NVIDIA's CuTe DSL example as a peer
    inputs: str = "randn"
    cute_example: str | None = None


def run(request: BenchRequest, console) -> dict:
    """Check, time and compare one bundled kernel; the bench artifact as a JSON-able dict."""
    return importlib.import_module(MODULES[request.family]).run(request, console)
