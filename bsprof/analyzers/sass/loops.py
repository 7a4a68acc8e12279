"""Dominators, natural loops, their nesting, and what each MMA loop is: K-loop, tile loop, or neither.

A back edge is t -> h where h dominates t; its natural loop is h plus everything that reaches t
without passing h. Loops sharing a header are merged. A cycle entered at more than one block (no
header dominates it) is no natural loop; :func:`irreducible_loops` finds those too, marked
``irreducible``.

Kinds (:func:`classify_loops`): the **K-loop** is the innermost loop that issues MMAs and holds no
epilogue store; with ncu counts, the one whose MMAs execute the most (its hot path, not the natural
loop's rare blocks, must be store-free). A loop around it is the **tile loop** (it may issue a peeled
first k-block of MMAs and hold the epilogue); an MMA loop whose body stores the output is a tile loop
too, with K unrolled into it, unless that loop is **flattened** (Triton's persistent loop: one
k-block a pass, the epilogue in blocks a pass can go around), which makes it the K-loop with no tile
loop of its own, or unless it **carries its sums** from one pass to the next (an MMA adds into
registers nothing else in the loop touches: the loop runs over the reduction dimension, so what it
stores each pass is not those sums' epilogue). No K-loop but MMAs: **K fully unrolled**.

A **promotion loop** issues no MMA but runs beside the K-loop in other warps: each pass waits on an
mbarrier, reads the MMA's partial sums out of tensor memory (``LDTM``), adds them into registers
with FP math, and stores no output (nor anything back into tensor memory). Blockwise-scaled GEMMs on sm_100 (CUTLASS's CuTe DSL
``blockwise_gemm`` example) promote every K block this way, so the per-K-block work is the K-loop
plus this loop, in different warps. An epilogue also reads tensor memory but stores the output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bsprof.analyzers.sass.cfg import CFG
from bsprof.analyzers.sass.parse import Function, Instruction


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
    # "kloop" | "promote" | "tile" | "outer" (encloses MMA loops, issues none) | "loop" -- see classify_loops
    kind: str = "loop"
    # the K-loop: the one a budget, --mma-detail and a comparison start from (at most one per function)
    primary: bool = False
    # epilogue stores in the body classify_loops looked at (own blocks; with counts, the hot ones)
    stores: int = 0
    # a cycle entered at more than one block (no header dominates it); ``header`` is its first entry
    irreducible: bool = False
    # instruction indices of the own blocks every pass runs (they dominate each back edge); None
    # for an irreducible loop, whose blocks no header dominates
    every_pass: frozenset[int] | None = None
    # output stores a pass can go around: a K-loop flattened with its tile loop runs the epilogue
    # only on a tile's last k-block (set by classify_loops; 0 otherwise)
    flattened: int = 0
    # output stores every pass of a K-loop that carries its sums across passes issues beside them:
    # another product's partial results, not its epilogue (set by classify_loops; 0 otherwise)
    pass_stores: int = 0

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


def _sccs(nodes: set[int], succs) -> list[list[int]]:
    """Strongly connected components of the subgraph on ``nodes`` (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on: set[int] = set()
    out: list[list[int]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(succs(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in nodes:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succs(w))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def irreducible_loops(cfg: CFG) -> list[tuple[int, frozenset[int]]]:
    """Cycles entered at more than one block, which natural loops miss (cuBLAS enters its small-M
    K-loops both at the top and, from an mbarrier retry path, in the middle). Steensgaard's nesting:
    a strongly connected component is a loop, its entries are the blocks with a predecessor outside
    it; drop the edges from inside into the entries and look again inside. Returns (first entry, body)
    of the components with two or more entries."""
    out: list[tuple[int, frozenset[int]]] = []
    removed: set[tuple[int, int]] = set()
    todo = [set(range(len(cfg.blocks)))]
    while todo:
        nodes = todo.pop()

        def succs(b: int) -> list[int]:
            return [s for s in cfg.blocks[b].succs if (b, s) not in removed]

        for comp in _sccs(nodes, succs):
            body = set(comp)
            if len(comp) == 1 and comp[0] not in succs(comp[0]):
                continue
            entries = sorted(
                (b for b in body if any(p not in body for p in cfg.blocks[b].preds)), key=lambda b: cfg.blocks[b].start
            )
            if len(entries) > 1:
                out.append((entries[0], frozenset(body)))
            heads = entries or [min(body, key=lambda b: cfg.blocks[b].start)]
            removed.update((p, h) for h in heads for p in cfg.blocks[h].preds if p in body)
            todo.append(body)
    return out


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
    found = [(h, frozenset(body), False) for h, body in bodies.items()]
    natural = {b for _, b, _ in found}
    found += [(h, b, True) for h, b in irreducible_loops(cfg) if b not in natural]
    # outermost first: larger bodies first, ties by position
    found.sort(key=lambda t: (-len(t[1]), cfg.blocks[t[0]].start))
    loops = [Loop(id=i, header=h, blocks=body, irreducible=irr) for i, (h, body, irr) in enumerate(found)]
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
        if not lp.irreducible:
            latches = [b for b in lp.blocks if lp.header in cfg.blocks[b].succs]
            always = [b for b in lp.blocks if all(_dominates(idom, b, t) for t in latches)]
            lp.every_pass = frozenset(i for b in always for i in range(cfg.blocks[b].start, cfg.blocks[b].end))
    classify_loops(fn, loops)
    return loops


# what writes a GEMM's output: an epilogue sits in the tile loop, never in the K-loop
_STORE_BASES = frozenset({"STG", "ST", "STSM", "UTMASTG", "UTMAREDG", "UBLKST", "RED", "REDG", "ATOMG"})

KLOOP, TILE, OUTER, PLAIN, PROMOTE = "kloop", "tile", "outer", "loop", "promote"
# how each kind is named in tables and reports
LOOP_TAGS = {KLOOP: "K-loop", PROMOTE: "promotion loop", TILE: "tile loop", OUTER: "outer loop", PLAIN: "loop"}
# function-level answer: a K-loop, K fully unrolled (MMAs only in a tile loop or in no loop), no MMAs
HAS_KLOOP, UNROLLED, NO_MMA = "kloop", "unrolled", "no_mma"


def is_output_store(ins) -> bool:
    return ins.base in _STORE_BASES or (ins.base == "UBLKCP" and "S2G" in ins.modifiers)


def _output_stores(fn: Function, lp: Loop, body: list[int]) -> list[int]:
    """The output stores among ``body`` (the loop's own instructions, or their hot part). STSM writes
    shared memory only: it stages an epilogue for the TMA or SIMT store that follows it, but Triton's
    ``tl.dot_scaled`` on sm_100 also stages the scale factors it loaded with LDG into shared memory
    with STSM inside the K-loop (UTCCP then copies them to tensor memory). So an STSM counts only
    where the loop's own blocks also write global memory (hot or not: one elected thread issues the
    TMA store, so with counts it is rarely hot)."""
    hits = [i for i in body if is_output_store(fn.instructions[i])]
    if hits and not any(is_output_store(ins := fn.instructions[i]) and ins.base != "STSM" for i in lp.own_instructions):
        return []
    return hits


# what a promotion pass does: the epilogue's smem staging (STS) rules a loop out as much as a store.
# So does a write back into tensor memory (STTM): a promotion adds the partial sums into registers,
# while a loop that stores into tensor memory rewrites an MMA's operand in place (an attention's
# softmax writes P there for the P.V MMA, its correction warps rescale O there), so it is part of
# the MMAs' data path, not per-K-block work beside them
_PROMOTE_NOT = _STORE_BASES | {"STS", "STTM"}


def is_promotion_loop(fn: Function, lp: Loop) -> bool:
    """No MMA of its own, nested in a per-tile loop, and in its own blocks: an mbarrier wait, a
    tensor-memory load, FP adds, no output store or smem staging (see the module docstring)."""
    if lp.mma or lp.parent is None:
        return False
    seen = {"wait": False, "ldtm": False, "fp": False}
    for i in lp.own_instructions:
        ins = fn.instructions[i]
        if ins.base in _PROMOTE_NOT or is_output_store(ins):
            return False
        if ins.opcode.startswith("SYNCS.PHASECHK"):
            seen["wait"] = True
        elif ins.base == "LDTM":
            seen["ldtm"] = True
        elif ins.base.startswith(("FFMA", "FADD")):  # FFMA2 / FADD2: sm_100's packed pairs
            seen["fp"] = True
    return all(seen.values())


def _ancestors(loops: list[Loop], lp: Loop) -> list[Loop]:
    out, p = [], lp.parent
    while p is not None:
        out.append(loops[p])
        p = loops[p].parent
    return out


# a loop whose nested MMA loops run at least this many times its own MMAs holds peeled k-blocks (a
# tile's first and last, once a tile), not a K-loop's body: its once-a-tile epilogue counts in full
PEELED_MMA_RATIO = 4.0


def _mma_runs(fn: Function, lp: Loop, executed: list[int]) -> int:
    return sum(executed[i] for i in lp.own_instructions if fn.instructions[i].category == "mma")


def _body(fn: Function, lp: Loop, executed: list[int] | None, loops: list[Loop] | None = None) -> list[int]:
    """The instructions that decide a loop's kind: its own blocks; with counts, only those executed
    at least half as often as its busiest MMA (a shared header can pull the tile loop's rare
    epilogue into the K-loop's natural loop; cuBLAS does this). Not where the loop's own MMAs are a
    tile's peeled k-blocks around a K-loop that runs them far more often (cuBLAS's tf32 kernel:
    4,096 runs of each peeled HGMMA against 516,096 in its K-loop): there the TMA store, issued by
    one warp of eight, runs an eighth as often as those MMAs and is still the tile's epilogue."""
    own = lp.own_instructions
    if executed is None:
        return own
    peak = max((executed[i] for i in own if fn.instructions[i].category == "mma"), default=0)
    if peak and loops is not None:
        mine = _mma_runs(fn, lp, executed)
        inner = max(
            (_mma_runs(fn, c, executed) for c in loops if lp.id in {a.id for a in _ancestors(loops, c)}), default=0
        )
        if inner >= PEELED_MMA_RATIO * mine:
            return own
    return own if peak == 0 else [i for i in own if executed[i] >= 0.5 * peak]


def _flattened(lp: Loop, stores: list[int]) -> bool:
    """A K-loop flattened with its tile loop: Triton's persistent matmul (``tl.range(..., flatten=True)``,
    and what its pipeliner makes of a tile loop around a K-loop) is one loop that runs one k-block a
    pass and, on a tile's last k-block only, branches into the epilogue. Its stores sit in blocks a
    pass can go around (none of them dominates the back edge), where a tile loop with K unrolled into
    it (DeepGEMM at K=1024) stores on every pass. Only a loop with no nested MMA loop qualifies (a
    tile loop around a K-loop may skip its epilogue for a partial tile), and only without counts
    (with them the hot-block rule already leaves the once-a-tile epilogue out)."""
    return lp.every_pass is not None and lp.mma == lp.own_mma and not any(i in lp.every_pass for i in stores)


_REG = re.compile(r"\bR(\d+)\b")
_SHAPE = re.compile(r"(\d+)x(\d+)x\d+")
_ACC_TYPES = ("F32", "S32", "F16")


def accumulator_registers(ins: Instruction) -> range | None:
    """The registers an MMA adds into in place (``HMMA.16816.F32.BF16 R4, R168, R172, R4``,
    ``HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], R24, !UP1``), or None: it starts a new sum, or its
    accumulator is no register (tcgen05 keeps it in tensor memory). A warpgroup MMA's MxN tile
    spreads over 128 threads, a warp MMA's m16n8 over 32; an F16 accumulator packs two a register."""
    ops = [o.strip() for o in ins.operands.split(",")]
    m = re.match(r"R(\d+)$", ops[0]) if ops else None
    if m is None or ins.category != "mma" or starts_accumulator(ins):
        return None
    base = int(m.group(1))
    if not any(re.match(rf"R{base}\b", o) for o in ops[1:]):
        return None
    shape = next((sm for x in ins.modifiers if (sm := _SHAPE.fullmatch(x))), None)
    count = int(shape.group(1)) * int(shape.group(2)) // 128 if shape else 4
    if next((x for x in ins.modifiers if x in _ACC_TYPES), "F32") == "F16":
        count //= 2
    return range(base, base + max(1, count))


def _named_registers(ins: Instruction) -> set[int]:
    """Every register an instruction names, with the registers after it that a wide access covers
    (``.128`` four, ``.64`` and ``CS2R`` two, ``LDSM .4`` four; an MMA's fragments up to four): what
    it may read or write, erring wide."""
    mods = ins.modifiers
    if ins.category == "mma" or "128" in mods or (ins.base == "LDSM" and "4" in mods):
        width = 4
    elif "64" in mods or ins.base == "CS2R" or (ins.base == "LDSM" and "2" in mods):
        width = 2
    else:
        width = 1
    return {r + k for r in map(int, _REG.findall(ins.operands)) for k in range(width)}


def carries_sums(fn: Function, lp: Loop) -> bool:
    """Some MMA of the loop adds into registers that nothing else in the loop names, and no MMA of
    it restarts: the sums go round the back edge into the next pass, so the loop runs over their
    reduction dimension. A tile loop with K unrolled restarts its sums every pass (a first MMA with
    ``RZ`` / ``!UPT``, or zeroing); so does the attention forward's Q.K^T, while the backward's dK
    and dV add up over the Q blocks, beside the dQ partial sums it adds into global memory each pass."""
    body = [fn.instructions[i] for i in lp.instructions]
    accs = [accumulator_registers(ins) for ins in body]
    named = [_named_registers(ins) for ins in body]
    for acc in {a for a in accs if a is not None}:
        regs = set(acc)
        # anything but an MMA adding into the same registers resets, reads or reuses them in a pass
        if all(a == acc or not (n & regs) for a, n in zip(accs, named)):
            return True
    return False


def starts_accumulator(ins: Instruction) -> bool:
    """An MMA that does not read its accumulator: it starts a new sum. The accumulate flag is a
    predicate operand (wgmma's scale-d, tcgen05's enable-input-d) and the constant ``!UPT`` means
    never; wgmma and the warp-level MMAs also write it as ``RZ`` in the accumulator-input slot
    (``QGMMA.64x128x32.F32.E4M3.E5M2 R88, gdesc[UR20], RZ, !UPT``)."""
    ops = [o.strip() for o in ins.operands.split(",")]
    return "!UPT" in ops or "RZ" in ops[1:]


def _starts_tiles(fn: Function, lp: Loop, loops: list[Loop]) -> bool:
    """A store-free MMA loop around another is the tile loop, not a second K-loop, when one of its
    own MMAs starts a new accumulator and none of the inner loop's does: a K-loop pass adds into the
    sums of the k-blocks before it, while a tile loop's peeled first k-block overwrites them. On
    sm_100 the MMA warp's tile loop stores nothing (the epilogue runs in other warps), so the store
    rule alone reads it as a K-loop around the K-loop (CUTLASS C++'s block-scaled kernels peel the
    first k-block, its first UTCOMMA with ``!UPT``, and the K-loop's take a runtime predicate).
    Where the inner loop also starts sums every pass (cuBLAS's FP8 kernels promote each k-block's
    partial sums, ``QGMMA ... R24, !UPT`` in the K-loop and in the copy of its body around it), the
    flag tells nothing and the outer loop stays a K-loop."""

    def fresh(x: Loop) -> bool:
        return any(
            fn.instructions[i].category == "mma" and starts_accumulator(fn.instructions[i]) for i in x.own_instructions
        )

    if not fresh(lp):
        return False
    return any(
        c.own_mma and not c.stores and not fresh(c) and lp.id in {a.id for a in _ancestors(loops, c)} for c in loops
    )


def classify_loops(fn: Function, loops: list[Loop], executed: list[int] | None = None) -> str:
    """Set ``kind`` / ``is_kloop`` / ``primary`` / ``stores`` on every loop; return the function's
    answer: ``"kloop"``, ``"unrolled"`` (MMAs but no K-loop) or ``"no_mma"``."""
    for lp in loops:
        lp.kind, lp.is_kloop, lp.primary, lp.flattened = PLAIN, False, False, 0
        lp.pass_stores = 0
        stores = _output_stores(fn, lp, _body(fn, lp, executed, loops)) if lp.own_mma else []
        if stores and executed is None and _flattened(lp, stores):
            lp.flattened, stores = len(stores), []
        elif stores and lp.mma == lp.own_mma and carries_sums(fn, lp):
            # the sums this loop carries are not finished until it ends, so what it stores every
            # pass is some other result (FlashAttention-2's backward adds dQ into a workspace with
            # REDG while dK and dV add up in registers); only an innermost MMA loop qualifies: a
            # tile loop around a K-loop stores the sums the K-loop carried
            lp.pass_stores, stores = len(stores), []
        lp.stores = len(stores)
    cands = [lp for lp in loops if lp.own_mma and not lp.stores]
    cands = [lp for lp in cands if not _starts_tiles(fn, lp, loops)]
    ran = (
        (lambda lp: sum(executed[i] for i in lp.own_instructions if fn.instructions[i].category == "mma"))
        if executed is not None
        else (lambda lp: 0)
    )
    primary = None
    if cands and executed is not None and any(ran(lp) for lp in cands):
        primary = max(cands, key=lambda lp: (ran(lp), lp.depth, lp.own_mma))
    elif cands:
        nested = {a.id for c in cands for a in _ancestors(loops, c)}
        inner = [lp for lp in cands if lp.id not in nested]
        primary = max(inner, key=lambda lp: (lp.own_mma, lp.depth, -lp.size))
    around = _ancestors(loops, primary) if primary is not None else []
    for lp in cands:
        lp.kind = KLOOP
    # the nearest loop around the K-loop that is not itself a store-free MMA loop is the tile loop (a
    # store-free MMA loop around it is another K-loop: cuBLAS nests a copy of its body in the K-loop)
    tile_seen = False
    for lp in around:
        if lp.kind == KLOOP:
            continue
        lp.kind = TILE if not tile_seen or lp.own_mma else OUTER
        tile_seen = True
    for lp in loops:
        if lp.own_mma and lp.stores:
            lp.kind = TILE
        elif lp.kind == PLAIN and lp.mma:
            lp.kind = OUTER
    if primary is not None:
        primary.kind, primary.primary = KLOOP, True
    for lp in loops:
        lp.is_kloop = lp.kind == KLOOP
        if lp.kind == PLAIN and primary is not None and is_promotion_loop(fn, lp):
            lp.kind = PROMOTE
    if primary is not None:
        return HAS_KLOOP
    return UNROLLED if any(ins.category == "mma" for ins in fn.instructions) else NO_MMA
