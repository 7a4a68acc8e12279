"""Timing capture, timing-build overhead and model validation on the GPU, in one process.

    PYTHONPATH=$PWD python3 benchmarks/timing.py --out DIR [--shapes 4096,4096,4096 8192,8192,1024]

Targets: timing-build overhead <= 2% of wall time on the three benchmark shapes;
model validation median |error| <= 2% and max <= 5% over >= 12 points on the H100. Prints a
summary last; everything it measured is under DIR (capture, overhead.json, validation dirs).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", default="fp8-blockwise")
    ap.add_argument("--kernel", default="optimized")
    ap.add_argument("--capture-mnkl", default="4096,4096,4096")
    ap.add_argument("--validate", nargs="*", default=["4096,4096,4096", "8192,8192,1024", "8192,8192,8192"])
    ap.add_argument("--overhead", choices=["all", "shape", "none"], default="all")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--budget-s", type=float, default=480.0, help="skip validation shapes past this")
    args = ap.parse_args(argv)

    from rich.console import Console

    from bsprof.gpu import device_info
    from bsprof.io import write_text_atomic
    from bsprof.kernels.api import Target
    from bsprof.profile import validate
    from bsprof.profile.timing_capture import capture_run
    from bsprof.reports.timing_text import render

    console = Console(width=150)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    info = device_info()
    console.print(f"device: {info['name']} cc {info['capability']} {info['sm_count']} SMs")
    summary = {"device": info["name"], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}

    target = Target.parse(args.family, args.kernel, args.capture_mnkl)  # once; each shape is target.on_problem
    try:
        doc, run_dir = capture_run(
            target, out / "timing", overhead_on=args.overhead, rounds=args.rounds, log=console.print
        )
        render(console, doc, run_dir)
        summary["capture_dir"] = str(run_dir)
        summary["overhead"] = doc["overhead"]
        summary["clock"] = doc["stats"]["clock"]
    except Exception as exc:  # keep going: validation is worth having on its own
        traceback.print_exc()
        summary["capture_error"] = f"{type(exc).__name__}: {exc}"
    console.print(f"[dim]t={time.time() - t0:.0f}s[/]")

    spin = None
    for shape in args.validate:
        if time.time() - t0 > args.budget_s:
            console.print(f"skipping validation on {shape}: past the {args.budget_s:.0f}s budget")
            summary.setdefault("skipped", []).append(shape)
            continue
        try:
            if spin is None:
                spin = validate.spin_calibration(console)
            doc = validate.run(
                target.on_problem(shape), out_dir=out / "validation", console=console, rounds=args.rounds, spin=spin
            )
            summary.setdefault("validation", {})[shape] = {"dir": doc["run_dir"], **doc["summary"]}
        except Exception as exc:
            traceback.print_exc()
            summary.setdefault("validation_errors", {})[shape] = f"{type(exc).__name__}: {exc}"
        console.print(f"[dim]t={time.time() - t0:.0f}s[/]")

    summary["elapsed_s"] = time.time() - t0
    from bsprof.artifacts import dumps

    write_text_atomic(out / "summary.json", dumps(summary) + "\n")
    console.print_json(dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
