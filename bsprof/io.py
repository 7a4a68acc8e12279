"""Atomic output: a file appears whole or not at all, and what the user had is never half-overwritten."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; on success it is renamed over ``dest``.

    On an exception the temporary file is removed and ``dest`` keeps what it had.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp makes the file owner-only; give it the mode a plain open() would have
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def write_text_atomic(dest: str | os.PathLike, text: str) -> Path:
    with atomic_path(dest) as tmp:
        tmp.write_text(text)
    return Path(dest)


def write_bytes_atomic(dest: str | os.PathLike, data: bytes) -> Path:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


def unique_dir(parent: str | os.PathLike, name: str) -> Path:
    """Create and return ``parent/name`` (or ``name-2``, ``name-3``…): never reuse an existing run directory."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for i in range(1, 10_000):
        cand = parent / (name if i == 1 else f"{name}-{i}")
        try:
            cand.mkdir()
            return cand
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a fresh directory for {name} under {parent}")
