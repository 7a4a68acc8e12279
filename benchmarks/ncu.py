"""Performance targets of `bsprof ncu`.

python benchmarks/ncu.py load                 # CPU: load + extract one launch of a full report (< 1 s)
python benchmarks/ncu.py verdict              # CPU: extract + verdict (rules, advice) per launch (< 1 s),
                                              # cold CLI process and warm, plus the whole corpus
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
FULL_REPORT = REPO / "tests" / "data" / "h100_cublas_fp8_4096.ncu-rep.xz"


def _cold_warm(module: str, func: str, repeat: int) -> tuple[float, float]:
    """Median seconds of ``module.func(FULL_REPORT)``: cold (a fresh interpreter pays for importing
    pandas and ncu_report, as a CLI run does; 3 runs) and warm (in this process, ``repeat`` runs)."""
    import importlib

    code = (
        f"import time; t=time.perf_counter(); from {module} import {func}; "
        f"{func}(r'{FULL_REPORT}'); print(time.perf_counter()-t)"
    )
    cold = [
        float(subprocess.check_output([sys.executable, "-c", code], cwd=REPO, text=True).split()[0]) for _ in range(3)
    ]
    fn = getattr(importlib.import_module(module), func)
    fn(FULL_REPORT)
    warm = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(FULL_REPORT)
        warm.append(time.perf_counter() - t)
    return statistics.median(cold), statistics.median(warm)


def bench_load(repeat: int = 10) -> dict:
    cold, warm = _cold_warm("bsprof.analyzers.ncu.extract", "extract", repeat)
    res = {"report": FULL_REPORT.name, "cold_s_median": cold, "warm_s_median": warm, "target_s": 1.0}
    res["pass"] = res["cold_s_median"] < 1.0
    return res


PICK_ORDER = (
    "all",
    "all_no_occ",
    "no_hit_smem",
    "no_units",
    "no_sol",
    "no_units_no_occ",
    "no_sol_no_occ",
    "no_units_hit_smem_no_occ",
    "no_sol_hit_smem_no_occ",
    "core",
    "core_few_stalls",
)


def bench_verdict(repeat: int = 10) -> dict:
    """Extraction + verdict per launch: a cold `bsprof ncu --report --json` process on the full
    report, warm extract+classify in-process, and classify alone over the corpus entries."""
    cold, warm = _cold_warm("bsprof.analyzers.ncu.summary", "analyze_report", repeat)
    import lzma

    from bsprof.analyzers.ncu.verdict import classify

    entries = list(
        json.loads(lzma.decompress((REPO / "tests" / "data" / "corpus" / "launches.json.xz").read_bytes())).values()
    )
    t = time.perf_counter()
    for e in entries:
        classify(e["columns"], rules=e["rules"])
    per = (time.perf_counter() - t) / max(1, len(entries))
    res = {
        "report": FULL_REPORT.name,
        "cold_process_s_median": cold,
        "warm_extract_verdict_s_median": warm,
        "corpus_launches": len(entries),
        "classify_ms_per_launch": 1e3 * per,
        "target_s_per_launch": 1.0,
    }
    res["pass"] = res["cold_process_s_median"] < 1.0 and res["warm_extract_verdict_s_median"] < 1.0
    return res


def pick(search: dict, full_passes: int = 38) -> tuple[str, list[str], list[str]] | None:
    """The most complete candidate with <= 1/3 of full's passes and the verdict of 'all'."""
    ref = search["runs"].get("all", {})
    for name in PICK_ORDER:
        r = search["runs"].get(name, {})
        if (
            r.get("passes")
            and r["passes"] <= full_passes / 3
            and (r["verdict"], r["detail"]) == (ref.get("verdict"), ref.get("detail"))
        ):
            return name, r["metrics"], r["sections"]
    return None


def bench_triage_vs_full(
    mnkl: str, torch_scaled_mm: bool, variant: str, family: str, override: tuple[list[str], list[str]] | None = None
) -> dict:
    from bsprof.analyzers.ncu.metrics import arch_key
    from bsprof.gpu import device_info
    from bsprof.kernels.api import Target, parse_mnkl
    from bsprof.profile.ncu_runner import NcuRequest, profile_to_dir

    info = device_info()
    shape = parse_mnkl(mnkl)
    if torch_scaled_mm:
        launcher = ["--mnkl", ",".join(map(str, shape)), "--torch-scaled-mm", "--warmup", "3"]
    else:
        launcher = ["--target", Target.parse(family, variant, shape).to_arg(), "--warmup", "3"]
    out = {
        "device": info["name"],
        "kernel": "torch._scaled_mm" if torch_scaled_mm else f"{family}/{variant}",
        "mnkl": list(shape),
        "runs": {},
    }
    parent = Path(tempfile.mkdtemp(prefix="bsprof-ncu-bench-"))
    for set_name in ("triage", "full"):
        req = NcuRequest(launcher_args=launcher, arch=arch_key(info["capability"][0]), set_name=set_name)
        if override and set_name == "triage":
            req.metrics_override, req.sections_override = override
        t = time.perf_counter()
        d, payload = profile_to_dir(req, parent, f"{set_name}", mnkl=shape, emit=lambda s: print(s, file=sys.stderr))
        wall = time.perf_counter() - t
        launch = payload["launches"][0]
        out["runs"][set_name] = {
            "replay_passes": payload["replay_passes"],
            "ncu_wall_s": payload["ncu_wall_s"],
            "total_wall_s": round(wall, 2),
            "kernel": launch["kernel"],
            "duration_ns": launch["duration_ns"],
            "verdict": launch["verdict"],
            "verdict_detail": launch["verdict_detail"]["detail"],
            "dir": str(d),
            "report_bytes": next(d.glob("*.ncu-rep")).stat().st_size,
        }
    tri, full = out["runs"]["triage"], out["runs"]["full"]
    out["pass_ratio"] = (
        tri["replay_passes"] / full["replay_passes"] if tri["replay_passes"] and full["replay_passes"] else None
    )
    out["same_verdict"] = (tri["verdict"], tri["verdict_detail"]) == (full["verdict"], full["verdict_detail"])
    out["target_met"] = bool(out["pass_ratio"] is not None and out["pass_ratio"] <= 1 / 3 and out["same_verdict"])
    return out


def _groups(arch: str) -> dict[str, list[str]]:
    """The triage list split by what each part feeds (for finding where the replay passes go)."""
    from bsprof.analyzers.ncu.metrics import triage_metric_names

    names = triage_metric_names(arch)
    g = {
        "sol": [n for n in names if n.startswith(("sm__throughput", "gpu__compute_memory_throughput"))],
        "units": [n for n in names if n.startswith(("dram__throughput", "lts__throughput", "l1tex__throughput"))],
        "hit": [n for n in names if "hit_rate" in n],
        "smem": [n for n in names if n.startswith("l1tex__data")],
        "tensor": [n for n in names if "pipe_tensor" in n or "pipe_tc" in n],
        "stall": [n for n in names if n.startswith("smsp__average_warps_issue_stalled")],
        "sched": [
            n
            for n in names
            if n.startswith(
                ("smsp__issue_active", "smsp__warps_eligible", "smsp__average_warp_latency", "sm__warps_active")
            )
        ],
    }
    used = {n for v in g.values() for n in v}
    g["base"] = [n for n in names if n not in used]  # duration, clocks, launch facts
    return g


def bench_triage_search(mnkl: str) -> dict:
    """Replay passes of each metric group alone and of candidate triage lists (torch._scaled_mm FP8)."""
    from bsprof.analyzers.ncu.metrics import arch_key
    from bsprof.gpu import device_info
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile.ncu_runner import NcuRequest, profile_to_dir

    info = device_info()
    arch = arch_key(info["capability"][0])
    shape = parse_mnkl(mnkl)
    launcher = ["--mnkl", ",".join(map(str, shape)), "--warmup", "3", "--torch-scaled-mm"]
    g = _groups(arch)
    every = [n for v in g.values() for n in v]
    minus = lambda *ks: [n for n in every if not any(n in g[k] for k in ks)]  # noqa: E731
    occ = ["LaunchStats", "Occupancy"]
    few = [
        n
        for n in g["stall"]
        if any(
            f"stalled_{r}_per" in n
            for r in ("barrier", "membar", "sleeping", "long_scoreboard", "wait", "gmma", "selected")
        )
    ]
    runs: dict[str, tuple[list[str], list[str]]] = {
        f"only_{k}": (v + g["base"], []) for k, v in g.items() if k != "base"
    }
    runs["only_base"] = (g["base"], [])
    runs["only_occupancy_section"] = (g["base"], occ)
    runs.update(
        {
            "all": (every, occ),
            "all_no_occ": (every, ["LaunchStats"]),
            "no_sol": (minus("sol"), occ),
            "no_units": (minus("units"), occ),
            "no_hit_smem": (minus("hit", "smem"), occ),
            "no_sol_no_occ": (minus("sol"), ["LaunchStats"]),
            "no_units_no_occ": (minus("units"), ["LaunchStats"]),
            "no_sol_hit_smem_no_occ": (minus("sol", "hit", "smem"), ["LaunchStats"]),
            "no_units_hit_smem_no_occ": (minus("units", "hit", "smem"), ["LaunchStats"]),
            "core": (g["base"] + g["sol"] + g["tensor"] + g["sched"] + g["stall"], ["LaunchStats"]),
            "core_few_stalls": (g["base"] + g["sol"] + g["tensor"] + g["sched"] + few, ["LaunchStats"]),
        }
    )
    parent = Path(tempfile.mkdtemp(prefix="bsprof-ncu-search-"))
    out = {"device": info["name"], "groups": g, "runs": {}}
    for name, (metrics, sections) in runs.items():
        req = NcuRequest(
            launcher_args=launcher, arch=arch, set_name="triage", metrics_override=metrics, sections_override=sections
        )
        try:
            _, payload = profile_to_dir(req, parent, name, mnkl=shape, emit=lambda s: None)
            l0 = payload["launches"][0]
            out["runs"][name] = {
                "passes": payload["replay_passes"],
                "verdict": l0["verdict"],
                "detail": l0["verdict_detail"]["detail"],
                "n_metrics": len(metrics),
                "sections": sections,
                "metrics": metrics,
            }
        except Exception as exc:  # keep searching; record why
            out["runs"][name] = {"error": str(exc)[:300]}
        print(name, out["runs"][name], file=sys.stderr, flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["load", "verdict", "triage-vs-full", "triage-search"])
    p.add_argument("--mnkl", default="4096,4096,4096,1")
    p.add_argument("--torch-scaled-mm", action="store_true")
    p.add_argument("--variant", default="optimized")
    p.add_argument("--family", default="fp8-blockwise")
    p.add_argument("--out", default=None)
    p.add_argument(
        "--search-json", default=None, help="triage-vs-full: use the list picked from a triage-search result"
    )
    a = p.parse_args()
    if a.what == "load":
        res = bench_load()
    elif a.what == "verdict":
        res = bench_verdict()
    elif a.what == "triage-search":
        res = bench_triage_search(a.mnkl)
    else:
        override = None
        picked = None
        if a.search_json:
            picked = pick(json.loads(Path(a.search_json).read_text()))
            if picked is None:
                print("no candidate met the target", file=sys.stderr)
                return 1
            override = (picked[1], picked[2])
        res = bench_triage_vs_full(a.mnkl, a.torch_scaled_mm, a.variant, a.family, override)
        if picked:
            res["picked"] = {"name": picked[0], "metrics": picked[1], "sections": picked[2]}
    from bsprof.artifacts import dumps
    from bsprof.io import write_text_atomic

    text = dumps(res)
    print(text)
    if a.out:
        write_text_atomic(a.out, text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
