"""`bsprof sass` as one call: inputs -> :class:`SassResult` (the JSON contract and its CSV rows).

The verb parses options and hands the result to a renderer (``bsprof.reports.sass_text`` for the
terminal, JSON and CSV; ``bsprof.reports.sec_sass`` for HTML). Everything a renderer prints comes
from ``SassResult.data``; lines the user must read (what could not be attributed, where a tile size
came from, regions that are not comparable) are in ``SassResult.notes``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from bsprof import artifacts
from bsprof.analyzers.ncu_loader import is_report, resolve_report
from bsprof.analyzers.sass.analyze import FunctionAnalysis
from bsprof.errors import BsprofError

CSV_FIXED = [
    "function",
    "region",
    "kind",
    "depth",
    "is_kloop",
    "instructions",
    "mma",
    "overhead_per_mma",
    "executed",
    "executed_per_tile",
    "mma_executed",
    "stall_samples",
]


@dataclass
class SassResult:
    data: dict
    by: str = "loops"
    notes: list[str] = field(default_factory=list)

    @property
    def is_compare(self) -> bool:
        return "compare" in self.data


def analyze_inputs(
    paths: Sequence[str | os.PathLike],
    *,
    function: str | None = None,
    source: str | os.PathLike | None = None,
    ncu: str | os.PathLike | None = None,
    launch: int | None = None,
    tiles: Sequence[int | None] = (),
    mnkl: tuple[int, int, int, int] | None = None,
    tile_mn: Sequence[tuple[int, int] | str] = (),
    bundled_tiles: dict[int, tuple[tuple[int, int], str]] | None = None,
    by: str = "loops",
    mma_detail: bool = False,
    hot: int | None = None,
) -> SassResult:
    """Analyze one input, or two (A then B) compared. Per-tile budgets: ``tiles[i]`` is side i's
    output-tile count; else, with the problem ``mnkl``, the tile from ``tile_mn`` (given once for
    every side or once per side; ``"auto"`` leaves a side to what follows), the tile of a bundled
    kernel we built (``bundled_tiles``: side -> (tile, its spec)), the tile the kernel's own name
    spells (cuBLAS nvjet, DeepGEMM; for a report, its launch's mangled and demangled names too), or
    the tile bsprof's launcher recorded in the report's NVTX range; a side whose tile is unknown is
    an error, never a guess, and a ``mnkl`` other than the problem a report recorded is refused."""
    if not paths or len(paths) > 2:
        raise BsprofError("pass one input, or two to compare (baseline then optimized)")
    tile_mn, notes = given_tiles(len(paths), list(tile_mn), bundled_tiles or {}, mnkl)
    # a bsprof result directory stands for the one report in it, as in `bsprof ncu --report`
    paths = [resolve_report(p) for p in paths]
    if launch is not None and ncu is None and not any(is_report(p) for p in paths):
        # a cubin or listing has no launches: the index would be silently dropped
        raise BsprofError(
            f"--launch picks a launch of an .ncu-rep (an input or --ncu REPORT); "
            f"{' and '.join(Path(p).name for p in paths)} {'holds' if len(paths) == 1 else 'hold'} no launches: "
            "drop --launch"
        )
    analyses = [_analyze(Path(p), function, source, ncu, launch) for p in paths]
    per_side = [
        _side_tiles(i, len(paths), fas, Path(p), list(tiles), mnkl, list(tile_mn), notes)
        for i, (p, fas) in enumerate(zip(paths, analyses))
    ]
    if by == "roles":
        notes += roles_notes([fa for fas in analyses for fa in fas])
    sides = [
        {"source": str(p), "functions": [_function_json(fa, mma_detail, t, hot) for fa in fas]}
        for p, fas, t in zip(paths, analyses, per_side)
    ]
    if len(analyses) == 2:
        from bsprof.analyzers.sass.compare import compare, pair_functions

        cmps = [compare(a, b, (per_side[0], per_side[1])) for a, b in pair_functions(analyses[0], analyses[1])]
        notes += [
            f"{c['a']['name'][:40]} vs {c['b']['name'][:40]}: K-loop {c['kloop']['mismatch']}"
            for c in cmps
            if c["kloop"]["mismatch"]
        ]
        # the contract's top-level functions are the optimized side's
        data = {
            "bsprof": artifacts.tag("sass"),
            "mode": "compare",
            "compare": cmps,
            "a": sides[0],
            "b": sides[1],
            "functions": sides[1]["functions"],
        }
    else:
        data = {"bsprof": artifacts.tag("sass"), "source": sides[0]["source"], "functions": sides[0]["functions"]}
    if notes:
        data["notes"] = notes
    return SassResult(data=data, by=by, notes=notes)


def given_tiles(n: int, given: list, bundled: dict[int, tuple[tuple[int, int], str]], mnkl) -> tuple[list, list[str]]:
    """Each side's output tile (M, N) from the --tile-mn values or a bundled kernel's build; None
    where neither says (the kernel's name is read next, else the analysis refuses). The lines say
    where each tile came from."""
    if mnkl is None:
        if given:
            raise BsprofError("--tile-mn needs --mnkl M,N,K[,L] (the problem the launch computed)")
        return [None] * n, []
    if len(given) > n:
        raise BsprofError(
            f"--tile-mn given {len(given)} times for {n} input(s); give it once, or once per input (A then B)"
        )
    given = [None if t == "auto" else tuple(t) for t in given]
    out, notes = [], []
    for i in range(n):
        side = f"{'AB'[i]}: " if n == 2 else ""
        tmn = (given[i] if len(given) == n else given[0]) if given else None
        if tmn is not None:
            if n == 2 and len(given) == 1 and i == 0:
                notes.append(
                    f"tile {tmn[0]}x{tmn[1]} for A and B from the one --tile-mn for both inputs (give it twice, "
                    "A then B, if their tiles differ)"
                )
        elif i in bundled:
            tmn, spec = bundled[i]
            notes.append(f"{side}tile {tmn[0]}x{tmn[1]} from the bundled {spec} kernel's build for this problem")
        out.append(tmn)
    return out, notes


def _side_tiles(
    i: int, n: int, fas: list[FunctionAnalysis], path: Path, tiles: list, mnkl, tile_mn: list, notes: list[str]
) -> int | None:
    from bsprof.analyzers.ncu.facts import problem_of
    from bsprof.analyzers.sass.budget import tile_from_name, tiles_from_problem

    if i < len(tiles) and tiles[i] is not None:
        return tiles[i]
    if mnkl is None:
        return None
    tmn = tile_mn[i] if i < len(tile_mn) else None
    main = max(fas, key=lambda fa: (fa.mma_count, len(fa.instructions)))
    ran = main.recorded.get("mnkl")
    if problem_of(ran) not in (None, list(mnkl)):
        raise BsprofError(
            f"--mnkl {','.join(map(str, mnkl))}: {path.name} recorded the launch's problem as "
            f"{ran.replace('x', ',')}; pass that (or --tiles N)"
        )
    if tmn is None:
        side = f"{'AB'[i]}: " if n == 2 else ""
        named = next(filter(None, (tile_from_name(x) for x in (main.name, *main.aliases))), None)
        if named is not None:
            tmn = named[0]
            notes.append(f"{side}tile {tmn[0]}x{tmn[1]} read from the kernel name ({named[1]})")
        elif main.recorded.get("tile"):
            tmn = tuple(int(v) for v in main.recorded["tile"].split("x"))
            notes.append(f"{side}tile {tmn[0]}x{tmn[1]} recorded in the report by the launch (bsprof's NVTX range)")
        else:
            raise BsprofError(
                f"--mnkl: the output tile of {path.name} ({main.name[:50]}) is unknown; pass --tile-mn M,N "
                "(once per input to compare) or --tiles N"
            )
    return tiles_from_problem(mnkl, tmn)


def _analyze(path: Path, function, source, ncu, launch) -> list[FunctionAnalysis]:
    from bsprof.analyzers.sass import analyze_path
    from bsprof.analyzers.sass.budget import attach_counts
    from bsprof.analyzers.sass.features import refine_with_launch
    from bsprof.analyzers.sass.roles import attribute

    kw = {"kernel_source": source}
    if is_report(path) and launch is not None:
        kw["launch"] = launch
    fas = analyze_path(path, function, **kw)
    if ncu is not None:
        from bsprof.analyzers.sass.ncu_source import read_source_counters

        scs = read_source_counters(ncu, launch=launch)
        for fa in fas:
            match = [sc for sc in scs if sc.name == fa.name] or (scs if len(fas) == 1 else [])
            if not match:
                raise BsprofError(f"{ncu}: no launch named {fa.name[:60]}…; pass --function to pick the kernel")
            attach_counts(fa, match[0])
            refine_with_launch(fa.features, fa.launch_info)
            if fa.roles_source == "loops":  # the loop labels moved with the counts
                attribute(fa, source)
    return fas


def _function_json(fa: FunctionAnalysis, mma_detail: bool, tiles: int | None, hot: int | None) -> dict:
    from bsprof.analyzers.sass.budget import hot_instructions, region_rows, role_tables
    from bsprof.analyzers.sass.budget import mma_detail as detail

    d = fa.to_dict()
    d.update(role_tables(fa))
    d["regions"] = region_rows(fa, by="loops", tiles=tiles)
    if fa.roles is not None and fa.roles_source != "loops":
        d["role_regions"] = region_rows(fa, by="roles", tiles=tiles)
        d["roles_unattributed"] = unattributed(fa)
    elif fa.roles_missing:
        d["roles_unavailable"] = fa.roles_missing
    if tiles:
        d["tiles"] = tiles
    if mma_detail and fa.kloops:
        d["mma_detail"] = detail(fa)["kloops"]
    elif mma_detail and fa.tile_loop is not None and fa.tile_loop.own_mma:
        # K unrolled: the stream between MMA issues is the tile loop's (said so where it is shown)
        d["mma_detail"] = detail(fa, fa.tile_loop)["kloops"]
    if hot:
        d["hot"] = hot_instructions(fa, hot)
    return d


def unattributed(fa: FunctionAnalysis) -> dict:
    """Instructions (and MMAs) whose line info names no role, phase or function of the kernel source."""
    from bsprof.analyzers.sass.roles import OUTSIDE

    idx = [i for i, r in enumerate(fa.roles or []) if r == OUTSIDE]
    out = {
        "instructions": len(idx),
        "of": len(fa.instructions),
        "mma": sum(1 for i in idx if fa.instructions[i].category == "mma"),
    }
    if fa.executed is not None:
        out["executed"] = fa.executed_in(idx)
    return out


def roles_notes(fas: list[FunctionAnalysis]) -> list[str]:
    """What `--by roles` cannot attribute, one line per function that lacks something."""
    notes = []
    for fa in fas:
        name = fa.name if len(fa.name) <= 60 else fa.name[:59] + "…"
        if fa.roles is None or fa.roles_source == "loops":
            why = fa.roles_missing or "no role attribution"
            notes.append(
                f"--by roles: none of the {len(fa.instructions):,} instructions of {name} can be attributed "
                f"to a warp role ({why}); the table is by loops"
            )
            continue
        u = unattributed(fa)
        if u["instructions"]:
            notes.append(
                f"--by roles: {u['instructions']:,} of {u['of']:,} instructions of {name} ({u['mma']} MMA) have "
                "line info outside every scope, warp-dispatch if and function of the source: "
                "shown as '(outside scopes)'"
            )
    return notes


def csv_rows(result: SassResult) -> list[dict]:
    """The region table as flat rows (categories as ``cat_*``, stall reasons as ``stall_*``)."""
    rows = []
    for fn in result.data["functions"]:
        key = "role_regions" if result.by == "roles" and "role_regions" in fn else "regions"
        for r in fn[key]:
            row = {k: r.get(k) for k in CSV_FIXED if k != "function"}
            row["function"] = fn["name"]
            if key == "role_regions":
                row["kind"] = "role"
            for cat, v in r["categories"].items():
                row[f"cat_{cat}"] = v
            for reason, v in (r.get("stalls") or {}).items():
                row[f"stall_{reason}"] = v
            rows.append(row)
    return rows
