"""`bsprof report X.ncu-rep`: the analysis of an existing report, rendered directly (no bsprof run first)."""

from __future__ import annotations

import html
import re

from click.testing import CliRunner

from bsprof.cli import cli


def test_report_renders_an_ncu_rep_directly(data_dir, tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        cli, ["report", str(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz"), "-o", str(out), "--only", "verdict"]
    )
    assert res.exit_code == 0, res.output
    text = html.unescape(re.sub(r"<[^>]+>", " ", out.read_text()))
    assert "compute-bound:tensor" in text
    assert "L1/shared is the wgmma operand path" in text
    assert "ncu SOLBottleneck: a unit is above 80% of peak" in text
    # ncu's rule text whole: the end of the longest message is on the page
    assert "reduce the time the active warps are stalled by inspecting the top stall reasons" in " ".join(text.split())


def test_report_names_a_broken_ncu_rep(tmp_path):
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(b"not a report")
    res = CliRunner().invoke(cli, ["report", str(bad), "-o", str(tmp_path / "r.html")])
    assert "Traceback" not in res.output
    assert "cut.ncu-rep" in res.output
