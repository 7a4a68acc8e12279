"""NVIDIA's CuTe DSL Hopper persistent dense GEMM example as a benchmark peer.

It is FP8 without block scaling: the ceiling the block-scaled kernels are measured against. It is not a package, so it is not shipped or installed: the benchmark loads it from a
CUTLASS checkout the user points at (``--cute-example``), as it imports DeepGEMM only where present.
It runs on our operands' FP8 values and ignores their scales, so its output matches ours only on
unit-scale inputs (``inputs="int"``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bsprof.errors import BsprofError, one_line

EXAMPLE_IN_CHECKOUT = "examples/python/CuTeDSL/cute/hopper/kernel/dense_gemm/dense_gemm_persistent.py"
KERNEL_CLASS = "HopperWgmmaGemmPersistentKernel"
# its fastest configuration on the H100 at the three target shapes (1,226 TFLOP/s at 4096^3
# against 1,175 for its default 128x128 tile without a cluster; docs/perf.md)
TILE_MN = (128, 256)
CLUSTER_MN = (1, 2)


def example_file(path: str | Path) -> Path:
    """The example's source: ``path`` itself, or the example inside a CUTLASS checkout at ``path``."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / EXAMPLE_IN_CHECKOUT
    if not p.is_file():
        raise BsprofError(
            f"--cute-example {path}: no such file; pass dense_gemm_persistent.py or a CUTLASS "
            f"checkout (v4.5 or later) that has {EXAMPLE_IN_CHECKOUT}"
        )
    return p


def load_kernel_class(path: str | Path):
    """The example's kernel class, imported from its source file."""
    src = example_file(path)
    spec = importlib.util.spec_from_file_location("bsprof_cute_dense_gemm_example", src)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the example's, reported in one line
        raise BsprofError(
            f"--cute-example {src}: importing it failed ({one_line(exc)}); it needs nvidia-cutlass-dsl"
        ) from None
    cls = getattr(module, KERNEL_CLASS, None)
    if cls is None:
        raise BsprofError(
            f"--cute-example {src} defines no {KERNEL_CLASS}; pass CUTLASS's Hopper dense_gemm_persistent.py"
        )
    return cls


def dense_fp8_launcher(path: str | Path, a, b, out):
    """A callable launching the example once on ``a`` (L, M, K) and ``b`` (L, N, K) FP8, K-major,
    into ``out`` (L, M, N) bf16, on torch's current stream (so a CUDA-graph capture takes it, as
    it takes the other peers)."""
    import cuda.bindings.driver as drv
    import cutlass
    import cutlass.cute as cute
    import cutlass.utils
    import torch

    from bsprof.kernels.fp8_blockwise.launch import cute_tensor

    cls = load_kernel_class(path)
    views = tuple(cute_tensor(t.permute(1, 2, 0), 1, 16) for t in (a, b, out))
    max_active = cutlass.utils.HardwareInfo().get_max_active_clusters(CLUSTER_MN[0] * CLUSTER_MN[1])
    gemm = cls(cutlass.Float32, TILE_MN, CLUSTER_MN, 1, True)
    compiled = cute.compile(gemm, *views, max_active, drv.CUstream(torch.cuda.current_stream().cuda_stream))

    def launch():
        compiled(*views, drv.CUstream(torch.cuda.current_stream().cuda_stream))

    return launch
