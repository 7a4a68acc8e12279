"""Performance targets of the equilibrium model, on the embedded B200 default.

    python3 benchmarks/model.py [--repeat N]

Targets: deterministic projection < 10 ms; stochastic projection (50,000 tiles) < 1 s; a 13x13
stochastic sweep < 10 s; `bsprof --help` < 0.3 s (all on the 2-core CI machine).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out), min(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    from bsprof.analyzers.model import default_params, parse_sweep, project, sweep

    t = time.perf_counter()
    p = default_params()
    cal = time.perf_counter() - t
    rows = [("calibrate embedded default (incl. stochastic closure)", cal, cal, None)]
    med, mn = timed(lambda: project(p, {"kloop": -300, "phase1": -200}, stochastic=False), 50 * a.repeat)
    rows.append(("deterministic projection", med, mn, 0.010))
    pj = project(p, {"kloop": -300, "phase1": -200})
    med, mn = timed(lambda: project(p, {"kloop": -300, "phase1": -200}), a.repeat)
    rows.append((f"stochastic projection ({pj.sto['tiles']:,} tiles, with baseline)", med, mn, 1.0))
    axes = parse_sweep("kloop=-600:0:50,phase1=-600:0:50")
    med, mn = timed(lambda: sweep(p, axes), max(1, a.repeat // 2))
    rows.append(("13x13 stochastic sweep (169 points x 50,000 tiles)", med, mn, 10.0))
    med, mn = timed(
        lambda: subprocess.run([sys.executable, "-m", "bsprof", "--help"], capture_output=True, check=True), a.repeat
    )
    rows.append(("`python -m bsprof --help` (process start included)", med, mn, 0.3))
    med, mn = timed(lambda: subprocess.run(["bsprof", "--help"], capture_output=True, check=True), a.repeat)
    rows.append(("`bsprof --help` (console script)", med, mn, 0.3))
    med, mn = timed(lambda: subprocess.run(["bsprof", "model"], capture_output=True, check=True), a.repeat)
    rows.append(("`bsprof model` (default: equilibrium + 5 what-ifs)", med, mn, None))
    for name, med, mn, target in rows:
        verdict = "" if target is None else ("  PASS" if med < target else "  FAIL") + f" (target < {target:g} s)"
        print(f"{name}: median {med * 1000:,.3f} ms, min {mn * 1000:,.3f} ms{verdict}")


if __name__ == "__main__":
    main()
