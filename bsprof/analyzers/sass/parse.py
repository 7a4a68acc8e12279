"""SASS text -> functions of instructions.

Reads the three dialects we meet: ``nvdisasm [-c] [-g|-gi]`` (labels ``.L_x_N``, ``//## File`` line
info), ``cuobjdump --dump-sass`` (``Function : name`` headers, hex targets, encoding comments) and the
per-PC text ncu stores (no address, no ``;``, absolute hex targets). A line that is not an
instruction is skipped, never an error: listings carry directives, encodings and comments we ignore.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field

# `/*0a30*/   @!UP0 BRA.U UP4, `(.L_x_0) ;   /* 0x... */`   (address and `;` optional for ncu text).
# The head (address, brace, guard, opcode) is one regex whose optional parts each end where the
# next cannot begin, so a failed match never retries a split; the tail (operands, `;`, comments)
# is cut with str methods. One regex over the whole line had adjacent whitespace/operand
# quantifiers that backtracked polynomially on padded lines (seconds per line).
_HEAD_RE = re.compile(
    r"(?:/\*([0-9a-fA-F]+)\*/)?\s*(?:[{}]\s*)?(?:(@!?U?P(?:[0-7]|T))\s+)?"
    r"([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
)
# The common whole line, address to `;` and at most one encoding comment (nvdisasm's, cuobjdump's),
# read in one match (parse_sass spent half its time cutting these lines apart with str methods).
# Its parts cannot overlap either (one space before the operands, `[^;]*` up to the first `;`);
# a line it refuses goes through parse_instruction, which reads the lines it takes the same way.
_FAST_RE = re.compile(
    r"/\*([0-9a-fA-F]+)\*/ *(?:(@!?U?P(?:[0-7]|T)) +)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"(?: ([^;]*))?;(?: +/\* 0x[0-9a-fA-F]+ \*/)?$"
)
# nvdisasm marks some instructions with a quoted note before the `;`: `STL [R1], R3  (*"SpillRefill"*)`
# the longest opcode with its modifiers in any nvdisasm listing is ~40 characters; a longer word is
# no instruction (and would otherwise reach every table and note as an "unknown opcode")
MAX_OPCODE_CHARS = 96
_NOTE_RE = re.compile(r'\s*\(\*"[^"]*"\*\)')
_LABEL_RE = re.compile(r"^\s*(\.L_[A-Za-z0-9_]+|[A-Za-z_$.][\w$.]*):\s*(?://.*)?$")
_LINE_RE = re.compile(r'//##\s*File\s+"(?P<file>[^"]*)",\s*line\s+(?P<line>\d+)(?P<rest>.*)$')
_INLINED_RE = re.compile(r'inlined at\s+"(?P<file>[^"]*)",\s*line\s+(?P<line>\d+)')
_NVDISASM_FUNC_RE = re.compile(r"^//-+\s+\.text\.(?P<name>\S+)\s+-+")
_CUOBJDUMP_FUNC_RE = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)")
_TARGET_RE = re.compile(r"^\s*\.target\s+(?P<arch>sm_\w+)")
_CUOBJ_ARCH_RE = re.compile(r"code for (?P<arch>sm_\w+)")
# a source line number longer than this is not one (and int() refuses numbers over 4,300 digits)
_MAX_LINE_DIGITS = 9
# the second 64-bit word of an instruction's encoding, on the line after it (``nvdisasm -hex``, cuobjdump)
_HIGH_WORD_RE = re.compile(r"/\* 0x([0-9a-fA-F]{16}) \*/$")
# where the control bits start in that word: bit 105 of the instruction
CONTROL_SHIFT = 41
_HEADERFLAGS_RE = re.compile(r'\.headerflags\s+@"[^"]*EF_CUDA_SM(?P<num>\d+)')


@dataclass(slots=True)
class Instruction:
    """One SASS instruction. ``opcode`` keeps its modifiers (``UTCHMMA.2CTA``); ``base`` drops them."""

    index: int
    opcode: str
    operands: str
    guard: str | None = None
    pc: int | None = None
    file: str | None = None
    line: int | None = None
    # inlined-at chain, innermost call site first: ((file, line), ...)
    inlined_at: tuple[tuple[str, int], ...] = ()
    category: str = "other"
    text: str = ""
    # opcode without modifiers; derived once (it is read for every instruction by every pass)
    base: str = ""
    # the control bits of the instruction's encoding (``nvdisasm -hex``, cuobjdump), sm_70 on: bits 105-127
    # of the 128-bit word, which say which scoreboards it sets and waits on; None where the listing has none
    control: int | None = None

    def __post_init__(self) -> None:
        if not self.base:
            self.base = self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    def locations(self) -> list[tuple[str, int]]:
        """Every source location this instruction maps to: its own, then its inlining call sites."""
        own = [(self.file, self.line)] if self.file is not None and self.line is not None else []
        return own + list(self.inlined_at)


@dataclass
class Function:
    name: str
    arch: str | None
    instructions: list[Instruction] = field(default_factory=list)
    # label -> index of the instruction it precedes
    labels: dict[str, int] = field(default_factory=dict)
    has_line_info: bool = False
    # "nvdisasm" | "cuobjdump" | "ncu" | "text"
    dialect: str = "text"
    # ncu gives absolute PCs: instructions keep offsets from this base (so they compare with a
    # cubin's), branch targets in the text stay absolute
    pc_base: int = 0

    def __len__(self) -> int:
        return len(self.instructions)


def _strip_comments(tail: str) -> str | None:
    """``tail`` without an optional brace and trailing ``/* ... */`` comments (no ``*`` inside);
    ``None`` when anything else is left."""
    t = tail.strip()
    if t[:1] in ("{", "}"):
        t = t[1:].lstrip()
    while t.startswith("/*"):
        star = t.find("*", 2)
        if star < 0 or t[star + 1 : star + 2] != "/":
            return None
        t = t[star + 2 :].lstrip()
    return t


def _rstrip_comments(text: str) -> str:
    """``text`` without trailing ``/* ... */`` comments (no ``*`` inside) and then one brace."""
    t = text.rstrip()
    while t.endswith("*/"):
        start = t.rfind("/*", 0, len(t) - 2)
        if start < 0 or "*" in t[start + 2 : -2]:
            break
        t = t[:start].rstrip()
    if t[-1:] in ("{", "}"):
        t = t[:-1].rstrip()
    return t


def parse_instruction(line: str, index: int = 0) -> Instruction | None:
    """Parse one instruction line; ``None`` when the line is not an instruction. Linear in the line."""
    s = line.strip()
    m = _HEAD_RE.match(s)
    if m is None:
        return None
    addr, guard, op = m.group(1, 2, 3)
    if len(op) > MAX_OPCODE_CHARS:
        return None
    rest = s[m.end() :]
    semi = rest.find(";")
    if semi >= 0:
        tail = rest[semi + 1 :].strip()
        # the usual tails: nothing, or one `/* 0x... */` encoding comment
        if (
            tail
            and not (tail[:2] == "/*" and tail.find("*", 2) == len(tail) - 2 and tail[-1] == "/")
            and _strip_comments(tail) != ""
        ):
            return None
        rest = rest[:semi]
    else:
        rest = _rstrip_comments(rest)
    # Directives (`.section`), bare words and labels look like opcodes; real operands start after
    # whitespace, and a real opcode is never followed by ':'.
    if rest and not rest[0].isspace():
        return None
    return Instruction(
        index=index,
        opcode=op,
        operands=_operands(rest),
        guard=guard,
        pc=int(addr, 16) if addr is not None else None,
        text=s,
        base=op.partition(".")[0],
    )


def _operands(text: str) -> str:
    """The operand text without nvdisasm's quoted notes (``(*"SpillRefill"*)``)."""
    if "(*" in text:
        text = _NOTE_RE.sub("", text)
    return text.strip()


_MISS = object()


def _line_info(s: str) -> tuple[str, int, tuple[tuple[str, int], ...]] | None:
    """(file, line, inlined-at chain) of a ``//## File`` comment line; ``None`` for any other comment."""
    lm = _LINE_RE.search(s)
    if lm is None or len(lm.group("line")) > _MAX_LINE_DIGITS:
        return None
    chain = tuple(
        (im.group("file"), int(im.group("line")))
        for im in _INLINED_RE.finditer(lm.group("rest"))
        if len(im.group("line")) <= _MAX_LINE_DIGITS
    )
    return lm.group("file"), int(lm.group("line")), chain


def parse_sass(text: str, default_arch: str | None = None) -> list[Function]:
    """Split a listing into functions. Text with no function header becomes one function ``<sass>``."""
    # One object per instruction and none in a reference cycle: the cyclic collector's passes over
    # the growing heap found nothing to free and were a third of the parse of a 50,000-instruction
    # listing in a fresh process.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_sass(text, default_arch)
    finally:
        if was_enabled:
            gc.enable()


def _without_encoding(s: str) -> tuple[str, bool]:
    """An instruction line without its trailing encoding comment (``/* 0x... */``), as listings without
    encodings read, and whether it had one (the next line then holds the encoding's second word)."""
    k = s.rfind("/* 0x")
    return (s[:k].rstrip(), True) if k > 0 else (s, False)


def _parse_sass(text: str, default_arch: str | None) -> list[Function]:
    functions: list[Function] = []
    current: Function | None = None
    arch = default_arch
    pending_loc: tuple[str, int, tuple[tuple[str, int], ...]] | None = None
    dialect = "text"
    pending_labels: list[str] = []
    loc_cache: dict[str, tuple[str, int, tuple[tuple[str, int], ...]] | None] = {}

    def start(name: str) -> Function:
        nonlocal pending_loc, pending_labels
        fn = Function(name=name, arch=arch, dialect=dialect)
        functions.append(fn)
        pending_loc = None
        pending_labels = []
        return fn

    no_loc: tuple = (None, None, ())
    # whether the line before was an instruction with its encoding's first word: the line after it holds the
    # second word, whose control bits the instruction takes
    enc_before = False
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        was_enc, enc_before = enc_before, False
        if current is not None and s.startswith("/*"):
            # the bulk of a listing, read in one match straight into the function
            fast = _FAST_RE.match(s)
            if fast is not None and len(fast.group(3)) <= MAX_OPCODE_CHARS:
                addr, guard, op, ops = fast.groups()
                if s[-1] == "/":
                    s, enc_before = _without_encoding(s)
                instrs = current.instructions
                file, line, chain = pending_loc or no_loc
                instrs.append(
                    Instruction(
                        len(instrs),
                        op,
                        _operands(ops) if ops else "",
                        guard,
                        int(addr, 16),
                        file,
                        line,
                        chain,
                        "other",
                        s,
                        op.partition(".")[0],
                    )
                )
                if pending_labels:
                    for lab_name in pending_labels:
                        current.labels[lab_name] = len(instrs) - 1
                    pending_labels = []
                continue
        if s.startswith("//"):
            # a listing repeats few distinct line-info lines (one per source line) many times
            loc = loc_cache.get(s, _MISS)
            if loc is _MISS:
                loc = loc_cache[s] = _line_info(s)
            if loc is not None:
                pending_loc = loc
                if current is not None:
                    current.has_line_info = True
                continue
            fm = _NVDISASM_FUNC_RE.match(s)
            if fm is not None:
                dialect = "nvdisasm"
                current = start(fm.group("name"))
            continue
        if s.startswith(".L_") and "headerflags" not in s:
            # the bulk of the dot lines: branch labels (never a .target or .headerflags line)
            lab = _LABEL_RE.match(s)
            if lab is not None:
                if current is not None:
                    pending_labels.append(lab.group(1))
                continue
        if s.startswith("."):
            tm = _TARGET_RE.match(s)
            if tm is not None:
                arch = tm.group("arch")
                if current is not None and not current.instructions:
                    current.arch = arch
                continue
            hm = _HEADERFLAGS_RE.search(s)
            if hm is not None and arch is None:
                arch = f"sm_{hm.group('num')}"
            lab = _LABEL_RE.match(s)
            if lab is not None and current is not None:
                pending_labels.append(lab.group(1))
            continue
        if s.startswith("/*"):
            # an address-prefixed line (the bulk of a listing): an instruction or cuobjdump's
            # encoding line; the header, arch and label patterns below cannot match it
            if s.endswith("*/") and "*/" not in s[2:-2]:
                high = _HIGH_WORD_RE.match(s) if was_enc and current is not None and current.instructions else None
                if high is not None:
                    current.instructions[-1].control = int(high.group(1), 16) >> CONTROL_SHIFT
                continue
            ins = parse_instruction(s)
        else:
            cm = _CUOBJDUMP_FUNC_RE.match(s)
            if cm is not None:
                dialect = "cuobjdump"
                current = start(cm.group("name"))
                continue
            am = _CUOBJ_ARCH_RE.search(s) if "code for" in s else None
            if am is not None and "/*" not in s:
                arch = am.group("arch")
                continue
            lab = _LABEL_RE.match(s)
            if lab is not None:
                if current is not None:
                    pending_labels.append(lab.group(1))
                continue
            ins = parse_instruction(s)
        if ins is None:
            continue
        if current is None:
            keep = pending_loc
            current = start("<sass>")
            pending_loc = keep  # line info before the first instruction of a header-less listing
            current.has_line_info = keep is not None
        ins.index = len(current.instructions)
        if pending_loc is not None:
            ins.file, ins.line, ins.inlined_at = pending_loc
        for lab_name in pending_labels:
            current.labels[lab_name] = ins.index
        pending_labels = []
        if ins.text.endswith("*/"):
            ins.text, enc_before = _without_encoding(ins.text)
        current.instructions.append(ins)
    for fn in functions:
        if fn.arch is None:
            fn.arch = arch
    return [fn for fn in functions if fn.instructions] or functions[:0]


def function_from_pcs(name: str, arch: str | None, pcs: list[int], texts: list[str]) -> Function:
    """Build a function from (pc, text) pairs, as ncu's SourceCounters give them."""
    fn = Function(name=name, arch=arch, dialect="ncu", pc_base=min(pcs) if pcs else 0)
    for pc, text in zip(pcs, texts):
        ins = parse_instruction(text)
        if ins is None:
            # keep the PC so per-PC counts stay aligned; an unparsable line is an unknown opcode
            ins = Instruction(
                index=0, opcode=(text.strip().split() or ["?"])[0].upper() or "?", operands="", text=text.strip()
            )
        ins.index = len(fn.instructions)
        ins.pc = pc - fn.pc_base
        fn.instructions.append(ins)
    return fn
