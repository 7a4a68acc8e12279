"""parse_sass reads the common instruction line (address, optional guard, opcode, operands, `;`, at
most one encoding comment) in one match and every other line through parse_instruction: whatever
the line, the listing's instruction is exactly the one parse_instruction reads from it, and the
one-match pattern stays linear on padded lines."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from conftest import unxz_text
from hypothesis import given, settings
from hypothesis import strategies as st

from bsprof.analyzers.sass.parse import parse_instruction, parse_sass

FIXTURE = Path(__file__).parent / "data" / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
HEADER = "//--------------------- .text.k --------------------------"
REAL = sorted({ln.strip() for ln in unxz_text(FIXTURE).splitlines() if ln.strip().startswith("/*")})
# the dialects' other shapes: cuobjdump's encoding comment, guards, braces, no operands
REAL += [
    "/*0020*/                   LDC R4, c[0x0][0x140] ;                                      /* 0x00005000ff047b82 */",
    "/*0030*/ @!UP0 BRA.U UP4, `(.L_x_0) ;",
    "/*0040*/ { @P1 IADD3 R1, R2, R3 ; }",
    "/*0050*/ EXIT ;",
    "/*0060*/ NOP;",
    "/*0070*/ @PT BAR.SYNC.DEFER_BLOCKING 0x0 ; /* 0x0 */ /* 0x1 */",
]
EDIT_CHARS = " ;*/@!.{}0x,[]URPTabcdef\t"


def _fields(ins) -> tuple:
    d = dataclasses.asdict(ins)
    return tuple(d[k] for k in ("opcode", "operands", "guard", "pc", "text", "base", "category"))


@settings(max_examples=600, derandomize=True, deadline=None)
@given(
    st.sampled_from(REAL),
    st.lists(
        st.tuples(st.integers(0, 200), st.sampled_from(EDIT_CHARS), st.sampled_from(["insert", "delete", "replace"])),
        max_size=4,
    ),
)
def test_listing_reads_each_line_as_parse_instruction_does(line, edits):
    for pos, ch, how in edits:
        i = pos % (len(line) + 1)
        line = (
            line[:i] + ch + line[i:]
            if how == "insert"
            else line[:i] + line[i + 1 :]
            if how == "delete"
            else line[:i] + ch + line[i + 1 :]
        )
    one = parse_instruction(line)
    fns = parse_sass(f"{HEADER}\n{line}\n")
    got = fns[0].instructions if fns else []
    if one is None:
        # not an instruction to parse_instruction: the listing keeps none either (or a label)
        assert got == []
    else:
        assert [_fields(x) for x in got] == [_fields(one)]


def test_real_listing_every_instruction_as_parse_instruction_reads_it():
    (fn,) = parse_sass(unxz_text(FIXTURE))
    assert len(fn.instructions) == 816
    by_text = {ln: parse_instruction(ln) for ln in REAL}
    assert all(_fields(ins) == _fields(by_text[ins.text]) for ins in fn.instructions)


def test_one_match_pattern_is_linear_on_padded_lines():
    pad = " " * 5000
    lines = [
        f"/*0a30*/ MOV R1, R2 {pad}x",
        f"/*0a30*/{pad}@P0{pad}x",
        f"/*0010*/ @!UP0 BRA.U UP4 {pad};{pad}/* 0x00 */{pad}x",
        f"/*0010*/ MOV {pad};{pad}/* 0x000fe2 */ {pad}/",
        f"/*0010*/ MOV R1{pad}",
        f"/*0010*/ @P0 {pad}",
    ]
    listing = "\n".join([HEADER] + lines * 40)
    t = time.perf_counter()
    parse_sass(listing)
    elapsed = time.perf_counter() - t
    assert elapsed < 0.5, f"{len(lines) * 40} padded lines took {elapsed:.2f} s"
