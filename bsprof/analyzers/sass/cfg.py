"""Basic blocks and the control-flow graph of one function, from branch targets.

A branch is conditional when it has a guard other than ``@PT`` *or* a predicate operand before its
target: sm_100 writes uniform conditional branches as ``BRA.U UP4, `(.L_x_0)`` (no ``@``), and ncu's
text writes ``BRA !P0, 0x7f..``. Missing the second form would turn loops into straight lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bsprof.analyzers.sass.parse import Function, Instruction

_BRANCHES = {"BRA", "JMP"}
_INDIRECT = {"BRX", "JMX"}
_RETURNS = {"EXIT", "RET", "KILL"}
_TRAPS = {"BPT"}
_CONTROL = _BRANCHES | _INDIRECT | _RETURNS | _TRAPS
_LABEL_TARGET_RE = re.compile(r"`\(([^)]+)\)")
_HEX_TARGET_RE = re.compile(r"(?<![\w\[+-])(0x[0-9a-fA-F]+)\s*$")
_PRED_OPERAND_RE = re.compile(r"^!?U?P(?:[0-7]|T)$")


@dataclass
class Block:
    id: int
    start: int  # first instruction index
    end: int  # one past the last
    succs: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return self.end - self.start


@dataclass
class CFG:
    blocks: list[Block]
    # instruction index -> block id
    block_of: list[int]
    # branches whose target we could not resolve (indirect, or outside the function)
    unresolved: list[int] = field(default_factory=list)


def _branch_targets(fn: Function, ins: Instruction, pc_index: dict[int, int]) -> list[int] | None:
    """Instruction indices this branch may jump to; None when the target is not resolvable."""
    labels = _LABEL_TARGET_RE.findall(ins.operands)
    if labels:
        out = [fn.labels[lab] for lab in labels if lab in fn.labels]
        return out if len(out) == len(labels) else None
    hm = _HEX_TARGET_RE.search(ins.operands)
    if hm is not None:
        target = int(hm.group(1), 16)
        idx = pc_index.get(target)
        if idx is None and fn.pc_base:
            idx = pc_index.get(target - fn.pc_base)
        return None if idx is None else [idx]
    return None


def _is_conditional(ins: Instruction) -> bool:
    if ins.guard is not None and ins.guard not in ("@PT",):
        return True
    # predicate (or divergence-mask) operands before the target make it conditional
    ops = [o.strip() for o in ins.operands.split(",")]
    if len(ops) > 1:
        first = ops[0]
        if _PRED_OPERAND_RE.match(first) and first not in ("PT", "UPT"):
            return True
        if first.startswith(("UR", "R")) and not first.startswith("`"):
            return True  # BRA.DIV URx, target and friends
    return False


def build_cfg(fn: Function) -> CFG:
    ins_list = fn.instructions
    n = len(ins_list)
    if n == 0:
        return CFG(blocks=[], block_of=[])
    pc_index = {ins.pc: ins.index for ins in ins_list if ins.pc is not None}
    leaders = {0}
    leaders.update(i for i in fn.labels.values() if i < n)
    # per-instruction control effect: (targets | None, falls_through)
    effects: dict[int, tuple[list[int], bool]] = {}
    unresolved: list[int] = []
    for ins in [ins for ins in ins_list if ins.base in _CONTROL]:  # one set test for the many others
        base = ins.base
        if base in _BRANCHES:
            targets = _branch_targets(fn, ins, pc_index)
            cond = _is_conditional(ins)
            if targets is None:
                unresolved.append(ins.index)
                targets = []
            effects[ins.index] = (targets, cond)
        elif base in _INDIRECT:
            targets = _branch_targets(fn, ins, pc_index)
            if targets is None:
                unresolved.append(ins.index)
                targets = []
            effects[ins.index] = (targets, ins.guard is not None)
        elif base in _RETURNS or base in _TRAPS:
            effects[ins.index] = ([], ins.guard is not None and ins.guard != "@PT")
        else:
            continue
        leaders.update(t for t in effects[ins.index][0])
        if ins.index + 1 < n:
            leaders.add(ins.index + 1)
    starts = sorted(leaders)
    blocks: list[Block] = []
    block_of = [0] * n
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else n
        blocks.append(Block(id=b, start=s, end=e))
        block_of[s:e] = [b] * (e - s)
    for blk in blocks:
        last = blk.end - 1
        eff = effects.get(last)
        succ: list[int] = []
        if eff is None:
            if blk.end < n:
                succ.append(block_of[blk.end])
        else:
            targets, falls = eff
            succ.extend(block_of[t] for t in targets)
            if falls and blk.end < n:
                succ.append(block_of[blk.end])
        seen: set[int] = set()
        for s in succ:
            if s not in seen:
                seen.add(s)
                blk.succs.append(s)
                blocks[s].preds.append(blk.id)
    return CFG(blocks=blocks, block_of=block_of, unresolved=unresolved)
