"""Loading NVIDIA's CuTe DSL dense GEMM example as a benchmark peer: what a wrong path or file
tells the user, and that the benchmark refuses it before touching a GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bsprof.errors import BsprofError
from bsprof.kernels.fp8_blockwise import cute_example_peer as peer

REPO = Path(__file__).resolve().parents[1]


def test_missing_example_names_the_file_to_pass(tmp_path):
    with pytest.raises(BsprofError) as exc:
        peer.example_file(tmp_path)  # a directory without the example in it
    msg = str(exc.value)
    assert "no such file" in msg and peer.EXAMPLE_IN_CHECKOUT in msg and "\n" not in msg


def test_checkout_directory_resolves_to_the_example(tmp_path):
    src = tmp_path / peer.EXAMPLE_IN_CHECKOUT
    src.parent.mkdir(parents=True)
    src.write_text(f"class {peer.KERNEL_CLASS}:\n    tag = 'found'\n")
    assert peer.example_file(tmp_path) == src
    assert peer.load_kernel_class(tmp_path).tag == "found"


def test_a_file_without_the_kernel_class_is_refused(tmp_path):
    src = tmp_path / "dense_gemm.py"
    src.write_text("class SomethingElse:\n    pass\n")
    with pytest.raises(BsprofError, match=f"defines no {peer.KERNEL_CLASS}"):
        peer.load_kernel_class(src)


def test_an_example_that_fails_to_import_is_one_line(tmp_path):
    src = tmp_path / "dense_gemm.py"
    src.write_text("import not_a_module_anywhere\n")
    with pytest.raises(BsprofError) as exc:
        peer.load_kernel_class(src)
    assert "importing it failed (ModuleNotFoundError" in str(exc.value) and "\n" not in str(exc.value)


def test_benchmark_refuses_a_wrong_path_before_any_gpu_work(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "fp8_blockwise.py"), "--cute-example", str(tmp_path / "nope.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "nope.py: no such file" in run.stdout


def test_one_line_keeps_the_type_and_the_first_line():
    from bsprof.errors import one_line

    assert one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert one_line(ValueError("")) == "ValueError"
    assert len(one_line(OSError("x" * 500))) == len("OSError: ") + 160


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--family", "fp8-blockwise", "--cute-example", "/no/such/dense_gemm.py"], "no such file"),
        (["--family", "nvfp4", "--inputs", "int"], "--inputs and --cute-example are fp8-blockwise options"),
        (["--family", "nvfp4", "--rounds", "3"], "--rounds and --placements are fp8-blockwise options"),
        (["--family", "fp8-blockwise", "--rounds", "2", "--placements", "3"], "--placements 3 > --rounds 2"),
        # the default is 3 rounds, so 4 copies cannot all be visited
        (["--family", "fp8-blockwise", "--placements", "4"], "--placements 4 > --rounds 3"),
        (["--family", "fp8-blockwise", "--plan", "--rounds", "3"], "--plan only prints the choice"),
    ],
)
def test_bench_verb_refuses_these_before_looking_for_a_gpu(argv, message):
    from click.testing import CliRunner

    from bsprof.cli import cli

    r = CliRunner().invoke(cli, ["bench", *argv])
    assert r.exit_code == 2
    assert message in r.output and "Traceback" not in r.output
