"""The optimization checklist kernel authors look for, each answered from the SASS with evidence.

Every check is a predicate over opcodes/modifiers/loop structure; ``present`` is ``None`` only
when the SASS cannot say (e.g. pipeline depth without mbarrier initialisations in this function).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources

from bsprof.analyzers.sass.loops import Loop
from bsprof.analyzers.sass.parse import Function, Instruction

MAX_EVIDENCE = 6
# TMA ops carry their L2 cache policy in a desc[URn] operand; desc[URZ] is "no policy"
_POLICY_RE = re.compile(r"desc\[UR(?!Z)\w+")
_DIVMOD_MUL = ("UIMAD.WIDE.U32", "IMAD.WIDE.U32", "IMAD.HI.U32", "UIMAD.HI.U32")

FEATURE_ORDER = (
    "tma_load",
    "tma_multicast",
    "tma_store_epilogue",
    "simt_global_stores",
    "mma_2cta",
    "block_scaled_mma",
    "tmem_copy",
    "multi_stage_pipeline",
    "tma_cache_hint",
    "persistent_tile_loop",
    "register_spills",
    "wgmma_serialized",
    "mma_drained",
)

DESCRIPTIONS = {
    "tma_load": "TMA loads (UTMALDG / UBLKCP)",
    "tma_multicast": "TMA multicast loads across the cluster",
    "tma_store_epilogue": "TMA-store epilogue (UTMASTG / UTMAREDG)",
    "simt_global_stores": "SIMT global stores (STG) — the slow epilogue path",
    "mma_2cta": "2-CTA MMA (.2CTA)",
    "block_scaled_mma": "block-scaled MMA (UTCOMMA / UTCMXQMMA / .SF / scale-factor TMEM operand)",
    "tmem_copy": "shared->TMEM copies (UTCCP, scale factors)",
    "multi_stage_pipeline": "multi-stage mbarrier pipeline",
    "tma_cache_hint": "cache-policy hints on TMA",
    "persistent_tile_loop": "persistent tile loop around the K-loop",
    "register_spills": "register spills (local loads/stores)",
    "wgmma_serialized": "wgmma serialized (a full wait between every two MMAs of a loop)",
    "mma_drained": "tcgen05 MMAs drained every K-loop pass (their commit waited on in the same pass)",
}


@dataclass
class Feature:
    name: str
    present: bool | None
    evidence: list[str] = field(default_factory=list)
    note: str = ""
    # a number when the check measures one (pipeline stages)
    value: int | None = None

    def to_dict(self) -> dict:
        d = {"present": self.present, "evidence": self.evidence, "note": self.note}
        if self.value is not None:
            d["value"] = self.value
        return d


@functools.lru_cache(maxsize=1)
def _block_scale_rules() -> tuple[frozenset[str], frozenset[str], re.Pattern | None]:
    raw = json.loads(resources.files("bsprof").joinpath("data/sass_opcodes.json").read_text())
    rules = raw.get("block_scaled_mma", {})
    pattern = rules.get("operand_pattern")
    return (
        frozenset(rules.get("opcodes", ())),
        frozenset(rules.get("modifiers", ())),
        re.compile(pattern) if pattern else None,
    )


def evidence_line(ins: Instruction) -> str:
    where = f"{ins.pc:#06x}" if ins.pc is not None else f"#{ins.index}"
    src = f"  [{ins.file.rsplit('/', 1)[-1]}:{ins.line}]" if ins.file and ins.line else ""
    guard = f"{ins.guard} " if ins.guard else ""
    return f"{where}: {guard}{ins.opcode} {ins.operands}".rstrip() + src


_PICKED_BASES = frozenset(
    {
        "UTMALDG",
        "UBLKCP",
        "UTMASTG",
        "UTMAREDG",
        "UBLKST",
        "STG",
        "ST",
        "ATOMG",
        "UTCCP",
        "SYNCS",
        "UTMAPF",
        "LDL",
        "STL",
    }
)


def _pick(fn: Function, pred) -> list[Instruction]:
    # feature checks only look at a handful of opcodes (and MMAs): filter once per function
    cand = getattr(fn, "_feature_candidates", None)
    if cand is None:
        cand = [i for i in fn.instructions if i.base in _PICKED_BASES or i.category in ("mma", "local")]
        fn._feature_candidates = cand  # type: ignore[attr-defined]
    return [ins for ins in cand if pred(ins)]


def _feature(name: str, hits: list[Instruction], note: str = "") -> Feature:
    return Feature(
        name,
        bool(hits),
        [evidence_line(i) for i in hits[:MAX_EVIDENCE]],
        note or (f"{len(hits)} instruction{'' if len(hits) == 1 else 's'}" if hits else ""),
    )


def is_block_scaled(ins: Instruction) -> bool:
    """A block-scaled opcode or modifier, or (sm_100) an MMA that carries a scale-factor TMEM
    operand after its instruction descriptor: ``UTCQMMA ... idesc[UR33], tmem[UR10], UP1`` is
    ``tcgen05.mma.kind::mxf8f6f4.block_scale``, the same opcode without it is ``kind::f8f6f4``."""
    if ins.category != "mma":
        return False
    ops, mods, operand_re = _block_scale_rules()
    return (
        ins.base in ops
        or any(m in mods for m in ins.modifiers)
        or (operand_re is not None and operand_re.search(ins.operands) is not None)
    )


def detect_features(fn: Function, loops: list[Loop]) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    tma_loads = _pick(fn, lambda i: i.base in ("UTMALDG", "UBLKCP"))
    out["tma_load"] = _feature("tma_load", tma_loads)
    out["tma_multicast"] = _feature("tma_multicast", [i for i in tma_loads if "MULTICAST" in i.modifiers])
    # UTMAREDG is the TMA reduce-store (cp.reduce.async.bulk.tensor): an epilogue that adds into C
    out["tma_store_epilogue"] = _feature(
        "tma_store_epilogue",
        _pick(
            fn, lambda i: i.base in ("UTMASTG", "UTMAREDG", "UBLKST") or (i.base == "UBLKCP" and "S2G" in i.modifiers)
        ),
    )
    out["simt_global_stores"] = _simt_stores(fn, out["tma_store_epilogue"].present)
    mmas = _pick(fn, lambda i: i.category == "mma")
    out["mma_2cta"] = _feature("mma_2cta", [i for i in mmas if "2CTA" in i.modifiers])
    out["block_scaled_mma"] = _feature("block_scaled_mma", [i for i in mmas if is_block_scaled(i)])
    out["tmem_copy"] = _feature("tmem_copy", _pick(fn, lambda i: i.base == "UTCCP"))

    # the K-loops' rings; without a K-loop, every loop issuing MMAs itself (a tile loop with K
    # unrolled into it holds the stage ring). A tile loop around a K-loop advances other rings that
    # are no A/B pipeline: CUTLASS's grouped GEMM reads each next work tile from an 8-deep ring in
    # shared memory, and its epilogue steps a store ring, beside a K-loop ring of 6 or 4
    kloops = [lp for lp in loops if lp.own_mma]
    proper = [lp for lp in kloops if lp.is_kloop]
    rings = (ring_sizes(fn, proper) + masked_ring_sizes(fn, proper)) or (
        ring_sizes(fn, kloops) + masked_ring_sizes(fn, kloops)
    )
    unrolled = False
    if not rings:
        rings = unrolled_ring_sizes(fn, [lp for lp in kloops if lp.is_kloop]) or unrolled_ring_sizes(fn, kloops)
        unrolled = bool(rings)
    # mbarrier.init lowers to SYNCS.EXCH.64 on sm_90/sm_100; a pipeline of S stages needs 2*S of
    # them (full + empty), plus a few for the accumulator/epilogue pipelines.
    inits = _pick(fn, lambda i: i.opcode.startswith("SYNCS.EXCH"))
    waits = _pick(fn, lambda i: i.opcode.startswith("SYNCS.PHASECHK"))
    if rings:
        stages = max(n for n, _ in rings)
        how = (
            "(first of {n} stage barriers waited at consecutive addresses: the K-loop is unrolled over its ring)"
            if unrolled
            else "(stage index wraps at {n})"
        )
        out["multi_stage_pipeline"] = Feature(
            "multi_stage_pipeline",
            stages >= 2,
            [f"{evidence_line(i)}  {how.format(n=n)}" for n, i in rings[:MAX_EVIDENCE]],
            f"K-loop stage ring(s) of {', '.join(str(n) for n, _ in rings)} stages; "
            f"{len(inits)} static mbarrier inits, {len(waits)} phase waits",
        )
        out["multi_stage_pipeline"].value = stages
    elif inits:
        out["multi_stage_pipeline"] = Feature(
            "multi_stage_pipeline",
            len(inits) >= 4,
            [evidence_line(i) for i in inits[:MAX_EVIDENCE]],
            f"{len(inits)} static mbarrier inits (SYNCS.EXCH.64; a loop of inits counts once), "
            f"{len(waits)} phase waits; stages are inferred, not read",
        )
    else:
        out["multi_stage_pipeline"] = Feature("multi_stage_pipeline", None, [], "no mbarrier init in this function")

    with_policy = [
        i
        for i in _pick(fn, lambda i: i.base in ("UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF"))
        if _POLICY_RE.search(i.operands) or any(m.startswith(("L2", "EF", "EL", "EVICT", "HINT")) for m in i.modifiers)
    ]
    # CUTLASS C++ and DeepGEMM pass a policy operand on every TMA, mostly the L2 policy EVICT_NORMAL
    # (cute's CacheHintSm90 default, materialized as UMOV URn, 0x0 + UMOV URn+1, 0x10000000, or one
    # UMOV.64 on sm_120): the default behaviour, no hint. Only a policy that is not that constant
    # (EVICT_FIRST / EVICT_LAST, or one not read from immediates) counts
    normal = [i for i in with_policy if _policy_value(fn, i) == _EVICT_NORMAL]
    hinted = [i for i in with_policy if i not in normal]
    if normal and not hinted:
        out["tma_cache_hint"] = Feature(
            "tma_cache_hint",
            False,
            [evidence_line(i) for i in normal[:MAX_EVIDENCE]],
            f"{len(normal)} TMA instruction{'' if len(normal) == 1 else 's'} pass the L2 policy {_EVICT_NORMAL:#x} (EVICT_NORMAL, the default): no hint",
        )
    else:
        out["tma_cache_hint"] = _feature(
            "tma_cache_hint", hinted, "" if hinted else ("TMA present, no policy operand" if tma_loads else "")
        )
        if hinted and normal:
            out["tma_cache_hint"].note += f"; {len(normal)} more pass EVICT_NORMAL (the default)"

    outer = [lp for lp in loops if any(_encloses(loops, lp, k) for k in kloops)]
    # prefer the loops that issue no MMA themselves (the tile loop) as the evidence
    outer.sort(key=lambda lp: (lp.own_mma > 0, lp.depth))
    ev = []
    for lp in outer[:MAX_EVIDENCE]:
        head = fn.instructions[header_index(lp)]
        ev.append(f"loop at {evidence_line(head)} ({lp.size} instructions, depth {lp.depth}) encloses a K-loop")
    note = "" if kloops else "no K-loop found"
    flat = [lp for lp in kloops if lp.flattened]
    if kloops and not outer and flat:
        # one loop walks the tiles and their k-blocks (Triton's flattened persistent loop): the
        # epilogue it branches into on a tile's last k-block is the tile loop's
        for lp in flat[:MAX_EVIDENCE]:
            outer.append(lp)
            ev.append(
                f"K-loop at {evidence_line(fn.instructions[header_index(lp)])} is flattened with the tile "
                f"loop: {lp.flattened} output store(s) in blocks a pass goes around (the epilogue of a tile's last k-block)"
            )
        note = "the K-loop and the tile loop are one loop"
    elif kloops and not outer:
        # A K-loop with a compile-time trip count is unrolled into the tile loop, which then is the
        # MMA loop itself; the tile scheduler shows as a fast divmod (wide multiply + shift) in it.
        for lp in kloops:
            body = [fn.instructions[i] for i in lp.instructions]
            muls = [i for i in body if _is_divmod_multiply(i)]
            shifts = [i for i in body if i.base in ("SHF", "USHF") and ".R." in f".{'.'.join(i.modifiers)}."]
            if muls and shifts:
                outer.append(lp)
                ev.append(
                    f"MMA loop at {evidence_line(body[0])} recomputes tile coordinates "
                    f"(fast divmod: {evidence_line(muls[0])})"
                )
                note = "inferred: the tile scheduler's divmod runs inside the MMA loop"
    out["persistent_tile_loop"] = Feature("persistent_tile_loop", bool(outer) if kloops else None, ev, note)
    out["register_spills"] = _feature("register_spills", _pick(fn, lambda i: i.category == "local"))
    out["wgmma_serialized"] = _serialized(fn, loops)
    out["mma_drained"] = _drained(fn, loops)
    return out


_ADDR_RE = re.compile(r"\[\s*(U?R\w+)\s*(?:\+\s*(0x[0-9a-fA-F]+|\d+))?\s*\]")
_UADD_RE = re.compile(r"^(UR\d+),\s*(?:UPT,\s*UPT,\s*)?(UR\d+),\s*(0x[0-9a-fA-F]+|\d+),\s*URZ$")
_UMOV_RE = re.compile(r"^(UR\d+),\s*(UR\d+)$")


class _UniformValues:
    """What each uniform register holds along a loop body, as (base register, its version, offset):
    enough to see that ``UIADD3 UR35, UR8, 0x18000`` then ``[UR35]`` and ``[UR8+0x18000]`` name one
    address. Any other write makes a register a fresh unknown."""

    def __init__(self) -> None:
        self.version: dict[str, int] = {}
        self.value: dict[str, tuple[str, int, int]] = {}

    def _of(self, reg: str) -> tuple[str, int, int]:
        return self.value.get(reg, (reg, self.version.get(reg, 0), 0))

    def address(self, operands: str) -> tuple[str, int, int] | None:
        m = _ADDR_RE.search(operands)
        if m is None or m.group(1) in _ZERO_REGS:
            return None
        base, ver, off = self._of(m.group(1))
        return base, ver, off + ((_immediate(m.group(2)) or 0) if m.group(2) else 0)

    def write(self, ins: Instruction) -> None:
        dest = _dest_register(ins)
        if dest is None or not dest.startswith("UR"):
            return
        ops = ins.operands.strip()
        add = _UADD_RE.match(ops) if ins.base == "UIADD3" else None
        mov = _UMOV_RE.match(ops) if ins.base == "UMOV" else None
        new = None
        if add:
            base, ver, off = self._of(add.group(2))
            new = (base, ver, off + (_immediate(add.group(3)) or 0))
        elif mov:
            new = self._of(mov.group(2))
        self.version[dest] = self.version.get(dest, 0) + 1
        if new is None:
            self.value.pop(dest, None)
        else:
            self.value[dest] = new


def _is_divmod_multiply(ins: Instruction) -> bool:
    """A fast divmod multiplies by a magic number: a register (computed on the host from a runtime
    divisor) or a large immediate (a compile-time divisor's). A wide multiply by a small immediate
    is pointer arithmetic: Triton's cp.async K-loop advances its 64-bit load addresses with
    ``IMAD.WIDE.U32 R164, R19, 0x10, R164``, which read as a tile scheduler inside a one-tile-a-CTA
    kernel's K-loop (persistent_tile_loop yes) before this check."""
    if not ins.opcode.startswith(_DIVMOD_MUL):
        return False
    ops = [o.strip() for o in ins.operands.split(",")]
    if len(ops) >= 3 and re.fullmatch(r"-?0x[0-9a-fA-F]+|-?\d+", ops[2]):
        return abs(int(ops[2], 0)) >= 0x10000
    return True


def _drained(fn: Function, loops: list[Loop]) -> Feature:
    """A tcgen05 K-loop that commits its MMAs to an mbarrier (UTCBAR) and waits on that same barrier
    later in the same pass never has MMAs of two K blocks in flight: the tensor core idles while the
    pass finishes. Triton's ``tl.dot_scaled`` on sm_100 does this (it stages the next block's scale
    factors into the buffers the MMAs read); CUTLASS's and CuTe DSL's K-loops commit to the stage's
    empty barrier, which only the producer waits on. Barrier addresses are followed through the
    loop's uniform adds and moves (:class:`_UniformValues`); the wait must sit in blocks every pass
    runs."""
    if not any(ins.base == "UTCBAR" for ins in fn.instructions):
        return Feature("mma_drained", None, [], "no tcgen05 MMA commit (UTCBAR) in this function")
    hits: list[Instruction] = []
    for lp in loops:
        if lp.kind != "kloop":
            continue
        regs = _UniformValues()
        committed: dict[tuple[str, int, int], Instruction] = {}
        for i in lp.own_instructions:
            ins = fn.instructions[i]
            if ins.base == "UTCBAR":
                a = regs.address(ins.operands)
                if a is not None:
                    committed[a] = ins
            elif ins.opcode.startswith("SYNCS.PHASECHK") and (lp.every_pass is None or i in lp.every_pass):
                # only a wait every pass runs: a flattened persistent loop waits on the same commit
                # in its epilogue, once a tile, to read the accumulator (that is no drain)
                a = regs.address(ins.operands)
                if a is not None and a in committed:
                    hits += [committed.pop(a), ins]
            regs.write(ins)
    note = (
        (
            f"{len(hits) // 2} commit(s) waited on in the pass that issued them: the next K block's MMAs "
            "wait for this block's to finish"
        )
        if hits
        else ""
    )
    return _feature("mma_drained", hits, note)


def _is_full_wait(ins: Instruction) -> bool:
    # WARPGROUP.DEPBAR.LE gsb0, 0x0: wait until none of the warpgroup's MMAs is in flight
    return ins.opcode.startswith("WARPGROUP.DEPBAR") and re.search(r",\s*0x0\b", ins.operands) is not None


def _serialized(fn: Function, loops: list[Loop]) -> Feature:
    """A loop whose every two consecutive MMAs have a full warpgroup wait between them issues one
    wgmma at a time: ptxas serializes the wgmma pipeline (its warning C7510) when a function call or
    an access to the accumulators sits among them -- an assert in a build without -DNDEBUG does it.
    Promotion waits once per K block (after the block's last MMA), which is not this."""
    if not any(ins.base == "WARPGROUP" for ins in fn.instructions):
        return Feature("wgmma_serialized", None, [], "no warpgroup MMA (sm_90 wgmma) in this function")
    hits: list[Instruction] = []
    for lp in loops:
        if lp.own_mma < 2:
            continue
        body = [fn.instructions[i] for i in lp.own_instructions]
        at = [k for k, ins in enumerate(body) if ins.category == "mma"]
        waits = [next((w for w in body[a + 1 : b] if _is_full_wait(w)), None) for a, b in zip(at, at[1:])]
        if all(w is not None for w in waits):
            hits.extend(w for w in waits if w is not None)
    note = (
        (
            f"{len(hits)} full waits, one between every two MMAs (ptxas C7510: a call or accumulator access "
            "among the wgmmas; e.g. asserts left in by a build without -DNDEBUG)"
        )
        if hits
        else ""
    )
    return _feature("wgmma_serialized", hits, note)


# a register operand may carry the operand-reuse-cache hint (``R114.reuse``): the same register
_SETP_RE = re.compile(r"^(U?P\d),\s*U?PT,\s*(U?R\d+)(?:\.reuse)?,\s*(0x[0-9a-fA-F]+|\d+)\b")


_GLOBAL_ADDR_RE = re.compile(r"\[(U?R\d+)(?:\.64)?(?:\+[^\]]*)?\]")


def _address_base(ins: Instruction) -> str | None:
    """The register a global access is addressed by (``desc[UR14][R24.64+0x1000]`` -> ``R24``)."""
    hits = _GLOBAL_ADDR_RE.findall(
        ins.operands.split("desc[", 1)[-1].split("]", 1)[-1] if "desc[" in ins.operands else ins.operands
    )
    return hits[0] if hits else None


def _simt_stores(fn: Function, tma_epilogue: bool) -> Feature:
    """SIMT global stores, less those that only write a reduction workspace: stream-K and split-K
    kernels store a partial tile's fp32 sums with STG where the first contributor writes and
    reduce the others' into the same addresses with ``ATOMG.E.ADD.F32``; with the output going out
    by TMA (``UTMASTG``) those STGs are the fixup's, not a slow epilogue (CUTLASS C++'s stream-K
    scheduler: 64 STG beside 64 ATOMG.E.ADD.F32 on one address register, the tile by UTMASTG)."""
    stores = _pick(fn, lambda i: i.base in ("STG", "ST"))
    if not stores or not tma_epilogue:
        return _feature("simt_global_stores", stores)
    adds = [i for i in _pick(fn, lambda i: i.base == "ATOMG") if "ADD" in i.modifiers and "F32" in i.modifiers]
    bases = {_address_base(i) for i in adds} - {None}
    workspace = [i for i in stores if _address_base(i) in bases]
    rest = [i for i in stores if _address_base(i) not in bases]
    if not workspace:
        return _feature("simt_global_stores", stores)
    note = (
        f"{len(workspace)} STG write partial sums to a reduction workspace (the addresses of "
        f"{len(adds)} ATOMG.E.ADD.F32: a stream-K / split-K fixup); the output goes out by TMA"
    )
    if rest:
        f = _feature("simt_global_stores", rest)
        f.note += f"; {note}"
        return f
    return Feature("simt_global_stores", False, [evidence_line(i) for i in workspace[:MAX_EVIDENCE]], note)


_EVICT_NORMAL = 0x1000000000000000
_DESC_RE = re.compile(r"desc\[UR(\d+)\]")


def _policy_value(fn: Function, ins: Instruction, window: int = 256) -> int | None:
    """The 64-bit L2 policy in a TMA's ``desc[URn]`` (URn low, URn+1 high) when the nearest writes of
    both halves before it are immediates (``UMOV``, or ``UMOV.64 URn, imm`` for the pair); ``None``
    when either half comes from anything else or is not found within ``window`` instructions."""
    m = _DESC_RE.search(ins.operands)
    if m is None:
        return None
    n = int(m.group(1))
    halves: dict[int, int | None] = {}
    for j in range(ins.index - 1, max(-1, ins.index - 1 - window), -1):
        w = fn.instructions[j]
        dest = _dest_register(w)
        if dest is None or not dest.startswith("UR"):
            continue
        d = int(dest[2:])
        ops = _operands(w)
        imm = _immediate(ops[1]) if len(ops) == 2 and ops[1][:2].lower() == "0x" and len(ops[1]) <= 18 else None
        wide = w.opcode == "UMOV.64"
        for r in (d, d + 1) if wide else (d,):
            if r in (n, n + 1) and r not in halves:
                if w.base != "UMOV" or imm is None:
                    halves[r] = None
                else:
                    halves[r] = (imm >> 32 if r == d + 1 else imm & 0xFFFFFFFF) if wide else imm
        if len(halves) == 2:
            break
    if len(halves) < 2 or None in halves.values():
        return None
    return (halves[n + 1] << 32) | halves[n]


def _immediate(text: str) -> int | None:
    """A SASS immediate (``0x10`` or ``16``; decimal may carry leading zeros, which int(x, 0)
    refuses); ``None`` when it is too long to be a stage count."""
    if len(text) > 18:
        return None
    return int(text, 16) if text[:2].lower() == "0x" else int(text, 10)


_REG_RE = re.compile(r"^U?R\d+$")
_ZERO_REGS = ("RZ", "URZ")


# (compare, select on the negated predicate) -> the first value the select does not keep, from the
# immediate: ``p = v != N`` keeps v while p, so N; ``p = v > N`` keeps v while !p, so N + 1
_KEEP_BOUND = {
    ("NE", False): lambda n: n,
    ("LT", False): lambda n: n,
    ("LE", False): lambda n: n + 1,
    ("GT", True): lambda n: n + 1,
    ("GE", True): lambda n: n,
    ("EQ", True): lambda n: n,
}
_CMPS = frozenset(c for c, _ in _KEEP_BOUND)


def _dest_register(ins: Instruction) -> str | None:
    """The register an instruction writes (its first operand), if that is a plain register."""
    if ins.base in ("ISETP", "UISETP"):
        return None
    first = ins.operands.split(",", 1)[0].strip()
    return first if _REG_RE.match(first) and first not in _ZERO_REGS else None


def _operands(ins: Instruction) -> list[str]:
    return [o.strip().removesuffix(".reuse") for o in ins.operands.split(",")]


def _increment_step(ins: Instruction) -> tuple[str, int] | None:
    """``d = s + k`` for a positive immediate k ((U)IADD3 with the carry predicates or not, VIADD):
    (the register s, k)."""
    if ins.base not in ("IADD3", "UIADD3", "VIADD", "UIADD"):
        return None
    ops = _operands(ins)
    srcs = [o for o in ops[1:] if o not in ("PT", "UPT", "!PT", "!UPT") and o not in _ZERO_REGS]
    if len(srcs) != 2:
        return None
    imms = [(j, _immediate(o)) for j, o in enumerate(srcs) if re.fullmatch(r"0x[0-9a-fA-F]{1,16}|\d{1,18}", o)]
    if len(imms) != 1 or imms[0][1] <= 0:
        return None
    other = srcs[1 - imms[0][0]]
    return (other, imms[0][1]) if _REG_RE.match(other) else None


MBARRIER_BYTES = 8
MAX_UNROLLED_RING = 64


def unrolled_ring_sizes(fn: Function, kloops: list[Loop]) -> list[tuple[int, Instruction]]:
    """Rings a K-loop walks without an index: unrolled over all its stages, it waits on each stage's
    full barrier at an address of its own, one base plus 8-byte steps (DeepGEMM's sm_90 kernels,
    whose loop is unrolled as deep as the ring or deeper; CuTe DSL with the stages unrolled).
    The longest run of consecutive mbarriers the phase waits address from one base is the ring
    (other waits on that base, another barrier array, do not break it; at most MAX_UNROLLED_RING).
    Returns (N, the first wait of the run) per K-loop that has one."""
    out: list[tuple[int, Instruction]] = []
    for lp in kloops:
        uv = _UniformValues()
        groups: dict[tuple[str, int], dict[int, Instruction]] = {}
        for i in lp.own_instructions:
            ins = fn.instructions[i]
            if ins.opcode.startswith("SYNCS.PHASECHK"):
                addr = uv.address(ins.operands)
                if addr is not None:
                    groups.setdefault(addr[:2], {}).setdefault(addr[2], ins)
            uv.write(ins)
        best = 0, None
        for offsets in groups.values():
            ks = sorted(offsets)
            start = 0
            for j in range(1, len(ks) + 1):
                if j == len(ks) or ks[j] - ks[j - 1] != MBARRIER_BYTES:
                    n = j - start
                    if 2 <= n <= MAX_UNROLLED_RING and n > best[0]:
                        best = n, offsets[ks[start]]
                    start = j
        if best[1] is not None:
            out.append(best)
    return out


def ring_sizes(fn: Function, kloops: list[Loop]) -> list[tuple[int, Instruction]]:
    """Pipeline stage rings a K-loop advances, in the two shapes compilers emit:

    * ``next = idx + 1; p = next != N; idx = p ? next : 0`` (CuTe DSL): the compare and the select
      read the same value, the ring has N stages;
    * ``p = idx != N - 1; next = idx + 1; idx = p ? next : 0`` (DeepGEMM's
      ``stage == kNumStages - 1 ? 0 : stage + 1``): the compare reads the index before the
      increment, so the ring has one stage more than the immediate.

    ``(U)ISETP.NE`` of a register against an immediate, then ``(U)SEL d, r, (U)RZ, p``; each
    register's writes are versioned, so a compare is only paired with the value it read.

    Triton's pipeliner writes the wrap as ``next = idx + 1; idx = next < N ? next : 0``, which ptxas
    emits as ``ISETP.GT p, next, N - 1`` and ``SEL idx, next, RZ, !p``: the compare may be any order
    (LT, LE, or GT, GE with the select on the negated predicate), and what matters is the first value
    it does not keep (``_KEEP_BOUND``).
    Returns (N, the setp)."""
    out: list[tuple[int, Instruction]] = []
    seen: set[int] = set()
    for lp in kloops:
        body = [fn.instructions[i] for i in lp.own_instructions]
        version: dict[str, int] = {}
        # predicate -> (compare, immediate, compared register, its version then, the setp)
        setps: dict[str, tuple[str, int, str, int, Instruction]] = {}
        # register -> (the register it is one more than, that register's version then)
        incr: dict[str, tuple[str, int]] = {}
        # registers last written as another register plus an immediate larger than 1
        stepped: set[str] = set()
        for ins in body:
            if ins.base in ("ISETP", "UISETP"):
                m = _SETP_RE.match(ins.operands)
                pred = ins.operands.split(",", 1)[0].strip()
                cmp = next((c for c in ins.modifiers if c in _CMPS), None)
                n = _immediate(m.group(3)) if m and cmp else None
                if n is not None:
                    reg = m.group(2)
                    setps[pred] = (cmp, n, reg, version.get(reg, 0), ins)
                else:
                    setps.pop(pred, None)
                continue
            if ins.base in ("SEL", "USEL"):
                ops = _operands(ins)
                sel = ops[3] if len(ops) == 4 and ops[2] in _ZERO_REGS else ""
                hit = setps.get(sel.lstrip("!"))
                bound = _KEEP_BOUND.get((hit[0], sel.startswith("!")), lambda _: None)(hit[1]) if hit else None
                if bound is not None and hit[4].index not in seen:
                    n, reg, ver, setp = bound, *hit[2:]
                    src = ops[1]
                    size = None
                    if src in stepped:
                        # a counter that steps by k > 1 and wraps at N takes N / k values and
                        # counts something else than stages: the 2xAcc example's k-step counter
                        # (+4 MMAs a k-block) wraps at its promotion interval beside the real
                        # stage ring of the same loop
                        pass
                    elif src == reg and version.get(src, 0) == ver and (hit[0] == "NE" or src in incr):
                        # compared the incremented value (an ordered compare only of a value known
                        # to be one more than another: a clamp is no ring)
                        size = n
                    elif incr.get(src) == (reg, ver):
                        size = n + 1  # compared the index before its increment
                    if size is not None and 2 <= size <= 64:
                        seen.add(setp.index)
                        out.append((size, setp))
            dest = _dest_register(ins)
            if dest is not None:
                st = _increment_step(ins)
                src = st[0] if st is not None and st[1] == 1 else None
                inc = (src, version.get(src, 0)) if src is not None else None
                version[dest] = version.get(dest, 0) + 1
                if inc is not None:
                    incr[dest] = inc
                else:
                    incr.pop(dest, None)
                if st is not None and st[1] > 1:
                    stepped.add(dest)
                else:
                    stepped.discard(dest)
    return out


_REGS_RE = re.compile(r"\bU?R\d+\b")
_NUM_RE = re.compile(r"0x[0-9a-fA-F]{1,16}|\d{1,18}")
# LOP3.LUT truth tables: a & b, a ^ b
_LUT_AND, _LUT_XOR = "0xc0", "0x3c"


def _lop_immediate(ins: Instruction, lut: str) -> tuple[str, str, int] | None:
    """``(U)LOP3.LUT d, a, imm, (U)RZ, lut``: (d, a, imm)."""
    if ins.base not in ("LOP3", "ULOP3"):
        return None
    ops = _operands(ins)
    ops = ops[1:] if ops and ops[0] in ("PT", "UPT") else ops  # the optional predicate output
    if len(ops) < 5 or ops[3] not in _ZERO_REGS or ops[4].lower() != lut or not _NUM_RE.fullmatch(ops[2]):
        return None
    if not (_REG_RE.match(ops[0]) and _REG_RE.match(ops[1])):
        return None
    return ops[0], ops[1], _immediate(ops[2])


def masked_ring_sizes(fn: Function, kloops: list[Loop]) -> list[tuple[int, Instruction]]:
    """Rings of a power-of-two N kept by a mask instead of a compare: with N = 2^k stages a compiler
    may wrap the stage index as ``idx = (idx + s) & (N - 1)``, or keep ``idx & (N - 1)`` and step it
    by an XOR (``+2`` of a ring of 4 flips one bit). DeepGEMM's sm_100 bf16 K-loop (4 stages, two
    k-blocks a pass) does both, with no compare against the stage count left to read.

    Counted only where the three parts of a ring are there, so a mask that extracts bits is not
    taken for one: the loop-carried index is masked by N - 1 (from itself or from itself plus a
    step), it is stepped in the loop (an add or an XOR of less than N), and a value derived from it
    addresses an mbarrier the loop waits on. Returns (N, the mask)."""
    out: list[tuple[int, Instruction]] = []
    for lp in kloops:
        body = [fn.instructions[i] for i in lp.own_instructions]
        # register -> (source register, step) of its last write as source + step
        last_step: dict[str, tuple[str, int]] = {}
        masks: list[tuple[str, int, Instruction]] = []
        stepped: set[str] = set()
        for ins in body:
            hit = _lop_immediate(ins, _LUT_AND)
            if hit is not None:
                d, a, m = hit
                if m >= 1 and m & (m + 1) == 0 and (a == d or last_step.get(a, ("", 0))[0] == d):
                    masks.append((d, m + 1, ins))
                    if a != d and last_step[a][1] < m + 1:
                        stepped.add(d)
            x = _lop_immediate(ins, _LUT_XOR)
            if x is not None and x[0] == x[1] and x[2] >= 1:
                stepped.add(x[0])
            dest = _dest_register(ins)
            if dest is not None:
                st = _increment_step(ins)
                if st is not None:
                    last_step[dest] = st
                    if st[0] == dest:
                        stepped.add(dest)
                else:
                    last_step.pop(dest, None)
        for reg, n, mask in masks:
            if reg not in stepped or mask.index in {m.index for _, m in out}:
                continue
            if _feeds_a_wait(body, reg):
                out.append((n, mask))
                break
    return out


def _feeds_a_wait(body: list[Instruction], reg: str) -> bool:
    """Whether a value derived from ``reg`` (any chain of instructions reading it) addresses a phase
    wait of the loop body; twice round the body, as the loop carries values into its next pass."""
    tainted = {reg}
    for ins in body + body:
        if ins.opcode.startswith("SYNCS.PHASECHK"):
            m = re.search(r"\[([^\]]*)\]", ins.operands)
            if m and tainted & set(_REGS_RE.findall(m.group(1))):
                return True
            continue
        dest = _dest_register(ins)
        if dest is None:
            continue
        srcs = set(_REGS_RE.findall(ins.operands.split(",", 1)[1] if "," in ins.operands else ""))
        if srcs & tainted:
            tainted.add(dest)
        elif dest != reg:
            tainted.discard(dest)
    return False


def header_index(lp: Loop) -> int:
    """Index of the loop header's first instruction (set by loops.find_loops)."""
    return lp.header_start if lp.header_start is not None else lp.instructions[0]


def _encloses(loops: list[Loop], outer: Loop, inner: Loop) -> bool:
    p = inner.parent
    while p is not None:
        if p == outer.id:
            return True
        p = loops[p].parent
    return False


def refine_with_launch(features: dict[str, Feature], launch_info: dict) -> None:
    """ncu knows the grid: a grid no larger than the SM count means CTAs loop over tiles."""
    grid, sms = launch_info.get("launch__grid_size"), launch_info.get("launch__sm_count")
    f = features.get("persistent_tile_loop")
    # only a kernel with a K-loop has tiles to loop over (present None = no K-loop)
    if f is None or f.present is not False or not grid or not sms:
        return
    if grid <= sms:
        f.present = True
        f.evidence.append(f"grid of {int(grid)} CTAs <= {int(sms)} SMs (ncu launch metrics)")
        f.note = "inferred from the launch: one wave of CTAs that must loop over the tiles"
