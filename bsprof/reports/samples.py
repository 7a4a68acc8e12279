"""Where the shipped sample artifacts live (``bsprof/data/samples/``), and what is there.

``run/`` is one results directory holding every kind of artifact (``bsprof report`` with no DIR
renders it); ``pair/baseline`` and ``pair/optimized`` are the two bundled variants for the side by
side view. ``scripts/make_samples.sh`` regenerates all of it by running the other verbs on the
repository's real inputs.
"""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "samples"
RUN = SAMPLES / "run"
PAIR = (SAMPLES / "pair" / "baseline", SAMPLES / "pair" / "optimized")


def _check(path: Path) -> Path:
    from bsprof.errors import BsprofError

    if not path.is_dir() or not any(path.rglob("*.json")):
        raise BsprofError(
            f"no shipped sample artifacts in {path}; regenerate them with scripts/make_samples.sh "
            "or give a results directory: bsprof report DIR"
        )
    return path


def sample_runs() -> list[Path]:
    """What ``bsprof report`` renders with no DIR: the sample run."""
    return [_check(RUN)]


def compare_pair() -> tuple[Path, Path]:
    """The shipped baseline and optimized runs (same family, architecture and problem)."""
    return _check(PAIR[0]), _check(PAIR[1])
