"""Shared test set-up: GPU markers skip cleanly on machines without the hardware they need."""

from __future__ import annotations

import functools
import lzma
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@functools.lru_cache(maxsize=1)
def gpu_capability() -> tuple[int, int] | None:
    """This machine's CUDA compute capability (major, minor), or None without a usable NVIDIA GPU."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_capability()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cap = gpu_capability()
    no_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU; none here")
    no_sm100 = pytest.mark.skip(reason=f"needs a Blackwell sm_100 GPU; this machine has {cap or 'none'}")
    for item in items:
        if "gpu" in item.keywords and cap is None:
            item.add_marker(no_gpu)
        if "sm100" in item.keywords and (cap is None or cap[0] != 10):
            item.add_marker(no_sm100)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def unxz_bytes(path: Path) -> bytes:
    """The content of a shipped ``X.xz`` test file (the foreign cubins and listings under
    tests/data/sass are xz-compressed to keep the checkout small)."""
    return lzma.decompress(Path(path).read_bytes())


def unxz_text(path: Path) -> str:
    return unxz_bytes(path).decode()


def unxz_to(path: Path, directory: Path) -> Path:
    """A shipped ``X.xz`` unpacked to ``directory/X``, for a tool that reads only a plain file."""
    out = Path(directory) / Path(path).name.removesuffix(".xz")
    out.write_bytes(unxz_bytes(path))
    return out


def run_bsprof(args: list[str]) -> tuple[int, str, str]:
    """``bsprof ARGS`` in-process through the real entry point (bsprof.cli.main, which also turns
    usage errors into one line): (exit code, stdout, stderr). Any other exception propagates."""
    from click.testing import CliRunner

    from bsprof.cli import main

    with CliRunner().isolation() as (out, err, _):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")


def assert_one_line_error(code: int, stderr: str) -> str:
    """Exit code 2 and exactly one ``error:`` line, no traceback; returns that line."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == 2 and lines and lines[-1].startswith("error: "), (code, stderr[-800:])
    assert "Traceback" not in stderr and sum(ln.startswith("error: ") for ln in lines) == 1, stderr[-800:]
    return lines[-1]
