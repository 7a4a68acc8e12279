"""`bsprof ncu` as a user runs it: --report, --json contract, --compare, -o, and every bad input."""

from __future__ import annotations

import json
import lzma
import shutil

import pytest
from click.testing import CliRunner

from bsprof.cli import cli

CUBLAS = "h100_cublas_fp8_4096.ncu-rep.xz"
TINY = "h100_cute_tiny.ncu-rep.xz"


def run(*args):
    return CliRunner().invoke(cli, ["ncu", *map(str, args)])


def _one_line_error(res, *needles):
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_report_human_output(data_dir):
    res = run("--report", data_dir / CUBLAS, "--flops", 2 * 4096**3)
    assert res.exit_code == 0, res.output
    out = res.output
    assert "nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT" in out
    assert "verdict: compute-bound:tensor (near-peak)" in out
    assert "hottest pipe tensor: 87% of active cycles, 81% of elapsed" in out
    assert "because pipe_tensor_pct = 86.5 >= 60 (unit_bound_pct)" in out
    assert "try: wgmma knobs on sm_90" in out and "2-CTA" not in out
    assert "ncu SOLBottleneck: a unit is above 80% of peak — agrees" in out
    assert "MemoryWorkloadAnalysis_Tables/MemoryCacheAccessPattern" in out and "56.7% global" in out
    # rule text whole, not cut
    assert "Check the Source Counters" in out.replace("\n", " ")
    assert "1,327" in out  # TFLOP/s
    assert "67.1 % of 1,979 (fp8, from executed QGMMA)" in out


def test_precision_override_accepts_bf16(data_dir):
    res = run("--report", data_dir / CUBLAS, "--flops", 2 * 4096**3, "--precision", "bf16")
    assert res.exit_code == 0, res.output
    assert "% of 989 (bf16, from --precision)" in res.output


def test_json_contract(data_dir):
    res = run("--report", data_dir / CUBLAS, "--json")
    assert res.exit_code == 0
    js = json.loads(res.output)
    assert js["bsprof"] == {"kind": "ncu", "version": 1}
    (launch,) = js["launches"]
    assert launch["kernel"].startswith("nvjet_sm90")
    assert launch["duration_ns"] == 103552.0
    assert launch["registers_per_thread"] == 168
    assert launch["grid"] == [2, 66, 1] and launch["block"] == [384, 1, 1] and launch["cluster"] == [2, 1, 1]
    assert launch["verdict"] == "compute-bound"
    assert launch["metrics"]["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(81.08, abs=0.01)
    assert launch["inst_executed_by_opcode"]["QGMMA"] == 1048576
    assert launch["rules"][0]["speedup_pct"] == pytest.approx(56.72, abs=0.01)
    assert launch["derived"]["tflops"] is None  # no --flops: unknown, not 0


def test_report_with_output_dir(data_dir, tmp_path):
    res = run("--report", data_dir / TINY, "-o", tmp_path, "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)["output_dir"]
    (sub,) = list(tmp_path.iterdir())
    assert str(sub) == d and sorted(p.name for p in sub.iterdir()) == ["summary.json", "summary.parquet"]
    again = json.loads(run("--report", data_dir / TINY, "-o", tmp_path, "--json").output)["output_dir"]
    assert again != d and len(list(tmp_path.iterdir())) == 2


def test_compare_labels_with_brackets_are_text(data_dir):
    """--label names the compare table's columns; a bracket in one is shown, not read as rich markup
    (a closing tag raised MarkupError through the verb)."""
    res = run("--compare", data_dir / CUBLAS, data_dir / TINY, "--label", "run[/]", "b[red]")
    assert res.exit_code == 0, (res.output, res.exception)
    assert "run[/]" in res.output and "b[red]" in res.output


def test_a_bad_filter_b_is_named_as_filter_b(data_dir):
    """--filter-b picks B's launch; its errors name --filter-b, not the --filter the user did not give."""
    line = _one_line_error(run("--compare", data_dir / CUBLAS, data_dir / TINY, "--filter-b", "["), "--filter-b '['")
    assert "regular expression" in line
    _one_line_error(run("--compare", data_dir / CUBLAS, data_dir / TINY, "--filter-b", "no_such_kernel"), "--filter-b")


def test_compare_reports_and_dirs(data_dir, tmp_path):
    res = run("--compare", data_dir / CUBLAS, data_dir / TINY)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("h100_cublas_fp8_4096 vs h100_cute_tiny")  # titled with its labels
    assert "verdict h100_cublas_fp8_4096: compute-bound:tensor (near-peak)" in res.output
    assert "verdict h100_cute_tiny: launch-bound" in res.output
    labelled = run("--compare", data_dir / CUBLAS, data_dir / TINY, "--label", "cuBLAS", "tiny")
    assert labelled.output.startswith("cuBLAS vs tiny") and "verdict tiny: launch-bound" in labelled.output
    js = json.loads(run("--compare", data_dir / CUBLAS, data_dir / TINY, "--json").output)
    rows = {r["metric"]: r for r in js["compare"]["metrics"]}
    assert rows["duration_ns"]["delta"] == pytest.approx(2656.0 - 103552.0)
    assert rows["registers_per_thread"]["b"] == 16
    # a result directory stands for the report inside it
    rd = tmp_path / "run1"
    rd.mkdir()
    shutil.copy(data_dir / TINY, rd / "x.ncu-rep")
    assert run("--compare", rd, data_dir / TINY).exit_code == 0
    _one_line_error(run("--compare", tmp_path, data_dir / TINY), "expected one .ncu-rep")
    # the directory `bsprof ncu -o` wrote into: the error names the run to pass
    _one_line_error(run("--compare", tmp_path, data_dir / TINY), "pass one of them (run1)")


def test_filter_matching_nothing_lists_kernels(data_dir):
    _one_line_error(
        run("--report", data_dir / CUBLAS, "--filter", "fp4_gemm"),
        "matches no kernel",
        "nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT",
    )


def test_bad_report_files(data_dir, tmp_path):
    # the shipped report is xz-compressed; the damage is done to the report inside it
    raw = lzma.decompress((data_dir / TINY).read_bytes())
    (tmp_path / "empty.ncu-rep").write_bytes(b"")
    (tmp_path / "cut.ncu-rep").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "head.ncu-rep").write_bytes(raw[:100])
    (tmp_path / "notes.ncu-rep").write_text("not a report\n" * 50)
    newer = bytearray(raw)
    newer[4] = 99  # the file-format version field after the "NVR\0" magic: a future format
    (tmp_path / "newer.ncu-rep").write_bytes(bytes(newer))
    _one_line_error(run("--report", tmp_path / "empty.ncu-rep"), "empty")
    _one_line_error(run("--report", tmp_path / "cut.ncu-rep"), "truncated")
    _one_line_error(run("--report", tmp_path / "head.ncu-rep"), "truncated")
    _one_line_error(run("--report", tmp_path / "notes.ncu-rep"), "not a readable Nsight Compute report")
    _one_line_error(run("--report", tmp_path / "newer.ncu-rep"), "newer ncu", "ncu-report")
    _one_line_error(run("--report", tmp_path / "missing.ncu-rep"), "no such report file")


def test_bad_report_leaves_no_output(tmp_path):
    (tmp_path / "cut.ncu-rep").write_bytes(b"NVR\x00" + b"\x00" * 200)
    out = tmp_path / "out"
    _one_line_error(run("--report", tmp_path / "cut.ncu-rep", "-o", out))
    assert not out.exists() or list(out.iterdir()) == []


def test_usage_errors(data_dir):
    _one_line_error(run(), "exactly one of")
    _one_line_error(run("--report", data_dir / TINY, "--kernel", "optimized"), "exactly one of")
    _one_line_error(run("--report", data_dir / TINY, "--flops", "-5"), "--flops must be positive")


def test_kernel_mode_without_ncu_or_kernel(monkeypatch, tmp_path):
    """Without ncu, one line: on a machine without a GPU it says a GPU is needed (installing ncu
    would not help there), on a GPU host that ncu is missing."""
    from bsprof import gpu
    from bsprof.profile import ncu_runner

    has_gpu = shutil.which("nvidia-smi") is not None
    gpu.device_info.cache_clear()
    if has_gpu:
        gpu.device_info()  # asked while nvidia-smi is still on PATH
    monkeypatch.setattr(ncu_runner, "NCU_GLOBS", ())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no ncu on it (nor nvidia-smi)
    line = _one_line_error(run("--kernel", "optimized", "--family", "fp8-blockwise", "-o", tmp_path))
    if has_gpu:
        assert "no bundled fp8-blockwise kernel is available" in line or "ncu (Nsight Compute) is not installed" in line
    else:
        # the GPU first: installing ncu would not help here (the hint to read a stored report may name ncu)
        assert "no NVIDIA GPU" in line and "not installed" not in line, line
    assert list(tmp_path.iterdir()) == []
    gpu.device_info.cache_clear()


def test_kernel_mode_without_gpu(monkeypatch, tmp_path):
    from bsprof import gpu
    from bsprof.profile import ncu_runner

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    gpu.device_info.cache_clear()
    monkeypatch.setattr(ncu_runner, "find_ncu", lambda: "/usr/bin/ncu")
    _one_line_error(run("--kernel", "optimized", "--family", "auto", "-o", tmp_path), "no NVIDIA GPU")
    assert list(tmp_path.iterdir()) == []


def test_precision_takes_every_peak_the_analyzer_knows(data_dir):
    # int8 runs at the fp8 rate on the H100; fp64 has its own (much lower) peak
    res = run("--report", data_dir / CUBLAS, "--flops", 2 * 4096**3, "--precision", "int8")
    assert res.exit_code == 0 and "of 1,979 (int8, from --precision)" in res.output, res.output
    res = run("--report", data_dir / CUBLAS, "--flops", 2 * 4096**3, "--precision", "fp64")
    assert res.exit_code == 0 and "of 67 (fp64, from --precision)" in res.output, res.output


def test_a_flop_count_the_executed_mmas_cannot_account_for_is_warned_about(data_dir, monkeypatch):
    """--flops 1e12 on the cuBLAS FP8 4096^3 launch gave "% of peak 488.0 %" without a word: its 1,048,576
    executed QGMMA.64x128x32 do 1.37e11 FLOP, so one warning line names both; 2*4096^3 draws none."""
    monkeypatch.setenv("COLUMNS", "400")
    res = run("--report", data_dir / CUBLAS, "--flops", "1e12")
    assert res.exit_code == 0, res.output
    warn = [ln for ln in res.output.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "1e+12 FLOP (--flops)" in warn[0] and "1.37e+11 FLOP" in warn[0], res.output
    ok = run("--report", data_dir / CUBLAS, "--flops", 2 * 4096**3)
    assert "warning:" not in ok.output
    js = json.loads(run("--report", data_dir / CUBLAS, "--json").output)
    assert js["launches"][0]["derived"]["mma_flops"] == 2 * 4096**3


def test_mnkl_names_the_flops_and_is_cross_checked(data_dir, monkeypatch):
    """--mnkl names the problem, so TFLOP/s is 2*M*N*K*L over the duration where --flops is not given (and
    says so); a problem the launch's MMAs cannot have done is warned about like --flops."""
    monkeypatch.setenv("COLUMNS", "400")
    res = run("--report", data_dir / CUBLAS, "--mnkl", "4096,4096,4096")
    assert res.exit_code == 0, res.output
    assert "FLOPs from --mnkl 4096,4096,4096,1 (2*M*N*K*L): 1.374e+11" in res.output
    assert "67.1 % of 1,979" in res.output and "problem size unknown" not in res.output and "warning:" not in res.output
    big = run("--report", data_dir / CUBLAS, "--mnkl", "8192,8192,8192")
    warn = [ln for ln in big.output.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "--mnkl 8192,8192,8192,1" in warn[0] and "8.0x" in warn[0], big.output
    given = run("--report", data_dir / CUBLAS, "--mnkl", "4096,4096,4096", "--flops", "1e12")
    assert "FLOPs from --mnkl" not in given.output and "(--flops)" in given.output


def test_fp4_on_sm90_says_there_is_no_fp4_peak(data_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    for extra in ((), ("--flops", 2 * 4096**3)):
        res = run("--report", data_dir / CUBLAS, "--precision", "fp4", *extra)
        assert res.exit_code == 0, res.output
        assert "sm_90 has no fp4 tensor peak" in res.output and "n/a % of n/a" not in res.output, res.output
