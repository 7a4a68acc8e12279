"""The sample report in a real browser: Debian's headless Chromium opens the file from disk.

Checks that every figure rendered (the page counts drawn figures into <body data-figures-rendered>,
and each figure div holds plotly's SVG), that the console shows no errors, and saves a screenshot.
CI installs the browser with: apt-get install -y chromium  (skipped with a reason where it is absent).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bsprof.reports.build import build, write
from bsprof.reports.samples import RUN as SAMPLES

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
]


def _chromium() -> str:
    for name in (os.environ.get("BSPROF_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.skip("no headless Chromium here; install it with: apt-get install -y chromium")


def _browse(html_path: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [
        _chromium(),
        *FLAGS,
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=30000",
        *extra,
        html_path.resolve().as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _check_page(html_path: Path, tmp: Path, shot: Path) -> dict:
    dom = _browse(html_path, tmp, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, "no <body> in the dumped DOM"
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body.group(1)))
    total, rendered = int(attrs["figures-total"]), int(attrs["figures-rendered"])
    console_errors = [
        line for line in dom.stderr.splitlines() if ":CONSOLE" in line and re.search(r"Uncaught|Error|error", line)
    ]
    assert not console_errors, "\n".join(console_errors)
    assert attrs["errors"] == "0", re.search(r'<pre id="bsprof-console">(.*?)</pre>', dom.stdout, re.S).group(1)
    assert total > 0 and rendered == total, f"{rendered} of {total} figures rendered"
    # every figure div became a plotly graph with its own SVG
    divs = re.findall(r'<div class="([^"]*plotly-target[^"]*)" id="(fig-\d+)"', dom.stdout)
    assert len(divs) == total
    assert all("js-plotly-plot" in cls for cls, _ in divs), [i for cls, i in divs if "js-plotly-plot" not in cls]
    assert dom.stdout.count('class="main-svg"') >= total
    shot_run = _browse(html_path, tmp, f"--screenshot={shot}", "--window-size=1400,2600")
    assert shot_run.returncode == 0 and shot.is_file() and shot.stat().st_size > 20_000, shot_run.stderr[-1000:]
    return {"total": total, "rendered": rendered}


def _shot_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("BSPROF_SCREENSHOT_DIR", tmp_path))
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_sample_report_renders_in_chromium(tmp_path):
    _chromium()
    html, info = build([SAMPLES])
    out = write(html, tmp_path / "report.html")
    assert info.failed == {}, info.failed
    got = _check_page(out, tmp_path, _shot_dir(tmp_path) / "report.png")
    assert got["total"] == info.figures


def test_two_runs_side_by_side_render_in_chromium(tmp_path):
    _chromium()
    from bsprof.reports.samples import compare_pair

    base, opt = compare_pair()
    html, info = build([base, opt])
    assert "compare" in info.sections and info.failed == {}, (info.sections, info.failed)
    out = write(html, tmp_path / "compare.html")
    _check_page(out, tmp_path, _shot_dir(tmp_path) / "compare.png")
