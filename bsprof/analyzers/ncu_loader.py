"""Open an .ncu-rep with Nsight Compute's ``ncu_report`` module, wherever it is installed.

``ncu_report`` comes from PyPI (``ncu-report``) or from an Nsight Compute install
(``<ncu>/extras/python``); GPU hosts often have only the latter.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

from bsprof.errors import BsprofError
from bsprof.io import open_input, unpacked

# a report as ncu writes it, or xz-compressed as reports are shipped; every reader takes both
REPORT_SUFFIXES = (".ncu-rep", ".ncu-rep.xz")


def is_report(path: str | os.PathLike) -> bool:
    return Path(path).name.endswith(REPORT_SUFFIXES)


def resolve_report(path: str | os.PathLike) -> Path:
    """A report, or the one report in a bsprof result directory (what ``bsprof ncu`` writes)."""
    p = Path(path)
    if p.is_dir():
        reps = sorted(r for suffix in REPORT_SUFFIXES for r in p.glob("*" + suffix))
        if len(reps) != 1:
            # `bsprof ncu -o DIR` writes each run into a subdirectory of DIR: name those runs
            runs = sorted({r.parent.name for suffix in REPORT_SUFFIXES for r in p.glob("*/*" + suffix)})
            fix = "pass the report file itself"
            if not reps and runs:
                shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
                fix = f"it holds runs of `bsprof ncu -o`: pass one of them ({shown})"
            raise BsprofError(f"{p}: expected one .ncu-rep in this result directory, found {len(reps)}; {fix}")
        return reps[0]
    return p


def report_stem(path: str | os.PathLike) -> str:
    """The report's name without ``.ncu-rep`` or ``.ncu-rep.xz``."""
    return Path(path).name.removesuffix(".xz").removesuffix(".ncu-rep")


_NCU_PYTHON_GLOBS = (
    "/opt/nvidia/nsight-compute/*/extras/python",
    "/usr/local/cuda*/nsight-compute*/extras/python",
)


def import_ncu_report() -> ModuleType:
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for pattern in _NCU_PYTHON_GLOBS:
        for path in sorted(glob.glob(pattern), reverse=True):
            if os.path.isfile(os.path.join(path, "ncu_report.py")):
                sys.path.insert(0, path)
                return importlib.import_module("ncu_report")
    raise BsprofError(
        "the ncu_report module is missing; pip install ncu-report (or add <nsight-compute>/extras/python to PYTHONPATH)"
    )


# a process that reads one report many times (report discovery, the test suite) loads it once, so
# its launches are fetched once too (below): the contexts are read-only, keyed by the unpacked
# file's identity
_CONTEXTS: dict[tuple, object] = {}


def load_report(path: str | os.PathLike):
    """Load a report and return its ``IContext``; one-line BsprofError for anything unreadable."""
    path = Path(path)
    if not os.path.lexists(path):
        raise BsprofError(f"{path}: no such report file; pass the path of an .ncu-rep written by ncu -o")
    with open_input(path, fix="pass the path of an .ncu-rep written by ncu -o") as fh:
        head = fh.read(64)
    if not head:
        raise BsprofError(f"{path}: the file is empty; re-run ncu and let it finish writing the report")
    ncu_report = import_ncu_report()
    real = unpacked(path)  # ncu_report reads only a plain file; messages still name the user's
    st = os.stat(real)
    key = (os.path.realpath(real), st.st_size, st.st_mtime_ns, st.st_ino)
    if key in _CONTEXTS:
        return _CONTEXTS[key]
    try:
        ctx = ncu_report.load_report(str(real))
    except Exception as exc:  # the SWIG layer raises plain RuntimeError/FileNotFoundError with long text
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BsprofError(
            f"{path}: ncu_report could not read it ({msg}); is it an .ncu-rep from a newer ncu? update ncu-report"
        ) from None
    if ctx.num_ranges() == 0:
        raise BsprofError(
            f"{path}: not a readable Nsight Compute report (no ranges: truncated, corrupt, or written by a newer ncu); "
            "re-profile, or pip install -U ncu-report"
        )
    _CONTEXTS[key] = ctx
    return ctx


# each ``action_by_idx`` call loads that launch's data anew and ncu_report never frees it (~15 MB a
# launch of a --set full report): a context's launches are fetched once and kept beside it
_ACTIONS: dict[int, tuple[object, list]] = {}


def iter_actions(ctx):
    """Every profiled kernel launch in the report, in order."""
    held = _ACTIONS.get(id(ctx))
    if held is None or held[0] is not ctx:
        actions = []
        for r in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(r)
            actions.extend(rng.action_by_idx(a) for a in range(rng.num_actions()))
        held = _ACTIONS[id(ctx)] = (ctx, actions)
    yield from held[1]
