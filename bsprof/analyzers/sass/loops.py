"""Dominators, natural loops, their nesting, and the K-loops (loops whose own blocks issue MMAs).

A back edge is t -> h where h dominates t; its natural loop is h plus everything that reaches t
without passing h. Loops sharing a header are merged. Irreducible cycles (no dominating header)
are not loops here, which is the textbook definition and what compilers emit for counted loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bsprof.analyzers.sass.cfg import CFG
from bsprof.analyzers.sass.parse import Function


@dataclass
class Loop:
    id: int
    header: int  # block id
    blocks: frozenset[int]
    depth: int = 1
    parent: int | None = None
    children: list[int] = field(default_factory=list)
    # instruction indices in the body, ascending
    instructions: list[int] = field(default_factory=list)
    mma: int = 0
    # MMAs issued by this loop's own blocks, not by a nested loop
    own_mma: int = 0
    # body minus the nested loops that issue MMAs (what --mma-detail walks)
    own_instructions: list[int] = field(default_factory=list)
    is_kloop: bool = False
    # instruction index where the header block starts (the loop's entry)
    header_start: int | None = None

    @property
    def size(self) -> int:
        return len(self.instructions)


def _roots(fn: Function, cfg: CFG) -> list[int]:
    """Entry block plus subroutine entries (CALL targets live in the same text section)."""
    roots = [0]
    for ins in fn.instructions:
        if ins.base == "CALL":
            for lab in ins.operands.replace("`(", " ").replace(")", " ").split():
                idx = fn.labels.get(lab)
                if idx is not None:
                    roots.append(cfg.block_of[idx])
    return roots


def dominators(fn: Function, cfg: CFG) -> list[int]:
    """Immediate dominator of each block (Cooper-Harvey-Kennedy); a virtual root (-1) feeds the entry,
    subroutine entries and any block nothing else reaches, so every block gets one."""
    nb = len(cfg.blocks)
    if nb == 0:
        return []
    root = nb  # virtual
    extra_roots = set(_roots(fn, cfg))
    succs = [blk.succs for blk in cfg.blocks]

    order: list[int] = []
    visited = [False] * nb
    # component of each block: 0 = reachable from the real entries; dead code gets its own, and
    # its edges into live code are ignored (they would make the dead block an extra entry)
    comp = [-1] * nb
    n_comp = 0

    def dfs_from(starts: list[int]) -> None:
        for s in starts:
            if visited[s]:
                continue
            visited[s] = True
            comp[s] = n_comp
            stack = [(s, 0)]
            while stack:
                node, i = stack[-1]
                if i < len(succs[node]):
                    stack[-1] = (node, i + 1)
                    nxt = succs[node][i]
                    if not visited[nxt]:
                        visited[nxt] = True
                        comp[nxt] = n_comp
                        stack.append((nxt, 0))
                else:
                    stack.pop()
                    order.append(node)

    dfs_from(sorted(extra_roots))
    for b in range(nb):  # unreachable pieces become roots of their own
        if not visited[b]:
            n_comp += 1
            extra_roots.add(b)
            dfs_from([b])
    rpo = list(reversed(order))
    rpo_num = {b: i + 1 for i, b in enumerate(rpo)}
    rpo_num[root] = 0
    preds: list[list[int]] = [[p for p in blk.preds if comp[p] == comp[blk.id]] for blk in cfg.blocks]
    for r in extra_roots:
        preds[r] = preds[r] + [root]
    idom: dict[int, int] = {root: root}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while rpo_num[a] > rpo_num[b]:
                a = idom[a]
            while rpo_num[b] > rpo_num[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo:
            new = None
            for p in preds[b]:
                if p in idom:
                    new = p if new is None else intersect(p, new)
            if new is not None and idom.get(b) != new:
                idom[b] = new
                changed = True
    return [(-1 if idom[b] == root else idom[b]) for b in range(nb)]


def _dominates(idom: list[int], a: int, b: int) -> bool:
    while b != -1:
        if a == b:
            return True
        nxt = idom[b]
        if nxt == b:
            return False
        b = nxt
    return False


def find_loops(fn: Function, cfg: CFG, idom: list[int] | None = None) -> list[Loop]:
    """Natural loops, outermost first, with depth/parent/children and MMA counts filled in."""
    if not cfg.blocks:
        return []
    if idom is None:
        idom = dominators(fn, cfg)
    bodies: dict[int, set[int]] = {}
    for blk in cfg.blocks:
        for h in blk.succs:
            if _dominates(idom, h, blk.id):
                body = bodies.setdefault(h, {h})
                stack = [blk.id]
                while stack:
                    x = stack.pop()
                    if x in body or not _dominates(idom, h, x):
                        continue
                    body.add(x)
                    stack.extend(cfg.blocks[x].preds)
    # outermost first: larger bodies first, ties by position
    items = sorted(bodies.items(), key=lambda kv: (-len(kv[1]), cfg.blocks[kv[0]].start))
    loops = [Loop(id=i, header=h, blocks=frozenset(body)) for i, (h, body) in enumerate(items)]
    for lp in loops:
        # the smallest enclosing loop is the parent
        best = None
        for other in loops:
            if other is lp or lp.header not in other.blocks or not lp.blocks <= other.blocks:
                continue
            if best is None or len(other.blocks) < len(best.blocks):
                best = other
        if best is not None:
            lp.parent = best.id
            best.children.append(lp.id)
    for lp in loops:
        d, p = 1, lp.parent
        while p is not None:
            d += 1
            p = loops[p].parent
        lp.depth = d
        idx: list[int] = []
        for b in sorted(lp.blocks, key=lambda b: cfg.blocks[b].start):
            blk = cfg.blocks[b]
            idx.extend(range(blk.start, blk.end))
        idx.sort()
        lp.instructions = idx
        lp.mma = sum(1 for i in idx if fn.instructions[i].category == "mma")
    for lp in loops:
        lp.header_start = cfg.blocks[lp.header].start
        nested = set()
        for c in lp.children:
            if loops[c].mma > 0:
                nested.update(loops[c].instructions)
        lp.own_instructions = [i for i in lp.instructions if i not in nested]
        lp.own_mma = sum(1 for i in lp.own_instructions if fn.instructions[i].category == "mma")
        # a K-loop issues MMAs itself; a loop whose MMAs all sit in nested loops (a tile loop) is not one
        lp.is_kloop = lp.own_mma > 0
    return loops
