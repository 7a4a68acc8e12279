"""One function's full static analysis: classification, CFG, loops, K-loops, features.

Dynamic data (ncu per-PC executed counts and stall samples) and warp-role attribution attach to
the same object later (``budget.attach_counts``, ``roles.attribute``), so every consumer reads one
``FunctionAnalysis``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from bsprof.analyzers.sass.cfg import CFG, build_cfg
from bsprof.analyzers.sass.classify import classify
from bsprof.analyzers.sass.features import Feature, detect_features
from bsprof.analyzers.sass.loops import NO_MMA, UNROLLED, Loop, classify_loops, find_loops
from bsprof.analyzers.sass.parse import Function, Instruction
from bsprof.errors import BsprofError


@dataclass
class FunctionAnalysis:
    function: Function
    cfg: CFG
    loops: list[Loop]
    unclassified: list[str]
    features: dict[str, Feature]
    # filled by budget.attach_counts (aligned with function.instructions)
    executed: list[int] | None = None
    stalls: list[dict[str, int]] | None = None
    # filled by roles.attribute: a role/phase label per instruction, and how it was found
    roles: list[str] | None = None
    roles_source: str | None = None
    # the labels among them that only one warp runs (an equality warp-dispatch `if`: the store warp)
    one_warp_roles: frozenset[str] = frozenset()
    # why no instruction could be attributed to a role (no line info, source not readable)
    roles_missing: str | None = None
    notes: list[str] = field(default_factory=list)
    source: str = ""
    # ncu launch metrics (grid size, cluster dims...) when the analysis came from a report
    launch_info: dict = field(default_factory=dict)
    # from a report: the launch's other names (mangled, demangled) and what its NVTX range recorded
    aliases: tuple[str, ...] = ()
    recorded: dict = field(default_factory=dict)
    # "kloop" | "unrolled" (MMAs, no K-loop: K fully unrolled) | "no_mma" -- loops.classify_loops
    kloop_status: str = NO_MMA

    # --- convenience for tests and other analyzers -------------------------------------------------
    @property
    def name(self) -> str:
        return self.function.name

    @property
    def arch(self) -> str | None:
        return self.function.arch

    @property
    def instructions(self) -> list[Instruction]:
        return self.function.instructions

    @property
    def kloops(self) -> list[Loop]:
        """Every K-loop, the K-loop proper (:attr:`kloop`) first."""
        return sorted((lp for lp in self.loops if lp.is_kloop), key=lambda lp: not lp.primary)

    @property
    def kloop(self) -> Loop | None:
        """The K-loop: innermost store-free MMA loop (with ncu counts, the one whose MMAs execute
        the most); None when K is fully unrolled or there are no MMAs."""
        return next((lp for lp in self.loops if lp.primary), None)

    @property
    def tile_loop(self) -> Loop | None:
        """The loop around the K-loop, or (K unrolled) the MMA loop that holds the epilogue."""
        k = self.kloop
        if k is not None:
            p = k.parent
            while p is not None and self.loops[p].kind == "kloop":
                p = self.loops[p].parent
            return self.loops[p] if p is not None and self.loops[p].kind == "tile" else None
        tiles = [lp for lp in self.loops if lp.kind == "tile"]
        return max(tiles, key=lambda lp: (lp.own_mma, -lp.depth)) if tiles else None

    def reclassify(self) -> None:
        """Re-label the loops once ncu counts are attached (the K-loop is then the busiest)."""
        self.kloop_status = classify_loops(self.function, self.loops, self.executed)

    def kloop_summary(self) -> dict:
        """What kind of region the K-loop budget stands on: ``kind`` is ``kloop`` (with the loop id),
        ``unrolled`` (K fully unrolled: the tile loop, or straight-line code, issues every MMA) or
        ``no_mma``; ``text`` says it in one line."""
        k, t = self.kloop, self.tile_loop
        d: dict = {"kind": self.kloop_status, "kloop": k.id if k else None, "tile_loop": t.id if t else None}
        if k is not None:
            hot = self.steady_state(k).get("hot_instructions") if self.executed is not None else None
            d["text"] = (
                f"K-loop: loop {k.id} ({k.size} instructions, {k.own_mma} MMA"
                + (f"; {hot} on its hot path" if hot and hot < k.size else "")
                + ")"
                + (
                    f", flattened with the tile loop (the epilogue's {k.flattened} output store(s) run on a "
                    "tile's last k-block, in blocks other passes go around)"
                    if k.flattened
                    else ""
                )
                + (
                    f" inside tile loop {t.id}"
                    + (f", which issues a peeled k-block of {t.own_mma} MMA" if t.own_mma else "")
                    if t is not None
                    else ""
                )
                + (
                    f"; it carries its sums from pass to pass, so its {k.pass_stores} store(s) a pass are "
                    "another result's partial sums, not its epilogue"
                    if k.pass_stores
                    else ""
                )
            )
            if self.executed is not None:
                d["text"] += "; picked by executed MMAs (ncu)"
            else:
                copies = self.kloop_copies
                if len(copies) > 1:
                    # a template may compile its K-loop several times behind a run-time branch
                    # (DeepGEMM at BLOCK_N 192: three); the SASS alone cannot say which one runs
                    d["kloop_copies"] = [lp.id for lp in copies]
                    d["text"] += (
                        f"; one of {len(copies)} K-loops of {k.own_mma} MMA side by side there "
                        "(copies a run-time branch picks between; shown: the smallest; an .ncu-rep "
                        "with counts picks the one that ran)"
                    )
            promote = self.promotion_loops
            if promote:
                d["promotion_loops"] = [lp.id for lp in promote]
                d["text"] += "; " + "; ".join(self._promotion_text(lp, k) for lp in promote)
        elif self.kloop_status == UNROLLED:
            d["text"] = (
                f"K fully unrolled: no K-loop; tile loop {t.id} issues all {t.mma} MMA of a tile"
                if t is not None
                else f"K fully unrolled: the {self.mma_count} MMA sit in no loop"
            )
        else:
            d["text"] = "no MMA instructions: no K-loop"
        return d

    @property
    def kloop_copies(self) -> list[Loop]:
        """The K-loop and the K-loops beside it in the same parent that issue as many MMAs of their
        own: copies of one K-loop, of which each launch runs one."""
        k = self.kloop
        if k is None:
            return []
        return sorted(
            (lp for lp in self.kloops if lp.parent == k.parent and lp.own_mma == k.own_mma and lp.depth == k.depth),
            key=lambda lp: lp.header_start or 0,
        )

    @property
    def promotion_loops(self) -> list[Loop]:
        """Loops of other warps that promote the K-loop's partial sums (``loops.is_promotion_loop``)."""
        return [lp for lp in self.loops if lp.kind == "promote"]

    def _promotion_text(self, lp: Loop, k: Loop) -> str:
        ops = self.opcode_counts(lp.instructions, with_modifiers=False)
        parts = ", ".join(f"{ops[o]} {o}" for o in ("LDTM", "FFMA", "FFMA2", "FADD", "FADD2") if ops.get(o))
        return (
            f"promotion loop {lp.id} in other warps ({lp.size} instructions a pass: {parts}) reads the "
            f"partial sums from tensor memory beside the K-loop's {k.size}"
        )

    def categories(self, indices: Iterable[int] | None = None) -> dict[str, int]:
        ins = self.instructions if indices is None else [self.instructions[i] for i in indices]
        return dict(Counter(i.category for i in ins))

    def opcode_counts(self, indices: Iterable[int] | None = None, *, with_modifiers: bool = True) -> dict[str, int]:
        ins = self.instructions if indices is None else [self.instructions[i] for i in indices]
        return dict(Counter(i.opcode if with_modifiers else i.base for i in ins))

    def count(self, pattern: str, indices: Iterable[int] | None = None) -> int:
        """Instructions whose opcode (with modifiers) starts with ``pattern``, or matches it as a regex
        when it contains regex metacharacters (``UTC.MMA``, ``.*2CTA``)."""
        ins = self.instructions if indices is None else [self.instructions[i] for i in indices]
        if re.search(r"[\\^$*+?()\[\]|{}]", pattern):
            rx = re.compile(pattern)
            return sum(1 for i in ins if rx.search(i.opcode))
        return sum(1 for i in ins if i.opcode.startswith(pattern))

    def has(self, pattern: str) -> bool:
        return self.count(pattern) > 0

    @property
    def mma_count(self) -> int:
        return sum(1 for i in self.instructions if i.category == "mma")

    def feature_flags(self) -> dict[str, bool]:
        return {k: bool(f.present) for k, f in self.features.items()}

    def executed_by_opcode(self, indices: Iterable[int] | None = None) -> dict[str, int]:
        """ncu's executed counts summed per base opcode (empty without counts)."""
        if self.executed is None:
            return {}
        out: Counter = Counter()
        for i in range(len(self.instructions)) if indices is None else indices:
            out[self.instructions[i].base] += int(self.executed[i])
        return dict(out)

    def executed_in(self, indices: Iterable[int]) -> int | None:
        if self.executed is None:
            return None
        return int(sum(self.executed[i] for i in indices))

    def steady_state(self, lp: Loop) -> dict:
        """With ncu counts: executed instructions per executed MMA in the loop's own blocks, and the
        instructions that run at least half as often as its MMAs (the hot path, not the prologue,
        epilogue or rare branches the natural loop also contains)."""
        if self.executed is None or not lp.own_mma:
            return {}
        own = lp.own_instructions
        mma_ex = [self.executed[i] for i in own if self.instructions[i].category == "mma"]
        peak = max(mma_ex)
        if peak == 0:
            return {"executed_per_mma": None, "hot_instructions": 0}
        hot = [i for i in own if self.executed[i] >= 0.5 * peak]
        return {
            "executed_per_mma": round(sum(self.executed[i] for i in own) / sum(mma_ex), 2),
            "hot_instructions": len(hot),
            "hot_categories": self.categories(hot),
        }

    def loop_dict(self, lp: Loop) -> dict:
        cats = self.categories(lp.instructions)
        head = self.instructions[lp.instructions[0]] if lp.instructions else None
        d = {
            "depth": lp.depth,
            "instructions": lp.size,
            "mma": lp.mma,
            "categories": cats,
            "is_kloop": lp.is_kloop,
            "kind": lp.kind,
            "primary": lp.primary,
            "output_stores": lp.stores,
            "flattened_epilogue_stores": lp.flattened,
            "pass_stores": lp.pass_stores,
            "own_mma": lp.own_mma,
            "own_instructions": len(lp.own_instructions),
            "id": lp.id,
            "parent": lp.parent,
            "start_pc": head.pc if head is not None else None,
            "start_index": lp.instructions[0] if lp.instructions else None,
            "header_pc": self.instructions[lp.header_start].pc if lp.header_start is not None else None,
            "overhead_per_mma": round((lp.size - lp.mma) / lp.mma, 2) if lp.mma else None,
            "opcodes": self.opcode_counts(lp.instructions),
        }
        lines = sorted({i.line for i in (self.instructions[j] for j in lp.instructions) if i.line is not None})
        if lines:
            d["source_lines"] = [lines[0], lines[-1]]
        if self.executed is not None:
            d["executed"] = self.executed_in(lp.instructions)
            d.update(self.steady_state(lp))
        if self.roles is not None:
            d["roles"] = dict(Counter(self.roles[j] for j in lp.instructions))
        return d

    def to_dict(self) -> dict:
        """The JSON contract of ``bsprof sass --json`` (extended, never renamed)."""
        d = {
            "name": self.name,
            "arch": self.arch,
            "instructions": len(self.instructions),
            "categories": self.categories(),
            "loops": [self.loop_dict(lp) for lp in self.loops],
            "features": self.feature_flags(),
            "unclassified": list(self.unclassified),
            "mma": self.mma_count,
            "blocks": len(self.cfg.blocks),
            "has_line_info": self.function.has_line_info,
            "feature_evidence": {k: f.to_dict() for k, f in self.features.items()},
            "opcodes": self.opcode_counts(),
            "source": self.source,
            "notes": list(self.notes),
            "kloop_summary": self.kloop_summary(),
        }
        if self.executed is not None:
            d["executed"] = int(sum(self.executed))
        if self.stalls is not None:
            d["stall_samples"] = int(sum(sum(s.values()) for s in self.stalls))
        if self.roles is not None:
            d["roles_source"] = self.roles_source
            d["roles"] = dict(Counter(self.roles))
        if self.launch_info:
            d["launch"] = dict(self.launch_info)
        return d


def analyze_function(fn: Function, source: str = "") -> FunctionAnalysis:
    unknown = classify(fn.instructions, fn.arch)
    cfg = build_cfg(fn)
    loops = find_loops(fn, cfg)
    fa = FunctionAnalysis(
        function=fn, cfg=cfg, loops=loops, unclassified=unknown, features=detect_features(fn, loops), source=source
    )
    fa.reclassify()
    if cfg.unresolved:
        fa.notes.append(f"{len(cfg.unresolved)} branch(es) with unresolved targets (indirect or outside the listing)")
    if unknown:
        fa.notes.append(f"opcodes not in the {fn.arch or 'default'} table (counted as 'other'): {shown_list(unknown)}")
    return fa


def shown_list(names: list[str], most: int = 20) -> str:
    """``names`` for a note: at most ``most`` of them, and a count of the rest."""
    more = f" (+{len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def require_sass(functions: list[Function], where: str) -> None:
    """Refuse text in which no line is a SASS instruction a table knows: a file that only looks like a
    listing (a log, a README, one long line of anything) is not analyzed as one."""
    from bsprof.analyzers.sass.classify import OTHER, classify_opcode
    from bsprof.analyzers.sass.opcodes import arch_family

    seen = 0
    for fn in functions:
        family = arch_family(fn.arch)
        for ins in fn.instructions:
            if classify_opcode(ins.opcode, family) != OTHER:
                return
            seen += 1
    raise BsprofError(
        f"{where}: not a SASS listing ({seen} instruction-like line(s), none a SASS opcode bsprof "
        "knows); pass a .cubin, nvdisasm -c / cuobjdump --dump-sass output or an .ncu-rep"
    )


def select_functions(functions: list[Function], pattern: str | None, where: str) -> list[Function]:
    if not functions:
        raise BsprofError(
            f"{where}: not an ELF/cubin, fatbin or SASS listing (no instructions found); "
            "pass a .cubin, nvdisasm/cuobjdump --dump-sass output or an .ncu-rep"
        )
    if pattern is None:
        return functions
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise BsprofError(f"--function {pattern!r} is not a valid regular expression ({exc})") from None
    picked = [fn for fn in functions if rx.search(fn.name)]
    if not picked:
        names = ", ".join(_short(fn.name) for fn in functions[:20])
        more = f" (+{len(functions) - 20} more)" if len(functions) > 20 else ""
        raise BsprofError(
            f"--function {pattern!r} matches none of the {len(functions)} function(s) in {where}: {names}{more}"
        )
    return picked


def _short(name: str, width: int = 80) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
