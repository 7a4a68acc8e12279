"""NVFP4 kernels on a Blackwell GPU (marked sm100: skipped cleanly everywhere else), plus the
clean refusal on machines without one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bsprof.errors import BsprofError


def test_prepare_refuses_without_sm100():
    from bsprof.gpu import device_info
    from bsprof.kernels.nvfp4 import prepare

    try:
        cap = device_info()["capability"]
    except BsprofError:
        cap = None
    if cap is not None and cap[0] == 10:
        pytest.skip("this machine has an sm_100 GPU")
    with pytest.raises(BsprofError) as ei:
        prepare("baseline", (256, 256, 256, 1))
    assert "\n" not in str(ei.value)


def test_bench_cli_exits_2_without_sm100():
    from bsprof.gpu import device_info

    try:
        if device_info()["capability"][0] == 10:
            pytest.skip("this machine has an sm_100 GPU")
    except BsprofError:
        pass
    proc = subprocess.run(
        [sys.executable, "-m", "bsprof", "bench", "--family", "nvfp4", "--mnkl", "256,256,256"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error:") and "Traceback" not in proc.stderr


@pytest.mark.sm100
@pytest.mark.parametrize(
    "variant,config",
    [
        ("baseline", {}),
        ("optimized", {}),
        ("optimized", {"mma_tiler": (128, 128), "cluster": (2, 1)}),
        ("optimized", {"mma_tiler": (256, 256), "cluster": (2, 1), "c_dtype": "Float32"}),
        ("baseline", {"sf_vec": 32, "c_dtype": "BFloat16"}),
        ("optimized", {"sf_vec": 32, "epilogue": "simt", "cache_hint": False, "acc_stage": 1}),
    ],
)
def test_matches_reference(variant, config):
    from bsprof.kernels.nvfp4 import prepare

    p = prepare(variant, (512, 768, 1024, 2), **config)
    p.launch()
    assert p.check() < 1e-2


@pytest.mark.sm100
def test_timing_table_has_every_role():
    from bsprof.analyzers.timing.schema import COLUMNS
    from bsprof.kernels.nvfp4 import prepare

    p = prepare("optimized", (1024, 1024, 1024, 1), timing=True, delay_kloop=2000)
    p.launch()
    assert p.check() < 1e-2
    df = p.timing_table()
    assert list(df.columns)[: len(COLUMNS)] == list(COLUMNS)
    assert set(df["role"]) == {"producer", "mma", "epilogue"}
    kl = df[df.phase == "kloop"]
    assert ((kl.end - kl.start) >= 2000 * 4).all()  # 4 K-tiles of 256, each spinning 2000 cycles


def test_bench_cli_shape_errors_come_first():
    """Bad shapes and options are reported on any machine, before the GPU check."""
    proc = subprocess.run(
        [sys.executable, "-m", "bsprof", "bench", "--family", "nvfp4", "--mnkl", "8192,8192,1000"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: K=1000 is not a multiple of the scale vector 16; pad K to a multiple of 16"
