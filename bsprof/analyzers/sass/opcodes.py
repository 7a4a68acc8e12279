"""The per-architecture opcode tables (``bsprof/data/sass_opcodes.json``), loaded once."""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

_ARCH_NUM_RE = re.compile(r"sm_?(\d+)")


@functools.lru_cache(maxsize=1)
def _raw() -> dict:
    return json.loads(resources.files("bsprof").joinpath("data/sass_opcodes.json").read_text())


def categories() -> dict[str, str]:
    """Category name -> one-line description, in display order."""
    return dict(_raw()["categories"])


def arch_number(arch: str | None) -> int | None:
    """``sm_100a`` -> 100; None where the name holds no number. A number too long to be one reads as
    10**6 (it sorts after every real architecture and stays below int()'s 4,300-digit limit)."""
    m = _ARCH_NUM_RE.search(arch or "")
    if m is None:
        return None
    return int(m.group(1)) if len(m.group(1)) <= 6 else 10**6


def arch_family(arch: str | None) -> str:
    """``sm_100a`` -> ``sm_100``; an unknown number maps to the newest table not newer than it."""
    raw = _raw()
    if not arch:
        return "sm_100"
    num = arch_number(arch)
    if num is None:
        return "common"
    key = f"sm_{_ARCH_NUM_RE.search(arch).group(1)}"
    fams = raw["arch_families"]
    if key in fams:
        return fams[key]
    known = sorted((int(k[3:]), v) for k, v in fams.items())
    below = [v for n, v in known if n <= num]
    return below[-1] if below else "common"


@functools.lru_cache(maxsize=16)
def table(family: str) -> dict[str, str]:
    """The flattened opcode table of one family (its own entries override inherited ones)."""
    archs = _raw()["archs"]
    chain = []
    fam: str | None = family if family in archs else "common"
    while fam is not None:
        chain.append(archs[fam])
        fam = archs[fam].get("inherits")
    merged: dict[str, str] = {}
    for entry in reversed(chain):
        merged.update(entry["opcodes"])
    return merged
