"""What GPU is here, asked once, with one-line errors when there is none."""

from __future__ import annotations

import functools
import shutil

from bsprof.errors import BsprofError


class NoGpu(BsprofError):
    """No usable GPU here: the message says why and ends with the way on (a GPU host), so that a
    verb that also reads stored results can name that way after it (bsprof.cli.STORED_WAY)."""


@functools.lru_cache(maxsize=1)
def device_info() -> dict:
    """Name, compute capability and SM count of GPU 0; NoGpu when there is no usable GPU."""
    if shutil.which("nvidia-smi") is None:
        raise NoGpu("no NVIDIA GPU on this machine (nvidia-smi not found); run this on a GPU host")
    try:
        import torch
    except ImportError as exc:
        raise BsprofError("torch is not installed; install it with: pip install 'bsprof[kernels]'") from exc
    if not torch.cuda.is_available():
        raise NoGpu("torch sees no CUDA device (CPU-only build or no driver); run this on a GPU host")
    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "capability": (props.major, props.minor),
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
    }


def require_capability(major: int, what: str) -> dict:
    info = device_info()
    if info["capability"][0] != major:
        cap = "%d.%d" % info["capability"]
        raise BsprofError(
            f"{what} needs an sm_{major}0 GPU; this {info['name']} is sm_{cap.replace('.', '')}"
            f" (compute capability {cap})"
        )
    return info
