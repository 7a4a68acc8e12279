"""compute-sanitizer memcheck, racecheck and synccheck over the bundled Hopper FP8-blockwise kernels.

Each tool runs in its own process, all three at once (they share the GPU; racecheck dominates),
on one small shape per variant, with only our kernels instrumented (``--kernel-name
kns=Fp8BlockwiseGemm``): torch's own kernels (init, reference) are not under test. Every process
checks the output against the float64 reference too, so a clean report is of a kernel that ran.

Run on a Hopper GPU: python3 scripts/sanitize_fp8.py [--mnkl 256,256,512,1] [--timeout 420] [--log-dir DIR]
Exit code 0 only when every tool reports 0 errors / 0 hazards.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOOLS = ("memcheck", "racecheck", "synccheck")
SUMMARY_RE = re.compile(r"(ERROR SUMMARY|RACECHECK SUMMARY): (\d+) (errors?|hazards?)[^\n]*")


def _sanitizer() -> str:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for cand in sorted(glob.glob("/usr/local/cuda*/bin/compute-sanitizer"), reverse=True):
        if os.access(cand, os.X_OK):
            return cand
    sys.exit("compute-sanitizer not found (looked on PATH and under /usr/local/cuda*/bin)")


def _program(variants: list[str], mnkl: tuple[int, ...]) -> str:
    # one more timed launch per variant: an instrumented kernel runs orders of magnitude slower,
    # which shows the kernel-name filter really selected it (a filter matching nothing is "clean")
    return (
        "import time, torch\n"
        "from bsprof.kernels.fp8_blockwise import prepare\n"
        f"for v in {variants!r}:\n"
        f"    p = prepare(v, {mnkl!r}, seed=1)\n"
        "    err = p.check()\n"
        "    torch.cuda.synchronize(); t = time.perf_counter(); p.launch(); torch.cuda.synchronize()\n"
        "    print(f'{v}: max rel error {err:.2e}, one launch {1e3 * (time.perf_counter() - t):.2f} ms', flush=True)\n"
        "    assert err < 1e-2\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mnkl", default="256,256,512,1")
    ap.add_argument("--variants", default="baseline,optimized")
    ap.add_argument("--timeout", type=float, default=420.0, help="seconds per tool")
    ap.add_argument("--log-dir", default="sanitize-logs")
    ap.add_argument(
        "--kernel-filter",
        default="kns=Fp8BlockwiseGemm",
        help="compute-sanitizer --kernel-name value (a non-matching one gives the uninstrumented timing)",
    )
    ap.add_argument("--tools", default=",".join(TOOLS))
    args = ap.parse_args()
    mnkl = tuple(int(x) for x in args.mnkl.split(","))
    variants = [v for v in args.variants.split(",") if v]
    exe = _sanitizer()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    code = _program(variants, mnkl)
    procs = {}
    t0 = time.time()
    for tool in args.tools.split(","):
        cmd = [
            exe,
            "--tool",
            tool,
            "--error-exitcode",
            "3",
            "--report-api-errors",
            "no",
            "--kernel-name",
            args.kernel_filter,
            sys.executable,
            "-c",
            code,
        ]
        fh = open(logs / f"{tool}.log", "w")
        procs[tool] = (subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT), fh, time.time())
    rc_all = 0
    for tool, (proc, fh, started) in procs.items():
        left = max(1.0, args.timeout - (time.time() - t0))
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            rc = "timeout"
        fh.close()
        text = (logs / f"{tool}.log").read_text(errors="replace")
        summary = SUMMARY_RE.findall(text)
        line = "; ".join(f"{k}: {n} {w}" for k, n, w in summary) or "no summary"
        ok = rc == 0 and summary and all(n == "0" for _, n, _ in summary)
        rc_all |= 0 if ok else 1
        print(
            f"{tool:10s} variants={','.join(variants)} mnkl={args.mnkl} rc={rc} {time.time() - started:6.1f} s  {line}"
            f"  {'CLEAN' if ok else 'NOT CLEAN'}",
            flush=True,
        )
    return rc_all


if __name__ == "__main__":
    sys.exit(main())
