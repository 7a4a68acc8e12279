"""FP8-blockwise GEMM family for Hopper (sm_90a): D (bf16) = A · Bᵀ, A/B FP8 E4M3 K-major,
float32 block scales in the DeepSeek-V3 layout (A per 1x128, B per 128x128).

Contract: see :mod:`bsprof.kernels.api`. Kernel: :mod:`.kernel`; variants: :mod:`.config`.
"""

from bsprof.kernels.fp8_blockwise.launch import (  # noqa: F401
    ARCH,
    DEFAULT_MNKL,
    Prepared,
    compile_cubin,
    output_tile,
    plan,
    prepare,
)
