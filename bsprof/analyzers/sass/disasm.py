"""Disassemble a cubin / CUDA ELF / fatbin / host executable with the pip-packaged nvdisasm/cuobjdump.

Cubins go straight to ``nvdisasm -c -hex -gi``: the encodings (whose control bits name the scoreboards)
and line info with inlining chains. Fatbins and host binaries are unpacked with ``cuobjdump -xelf all`` first, so every embedded cubin keeps its line info.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.io import check_input, open_input, unpacked

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50 little-endian
EM_CUDA = 190


def tool_path(name: str) -> str:
    """``nvdisasm`` / ``cuobjdump``: the pip package's copy first, then PATH and CUDA_HOME."""
    # nvidia.cu13: the CUDA 13 wheels; nvidia.cuda_nvdisasm: the older split packages (…-cu12)
    for module in ("nvidia.cu13", "nvidia.cuda_nvdisasm"):
        try:
            pkg = importlib.import_module(module)
        except ImportError:
            continue
        for base in pkg.__path__:
            cand = os.path.join(base, "bin", name)
            if os.access(cand, os.X_OK):
                return cand
    found = shutil.which(name)
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", name), os.X_OK):
            return os.path.join(home, "bin", name)
    pkg = "nvidia-cuda-nvdisasm" if name == "nvdisasm" else "nvidia-cuda-cuobjdump"
    raise BsprofError(f"{name} not found; pip install {pkg} (or put the CUDA toolkit's bin on PATH)")


def sniff(path: Path) -> str:
    """'cubin' (CUDA ELF), 'host-elf' (executable/.so with embedded fatbins), 'fatbin' or 'text'."""
    with open_input(path) as fh:
        head = fh.read(64)
    if head.startswith(ELF_MAGIC):
        machine = int.from_bytes(head[18:20], "little") if len(head) >= 20 else 0
        return "cubin" if machine == EM_CUDA else "host-elf"
    if head.startswith(FATBIN_MAGIC):
        return "fatbin"
    return "text"


# nvdisasm's fatal messages -> what the user should do. The message names the file, and cubin
# names carry "sm_100a": match on the message with the path cut out, on whole phrases, never on a
# bare "sm" or "arch" (which sent every broken file to "update nvdisasm").
_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        (
            "cannot decode architecture",
            "unsupported architecture",
            "unknown architecture",
            "unsupported gpu",
            "architecture not supported",
        ),
        "it is built for a GPU architecture this nvdisasm does not know; pip install -U nvidia-cuda-nvdisasm",
    ),
    (
        ("invalid elf", "not a supported elf", "invalid string table", "section", "truncated", "unexpected end"),
        "the file is damaged or not a CUDA cubin (truncated copy?); copy it again, or extract it with "
        "cuobjdump -xelf all <executable>",
    ),
)
_DEFAULT_HINT = "is it a complete CUDA cubin? extract one with cuobjdump -xelf all <executable>"


def hint_for(message: str, path: str | os.PathLike = "") -> str:
    """The fix to suggest for one nvdisasm/cuobjdump error line."""
    msg = message.replace(str(path), "<file>").lower() if str(path) else message.lower()
    for phrases, hint in _HINTS:
        if any(p in msg for p in phrases):
            return hint
    return _DEFAULT_HINT


def _run(cmd: list[str], what: Path, real: Path | None = None) -> str:
    """Run a disassembler on ``real`` (default ``what``); errors name ``what``, the user's file."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=600)
    except subprocess.TimeoutExpired:
        raise BsprofError(
            f"{what}: {Path(cmd[0]).name} took over 10 minutes; pass --function to pick one kernel"
        ) from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        msg = lines[-1] if lines else f"exit code {proc.returncode}"
        if real is not None:
            msg = msg.replace(str(real), str(what))
        hint = hint_for(msg, what)
        raise BsprofError(f"{what}: {Path(cmd[0]).name} could not disassemble it ({msg}); {hint}")
    return proc.stdout


def disassemble_cubin(path: str | os.PathLike, *, line_info: bool = True, what: str | os.PathLike | None = None) -> str:
    """SASS text of one CUDA ELF (all its functions); errors name ``what`` (default ``path``)."""
    shown = Path(what) if what is not None else Path(path)
    # absolute: a file named like an option (-h, -o.cubin) stays a file name on the tool's command line
    path = Path(os.path.abspath(path))
    # -hex: the encodings, whose control bits say which scoreboard each load sets and who waits on it
    flags = ["-c", "-hex", "-gi"] if line_info else ["-c", "-hex"]
    try:
        return _run([tool_path("nvdisasm"), *flags, str(path)], shown, path)
    except BsprofError:
        if not line_info:
            raise
        # -gi needs intact debug sections; fall back to plain code rather than fail
        return _run([tool_path("nvdisasm"), "-c", "-hex", str(path)], shown, path)


def disassemble(path: str | os.PathLike) -> list[tuple[str, str]]:
    """[(source label, SASS text)] for a cubin, fatbin or host binary, each possibly xz-compressed
    (``X.cubin.xz``); raises BsprofError otherwise."""
    path = Path(path)
    check_input(path, fix="pass a .cubin, fatbin, executable, .sass text or .ncu-rep")
    real = unpacked(path)  # an xz-compressed input is read from its unpacked copy, named as given
    if real.stat().st_size == 0:
        raise BsprofError(f"{path}: the file is empty; pass a .cubin or SASS listing")
    kind = sniff(real)
    if kind == "cubin":
        return [(str(path), disassemble_cubin(real, what=path))]
    if kind == "text":
        raise BsprofError(
            f"{path}: not an ELF/cubin or fatbin; pass a .cubin, a fatbin, an executable, SASS text (.sass) or an .ncu-rep"
        )
    with tempfile.TemporaryDirectory(prefix="bsprof-xelf-") as tmp:
        proc = subprocess.run(
            [tool_path("cuobjdump"), "-xelf", "all", os.path.abspath(real)],
            capture_output=True,
            text=True,
            errors="replace",
            cwd=tmp,
            timeout=600,
        )
        cubins = sorted(Path(tmp).glob("*.cubin"))
        if not cubins:
            why = (proc.stderr or proc.stdout).strip().splitlines()
            last = why[-1] if why else "cuobjdump found no ELF"
            # a binary with no device code at all is the wrong file; one with only PTX was built
            # without an sm_XX target
            fix = (
                "pass the executable or library that holds the kernels (or the .cubin itself)"
                if "does not contain device code" in last
                else "was it compiled with -gencode for an sm_XX target (not PTX only)?"
            )
            raise BsprofError(f"{path}: no CUDA cubin inside ({last}); {fix}")
        return [(f"{path}:{c.name}", disassemble_cubin(c)) for c in cubins]
