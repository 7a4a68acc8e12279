"""The ncu runner: command line, progress parsing, error mapping, and the results directory.

ncu cannot run on a CPU-only machine, so the directory/cleanup tests put a stand-in ``ncu`` on PATH
that replays what real ncu does at the file level (writes the real H100 report to ``-o``, prints
ncu's progress line) or fails the way ncu fails (ERR_NVGPUCTRPERM text, no kernel profiled, a
half-written report). The real thing runs in tests/test_ncu_gpu.py.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pandas as pd
import pytest

from bsprof.errors import BsprofError
from bsprof.profile import ncu_runner as R

FAKE_NCU = textwrap.dedent("""\
    #!{python}
    import json, os, shutil, sys
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    info = args[args.index("--info") + 1]
    mode = os.environ["FAKE_NCU_MODE"]
    print("==PROF== Connected to process 4242", flush=True)
    if mode == "perm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
              "Counters on the target device 0.", flush=True)
        sys.exit(1)
    if mode == "nokernel":
        print("==PROF== Disconnected from process 4242\\n==WARNING== No kernels were profiled.", flush=True)
        sys.exit(0)
    wanted = args[args.index("--metrics") + 1].split(",") if "--metrics" in args else [mode[8:]]  # full: all
    if mode.startswith("missing:") and mode[8:] in wanted:
        print("==ERROR== Failed to find metric " + mode[8:], flush=True)
        sys.exit(1)
    if mode == "launcher":
        print("error: no bundled fp8-blockwise kernel is available in this build yet", flush=True)
        sys.exit(2)
    if mode == "partial":
        open(out + ".ncu-rep", "wb").write(open(os.environ["FAKE_NCU_REPORT"], "rb").read()[:5000])
        sys.exit(1)
    json.dump({{"kernel_name": "nvjet", "flops": 2.0 * 4096 ** 3, "mnkl": [4096, 4096, 4096, 1]}}, open(info, "w"))
    sys.stdout.write('==PROF== Profiling "nvjet_sm90_qqtst" - 0: 0%..')
    sys.stdout.flush()
    sys.stdout.write('..50%....100% - 38 passes\\n')
    shutil.copy(os.environ["FAKE_NCU_REPORT"], out + ".ncu-rep")
    print("==PROF== Disconnected from process 4242", flush=True)
""")


@pytest.fixture()
def fake_ncu(tmp_path, monkeypatch, data_dir):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NCU_REPORT", str(data_dir / "h100_cublas_fp8_4096.ncu-rep.xz"))
    return monkeypatch


def _req(set_name="triage"):
    return R.NcuRequest(
        launcher_args=["--family", "fp8-blockwise", "--variant", "optimized", "--mnkl", "4096,4096,4096,1"],
        arch="sm_90",
        set_name=set_name,
    )


def test_command_triage_vs_full(tmp_path):
    tri = R.build_command("ncu", _req("triage"), tmp_path / "p", tmp_path / "i.json")
    full = R.build_command("ncu", _req("full"), tmp_path / "p", tmp_path / "i.json")
    assert "--set" not in tri and "--metrics" in tri
    metrics = tri[tri.index("--metrics") + 1].split(",")
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in metrics
    assert full[full.index("--set") + 1] == "full"
    for cmd in (tri, full):
        assert cmd[cmd.index("--nvtx-include") + 1] == "bsprof_measured/"
        assert cmd[cmd.index("--launch-count") + 1] == "1"
        assert cmd[cmd.index("--clock-control") + 1] == "none"
        assert cmd[cmd.index("-m") + 1] == "bsprof.profile.launch"
        assert "-f" not in cmd  # never let ncu overwrite
    named = R.build_command(
        "ncu",
        R.NcuRequest(launcher_args=[], arch="sm_90", kernel_regex="^gemm$", launch_skip=3),
        tmp_path / "p",
        tmp_path / "i.json",
    )
    assert named[named.index("-k") + 1] == "regex:^gemm$" and named[named.index("--launch-skip") + 1] == "3"
    assert "--nvtx" not in named
    api = R.build_command(
        "ncu", R.NcuRequest(launcher_args=[], arch="sm_90", capture="profiler-api"), tmp_path / "p", tmp_path / "i"
    )
    assert api[api.index("--profile-from-start") + 1] == "off" and "--nvtx" not in api
    with pytest.raises(BsprofError, match="--set 'fast'"):
        R.build_command(
            "ncu", R.NcuRequest(launcher_args=[], arch="sm_90", set_name="fast"), tmp_path / "p", tmp_path / "i"
        )


def test_progress_reports_pass_i_of_n_from_a_split_stream():
    seen = []
    p = R.Progress(38, seen.append)
    stream = '==PROF== Profiling "nvjet_sm90" - 0: 0%....50%....100% - 38 passes\n'
    for i in range(0, len(stream), 5):
        p.feed(stream[i : i + 5])
    assert seen[0] == "ncu: replay pass ~4 of 38 (nvjet_sm90)"
    assert seen[9] == "ncu: replay pass ~38 of 38 (nvjet_sm90)"
    assert seen[-1] == "ncu: 38 replay passes done (nvjet_sm90)" and p.passes == 38
    q = R.Progress(None, (seen := []).append)
    q.feed('==PROF== Profiling "k" - 0: 0%....5')
    assert seen == [f"ncu: replay {p}% (k)" for p in (10, 20, 30, 40)]


def test_error_lines():
    assert "NVreg_RestrictProfilingToAdminUsers=0" in R.ncu_error("==ERROR== ERR_NVGPUCTRPERM - no permission", 1)
    assert "no kernel" in R.ncu_error("==WARNING== No kernels were profiled.", 0)
    assert (
        R.ncu_error("error: the launcher failed: RuntimeError: boom\n", 2) == "the launcher failed: RuntimeError: boom"
    )
    assert "cannot collect sm__foo" in R.ncu_error("==ERROR== Failed to find metric sm__foo\n", 1)
    assert R.ncu_error('==PROF== Profiling "k" - 0: 0%....50%....100% - 9 passes\n', 0) is None


def test_no_ncu_installed(monkeypatch):
    monkeypatch.setattr(R.shutil, "which", lambda name: None)
    monkeypatch.setattr(R, "NCU_GLOBS", ())
    with pytest.raises(BsprofError, match="ncu \\(Nsight Compute\\) is not installed"):
        R.find_ncu()


def test_results_dir_holds_report_parquet_json(fake_ncu, tmp_path):
    fake_ncu.setenv("FAKE_NCU_MODE", "ok")
    lines = []
    name = R.result_name("optimized", "fp8-blockwise", (4096, 4096, 4096, 1), when=0)
    assert name.startswith("optimized_fp8-blockwise_4096x4096x4096x1_19")
    d, payload = R.profile_to_dir(_req(), tmp_path / "res", name, mnkl=(4096, 4096, 4096, 1), emit=lines.append)
    assert sorted(p.name for p in d.iterdir()) == sorted([f"{name}.ncu-rep", "summary.parquet", "summary.json"])
    js = json.loads((d / "summary.json").read_text())
    assert js["bsprof"] == {"kind": "ncu", "version": 1}
    assert js["replay_passes"] == 38 and js["set"] == "triage"
    launch = js["launches"][0]
    assert set(["kernel", "duration_ns", "registers_per_thread", "grid", "block", "verdict", "metrics"]) <= set(launch)
    assert launch["derived"]["tflops"] == pytest.approx(2 * 4096**3 / 103552e-9 / 1e12)
    assert launch["verdict"] == "compute-bound"
    assert pd.read_parquet(d / "summary.parquet")["kernel"].iloc[0].startswith("nvjet")
    assert "ncu: 38 replay passes done (nvjet_sm90_qqtst)" in lines
    # the result directory reads back with the FLOPs the launcher recorded
    from click.testing import CliRunner

    from bsprof.cli import cli

    back = json.loads(CliRunner().invoke(cli, ["ncu", "--report", str(d), "--json"]).output)
    assert back["launches"][0]["derived"]["tflops"] == pytest.approx(launch["derived"]["tflops"])
    # nothing is overwritten: the same name again gets a fresh directory
    d2, _ = R.profile_to_dir(_req(), tmp_path / "res", name, emit=lines.append)
    assert d2.name == f"{name}-2" and (d / f"{name}.ncu-rep").is_file()
    assert not [p for p in (tmp_path / "res").iterdir() if p.name.startswith(".")]  # scratch removed


@pytest.mark.parametrize(
    "mode,match",
    [
        ("perm", "ERR_NVGPUCTRPERM"),
        ("nokernel", "profiled no kernel"),
        ("launcher", "no bundled fp8-blockwise kernel"),
        ("partial", "ncu exited with code 1"),
    ],
)
def test_failures_leave_nothing_behind(fake_ncu, tmp_path, mode, match):
    fake_ncu.setenv("FAKE_NCU_MODE", mode)
    parent = tmp_path / "res"
    with pytest.raises(BsprofError, match=match):
        R.profile_to_dir(_req(), parent, "x", emit=lambda s: None)
    assert list(parent.iterdir()) == []


def test_unknown_triage_metric_is_dropped_and_rerun(fake_ncu, tmp_path):
    gone = "smsp__average_warps_issue_stalled_misc_per_issue_active.ratio"
    fake_ncu.setenv("FAKE_NCU_MODE", "missing:" + gone)
    lines = []
    d, payload = R.profile_to_dir(_req(), tmp_path, "x", emit=lines.append)
    assert any("no metric " + gone in ln for ln in lines)
    used = payload["command"][payload["command"].index("--metrics") + 1].split(",")
    assert gone not in used and len(used) > 40
    # with --set full there is nothing to drop: one line, nothing left behind
    with pytest.raises(BsprofError, match="cannot collect"):
        R.profile_to_dir(_req("full"), tmp_path / "f", "y", emit=lines.append)
