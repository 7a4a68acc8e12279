"""SASS analysis: what a kernel's instructions are, where its K-loop is, which features it uses.

Public API (no GPU needed; every bad input raises :class:`bsprof.errors.BsprofError`)::

    from bsprof.analyzers.sass import analyze_cubin, analyze_sass_text, analyze_ncu_report, features

    fas = analyze_cubin("kernel.cubin")                 # list[FunctionAnalysis], one per kernel
    fa = analyze_cubin("kernel.cubin", function="Gemm")[0]   # --function REGEX semantics
    fa.count("UTCQMMA")          # opcode-prefix count (modifiers included: "UTCHMMA.2CTA")
    fa.count(r"\\.2CTA")          # regex when the pattern has regex characters
    fa.has("UTMASTG"), fa.mma_count, fa.categories(), fa.opcode_counts()
    fa.kloops                    # loops whose own blocks issue MMAs: .size, .mma, .own_mma,
                                 # .instructions / .own_instructions (indices into fa.instructions)
    fa.loops                     # every natural loop (dominator based): .depth, .parent, .is_kloop
    fa.features["register_spills"].present        # Feature(present, evidence lines, note, value)
    fa.features["multi_stage_pipeline"].value     # stages, when the K-loop's stage ring shows them
    features("kernel.cubin")     # {function name: {feature: bool}} in one call
    fa.to_dict()                 # the `bsprof sass --json` contract for one function

    analyze_sass_text(text)                          # nvdisasm / cuobjdump --dump-sass / ncu text
    analyze_path("kernel.sm_90a.cubin.xz")           # any path may be xz-compressed (X.cubin.xz, X.sass.xz)
    analyze_ncu_report("r.ncu-rep", kernel=None)     # SourceCounters: per-PC executed + stall samples
                                                     # in fa.executed / fa.stalls; fa.steady_state(loop)

    from bsprof.analyzers.sass.budget import region_rows, mma_detail, stalls_by_category, attach_counts
    region_rows(fa, by="loops" | "roles", tiles=N)   # per-region table rows (the --csv / --json rows)
    mma_detail(fa)                                   # the --mma-detail dict

Feature names: tma_load, tma_multicast, tma_store_epilogue, simt_global_stores, mma_2cta,
block_scaled_mma, tmem_copy, multi_stage_pipeline, tma_cache_hint, persistent_tile_loop,
register_spills.

Modules, one job each: ``disasm`` (nvdisasm/cuobjdump), ``parse`` (text -> instructions),
``opcodes`` + ``classify`` (data tables in ``bsprof/data/sass_opcodes.json``), ``cfg`` (basic
blocks), ``loops`` (dominators, natural loops, K-loops), ``features``, ``roles`` (line info ->
warp role / phase scopes), ``ncu_source`` (SourceCounters), ``budget`` (per-region tables, MMA
detail), ``compare`` (A vs B), ``analyze`` (ties them together).
"""

from __future__ import annotations

import os
from pathlib import Path

from bsprof.analyzers.ncu_loader import is_report
from bsprof.analyzers.sass.analyze import FunctionAnalysis, analyze_function, require_sass, select_functions
from bsprof.analyzers.sass.features import Feature
from bsprof.analyzers.sass.parse import Function, Instruction, parse_sass
from bsprof.errors import BsprofError

__all__ = [
    "Feature",
    "Function",
    "FunctionAnalysis",
    "Instruction",
    "analyze_cubin",
    "analyze_ncu_report",
    "analyze_path",
    "analyze_sass_text",
    "features",
    "list_functions",
]


def analyze_sass_text(
    text: str,
    function: str | None = None,
    *,
    arch: str | None = None,
    where: str = "the listing",
    kernel_source: str | os.PathLike | None = None,
) -> list[FunctionAnalysis]:
    """Analyze SASS text (nvdisasm, cuobjdump --dump-sass, or one instruction per line)."""
    if not text.strip():
        raise BsprofError(
            f"{where}: empty SASS listing; disassemble with nvdisasm -c -gi <cubin> or pass the cubin itself"
        )
    parsed = parse_sass(text, default_arch=arch)
    if parsed:
        require_sass(parsed, where)
    fns = select_functions(parsed, function, where)
    out = [analyze_function(fn, source=where) for fn in fns]
    _attach_roles(out, kernel_source)
    return out


def analyze_cubin(
    path: str | os.PathLike, function: str | None = None, *, kernel_source: str | os.PathLike | None = None
) -> list[FunctionAnalysis]:
    """Disassemble a cubin / fatbin / executable (``nvdisasm -c -hex -gi``) and analyze each kernel."""
    from bsprof.analyzers.sass.disasm import disassemble

    fns: list[Function] = []
    for _label, text in disassemble(path):
        fns.extend(parse_sass(text))
    picked = select_functions(fns, function, str(path))
    out = [analyze_function(fn, source=str(path)) for fn in picked]
    _attach_roles(out, kernel_source)
    return out


def analyze_ncu_report(
    path: str | os.PathLike,
    kernel: str | None = None,
    *,
    launch: int | None = None,
    cubin: str | os.PathLike | None = None,
    kernel_source: str | os.PathLike | None = None,
) -> list[FunctionAnalysis]:
    """Analyze the SASS stored in an .ncu-rep's SourceCounters, with per-PC executed counts and
    stall samples attached (``fa.executed``, ``fa.stalls``). ``kernel`` is a regex on the launch name."""
    from bsprof.analyzers.sass.budget import attach_counts
    from bsprof.analyzers.sass.features import refine_with_launch
    from bsprof.analyzers.sass.ncu_source import read_source_counters

    out = []
    for sc in read_source_counters(path, kernel=kernel, launch=launch):
        fa = analyze_function(sc.function, source=f"{path}#{sc.launch}")
        attach_counts(fa, sc)
        refine_with_launch(fa.features, fa.launch_info)
        _attach_roles([fa], kernel_source, sc.sources)
        out.append(fa)
    return out


def analyze_path(path: str | os.PathLike, function: str | None = None, **kw) -> list[FunctionAnalysis]:
    """Dispatch on the file: .ncu-rep, CUDA ELF/fatbin/executable, or SASS text; any of them may be
    xz-compressed (``X.cubin.xz``, ``X.sass.xz``, ``X.ncu-rep.xz``)."""
    from bsprof.analyzers.sass.disasm import sniff
    from bsprof.io import check_input, read_input_bytes, unpacked

    p = Path(path)
    check_input(p, fix="pass a .cubin, fatbin, executable, .sass listing or .ncu-rep")  # a FIFO: refused, unread
    if is_report(p):
        return analyze_ncu_report(p, kernel=function, **kw)
    real = unpacked(p)  # what is read; sources and messages name p
    if real.stat().st_size == 0:
        raise BsprofError(f"{p}: the file is empty; pass a .cubin or a SASS listing (nvdisasm -c -gi <cubin>)")
    if sniff(real) != "text":
        return analyze_cubin(p, function, **kw)
    try:
        text = read_input_bytes(real).decode("utf-8")
    except UnicodeDecodeError:
        raise BsprofError(
            f"{p}: not an ELF/cubin, fatbin or SASS text; pass a .cubin, a .sass listing or an .ncu-rep"
        ) from None
    return analyze_sass_text(text, function, where=str(p), **kw)


def features(path_or_text: str | os.PathLike, function: str | None = None) -> dict[str, dict[str, bool]]:
    """{function name: {feature: present}} for a cubin/listing path or raw SASS text."""
    if isinstance(path_or_text, str) and ("\n" in path_or_text or not os.path.exists(path_or_text)):
        fas = analyze_sass_text(path_or_text, function)
    else:
        fas = analyze_path(path_or_text, function)
    return {fa.name: fa.feature_flags() for fa in fas}


def list_functions(path: str | os.PathLike) -> list[str]:
    from bsprof.analyzers.sass.disasm import disassemble

    return [fn.name for _l, text in disassemble(path) for fn in parse_sass(text)]


def _attach_roles(fas: list[FunctionAnalysis], kernel_source, embedded: dict[str, str] | None = None) -> None:
    from bsprof.analyzers.sass.roles import attribute

    for fa in fas:
        attribute(fa, kernel_source, embedded)
