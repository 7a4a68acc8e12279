"""Micro-benchmark: per-warp epilogue time against the number of warps sharing one SM's store path.

Each CTA (one per SM) runs ``warps`` warps; every warp does the same fixed work, the shape of a
GEMM epilogue's Phase 1: per 16-byte chunk, ``alu`` dependent FMAs on four fp32 values (scaling)
and one ``st.shared.v4`` (the register -> shared-memory stage a Hopper TMA-store epilogue runs;
a Blackwell epilogue's TMEM reads share an SM-wide path the same way). The warp's clock64 span
around the loop is written per (CTA, warp). When the shared path is the limit, per-warp time
grows with the number of warps sharing it: work split over more warps stops getting faster.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.memory

MAX_WARPS = 32
ROW_BYTES = 512  # one warp's 16-byte-per-lane store
ROWS_PER_WARP = 4  # the warp cycles through this many rows (stays in its own region)

_LOOP_ASM = """{{
\t.reg .pred p;
\t.reg .u32 i, lane, a0, a;
\t.reg .u64 t0, t1, o;
\t.reg .f32 x0, x1, x2, x3;
\tmov.u32 lane, %laneid;
\tmad.lo.u32 a0, lane, 16, $1;
\tcvt.rn.f32.u32 x0, lane;
\tadd.f32 x1, x0, 0f3F800000;
\tadd.f32 x2, x0, 0f40000000;
\tadd.f32 x3, x0, 0f40400000;
\tmov.u32 i, 0;
\tmov.u64 t0, %clock64;
EPI_LOOP:
{alu}\tand.b32 a, i, {row_mask};
\tmad.lo.u32 a, a, {row_bytes}, a0;
\tst.shared.v4.f32 [a], {{x0, x1, x2, x3}};
\tadd.u32 i, i, 1;
\tsetp.lt.u32 p, i, {iters};
\t@p bra EPI_LOOP;
\tmov.u64 t1, %clock64;
\tsub.u64 t1, t1, t0;
\tsetp.eq.u32 p, lane, 0;
\tcvt.u64.u32 o, $2;
\tmad.lo.u64 o, o, 8, $0;
\t@p st.global.u64 [o], t1;
}}"""


def _alu(n: int) -> str:
    """``n`` rounds of four independent FMAs (a per-element scale), each dependent on the last."""
    lines = []
    for _ in range(int(n)):
        for r in ("x0", "x1", "x2", "x3"):
            lines.append(f"\tfma.rn.f32 {r}, {r}, 0f3F800001, 0f33800000;\n")
    return "".join(lines)


def build(warps: int, iters: int = 2048, alu: int = 2, num_ctas: int = 132, fake: bool = True):
    """``(jit_fn, args)``: ``out[cta * warps + warp]`` = that warp's cycles for ``iters`` chunks."""
    from cutlass._mlir.dialects import llvm

    if not 1 <= warps <= MAX_WARPS:
        raise ValueError(f"warps {warps} out of 1..{MAX_WARPS}")
    asm = _LOOP_ASM.format(alu=_alu(alu), iters=int(iters), row_mask=ROWS_PER_WARP - 1, row_bytes=ROW_BYTES)
    region = ROW_BYTES * ROWS_PER_WARP

    @cute.kernel
    def epi_kernel(out: cute.Tensor):
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        bidx, _, _ = cute.arch.block_idx()
        smem = cutlass.memory.SmemAllocator()
        buf = smem.allocate_tensor(cutlass.Int8, cute.make_layout(region * warps), byte_alignment=128)
        base = buf.iterator.toint() + warp * region
        slot = bidx * warps + warp
        cute.arch.barrier()  # every warp of the CTA starts together
        ptr = out.iterator.toint()
        llvm.inline_asm(
            None,
            [ptr.ir_value(), cutlass.Int32(base).ir_value(), cutlass.Int32(slot).ir_value()],
            asm,
            "l,r,r,~{memory}",
            has_side_effects=True,
            asm_dialect=0,
        )

    @cute.jit
    def epi(out: cute.Tensor):
        epi_kernel(out).launch(grid=[num_ctas, 1, 1], block=[warps * 32, 1, 1])

    if fake:
        from cutlass.cute.runtime import make_fake_compact_tensor

        return epi, (make_fake_compact_tensor(cutlass.Int64, (num_ctas * warps,), assumed_align=16),)
    return epi, None


def compile_epi(**kwargs) -> None:
    """Entry for :func:`bsprof.kernels.build.compile_to_cubin` (CPU compile, fake tensors)."""
    fn, args = build(**kwargs)
    cute.compile(fn, *args)


def run(warps: int, iters: int = 2048, alu: int = 2, repeats: int = 5):
    """GPU: per-warp cycles, an array (repeats, CTAs, warps), one CTA per SM."""
    import numpy as np
    import torch
    from cutlass.cute.runtime import from_dlpack

    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    fn, _ = build(warps, iters, alu, ctas, fake=False)
    out = torch.zeros(ctas * warps, dtype=torch.int64, device="cuda")
    t = from_dlpack(out, assumed_align=16)
    compiled = cute.compile(fn, t)
    compiled(t)  # warm-up
    res = []
    for _ in range(repeats):
        compiled(t)
        torch.cuda.synchronize()
        res.append(out.view(ctas, warps).cpu().numpy().copy())
    return np.stack(res)
