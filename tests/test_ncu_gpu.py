"""End to end on a GPU: `bsprof ncu --kernel optimized` profiles the bundled kernel with real ncu."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _ncu_family() -> tuple[str, dict]:
    """The GPU's kernel family and an environment that imports this checkout; skips without ncu
    or without a bundled kernel for the GPU."""
    from bsprof.errors import BsprofError
    from bsprof.gpu import device_info
    from bsprof.kernels.api import family_for_capability, family_module
    from bsprof.profile.ncu_runner import find_ncu

    try:
        find_ncu()
    except BsprofError as exc:
        pytest.skip(str(exc))
    family = family_for_capability(device_info()["capability"])
    if not hasattr(family_module(family), "prepare"):
        pytest.skip(f"the {family} kernel has no prepare() in this build")
    return family, dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.mark.gpu
def test_ncu_kernel_optimized_end_to_end(tmp_path):
    family, env = _ncu_family()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsprof",
            "ncu",
            "--kernel",
            "optimized",
            "--set",
            "triage",
            "-o",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    js = json.loads(proc.stdout)
    assert js["bsprof"] == {"kind": "ncu", "version": 1}
    (launch,) = js["launches"]  # only the measured launch was captured
    assert launch["duration_ns"] > 0 and launch["registers_per_thread"] > 0
    assert launch["verdict"] in ("launch-bound", "under-filled", "compute-bound", "memory-bound", "latency-bound")
    assert launch["derived"]["tflops"] > 0
    assert js["replay_passes"] and js["replay_passes"] > 0
    assert "replay pass" in proc.stderr
    (d,) = [p for p in tmp_path.iterdir()]
    assert d.name.startswith(f"optimized_{family}_")
    assert any(p.suffix == ".ncu-rep" for p in d.iterdir()) and (d / "summary.json").is_file()


@pytest.mark.gpu
def test_ncu_profiles_a_switched_build(tmp_path):
    # `--kernel optimized:epi_split=0` (fp8-blockwise): the launcher builds the switched kernel, and
    # the result directory is named without the spec's ':' and '='
    family, env = _ncu_family()
    if family != "fp8-blockwise":
        pytest.skip("switch specs are an fp8-blockwise option")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bsprof",
            "ncu",
            "--kernel",
            "optimized:epi_split=0",
            "--mnkl",
            "1024,1024,1024",
            "--set",
            "triage",
            "-o",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (launch,) = json.loads(proc.stdout)["launches"]
    assert "Fp8BlockwiseGemm" in launch["kernel"] and launch["duration_ns"] > 0
    (d,) = list(tmp_path.iterdir())
    assert d.name.startswith("optimized_epi_split_0_fp8-blockwise_1024x1024x1024x1_")
