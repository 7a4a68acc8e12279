"""bsprof: profiling and bottleneck analysis for block-scaled GEMM kernels."""

__version__ = "0.1.0"
