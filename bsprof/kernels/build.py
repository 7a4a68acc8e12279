"""CPU-only CuTe DSL builds: compile a kernel for an architecture we may not have and keep its cubin.

CuTe DSL reads ``CUTE_DSL_ARCH`` / ``CUTE_DSL_KEEP`` / ``CUTE_DSL_DUMP_DIR`` / ``CUTE_DSL_LINEINFO``
when it is imported, so each build runs in a fresh interpreter with those set. Results are cached
by a hash of the family's sources, the arguments, the architecture, the cutlass-dsl version with the
toolkit flavor it compiles with, and (with line info) where the sources live, so a test session (or CI)
compiles each configuration once per checkout.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.io import atomic_path, cache_dir

KERNELS_DIR = Path(__file__).resolve().parent


def cache_root() -> Path:
    """Where built cubins are kept, keyed by sources and knobs (made on first use)."""
    return cache_dir("cubins")


def _sources_digest(package_dir: Path) -> str:
    """The kernel family's sources and the modules every family shares (the tile order, the
    timing recorder): a change to either rebuilds."""
    h = hashlib.sha256()
    for root, files in ((package_dir, package_dir.rglob("*.py")), (KERNELS_DIR, KERNELS_DIR.glob("*.py"))):
        for p in sorted(files):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def dsl_toolkit() -> str:
    """The CUDA toolkit flavor nvidia-cutlass-dsl compiles with in this environment ("cu13"), by the DSL's
    own rule without importing it: of the flavors whose compiler library is installed
    (``cutlass/_mlir/_mlir_libs/_cutlass_ir.cu<N>.*.so``), the newest the CUDA driver supports, or the
    newest where there is no driver. Why it matters: the cu12 and cu13 compilers emit different SASS for
    the same kernel (``optimized:elect_release=0`` on the 256x128 tile: +146 K-loop instructions from
    cu12, -7 from cu13, the build a CUDA 13 GPU runs), so SASS counted on the CPU must come from the
    flavor the GPU runs. "" where the DSL is not installed."""
    import ctypes

    spec = importlib.util.find_spec("cutlass")
    if spec is None or spec.origin is None:
        return ""
    libs = Path(spec.origin).parent / "_mlir" / "_mlir_libs"
    found = {
        int(m.group(1)) for p in libs.glob("_cutlass_ir.cu*") if (m := re.match(r"_cutlass_ir\.cu(\d+)\.", p.name))
    }
    driver = None
    try:
        version = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0:
            driver = version.value // 1000
    except (OSError, AttributeError):
        driver = None
    usable = [f for f in found if driver is None or f <= driver]
    return f"cu{max(usable)}" if usable else ""


def _dsl_version() -> str:
    """The DSL's version and the toolkit flavor it compiles with (:func:`dsl_toolkit`): a cubin cached
    under one flavor is not the other's."""
    try:
        version = importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        raise BsprofError("nvidia-cutlass-dsl is not installed; pip install 'bsprof[kernels]'") from None
    return f"{version} {dsl_toolkit()}".strip()


def dsl_compiler() -> str:
    """What compiles the bundled kernels here, as a record names it ("nvidia-cutlass-dsl 4.8.1 cu13")."""
    return f"nvidia-cutlass-dsl {_dsl_version()}"


def compile_to_cubin(
    entry: str,
    kwargs: dict,
    arch: str,
    out_path: str | os.PathLike,
    *,
    lineinfo: bool = True,
    timeout_s: float = 1800,
) -> Path:
    """Run ``entry`` (``"pkg.module:function"``) in a subprocess under ``CUTE_DSL_ARCH=arch``.

    ``function(**kwargs)`` must call ``cute.compile`` (fake tensors are fine). The one cubin it
    produces is copied to ``out_path`` (atomically) and returned. ``kwargs`` must be JSON-able.
    """
    module_name = entry.split(":")[0]
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise BsprofError(f"kernel module {module_name} not found; is bsprof installed with its kernels?")
    package_dir = Path(spec.origin).resolve().parent
    key_src = json.dumps(
        {
            "entry": entry,
            "kwargs": kwargs,
            "arch": arch,
            "lineinfo": lineinfo,
            "src": _sources_digest(package_dir),
            "dsl": _dsl_version(),
            # line info records absolute source paths: a cubin built from another checkout (a test's
            # temporary copy) would point `bsprof sass` at files that no longer exist
            "where": str(package_dir) if lineinfo else "",
        },
        sort_keys=True,
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:24]
    cached = cache_root() / f"{key}.cubin"
    out_path = Path(out_path)
    if not cached.is_file():
        # the build imports the kernel from where this process found it, not from the caller's
        # working directory (a copy of the sources there would be what the line info names)
        root = Path(spec.origin).resolve().parents[module_name.count(".")]
        _build(entry, kwargs, arch, lineinfo, cached, timeout_s, root)
    if out_path.resolve() != cached.resolve():
        with atomic_path(out_path) as tmp:
            shutil.copyfile(cached, tmp)
    return out_path


def _build(entry: str, kwargs: dict, arch: str, lineinfo: bool, dest: Path, timeout_s: float, root: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bsprof-cute-") as dump:
        env = dict(os.environ)
        env.update(
            CUTE_DSL_ARCH=arch,
            CUTE_DSL_KEEP="cubin,ptx",
            CUTE_DSL_DUMP_DIR=dump,
            CUTE_DSL_LINEINFO="1" if lineinfo else "0",
        )
        mod, func = entry.split(":")
        code = (
            f"import json, sys, importlib; m = importlib.import_module({mod!r}); "
            f"getattr(m, {func!r})(**json.loads(sys.argv[1]))"
        )
        # `python -c` imports from its working directory first: run it where the kernel was found
        proc = subprocess.run(
            [sys.executable, "-c", code, json.dumps(kwargs)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if proc.returncode != 0:
            tail = _compile_error(proc.stderr)
            raise BsprofError(f"CuTe DSL compile of {entry} for {arch} failed: {tail}")
        cubins = sorted(Path(dump).glob("*.cubin"), key=lambda p: p.stat().st_mtime)
        if not cubins:
            raise BsprofError(f"CuTe DSL compile of {entry} for {arch} kept no cubin; is nvidia-cutlass-dsl >= 4.8?")
        for ptx in Path(dump).glob("*.ptx"):
            with atomic_path(dest.with_suffix(".ptx")) as tmp:
                shutil.copyfile(ptx, tmp)
        with atomic_path(dest) as tmp:  # last: a cached cubin implies its ptx is there too
            shutil.copyfile(cubins[-1], tmp)


def _compile_error(stderr: str) -> str:
    """The line of a failed build's output that says what failed: CuTe DSL prints its error
    (``error[...]``: the problem, the file and line) above several lines of suggestions, and a
    Python exception ends with its message."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in stderr.splitlines()]
    lines = [ln for ln in lines if ln]
    for i, ln in enumerate(lines):
        if ln.startswith("error"):
            where = next((x for x in lines[i + 1 : i + 3] if x.startswith("-->")), "")
            return f"{ln} {where}".strip()
    return lines[-1] if lines else "(no output)"
