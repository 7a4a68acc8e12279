"""How big and how fast the sample report is (targets: < 10 MB, rendered in seconds).

    python3 benchmarks/report.py [--browser]

Times `bsprof.reports.build.build` on the shipped samples (one run, and the baseline/optimized
pair), median of 5; with --browser also the headless Chromium load until every figure is drawn.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _median_build(paths):
    from bsprof.reports.build import build

    times, info = [], None
    for _ in range(5):
        t0 = time.perf_counter()
        _, info = build(paths)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), info


def _browser_seconds(paths) -> float | None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return None
    from bsprof.reports.build import build, write

    html, _ = build(paths)
    with tempfile.TemporaryDirectory() as tmp:
        out = write(html, Path(tmp) / "r.html")
        t0 = time.perf_counter()
        res = subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={tmp}/p",
                "--virtual-time-budget=30000",
                "--dump-dom",
                out.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        dt = time.perf_counter() - t0
    ok = 'data-errors="0"' in res.stdout
    return dt if ok else float("nan")


def main() -> None:
    from bsprof.reports.samples import PAIR, RUN

    for name, paths in (("samples/run", [RUN]), ("samples/pair", list(PAIR))):
        t, info = _median_build(paths)
        line = f"{name}: {info.bytes / 1e6:.2f} MB, {info.figures} figures, build {t:.2f} s (median of 5)"
        if "--browser" in sys.argv:
            b = _browser_seconds(paths)
            line += f", headless Chromium load+draw {b:.1f} s" if b is not None else ", no Chromium here"
        print(line)


if __name__ == "__main__":
    main()
