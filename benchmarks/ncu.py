"""Performance targets of `bsprof ncu`.

    python benchmarks/ncu.py load                 # CPU: load + extract one launch of a full report (< 1 s)
    python benchmarks/ncu.py triage-vs-full [--torch-scaled-mm] [--mnkl 4096,4096,4096,1] [--out FILE.json]
                                                  # GPU: replay passes and wall time, triage vs full,
                                                  # same kernel, same verdict; target triage <= full / 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FULL_REPORT = REPO / "tests" / "data" / "h100_cublas_fp8_4096.ncu-rep"


def bench_load(repeat: int = 10) -> dict:
    # cold: a fresh interpreter pays for importing pandas and ncu_report, as a CLI run does
    code = ("import time; t=time.perf_counter(); from bsprof.analyzers.ncu.extract import extract; "
            f"e=extract(r'{FULL_REPORT}'); print(time.perf_counter()-t, len(e.table))")
    cold = [float(subprocess.check_output([sys.executable, "-c", code], cwd=REPO, text=True).split()[0]) for _ in range(3)]
    from bsprof.analyzers.ncu.extract import extract

    extract(FULL_REPORT)
    warm = []
    for _ in range(repeat):
        t = time.perf_counter()
        extract(FULL_REPORT)
        warm.append(time.perf_counter() - t)
    res = {"report": FULL_REPORT.name, "cold_s_median": statistics.median(cold), "warm_s_median": statistics.median(warm),
           "target_s": 1.0}
    res["pass"] = res["cold_s_median"] < 1.0
    return res


def bench_triage_vs_full(mnkl: str, torch_scaled_mm: bool, variant: str, family: str) -> dict:
    from bsprof.analyzers.ncu.metrics import arch_key
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile.gpu import device_info
    from bsprof.profile.ncu_runner import NcuRequest, profile_to_dir

    info = device_info()
    shape = parse_mnkl(mnkl)
    launcher = ["--mnkl", ",".join(map(str, shape)), "--warmup", "3"]
    launcher += ["--torch-scaled-mm"] if torch_scaled_mm else ["--family", family, "--variant", variant]
    out = {"device": info["name"], "kernel": "torch._scaled_mm" if torch_scaled_mm else f"{family}/{variant}",
           "mnkl": list(shape), "runs": {}}
    parent = Path(tempfile.mkdtemp(prefix="bsprof-ncu-bench-"))
    for set_name in ("triage", "full"):
        req = NcuRequest(launcher_args=launcher, arch=arch_key(info["capability"][0]), set_name=set_name)
        t = time.perf_counter()
        d, payload = profile_to_dir(req, parent, f"{set_name}", mnkl=shape, emit=lambda s: print(s, file=sys.stderr))
        wall = time.perf_counter() - t
        launch = payload["launches"][0]
        out["runs"][set_name] = {
            "replay_passes": payload["replay_passes"], "ncu_wall_s": payload["ncu_wall_s"], "total_wall_s": round(wall, 2),
            "kernel": launch["kernel"], "duration_ns": launch["duration_ns"], "verdict": launch["verdict"],
            "verdict_detail": launch["verdict_detail"]["detail"], "dir": str(d),
            "report_bytes": next(d.glob("*.ncu-rep")).stat().st_size,
        }
    tri, full = out["runs"]["triage"], out["runs"]["full"]
    out["pass_ratio"] = tri["replay_passes"] / full["replay_passes"] if tri["replay_passes"] and full["replay_passes"] else None
    out["same_verdict"] = (tri["verdict"], tri["verdict_detail"]) == (full["verdict"], full["verdict_detail"])
    out["target_met"] = bool(out["pass_ratio"] is not None and out["pass_ratio"] <= 1 / 3 and out["same_verdict"])
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["load", "triage-vs-full"])
    p.add_argument("--mnkl", default="4096,4096,4096,1")
    p.add_argument("--torch-scaled-mm", action="store_true")
    p.add_argument("--variant", default="optimized")
    p.add_argument("--family", default="fp8-blockwise")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    res = bench_load() if a.what == "load" else bench_triage_vs_full(a.mnkl, a.torch_scaled_mm, a.variant, a.family)
    text = json.dumps(res, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
