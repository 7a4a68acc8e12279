"""Which instruction waits for a load: the scoreboards in the encodings' control bits.

From sm_70 on, every instruction's encoding carries control bits (``nvdisasm -hex`` prints them in the
second 64-bit word): the scoreboard a variable-latency instruction (a global load) sets when it issues
and clears when its result lands, and the scoreboards an instruction waits on before it issues. A load's
latency is paid where its scoreboard is first waited on, which the compiler may put well before or well
after the first read of the loaded register (several loads share a scoreboard, and a wait may be hoisted
to the top of a loop). That place, not the register's first reader, says whether the tensor pipe waits:
a wait reached before the next MMA issues holds the MMAs back by what is left of the latency; one
reached after MMAs issued is covered by their time.
"""

from __future__ import annotations

from collections.abc import Sequence

from bsprof.analyzers.sass.opcodes import arch_number
from bsprof.analyzers.sass.parse import Instruction

# the control bits (from bit 105 of the instruction): stall 4, yield 1, write scoreboard 3, read
# scoreboard 3, wait mask 6, reuse 4
_WRITE_SHIFT, _WAIT_SHIFT = 5, 11
NO_SCOREBOARD = 7
# architectures whose encodings carry these bits (Volta on)
MIN_SM = 70


def has_control(arch: str | None, instructions: Sequence[Instruction]) -> bool:
    """Whether this listing's instructions carry control bits a scoreboard can be read from."""
    sm = arch_number(arch)
    return sm is not None and sm >= MIN_SM and bool(instructions) and all(i.control is not None for i in instructions)


def write_scoreboard(ins: Instruction) -> int | None:
    """The scoreboard ``ins`` sets until its result lands, or None."""
    if ins.control is None:
        return None
    sb = (ins.control >> _WRITE_SHIFT) & 0x7
    return None if sb == NO_SCOREBOARD else sb


def waits_on(ins: Instruction, sb: int) -> bool:
    """Whether ``ins`` waits for scoreboard ``sb`` to clear before it issues."""
    return ins.control is not None and bool((ins.control >> _WAIT_SHIFT) >> sb & 1)


def first_wait(instructions: Sequence[Instruction], body: Sequence[int], at: int) -> tuple[int, int] | None:
    """The first instruction that waits on the scoreboard ``body[at]`` sets, walking the loop ``body``
    (instruction indices in program order) from it, through the back edge, for one pass: (its index, the
    MMAs issued on the way). None where it sets no scoreboard or nothing in the pass waits on it."""
    sb = write_scoreboard(instructions[body[at]])
    if sb is None:
        return None
    n, mmas = len(body), 0
    for step in range(1, n + 1):
        i = body[(at + step) % n]
        if waits_on(instructions[i], sb):
            return i, mmas
        mmas += instructions[i].category == "mma"
    return None


def waited_before_mma(instructions: Sequence[Instruction], body: Sequence[int], at: int) -> bool | None:
    """Whether the first wait on the scoreboard ``body[at]`` sets comes before an MMA issues (``first_wait``);
    None where there is no such wait."""
    got = first_wait(instructions, body, at)
    return None if got is None else got[1] == 0
