"""Kernel durations and launch gaps from real CUPTI traces (torch.profiler on the H100:
30 one-launch CUDA-graph replays of DeepGEMM and of cuBLAS blockwise FP8 at 4096^3, each between a
pair of CUDA events as the bench times them)."""

from __future__ import annotations

import gzip
import json

import pytest
from rich.console import Console

from bsprof.analyzers.kernel_trace import kernel_spans, launch_summary, load_trace
from bsprof.errors import BsprofError


@pytest.fixture(scope="module")
def traces(data_dir):
    return {name: load_trace(data_dir / f"h100_trace_{name}_4096.json.gz") for name in ("deepgemm", "cublas_blockwise")}


def test_spans_are_the_kernels_in_start_order_with_the_gap_before_each(traces):
    raw = [e for e in traces["deepgemm"]["traceEvents"] if e.get("cat") == "kernel"]
    spans = kernel_spans(traces["deepgemm"])
    assert len(spans) == len(raw) == 30
    assert spans["name"].str.contains("deep_gemm::sm90_fp8_gemm_1d2d_impl").all()
    assert spans["start_us"].is_monotonic_increasing
    # one stream: a kernel starts only after the previous one ended
    gaps = spans["gap_us"].iloc[1:]
    assert gaps.notna().all() and (gaps > 0).all() and spans["gap_us"].isna().iloc[0]
    first, second = spans.iloc[0], spans.iloc[1]
    assert second["gap_us"] == pytest.approx(second["start_us"] - first["start_us"] - first["dur_us"], abs=1e-3)


def test_summary_separates_kernel_time_from_the_launch_gap(traces):
    dg = launch_summary(kernel_spans(traces["deepgemm"]))
    bw = launch_summary(kernel_spans(traces["cublas_blockwise"]))
    for s in (dg, bw):
        assert s["kernels"] == 30 and 0.9 < s["busy"] < 1.0
        # start to start is the kernel plus the gap, give or take their spread
        assert s["period_us"] == pytest.approx(s["kernel_us"] + s["gap_us"], abs=3.0)
    # what the recorded traces show: cuBLAS leaves the GPU idle longer between launches than DeepGEMM
    assert bw["gap_us"] > dg["gap_us"] + 1.0
    assert 90.0 < dg["kernel_us"] < 150.0  # a 4096^3 FP8 GEMM at ~1 PFLOP/s


def test_a_window_keeps_the_last_kernels_and_their_gaps(traces):
    spans = kernel_spans(traces["deepgemm"], last=10)
    assert len(spans) == 10 and spans["gap_us"].notna().all()
    assert spans["start_us"].iloc[-1] == kernel_spans(traces["deepgemm"])["start_us"].iloc[-1]


def test_bad_traces_get_one_line_errors(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{ not json")
    with pytest.raises(BsprofError, match="not a readable JSON trace"):
        load_trace(bad)
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(BsprofError, match="traceEvents"):
        load_trace(bad)
    cpu_only = tmp_path / "cpu.json.gz"
    with gzip.open(cpu_only, "wt") as f:
        json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]}, f)
    with pytest.raises(BsprofError, match="no GPU kernel events"):
        kernel_spans(load_trace(cpu_only))


def test_bench_table_prints_kernel_and_gap_when_the_rows_have_them(traces, data_dir):
    from bsprof.reports.bench_text import print_table

    res = json.load(open(data_dir / "h100_bench.json"))["results"][:1]
    con = Console(record=True, width=400)
    print_table(con, res, "t")
    assert "gap before it" not in con.export_text()
    dg = launch_summary(kernel_spans(traces["deepgemm"]))
    for row in res[0]["rows"]:
        if row["name"] == "deepgemm":
            row.update(kernel_us=dg["kernel_us"], gap_us=dg["gap_us"])
    con = Console(record=True, width=400)
    print_table(con, res, "t")
    text = con.export_text()
    assert "gap before it" in text
    assert f"{dg['kernel_us']:,.1f} / {dg['gap_us']:.1f}" in text
