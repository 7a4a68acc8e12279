"""Every terminal view fits an 80-column terminal: no line longer than the terminal, no number cut
(``4,36…``, ``@0x9c…``) or split over two lines, and a view that leaves something out says what
and how to see it. Piped output follows the same rules at its documented width.

The views are rendered through the real command line (``COLUMNS=80``) on the shipped artifacts:
an H100 Nsight Compute report of cuBLAS, the bundled kernel's report, foreign cubins (NVIDIA's
CuTe DSL dense GEMM on sm_100a, DeepGEMM's three-K-loop Hopper GEMM), the H100 timing capture and
the sample bench artifact."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from conftest import run_bsprof
from rich.cells import cell_len

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CUBLAS = DATA / "h100_cublas_fp8_4096.ncu-rep.xz"
OURS = DATA / "h100_bsprof_fp8_optimized.ncu-rep.xz"
DENSE = DATA / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.cubin.xz"
DEEPGEMM = DATA / "sass" / "deepgemm_sm90_fp8_1d2d_4096x4096x4096_b128x192_s4_c1.sm_90a.cubin.xz"
TIMING = DATA / "h100_timing"
BENCH = ROOT / "bsprof" / "data" / "samples" / "run" / "bench_h100" / "bench.json"

# a number (or an address) that ends in rich's ellipsis: a cell cut short
CUT_NUMBER = re.compile(r"(?<![\w@])(?:@?0x[0-9a-fA-F]*|\d[\d,.]*)…(?![+\-\d])")


def check_fits(text: str, width: int = 80) -> None:
    lines = text.splitlines()
    long = [ln for ln in lines if cell_len(ln) > width]
    assert not long, f"{len(long)} lines longer than {width}, e.g.\n" + "\n".join(long[:5])
    cut = [ln for ln in lines if CUT_NUMBER.search(ln)]
    assert not cut, "numbers cut short:\n" + "\n".join(cut[:5])


def whole(text: str, *numbers: str) -> None:
    """Each number appears whole on one line (not cut, not folded into the next line)."""
    for n in numbers:
        assert re.search(rf"(?<![\d,.]){re.escape(n)}(?!\d|[,.]\d)", text), f"{n} not shown whole"


def cli(monkeypatch, *args: str, columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_bsprof([str(a) for a in args])
    assert code == 0, err[-2000:]
    return out + err


def test_sass_region_table_and_mma_detail_from_a_report(monkeypatch):
    out = cli(monkeypatch, "sass", CUBLAS, "--mma-detail")
    check_fits(out)
    # the K-loop's column and the counts the old layout cut to '4,36…' and '1,217…'
    assert "K-loop 4 ◀" in out and "@0x0cd0" in out
    whole(out, "4,366,456", "31,894,602", "219,072", "2,777")
    assert "left out at this width:" in out and "--csv and --json have every region" in out
    # the listing marks where it jumps back to the loop head, and names the K-loop it leaves out
    assert "⋮ back to the loop head at 0x0cd0" in out
    assert "not shown: K-loop 6 (--all-kloops lists every K-loop" in out
    # a stall reason keeps its count on its line
    assert not re.search(r"[a-z_]+,?\s*$\n\s*│?\s*\d", out.split("stall samples by instruction")[1].split("└")[0], re.M)


def test_mma_detail_lists_the_k_loop_its_header_names(monkeypatch):
    """DeepGEMM's Hopper GEMM compiles its K-loop three times; the header names the one shown."""
    out = cli(monkeypatch, "sass", DEEPGEMM, "--mma-detail")
    check_fits(out)
    flat = " ".join(out.split())
    assert "one of 3 K-loops of 32 MMA side by side" in flat and "shown: the smallest" in flat
    details = re.findall(r"^K-loop (\d+): ", out, re.M)
    assert details == ["3"], details
    assert "not shown: K-loops 1, 2 (--all-kloops lists every K-loop; --json has every stream)" in " ".join(out.split())
    assert len(out.splitlines()) < 1500
    every = cli(monkeypatch, "sass", DEEPGEMM, "--mma-detail", "--all-kloops")
    check_fits(every)
    assert re.findall(r"^K-loop (\d+): ", every, re.M) == ["3", "1", "2"] or sorted(
        re.findall(r"^K-loop (\d+): ", every, re.M)
    ) == ["1", "2", "3"]
    # a jump inside a gap's listing is marked, with where it goes
    assert re.search(r"⋮ (back to the loop head at|jumps to) 0x[0-9a-f]{4}", every)


def test_all_kloops_needs_mma_detail(monkeypatch):
    from conftest import assert_one_line_error

    line = assert_one_line_error(*run_bsprof(["sass", str(DENSE), "--all-kloops"])[::2])
    assert "add --mma-detail" in line


def test_sass_cubin_features_and_detail(monkeypatch):
    out = cli(monkeypatch, "sass", DENSE, "--mma-detail", "--features")
    check_fits(out)
    assert "816 instructions · 4 MMA · 20 loops · 1 K-loop" in out
    assert "(3 instructions)" in out and "instruction(s)" not in out


def test_sass_compare_and_hot(monkeypatch):
    out = cli(monkeypatch, "sass", OURS, CUBLAS, "--hot", "5")
    check_fits(out)
    # the hottest instructions: a listing at this width, each branch target and count whole
    whole(out, "0x7f7beb7b71d0", "2,305", "212,992", "16,777,216")
    assert "hottest instructions by stall samples" in out


def test_sass_roles(monkeypatch):
    out = cli(monkeypatch, "sass", OURS, "--by", "roles", "--mnkl", "4096,4096,4096", "--tile-mn", "256,128")
    check_fits(out)
    assert "ConsumerWarpgroups/epilogue/epi_store_warp" in out  # the longest role name, whole
    whole(out, "2,982,024", "9,443")


@pytest.mark.parametrize(
    "args",
    [
        ["model"],
        ["model", "--kloop", "-300", "--phase1", "-200", "--explain"],
        ["model", "--sweep", "kloop=-1000:1500:125,phase1=-1500:500:125"],
        ["model", "--from", str(TIMING), "--kloop", "-5%"],
    ],
)
def test_model_views(monkeypatch, args):
    out = cli(monkeypatch, *args)
    check_fits(out)
    if args == ["model"]:
        # the Terms table: names whole (wrapped between words), sizes whole
        assert "epilogue-loop" in out and "958 cyc" in out and "epilogue-l…" not in out
    if "--explain" in args:
        assert "over 1 token " in out.replace("│", " ") and "token(s)" not in out


@pytest.mark.parametrize("verb", ["", "model", "sass", "ncu", "bench", "timing", "report"])
def test_help_fits(monkeypatch, verb):
    out = cli(monkeypatch, *([verb] if verb else []), "--help")
    check_fits(out)


def test_ncu_verdict_and_compare(monkeypatch):
    out = cli(monkeypatch, "ncu", "--report", CUBLAS, "--flops", "137438953472")
    check_fits(out)
    assert "verdict: compute-bound:tensor (near-peak)  kernel kind gemm, sm_90" in out
    whole(out, "16,777,216", "1,048,576", "156,757", "152,574")
    # prose continues under its own indent, never at column 0
    verdict = out.split("verdict:")[1].split("ncu rules")[0]
    assert all(ln.startswith("  ") for ln in verdict.splitlines()[1:] if ln.strip()), verdict
    assert "1 CTA per SM" in " ".join(out.split())
    cmp = cli(monkeypatch, "ncu", "--compare", OURS, CUBLAS, "--label", "ours", "cuBLAS")
    check_fits(cmp)
    whole(cmp, "1,593,741,080", "1,513,803,049")


def test_timing_view(monkeypatch):
    out = cli(monkeypatch, "timing", "--from", TIMING)
    check_fits(out)


def test_bench_views():
    """The sample bench (8 kernels over 3 problems) at 80 columns: every value whole."""
    from rich.console import Console

    from bsprof.reports import bench_text

    doc = json.loads(BENCH.read_text())
    buf = io.StringIO()
    bench_text.render(Console(file=buf, width=80), doc)
    out = buf.getvalue()
    check_fits(out)
    for res in doc["results"]:
        for r in res["rows"]:
            whole(out, f"{r['tflops']:,.0f}")
    assert "optimized:epi_split=0" in out and "deepgemm" in out


def test_validation_view():
    import pandas as pd
    from rich.console import Console

    from bsprof.analyzers.model import validation as V
    from bsprof.analyzers.model.clock import limits_for
    from bsprof.reports.model_text import render_validation

    run = TIMING / "validation_pingpong_8192_pooled_clock"
    doc = json.loads((run / "validation.json").read_text())
    pts = V.reclock(pd.read_csv(run / "validation.csv"), limits_for(doc["device"], doc["device_limits"]))
    buf = io.StringIO()
    render_validation(Console(file=buf, width=80), pts, V.summary(pts), "ping-pong 8192")
    out = buf.getvalue()
    check_fits(out)
    assert "measured (95% CI)" in out and "left out at this width:" in out
    # three columns are headed "err" (the model's, the oracle's, the trivial predictor's): the note
    # names each dropped one so that it says which
    note = " ".join(out[out.index("left out at this width:") :].split())
    names = note.removeprefix("left out at this width: ").split(" (a wider terminal")[0].split(", ")
    assert len(names) == len(set(names)), names
    assert "oracle err" in names and "trivial err" in names and "err" not in names, names


def test_piped_output_uses_its_documented_width(monkeypatch):
    """Without COLUMNS, output that is not a terminal is laid out for PIPED_WIDTH columns."""
    from bsprof.reports.term import PIPED_WIDTH

    monkeypatch.setenv("COLUMNS", "0")
    monkeypatch.delenv("COLUMNS")
    code, out, err = run_bsprof(["sass", str(CUBLAS), "--mma-detail"])
    assert code == 0, err
    check_fits(out, PIPED_WIDTH)
    assert max(cell_len(ln) for ln in out.splitlines()) > 80  # the width is used, not rich's 80


@pytest.mark.parametrize("columns", ["0", "wide"])
def test_a_columns_that_is_no_width_counts_as_unset(monkeypatch, columns):
    """COLUMNS=0 made rich lay every view out for no columns: the verb printed nothing and exited 0."""
    from bsprof.reports.term import PIPED_WIDTH

    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = run_bsprof(["model"])
    assert code == 0, err
    assert "bsprof model" in out and "Equilibrium" in out, out[-400:]
    check_fits(out, PIPED_WIDTH)


def test_report_console_lines(monkeypatch, tmp_path):
    out = cli(monkeypatch, "report", "-o", tmp_path / "r.html")
    check_fits(out)
    assert re.search(r"wrote .*r\.html \([\d.]+ MB, \d+ figures, [\d.]+ s\)", " ".join(out.split()))
