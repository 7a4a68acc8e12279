"""Per-region budgets (static and executed), stall samples per category/region, and MMA detail.

A region is a loop (``by="loops"``) or a warp-role/phase label (``by="roles"``). Executed counts are
warp-level ``inst_executed`` summed over the launch; ``per_tile`` divides by the number of output
tiles, so a one-warp role (the MMA warp) reads as "instructions this warp issues per tile".
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bsprof.analyzers.sass.analyze import FunctionAnalysis
from bsprof.analyzers.sass.loops import LOOP_TAGS
from bsprof.analyzers.sass.scoreboard import first_wait, has_control
from bsprof.errors import BsprofError

# what --mma-detail counts per MMA, by opcode prefix (first match wins)
DETAIL_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("R2UR", ("R2UR",)),
    ("SYNCS", ("SYNCS",)),
    ("UTCBAR", ("UTCBAR",)),
    ("WARPGROUP", ("WARPGROUP",)),
    ("SETP+PLOP3", ("ISETP", "UISETP", "FSETP", "PSETP", "PLOP3", "UPLOP3")),
    (
        "address arithmetic",
        (
            "IADD3",
            "UIADD3",
            "LEA",
            "ULEA",
            "IMAD",
            "UIMAD",
            "SHF",
            "USHF",
            "LOP3",
            "ULOP3",
            "VIADD",
            "UIMNMX",
            "SEL",
            "USEL",
            "UMOV",
            "MOV",
            "IMAD.MOV",
        ),
    ),
)


# groups that exist on one architecture only: tcgen05's commit (sm_100) and wgmma's arrive/wait fences
# (sm_90); the text leaves them out where a kernel has none, the JSON keeps every group
ARCH_GROUPS = ("UTCBAR", "WARPGROUP")


def attach_counts(fa: FunctionAnalysis, sc) -> None:
    """Attach a SourceCounters' executed counts and stalls; matched by index (same function) or by
    PC offset from the function start (a cubin analysis + the ncu report of the same build)."""
    n = len(fa.instructions)
    if fa.function is sc.function or (
        len(sc.executed) == n
        and all(a.pc == b.pc and a.base == b.base for a, b in zip(fa.instructions, sc.function.instructions))
    ):
        fa.executed, fa.stalls = list(sc.executed), list(sc.stalls)
    else:
        base = sc.function.instructions[0].pc if sc.function.instructions else 0
        by_off = {ins.pc - base: k for k, ins in enumerate(sc.function.instructions)}
        fa.executed = [0] * n
        fa.stalls = [{} for _ in range(n)]
        hit = 0
        for ins in fa.instructions:
            k = by_off.get(ins.pc) if ins.pc is not None else None
            if k is not None:
                other = sc.function.instructions[k]
                if other.base != ins.base:
                    raise BsprofError(
                        f"the ncu report's SASS does not match {fa.name} at offset {ins.pc:#x} "
                        f"({other.opcode} vs {ins.opcode}); profile the same build as the cubin"
                    )
                fa.executed[ins.index] = sc.executed[k]
                fa.stalls[ins.index] = sc.stalls[k]
                hit += 1
        if hit == 0:
            raise BsprofError(f"no PC of the ncu report matches {fa.name}; profile the same build as the cubin")
    fa.launch_info = getattr(sc, "launch_info", {})  # type: ignore[attr-defined]
    fa.aliases = tuple(getattr(sc, "aliases", ()))
    fa.recorded = dict(getattr(sc, "recorded", {}))
    fa.reclassify()


def tiles_from_problem(mnkl: tuple[int, int, int, int], tile_mn: tuple[int, int]) -> int:
    m, n, _k, batches = mnkl
    return math.ceil(m / tile_mn[0]) * math.ceil(n / tile_mn[1]) * batches


# kernel names that spell their output tile: cuBLAS's nvjet_sm90_<types>_<M>x<N>_<K>x<stages>_<cluster>_...,
# DeepGEMM's templates (Itanium-mangled; BLOCK_M, BLOCK_N are a CTA's output tile):
# sm90_fp8_gemm_1d2d_impl<MajorSFB, M, N, K, groups, BLOCK_M, BLOCK_N, ...>,
# sm90_fp8_gemm_1d1d_impl<M, N, K, groups, BLOCK_M, BLOCK_N, ...>,
# sm100_fp8_fp4_gemm_1d1d_impl<MajorA, MajorB, GranKA, GranKB, KAlignment, M, N, K, BLOCK_M, BLOCK_N, ...>
# (the second Major mangles as a substitution, LS3_<v>E)
_NAMED_TILES = (
    ("cuBLAS nvjet", re.compile(r"^nvjet_sm\d+\w*?_(\d+)x(\d+)_\d+x\d+_\d+x\d+_")),
    ("DeepGEMM template", re.compile(r"sm90_fp8_gemm_1d2d_implI\w*?MajorE\d+E(?:Lj\d+E){4}Lj(\d+)ELj(\d+)E")),
    ("DeepGEMM template", re.compile(r"sm90_fp8_gemm_1d1d_implI(?:Lj\d+E){4}Lj(\d+)ELj(\d+)E")),
    (
        "DeepGEMM template",
        re.compile(r"sm100_fp8_fp4_gemm_1d1d_implI\w*?MajorE\d+ELS\w*?_\d+E(?:Lj\d+E){6}Lj(\d+)ELj(\d+)E"),
    ),
)


def tile_from_name(name: str) -> tuple[tuple[int, int], str] | None:
    """The output tile a kernel's own name spells, and which naming scheme said so; None otherwise
    (then the tile is unknown and must be given, never guessed)."""
    for scheme, rx in _NAMED_TILES:
        m = rx.search(name)
        if m:
            return (int(m.group(1)), int(m.group(2))), scheme
    return None


@dataclass
class Region:
    name: str
    indices: list[int]
    is_kloop: bool = False
    depth: int = 0
    extra: dict = field(default_factory=dict)


def regions(fa: FunctionAnalysis, by: str = "loops") -> list[Region]:
    """``loops``: the whole function, then every loop. ``roles``: one region per role/phase label."""
    if by == "roles":
        if fa.roles is None:
            raise BsprofError("no role attribution for this function; analyze with line info and --source")
        groups: dict[str, list[int]] = defaultdict(list)
        for i, lab in enumerate(fa.roles):
            groups[lab].append(i)
        kset = {i for lp in fa.kloops for i in lp.instructions}
        return [Region(lab, idx, is_kloop=bool(kset.intersection(idx))) for lab, idx in groups.items()]
    out = [Region("function", list(range(len(fa.instructions))))]
    # the K-loop first, then other K-loops, promotion loops, the tile loop, loops around them, the rest
    order = {"kloop": 1, "promote": 2, "tile": 3, "outer": 4, "loop": 5}
    for lp in sorted(fa.loops, key=lambda lp: (0 if lp.primary else order[lp.kind], lp.id)):
        extra = fa.steady_state(lp)
        head = fa.instructions[lp.header_start if lp.header_start is not None else lp.instructions[0]]
        where = f"{head.pc:#06x}" if head.pc is not None else f"#{head.index}"
        out.append(
            Region(
                f"{LOOP_TAGS[lp.kind]} {lp.id} @{where}",
                lp.instructions,
                lp.is_kloop,
                lp.depth,
                dict(extra, kind=lp.kind, primary=lp.primary),
            )
        )
    return out


def region_rows(fa: FunctionAnalysis, by: str = "loops", tiles: int | None = None) -> list[dict]:
    """One row per region: static counts by category, MMAs, overhead/MMA, and (with ncu data)
    executed instructions, per tile, and stall samples."""
    rows = []
    for reg in regions(fa, by):
        ins = [fa.instructions[i] for i in reg.indices]
        cats = Counter(i.category for i in ins)
        mma = cats.get("mma", 0)
        row: dict = {
            "region": reg.name,
            "depth": reg.depth,
            "is_kloop": reg.is_kloop,
            "instructions": len(ins),
            "mma": mma,
            "categories": dict(cats),
            "overhead_per_mma": round((len(ins) - mma) / mma, 2) if mma else None,
        }
        row.update(
            {k: v for k, v in reg.extra.items() if k in ("executed_per_mma", "hot_instructions", "kind", "primary")}
        )
        if fa.executed is not None:
            ex = [fa.executed[i] for i in reg.indices]
            ex_cats: Counter = Counter()
            for i, e in zip(reg.indices, ex):
                ex_cats[fa.instructions[i].category] += e
            row["executed"] = int(sum(ex))
            row["executed_categories"] = dict(ex_cats)
            row["mma_executed"] = int(ex_cats.get("mma", 0))
            if tiles:
                row["executed_per_tile"] = round(row["executed"] / tiles, 1)
                row["mma_per_tile"] = round(row["mma_executed"] / tiles, 2)
                row["per_tile_breakdown"] = per_tile_text(ex_cats, fa, reg.indices, tiles)
        if fa.stalls is not None:
            st: Counter = Counter()
            for i in reg.indices:
                st.update(fa.stalls[i])
            row["stall_samples"] = int(sum(st.values()))
            row["stalls"] = dict(st.most_common())
        rows.append(row)
    return rows


def per_tile_text(ex_cats: Counter, fa: FunctionAnalysis, indices: list[int], tiles: int) -> str:
    """'411 instructions per tile, 24 UTCQMMA (5.8%), 7 SYNCS, 7 UTCBAR, 373 other'."""
    total = sum(ex_cats.values()) / tiles
    shown = [
        i
        for i in indices
        if fa.instructions[i].category == "mma" or fa.instructions[i].base in ("SYNCS", "UTCBAR", "R2UR")
    ]
    ops = Counter(fa.executed_by_opcode(shown))
    parts = [f"{total:.0f} warp-instructions per tile"]
    rest = total
    for op, c in ops.most_common():
        v = c / tiles
        rest -= v
        pct = f" ({100 * v / total:.1f}%)" if total and op not in ("SYNCS", "UTCBAR", "R2UR") else ""
        parts.append(f"{v:.0f} {op}{pct}")
    parts.append(f"{rest:.0f} other")
    return ", ".join(parts)


def stalls_by_category(fa: FunctionAnalysis, indices: list[int] | None = None) -> dict[str, dict[str, int]]:
    """{category: {stall reason: samples}} (empty without ncu stall data)."""
    if fa.stalls is None:
        return {}
    out: dict[str, Counter] = defaultdict(Counter)
    for i in range(len(fa.instructions)) if indices is None else indices:
        if fa.stalls[i]:
            out[fa.instructions[i].category].update(fa.stalls[i])
    return {k: dict(v.most_common()) for k, v in sorted(out.items(), key=lambda kv: -sum(kv[1].values()))}


def hot_instructions(fa: FunctionAnalysis, n: int = 20) -> list[dict]:
    """The ``n`` instructions with the most stall samples, hottest first: where the warps of a
    launch waited, site by site (two kernels side by side show which sites one pays and the other
    does not). Needs ncu SourceCounters."""
    if fa.stalls is None:
        raise BsprofError(
            f"{fa.name[:60]}: no stall samples; --hot needs an .ncu-rep with SourceCounters "
            "(ncu --set full --import-source yes), or --ncu REPORT beside a cubin"
        )
    per = [sum(s.values()) for s in fa.stalls]
    total = sum(per) or 1
    kloop = {i for lp in fa.kloops for i in lp.instructions}
    ranked = sorted(range(len(fa.instructions)), key=lambda i: (-per[i], i))
    out = []
    for i in ranked[: max(0, n)]:
        samples = per[i]
        if not samples:
            break
        ins = fa.instructions[i]
        out.append(
            dict(
                pc=ins.pc,
                opcode=ins.opcode,
                operands=ins.operands,
                guard=ins.guard,
                executed=fa.executed[i] if fa.executed is not None else None,
                samples=samples,
                share=samples / total,
                reasons=dict(Counter(fa.stalls[i]).most_common(3)),
                kloop=i in kloop,
                role=fa.roles[i] if fa.roles is not None else None,
                line=f"{ins.file.rsplit('/', 1)[-1]}:{ins.line}" if ins.file and ins.line else None,
            )
        )
    return out


@functools.lru_cache(maxsize=4096)  # few distinct opcodes, asked once per instruction of every gap
def _group(opcode: str) -> str | None:
    for name, prefixes in DETAIL_GROUPS:
        for p in prefixes:
            if opcode == p or opcode.startswith(p + "."):
                return name
    return None


def _steady_pass(fa: FunctionAnalysis, lp, body: list[int]) -> list[int]:
    """A flattened loop's pass: the blocks every pass runs and the blocks that issue its MMAs (an
    elected thread's MMA block is branched to); the epilogue (a tile's last pass only) and the
    wait-retry paths would otherwise be charged to every MMA."""
    keep = set(lp.every_pass)
    for b in lp.blocks:
        blk = fa.cfg.blocks[b]
        if any(fa.instructions[i].category == "mma" for i in range(blk.start, blk.end)):
            keep.update(range(blk.start, blk.end))
    return [i for i in body if i in keep]


def mma_detail(fa: FunctionAnalysis, loop=None) -> dict:
    """The instruction stream between consecutive MMA issues of a K-loop (cyclic through the back
    edge), per-MMA counts of the overhead groups, and stall samples on the gaps by reason."""
    loops = [loop] if loop is not None else fa.kloops
    if not loops:
        raise BsprofError(f"{fa.name}: no loop issues MMAs, so there is no K-loop to detail")
    out = []
    for lp in loops:
        body = lp.own_instructions or lp.instructions
        if lp.flattened and lp.every_pass:
            body = _steady_pass(fa, lp, body) or body
        mpos = [k for k, i in enumerate(body) if fa.instructions[i].category == "mma"]
        gaps = []
        for g, k in enumerate(mpos):
            nxt = mpos[(g + 1) % len(mpos)]
            seq = body[k + 1 : nxt] if nxt > k else body[k + 1 :] + body[:nxt]
            stream = []
            for i in seq:
                ins = fa.instructions[i]
                item = {
                    "index": i,
                    "pc": ins.pc,
                    "opcode": ins.opcode,
                    "operands": ins.operands,
                    "category": ins.category,
                    "group": _group(ins.opcode),
                }
                if ins.guard:
                    item["guard"] = ins.guard
                if fa.executed is not None:
                    item["executed"] = fa.executed[i]
                if fa.stalls is not None and fa.stalls[i]:
                    item["stalls"] = dict(fa.stalls[i])
                stream.append(item)
            mi = fa.instructions[body[k]]
            gaps.append(
                {
                    "mma_index": body[k],
                    "mma_pc": mi.pc,
                    "mma": mi.opcode,
                    "between": len(seq),
                    "instructions": len(seq),
                    "categories": dict(Counter(x["category"] for x in stream)),
                    "stream": stream,
                }
            )
        n_mma = len(mpos)
        groups = Counter(_group(fa.instructions[i].opcode) for i in body if fa.instructions[i].category != "mma")
        cats = Counter(fa.instructions[i].category for i in body if fa.instructions[i].category != "mma")
        d = {
            "loop": lp.id,
            "kind": lp.kind,
            "instructions": len(body),
            "loop_instructions": lp.size,
            "mma": n_mma,
            "every_pass_only": bool(lp.flattened and lp.every_pass),
            "mean_between_mma": round((len(body) - n_mma) / n_mma, 2) if n_mma else None,
            "mean_between": round((len(body) - n_mma) / n_mma, 2) if n_mma else None,
            "per_mma": {name: round(groups.get(name, 0) / n_mma, 2) for name, _ in DETAIL_GROUPS},
            "counts": {name: groups.get(name, 0) for name, _ in DETAIL_GROUPS},
            "categories_per_mma": {c: round(v / n_mma, 2) for c, v in cats.most_common()},
            "gaps": gaps,
        }
        if has_control(fa.function.arch, fa.instructions):
            # where each global load's latency is paid: its scoreboard's first wait, before the next MMA
            # issues (the tensor pipe waits) or after MMAs issued (their time covers it)
            loads = []
            for at, i in enumerate(body):
                got = fa.instructions[i].base == "LDG" and first_wait(fa.instructions, body, at)
                if got:
                    w = fa.instructions[got[0]]
                    loads.append(
                        {"pc": fa.instructions[i].pc, "wait_pc": w.pc, "wait": w.opcode, "mma_before_wait": got[1]}
                    )
            d["loads"] = loads
        if fa.stalls is not None:
            st: Counter = Counter()
            on_mma: Counter = Counter()
            for i in body:
                (on_mma if fa.instructions[i].category == "mma" else st).update(fa.stalls[i])
            d["stalls_between"] = dict(st.most_common())
            d["stalls_on_mma"] = dict(on_mma.most_common())
            d["stalls"] = d["stalls_between"]
        out.append(d)
    return {"function": fa.name, "kloops": out}


def role_tables(fa: FunctionAnalysis) -> dict:
    """JSON extras for the report: categories (and stalls) per role label and per loop region."""
    out: dict = {}
    if fa.roles is not None:
        cats: dict[str, Counter] = defaultdict(Counter)
        for ins, lab in zip(fa.instructions, fa.roles):
            cats[lab][ins.category] += 1
        out["role_categories"] = {k: dict(v) for k, v in cats.items()}
        if fa.stalls is not None:
            st: dict[str, Counter] = defaultdict(Counter)
            for lab, s in zip(fa.roles, fa.stalls):
                st[lab].update(s)
            out["role_stalls"] = {k: dict(v.most_common()) for k, v in st.items() if v}
    if fa.stalls is not None:
        out["region_stalls"] = {r["region"]: r["stalls"] for r in region_rows(fa) if r.get("stalls")}
        out["stalls_by_category"] = stalls_by_category(fa)
    return out
