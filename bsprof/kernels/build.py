"""CPU-only CuTe DSL builds: compile a kernel for an architecture we may not have and keep its cubin.

CuTe DSL reads ``CUTE_DSL_ARCH`` / ``CUTE_DSL_KEEP`` / ``CUTE_DSL_DUMP_DIR`` / ``CUTE_DSL_LINEINFO``
when it is imported, so each build runs in a fresh interpreter with those set. Results are cached
by a hash of the family's sources, the arguments, the architecture, the cutlass-dsl version and
(with line info) where the sources live, so a test session (or CI) compiles each configuration
once per checkout.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.io import atomic_path

KERNELS_DIR = Path(__file__).resolve().parent


def cache_root() -> Path:
    root = os.environ.get("BSPROF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "bsprof")
    return Path(root) / "cubins"


def _sources_digest(package_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(package_dir.rglob("*.py")):
        h.update(p.relative_to(package_dir).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _dsl_version() -> str:
    try:
        return importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        raise BsprofError("nvidia-cutlass-dsl is not installed; pip install 'bsprof[kernels]'") from None


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
        {"entry": entry, "kwargs": kwargs, "arch": arch, "lineinfo": lineinfo,
         "src": _sources_digest(package_dir), "dsl": _dsl_version(),
         # line info records absolute source paths: a cubin built from another checkout (a test's
         # temporary copy) would point `bsprof sass` at files that no longer exist
         "where": str(package_dir) if lineinfo else ""},
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
        env.update(CUTE_DSL_ARCH=arch, CUTE_DSL_KEEP="cubin,ptx", CUTE_DSL_DUMP_DIR=dump,
                   CUTE_DSL_LINEINFO="1" if lineinfo else "0")
        mod, func = entry.split(":")
        code = (f"import json, sys, importlib; m = importlib.import_module({mod!r}); "
                f"getattr(m, {func!r})(**json.loads(sys.argv[1]))")
        # `python -c` imports from its working directory first: run it where the kernel was found
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)], env=env, cwd=root,
                              capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BsprofError(f"CuTe DSL compile of {entry} for {arch} failed: {tail}")
        cubins = sorted(Path(dump).glob("*.cubin"), key=lambda p: p.stat().st_mtime)
        if not cubins:
            raise BsprofError(f"CuTe DSL compile of {entry} for {arch} kept no cubin; is nvidia-cutlass-dsl >= 4.8?")
        for ptx in Path(dump).glob("*.ptx"):
            with atomic_path(dest.with_suffix(".ptx")) as tmp:
                shutil.copyfile(ptx, tmp)
        with atomic_path(dest) as tmp:  # last: a cached cubin implies its ptx is there too
            shutil.copyfile(cubins[-1], tmp)
