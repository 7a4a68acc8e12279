"""Device-side phase recorder for the timing builds of bsprof's kernels (CuTe DSL).

Usage (for kernel authors)
--------------------------
Host side, when building the kernel (before ``cute.compile``)::

    from bsprof.kernels.timing_recorder import TimingRecorder, plan_buffer, EV

    plan = plan_buffer(num_ctas=grid, warps_per_cta=12, tiles_per_cta=ceil(tiles / grid))
    buf = torch.zeros(plan.shape, dtype=torch.int64, device="cuda")   # zero it before EVERY capture
    self.rec = TimingRecorder(enabled=timing, warps_per_cta=12,
                              tile_slots=plan.tile_slots, sample_every=plan.sample_every)
    # pass ``buf`` to the kernel as a cute.Tensor (from_dlpack(buf) or, for CPU compiles,
    # make_fake_compact_tensor(cutlass.Int64, (plan.nbytes // 8,), assumed_align=16)).
    # Only its base pointer is used; the layout is the C-ordered plan.shape.

Device side, from every thread of the warp (lane 0 stores; the other lanes only read the clock)::

    self.rec.record(buf, cta_linear, warp_idx, tile_count, EV.kloop_end)   # event id: Python int
    self.rec.spin(delay_kloop)      # compile-time clock64 spin (delay injection); 0 = no code

``tile_count`` is the CTA's n-th tile (0, 1, 2, ...) in its persistent loop, the same numbering
for every role. Events (``EV.<name>``, see ``analyzers.timing.schema.EVENTS``): producer: ``tile_start`` then
``load_end``; MMA / consumer K-loop: ``tile_start``, ``acc_acquired``, ``tma0_landed``,
``kloop_end``; epilogue: ``tile_start``, ``ml_done``, ``phase1_end``, ``phase2_end``. A Hopper
consumer warp that runs its own epilogue records the MMA events and then ``phase1_end`` /
``phase2_end`` (``ml_done`` optional: Phase 1 then starts at ``kloop_end``).

With ``enabled=False`` (the plain build) ``record`` emits nothing at all: the plain kernel's code
is unchanged. Host decode: ``bsprof.analyzers.timing.buffer.decode_buffer(buf, plan)``.

Each event is one inline-PTX block: read ``%clock64`` first, then ``%globaltimer`` and ``%smid``,
and lane 0 writes the 16-byte record with a single ``st.global.v2.u64`` into its fixed slot
``(cta, warp, tile // sample_every, event)``. Tiles that are not sampled (or past the slots) are
skipped by a predicate, so there is no branch. Fixed slots, never a ring: every role's events
of a sampled tile survive, whatever the other roles recorded.
"""

from __future__ import annotations

from types import SimpleNamespace

from bsprof.analyzers.timing.buffer import BufferPlan, plan_buffer  # noqa: F401  (re-exported)
from bsprof.analyzers.timing.schema import EVENT_ID, NUM_EVENTS

# EV.kloop_end == 3 etc.: plain Python ints, constexpr in the kernel.
EV = SimpleNamespace(**EVENT_ID)

_RECORD_BYTES = 16


def record_asm(warps_per_cta: int, tile_slots, sample_every: int, events: tuple[int, ...]) -> tuple[str, str]:
    """PTX for one event and its constraint string. Operands: $0 base (u64), $1 cta, $2 warp,
    $3 tile (u32) and, when ``tile_slots`` is not a Python int, $4 tile_slots (u32)."""
    slots = str(int(tile_slots)) if isinstance(tile_slots, int) else "$4"
    stores = "\n".join(f"\t@p st.global.v2.u64 [addr+{ev * _RECORD_BYTES}], {{clk, gt}};" for ev in events)
    limit = f"mul.lo.u32 lim, {slots}, {sample_every};" if sample_every > 1 else f"mov.u32 lim, {slots};"
    # sample_every is a power of two: mask and shift (ptxas does not strength-reduce div.u32 here)
    shift = sample_every.bit_length() - 1
    sample = (
        f"and.b32 r, $3, {sample_every - 1};\n\tsetp.eq.and.u32 p, r, 0, p;\n\tshr.u32 s, $3, {shift};"
        if sample_every > 1
        else "mov.u32 s, $3;"
    )
    asm = f"""{{
\t.reg .pred p;
\t.reg .u32 lane, sm, r, s, idx, lim;
\t.reg .u64 clk, gt, smw, off, addr;
\tmov.u64 clk, %clock64;
\tmov.u64 gt, %globaltimer;
\tmov.u32 sm, %smid;
\tmov.u32 lane, %laneid;
\tsetp.eq.u32 p, lane, 0;
\t{limit}
\tsetp.lt.and.u32 p, $3, lim, p;
\t{sample}
\tmad.lo.u32 idx, $1, {warps_per_cta}, $2;
\tmad.lo.u32 idx, idx, {slots}, s;
\tmul.wide.u32 off, idx, {NUM_EVENTS * _RECORD_BYTES};
\tadd.u64 addr, $0, off;
\tcvt.u64.u32 smw, sm;
\tshl.b64 smw, smw, 56;
\tand.b64 gt, gt, 0x00FFFFFFFFFFFFFF;
\tor.b64 gt, gt, smw;
{stores}
}}"""
    cons = "l,r,r,r" + ("" if isinstance(tile_slots, int) else ",r") + ",~{memory}"
    return asm, cons


_SPIN_ASM = """{{
\t.reg .pred p;
\t.reg .u64 t0, t1;
\tmov.u64 t0, %clock64;
SPIN_LOOP:
{backoff}\tmov.u64 t1, %clock64;
\tsub.u64 t1, t1, t0;
\tsetp.lt.u64 p, t1, {cycles};
\t@p bra SPIN_LOOP;
}}"""


class TimingRecorder:
    """Trace-time helper: holds the compile-time layout, emits one PTX block per event.

    ``warps_per_cta`` and ``sample_every`` are compile-time ints; ``tile_slots`` may be an int
    or a runtime ``Int32`` (e.g. computed from the problem shape in the host ``@cute.jit``).
    """

    def __init__(self, enabled: bool, warps_per_cta: int = 1, tile_slots=1, sample_every: int = 1):
        self.enabled = bool(enabled)
        self.warps_per_cta = int(warps_per_cta)
        self.tile_slots = tile_slots
        self.sample_every = int(sample_every)
        if self.enabled and (
            self.warps_per_cta < 1 or self.sample_every < 1 or self.sample_every & (self.sample_every - 1)
        ):
            raise ValueError("TimingRecorder: warps_per_cta >= 1 and sample_every a power of two (plan_buffer's)")

    @classmethod
    def from_plan(cls, enabled: bool, plan: BufferPlan) -> "TimingRecorder":
        return cls(enabled, plan.warps_per_cta, plan.tile_slots, plan.sample_every)

    def record(self, buf, cta, warp, tile, event) -> None:
        """Store event ``event`` (a Python int, ``EV.<name>``) of ``(cta, warp, tile)``. A tuple of
        events that happen at the same instant (``(EV.phase1_end, EV.phase2_end)``) shares one
        clock read: each clock read costs the warp ~60 cycles on its critical path, a store little."""
        if not self.enabled:
            return
        events = tuple(event) if isinstance(event, tuple) else (event,)
        if not events or not all(isinstance(e, int) and 0 <= e < NUM_EVENTS for e in events):
            raise ValueError(f"TimingRecorder.record: events must be constexpr ints in [0, {NUM_EVENTS})")
        _emit_record(buf, cta, warp, tile, self.tile_slots, self.warps_per_cta, self.sample_every, events)

    def spin(self, cycles: int, backoff_ns: int = 0) -> None:
        """Wait ``cycles`` SM cycles on ``clock64`` (timed by the clock, not by nanosleep).
        ``backoff_ns`` > 0 naps that long between clock reads, so a delay in one warpgroup does not
        take issue slots from another warpgroup's work on the same SM (ping-pong)."""
        spin(cycles, backoff_ns)


def _u32(x, loc=None, ip=None):
    from cutlass import Int32
    from cutlass.cutlass_dsl import Numeric

    if isinstance(x, (int, Numeric)):
        return Int32(x).ir_value(loc=loc, ip=ip)
    if hasattr(x, "ir_value"):
        return x.ir_value(loc=loc, ip=ip)
    return x  # already an MLIR i32 value


def _emit_record(buf, cta, warp, tile, tile_slots, warps_per_cta, sample_every, events, *, loc=None, ip=None):
    from cutlass._mlir.dialects import llvm

    asm, cons = record_asm(warps_per_cta, tile_slots, sample_every, events)
    ptr = buf.iterator if hasattr(buf, "iterator") else buf
    operands = [
        ptr.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip),
        _u32(cta, loc, ip),
        _u32(warp, loc, ip),
        _u32(tile, loc, ip),
    ]
    if not isinstance(tile_slots, int):
        operands.append(_u32(tile_slots, loc, ip))
    llvm.inline_asm(None, operands, asm, cons, has_side_effects=True, asm_dialect=0, loc=loc, ip=ip)


def spin(cycles: int, backoff_ns: int = 0) -> None:
    """Compile-time clock64 spin of ``cycles`` cycles; ``cycles == 0`` emits nothing."""
    cycles = int(cycles)
    backoff = f"\tnanosleep.u32 {int(backoff_ns)};\n" if backoff_ns > 0 else ""
    if cycles <= 0:
        return
    from cutlass._mlir.dialects import llvm

    llvm.inline_asm(
        None, [], _SPIN_ASM.format(cycles=cycles, backoff=backoff), "~{memory}", has_side_effects=True, asm_dialect=0
    )
