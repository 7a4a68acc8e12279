"""Warp role / phase of every instruction, from line info and the kernel's Python source.

With ``CUTE_DSL_LINEINFO=1`` nvdisasm ``-gi`` puts ``//## File "k.py", line N [inlined at ...]``
before each run of instructions. We read ``k.py`` with ``ast`` and find, innermost first:

1. ``with Scope("name")`` / ``with WarpScope("name", ...)`` blocks (``cutlass.utils.profiling``),
   and the flat form ``s = WarpScope("A", ...)`` ... ``s.switch("B", ...)`` ... ``s.close()``;
2. warp-dispatch ``if`` blocks whose test compares a warp index with a ``*warp*`` attribute
   (``if warp_idx == self.tma_warp_id:`` -> ``tma_warp``);
3. the enclosing function (``def mainloop``).

An instruction takes the label of the first location in its inlining chain (innermost first) that
lies in the kernel file. With no line info, or no readable source, the regions are the loops, and
``roles_source`` / ``notes`` say so.
"""

from __future__ import annotations

import ast
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from bsprof.analyzers.sass.parse import Instruction

SCOPE_CLASSES = {"Scope", "WarpScope"}
OUTSIDE = "(outside scopes)"


@dataclass(frozen=True)
class Interval:
    start: int
    end: int  # inclusive
    label: str
    kind: str  # "scope" | "warp-if" | "function"
    # a warp-if whose test is an equality (``warp_idx == self.epi_store_warp``): one warp runs its body
    one_warp: bool = False


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return None


def _scope_label(call: ast.Call) -> str | None:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.Tuple) and all(isinstance(e, ast.Constant) for e in arg.elts):
        return "/".join(str(e.value) for e in arg.elts)
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in arg.values)
    return None


def _warp_if_label(test: ast.AST) -> str | None:
    """`warp_idx == self.tma_warp_id` -> 'tma_warp'.

    Only equality / membership names a role: `warp_idx < self.mma_warp_id` selects the warps
    *before* the MMA warp (the epilogue warps in NVIDIA's layouts), so an ordering test says nothing
    about which role the body runs.
    """
    if not isinstance(test, ast.Compare) or not all(isinstance(op, (ast.Eq, ast.In)) for op in test.ops):
        return None
    names = []
    for node in [test.left, *test.comparators]:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                names.append(sub.attr)
            elif isinstance(sub, ast.Name):
                names.append(sub.id)
    if not any("warp" in n.lower() for n in names):
        return None
    for n in names:
        low = n.lower()
        if "warp" in low and not low.endswith(("idx", "index")) and low not in ("warp_id", "warpid"):
            return low.removesuffix("_id").removesuffix("_ids").removesuffix("_idx")
    return None


def scopes_from_source(text: str) -> list[Interval]:
    """Every labelled interval of the source, outermost first."""
    return parse_source(text)[0]


def parse_source(text: str) -> tuple[list[Interval], dict[str, list[int]]]:
    """(intervals, {called name: [call-site lines]})."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):  # not Python, NUL bytes, absurd nesting
        return [], {}
    out: list[Interval] = []
    calls: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        end = getattr(node, "end_lineno", None)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and end is not None:
            # decorators (@cute.kernel) carry line info of their own: they belong to the function
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out.append(Interval(start, end, node.name, "function"))
            out.extend(_flat_scopes(node))
        elif isinstance(node, (ast.With, ast.AsyncWith)) and end is not None:
            for item in node.items:
                if _call_name(item.context_expr) in SCOPE_CLASSES:
                    label = _scope_label(item.context_expr)  # type: ignore[arg-type]
                    if label:
                        out.append(Interval(node.lineno, end, label, "scope"))
        elif isinstance(node, ast.If) and end is not None:
            label = _warp_if_label(node.test)
            if label:
                body_end = node.body[-1].end_lineno or end
                one = all(isinstance(op, ast.Eq) for op in node.test.ops)  # type: ignore[attr-defined]
                out.append(Interval(node.lineno, body_end, label, "warp-if", one_warp=one))
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            if name:
                calls.setdefault(name, []).append(node.lineno)
    out.sort(key=lambda iv: (iv.start, -iv.end))
    return out, calls


def _flat_scopes(fn: ast.AST) -> list[Interval]:
    """`s = WarpScope("A")` ... `s.switch("B")` ... `s.close()` inside one function."""
    events: list[tuple[int, str, str | None]] = []  # (line, var, label or None for close)
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and _call_name(node.value) in SCOPE_CLASSES
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            events.append((node.lineno, node.targets[0].id, _scope_label(node.value)))  # type: ignore[arg-type]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            if node.func.attr == "switch":
                events.append((node.lineno, node.func.value.id, _scope_label(node) or "?"))
            elif node.func.attr == "close":
                events.append((node.lineno, node.func.value.id, None))
    out = []
    end_of_fn = getattr(fn, "end_lineno", 0) or 0
    by_var: dict[str, list[tuple[int, str | None]]] = {}
    for line, var, label in sorted(events):
        by_var.setdefault(var, []).append((line, label))
    for seq in by_var.values():
        if not any(lbl for _, lbl in seq):
            continue
        for k, (line, label) in enumerate(seq):
            if label is None:
                continue
            stop = seq[k + 1][0] - 1 if k + 1 < len(seq) else end_of_fn
            out.append(Interval(line, max(line, stop), label, "scope"))
    return out


class LineMap:
    """line -> role/phase label over one source file.

    CuTe DSL line info names only the innermost Python line (no inlined-at chain), so code in a
    helper (``def _issue``) would lose the scope its caller opened. A helper therefore inherits the
    scope path of its call sites in this file (their common prefix when they disagree).
    """

    def __init__(self, intervals: list[Interval], calls: dict[str, list[int]] | None = None):
        self.scopes = [iv for iv in intervals if iv.kind != "function"]
        self.functions = [iv for iv in intervals if iv.kind == "function"]
        self.calls = calls or {}
        names = [f.label for f in self.functions]
        self._unique = {n for n in names if names.count(n) == 1}
        self.has_scopes = any(iv.kind == "scope" for iv in self.scopes)
        self.one_warp = frozenset(iv.label for iv in self.scopes if iv.one_warp)
        self._ctx: dict[str, tuple[str, ...]] = {}
        self._labels: dict[int, tuple[str, str] | None] = {}

    def function_at(self, line: int) -> Interval | None:
        best = None
        for f in self.functions:
            if f.start <= line <= f.end and (best is None or f.start >= best.start):
                best = f
        return best

    def scope_path(self, line: int, within: Interval | None) -> tuple[str, ...]:
        lo = within.start if within is not None else 0
        hits = [iv for iv in self.scopes if iv.start <= line <= iv.end and iv.start >= lo]
        hits.sort(key=lambda iv: (iv.start, -iv.end))
        return tuple(dict.fromkeys(iv.label for iv in hits))

    def context(self, fname: str, _stack: frozenset = frozenset()) -> tuple[str, ...]:
        if fname in self._ctx:
            return self._ctx[fname]
        if fname in _stack or fname not in self._unique:
            return ()
        paths = []
        for line in self.calls.get(fname, []):
            caller = self.function_at(line)
            if caller is None or caller.label == fname:
                continue
            paths.append(self.context(caller.label, _stack | {fname}) + self.scope_path(line, caller))
        paths = [p for p in paths if p]
        common: tuple[str, ...] = ()
        if paths:
            common = paths[0]
            for p in paths[1:]:
                k = 0
                while k < min(len(common), len(p)) and common[k] == p[k]:
                    k += 1
                common = common[:k]
        if not _stack:  # only memoize complete answers (not ones cut short by recursion)
            self._ctx[fname] = common
        return common

    def label(self, line: int) -> tuple[str, str] | None:
        if line in self._labels:
            return self._labels[line]
        fn = self.function_at(line)
        path = (self.context(fn.label) if fn is not None else ()) + self.scope_path(line, fn)
        out: tuple[str, str] | None
        if path:
            kinds = {iv.kind for iv in self.scopes if iv.label in path}
            out = "/".join(dict.fromkeys(path)), ("scope" if "scope" in kinds else "warp-if")
        elif fn is not None:
            out = f"{fn.label}()", "function"
        else:
            out = None
        self._labels[line] = out
        return out


@functools.lru_cache(maxsize=32)
def _load_linemap(path: str, mtime: float) -> LineMap:
    return LineMap(*parse_source(Path(path).read_text(errors="replace")))


@functools.lru_cache(maxsize=8)
def _linemap_of_text(text: str) -> LineMap:
    return LineMap(*parse_source(text))


def linemap_for(path: str) -> LineMap | None:
    """The line map of the source file at ``path``, or None where no regular file can be read there."""
    # a directory, device or unreadable file is no source: regions fall back to loops
    try:
        st = os.stat(path)
        return _load_linemap(path, st.st_mtime) if stat.S_ISREG(st.st_mode) else None
    except OSError:
        return None


def _pick_source(instructions: list[Instruction], kernel_source) -> tuple[str | None, dict[str, str]]:
    """Map each file named in the line info to a readable path; the kernel file is the most cited."""
    counts: dict[str, int] = {}
    for ins in instructions:
        if ins.file is not None and ins.line is not None:  # ins.locations(), without a list per instruction
            counts[ins.file] = counts.get(ins.file, 0) + 1
        for f, _ in ins.inlined_at:
            counts[f] = counts.get(f, 0) + 1
    resolved: dict[str, str] = {}
    explicit = Path(kernel_source) if kernel_source else None
    for f in counts:
        if explicit is not None and (Path(f).name == explicit.name or len(counts) == 1):
            resolved[f] = str(explicit)
        elif os.path.isfile(f):
            resolved[f] = f
    main = max(counts, key=counts.get) if counts else None
    return main, resolved


def attribute(fa, kernel_source: str | os.PathLike | None = None, embedded: dict[str, str] | None = None) -> None:
    """Fill ``fa.roles`` (one label per instruction) and ``fa.roles_source``. ``embedded``: source
    text an .ncu-rep carries, by the path its line info names. It is the text the line numbers
    were taken from, so it wins over the file at that path (which may have changed since the
    profile); an explicit ``kernel_source`` wins over both."""
    ins_list = fa.instructions
    if not fa.function.has_line_info and not any(i.file for i in ins_list):
        _by_loops(fa, "no line info in the SASS (compile with CUTE_DSL_LINEINFO=1 / -lineinfo): regions are loops")
        return
    main, resolved = _pick_source(ins_list, kernel_source)
    maps = {} if kernel_source else {f: _linemap_of_text(text) for f, text in (embedded or {}).items() if text}
    # the files on disk only for what the report does not carry (no parse of a file it replaces)
    maps.update({f: lm for f, p in resolved.items() if f not in maps and (lm := linemap_for(p)) is not None})
    if not maps:
        _by_loops(fa, f"kernel source {main!r} not readable here (pass --source FILE): regions are loops")
        return
    roles: list[str] = []
    kinds: set[str] = set()
    for ins in ins_list:
        label = None
        for f, line in ins.locations():
            lm = maps.get(f)
            if lm is None:
                continue
            hit = lm.label(line)
            if hit is not None:
                label, kind = hit
                kinds.add(kind)
                if kind != "function":
                    break
        roles.append(label or OUTSIDE)
    fa.roles = roles
    fa.one_warp_roles = frozenset().union(*(lm.one_warp for lm in maps.values()))
    if "scope" in kinds:
        fa.roles_source = "scope"
    elif "warp-if" in kinds:
        fa.roles_source = "warp-if"
        fa.notes.append("no profiling.Scope blocks in the source: roles from warp-dispatch `if` blocks and functions")
    else:
        fa.roles_source = "function"
        fa.notes.append("no Scope blocks or warp-dispatch ifs in the source: regions are enclosing functions")


def _by_loops(fa, note: str) -> None:
    labels = ["(straight-line)"] * len(fa.instructions)
    # outermost first, so inner loops overwrite
    for lp in sorted(fa.loops, key=lambda lp: lp.depth):
        kind = {"kloop": " (K-loop)", "tile": " (tile loop)"}.get(lp.kind, "")
        tag = f"loop{lp.id}{kind} d{lp.depth}"
        for i in lp.instructions:
            labels[i] = tag
    fa.roles = labels
    fa.roles_source = "loops"
    fa.roles_missing = note.removesuffix(": regions are loops")
    if note not in fa.notes:
        fa.notes.append(note)
