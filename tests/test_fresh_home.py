"""A fresh machine: an empty home directory, no bsprof cache, no GPU. bsprof makes its own cache
directories (with their parents: a cache is not a user output path), every hint it prints works
when followed, a missing option value points to the verb's own help, and a verb that needs a GPU
says so before anything else."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_bsprof

DATA = Path(__file__).resolve().parent / "data"
CUBIN_XZ = DATA / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.cubin.xz"


@pytest.fixture
def empty_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("BSPROF_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return home


def test_cache_dirs_are_made_with_their_parents(empty_home, tmp_path, monkeypatch):
    from bsprof.io import cache_dir

    assert cache_dir("sass", "fp8-blockwise") == empty_home / ".cache" / "bsprof" / "sass" / "fp8-blockwise"
    assert (empty_home / ".cache" / "bsprof" / "sass" / "fp8-blockwise").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert (
        cache_dir("cubins") == tmp_path / "xdg" / "bsprof" / "cubins"
        and (tmp_path / "xdg" / "bsprof" / "cubins").is_dir()
    )
    # BSPROF_CACHE moves every cache, however deep its missing parents
    monkeypatch.setenv("BSPROF_CACHE", str(tmp_path / "a" / "b" / "c"))
    from bsprof.kernels.build import cache_root

    assert cache_root() == tmp_path / "a" / "b" / "c" / "cubins" and cache_root().is_dir()
    assert cache_dir("xz") == tmp_path / "a" / "b" / "c" / "xz"


def test_a_cache_that_cannot_be_made_is_one_line(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("keep")
    monkeypatch.setenv("BSPROF_CACHE", str(blocker / "cache"))
    line = assert_one_line_error(*run_bsprof(["sass", str(CUBIN_XZ)])[::2])
    assert "bsprof's cache directory" in line and "set BSPROF_CACHE" in line, line
    assert blocker.read_text() == "keep"


def test_an_xz_input_from_an_empty_home(empty_home):
    code, out, err = run_bsprof(["sass", str(CUBIN_XZ), "--json"])
    assert code == 0, err
    assert list((empty_home / ".cache" / "bsprof" / "xz").rglob("*.cubin"))


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="needs nvidia-cutlass-dsl (CuTe DSL)")
def test_the_no_input_hint_of_sass_works_when_followed(empty_home):
    """`bsprof sass` names an example; run as given, from an empty home, it compiles and analyzes
    (it failed on every fresh machine: the build directory's parents did not exist)."""
    line = assert_one_line_error(*run_bsprof(["sass"])[::2])
    example = re.search(r"e\.g\. ([^)]*)\)", line)
    assert example and "--arch" in example.group(1), line
    code, out, err = run_bsprof(["sass", *shlex.split(example.group(1)), "--json"])
    assert code == 0, err[-2000:]
    assert '"mma"' in out
    assert list((empty_home / ".cache" / "bsprof" / "sass").iterdir())


def test_kernel_without_arch_names_a_whole_command():
    line = assert_one_line_error(*run_bsprof(["sass", "--kernel", "optimized"])[::2])
    assert "e.g. --kernel optimized --arch sm_90a" in line, line


@pytest.mark.parametrize(
    "args, verb",
    [
        (["model", "--kloop"], "model"),
        (["sass", "--arch"], "sass"),
        (["timing", "--mnkl"], "timing"),
        (["ncu", "--report"], "ncu"),
        (["bench", "--mnkl"], "bench"),
        (["report", "-o"], "report"),
    ],
)
def test_a_missing_option_value_points_to_the_verbs_help(args, verb):
    line = assert_one_line_error(*run_bsprof(args)[::2])
    assert f"(see `bsprof {verb} --help`)" in line, line


def test_an_unknown_verb_points_to_the_top_level_help():
    line = assert_one_line_error(*run_bsprof(["bogus"])[::2])
    assert "(see `bsprof --help`)" in line, line


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
@pytest.mark.parametrize(
    "args",
    [
        ["ncu", "--kernel", "optimized"],
        ["bench", "--kernel", "optimized"],
        ["timing", "--kernel", "optimized"],
        ["model", "--validate"],
    ],
)
def test_gpu_verbs_say_a_gpu_is_needed_first(args, tmp_path, monkeypatch):
    """Without a GPU and without ncu, the message is the GPU: installing ncu would not help."""
    from bsprof import gpu
    from bsprof.profile import ncu_runner

    gpu.device_info.cache_clear()
    monkeypatch.setattr(ncu_runner, "NCU_GLOBS", ())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    try:
        line = assert_one_line_error(*run_bsprof([*args, "-o", str(tmp_path / "out")])[::2])
    finally:
        gpu.device_info.cache_clear()
    assert "no NVIDIA GPU" in line and "Nsight" not in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_timing_without_a_gpu_names_the_stored_capture_way_and_it_works(tmp_path, monkeypatch):
    """`bsprof timing` on a CPU: the line names both ways on (a GPU host, or --from DIR on a stored
    capture; `bsprof ncu` likewise names --report), and --from DIR on the shipped H100 capture runs
    here."""
    from bsprof import gpu

    gpu.device_info.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    try:
        line = assert_one_line_error(*run_bsprof(["timing", "-o", str(tmp_path / "out")])[::2])
        ncu_line = assert_one_line_error(*run_bsprof(["ncu", "--kernel", "optimized"])[::2])
    finally:
        gpu.device_info.cache_clear()
    assert "no NVIDIA GPU" in line and "GPU host" in line and "`bsprof timing --from DIR`" in line, line
    assert "GPU host" in ncu_line and "`bsprof ncu --report FILE`" in ncu_line, ncu_line
    assert not (tmp_path / "out").exists()
    code, out, err = run_bsprof(["timing", "--from", str(DATA / "h100_timing"), "--json"])
    assert code == 0, err[-2000:]
    doc = json.loads(out)
    assert "H100" in doc["device"] and doc["stats"], sorted(doc)
