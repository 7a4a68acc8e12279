"""Opcode -> category, from the data tables; unknown opcodes become ``other`` and are reported."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Iterable

from bsprof.analyzers.sass.opcodes import arch_family, table
from bsprof.analyzers.sass.parse import Instruction

OTHER = "other"
NEVER = "nop"
_NEVER_GUARDS = frozenset({"@!PT", "@!UPT"})


@functools.lru_cache(maxsize=8192)
def classify_opcode(opcode: str, family: str) -> str:
    """Longest dotted prefix that the family's table knows: ``IMAD.MOV.U32`` before ``IMAD``."""
    tab = table(family)
    parts = opcode.split(".")
    for n in range(len(parts), 0, -1):
        cat = tab.get(".".join(parts[:n]))
        if cat is not None:
            return cat
    return OTHER


def classify(instructions: Iterable[Instruction], arch: str | None) -> list[str]:
    """Set ``category`` on every instruction; return the sorted unknown base opcodes."""
    family = arch_family(arch)
    unknown: set[str] = set()
    for ins in instructions:
        cat = classify_opcode(ins.opcode, family)
        if cat == OTHER:
            unknown.add(ins.base)
        # guarded by the always-false predicate, it never executes: ptxas pads schedules with
        # `@!PT LDS RZ, [RZ]` (before a barrier or a wgmma fence, in cp.async pipelines and CUTLASS
        # alike) and `@!UPT UIADD3 URZ, ...`; counted as shared loads or uniform math they would
        # inflate those categories of a loop by work it never does
        ins.category = NEVER if ins.guard in _NEVER_GUARDS else cat
    return sorted(unknown)


def count_categories(instructions: Iterable[Instruction]) -> dict[str, int]:
    return dict(Counter(ins.category for ins in instructions))


def is_mma(ins: Instruction) -> bool:
    return ins.category == "mma"
