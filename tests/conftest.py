"""Shared test set-up: GPU markers skip cleanly on machines without the hardware they need."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@functools.lru_cache(maxsize=1)
def _gpu_capability() -> tuple[int, int] | None:
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
    cap = _gpu_capability()
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
