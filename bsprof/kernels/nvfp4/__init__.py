"""NVFP4 / MXFP4 block-scaled GEMM family for Blackwell (sm_100a): D = dequant(A, SFA) . dequant(B, SFB)^T,
A/B FP4 E2M1 K-major, E4M3 scales per 16 (NVFP4) or E8M0 per 32 (MXFP4), D Float16/BFloat16/Float32.

Contract: see :mod:`bsprof.kernels.api`. Kernel: :mod:`.kernel`; variants and switches: :mod:`.config`;
host-side quantization and scale layout: :mod:`.quant`.
"""

from bsprof.kernels.nvfp4.launch import (  # noqa: F401
    ARCH,
    DEFAULT_MNKL,
    Prepared,
    compile_cubin,
    output_tile,
    plan,
    prepare,
)
