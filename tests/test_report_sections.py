"""The report built from the shipped samples (real artifacts written by the other verbs)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from bsprof.analyzers.bench_rows import cycle_spread, round_spread
from bsprof.artifacts import identity
from bsprof.reports.build import build
from bsprof.reports.runs import discover
from bsprof.reports.samples import RUN as SAMPLES


def _bench_rows() -> list[dict]:
    """The shipped H100 bench's rows of its first problem (4096^3)."""
    return json.loads((_sample("bench_h100") / "bench.json").read_text())["results"][0]["rows"]


def _row_pattern(row: dict, cycles: float | None) -> str:
    """How the report's bench table prints ``row`` (our subject: 1.000x itself), as a regex."""
    star = " *" if "power cap" in (row.get("clock_limiters") or []) else ""
    spread = f"{round_spread(row):.1%}" + (f" ({cycles:.1%})" if cycles is not None else "")
    cells = (
        f"{row['tflops']:,.1f} 1.000× {row['sm_mhz']:,.0f}{star} {row['watts']:.0f} "
        f"{row['flop_per_sm_cycle']:,.0f} {spread} {row['rel_err']:.2e}"
    )
    return re.escape(row["name"]) + r" bsprof [\d.,]+ " + re.escape(cells)


def _sample(name: str) -> Path:
    p = SAMPLES / name
    if not p.is_dir():
        pytest.skip(f"sample {name} not shipped (scripts/make_samples.sh)")
    return p


def _figure_specs(html: str) -> list[dict]:
    return [
        json.loads(m.replace("<\\/", "</"))
        for m in re.findall(r'<script type="application/json" class="bsprof-fig"[^>]*>(.*?)</script>', html, re.S)
    ]


def test_samples_report_small_fast_and_complete():
    t0 = time.perf_counter()
    html, info = build([SAMPLES])
    elapsed = time.perf_counter() - t0
    assert info.failed == {}
    assert info.bytes < 10 * 1024 * 1024, info.bytes
    assert elapsed < 10, elapsed
    # plotly.js is embedded exactly once, and no figure carries its own copy or a CDN link
    assert html.count("* plotly.js v") == 1 and not re.search(r"<script[^>]+src=", html)
    run = discover(SAMPLES)
    expect = {
        "ncu": {"verdict", "sol", "stalls"},
        "sass": {"sass-mix", "mma-gaps"},
        "timing": {"timing", "timeline"},
        "model": {"model"},
        "validation": {"validation"},
    }
    for kind, sections in expect.items():
        if run.of(kind):
            assert sections <= set(info.sections), (kind, info.sections)
    assert "summary" in info.sections
    assert info.figures == len(_figure_specs(html)) >= 5


def test_verdict_and_sol_come_from_the_ncu_summary():
    d = _sample("ncu_h100_cublas")
    summary = json.loads((d / "summary.json").read_text())
    launch = summary["launches"][0]
    html, info = build([d])
    for line in launch["verdict_detail"]["evidence"]:
        assert line.replace(">", "&gt;") in html
    assert launch["verdict_detail"]["class"] in html
    sol = next(s for s in _figure_specs(html) if "speed of light" in json.dumps(s.get("layout", {})).lower())
    bars = dict(zip(sol["data"][0]["y"], sol["data"][0]["x"]))
    assert bars["SM (compute) SOL"] == pytest.approx(launch["columns"]["sol_compute_pct"])
    assert bars["memory SOL"] == pytest.approx(launch["columns"]["sol_memory_pct"])
    # the problem size was given: TFLOP/s and the gap to the device peak are in the summary
    tflops = launch["derived"]["tflops"]
    assert f"{tflops:,.0f} TFLOP/s" in html and "of the 1,979 TFLOP/s dense fp8 peak" in html


def test_sass_mix_shows_the_kloop_of_the_sm100_cubin():
    d = _sample("sass_sm100a_cubin")
    html, info = build([d])
    assert {"sass-mix", "mma-gaps"} <= set(info.sections)
    # the fixture's documented K-loop: 87 instructions, 4 UTCHMMA.2CTA
    assert "K-loop @0x13e0 (87 inst, 4 MMA)" in html
    gaps = next(s for s in _figure_specs(html) if any("MMA %{x}" in str(t.get("hovertemplate")) for t in s["data"]))
    per_gap = [sum(t["y"][i] for t in gaps["data"]) for i in range(len(gaps["data"][0]["y"]))]
    assert len(per_gap) == 4 and sum(per_gap) == 87 - 4


def test_stall_samples_per_warp_role_from_source_counters():
    # the bundled kernel's --set full report + its source: ncu's per-PC stall samples land on roles
    d = _sample("sass_h100_fp8_optimized")
    fn = json.loads((d / "sass.json").read_text())["functions"][0]
    html, _ = build([d])
    assert "Stall samples per warp role" in html
    fig = next(s for s in _figure_specs(html) if "Stall samples per warp role" in json.dumps(s["layout"]))
    roles = set(fig["data"][0]["y"])
    assert roles <= set(fn["role_stalls"]) and any("kloop" in r for r in roles)
    # the trace of the largest reason carries the analyzer's own sample counts
    reason = fig["data"][0]["name"]
    for role, x in zip(fig["data"][0]["y"], fig["data"][0]["x"]):
        assert x == fn["role_stalls"][role].get(reason, 0)


def test_subject_is_the_bundled_kernel_and_peers_come_from_the_same_process_bench():
    html, _ = build([SAMPLES])
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "kernel bsprof fp8-blockwise optimized family fp8-blockwise" in text
    # the shipped H100 bench (benchmarks/fp8_blockwise.py --json: several problems) feeds the peers table
    assert "measured in one process on the same inputs" in text
    for peer in ("cublas_blockwise", "cublas_tensorwise", "cublas_bf16", "deepgemm"):
        assert f"{peer} peer" in text
    # ... with the clock each kernel ran at (in this sample every kernel was power-capped), the
    # interleaved rounds the medians come from and their spread in time and in cycles
    assert "FLOP / SM-cycle" in text and "median round of 5" in text
    row = _bench_rows()[0]
    assert re.search(_row_pattern(row, cycle_spread(row)), text)
    assert "round spread" in text


def test_two_runs_of_different_kernels_get_a_marked_section_not_a_crash():
    a, b = _sample("ncu_h100_cublas"), _sample("sass_sm100a_cubin")
    html, info = build([a, b])
    assert "compare" in info.sections
    assert "runs of different kernels" in html and "architecture: baseline has sm_90, optimized has sm_100" in html
    assert 'class="warning"' in html


def test_same_run_twice_compares_cell_by_cell_with_zero_difference():
    d = _sample("ncu_h100_cublas")
    html, info = build([d, d], labels=["baseline", "optimized"])
    assert "compare" in info.sections
    row = re.search(r"<tr[^>]*><td>ncu</td><td>SM \(compute\) SOL \(%\)</td>(.*?)</tr>", html)
    assert row and "+0.0 %" in row.group(1)


def test_a_section_that_throws_becomes_a_warning(monkeypatch):
    from bsprof.reports import sec_ncu

    def broken(run):
        raise KeyError("launches")

    monkeypatch.setattr(sec_ncu, "sol", broken)
    html, info = build([_sample("ncu_h100_cublas")])
    assert "sol/ncu_h100_cublas" in info.failed
    assert "could not be rendered" in html and "KeyError" in html
    assert "verdict" in info.sections  # the rest of the page is intact


def test_timing_json_without_its_table_is_marked(tmp_path):
    src = SAMPLES / "timing_h100"
    if not src.is_dir():
        pytest.skip("timing sample not shipped yet")
    dst = tmp_path / "half"
    shutil.copytree(src, dst)
    for p in dst.glob("timing.*"):
        if p.suffix in (".parquet", ".csv"):
            p.unlink()
    html, info = build([dst])
    assert "timing table" in html and "half-written" in html


def test_identity_reads_every_kind():
    ident = identity(discover(_sample("ncu_h100_cublas")))
    assert ident["arch"] == "sm_90" and "H100" in ident["device"]
    assert identity(discover(_sample("sass_sm100a_cubin")))["arch"] == "sm_100"


def test_model_heatmap_marks_current_point_and_binding_flip():
    d = _sample("model_b200_sweep")
    doc = json.loads((d / "model.json").read_text())
    html, info = build([d])
    assert "model" in info.sections
    fig = next(s for s in _figure_specs(html) if any(t.get("type") == "heatmap" for t in s["data"]))
    names = [t.get("name") for t in fig["data"]]
    assert "current kernel" in names and "binding side flips" in names
    heat = next(t for t in fig["data"] if t.get("type") == "heatmap")
    axes = doc["axes"]
    assert heat["x"] == axes["kloop"] and heat["y"] == axes["phase1"]
    # z[y][x] is the model's stochastic grid (indexed [kloop][phase1]) as a percentage
    sto = doc["stochastic"]["wall_ratio"]
    z = heat["z"]
    if isinstance(z, dict):  # plotly's typed-array encoding
        import base64

        import numpy as np

        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(
            z["shape"] if isinstance(z["shape"], list) else [int(x) for x in z["shape"].split(",")]
        )
    i, j = axes["phase1"].index(-500.0), axes["kloop"].index(250.0)
    assert float(z[i][j]) == pytest.approx((sto[j][i] - 1) * 100)
    # both sides bind somewhere in the shipped sweep, so the boundary is inside the grid
    flat = {b for row in doc["deterministic"]["binding"] for b in row}
    assert {"producer", "epilogue"} <= flat


def test_model_projection_sentence_and_table():
    d = _sample("model_b200_projection")
    doc = json.loads((d / "model.json").read_text())
    html, _ = build([d])
    assert doc["sentence"].split(":")[0] in html
    assert f"{doc['deterministic']['wall_ratio']:.4f}" in html


def test_bench_round_spread_shows_cycles_when_the_bench_kept_per_round_clocks(tmp_path):
    # give the shipped bench's optimized row the clock of each round such that its cycles did not
    # move: the time's spread stays, the cycles' is 0.0%
    d = json.loads((_sample("bench_h100") / "bench.json").read_text())
    row = d["results"][0]["rows"][0]
    ms = row["ms_rounds"]
    row["sm_mhz_rounds"] = [1500.0 * min(ms) / t for t in ms]
    assert cycle_spread(row) < 1e-9 < round_spread(row)
    run = tmp_path / "bench_run"
    run.mkdir()
    (run / "bench.json").write_text(json.dumps(d))
    html, _ = build([run])
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert re.search(_row_pattern(row, 0.0), text)
    assert "time × the SM clock" in text


def test_bench_table_shows_cupti_kernel_time_and_gap_when_traced(tmp_path, data_dir):
    # rows of a bench run with --launch-gaps carry CUPTI kernel time and gap: give the shipped
    # bench's DeepGEMM row those of the real DeepGEMM trace in tests/data
    from bsprof.analyzers.kernel_trace import kernel_spans, launch_summary, load_trace

    d = json.loads((_sample("bench_h100") / "bench.json").read_text())
    html, _ = build([_sample("bench_h100")])
    assert "gap µs" not in html
    dg = launch_summary(kernel_spans(load_trace(data_dir / "h100_trace_deepgemm_4096.json.gz")))
    for row in d["results"][0]["rows"]:
        if row["name"] == "deepgemm":
            row.update(kernel_us=dg["kernel_us"], gap_us=dg["gap_us"])
    run = tmp_path / "bench_run"
    run.mkdir()
    (run / "bench.json").write_text(json.dumps(d))
    html, _ = build([run])
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "kernel µs (CUPTI)" in text and "gap µs" in text
    assert f"{dg['kernel_us']:,.1f} {dg['gap_us']:,.1f}" in text
