"""The bundled kernels' machine code is pinned: every shipped FP8-blockwise variant at 4096^3, two
per-shape picks of ``optimized`` (a 64-row and a 192-row tile), a timing build and the NVFP4
``baseline`` / ``optimized`` builds compile to the SASS recorded in tests/data/kernel_sass/.

A change to the kernels' source that is meant to leave the code alone (splitting a file, moving a
branch into a helper, renaming a local) must pass this test; a change meant to alter the code
updates the references on purpose:

    python3 -m tests.test_kernel_sass_identity --write

The references are the cu13 compiler's (``kernels.build.dsl_toolkit``: the flavor a CUDA 13 GPU runs, which
the kernels extra installs); the cu12 flavor emits other SASS for the same source.

The SASS is compared as ``nvdisasm -c`` prints it (no line info), with the kernels' mangled
names replaced by one placeholder: what the GPU runs, not where the source lives. The compiles
share bsprof.kernels.build's cache with tests/test_fp8_sass.py and tests/test_nvfp4_sass.py (the
same arguments give the same cubin), so a session builds each configuration once.
"""

from __future__ import annotations

import difflib
import hashlib
import lzma
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REFS = Path(__file__).resolve().parent / "data" / "kernel_sass"
FP8_MNKL = (4096, 4096, 4096, 1)
NVFP4_MNKL = (8192, 8192, 1024, 1)
# name -> (family module, variant, problem, compile switches, the tile plan() must pick there)
BUILDS: dict[str, tuple[str, str, tuple, dict, str | None]] = {
    "fp8_baseline": ("fp8_blockwise", "baseline", FP8_MNKL, {}, None),
    "fp8_optimized": ("fp8_blockwise", "optimized", FP8_MNKL, {}, None),
    "fp8_rescaled": ("fp8_blockwise", "rescaled", FP8_MNKL, {}, None),
    "fp8_pingpong": ("fp8_blockwise", "pingpong", FP8_MNKL, {}, None),
    # the timing build test_fp8_sass.py compiles (recorder, injected delays in K-loop and epilogue)
    "fp8_optimized_timing": (
        "fp8_blockwise",
        "optimized",
        FP8_MNKL,
        dict(timing=True, delay_kloop=300, delay_phase1=200),
        None,
    ),
    # select.py's picks: one consumer warpgroup (64 rows), and three (192 rows) in 2x1 clusters
    "fp8_optimized_64row": ("fp8_blockwise", "optimized", (128, 4096, 7168, 1), {}, "64x64"),
    "fp8_optimized_192row": ("fp8_blockwise", "optimized", (4096, 2112, 7168, 1), {}, "192x128"),
    # test_nvfp4_sass.py's 128x128, 1x1 configuration
    "nvfp4_baseline": ("nvfp4", "baseline", NVFP4_MNKL, dict(mma_tiler=(128, 128), cluster=(1, 1)), None),
    "nvfp4_optimized": ("nvfp4", "optimized", NVFP4_MNKL, dict(mma_tiler=(128, 128), cluster=(1, 1)), None),
}


def compile_build(name: str, out_dir: Path) -> Path:
    import importlib

    family, variant, mnkl, switches, _ = BUILDS[name]
    module = importlib.import_module(f"bsprof.kernels.{family}")
    return Path(module.compile_cubin(variant, Path(out_dir), mnkl=mnkl, **switches))


def normalized_sass(cubin: Path) -> str:
    """``nvdisasm -c`` of the cubin with every function's mangled name replaced by ``FUNC<i>``
    (the name carries the kernel class's module path, which a file split may move)."""
    from bsprof.analyzers.sass.disasm import tool_path

    text = subprocess.run([tool_path("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    names = list(dict.fromkeys(re.findall(r"\.text\.([A-Za-z0-9_$.]+):", text)))
    for i, fn in enumerate(sorted(names, key=len, reverse=True)):
        text = text.replace(fn, f"FUNC{i}")
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def reference(name: str) -> tuple[str, str]:
    """(sha256, SASS text) recorded for build ``name``."""
    sha = (REFS / f"{name}.sha256").read_text().split()[0]
    return sha, lzma.decompress((REFS / f"{name}.sass.xz").read_bytes()).decode()


def diff_summary(want: str, got: str, limit: int = 40) -> str:
    """How many instruction lines changed and the first hunks of the unified diff."""
    diff = list(difflib.unified_diff(want.splitlines(), got.splitlines(), "recorded", "compiled", n=1, lineterm=""))
    changed = sum(1 for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
    head = "\n".join(diff[:limit])
    return f"{changed} lines differ ({len(want.splitlines())} recorded, {len(got.splitlines())} compiled)\n{head}"


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sass_identity")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILDS))
def test_sass_identical_to_reference(name, out_dir):
    pytest.importorskip("cutlass")
    family, variant, mnkl, switches, tile = BUILDS[name]
    if tile is not None:
        # the build stands for select.py's pick at this problem: a changed pick changes what it tests
        from bsprof.kernels.fp8_blockwise import plan

        assert plan(variant, mnkl, **switches)["tile"] == tile
    sha, want = reference(name)
    assert digest(want) == sha, f"{name}: the recorded SASS does not match its recorded sha256"
    got = normalized_sass(compile_build(name, out_dir))
    if got != want:
        pytest.fail(
            f"{name}: SASS differs from tests/data/kernel_sass/{name}.sass.xz\n{diff_summary(want, got)}", pytrace=False
        )


def test_normalization_names_only_functions(data_dir):
    """The placeholder replaces the mangled names and nothing else: a foreign cubin's instructions
    survive the normalization line for line."""
    from bsprof.analyzers.sass.disasm import tool_path

    pytest.importorskip("bsprof.analyzers.sass.disasm")
    cubins = sorted((data_dir / "sass").glob("*.cubin.xz"))
    if not cubins:
        pytest.skip("no shipped cubin to disassemble")
    try:
        tool_path("nvdisasm")
    except Exception:
        pytest.skip("nvdisasm not installed")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / cubins[0].name.removesuffix(".xz")
        cubin.write_bytes(lzma.decompress(cubins[0].read_bytes()))
        raw = subprocess.run(
            [tool_path("nvdisasm"), "-c", str(cubin)], capture_output=True, text=True, check=True
        ).stdout
        norm = normalized_sass(cubin)
    assert "FUNC0" in norm and ".text.FUNC0:" in norm
    ops = [ln.split("*/", 1)[1].strip() for ln in raw.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
    norm_ops = [ln.split("*/", 1)[1].strip() for ln in norm.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
    assert len(ops) == len(norm_ops) > 0
    assert sum(a != b for a, b in zip(ops, norm_ops)) <= sum("FUNC" in b for b in norm_ops)


def write_references(names: list[str]) -> None:
    import tempfile

    REFS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            start = time.monotonic()
            text = normalized_sass(compile_build(name, Path(tmp)))
            (REFS / f"{name}.sass.xz").write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))
            (REFS / f"{name}.sha256").write_text(f"{digest(text)}  {name}\n")
            print(
                f"{name}: {len(text.splitlines())} lines, sha256 {digest(text)[:16]}, {time.monotonic() - start:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "--write":
        sys.exit("usage: python3 -m tests.test_kernel_sass_identity --write [BUILD ...]")
    write_references(args[1:] or list(BUILDS))
