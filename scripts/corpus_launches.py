"""Launch the verdict corpus: kernels from code outside bsprof (cuBLAS, DeepGEMM, torch ops, SDPA,
torch.compile'd Triton) plus two of our bundled kernels, each in its own NVTX range ``corpus_<name>``
inside an outer range ``corpus``, so one Nsight Compute run captures exactly the measured launches
and each launch's NVTX state in the report names its op:

    ncu --nvtx --nvtx-include corpus/ --set full --clock-control none -o corpus \
        python3 scripts/corpus_launches.py --meta corpus_meta.json

``--only l2``: the L2-resident twin of an op (profile that process with ``--cache-control none``,
or ncu flushes L2 before every replay pass and the op streams from DRAM like its big sibling).
Each op gets two warm-ups outside its range (JIT compiles, cuBLAS heuristics, autotuning). An op
that cannot run on this host is skipped with its reason in the meta file; the rest still run.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

if __package__:  # imported as scripts.corpus_launches
    from . import workloads as w
else:  # run as `python3 scripts/corpus_launches.py`: scripts/ is first on sys.path
    import workloads as w

_t = w.tensor


def ew_add(numel: int):
    """torch.add of two fp32 vectors of ``numel`` elements into a third."""

    def setup():
        import torch

        x, y = _t(numel), _t(numel)
        out = torch.empty_like(x)
        return lambda: torch.add(x, y, out=out)

    return setup


def _wide_output_gemm(k: int, source: str):
    """cuBLAS bf16 (16,384 x k) @ (k x 16,384) into a preallocated bf16 output: at small K its bytes are
    mostly the 537 MB output."""

    def setup():
        import torch

        a, b = _t(16384, k, dtype=torch.bfloat16), _t(16384, k, dtype=torch.bfloat16)
        out = torch.empty(16384, 16384, device="cuda", dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b.t(), out=out)

    return setup, {
        "source": source,
        "mnk": [16384, 16384, k],
        "flops": 2.0 * 16384 * 16384 * k,
        "precision": "bf16",
        "bytes": 2 * 16384 * 16384 + 2 * 2 * 16384 * k,
    }


def _triton_mm(dtype, bm: int, bn: int, bk: int, warps: int, stages: int, *, b_k_major: bool = False, out_dtype=None):
    """A plain Triton ``tl.dot`` GEMM at 4096^3, one BM x BN tile per program (the blind sets'
    Triton GEMMs: Triton picks wgmma or mma.sync and cp.async from the tile and warps). ``b_k_major``:
    B stored (N, K), the layout FP8 wgmma reads; ``out_dtype``: C's dtype (default: the inputs')."""

    def setup():
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def tile_mm(
            a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, B_K_MAJOR: tl.constexpr
        ):
            pm, pn = tl.program_id(0), tl.program_id(1)
            rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
            acc = tl.zeros((BM, BN), tl.float32)
            for k0 in range(0, K, BK):
                a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
                if B_K_MAJOR:
                    b = tl.trans(tl.load(b_ptr + rn[:, None] * K + (k0 + rk)[None, :]))
                else:
                    b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
                acc = tl.dot(a, b, acc)
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))

        n = 4096
        # torch draws no fp8 directly: Gaussians rounded to the format
        a, b = (_t(n, n).to(dtype) if dtype.itemsize == 1 else _t(n, n, dtype=dtype) for _ in range(2))
        c = torch.empty(n, n, device="cuda", dtype=out_dtype or dtype)
        return lambda: tile_mm[(n // bm, n // bn)](
            a, b, c, n, n, n, BM=bm, BN=bn, BK=bk, B_K_MAJOR=b_k_major, num_warps=warps, num_stages=stages
        )

    return setup


def ops_main():
    """name -> (setup() -> launch callable, meta). Sizes chosen to land in distinct classes."""
    import torch
    import torch.nn.functional as F

    ops = {}

    def gemm_bf16(m, n, k):
        def setup():
            a, b = _t(m, k, dtype=torch.bfloat16), _t(n, k, dtype=torch.bfloat16)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            return lambda: torch.matmul(a, b.t(), out=out)

        return setup, {
            "source": "cuBLAS (torch.matmul bf16)",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "bf16",
        }

    for m, n, k in ((8192, 8192, 8192), (4096, 4096, 4096), (64, 7168, 7168), (1, 8192, 8192)):
        ops[f"cublas_bf16_{m}x{n}x{k}"] = gemm_bf16(m, n, k)

    def gemm_fp32(m, n, k):
        def setup():
            torch.backends.cuda.matmul.allow_tf32 = False
            a, b = _t(m, k), _t(n, k)
            out = torch.empty(m, n, device="cuda")
            return lambda: torch.matmul(a, b.t(), out=out)

        return setup, {
            "source": "cuBLAS SGEMM (torch.matmul fp32, TF32 off)",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "fp32",
        }

    ops["cublas_fp32_4096x4096x4096"] = gemm_fp32(4096, 4096, 4096)

    def gemm_fp8(m, n, k, blockwise=False):
        def setup():
            from bsprof.kernels.fp8_blockwise.quant import make_operands

            o = make_operands((m, n, k, 1))
            a, b = o.a[0], o.b[0]
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            if blockwise:
                sfa, sfb = o.sfa[0].t(), o.sfb[0]
                return lambda: torch._scaled_mm(
                    a, b.t(), scale_a=sfa, scale_b=sfb.t(), out_dtype=torch.bfloat16, out=out
                )
            one = torch.ones((), device="cuda")
            return lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=out)

        kind = "blockwise" if blockwise else "tensorwise"
        return setup, {
            "source": f"cuBLAS FP8 {kind} (torch._scaled_mm)",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "fp8",
        }

    for m, n, k in ((8192, 8192, 8192), (64, 7168, 7168), (16, 8192, 8192)):
        ops[f"cublas_fp8_{m}x{n}x{k}"] = gemm_fp8(m, n, k)
    ops["cublas_fp8_blockwise_4096x2112x7168"] = gemm_fp8(4096, 2112, 7168, blockwise=True)

    def deepgemm(m, n, k):
        def setup():
            import deep_gemm

            from bsprof.kernels.fp8_blockwise.quant import make_operands

            o = make_operands((m, n, k, 1))
            a, b, sfa, sfb = o.a[0], o.b[0], o.sfa[0].t(), o.sfb[0]
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            return lambda: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), out)

        return setup, {
            "source": "DeepGEMM fp8_gemm_nt (1x128 / 128x128 scales)",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "fp8",
        }

    # the first four are in the verdict corpus; the M = 128 pair is where our 64-row tiles trail
    # DeepGEMM's (docs/perf.md), profiled beside `bsprof ncu --kernel` at the same shapes
    for m, n, k in (
        (8192, 8192, 1024),
        (4096, 7168, 2048),
        (128, 2112, 7168),
        (64, 7168, 16384),
        (128, 4096, 7168),
        (128, 576, 7168),
    ):
        ops[f"deepgemm_{m}x{n}x{k}"] = deepgemm(m, n, k)

    def bundled(m, n, k):
        def setup():
            from bsprof.kernels.api import Target

            return Target.parse("fp8-blockwise", "optimized", (m, n, k, 1)).prepare().launch

        return setup, {
            "source": "bsprof bundled fp8-blockwise optimized",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "fp8",
        }

    ops["bsprof_optimized_4096x2112x7168"] = bundled(4096, 2112, 7168)
    ops["bsprof_optimized_4096x4096x4096"] = bundled(4096, 4096, 4096)

    def simple(fn_maker, source, nbytes=None):
        return fn_maker, {"source": source, "bytes": nbytes}

    ops["add_fp32_256M"] = simple(ew_add(1 << 28), "torch.add fp32, 3 GiB moved (streams from DRAM)", 12 * (1 << 28))
    ops["add_fp32_1M"] = simple(ew_add(1 << 20), "torch.add fp32, 12 MiB moved, L2 flushed by ncu", 12 * (1 << 20))
    ops["add_fp32_256"] = simple(ew_add(256), "torch.add fp32 on 256 elements: a tiny launch", 12 * 256)

    def rowsum():
        x = _t(8192, 8192)
        return lambda: x.sum(dim=-1)

    ops["sum_rows_fp32_8192x8192"] = simple(rowsum, "torch.sum(dim=-1) fp32 8192x8192", 4 * 8192 * 8192)

    def small_sum():
        x = _t(2048)
        return lambda: x.sum()

    ops["sum_fp32_2048"] = simple(small_sum, "torch.sum of 2048 floats: one CTA", 4 * 2048)

    def layernorm():
        x = _t(16384, 4096, dtype=torch.bfloat16)
        w, b = _t(4096, dtype=torch.bfloat16), _t(4096, dtype=torch.bfloat16)
        return lambda: F.layer_norm(x, (4096,), w, b)

    ops["layernorm_bf16_16384x4096"] = simple(layernorm, "F.layer_norm bf16", 2 * 2 * 16384 * 4096)

    def softmax():
        x = _t(16384, 4096, dtype=torch.bfloat16)
        return lambda: torch.softmax(x, dim=-1)

    ops["softmax_bf16_16384x4096"] = simple(softmax, "torch.softmax bf16", 2 * 2 * 16384 * 4096)

    def softmax32():
        x = _t(4096, 1024)
        return lambda: torch.softmax(x, dim=-1)

    ops["softmax_fp32_4096x1024"] = simple(
        softmax32, "torch.softmax fp32, 16 MiB in (fits L2 between passes? no: flushed)", 8 * 4096 * 1024
    )

    def embedding():
        w = _t(128256, 4096, dtype=torch.bfloat16)
        idx = torch.randint(0, 128256, (16384,), device="cuda")
        return lambda: F.embedding(idx, w)

    ops["embedding_bf16_16384x4096"] = simple(
        embedding, "F.embedding bf16 (vocab 128256, dim 4096)", 2 * 2 * 16384 * 4096
    )

    ops["index_random_fp32_16M"] = simple(w.gather(1 << 24, False), "x[idx] random 16M gather", 16 * (1 << 24))

    ops["index_add_fp32_16M_into_1024"] = simple(
        w.accumulate(1 << 24, 1024, "index_add"), "index_add_ 16M values into 1024 bins (atomics)", 12 * (1 << 24)
    )

    ops["transpose_fp32_8192"] = simple(w.transpose(8192), "x.t().contiguous() fp32 8192x8192", 8 * 8192 * 8192)

    def sdpa(backend_name, causal=False):
        def setup():
            from torch.nn.attention import SDPBackend, sdpa_kernel

            q, k, v = (_t(4, 32, 4096, 128, dtype=torch.bfloat16) for _ in range(3))
            be = getattr(SDPBackend, backend_name)

            def go():
                with sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            return go

        return setup, {
            "source": f"SDPA {backend_name} bf16 B4 H32 S4096 D128" + (" causal" if causal else ""),
            "flops": 4.0 * 4 * 32 * 4096 * 4096 * 128 / (2 if causal else 1),
            "precision": "bf16",
        }

    ops["sdpa_flash_b4h32s4096d128"] = sdpa("FLASH_ATTENTION")
    ops["sdpa_cudnn_b4h32s4096d128"] = sdpa("CUDNN_ATTENTION")
    ops["sdpa_efficient_b4h32s4096d128_causal"] = sdpa("EFFICIENT_ATTENTION", causal=True)

    compiled = w.compiled

    def transcendental(x):
        for _ in range(8):
            x = torch.sin(torch.exp(x * 0.01))
        return x

    def horner(x):
        acc = x * 0.5
        for i in range(64):
            acc = acc * x + (0.001 * i)
        return acc

    def rmsnorm(x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)

    ops["triton_transcendental_16M"] = simple(
        compiled(transcendental, (1 << 24,)), "torch.compile: 8x sin(exp(x)) fused (Triton)", 8 * (1 << 24)
    )
    ops["triton_horner64_16M"] = simple(
        compiled(horner, (1 << 24,)), "torch.compile: degree-64 Horner polynomial fused (Triton)", 8 * (1 << 24)
    )
    ops["triton_rmsnorm_bf16_16384x4096"] = simple(
        compiled(rmsnorm, (16384, 4096), torch.bfloat16), "torch.compile: RMSNorm (Triton reduction)", 4 * 16384 * 4096
    )

    ops["triton_one_cta_sum_4M"] = simple(
        w.vector_sum(1 << 22, True), "Triton kernel, grid (1,): one CTA sums 4M floats", 4 * (1 << 22)
    )
    return ops


def ops_l2():
    return {
        "add_fp32_1M_l2resident": (
            ew_add(1 << 20),
            {"source": "torch.add fp32, 12 MiB moved, L2 kept warm (--cache-control none)", "bytes": 12 * (1 << 20)},
        )
    }


def ops_blind_mixed():
    """Blind set (tests/data/corpus/blind_mixed.md: labelled before they ran):
    classes the first corpus lacked or that a tree could confuse (XU, spills, atomics, a latency
    chain, a cuDNN conv, int8 and fp64 GEMMs)."""
    import torch
    import torch.nn.functional as F

    ops = {}

    ops["triton_exp32_sum_16M"] = (
        w.compiled(w.exp_sum(32, 0.01), (1 << 24,)),
        {"source": "torch.compile: sum of 32 exp(x*c) fused (Triton), fp32", "bytes": 8 * (1 << 24)},
    )

    ops["triton_softmax_logsoftmax_spill_4096x8192"] = (
        w.softmax_logsoftmax(4096, 8192, 1),
        {"source": "Triton softmax + log-softmax, one warp per 8192-wide fp32 row (spills)", "bytes": 12 * 4096 * 8192},
    )

    ops["scatter_add_fp32_16M_into_64"] = (
        w.accumulate(1 << 24, 64, "scatter_add"),
        {"source": "scatter_add_ 16M fp32 values into 64 bins (contended atomics)", "bytes": 12 * (1 << 24)},
    )

    ops["triton_rowsum_1warp_264x65536"] = (
        w.row_sum(264, 65536, 128, 1, kernel_name="row_serial_sum"),
        {"source": "Triton row sum, one warp per 65536-wide fp32 row, 2 CTAs per SM", "bytes": 4 * 264 * 65536},
    )

    def conv():
        cl = torch.channels_last
        x = _t(32, 256, 56, 56, dtype=torch.float16).to(memory_format=cl)
        w = _t(256, 256, 3, 3, dtype=torch.float16, scale=0.05).to(memory_format=cl)
        return lambda: F.conv2d(x, w, padding=1)

    ops["cudnn_conv2d_fp16_nhwc_n32c256h56k256r3"] = (
        conv,
        {
            "source": "cuDNN F.conv2d fp16 channels_last N32 C256 56x56 K256 3x3",
            "flops": 2.0 * 32 * 56 * 56 * 256 * 256 * 9,
            "precision": "fp16",
        },
    )

    def int_mm():
        a = torch.randint(-8, 8, (8192, 8192), device="cuda", dtype=torch.int8)
        b = torch.randint(-8, 8, (8192, 8192), device="cuda", dtype=torch.int8)
        return lambda: torch._int_mm(a, b.t())

    ops["cublas_int8_8192x8192x8192"] = (
        int_mm,
        {"source": "cuBLAS int8 (torch._int_mm)", "mnk": [8192] * 3, "flops": 2.0 * 8192**3, "precision": "int8"},
    )

    def dgemm():
        a, b = _t(4096, 4096, dtype=torch.float64), _t(4096, 4096, dtype=torch.float64)
        return lambda: torch.matmul(a, b)

    ops["cublas_fp64_4096x4096x4096"] = (
        dgemm,
        {"source": "cuBLAS DGEMM (torch.matmul fp64)", "mnk": [4096] * 3, "flops": 2.0 * 4096**3, "precision": "fp64"},
    )
    return ops


def ops_blind_precisions():
    """Blind set (tests/data/corpus/blind_precisions.md: labelled before they ran):
    GEMMs in precisions and paths the corpus lacked (fp8 row-wise scales, tf32, a misaligned bf16
    problem off TMA, a Triton small-tile GEMM), the integer ALU and FP64 pipes, a depthwise
    convolution and a bilinear upsample."""
    import torch
    import torch.nn.functional as F
    import triton
    import triton.language as tl

    ops = {}

    def scaled_mm_rowwise():
        m = n = k = 4096
        a = _t(m, k).to(torch.float8_e4m3fn)
        b = _t(n, k).to(torch.float8_e4m3fn)
        sa = torch.rand(m, 1, device="cuda") + 0.5
        sb = torch.rand(1, n, device="cuda") + 0.5
        return lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    ops["scaled_mm_fp8_rowwise_4096x4096x4096"] = (
        scaled_mm_rowwise,
        {
            "source": "torch._scaled_mm e4m3 row-wise scales -> bf16",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "fp8",
        },
    )

    def tf32():
        a, b = _t(4096, 4096), _t(4096, 4096)

        def go():
            torch.backends.cuda.matmul.allow_tf32 = True
            return torch.matmul(a, b)

        return go

    ops["cublas_tf32_4096x4096x4096"] = (
        tf32,
        {
            "source": "cuBLAS fp32 matmul with allow_tf32",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "tf32",
        },
    )

    def misaligned():
        a, b = _t(4095, 4099, dtype=torch.bfloat16), _t(4099, 4097, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)

    ops["cublas_bf16_misaligned_4095x4097x4099"] = (
        misaligned,
        {
            "source": "cuBLAS bf16 matmul, rows of 8,198 bytes (not 16-byte aligned)",
            "mnk": [4095, 4097, 4099],
            "flops": 2.0 * 4095 * 4097 * 4099,
            "precision": "bf16",
        },
    )

    ops["triton_matmul_fp16_64x64x32_4096"] = (
        _triton_mm(torch.float16, 64, 64, 32, 4, 2),
        {
            "source": "Triton tl.dot fp16 GEMM, 64x64x32 tiles, 4 warps, 2 stages",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "fp16",
        },
    )

    @triton.jit
    def xorshift(x_ptr, out_ptr, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        for _ in tl.static_range(ROUNDS):
            x ^= x << 13
            x ^= x >> 17
            x ^= x << 5
        tl.store(out_ptr + offs, x)

    def xs():
        n = 1 << 24
        x = torch.randint(1, 1 << 30, (n,), device="cuda", dtype=torch.int32)
        out = torch.empty_like(x)
        return lambda: xorshift[(n // 1024,)](x, out, ROUNDS=32, BLOCK=1024)

    ops["triton_xorshift32_16M"] = (
        xs,
        {"source": "Triton int32 xorshift, 32 rounds an element", "bytes": 8 * (1 << 24)},
    )

    @triton.jit
    def horner_fp64(x_ptr, out_ptr, DEG: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        acc = x * 0.5
        for i in tl.static_range(DEG):
            acc = acc * x + (1.0 / (i + 2))
        tl.store(out_ptr + offs, acc)

    def h64():
        n = 1 << 22
        x = _t(n, dtype=torch.float64, scale=0.1)
        out = torch.empty_like(x)
        return lambda: horner_fp64[(n // 512,)](x, out, DEG=256, BLOCK=512)

    ops["triton_fp64_horner256_4M"] = (
        h64,
        {"source": "Triton degree-256 Horner polynomial in fp64", "bytes": 16 * (1 << 22)},
    )

    def depthwise():
        cl = torch.channels_last
        x = _t(32, 512, 56, 56, dtype=torch.float16).to(memory_format=cl)
        w = _t(512, 1, 3, 3, dtype=torch.float16, scale=0.1).to(memory_format=cl)
        return lambda: F.conv2d(x, w, padding=1, groups=512)

    ops["cudnn_depthwise_conv2d_fp16_nhwc_n32c512h56"] = (
        depthwise,
        {"source": "cuDNN F.conv2d fp16 channels_last depthwise 3x3, N32 C512 56x56", "bytes": 4 * 32 * 512 * 56 * 56},
    )

    def upsample():
        x = _t(8, 64, 128, 128)
        return lambda: F.interpolate(x, scale_factor=4, mode="bilinear", align_corners=False)

    ops["upsample_bilinear_fp32_8x64x128_x4"] = (
        upsample,
        {"source": "F.interpolate bilinear x4, fp32 NCHW 8x64x128x128", "bytes": 4 * 8 * 64 * (128 * 128 + 512 * 512)},
    )
    return ops


def ops_blind_gemm_flags():
    """Blind set (tests/data/corpus/blind_gemm_flags.md: labelled before they ran): the
    register-loads, mma-sync and gemm-l2-reuse flags on kernels they were not written on (misaligned tf32 and fp16, Triton at a healthy and an
    mma.sync-sized tile), DeepGEMM's grouped masked FP8 and bf16 GEMMs, a fused bias + GELU epilogue,
    a batched small GEMM and a gather-heavy grid_sample."""
    import torch
    import torch.nn.functional as F

    ops = {}

    def misaligned(dtype, m, n, k, tf32=False):
        def setup():
            a, b = _t(m, k, dtype=dtype), _t(k, n, dtype=dtype)

            def go():
                torch.backends.cuda.matmul.allow_tf32 = tf32
                return torch.matmul(a, b)

            return go

        return setup

    ops["cublas_tf32_misaligned_4095x4097x4099"] = (
        misaligned(torch.float32, 4095, 4097, 4099, tf32=True),
        {
            "source": "cuBLAS fp32 matmul with allow_tf32, rows of 16,396 bytes (not 16-byte aligned)",
            "mnk": [4095, 4097, 4099],
            "flops": 2.0 * 4095 * 4097 * 4099,
            "precision": "tf32",
        },
    )
    ops["cublas_fp16_misaligned_4096x4096x4095"] = (
        misaligned(torch.float16, 4096, 4096, 4095),
        {
            "source": "cuBLAS fp16 matmul, K = 4095 (rows of 8,190 bytes)",
            "mnk": [4096, 4096, 4095],
            "flops": 2.0 * 4096 * 4096 * 4095,
            "precision": "fp16",
        },
    )

    ops["triton_matmul_fp16_128x128x64_4096"] = (
        _triton_mm(torch.float16, 128, 128, 64, 8, 3),
        {
            "source": "Triton tl.dot fp16 GEMM, 128x128x64 tiles, 8 warps, 3 stages",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "fp16",
        },
    )
    ops["triton_matmul_bf16_32x32x32_4096"] = (
        _triton_mm(torch.bfloat16, 32, 32, 32, 4, 2),
        {
            "source": "Triton tl.dot bf16 GEMM, 32x32x32 tiles, 4 warps, 2 stages",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "bf16",
        },
    )

    def dg_masked():
        import deep_gemm
        from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

        g, max_m, n, k, want = 8, 256, 4096, 7168, 128
        gen = torch.Generator().manual_seed(7)
        masked = torch.tensor(
            [int(want * (0.7 + 0.6 * torch.rand(1, generator=gen).item())) for _ in range(g)],
            device="cuda",
            dtype=torch.int32,
        )
        a = [per_token_cast_to_fp8(_t(max_m, k, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(g)]
        b = [per_block_cast_to_fp8(_t(n, k, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(g)]
        a = (torch.stack([x for x, _ in a]), torch.stack([s for _, s in a]))
        b = (torch.stack([x for x, _ in b]), torch.stack([s for _, s in b]))
        d = torch.empty(g, max_m, n, device="cuda", dtype=torch.bfloat16)
        return lambda: deep_gemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked, int(want * 1.2))

    ops["deepgemm_masked_fp8_g8_m128_4096x7168"] = (
        dg_masked,
        {"source": "DeepGEMM m_grouped_fp8_gemm_nt_masked, 8 groups of ~128 rows, N 4096, K 7168", "precision": "fp8"},
    )

    def dg_bf16():
        import deep_gemm

        n = 4096
        a, b = _t(n, n, dtype=torch.bfloat16), _t(n, n, dtype=torch.bfloat16)
        d = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        return lambda: deep_gemm.bf16_gemm_nt(a, b, d)

    ops["deepgemm_bf16_4096x4096x4096"] = (
        dg_bf16,
        {"source": "DeepGEMM bf16_gemm_nt", "mnk": [4096] * 3, "flops": 2.0 * 4096**3, "precision": "bf16"},
    )

    def bias_gelu():
        n = 8192
        x, w = _t(n, n, dtype=torch.bfloat16), _t(n, n, dtype=torch.bfloat16, scale=0.02)
        bias = _t(n, dtype=torch.bfloat16)
        return lambda: torch._addmm_activation(bias, x, w.t(), use_gelu=True)

    ops["cublaslt_bias_gelu_bf16_8192x8192x8192"] = (
        bias_gelu,
        {
            "source": "cuBLASLt bf16 GEMM with the bias + GELU epilogue (torch._addmm_activation)",
            "mnk": [8192] * 3,
            "flops": 2.0 * 8192**3,
            "precision": "bf16",
        },
    )

    def bmm():
        a, b = _t(16384, 64, 64, dtype=torch.bfloat16), _t(16384, 64, 64, dtype=torch.bfloat16)
        return lambda: torch.bmm(a, b)

    ops["bmm_bf16_16384x64x64x64"] = (
        bmm,
        {
            "source": "cuBLAS batched bf16 GEMM (torch.bmm), 16,384 of 64x64x64",
            "flops": 2.0 * 16384 * 64**3,
            "precision": "bf16",
            "bytes": 3 * 16384 * 64 * 64 * 2,
        },
    )

    def grid_sample():
        x = _t(8, 64, 256, 256)
        grid = torch.rand(8, 256, 256, 2, device="cuda") * 2 - 1
        return lambda: F.grid_sample(x, grid, mode="bilinear", align_corners=False)

    ops["grid_sample_bilinear_fp32_8x64x256"] = (
        grid_sample,
        {"source": "F.grid_sample bilinear, fp32 8x64x256x256, random grid", "bytes": 4 * 8 * 64 * 256 * 256 * 2},
    )
    return ops


def ops_blind_decode_moe_scan():
    """Blind set (tests/data/corpus/blind_decode_moe_scan.md: labelled before they ran): kinds the
    corpus had none of: attention at decode (one query row), Triton's FP8 wgmma, DeepGEMM's grouped
    contiguous (MoE) FP8 GEMM, a skinny long-K bf16 GEMM, a binary search, a prefix scan, a complex
    GEMM and an embedding-bag gather."""
    import torch
    import torch.nn.functional as F

    ops = {}

    def decode():
        q = _t(8, 32, 1, 128, dtype=torch.bfloat16)
        k, v = _t(8, 32, 4096, 128, dtype=torch.bfloat16), _t(8, 32, 4096, 128, dtype=torch.bfloat16)
        return lambda: F.scaled_dot_product_attention(q, k, v)

    ops["sdpa_decode_bf16_b8h32kv4096d128"] = (
        decode,
        {
            "source": "F.scaled_dot_product_attention bf16, one query row, 4,096 keys, 8 x 32 heads of 128",
            "bytes": 2 * 8 * 32 * 4096 * 128 * 2,
            "precision": "bf16",
        },
    )

    # ran as its own kernel `fp8_mm` (commit 8883795), the same loads and dot as this helper's
    ops["triton_matmul_fp8_128x128x128_4096"] = (
        _triton_mm(torch.float8_e4m3fn, 128, 128, 128, 8, 3, b_k_major=True, out_dtype=torch.bfloat16),
        {
            "source": "Triton tl.dot FP8 e4m3 GEMM, both operands K-major, 128x128x128 tiles, 8 warps, 3 stages",
            "mnk": [4096] * 3,
            "flops": 2.0 * 4096**3,
            "precision": "fp8",
        },
    )

    def dg_contiguous():
        import deep_gemm
        from deep_gemm.utils import per_block_cast_to_fp8, per_token_cast_to_fp8

        g, rows, n, k = 4, 2048, 4096, 7168
        a = per_token_cast_to_fp8(_t(g * rows, k, dtype=torch.bfloat16), use_ue8m0=False)
        b = [per_block_cast_to_fp8(_t(n, k, dtype=torch.bfloat16), use_ue8m0=False) for _ in range(g)]
        b = (torch.stack([x for x, _ in b]), torch.stack([s for _, s in b]))
        layout = torch.arange(g, device="cuda", dtype=torch.int32).repeat_interleave(rows)
        d = torch.empty(g * rows, n, device="cuda", dtype=torch.bfloat16)
        return lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)

    ops["deepgemm_contiguous_fp8_g4_m2048_4096x7168"] = (
        dg_contiguous,
        {
            "source": "DeepGEMM m_grouped_fp8_gemm_nt_contiguous, 4 groups of 2,048 rows, N 4096, K 7168",
            "mnk": [8192, 4096, 7168],
            "flops": 2.0 * 8192 * 4096 * 7168,
            "precision": "fp8",
        },
    )

    def skinny():
        a, b = _t(128, 262144, dtype=torch.bfloat16), _t(262144, 128, dtype=torch.bfloat16)
        return lambda: torch.matmul(a, b)

    ops["cublas_bf16_skinny_128x128x262144"] = (
        skinny,
        {
            "source": "cuBLAS bf16 matmul, 128 x 128 outputs over K = 262,144",
            "mnk": [128, 128, 262144],
            "flops": 2.0 * 128 * 128 * 262144,
            "precision": "bf16",
            "bytes": 2 * 2 * 128 * 262144,
        },
    )

    def search():
        seq = torch.sort(torch.rand(1 << 20, device="cuda")).values
        x = torch.rand(1 << 24, device="cuda")
        return lambda: torch.searchsorted(seq, x)

    ops["searchsorted_fp32_16M_in_1M"] = (
        search,
        {
            "source": "torch.searchsorted: 16M fp32 values into a sorted 1M-entry (4 MB) sequence",
            "bytes": 4 * (1 << 24) + 8 * (1 << 24),
        },
    )

    def scan():
        x = _t(1 << 26)
        return lambda: torch.cumsum(x, 0)

    ops["cumsum_fp32_64M"] = (scan, {"source": "torch.cumsum of 64M fp32 (CUB device scan)", "bytes": 8 * (1 << 26)})

    def complex_mm():
        a = torch.randn(2048, 2048, device="cuda", dtype=torch.complex64)
        b = torch.randn(2048, 2048, device="cuda", dtype=torch.complex64)
        return lambda: torch.matmul(a, b)

    ops["cublas_complex64_2048x2048x2048"] = (
        complex_mm,
        {"source": "cuBLAS complex64 matmul (torch default: no tf32)", "mnk": [2048] * 3, "flops": 8.0 * 2048**3},
    )

    def bag():
        table = _t(1 << 20, 128)
        idx = torch.randint(0, 1 << 20, (1 << 21,), device="cuda")
        offsets = torch.arange(0, 1 << 21, 32, device="cuda")
        return lambda: F.embedding_bag(idx, table, offsets, mode="sum")

    ops["embedding_bag_sum_fp32_1Mx128_bags32"] = (
        bag,
        {
            "source": "F.embedding_bag sum: 65,536 bags of 32 random rows of a 1M x 128 fp32 table",
            "bytes": (1 << 21) * 128 * 4,
        },
    )
    return ops


def ops_blind_fft_adamw_pipes():
    """Blind set (tests/data/corpus/blind_fft_adamw_pipes.md: labelled before they ran): kinds the
    corpus had none of: a cuFFT real-to-complex FFT, the fused AdamW optimizer step, a chain of MUFU
    ex2 (the XU pipe alone), causal attention prefill at 16K tokens, a short-K GEMM whose bytes are its
    output, a permuting copy of one-byte elements, an L2-resident read stream and a cuDNN 1x1 conv."""
    import torch
    import torch.nn.functional as F

    ops = {}

    def rfft():
        x = _t(16384, 4096)
        return lambda: torch.fft.rfft(x, dim=-1)

    ops["cufft_rfft_fp32_16384x4096"] = (
        rfft,
        {
            "source": "torch.fft.rfft fp32 (cuFFT R2C), 16,384 rows of 4,096 points",
            "bytes": 4 * 16384 * 4096 + 8 * 16384 * 2049,
            "flops": 2.5 * 16384 * 4096 * 12,
        },
    )

    def adamw():
        p = torch.nn.Parameter(_t(1 << 24))
        p.grad = _t(1 << 24, scale=1e-3)
        opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, fused=True)
        return opt.step

    ops["adamw_fused_fp32_16M"] = (
        adamw,
        {"source": "torch.optim.AdamW(fused=True).step() on one 16M-element fp32 parameter", "bytes": 28 * (1 << 24)},
    )

    def ex2_chain():
        import triton
        import triton.language as tl

        @triton.jit
        def ex2_chain_kernel(x_ptr, out_ptr, DEPTH: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            y = tl.load(x_ptr + offs)
            for _ in tl.static_range(DEPTH):
                # one MUFU.EX2 per step; 2^-y keeps y in [0.5, 1]
                y = tl.inline_asm_elementwise(
                    "ex2.approx.ftz.f32 $0, $1;", "=f,f", [-y], dtype=tl.float32, is_pure=True, pack=1
                )
            tl.store(out_ptr + offs, y)

        n = 1 << 24
        x = torch.rand(n, device="cuda")
        out = torch.empty_like(x)
        return lambda: ex2_chain_kernel[(n // 1024,)](x, out, DEPTH=64, BLOCK=1024, num_warps=4)

    ops["triton_ex2_chain64_16M"] = (
        ex2_chain,
        {
            "source": "Triton: 64 dependent ex2.approx.ftz.f32 (inline PTX) per fp32 element, 16M elements",
            "bytes": 8 * (1 << 24),
        },
    )

    def causal_prefill():
        q, k, v = (_t(1, 16, 16384, 128, dtype=torch.bfloat16) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)

    ops["sdpa_causal_bf16_b1h16s16384d128"] = (
        causal_prefill,
        {
            "source": "F.scaled_dot_product_attention bf16, causal prefill, 16,384 tokens, 16 heads of 128 (default backend)",
            "flops": 4.0 * 16 * 16384**2 * 128 / 2,
            "precision": "bf16",
        },
    )

    ops["cublas_bf16_shortk_16384x16384x64"] = _wide_output_gemm(
        64, "cuBLAS bf16 matmul, K = 64: 537 MB of output for 4 MB of operands"
    )

    def permute_copy():
        x = torch.randint(0, 256, (8, 4096, 32, 128), device="cuda", dtype=torch.uint8)
        return lambda: x.permute(0, 2, 1, 3).contiguous()

    ops["permute_copy_uint8_8x4096x32x128"] = (
        permute_copy,
        {
            "source": "x.permute(0, 2, 1, 3).contiguous() on uint8 (B, S, H, D) = (8, 4096, 32, 128): runs of 128 bytes",
            "bytes": 2 * 8 * 4096 * 32 * 128,
        },
    )

    def l2_stream():
        import triton
        import triton.language as tl

        @triton.jit
        def l2_stream_kernel(x_ptr, out_ptr, N_CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            acc = tl.zeros((BLOCK,), tl.float32)
            for i in range(N_CHUNKS):
                c = (pid + i) % N_CHUNKS
                # .cg: cached in L2 only, so every pass over the 4 MB buffer is served by L2, not L1
                acc += tl.load(x_ptr + c * BLOCK + tl.arange(0, BLOCK), cache_modifier=".cg")
            tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)

        chunks, block, progs = 256, 4096, 396
        x = _t(chunks * block)
        out = torch.empty(progs * block, device="cuda")
        return lambda: l2_stream_kernel[(progs,)](x, out, N_CHUNKS=chunks, BLOCK=block, num_warps=8)

    ops["triton_l2_stream_4MB_x396"] = (
        l2_stream,
        {
            "source": "Triton: 396 programs (3 per SM) each read the whole 4 MB fp32 buffer (L2-resident, ld.global.cg)",
            "bytes": 396 * 4 * (1 << 20),
        },
    )

    def conv1x1():
        cl = torch.channels_last
        x = _t(64, 256, 56, 56, dtype=torch.bfloat16).to(memory_format=cl)
        w = _t(256, 256, 1, 1, dtype=torch.bfloat16, scale=0.05).to(memory_format=cl)
        return lambda: F.conv2d(x, w)

    ops["cudnn_conv1x1_bf16_nhwc_n64c256h56k256"] = (
        conv1x1,
        {
            "source": "cuDNN F.conv2d bf16 channels_last 1x1, N64 C256 56x56 K256 (a GEMM of 200,704 x 256 x 256)",
            "flops": 2.0 * 64 * 56 * 56 * 256 * 256,
            "precision": "bf16",
            "bytes": 2 * 2 * 64 * 256 * 56 * 56,
        },
    )
    return ops


def ops_blind_h200():
    """Blind set (tests/data/corpus/blind_h200.md: labelled before they ran), profiled on an H200
    (HBM3e at 4.8 TB/s, where the other sets ran on an H100 at 3.35):
    a bf16 GEMM between the two parts' ridge points, a CUTLASS grouped GEMM (torch._grouped_mm), the
    int4 weight-only tinygemm, a CUB radix sort, Philox normal sampling, cross-entropy over a 128K
    vocabulary, attention backward and an NCHW max pool."""
    import torch
    import torch.nn.functional as F

    ops = {}

    ops["cublas_bf16_ridge_16384x16384x256"] = _wide_output_gemm(
        256, "cuBLAS bf16 matmul, K = 256: 248 FLOP per DRAM byte, between the H200's ridge and the H100's"
    )

    def grouped():
        g, m, n, k = 8, 2048, 4096, 7168
        a = _t(g * m, k, dtype=torch.bfloat16)
        b = _t(g, n, k, dtype=torch.bfloat16, scale=0.05)
        offs = torch.arange(m, g * m + 1, m, device="cuda", dtype=torch.int32)
        return lambda: torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)

    ops["grouped_mm_bf16_g8_2048x4096x7168"] = (
        grouped,
        {
            "source": "torch._grouped_mm bf16 (CUTLASS grouped GEMM on sm90): 8 groups of 2048 rows, N 4096, K 7168",
            "mnk": [8 * 2048, 4096, 7168],
            "flops": 2.0 * 8 * 2048 * 4096 * 7168,
            "precision": "bf16",
        },
    )

    def int4():
        n, k, group = 16384, 16384, 128
        w = torch.randint(0, 256, (n, k // 2), device="cuda", dtype=torch.uint8)
        packed = torch._convert_weight_to_int4pack(w, 8)
        sz = (torch.rand(k // group, n, 2, device="cuda") * 0.01).to(torch.bfloat16)
        x = _t(32, k, dtype=torch.bfloat16)
        return lambda: torch._weight_int4pack_mm(x, packed, group, sz)

    ops["int4pack_mm_bf16_m32_16384x16384"] = (
        int4,
        {
            "source": "torch._weight_int4pack_mm (tinygemm): 32 bf16 rows times an int4 16384 x 16384 weight, groups of 128",
            "mnk": [32, 16384, 16384],
            "flops": 2.0 * 32 * 16384 * 16384,
            "precision": "bf16",
            "bytes": 16384 * 16384 // 2 + 16384 // 128 * 16384 * 4,
        },
    )

    def sort():
        x = _t(1 << 25)
        return lambda: torch.sort(x)

    ops["sort_fp32_32M"] = (
        sort,
        {
            "source": "torch.sort of 32M fp32 values with their int64 indices (CUB radix sort pairs)",
            "bytes": 4 * 12 * (1 << 25),
        },
    )

    def randn():
        buf = torch.empty(1 << 28, device="cuda")
        return lambda: buf.normal_()

    ops["randn_fp32_256M"] = (
        randn,
        {
            "source": "Tensor.normal_ on 256M fp32 (Philox4x32-10 and Box-Muller, torch's distribution kernel)",
            "bytes": 4 * (1 << 28),
        },
    )

    def xent():
        logits = _t(4096, 128256, dtype=torch.bfloat16)
        target = torch.randint(0, 128256, (4096,), device="cuda")
        return lambda: F.cross_entropy(logits, target)

    ops["cross_entropy_bf16_4096x128256"] = (
        xent,
        {
            "source": "F.cross_entropy bf16 logits (4,096 tokens x 128,256 vocabulary): log_softmax, then nll_loss",
            "bytes": 2 * 2 * 4096 * 128256,
        },
    )

    # The backward ops are called directly: autograd runs CUDA backward on its own device thread,
    # outside this thread's NVTX range, so ncu's --nvtx-include never sees those launches.
    def attn_bwd(backend: str):
        def setup():
            aten = torch.ops.aten
            q, k, v = (_t(2, 16, 4096, 128, dtype=torch.bfloat16) for _ in range(3))
            if backend == "cudnn":
                out, lse, cq, ck, mq, mk, seed, offset, _ = aten._scaled_dot_product_cudnn_attention(
                    q, k, v, None, True, 0.0, False, False
                )
                grad = _t(*out.shape, dtype=torch.bfloat16)
                return lambda: aten._scaled_dot_product_cudnn_attention_backward(
                    grad, q, k, v, out, lse, seed, offset, None, cq, ck, mq, mk, 0.0, False
                )
            out, lse, cq, ck, mq, mk, rng, unused, _ = aten._scaled_dot_product_flash_attention(q, k, v)
            grad = _t(*out.shape, dtype=torch.bfloat16)
            return lambda: aten._scaled_dot_product_flash_attention_backward(
                grad, q, k, v, out, lse, cq, ck, mq, mk, 0.0, False, rng, unused
            )

        return setup

    for backend, what in (("cudnn", "cuDNN"), ("flash", "FlashAttention-2")):
        ops[f"sdpa_backward_{backend}_bf16_b2h16s4096d128"] = (
            attn_bwd(backend),
            {
                "source": f"{what} attention backward (aten's op, called directly), bf16 (2, 16, 4096, 128), not causal",
                "flops": 2.5 * 4.0 * 2 * 16 * 4096**2 * 128,
                "precision": "bf16",
            },
        )

    def maxpool():
        x = _t(64, 256, 112, 112, dtype=torch.float16)
        return lambda: F.max_pool2d(x, 3, 2, 1)

    ops["max_pool2d_fp16_nchw_n64c256h112_k3s2"] = (
        maxpool,
        {
            "source": "F.max_pool2d fp16 NCHW (64, 256, 112, 112), 3x3 window, stride 2, padding 1 (CUDA writes int64 indices too)",
            "bytes": 2 * 64 * 256 * 112 * 112 + (2 + 8) * 64 * 256 * 56 * 56,
        },
    )
    return ops


def ops_blind_mixed_cute(example: str):
    """NVIDIA's CuTe DSL Hopper dense GEMM example (dense_gemm.py, non-persistent), loaded from the
    CUTLASS checkout's file (not part of bsprof), compiled once with dynamic layouts and launched
    at a square and a skinny shape."""
    import importlib.util

    import torch

    tile, cluster = (128, 256), (1, 1)
    state = {}

    def compiled(views):
        if "fn" not in state:
            import cutlass
            import cutlass.cute as cute

            spec = importlib.util.spec_from_file_location("cute_example_dense_gemm", example)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            gemm = mod.HopperWgmmaGemmKernel(cutlass.Float32, tile, cluster)
            state["fn"] = cute.compile(gemm, *views, _stream())
        return state["fn"]

    def _stream():
        import cuda.bindings.driver as drv

        return drv.CUstream(torch.cuda.current_stream().cuda_stream)

    def gemm(m, n, k):
        def setup():
            from cutlass.cute.runtime import from_dlpack

            a, b = _t(1, m, k, dtype=torch.float16), _t(1, n, k, dtype=torch.float16)
            c = torch.empty(1, m, n, device="cuda", dtype=torch.float16)
            views = [
                from_dlpack(t.permute(1, 2, 0), assumed_align=16).mark_layout_dynamic(leading_dim=1) for t in (a, b, c)
            ]
            fn = compiled(views)

            def launch():
                fn(*views, _stream())

            launch()
            torch.cuda.synchronize()
            ref = a[0].float() @ b[0].float().t()
            err = ((c[0].float() - ref).abs().max() / ref.abs().max()).item()
            print(f"corpus: cute {m}x{n}x{k}: max rel err {err:.2e}", flush=True)
            return launch

        return setup, {
            "source": f"CuTe DSL example hopper dense_gemm.py fp16 tile {tile[0]}x{tile[1]} cluster "
            f"{cluster[0]}x{cluster[1]}",
            "mnk": [m, n, k],
            "flops": 2.0 * m * n * k,
            "precision": "fp16",
        }

    return {
        "cute_dense_gemm_fp16_8192x8192x8192": gemm(8192, 8192, 8192),
        "cute_dense_gemm_fp16_256x1024x16384": gemm(256, 1024, 16384),
    }


def main(argv=None) -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument(
        "--only",
        choices=(
            "all",
            "gemm",
            "other",
            "l2",
            "blind_mixed",
            "blind_mixed_cute",
            "blind_precisions",
            "blind_gemm_flags",
            "blind_decode_moe_scan",
            "blind_fft_adamw_pipes",
            "blind_h200",
        ),
        default="all",
        help="gemm: the GEMM ops (JIT-compile heavy); other: the rest; l2: the L2-resident twin; "
        "blind_*: one blind set (tests/data/corpus/blind_*.md, labelled before it ran)",
    )
    p.add_argument(
        "--cute-example",
        default="ext/dense_gemm.py",
        help="CUTLASS examples/python/CuTeDSL/cute/hopper/kernel/dense_gemm/dense_gemm.py",
    )
    p.add_argument("--meta", required=True)
    p.add_argument("--select", default=None, help="comma-separated op names (default: all)")
    args = p.parse_args(argv)
    ops = {
        "l2": ops_l2,
        "blind_mixed": ops_blind_mixed,
        "blind_precisions": ops_blind_precisions,
        "blind_gemm_flags": ops_blind_gemm_flags,
        "blind_decode_moe_scan": ops_blind_decode_moe_scan,
        "blind_fft_adamw_pipes": ops_blind_fft_adamw_pipes,
        "blind_h200": ops_blind_h200,
        "blind_mixed_cute": lambda: ops_blind_mixed_cute(args.cute_example),
    }.get(args.only, ops_main)()
    if args.only in ("gemm", "other"):
        gemm = ("cublas_", "deepgemm_", "bsprof_")
        ops = {k: v for k, v in ops.items() if k.startswith(gemm) == (args.only == "gemm")}
    if args.select:
        ops = {k: v for k, v in ops.items() if k in args.select.split(",")}
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "ops": {}}
    for name, (setup, info) in ops.items():
        entry = dict(info)
        try:
            fn = setup()
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
            w.in_ranges(fn, "corpus", f"corpus_{name}")
            entry["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one op that cannot run here must not stop the corpus
            entry["ok"] = False
            entry["error"] = w.error_line(exc)
            traceback.print_exc()
        print(f"corpus: {name}: {'ok' if entry['ok'] else entry['error']}", flush=True)
        meta["ops"][name] = entry
        torch.cuda.empty_cache()
    with open(args.meta, "w") as f:
        json.dump(meta, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
