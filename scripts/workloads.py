"""Workloads that scripts/price_pairs.py and scripts/corpus_launches.py both launch: each builder takes
the sizes and returns ``setup()``, which allocates the operands on the GPU and returns the launch
callable (no argument, one call = the measured launches). torch and Triton are imported when a setup
runs, so the tables naming the workloads load on a machine without either (scripts/price_score.py)."""

from __future__ import annotations

from collections.abc import Callable

Setup = Callable[[], Callable[[], object]]


def tensor(*shape: int, dtype=None, scale: float = 1.0):
    """Gaussian values on the GPU (fp32 unless ``dtype``), times ``scale``."""
    import torch

    x = torch.randn(*shape, device="cuda", dtype=dtype or torch.float32)
    return x * scale if scale != 1.0 else x


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _kernels():
    # imported at the first launch: Triton exists only on the GPU host
    if __package__:
        from . import triton_kernels
    else:
        import triton_kernels
    return triton_kernels


def in_ranges(fn: Callable[[], object], outer: str, inner: str) -> None:
    """One call of ``fn`` inside NVTX range ``inner`` nested in ``outer``, synchronized before the ranges
    close: ``ncu --nvtx --nvtx-include outer/`` captures exactly its launches, and each launch's NVTX
    state in the report names the op."""
    import torch

    torch.cuda.nvtx.range_push(outer)
    torch.cuda.nvtx.range_push(inner)
    try:
        fn()
        torch.cuda.synchronize()
    finally:
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()


def error_line(exc: BaseException) -> str:
    """Why an op could not run, in one line for the meta file."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def transpose(n: int, dtype=None, tiled: bool = False) -> Setup:
    """An n x n transpose: torch's ``x.t().contiguous()``, or the 64 x 64 tiled Triton kernel."""

    def setup():
        import torch

        x = tensor(n, n, dtype=dtype)
        if not tiled:
            return lambda: x.t().contiguous()
        y = torch.empty(n, n, device="cuda", dtype=dtype or torch.float32)
        kernel = _kernels().transpose_tiled
        return lambda: kernel[(n // 64, n // 64)](x, y, n, n, BM=64, BN=64, num_warps=4)

    return setup


def gather(n: int, sorted_idx: bool, how: str = "index", dtype=None, width: int = 0) -> Setup:
    """n values (fp32 unless ``dtype``) read through n random int64 indices (sorted: the same reads in
    order), by ``how``: ``x[idx]`` ("index"), ``x.index_select(0, idx)`` ("index_select") or
    ``torch.take(x, idx)`` ("take"); ``width``: an n x width matrix whose rows the indices pick (an
    embedding lookup)."""

    def setup():
        import torch

        x = tensor(n, width, dtype=dtype) if width else tensor(n, dtype=dtype)
        idx = torch.randint(0, n, (n,), device="cuda")
        if sorted_idx:
            idx = torch.sort(idx).values
        if how == "index_select":
            return lambda: x.index_select(0, idx)
        if how == "take":
            return lambda: torch.take(x, idx)
        return lambda: x[idx]

    return setup


def column_gather(n: int, sorted_idx: bool) -> Setup:
    """``x[:, idx]`` of an n x n fp32 matrix: n random columns (sorted: the same columns in order)."""

    def setup():
        import torch

        x = tensor(n, n)
        idx = torch.randint(0, n, (n,), device="cuda")
        if sorted_idx:
            idx = torch.sort(idx).values
        return lambda: x[:, idx]

    return setup


def accumulate(n: int, bins: int, how: str, block: int = 0, chunks: int = 0) -> Setup:
    """n fp32 values added into ``bins`` destinations by random index: torch's ``index_add_`` or
    ``scatter_add_`` (an atomic per value), ``privatized`` (Triton: each CTA of ``block`` x ``chunks``
    values sums per destination in registers, then one atomic per destination), ``bincount`` (torch's
    weighted histogram, which sums per CTA in shared memory where the destinations fit) or ``index_put``
    (``index_put_(accumulate=True)``: the indices sorted, then a reduction per destination's segment)."""

    def setup():
        import torch

        src = tensor(n)
        idx = torch.randint(0, bins, (n,), device="cuda")
        out = torch.zeros(bins, device="cuda")
        if how == "index_add":
            return lambda: out.index_add_(0, idx, src)
        if how == "scatter_add":
            return lambda: out.scatter_add_(0, idx, src)
        if how == "bincount":
            return lambda: torch.bincount(idx, weights=src, minlength=bins)
        if how == "index_put":
            # accumulate=True on CUDA sorts the indices, then reduces each destination's segment
            return lambda: out.index_put_((idx,), src, accumulate=True)
        kernel, grid = _kernels().privatized_index_add, (cdiv(n, block * chunks),)
        return lambda: kernel[grid](src, idx, out, n, NB=bins, BLOCK=block, CHUNKS=chunks, num_warps=4)

    return setup


def vector_sum(n: int, one_cta: bool, block: int = 1024, warps: int = 4) -> Setup:
    """The sum of n fp32 values: ``torch.sum`` (many CTAs) or a Triton loop in one CTA."""

    def setup():
        import torch

        x = tensor(n)
        if not one_cta:
            return lambda: x.sum()
        out = torch.empty(1, device="cuda")
        kernel = _kernels().serial_sum
        return lambda: kernel[(1,)](x, out, n, BLOCK=block, num_warps=warps)

    return setup


def row_sum(rows: int, cols: int, block: int, warps: int, kernel_name: str = "row_sum") -> Setup:
    """Triton row sums of an fp32 rows x cols matrix, one program per row, ``block`` columns a step."""

    def setup():
        import torch

        x = tensor(rows, cols)
        out = torch.empty(rows, device="cuda")
        kernel = getattr(_kernels(), kernel_name)
        return lambda: kernel[(rows,)](x, out, cols, BLOCK=block, num_warps=warps, num_stages=1)

    return setup


def col_sum(rows: int, cols: int, tiled: bool, rows_per_step: int = 256) -> Setup:
    """Triton column sums of an fp32 rows x cols matrix: one column per program (strided loads), or
    8 adjacent columns per program (each row segment one 32-byte sector)."""

    def setup():
        import torch

        x = tensor(rows, cols)
        out = torch.empty(cols, device="cuda")
        k = _kernels()
        if tiled:
            return lambda: k.col_sum_tiled[(cols // 8,)](x, out, rows, cols, BR=rows_per_step, BC=8, num_warps=4)
        return lambda: k.col_sum_strided[(cols,)](x, out, rows, cols, BR=rows_per_step, num_warps=4)

    return setup


def softmax_logsoftmax(rows: int, cols: int, warps: int) -> Setup:
    """Triton softmax and log-softmax of each fp32 row, the whole row in one block: with few warps the
    row's values and their exponentials outgrow the registers and spill."""

    def setup():
        import torch

        x = tensor(rows, cols)
        p, lp = torch.empty_like(x), torch.empty_like(x)
        kernel = _kernels().softmax_logsoftmax
        return lambda: kernel[(rows,)](x, p, lp, cols, BLOCK=cols, num_warps=warps)

    return setup


def compiled(fn: Callable, shape: tuple[int, ...], dtype=None) -> Setup:
    """``torch.compile(fn)`` (static shapes) called on one Gaussian tensor of ``shape``."""

    def setup():
        import torch

        x = tensor(*shape, dtype=dtype)
        c = torch.compile(fn, dynamic=False)
        return lambda: c(x)

    return setup


def exp_sum(terms: int, c: float) -> Callable:
    """x -> the sum of exp(x c (i+1)) for i < ``terms``: one MUFU exponential per term and element once
    torch.compile fuses it (``terms`` and ``c`` reach the graph as constants)."""

    def exp_sum(x):
        import torch

        acc = torch.exp(x * c)
        for i in range(1, terms):
            acc = acc + torch.exp(x * (c * (i + 1)))
        return acc

    return exp_sum
