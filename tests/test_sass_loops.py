"""Dominators and natural loops on random control-flow graphs, checked against the textbook
set-based definitions (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bsprof.analyzers.sass import analyze_sass_text
from bsprof.analyzers.sass.loops import dominators


@st.composite
def listings(draw):
    n = draw(st.integers(2, 14))
    lines, pc = [], 0
    for b in range(n):
        lines.append(f".L_x_{b}:")
        for _ in range(draw(st.integers(0, 2))):
            op = draw(
                st.sampled_from(
                    [
                        "IADD3 R1, R1, 0x1, RZ",
                        "UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], idesc[UR9], UPT",
                        "SYNCS.ARRIVE.TRANS64 RZ, [UR4], RZ",
                        "STG.E desc[UR4][R2.64], R4",
                    ]
                )
            )
            lines.append(f"/*{pc:04x}*/ {op} ;")
            pc += 16
        kind = draw(st.sampled_from(["fall", "bra", "cond", "uniform", "exit"]))
        t = draw(st.integers(0, n - 1))
        term = {
            "fall": "NOP",
            "bra": f"BRA `(.L_x_{t})",
            "cond": f"@!P0 BRA `(.L_x_{t})",
            "uniform": f"BRA.U UP1, `(.L_x_{t})",
            "exit": "@P1 EXIT",
        }[kind]
        lines.append(f"/*{pc:04x}*/ {term} ;")
        pc += 16
    lines.append(f"/*{pc:04x}*/ EXIT ;")
    return "\n".join(lines)


def _set_dominators(cfg, reachable):
    dom = {b: set(reachable) for b in reachable}
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in reachable:
            if b == 0:
                continue
            preds = [dom[p] for p in cfg.blocks[b].preds if p in reachable]
            new = {b} | (set.intersection(*preds) if preds else set())
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


@settings(max_examples=200, deadline=None)
@given(listings())
def test_dominators_and_loops_match_the_definitions(text):
    (fa,) = analyze_sass_text(text, arch="sm_100a")
    cfg = fa.cfg
    reach, stack = {0}, [0]
    while stack:
        for s in cfg.blocks[stack.pop()].succs:
            if s not in reach:
                reach.add(s)
                stack.append(s)
    dom = _set_dominators(cfg, reach)
    idom = dominators(fa.function, cfg)
    for b in reach:
        chain, x = {b}, b
        while idom[x] != -1:
            x = idom[x]
            chain.add(x)
        assert chain == dom[b], (b, chain, dom[b])
    # every natural loop: its header dominates its body, and a back edge closes it
    headers = {h for b in reach for h in cfg.blocks[b].succs if h in dom[b]}
    assert {lp.header for lp in fa.loops if lp.header in reach and not lp.irreducible} == headers
    for lp in fa.loops:
        if lp.irreducible:
            # a cycle with two or more entries: strongly connected, no entry dominates the rest
            entries = [b for b in lp.blocks if any(p not in lp.blocks for p in cfg.blocks[b].preds)]
            assert len(entries) >= 2 and lp.header in entries
            assert all(_reaches(cfg, a, b, lp.blocks) for a in lp.blocks for b in lp.blocks)
            continue
        if lp.header not in reach:
            continue
        assert all(lp.header in dom[b] for b in lp.blocks)
        assert any(lp.header in cfg.blocks[b].succs for b in lp.blocks)
        if lp.parent is not None:
            assert lp.blocks < fa.loops[lp.parent].blocks
        assert lp.mma == sum(1 for i in lp.instructions if fa.instructions[i].category == "mma")
        own_stores = sum(1 for i in lp.own_instructions if fa.instructions[i].base == "STG")
        # a K-loop issues MMAs and stores no output; a loop whose own body stores output is a tile loop,
        # unless it is flattened: no nested MMA loop, and every store block can be gone around on the
        # way to some back edge (it fails to dominate a latch)
        assert lp.is_kloop == (lp.kind == "kloop")
        latches = [b for b in lp.blocks if lp.header in cfg.blocks[b].succs]
        store_blocks = {cfg.block_of[i] for i in lp.own_instructions if fa.instructions[i].base == "STG"}
        flat = (
            lp.mma == lp.own_mma
            and bool(store_blocks)
            and all(any(sb not in dom[t] for t in latches) for sb in store_blocks)
        )
        assert bool(lp.flattened) == (flat and lp.own_mma > 0)
        if lp.is_kloop:
            assert lp.own_mma > 0 and (own_stores == 0 or lp.flattened == own_stores)
        if lp.own_mma and own_stores and not flat:
            assert lp.kind == "tile"
    _check_kloop_answer(fa)


def _reaches(cfg, a, b, within) -> bool:
    seen, stack = {a}, [a]
    while stack:
        for s in cfg.blocks[stack.pop()].succs:
            if s == b:
                return True
            if s in within and s not in seen:
                seen.add(s)
                stack.append(s)
    return False


def _check_kloop_answer(fa):
    """One K-loop proper: the innermost store-free MMA loop; the loop around it is the tile loop;
    MMAs without a K-loop are 'K unrolled'."""
    primary = [lp for lp in fa.loops if lp.primary]
    assert len(primary) <= 1
    if fa.mma_count == 0:
        assert fa.kloop_status == "no_mma" and not primary
        return
    store_free = [lp for lp in fa.loops if lp.own_mma and lp.kind == "kloop"]
    if not primary:
        assert fa.kloop_status == "unrolled" and not store_free
        return
    (k,) = primary
    assert fa.kloop_status == "kloop" and fa.kloop is k and fa.kloops[0] is k
    assert not any(lp is not k and k.blocks > lp.blocks for lp in store_free)
    p = k.parent
    while p is not None and fa.loops[p].kind == "kloop":
        p = fa.loops[p].parent
    if p is not None:
        assert fa.loops[p].kind == "tile" and fa.tile_loop is fa.loops[p]
