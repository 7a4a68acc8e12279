"""A tiny kernel that exercises the timing recorder: compile checks (SASS) and a GPU self-test.

Warp 0 plays the producer, warp 1 the MMA warp, warps 2.. the epilogue; each spins a fixed number
of cycles per phase, so the decoded table has known phase lengths (``spin`` cycles, give or take
the recorder's own cost).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from bsprof.kernels.timing_recorder import EV, TimingRecorder, plan_buffer

PROBE_WARPS = 4
PROBE_SPIN = 2000


def build(
    num_ctas: int = 2,
    tiles: int = 3,
    sample_every: int = 1,
    spin_cycles: int = PROBE_SPIN,
    enabled: bool = True,
    dynamic_slots: bool = False,
    fake: bool = True,
):
    """Return ``(jit_fn, args)``; with ``fake`` the args are fake tensors for a CPU compile."""
    plan = plan_buffer(num_ctas, PROBE_WARPS, tiles, max_bytes=(1 << 40))
    slots = -(-tiles // sample_every)
    # tile_slots as a runtime value exercises the recorder's register-operand path
    rec = TimingRecorder(enabled, PROBE_WARPS, _RuntimeSlots(slots) if dynamic_slots else slots, sample_every)
    words = num_ctas * PROBE_WARPS * slots * plan.shape[3] * 2

    @cute.kernel
    def probe_kernel(buf: cute.Tensor, ntiles: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        for t in cutlass.range(ntiles, unroll=1):
            rec.record(buf, bidx, warp, t, EV.tile_start)
            if warp == 0:
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.load_end)
            elif warp == 1:
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.acc_acquired)
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.tma0_landed)
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.kloop_end)
            else:
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.ml_done)
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.phase1_end)
                rec.spin(spin_cycles)
                rec.record(buf, bidx, warp, t, EV.phase2_end)

    @cute.jit
    def probe(buf: cute.Tensor, ntiles: cutlass.Int32):
        probe_kernel(buf, ntiles).launch(grid=[num_ctas, 1, 1], block=[PROBE_WARPS * 32, 1, 1])

    if fake:
        from cutlass.cute.runtime import make_fake_compact_tensor

        buf = make_fake_compact_tensor(cutlass.Int64, (words,), assumed_align=16)
        return probe, (buf, cutlass.Int32(tiles)), (plan.shape[:2] + (slots,) + plan.shape[3:], sample_every)
    return probe, None, (plan.shape[:2] + (slots,) + plan.shape[3:], sample_every)


class _RuntimeSlots:
    """Turns the slot count into an Int32 SSA value at trace time (a runtime operand, not an immediate)."""

    def __init__(self, n: int):
        self.n = n

    def __index__(self):  # pragma: no cover - never used as a Python int
        raise TypeError

    def ir_value(self, loc=None, ip=None):
        from cutlass import Int32
        from cutlass._mlir.dialects import arith

        return arith.addi(Int32(self.n).ir_value(), Int32(0).ir_value())


def compile_probe(**kwargs) -> None:
    """Entry for :func:`bsprof.kernels.build.compile_to_cubin` (CPU compile, fake tensors)."""
    fn, args, _ = build(**kwargs)
    cute.compile(fn, *args)


def run_probe(num_ctas: int = 4, tiles: int = 5, sample_every: int = 1, spin_cycles: int = PROBE_SPIN):
    """GPU: launch the probe, return ``(buffer numpy array, BufferPlan)``."""
    import torch
    from cutlass.cute.runtime import from_dlpack

    from bsprof.analyzers.timing.buffer import BufferPlan

    fn, _, (shape, every) = build(num_ctas, tiles, sample_every, spin_cycles, fake=False)
    buf = torch.zeros(shape, dtype=torch.int64, device="cuda")
    flat = buf.view(-1)
    t = from_dlpack(flat, assumed_align=16)
    compiled = cute.compile(fn, t, cutlass.Int32(tiles))
    compiled(t, cutlass.Int32(tiles))
    torch.cuda.synchronize()
    return buf.cpu().numpy(), BufferPlan(shape, every)
