"""Parser: the three SASS dialects, line info, labels, and no crash on mutated lines."""

from __future__ import annotations

import subprocess

import pytest
from conftest import unxz_text, unxz_to
from hypothesis import given, settings
from hypothesis import strategies as st

from bsprof.analyzers.sass import analyze_sass_text
from bsprof.analyzers.sass.cfg import build_cfg
from bsprof.analyzers.sass.disasm import tool_path
from bsprof.analyzers.sass.parse import parse_instruction, parse_sass

FIXTURE = "sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a"  # .cubin.xz and .sass.xz


def test_nvdisasm_text_functions_arch_and_line_info(data_dir):
    fns = parse_sass(unxz_text(data_dir / f"{FIXTURE}.sass.xz"))
    assert len(fns) == 1
    fn = fns[0]
    assert fn.arch == "sm_100a"
    assert fn.dialect == "nvdisasm"
    assert fn.has_line_info
    assert len(fn.instructions) == 816
    first = fn.instructions[0]
    assert (first.pc, first.opcode, first.operands) == (0, "LDC", "R1, c[0x0][0x37c]")
    assert first.file == "/tmp/cex/bdg.py" and first.line == 535
    # labels point at the instruction they precede
    assert fn.instructions[fn.labels[".L_x_0"]].pc == 0x240


def test_guard_and_uniform_predicate_operand():
    ins = parse_instruction("        /*0a30*/              @!UP0 BRA.U UP4, `(.L_x_0) ;")
    assert ins is not None
    assert ins.guard == "@!UP0" and ins.opcode == "BRA.U" and ins.base == "BRA"
    assert ins.modifiers == ("U",) and ins.pc == 0xA30
    ncu = parse_instruction("@UP1  SYNCS.EXCH.64 URZ, [UR7], UR10")
    assert ncu.guard == "@UP1" and ncu.opcode == "SYNCS.EXCH.64" and ncu.pc is None


def test_non_instructions_are_skipped():
    for line in [
        "",
        '  .section .text.foo,"ax",@progbits',
        ".L_x_3:",
        '//## File "a.py", line 3',
        "        /* 0x000fe40000000800 */",
        "\t.align 128",
        "Function : foo",
    ]:
        assert parse_instruction(line) is None, line


def test_bra_u_with_uniform_predicate_is_conditional():
    text = "\n".join(
        [
            "/*0000*/ UISETP.NE.U32.AND UP4, UPT, UR35, 0x5, UPT ;",
            "/*0010*/ BRA.U UP4, `(.L_x_0) ;",
            "/*0020*/ NOP ;",
            ".L_x_0:",
            "/*0030*/ EXIT ;",
        ]
    )
    fn = parse_sass(text)[0]
    cfg = build_cfg(fn)
    entry = cfg.blocks[cfg.block_of[1]]
    # both the target and the fall-through
    assert sorted(cfg.block_of[cfg.blocks[s].start] for s in entry.succs) == sorted({cfg.block_of[2], cfg.block_of[3]})


def test_cuobjdump_dialect_matches_nvdisasm(data_dir, tmp_path):
    cubin = unxz_to(data_dir / f"{FIXTURE}.cubin.xz", tmp_path)
    out = subprocess.run(
        [tool_path("cuobjdump"), "--dump-sass", str(cubin)], capture_output=True, text=True, check=True
    ).stdout
    fns = parse_sass(out)
    assert len(fns) == 1 and fns[0].dialect == "cuobjdump"
    assert fns[0].arch.startswith("sm_100")
    fa = analyze_sass_text(out)[0]
    # same instruction stream as nvdisasm, and hex branch targets resolve to the same K-loop
    assert len(fa.instructions) == 816
    assert [(lp.size, lp.mma) for lp in fa.kloops] == [(87, 4)]


def test_unknown_opcode_goes_to_other_and_is_listed():
    fa = analyze_sass_text(
        "/*0000*/ FROBNICATE.X R1, R2 ;\n/*0010*/ IADD3 R1, R1, 0x1, RZ ;\n/*0020*/ EXIT ;", arch="sm_100a"
    )[0]
    assert fa.unclassified == ["FROBNICATE"]
    assert fa.categories() == {"other": 1, "int": 1, "control": 1}


_LINE = "        /*01a0*/                   @!UP0 UIADD3 UR8, UP0, UPT, UR4, 0x40, URZ ;  /* 0x0000004004087890 */"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_parser_never_crashes_on_mutated_lines(data):
    line = list(_LINE)
    for _ in range(data.draw(st.integers(0, 8))):
        op = data.draw(st.sampled_from(["del", "ins", "sub"]))
        if not line and op != "ins":
            continue
        pos = data.draw(st.integers(0, max(0, len(line) - 1)))
        ch = data.draw(st.characters(blacklist_categories=("Cs",)))
        if op == "del":
            del line[pos]
        elif op == "ins":
            line.insert(pos, ch)
        else:
            line[pos] = ch
    text = "".join(line)
    parse_instruction(text)
    fns = parse_sass(text + "\n" + "/*0000*/ BRA `(.L_x_9) ;\n.L_x_9:\n" + text)
    for fn in fns:
        build_cfg(fn)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=30))
def test_listing_of_arbitrary_lines_never_crashes(lines):
    text = "\n".join(lines)
    if text.strip():
        try:
            analyze_sass_text(text)
        except Exception as exc:  # only the one-line user error is allowed
            from bsprof.errors import BsprofError

            assert isinstance(exc, BsprofError), exc


@pytest.mark.parametrize(
    "fam, opcode, cat",
    [
        ("sm_90a", "QGMMA.64x128x32.F32.E4M3.E4M3", "mma"),
        ("sm_90a", "WARPGROUP.DEPBAR.LE", "tc_control"),
        ("sm_100a", "UTCQMMA.2CTA", "mma"),
        ("sm_100a", "UTCBAR.2CTA.MULTICAST", "tc_control"),
        ("sm_100a", "LDTM.16", "tmem"),
        ("sm_100a", "UTCCP.T.S.4x32dp128bit", "tmem"),
        ("sm_100a", "IMAD.MOV.U32", "move"),
        ("sm_100a", "IMAD.WIDE.U32", "int"),
        ("sm_100a", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "sync"),
        ("sm_100a", "UTMALDG.3D.2CTA", "tma"),
        ("sm_100a", "R2UR", "uniform"),
        ("sm_100a", "LDL.64", "local"),
        ("sm_90a", "UTCHMMA", "other"),
    ],
)
def test_per_arch_tables(fam, opcode, cat):
    from bsprof.analyzers.sass.classify import classify_opcode
    from bsprof.analyzers.sass.opcodes import arch_family

    assert classify_opcode(opcode, arch_family(fam)) == cat


def test_nvdisasm_spill_note_is_not_an_operand():
    # nvdisasm writes `(*"SpillRefill"*)` before the `;` of a spill (DeepGEMM's sm90 1d1d kernel)
    listing = "\n".join(
        [
            "\t.target\tsm_90a",
            "//--------------------- .text.k --------------------------",
            '        /*0070*/                   STL [R1], R3                                                (*"SpillRefill"*);',
            '        /*04c0*/                   LDL R2, [R1]                                                (*"SpillRefill"*);',
        ]
    )
    (fn,) = parse_sass(listing)
    assert [(i.opcode, i.operands) for i in fn.instructions] == [("STL", "[R1], R3"), ("LDL", "R2, [R1]")]
    assert parse_instruction('/*04c0*/ LDL R2, [R1]  (*"SpillRefill"*) ;').operands == "R2, [R1]"


# four instructions of the bundled FP8 kernel's K-loop (sfb_tma=0,sfb_smem=0, 256x128 tile) as
# `nvdisasm -c -hex` prints them: the B scale's load sets scoreboard 1 and the FMUL after the K block's
# last wgmma is the first to wait on it
_HEX_LOOP = """\
        .target sm_90a
        /*1fc0*/                   LDG.E R209, desc[UR46][R148.64+-0x8] ;                       /* 0xfffff82e94d17981 */
                                                                                                /* 0x000e62000c1e1900 */
        /*1fd0*/                   UMOV UR35, 0x40000040 ;                                      /* 0x4000004000237882 */
                                                                                                /* 0x000fe20000000000 */
        /*20f0*/                   QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], R24, gsb0 ;  /* 0x01e00000141879f3 */
                                                                                                /* 0x000fe20008000818 */
        /*2100*/                   FMUL R191, R206, R209.reuse ;                                /* 0x000000d1cebf7220 */
                                                                                                /* 0x082fe20000400000 */
"""


def test_control_bits_say_which_instruction_waits_for_a_load():
    """The encoding's second word carries the scoreboards: the load sets one, the FMUL waits on it, the
    others wait on nothing of it. In program order the wait comes after the wgmma issued (covered); with
    the FMUL moved above the wgmma it would hold the wgmma back (exposed)."""
    from bsprof.analyzers.sass.classify import classify
    from bsprof.analyzers.sass.scoreboard import has_control, waited_before_mma, waits_on, write_scoreboard

    (fn,) = parse_sass(_HEX_LOOP)
    ins = fn.instructions
    classify(ins, fn.arch)
    assert has_control(fn.arch, ins)
    ldg, umov, mma, fmul = ins
    assert write_scoreboard(ldg) == 1 and write_scoreboard(umov) is None and write_scoreboard(fmul) is None
    assert waits_on(fmul, 1) and not waits_on(umov, 1) and not waits_on(mma, 1)
    assert waited_before_mma(ins, [0, 1, 2, 3], 0) is False
    assert waited_before_mma(ins, [0, 1, 3, 2], 0) is True
    assert waited_before_mma(ins, [0, 1, 2, 3], 1) is None  # sets no scoreboard
    # text without encodings (ncu's, `nvdisasm -c`) has no control bits to read
    (plain,) = parse_sass(
        "\n".join(ln.split(";")[0] + " ;" for ln in _HEX_LOOP.splitlines() if "0x" in ln and "/*1" in ln)
    )
    assert not has_control("sm_90a", plain.instructions)
