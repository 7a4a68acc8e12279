"""`bsprof sass` end to end: tables, --json contract, --csv, -o artifacts, compare, bad input."""

from __future__ import annotations

import csv
import io
import json
import shutil
import struct

import pytest
from click.testing import CliRunner
from conftest import assert_one_line_error, run_bsprof, unxz_bytes, unxz_text, unxz_to

from bsprof.cli import cli

FIXTURE = "sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a"  # .cubin.xz and .sass.xz


def run(*args):
    res = CliRunner().invoke(cli, ["sass", *map(str, args)], catch_exceptions=False)
    return res


def test_default_tables(data_dir):
    res = run(data_dir / f"{FIXTURE}.cubin.xz", "--features", "--mma-detail")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "816 instructions" in out and "1 K-loop\n" in out
    assert "feature checklist" in out and "2-CTA MMA" in out
    assert "UTCBAR.2CTA.MULTICAST" in out  # in the MMA-detail stream
    assert "regions are loops" in out


def test_the_per_mma_line_names_the_fences_of_the_kernels_architecture(data_dir):
    """tcgen05's commit (UTCBAR) exists on sm_100 only and wgmma's arrive/wait fences (WARPGROUP) on
    sm_90 only: each kernel's line names its own (cuBLAS's FP8 nvjet: 0.5 WARPGROUP a QGMMA), not the
    other architecture's as 0.0; the JSON keeps every group."""
    blackwell = run(data_dir / f"{FIXTURE}.cubin.xz", "--mma-detail").output
    hopper = run(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", "--mma-detail").output
    (b_line,) = [ln for ln in blackwell.splitlines() if "per MMA:" in ln and "categories" not in ln]
    h_lines = [ln for ln in hopper.splitlines() if "per MMA:" in ln and "categories" not in ln]
    assert "UTCBAR 0.5" in b_line and "WARPGROUP" not in b_line, b_line
    assert h_lines and all("WARPGROUP 0.5" in ln and "UTCBAR" not in ln for ln in h_lines), h_lines
    d = json.loads(run(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", "--json", "--mma-detail").output)
    detail = d["functions"][0]["mma_detail"][0]
    assert detail["counts"]["UTCBAR"] == 0 and detail["counts"]["WARPGROUP"] == 2


def test_json_contract(data_dir):
    res = run(data_dir / f"{FIXTURE}.cubin.xz", "--json", "--mma-detail")
    assert res.exit_code == 0
    d = json.loads(res.output)
    assert d["bsprof"] == {"kind": "sass", "version": 1}
    (fn,) = d["functions"]
    assert {"name", "arch", "instructions", "categories", "loops", "features", "unclassified"} <= set(fn)
    assert fn["instructions"] == 816 and fn["unclassified"] == []
    (k,) = [lp for lp in fn["loops"] if lp["is_kloop"]]
    assert (k["instructions"], k["mma"], k["depth"]) == (87, 4, 1)
    assert fn["features"]["mma_2cta"] is True
    assert fn["mma_detail"][0]["mma"] == 4


def test_ncu_json_carries_executed(data_dir):
    res = run(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", "--json", "--tiles", "1024")
    d = json.loads(res.output)
    (fn,) = d["functions"]
    assert all("executed" in lp for lp in fn["loops"])
    assert fn["executed"] == fn["regions"][0]["executed"]
    assert fn["regions"][0]["executed_per_tile"] == pytest.approx(fn["executed"] / 1024, abs=0.1)
    assert fn["region_stalls"] and fn["stalls_by_category"]


def test_mnkl_derives_tiles(data_dir):
    res = run(
        data_dir / "h100_cublas_fp8_4096.ncu-rep.xz", "--json", "--mnkl", "4096,4096,4096", "--tile-mn", "128,128"
    )
    assert json.loads(res.output)["functions"][0]["tiles"] == 1024


def test_csv(data_dir):
    res = run(data_dir / f"{FIXTURE}.cubin.xz", "--csv")
    rows = list(csv.DictReader(io.StringIO(res.output)))
    assert rows[0]["region"] == "function" and rows[0]["instructions"] == "816"
    k = [r for r in rows if r["is_kloop"] == "True"]
    assert len(k) == 1 and k[0]["instructions"] == "87" and k[0]["cat_mma"] == "4"


def test_output_dir_artifacts_never_reused(data_dir, tmp_path):
    out = tmp_path / "run"
    for _ in range(2):
        assert run(data_dir / f"{FIXTURE}.cubin.xz", "-o", out).exit_code == 0
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert dirs == ["run", "run-2"]
    d = json.loads((tmp_path / "run" / "sass.json").read_text())
    assert d["bsprof"] == {"kind": "sass", "version": 1}
    assert (tmp_path / "run" / "regions.csv").read_text().startswith("function,region")


def test_compare_mode(data_dir, tmp_path):
    a = data_dir / f"{FIXTURE}.sass.xz"
    # B: the same kernel with its K-loop's UTCBARs dropped (a real listing, edited)
    lines = unxz_text(a).splitlines()
    b = tmp_path / "b.sass"
    b.write_text("\n".join(ln for ln in lines if "UTCBAR.2CTA.MULTICAST" not in ln))
    res = run(a, b, "--json")
    d = json.loads(res.output)
    (c,) = d["compare"]
    assert c["instructions"]["delta"] == -2
    assert c["kloop"]["instructions_delta"] == -2
    assert c["categories"]["tc_control"]["delta"] == -2
    assert c["opcodes"]["UTCBAR"]["delta"] == -2
    text = run(a, b).output
    assert "K-loop instructions" in text and "-2" in text


def test_compare_two_ncu_reports_executed_by_opcode(data_dir):
    # two H100 launches of 4096^3 FP8 (ours, cuBLAS), each with ncu's per-PC executed counts: the
    # compare adds executed instructions per opcode, per executed MMA
    a = data_dir / "h100_bsprof_fp8_optimized.ncu-rep.xz"
    b = data_dir / "h100_cublas_fp8_4096.ncu-rep.xz"
    d = json.loads(run(a, b, "--json").output)
    (c,) = d["compare"]
    ex = c["executed_opcodes"]
    # the same work in m64n128k32 QGMMA on both sides: 4096^3 x 2 / (2 x 64 x 128 x 32) x 4 warps
    assert ex["mma"] == {"a": 1048576, "b": 1048576}
    assert "QGMMA" not in ex["opcodes"]  # only opcodes whose count changed
    assert ex["per_mma"]["a"] == pytest.approx(c["executed"]["a"] / 1048576, abs=0.01)
    assert ex["per_mma"]["b"] == pytest.approx(c["executed"]["b"] / 1048576, abs=0.01)
    rows = ex["opcodes"]
    # the deltas add up to the executed totals' change, and are sorted by the per-MMA change
    assert sum(r["delta"] for r in rows.values()) == c["executed"]["delta"]
    per = [abs(r["delta_per_mma"]) for r in rows.values()]
    assert per == sorted(per, reverse=True) and per[0] > 0.5
    text = run(a, b).output
    assert "executed instructions by opcode" in text and "per executed MMA" in text


@pytest.mark.parametrize(
    "make, expect",
    [
        (lambda p: p.write_bytes(b"hello world\n"), "not an ELF/cubin"),
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_bytes(b"\x7fELF" + b"\x00" * 60), "no CUDA cubin inside"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, make, expect):
    p = tmp_path / "in.bin"
    make(p)
    res = CliRunner().invoke(cli, ["sass", str(p)])
    assert res.exit_code == 2
    err = res.output.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and expect in err[0]
    assert "Traceback" not in res.output


def test_arch_nvdisasm_cannot_read(data_dir, tmp_path):
    raw = bytearray(unxz_bytes(data_dir / f"{FIXTURE}.cubin.xz"))
    struct.pack_into("<I", raw, 48, 0)  # e_flags: no SM version
    p = tmp_path / "future.cubin"
    p.write_bytes(bytes(raw))
    res = CliRunner().invoke(cli, ["sass", str(p)])
    assert res.exit_code == 2 and "architecture" in res.output and len(res.output.strip().splitlines()) == 1


def test_function_pattern_lists_functions(data_dir):
    res = CliRunner().invoke(cli, ["sass", str(data_dir / f"{FIXTURE}.cubin.xz"), "--function", "nope"])
    assert res.exit_code == 2
    assert "matches none" in res.output and "PersistentDenseGemmKernel" in res.output


def test_fatbin_through_cuobjdump(data_dir, tmp_path):
    from bsprof.analyzers.sass import analyze_cubin
    from bsprof.analyzers.sass.disasm import tool_path

    fatbinary = shutil.which("fatbinary")
    if fatbinary is None:
        pytest.skip("no fatbinary tool here to build a fatbin")
    out = tmp_path / "k.fatbin"
    import subprocess

    cubin = unxz_to(data_dir / f"{FIXTURE}.cubin.xz", tmp_path)
    subprocess.run([fatbinary, "--create", str(out), f"--image3=kind=elf,sm=100a,file={cubin}"], check=True)
    assert tool_path("cuobjdump")
    (fa,) = analyze_cubin(out)
    assert len(fa.instructions) == 816


@pytest.mark.parametrize("suffix", [".cubin", ".sass"])
def test_xz_input_reads_as_the_plain_file(data_dir, tmp_path, suffix):
    """A compressed cubin or listing (how tests/data/sass ships them) gives the plain file's result;
    only the source names the .xz the user passed."""
    packed = data_dir / f"{FIXTURE}{suffix}.xz"
    plain = unxz_to(packed, tmp_path)
    got = {}
    for p in (packed, plain):
        code, out, err = run_bsprof(["sass", str(p), "--json", "--mma-detail", "--features"])
        assert code == 0, err
        got[p] = json.loads(out.replace(str(p), "<input>"))
    assert got[packed] == got[plain]
    assert got[packed]["functions"][0]["instructions"] == 816


def test_two_xz_inputs_compare(data_dir):
    res = run(data_dir / f"{FIXTURE}.cubin.xz", data_dir / f"{FIXTURE}.sass.xz", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["a"]["source"].endswith(".cubin.xz") and d["b"]["source"].endswith(".sass.xz")
    assert d["compare"][0]["instructions"]["delta"] == 0


def test_xz_fatbin(data_dir, tmp_path, monkeypatch):
    """A compressed fatbin goes through cuobjdump like a plain one, its cubins labelled with the
    user's path; it is unpacked once, into $BSPROF_CACHE/xz."""
    from bsprof.analyzers.sass import list_functions
    from bsprof.analyzers.sass.disasm import disassemble

    fatbinary = shutil.which("fatbinary")
    if fatbinary is None:
        pytest.skip("no fatbinary tool here to build a fatbin")
    import lzma
    import subprocess

    cubin = unxz_to(data_dir / f"{FIXTURE}.cubin.xz", tmp_path)
    fatbin = tmp_path / "k.fatbin"
    subprocess.run([fatbinary, "--create", str(fatbin), f"--image3=kind=elf,sm=100a,file={cubin}"], check=True)
    packed = tmp_path / "k.fatbin.xz"
    packed.write_bytes(lzma.compress(fatbin.read_bytes()))
    monkeypatch.setenv("BSPROF_CACHE", str(tmp_path / "cache"))
    ((label, _text),) = disassemble(packed)
    assert label.startswith(f"{packed}:")
    assert list_functions(packed) == list_functions(fatbin)
    (copy,) = (tmp_path / "cache" / "xz").glob("*/*")
    assert copy.name == "k.fatbin" and copy.read_bytes() == fatbin.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "not xz"])
def test_corrupt_xz_one_line_exit_2(data_dir, tmp_path, damage):
    packed = (data_dir / f"{FIXTURE}.cubin.xz").read_bytes()
    p = tmp_path / "kernel.sm_100a.cubin.xz"
    p.write_bytes(packed[: len(packed) // 2] if damage == "truncated" else b"hello world\n")
    code, _, err = run_bsprof(["sass", str(p)])
    line = assert_one_line_error(code, err)
    assert str(p) in line and "does not decompress" in line and "re-download or re-compress" in line


def test_executed_by_opcode_compares_per_mma_when_the_mma_counts_differ(data_dir):
    # cuBLAS's 4096^3 launch against itself with twice the MMAs and SYNCS and every other count
    # unchanged: per MMA, SYNCS did not change and everything else halved
    import copy

    from bsprof.analyzers.sass import analyze_ncu_report
    from bsprof.analyzers.sass.compare import executed_opcodes

    (a,) = analyze_ncu_report(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz")
    b = copy.copy(a)
    b.executed = [
        2 * n if ins.category == "mma" or ins.base == "SYNCS" else n for ins, n in zip(a.instructions, a.executed)
    ]
    ex = executed_opcodes(a, b)
    assert ex["mma"]["b"] == 2 * ex["mma"]["a"] == 2 * 1048576
    rows = ex["opcodes"]
    assert "SYNCS" not in rows and "QGMMA" not in rows
    assert rows["FFMA"]["delta"] == 0 and rows["FFMA"]["b_per_mma"] == pytest.approx(
        rows["FFMA"]["a_per_mma"] / 2, abs=1e-3
    )
    per = [abs(r["delta_per_mma"]) for r in rows.values()]
    assert per == sorted(per, reverse=True)


def test_a_cubin_with_helper_kernels_shows_its_gemm_first(tmp_path):
    # CUTLASS's example 48 cubin holds three reference/compare kernels before its GEMM: the GEMM's
    # K-loop is the first screen, the helpers one line each after it
    from pathlib import Path

    from conftest import run_bsprof

    cubin = Path(__file__).parent / "data" / "sass" / "cutlass_sm90_tf32_coop_128x128x32_c4x2.sm_90a.cubin.xz"
    code, out, err = run_bsprof(["sass", str(cubin)])
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert "GemmUniversal" in lines[0] and "8 MMA" in " ".join(lines[:2]) and lines[2].startswith("K-loop: loop 2")
    tail = out[out.index("also in this input, without MMA instructions (3;") :]
    assert "BlockCompareEqual" in tail and "BlockForEach" in tail and "instruction mix" not in tail
    assert out.count("instruction mix by region") == 1
