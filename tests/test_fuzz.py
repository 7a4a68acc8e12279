"""Property-based fuzzing of everything a user hands bsprof: SASS listings, ncu per-PC SASS text,
timing tables and every numeric flag. The property, for every input: a result, or a BsprofError
(or click usage error) of one line with exit code 2 — never another exception, never NaN/inf in
JSON, never a hang.

Inputs are mutations of real artifacts (the nvdisasm listing in tests/data/sass, the per-PC text
of a real H100 .ncu-rep, the shipped H100 timing table). The example budget and the seed are
fixed (derandomize): CI runs the same cases every time, in well under a minute.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_bsprof, unxz_bytes, unxz_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bsprof.errors import BsprofError

ROOT = Path(__file__).resolve().parent.parent
SASS = ROOT / "tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
NCU_REP = ROOT / "tests/data/h100_bsprof_fp8_optimized.ncu-rep.xz"
TIMING = ROOT / "bsprof/data/samples/run/timing_h100/timing.parquet"

FUZZ = settings(
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

# what breaks parsers: padding, unbalanced comments/braces, guards, huge and zero-led numbers,
# labels, headers, line info with absurd line numbers, non-ASCII
TOKENS = [
    " " * 300,
    "\t" * 50,
    ";",
    "{",
    "}",
    "/*",
    "*/",
    "/* 0x000fe2000b800000 */",
    "@P0 ",
    "@!UPT ",
    "@!P9 ",
    "0123",
    "0x" + "f" * 40,
    "9" * 5000,
    "0" * 4400 + "7",
    ".L_x_0:",
    ".L_x_999",
    "`(.L_x_0)",
    "BRA `(.L_x_1)",
    "Function : fuzz",
    "code for sm_" + "9" * 5000,
    ".target sm_90a",
    '.headerflags @"EF_CUDA_SM' + "9" * 4400,
    '//## File "/tmp/k.py", line ' + "1" * 5000,
    '//## File "/tmp/k.py", line 3 inlined at "/tmp/k.py", line 7',
    "UTCHMMA.2CTA",
    "HGMMA.64x128x32.F32",
    "ISETP.NE.AND P0, PT, R2, 00004, PT",
    "SEL R2, R3, RZ, P0",
    "UISETP.NE.AND UP0, UPT, UR4, 0x0000, UPT",
    "USEL UR4, UR5, URZ, UP0",
    "SYNCS.EXCH.64",
    "EXIT",
    "RET.ABS",
    "\u00e9\u4e2d",
    "\x00",
    "nan",
    "inf",
    "-",
    ":",
    ",",
    "[",
    "]",
    "\r",
    # what the promotion, drain, serialization and ring rules read
    "UTCBAR [UR35], URZ",
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8+0x18000], R14",
    "[UR8+0x" + "f" * 30 + "]",
    "UIADD3 UR35, UPT, UPT, UR8, 0x18000, URZ",
    "UMOV UR54, UR30",
    "LDTM.x32 R4, tmem[UR4]",
    "FFMA2 R1, R2, R3, R4",
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",
    "ISETP.GT.U32.AND P0, PT, R1.reuse, 0x3, PT",
    "SEL R2, R3, RZ, !P0",
    "@!PT LDS RZ, [RZ]",
    "STSM.16.M88 [R25], R28",
    "UTCQMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR9], idesc[UR10], tmem[UR11], UPT",
    # the accumulator rule: an MMA that starts a new sum
    "UTCOMMA.2CTA.4X gdesc[UR38], gdesc[UR36], tmem[UR15], tmem[UR58], idesc[UR59], tmem[UR10], !UPT",
    "QGMMA.64x128x32.F32.E4M3.E5M2 R88, gdesc[UR20], RZ, !UPT",
    ", RZ",
    ", !UPT",
    # the TMA policy read: EVICT_NORMAL from immediates
    "UMOV UR13, 0x10000000",
    "UMOV.64 UR6, 0x1000000000000000",
    "UMOV.64 UR7, 0x" + "f" * 20,
    "desc[UR12]",
    "desc[UR255]",
    # the reduction-workspace read: STG and float atomics on one address register
    "STG.E desc[UR14][R24.64], R133",
    "ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU PT, RZ, desc[UR14][R24.64+0x1000], R1",
    "ATOMG.E.ADD.F32 PT, RZ, desc[UR14][",
    "STG.E [R2.64+",
]
ALPHABET = ' \t;{}/*@!.,:_`()[]x0123456789abcdefABCDEFPRUZTLMOVSYNC"'


def _splice(lines: list[str], edits: list[tuple[int, int, int, str]]) -> list[str]:
    """Apply (kind, line, column, payload) edits: insert text, replace the rest of a line, drop,
    duplicate or swap lines, insert a new line."""
    out = list(lines) or [""]
    for kind, li, col, payload in edits:
        i = li % len(out)
        ln = out[i]
        c = col % (len(ln) + 1)
        if kind == 0:
            out[i] = ln[:c] + payload + ln[c:]
        elif kind == 1:
            out[i] = ln[:c] + payload
        elif kind == 2 and len(out) > 1:
            del out[i]
        elif kind == 3:
            out.insert(i, ln)
        elif kind == 4:
            j = (i + col) % len(out)
            out[i], out[j] = out[j], out[i]
        else:
            out.insert(i, payload)
    return out


payloads = st.one_of(st.sampled_from(TOKENS), st.text(alphabet=ALPHABET, max_size=24))
edits = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10_000), st.integers(0, 400), payloads), max_size=12)


def _json_strict(obj) -> str:
    """JSON the way a strict consumer reads it: NaN/inf are errors."""
    return json.dumps(obj, default=str, allow_nan=False)


def _one_line(err: BaseException) -> None:
    msg = str(err)
    assert msg.strip() and "\n" not in msg.strip(), f"not one line: {msg!r}"
    assert "Traceback" not in msg


@lru_cache(maxsize=1)
def _sass_lines() -> tuple[str, ...]:
    return tuple(unxz_text(SASS).splitlines())


def _analyze_everything(text: str) -> None:
    from bsprof.analyzers.sass import analyze_sass_text
    from bsprof.analyzers.sass.budget import mma_detail, region_rows, role_tables

    try:
        fas = analyze_sass_text(text, where="fuzz")
    except BsprofError as exc:
        _one_line(exc)
        return
    for fa in fas:
        d = fa.to_dict()
        d.update(role_tables(fa))
        d["regions"] = region_rows(fa, by="loops", tiles=7)
        if fa.roles is not None:
            d["role_regions"] = region_rows(fa, by="roles", tiles=7)
        if fa.kloops:
            d["mma_detail"] = mma_detail(fa)["kloops"]
        _json_strict(d)


@settings(FUZZ, max_examples=120)
@given(start=st.integers(0, 1300), length=st.integers(1, 260), edits=edits)
def test_mutated_sass_listing_is_a_result_or_one_line(start, length, edits):
    lines = _sass_lines()
    head = list(lines[:14])  # arch and function header, so most cases reach the analyzers
    window = list(lines[14 + start % (len(lines) - 14) :][:length])
    _analyze_everything("\n".join(_splice(head + window, edits)))


# kernels whose SASS carries the constructs the newer rules read: a promotion loop in other warps
# (CuTe DSL blockwise, sm_100a), a commit waited on in its own pass (Triton dot_scaled), a
# flattened persistent loop (Triton), serialized wgmma (CUTLASS built without -DNDEBUG), an sm_100
# MMA warp whose store-free tile loop peels the first k-block (CUTLASS C++ NVFP4)
FOREIGN = (
    "nvidia_blockwise_fp8_persistent_128x128_c1x1.sm_100a.cubin.xz",
    "triton_mxfp8_dot_scaled_128x128x128.sm_100a.cubin.xz",
    "triton_fp8_persistent_tma_128x128x128.sm_90a.cubin.xz",
    "cutlass_sm90_blockwise_fp8_128x128x128_c1x2_noNDEBUG.sm_90a.cubin.xz",
    "cutlass_sm100_nvfp4_256x256x256_c2x4.sm_100a.cubin.xz",
)


@lru_cache(maxsize=len(FOREIGN))
def _foreign_lines(name: str) -> tuple[str, ...]:
    from bsprof.analyzers.sass.disasm import disassemble

    ((_label, text),) = disassemble(ROOT / "tests/data/sass" / name)
    return tuple(text.splitlines())


@settings(FUZZ, max_examples=80)
@given(which=st.sampled_from(FOREIGN), start=st.integers(0, 4000), length=st.integers(20, 900), edits=edits)
def test_mutated_foreign_listing_is_a_result_or_one_line(which, start, length, edits):
    lines = _foreign_lines(which)
    head = [ln for ln in lines[:40] if not ln.lstrip().startswith("/*")][:12]
    window = list(lines[start % len(lines) :][:length])
    _analyze_everything("\n".join(_splice(head + window, edits)))


@settings(FUZZ, max_examples=25)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 10_000), st.integers(0, 400), payloads), min_size=1, max_size=6
    ),
    flags=st.lists(
        st.sampled_from(
            [
                "--features",
                "--mma-detail",
                "--json",
                "--csv",
                "--by=roles",
                "--hot=3",
                "--tiles=5",
                "--mnkl=1000,1000,64",
                "--tile-mn=256,256",
            ]
        ),
        max_size=4,
    ),
)
def test_mutated_sass_through_the_cli(tmp_path_factory, edits, flags):
    lines = list(_sass_lines())
    path = tmp_path_factory.mktemp("sass") / "k.sass"
    path.write_text("\n".join(_splice(lines, edits)))
    if "--mnkl=1000,1000,64" in flags and "--tile-mn=256,256" not in flags:
        flags = [*flags, "--tile-mn=256,256"]
    _cli_ok(["sass", str(path), *flags])


def _cli_ok(args: list[str]) -> str:
    """stdout of ``bsprof ARGS``; fails on anything but exit 0 or one ``error:`` line with exit 2."""
    try:
        code, stdout, stderr = run_bsprof(args)
    except Exception as exc:  # noqa: BLE001 - the property under test
        raise AssertionError(f"bsprof {' '.join(args)[:300]} raised {exc!r}") from exc
    if code != 0:
        assert_one_line_error(code, stderr)
    return stdout


# --------------------------------------------------------------------------------------------
# ncu-style per-PC text (no address, no ';', absolute hex branch targets), with counts attached


@lru_cache(maxsize=1)
def _ncu_texts() -> tuple[tuple[int, ...], tuple[str, ...]]:
    pytest.importorskip("ncu_report", reason="ncu_report (pip ncu-report) reads the .ncu-rep seed")
    from bsprof.analyzers.sass.ncu_source import read_source_counters

    sc = read_source_counters(NCU_REP)[0]
    fn = sc.function
    return tuple(i.pc + fn.pc_base for i in fn.instructions), tuple(i.text for i in fn.instructions)


@settings(FUZZ, max_examples=60)
@given(data=st.data(), start=st.integers(0, 3000), length=st.integers(1, 400))
def test_mutated_ncu_per_pc_text_is_a_result_or_one_line(data, start, length):
    from bsprof.analyzers.sass.analyze import analyze_function
    from bsprof.analyzers.sass.budget import attach_counts, hot_instructions, mma_detail, region_rows
    from bsprof.analyzers.sass.ncu_source import SourceCounters
    from bsprof.analyzers.sass.parse import function_from_pcs

    pcs_all, texts_all = _ncu_texts()
    s = start % len(texts_all)
    texts = _splice(list(texts_all[s : s + length]), data.draw(edits, label="edits"))
    base = data.draw(st.sampled_from([pcs_all[s], 0, 2**64 - 16 * len(texts)]), label="pc base")
    pcs = [base + 16 * k for k in range(len(texts))]
    counts = data.draw(st.lists(st.integers(0, 2**63 - 1), min_size=len(texts), max_size=len(texts)), label="executed")
    stalls = [{"long_scoreboard": c % 97} if c % 3 else {} for c in counts]
    fn = function_from_pcs("fuzz_kernel", "sm_90", pcs, texts)
    try:
        fa = analyze_function(fn, source="fuzz#0")
        sc = SourceCounters(
            launch=0,
            name="fuzz_kernel",
            function=fn,
            executed=counts,
            stalls=stalls,
            reasons=["long_scoreboard"],
            launch_info={"launch__grid_size": 132.0, "launch__sm_count": 132.0},
        )
        attach_counts(fa, sc)
        d = fa.to_dict()
        d["regions"] = region_rows(fa, by="loops", tiles=3)
        d["hot"] = hot_instructions(fa, 5)
        if fa.kloops:
            d["mma_detail"] = mma_detail(fa)["kloops"]
    except BsprofError as exc:
        _one_line(exc)
        return
    _json_strict(d)


# --------------------------------------------------------------------------------------------
# timing tables


@lru_cache(maxsize=1)
def _timing_seed():
    import pandas as pd

    t = pd.read_parquet(TIMING)
    return t[t["cta"] < 1].reset_index(drop=True)


COLUMN_NAMES = ["sm", "cta", "warp", "role", "tile", "phase", "start", "end"]
BAD_CELLS = [
    math.nan,
    math.inf,
    -math.inf,
    -1,
    0,
    -(2**40),
    2**62,
    2**70,
    1.5,
    "",
    "x",
    "1" * 5000,
    "kloop",
    "phase1",
    "mma",
    "epilogue",
    None,
]


@settings(FUZZ, max_examples=40)
@given(data=st.data(), fmt=st.sampled_from(["csv", "parquet"]))
def test_mutated_timing_table_is_a_result_or_one_line(tmp_path_factory, data, fmt):
    import pandas as pd

    from bsprof.analyzers import model as M
    from bsprof.analyzers.timing.table import load

    t = _timing_seed().astype(object)  # any cell may become any value
    n = len(t)
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        kind = data.draw(st.integers(0, 5), label="kind")
        i = data.draw(st.integers(0, n - 1), label="row")
        if kind <= 1:  # one bad cell
            col = data.draw(st.sampled_from(COLUMN_NAMES), label="column")
            t.at[i, col] = data.draw(st.sampled_from(BAD_CELLS), label="value")
        elif kind == 2:  # swap a row's stamps
            t.at[i, "start"], t.at[i, "end"] = t.at[i, "end"], t.at[i, "start"]
        elif kind == 3:  # drop every row of one phase
            t = t[t["phase"] != data.draw(st.sampled_from(["kloop", "phase1", "tma0", "load"]), label="phase")]
        elif kind == 4:  # shift one stamp
            t.at[i, "start"] = int(pd.to_numeric(t.at[i, "start"], errors="coerce") or 0) + data.draw(
                st.integers(-(10**6), 10**6), label="shift"
            )
        else:  # duplicate a row
            t = pd.concat([t, t.iloc[[i % len(t)]]], ignore_index=True)
        t = t.reset_index(drop=True)
        n = max(len(t), 1)
    path = tmp_path_factory.mktemp("timing") / f"timing.{fmt}"
    try:
        if fmt == "csv":
            t.to_csv(path, index=False)
        else:
            t.astype({c: str for c in COLUMN_NAMES}).to_parquet(path)
    except Exception:  # noqa: BLE001 - pandas/pyarrow refuse some mixes: no file, no case
        return
    try:
        table = load(path)
        params = M.calibrate(table)
        doc = M.project(params, {"kloop": "-5%"}, tiles=1000, seed=0).to_json()
    except BsprofError as exc:
        _one_line(exc)
        return
    _json_strict(doc)


# --------------------------------------------------------------------------------------------
# every numeric flag of every verb, through the CLI

NUMBERS = st.one_of(
    st.sampled_from(
        [
            "nan",
            "NaN",
            "inf",
            "-inf",
            "+inf",
            "1e400",
            "-1e400",
            "1e308",
            "-1e308",
            "0",
            "-0",
            "-1",
            "0.5",
            "1",
            "2",
            "7",
            "1000",
            "4096",
            "",
            " ",
            "1_000",
            "0x10",
            "1,5",
            "0,0",
            "-1,-1",
            "256,256",
            "256x128",
            "1,2,3",
            "9" * 5000,
            "5%",
            "-5%",
            "nan%",
            "inf%",
            "1e400%",
            "-100%",
            "-300",
            "300cyc",
            "\u0663",
            "1e-320",
            "4.9e-324",
            "1e12",
            "-1e12",
            "1e-300",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**80), 2**80).map(str),
)
# (verb args before the flag, flag): each verb with the cheapest input that reaches its checks;
# GPU verbs end in a one-line "no GPU" error after parsing their flags
FLAGS = [
    (["model", "--tiles", "1000"], f)
    for f in (
        "--kloop",
        "--phase1",
        "--tma0",
        "--phase2",
        "--acc-stages",
        "--epi-warps",
        "--release",
        "--handoff",
        "--seed",
    )
] + [
    (["model"], "--tiles"),
    (["model", "--tiles", "1000"], "--sweep=kloop"),
    (["sass", str(SASS)], "--tiles"),
    (["sass", str(SASS)], "--launch"),
    (["sass", str(SASS)], "--hot"),
    (["sass", str(SASS), "--mnkl", "4096,4096,4096"], "--tile-mn"),
    (["sass", str(SASS), "--tile-mn", "256,256"], "--mnkl"),
    (["ncu", "--report", str(ROOT / "tests/data/h100_cute_tiny.ncu-rep.xz")], "--flops"),
    (["ncu", "--kernel", "optimized"], "--warmup"),
    (["bench"], "--warmup"),
    (["bench"], "--iters"),
    (["bench"], "--seed"),
    (["bench"], "--sf-vec"),
    (["bench"], "--mma-tiler"),
    (["bench"], "--cluster"),
    (["bench"], "--mnkl"),
    (["timing", "--from", str(TIMING)], "--rounds"),
    (["timing", "--from", str(TIMING)], "--max-trace-events"),
]


def _strict_json_or_text(out: str) -> None:
    text = out.strip()
    if text.startswith(("{", "[")):
        json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(f"{c} in JSON output")))


@settings(FUZZ, max_examples=150)
@given(flag=st.sampled_from(FLAGS), value=NUMBERS, triple=st.tuples(NUMBERS, NUMBERS, NUMBERS))
def test_every_numeric_flag_is_a_result_or_one_line(tmp_path_factory, flag, value, triple):
    pre, name = flag
    if name == "--sweep=kloop":
        args = [*pre, f"--sweep=kloop={':'.join(triple)}"]
    else:
        args = [*pre, f"{name}={value}"]
    if args[0] in ("model", "ncu", "timing"):
        args.append("--json")
    out = _cli_ok(args)
    _strict_json_or_text(out)


@pytest.mark.parametrize(
    "spec",
    [
        "kloop=-1e12:1e12:1e-300",
        "kloop=0:1:5e-324",
        "kloop=nan:0:50",
        "kloop=0:inf:1",
        "phase1=-600:0:0",
        "kloop=-1e13:0:1",
    ],
)
def test_degenerate_sweeps_are_one_line(spec):
    code, _, err = run_bsprof(["model", "--tiles", "1000", "--sweep", spec, "--json"])
    assert_one_line_error(code, err)


def test_pathological_whitespace_parses_in_linear_time():
    """The instruction pattern once backtracked for ~9 s on one line padded with 300 spaces; a
    listing of such lines now parses like any other (the bound is generous: CI machines vary)."""
    import time

    from bsprof.analyzers.sass.parse import parse_instruction, parse_sass

    pad = " " * 3000
    lines = [
        f"/*0a30*/ MOV R1, R2 {pad}x",
        f"{pad}x",
        f"/*0a30*/{pad}@P0{pad}x",
        f"MOV{pad};{pad}/* a */{pad}x",
        f"MOV R1{pad}/*{pad}",
        f"/*0010*/ @!UP0 BRA.U UP4, `(.L_x_0) {pad};{pad}/* 0x000fe2 */{pad}",
        f"{pad}/*0020*/{pad}{{{pad}@P1{pad}IADD3 R1, R2, R3{pad};{pad}}}{pad}",
    ]
    t = time.perf_counter()
    for ln in lines * 20:
        parse_instruction(ln)
    parse_sass("\n".join(lines * 20))
    elapsed = time.perf_counter() - t
    assert elapsed < 0.5, f"{len(lines) * 40} padded lines took {elapsed:.2f} s"
    ins = parse_instruction(lines[5])
    assert ins is not None and (ins.opcode, ins.guard, ins.operands, ins.pc) == (
        "BRA.U",
        "@!UP0",
        "UP4, `(.L_x_0)",
        0x10,
    )
    ins = parse_instruction(lines[6])
    assert ins is not None and (ins.opcode, ins.guard, ins.operands) == ("IADD3", "@P1", "R1, R2, R3")


def test_leading_zero_and_huge_numbers_are_numbers_not_crashes():
    """Crash sites the fuzzer found: int(x, 0) refuses '004' (a decimal immediate nvdisasm can
    print), int() refuses decimal strings over 4,300 digits (line numbers, arch numbers)."""
    from bsprof.analyzers.sass import analyze_sass_text

    listing = "\n".join(
        [
            "\t.target\tsm_100a",
            "//--------------------- .text.k --------------------------",
            '\t//## File "/tmp/k.py", line ' + "1" * 5000,
            "        /*0000*/                   MOV R2, RZ ;",
            ".L_x_0:",
            '\t//## File "/tmp/k.py", line 12',
            "        /*0010*/                   UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR11], UPT ;",
            "        /*0020*/                   IADD3 R3, R2, 0x1, RZ ;",
            "        /*0030*/                   ISETP.NE.AND P0, PT, R3, 004, PT ;",
            "        /*0040*/                   SEL R2, R3, RZ, P0 ;",
            "        /*0050*/                   ISETP.NE.AND P1, PT, R5, R6, PT ;",
            "        /*0060*/              @P1  BRA `(.L_x_0) ;",
            "        /*0070*/                   EXIT ;",
        ]
    )
    (fa,) = analyze_sass_text(listing)
    assert len(fa.kloops) == 1
    assert fa.features["multi_stage_pipeline"].value == 4  # the stage ring '!= 004'
    assert fa.instructions[0].line is None and fa.instructions[1].line == 12  # 5,000 digits is no line
    (fa,) = analyze_sass_text(listing.replace("sm_100a", "sm_" + "9" * 5000))
    assert fa.mma_count == 1


@pytest.mark.parametrize(
    "damage, hint",
    [
        ("truncate", "damaged or not a CUDA cubin"),
        ("arch", "architecture this nvdisasm does not know"),
        ("flags", "damaged or not a CUDA cubin"),
    ],
)
def test_nvdisasm_errors_point_at_the_right_fix(tmp_path, damage, hint):
    """nvdisasm names the file in its message, and cubin names carry 'sm_100a': the hint must come
    from what went wrong, not from the file name (a truncated copy is not a too-old nvdisasm)."""
    import struct

    good = unxz_bytes(ROOT / "tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.cubin.xz")
    data = bytearray(good)
    if damage == "truncate":
        data = data[:3000]
    else:  # ELF e_flags: the SM number sits in bits 8..15 on these cubins
        flags = struct.unpack_from("<I", data, 48)[0]
        struct.pack_into("<I", data, 48, (flags & ~0xFF00) | (0x99 << 8) if damage == "arch" else 0xFFFFFFFF)
    path = tmp_path / f"kernel.sm_100a.{damage}.cubin"
    path.write_bytes(bytes(data))
    code, _, err = run_bsprof(["sass", str(path)])
    line = assert_one_line_error(code, err)
    assert hint in line, line


def _table_case(case: str):
    import pandas as pd

    t = _timing_seed().astype(object)
    first_kloop = int((t["phase"] == "kloop").to_numpy().nonzero()[0][0])
    if case == "inf":
        t.at[first_kloop, "end"] = math.inf
    elif case == "negative stamp":
        t.at[first_kloop, "start"] = -5
    elif case == "empty phase":
        t.at[first_kloop, "phase"] = math.nan
    elif case == "empty role":
        t.at[first_kloop, "role"] = ""
    elif case == "zero K-loop":
        t.at[first_kloop, "end"] = t.at[first_kloop, "start"]
    elif case == "out of order":
        mma = t.index[(t["role"] == "mma") & (t["tile"] == 1) & (t["phase"] == "kloop")][0]
        t.at[mma, "start"] = 0 + int(t["start"].min())
    elif case == "missing phase":
        t = t.drop(index=first_kloop).reset_index(drop=True)
    elif case == "missing role tile":
        t = t[~((t["role"] == "epilogue") & (t["tile"] == 0))].reset_index(drop=True)
    return pd.DataFrame(t)


@pytest.mark.parametrize(
    "case, words",
    [
        ("inf", "not an integer cycle count"),
        ("negative stamp", "negative clock stamp"),
        ("empty phase", "empty phase"),
        ("empty role", "empty role"),
        ("zero K-loop", "zero cycles"),
        ("out of order", "out of order"),
        ("missing phase", "without a kloop row"),
        ("missing role tile", "missing tiles"),
    ],
)
def test_impossible_timing_tables_are_one_line(tmp_path, case, words):
    path = tmp_path / "timing.csv"
    _table_case(case).to_csv(path, index=False)
    code, _, err = run_bsprof(["model", "--from", str(path), "--tiles", "1000", "--json"])
    assert words in assert_one_line_error(code, err)


# --------------------------------------------------------------------------------------------
# artifact JSON and results directories: each kind's loader, `bsprof report DIR`, `timing --from
# DIR`, `ncu --report DIR`. Seeds are the shipped artifacts; mutations put any JSON value (random
# nesting, types, sizes, up to thousands of levels deep) anywhere, drop keys, cut the file or make
# it not UTF-8.

SAMPLE_RUNS = ROOT / "bsprof/data/samples/run"
ARTIFACT_SEEDS = {
    "bench": SAMPLE_RUNS / "bench_h100/bench.json",
    "ncu": SAMPLE_RUNS / "ncu_h100_fp8_optimized/summary.json",
    "sass": SAMPLE_RUNS / "sass_sm100a_cubin/sass.json",
    "timing": SAMPLE_RUNS / "timing_h100/timing.json",
    "model": SAMPLE_RUNS / "model_b200_sweep/model.json",
    "validation": SAMPLE_RUNS / "validation_h100/validation.json",
    "epi_ceiling": ROOT / "bsprof/data/model/epi_ceiling_h100.json",
}
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "sm_100a",
            "kloop",
            "nan",
            "<!--<script>",
            "</script>",
            "x" * 20_000,
            "cublas",
            "9" * 5000,
            "\u0663",
            "a\x00b",
        ]
    ),
)
JSON_VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(
            st.one_of(
                st.text(max_size=8),
                st.sampled_from(
                    [
                        "bsprof",
                        "kind",
                        "version",
                        "rows",
                        "name",
                        "ms",
                        "launch",
                        "flops",
                        "launches",
                        "functions",
                        "loops",
                        "stats",
                        "points",
                        "curves",
                        "axes",
                        "deltas",
                        "mnkl",
                        "config",
                        "files",
                        "summary",
                        "device",
                    ]
                ),
            ),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=40,
)


@lru_cache(maxsize=None)
def _seed_text(kind: str) -> str:
    return ARTIFACT_SEEDS[kind].read_text()


def _mutated_artifact(data, kind: str) -> bytes:
    """A seed artifact with mutations drawn from ``data``, as the bytes of a file."""
    doc = json.loads(_seed_text(kind))
    deep: list[int] = []
    for _ in range(data.draw(st.integers(0, 5), label="mutations")):
        paths = list(_json_paths(doc))
        path = data.draw(st.sampled_from(paths), label="path")
        what = data.draw(st.sampled_from(["set", "set", "set", "drop", "deep", "top"]), label="what")
        if what == "top":  # a field beside the tag: a known one of any type, or the whole document replaced
            path = data.draw(
                st.sampled_from(
                    [
                        (),
                        ("launch",),
                        ("stats",),
                        ("functions",),
                        ("results",),
                        ("points",),
                        ("curves",),
                        ("mnkl",),
                        ("config",),
                    ]
                ),
                label="top",
            )
        if what == "deep":  # spliced in as text below: json.dumps itself recurses
            deep.append(data.draw(st.integers(1, 3000), label="levels"))
            value = f"__deep_{len(deep) - 1}__"
        else:
            value = data.draw(JSON_VALUES, label="value")
        doc = _json_set(doc, path, value, drop=what == "drop")
    text = json.dumps(doc, allow_nan=True)
    for i, levels in enumerate(deep):
        open_, close = ("[", "]") if levels % 2 else ('{"k": ', "}")
        text = text.replace(f'"__deep_{i}__"', open_ * levels + "0" + close * levels)
    cut = data.draw(st.sampled_from(["none", "none", "none", "truncate", "latin1", "bom"]), label="bytes")
    raw = text.encode()
    if cut == "truncate":
        raw = raw[: data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")]
    elif cut == "latin1":
        raw = raw.replace(b'"', b'"\xe9', 1)
    elif cut == "bom":
        raw = b"\xef\xbb\xbf" + raw
    return raw


def _json_paths(obj, prefix=()):
    """Paths to values inside a document (long lists and objects sampled, 12 levels at most), the
    root included."""
    yield prefix
    if len(prefix) >= 12:
        return
    if isinstance(obj, dict):
        for k in list(obj)[:25]:
            yield from _json_paths(obj[k], prefix + (k,))
    elif isinstance(obj, list):
        for i in range(min(len(obj), 3)):
            yield from _json_paths(obj[i], prefix + (i,))


def _json_set(doc, path, value, drop=False):
    if not path:
        return value
    if not isinstance(doc, dict) and len(path) == 1 and isinstance(path[0], str):
        return doc  # the document was replaced by a value without fields
    cur = doc
    for p in path[:-1]:
        cur = cur[p]
    if drop and isinstance(cur, dict):
        cur.pop(path[-1], None)
    elif drop:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return doc


@settings(FUZZ, max_examples=150)
@given(data=st.data(), kind=st.sampled_from(sorted(ARTIFACT_SEEDS)))
def test_mutated_artifact_loads_or_is_one_line(tmp_path_factory, data, kind):
    import time

    from bsprof.artifacts import load

    path = tmp_path_factory.mktemp("artifact") / f"{kind}.json"
    path.write_bytes(_mutated_artifact(data, kind))
    t = time.perf_counter()
    try:
        doc = load(path)
    except BsprofError as exc:
        _one_line(exc)
    else:
        assert isinstance(doc, dict)
    assert time.perf_counter() - t < 5


def _cli_bounded(args: list[str], limit_s: float) -> str:
    import time

    t = time.perf_counter()
    out = _cli_ok(args)
    elapsed = time.perf_counter() - t
    assert elapsed < limit_s, f"bsprof {' '.join(args)[:200]} took {elapsed:.1f} s"
    return out


@settings(FUZZ, max_examples=25)
@given(
    data=st.data(),
    kinds=st.lists(st.sampled_from(sorted(ARTIFACT_SEEDS)), min_size=1, max_size=3),
    extra=st.lists(st.sampled_from(["empty.json", "deep.json", "binary.json", "half.json.tmp"]), max_size=2),
)
def test_mutated_results_directory_reports_or_is_one_line(tmp_path_factory, data, kinds, extra):
    run = tmp_path_factory.mktemp("run")
    for i, kind in enumerate(kinds):
        sub = run / f"{kind}_{i}"
        sub.mkdir()
        name = "summary.json" if kind == "ncu" else f"{kind}.json"
        (sub / name).write_bytes(_mutated_artifact(data, kind))
    for name in extra:
        (run / name).write_bytes(
            {
                "empty.json": b"",
                "deep.json": b'{"bsprof": ' + b"[" * 5000,
                "binary.json": bytes(range(256)) * 10,
                "half.json.tmp": b'{"bsprof"',
            }[name]
        )
    _cli_bounded(["report", str(run), "-o", str(run / "r.html")], 60)


@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_timing_from_a_directory_with_a_mutated_timing_json(tmp_path_factory, data):
    run = tmp_path_factory.mktemp("timing_run")
    (run / "timing.parquet").write_bytes(TIMING.read_bytes())
    (run / "timing.json").write_bytes(_mutated_artifact(data, "timing"))
    args = ["timing", "--from", str(run)] + data.draw(
        st.sampled_from([[], ["--json"], ["-o", str(run / "out")]]), label="flags"
    )
    out = _cli_bounded(args, 60)
    _strict_json_or_text(out)


@settings(FUZZ, max_examples=20)
@given(data=st.data(), compare=st.booleans())
def test_ncu_with_a_mutated_summary_json(tmp_path_factory, data, compare):
    pytest.importorskip("ncu_report", reason="ncu_report (pip ncu-report) reads the report beside the summary")
    run = tmp_path_factory.mktemp("ncu_run")
    tiny = ROOT / "tests/data/h100_cute_tiny.ncu-rep.xz"
    (run / tiny.name).write_bytes(tiny.read_bytes())
    (run / "summary.json").write_bytes(_mutated_artifact(data, "ncu"))
    args = ["ncu", "--compare", str(run), str(tiny)] if compare else ["ncu", "--report", str(run), "--json"]
    _cli_bounded(args, 120)
