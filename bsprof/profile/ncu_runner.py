"""Run Nsight Compute on bsprof's launcher and keep the result: .ncu-rep + summary Parquet + JSON in a
fresh results directory named kernel_family_problem_time. Nothing is overwritten; on any failure the
scratch directory is removed and no partial file is left.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bsprof.errors import BsprofError
from bsprof.profile.launch import NVTX_RANGE

SETS = ("triage", "full")
CLOCK_CONTROLS = ("none", "base")
# where ncu is looked for when it is not on PATH (tests empty it to stand for a machine without ncu)
NCU_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu")

# Replay passes measured per (set, arch) so progress can say "pass i of n" before ncu prints n.
# Measured on H100 80GB HBM3, Nsight Compute 2025.3.1 (docs/perf.md); unknown pairs show percent only.
EXPECTED_PASSES: dict[tuple[str, str], int] = {("full", "sm_90"): 38, ("triage", "sm_90"): 10}

_PERM_HELP = (
    "GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM); run as root / with "
    "CAP_SYS_ADMIN (containers: --cap-add SYS_ADMIN), or allow all users: put "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/nvidia-prof.conf and reload "
    "the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


def find_ncu() -> str:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_GLOBS:
        hits = sorted(glob.glob(pattern), reverse=True)
        if hits:
            return hits[0]
    raise BsprofError(
        "ncu (Nsight Compute) is not installed or not on PATH; install Nsight Compute (CUDA toolkit) "
        "and add its directory to PATH, or analyze an existing report with --report FILE.ncu-rep"
    )


@dataclass
class NcuRequest:
    launcher_args: list[str]  # arguments of ``python -m bsprof.profile.launch``
    arch: str  # "sm_90" | "sm_100": picks the triage metric names
    set_name: str = "triage"
    clock_control: str = "none"
    kernel_regex: str | None = None  # capture by name + launch-skip instead of the NVTX range
    launch_skip: int = 0
    # "nvtx" (default) or "profiler-api" (cudaProfilerStart/Stop); env BSPROF_NCU_CAPTURE overrides
    capture: str = field(default_factory=lambda: os.environ.get("BSPROF_NCU_CAPTURE", "nvtx"))
    extra_env: dict = field(default_factory=dict)
    metrics_override: list[str] | None = None  # triage experiments (benchmarks/ncu.py): replace the list
    sections_override: list[str] | None = None  # ... and the sections


def build_command(ncu: str, req: NcuRequest, out_base: str | os.PathLike, info_path: str | os.PathLike) -> list[str]:
    """The ncu command line. ``out_base`` is the report path without ``.ncu-rep`` (ncu adds it)."""
    from bsprof.analyzers.ncu.metrics import TRIAGE_SECTIONS, triage_metric_names

    if req.set_name not in SETS:
        raise BsprofError(f"--set {req.set_name!r}: choose one of {', '.join(SETS)}")
    if req.clock_control not in CLOCK_CONTROLS:
        raise BsprofError(f"--clock-control {req.clock_control!r}: choose one of {', '.join(CLOCK_CONTROLS)}")
    cmd = [ncu, "--target-processes", "all", "--clock-control", req.clock_control, "-o", os.path.abspath(out_base)]
    if req.set_name == "full":
        cmd += ["--set", "full", "--import-source", "yes"]
    else:
        # only what the verdict reads: no sections, so no rules and no SASS-patching passes
        for section in TRIAGE_SECTIONS if req.sections_override is None else req.sections_override:
            cmd += ["--section", section]
        cmd += ["--metrics", ",".join(req.metrics_override or triage_metric_names(req.arch))]
    if req.kernel_regex:
        cmd += ["-k", f"regex:{req.kernel_regex}", "--launch-skip", str(req.launch_skip)]
    elif req.capture == "profiler-api":
        cmd += ["--profile-from-start", "off"]
    elif req.capture == "nvtx":
        cmd += ["--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"]
    else:
        raise BsprofError(f"BSPROF_NCU_CAPTURE={req.capture!r}: use nvtx or profiler-api")
    cmd += ["--launch-count", "1"]
    cmd += [sys.executable, "-m", "bsprof.profile.launch", *req.launcher_args, "--info", os.path.abspath(info_path)]
    return cmd


_PROFILING = re.compile(r'==PROF== Profiling "([^"]*)"')
_PASSES = re.compile(r"(\d+) pass(?:es)?\b")
_STEP = re.compile(r"(\d+)%|\.")


class Progress:
    """Turns ncu's ``==PROF== Profiling "k" - 0: 0%....50%....100% - 38 passes`` stream into
    ``replay pass i of n`` updates (n from :data:`EXPECTED_PASSES` while running, then ncu's count)."""

    def __init__(self, expected: int | None, emit: Callable[[str], None]):
        self.expected, self.emit = expected, emit
        self.kernel: str | None = None
        self.passes: int | None = None
        self._log = ""
        self._start = 0  # where the current "Profiling" line starts in the log
        self._steps = 0

    def feed(self, text: str) -> None:
        self._log += text
        while True:
            m = _PROFILING.search(self._log, self._start)
            if not m:
                return
            if m.group(1) != self.kernel or m.start() != getattr(self, "_at", None):
                self.kernel, self._at, self._steps = m.group(1), m.start(), 0
            rest = self._log[m.end() :]
            colon = rest.find(":")  # skip "- 0:" (the launch id) before the bar
            if colon < 0:
                return
            line = rest[colon + 1 :].split("\n", 1)[0]
            done = _PASSES.search(line)
            bar = line[: done.start()] if done else line
            steps = sum(1 for _ in _STEP.finditer(bar)) - 1  # "0%" starts; ten steps reach 100%
            while self._steps < steps:
                self._steps += 1
                frac = min(self._steps, 10) / 10
                if self.expected:
                    self.emit(
                        f"ncu: replay pass ~{max(1, round(frac * self.expected))} of {self.expected} ({self.kernel})"
                    )
                else:
                    self.emit(f"ncu: replay {int(frac * 100)}% ({self.kernel})")
            if done:
                self.passes = int(done.group(1))
                self.emit(f"ncu: {self.passes} replay passes done ({self.kernel})")
            newline = rest.find("\n", colon)
            if done or newline >= 0:
                self._start = m.end() + (newline if newline >= 0 else len(rest))
                continue
            return


def ncu_error(output: str, returncode: int) -> str | None:
    """The one-line cause of an ncu failure, read from its output; None when it looks fine."""
    if "ERR_NVGPUCTRPERM" in output:
        return _PERM_HELP
    m = re.search(r"^error: (.+)$", output, re.M)  # the launcher's own one-line error
    if m:
        return m.group(1).strip()
    m = re.search(r"Failed to find metric[s]? (.+?)\s*$", output, re.M)
    if m:
        return f"ncu cannot collect {m.group(1).strip()} on this GPU; try --set full"
    if "No kernels were profiled" in output:
        return (
            "ncu profiled no kernel: the measured launch was not captured (NVTX range or kernel filter matched "
            "nothing); check the launcher with: python -m bsprof.profile.launch --help"
        )
    m = re.search(r"==ERROR== (.+)$", output, re.M)
    if m:
        return f"ncu failed: {m.group(1).strip()}"
    if returncode != 0:
        tail = [ln for ln in output.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        return f"ncu exited with code {returncode}: {tail[0].strip()[:300]}"
    return None


@dataclass
class NcuRun:
    report: Path
    info: dict
    passes: int | None
    wall_s: float
    command: list[str]
    log: str


def _missing_metric(log: str) -> str | None:
    m = re.search(r"Failed to find metric[s]?:? *(\S+?)[\s,.]*$", log, re.M)
    return m.group(1).strip("'\"") if m else None


def run_ncu(
    req: NcuRequest, scratch: Path, *, emit: Callable[[str], None] = print, timeout_s: float | None = None
) -> NcuRun:
    """Run ncu into ``scratch`` (a directory the caller removes on failure).

    A triage metric this ncu/GPU does not know is dropped and the run repeated (at most 3 times), so
    an unverified name on a new chip costs a rerun, not the whole triage."""
    from bsprof.analyzers.ncu.metrics import triage_metric_names

    for attempt in range(4):
        try:
            return _run_once(req, scratch, emit, timeout_s)
        except _MissingMetric as exc:
            current = req.metrics_override or triage_metric_names(req.arch)
            if req.set_name != "triage" or exc.name not in current or attempt == 3:
                raise BsprofError(f"ncu cannot collect {exc.name} on this GPU; try --set full") from None
            emit(f"ncu: this GPU has no metric {exc.name}; dropped from the triage set, re-running")
            req.metrics_override = [n for n in current if n != exc.name]
    raise AssertionError("unreachable")


class _MissingMetric(Exception):
    def __init__(self, name: str):
        self.name = name


def _run_once(req: NcuRequest, scratch: Path, emit: Callable[[str], None], timeout_s: float | None) -> NcuRun:
    ncu = find_ncu()
    out_base = scratch / "profile"
    info_path = scratch / "launch.json"
    for stale in (Path(str(out_base) + ".ncu-rep"), info_path):
        stale.unlink(missing_ok=True)
    cmd = build_command(ncu, req, out_base, info_path)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **req.extra_env)
    # the launcher must import bsprof from wherever this process did
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    progress = Progress(EXPECTED_PASSES.get((req.set_name, req.arch)), emit)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    chunks: list[str] = []
    assert proc.stdout is not None
    try:
        while True:
            data = os.read(proc.stdout.fileno(), 4096)
            if not data:
                break
            text = data.decode(errors="replace")
            chunks.append(text)
            progress.feed(text)
            if timeout_s and time.monotonic() - t0 > timeout_s:
                proc.kill()
                raise BsprofError(f"ncu ran longer than {timeout_s:.0f} s and was stopped; try --set triage")
        rc = proc.wait()
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    wall = time.monotonic() - t0
    log = "".join(chunks)
    missing = _missing_metric(log)
    if missing:
        raise _MissingMetric(missing)
    err = ncu_error(log, rc)
    report = Path(str(out_base) + ".ncu-rep")
    if err is None and not report.is_file():
        err = "ncu finished without writing a report; see its output: " + (log.strip().splitlines() or [""])[-1][:200]
    if err:
        raise BsprofError(err)
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    return NcuRun(report=report, info=info, passes=progress.passes, wall_s=wall, command=cmd, log=log)


def result_name(variant: str, family: str, mnkl, when: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    return f"{variant}_{family}_{'x'.join(str(x) for x in mnkl)}_{stamp}"


def profile_to_dir(
    req: NcuRequest,
    parent: str | os.PathLike,
    name: str,
    *,
    mnkl=None,
    emit: Callable[[str], None] = print,
    timeout_s: float | None = None,
) -> tuple[Path, dict]:
    """Profile, extract, and land ``<name>.ncu-rep``, ``summary.parquet``, ``summary.json`` in a fresh
    ``parent/name[-i]`` directory. Returns (directory, summary JSON)."""
    from bsprof.analyzers.ncu.extract import extract
    from bsprof.analyzers.ncu.summary import summary_json, write_summary
    from bsprof.io import ensure_dir, results_dir

    parent = ensure_dir(parent)  # by the output policy: one missing level at most
    scratch = Path(tempfile.mkdtemp(prefix=".bsprof-ncu-", dir=parent))
    try:
        run = run_ncu(req, scratch, emit=emit, timeout_s=timeout_s)
        flops = run.info.get("flops") or None
        ex = extract(run.report, flops=flops)
        k = int(mnkl[2]) if mnkl else None
        # the report, its table and summary.json land together, whole (an interrupt leaves none)
        with results_dir(parent, name) as staged:
            rep = staged.path / f"{name}.ncu-rep"
            os.replace(run.report, rep)
            ex.report = rep.name  # beside summary.json, wherever the directory lands
            payload = summary_json(
                ex,
                k=k,
                set=req.set_name,
                clock_control=req.clock_control,
                replay_passes=run.passes,
                ncu_wall_s=round(run.wall_s, 2),
                launch=run.info,
                command=run.command,
            )
            write_summary(ex, staged.path, "summary", payload)
        ex.report = str(staged.path / rep.name)
        return staged.path, payload
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def profile_bundled(
    variant: str,
    family: str,
    mnkl: str | None,
    set_name: str,
    clock_control: str,
    out: str | os.PathLike,
    warmup: int,
    *,
    emit: Callable[[str], None] = print,
) -> dict:
    """`bsprof ncu --kernel`: profile one bundled kernel (family ``auto``: picked from the GPU) into a
    fresh result directory; returns the summary JSON with ``output_dir``."""
    from bsprof.analyzers.ncu.metrics import arch_key
    from bsprof.gpu import device_info
    from bsprof.kernels.api import Target, parse_kernel_spec, spec_label

    # parsed once, before looking for ncu or a GPU where the family is given; the launcher gets it whole
    target = Target.parse(family, variant, mnkl) if family != "auto" else None
    if target is None:
        parse_kernel_spec(variant, None)
    info = device_info()  # a GPU first: on a machine without one, installing ncu would not help
    find_ncu()
    target = target or Target.parse(family, variant, mnkl)
    if target.picked_from_gpu:
        emit(
            f"family: {target.family} (picked from the GPU: {info['name']}, sm_{info['capability'][0]}{info['capability'][1]})"
        )
    req = NcuRequest(
        launcher_args=["--target", target.to_arg(), "--warmup", str(warmup)],
        arch=arch_key(info["capability"][0]),
        set_name=set_name,
        clock_control=clock_control,
    )
    directory, payload = profile_to_dir(
        req, out, result_name(spec_label(target.spec), target.family, target.mnkl), mnkl=target.mnkl, emit=emit
    )
    payload["output_dir"] = str(directory)
    return payload
