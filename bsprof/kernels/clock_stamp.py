"""The SMs' own clock over an interval: a one-warp-per-SM kernel that stamps ``%clock64`` and
``%globaltimer`` (CuTe DSL).

A recorded diagnostic of ``bsprof model --validate``, not an input of the model's clock term: two
stamps, one launched just before a timed block and one just after it on the same stream, give each
SM's cycles over the block's nanoseconds, the block's mean SM clock in the units the timing captures
count in. On the H100 it tracks the walls (wall x counter clock matches the captures' cycles within
3%) where NVML's polled clock does not: GEMM blocks count 7-10% fewer cycles per second than NVML
reports, uncapped ones at NVML's top included, while a stamp spin counts NVML's top exactly. So no
top clock in the counter's units is known for a GEMM, and the clock term stays on NVML's readings
(docs/model.md, "The clock term").

Each block of the grid (one warp; lane 0 stores) writes six 64-bit words at ``6 * block``: clock
and globaltimer at entry, clock and globaltimer at exit (after spinning ``spin`` cycles; 0 = none),
``%smid`` and a pad (48 bytes, so both 16-byte stores are aligned). The host pairs stamps by SM
(``analyzers.model.sustained.counter_mhz``); the SM counters differ in offset, never in rate.
"""

from __future__ import annotations

import cuda.bindings.driver as drv
import cutlass
import cutlass.cute as cute

# the stamp layout the host reads: six 64-bit words per block
from bsprof.analyzers.model.sustained import STAMP_WORDS, counter_mhz

_STAMP_ASM = """{
\t.reg .pred p, q;
\t.reg .u32 lane, sm;
\t.reg .u64 c0, t0, c1, t1, d, off, addr, smw;
\tmov.u64 c0, %clock64;
\tmov.u64 t0, %globaltimer;
STAMP_SPIN:
\tmov.u64 c1, %clock64;
\tsub.u64 d, c1, c0;
\tsetp.lt.u64 q, d, $2;
\t@q bra STAMP_SPIN;
\tmov.u64 c1, %clock64;
\tmov.u64 t1, %globaltimer;
\tmov.u32 sm, %smid;
\tmov.u32 lane, %laneid;
\tsetp.eq.u32 p, lane, 0;
\tmul.wide.u32 off, $1, 48;
\tadd.u64 addr, $0, off;
\tcvt.u64.u32 smw, sm;
\t@p st.global.v2.u64 [addr], {c0, t0};
\t@p st.global.v2.u64 [addr+16], {c1, t1};
\t@p st.global.v2.u64 [addr+32], {smw, smw};
}"""


def build(blocks: int):
    """The ``@cute.jit`` host function ``stamp(buf, spin, stream)`` launching ``blocks`` one-warp blocks."""

    @cute.kernel
    def stamp_kernel(buf: cute.Tensor, spin: cutlass.Int64):
        from cutlass._mlir.dialects import llvm

        bidx, _, _ = cute.arch.block_idx()
        ptr = buf.iterator.toint().ir_value()
        llvm.inline_asm(
            None,
            [ptr, cutlass.Int32(bidx).ir_value(), cutlass.Int64(spin).ir_value()],
            _STAMP_ASM,
            "l,r,l,~{memory}",
            has_side_effects=True,
            asm_dialect=0,
        )

    @cute.jit
    def stamp(buf: cute.Tensor, spin: cutlass.Int64, stream: drv.CUstream):
        stamp_kernel(buf, spin).launch(grid=[blocks, 1, 1], block=[32, 1, 1], stream=stream)

    return stamp


def fake_args(blocks: int):
    """Fake arguments for a CPU compile (SASS checks)."""
    from cutlass.cute.runtime import make_fake_compact_tensor

    return (
        make_fake_compact_tensor(cutlass.Int64, (blocks * STAMP_WORDS,), assumed_align=16),
        cutlass.Int64(0),
        drv.CUstream(0),
    )


def compile_stamp(blocks: int = 132) -> None:
    """Entry for :func:`bsprof.kernels.build.compile_to_cubin` (CPU compile, fake tensors)."""
    cute.compile(build(blocks), *fake_args(blocks))


class ClockStamps:
    """GPU: one compiled stamp kernel over every SM and its output buffers; :meth:`stamp` enqueues a
    stamp on the current torch stream and returns the device buffer it writes (read it after the
    stream has passed it)."""

    def __init__(self, device: int = 0):
        import torch
        from cutlass.cute.runtime import from_dlpack

        self.blocks = int(torch.cuda.get_device_properties(device).multi_processor_count)
        self._torch = torch
        self._from_dlpack = from_dlpack
        buf = torch.zeros(self.blocks * STAMP_WORDS, dtype=torch.int64, device="cuda")
        self._fn = cute.compile(
            build(self.blocks), from_dlpack(buf, assumed_align=16), cutlass.Int64(0), self._stream()
        )

    def _stream(self):
        return drv.CUstream(self._torch.cuda.current_stream().cuda_stream)

    def stamp(self, spin_cycles: int = 0):
        buf = self._torch.zeros(self.blocks * STAMP_WORDS, dtype=self._torch.int64, device="cuda")
        self._fn(self._from_dlpack(buf, assumed_align=16), cutlass.Int64(int(spin_cycles)), self._stream())
        return buf

    def check(self) -> float:
        """Two stamps 20 ms apart must give a clock between 100 MHz and 5 GHz; raises otherwise."""
        a = self.stamp()
        self._torch.cuda._sleep(20_000_000)
        b = self.stamp()
        self._torch.cuda.synchronize()
        mhz, _ = counter_mhz(a.cpu().numpy(), b.cpu().numpy())
        if not mhz or not 100.0 < mhz < 5000.0:
            raise RuntimeError(f"clock stamps read {mhz} MHz")
        return mhz
