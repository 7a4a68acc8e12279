"""What the directories given to ``bsprof report`` hold: every bsprof artifact under them, read
through :mod:`bsprof.artifacts`, and any ``.ncu-rep`` that comes without its summary, analyzed here.

Everything wrong with an input (a truncated JSON, a file a verb is still writing, a kind or version
this bsprof does not know, a report ncu_report cannot read) becomes a line in ``Run.problems``
rather than an exception, so the page can say what it skipped.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path

from bsprof.analyzers.ncu_loader import REPORT_SUFFIXES, is_report, report_stem
from bsprof.artifacts import MAX_FILES, Artifact, Run, check_schema, check_tag, max_json_bytes, parse_json, upgrade
from bsprof.errors import BsprofError
from bsprof.io import open_input, read_input_bytes

# how a file announces itself as a bsprof artifact (a JSON key, quotes and all)
_TAG = b'"bsprof"'


def _json_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
        for name in sorted(filenames):
            if name.endswith(".json") or name.endswith(".json.tmp") or (name.startswith(".") and name.endswith(".tmp")):
                found.append(Path(dirpath) / name)
                if len(found) >= MAX_FILES:
                    return found
    return found


def _head_says_bsprof(path: Path) -> bool:
    try:
        with open_input(path, limit=1 << 62) as fh:
            return _TAG in fh.read(4096)
    except BsprofError:
        return False


def _short(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) or path.name
    except ValueError:
        return str(path)


def _ncu_reports(root: Path) -> list[Path]:
    """.ncu-rep files to analyze directly: ``root`` itself, or those under it with no bsprof summary
    beside them (a bsprof result directory already holds its analysis)."""
    if root.is_file():
        return [root] if is_report(root) else []
    if not root.is_dir():
        return []
    reps = sorted(p for suffix in REPORT_SUFFIXES for p in root.rglob("*" + suffix))
    return [p for p in reps if not (p.parent / "summary.json").is_file()][:MAX_FILES]


@functools.lru_cache(maxsize=256)
def _ncu_payload(path: str, mtime_ns: int, size: int) -> dict:
    """One report's analysis, kept for the life of the process while the file is unchanged: a report of
    several directories (or a directory discovered again) reads each `.ncu-rep` once."""
    from bsprof.analyzers.ncu.summary import analyze_report

    return analyze_report(Path(path))[1]


def _analyze_ncu(path: Path, run: Run, base: Path) -> None:
    from bsprof.errors import BsprofError

    try:
        st = path.stat()
        key = (st.st_mtime_ns, st.st_size)
    except OSError:
        key = (0, -1)  # unreadable: the analysis names why
    try:
        # a copy: what a section does with its payload stays out of the next run's
        payload = copy.deepcopy(_ncu_payload(str(path), *key))
    except BsprofError as exc:
        run.problems.append(_named(_short(path, base), str(exc), str(path)))
        return
    run.artifacts.append(Artifact(kind="ncu", path=path, data=payload))


def _named(where: str, problem: str, full: str) -> str:
    """``problem`` led by the file it is about, once, as ``where`` (the analyzers' messages often
    name it already, by its ``full`` path)."""
    if problem.startswith(full + ":"):
        problem = problem[len(full) + 1 :].lstrip()
    return problem if problem.startswith(where + ":") else f"{where}: {problem}"


def discover(root: str | os.PathLike, label: str | None = None) -> Run:
    """Read every bsprof JSON under ``root`` (recursively), and analyze .ncu-rep files that come without
    one. Never raises for bad content."""
    root = Path(root)
    label = label or (report_stem(root) if root.is_file() else root.name) or str(root)
    run = Run(label=label, root=root)
    for rep in _ncu_reports(root):
        _analyze_ncu(rep, run, root if root.is_dir() else root.parent)
    if root.is_file() and is_report(root):
        return run
    base = root if root.is_dir() else root.parent
    for path in _json_files(root):
        rel = _short(path, base)
        if path.name.endswith(".tmp"):
            run.problems.append(
                f"{rel}: a temporary file a bsprof verb is still writing (or was killed while "
                "writing); re-run the verb or wait for it to finish"
            )
            continue
        try:
            raw = read_input_bytes(path, limit=max_json_bytes(), var="BSPROF_MAX_JSON_BYTES")
        except BsprofError as exc:
            # too large: data, not a summary (trace.json), unless it says it is bsprof's;
            # a FIFO, a device, an unreadable file: named, never read
            if "input limit" not in str(exc) or _head_says_bsprof(path):
                run.problems.append(_named(rel, str(exc), str(path)))
            continue
        try:
            data = parse_json(raw, rel)
        except BsprofError as exc:
            if _TAG in raw[:4096] or not raw.strip():
                why = (
                    str(exc)
                    if "not valid JSON" not in str(exc)
                    else (f"{rel}: truncated or empty bsprof JSON (a half-written run?); re-run the verb")
                )
                run.problems.append(why)
            continue  # someone else's file that is not JSON: not ours to judge
        if not isinstance(data, dict) or not isinstance(data.get("bsprof"), dict):
            continue
        kind, why = check_tag(data)
        if why is None:
            why = check_schema(kind, data)
        if why:
            run.problems.append(f"{rel}: {why}")
            continue
        run.artifacts.append(Artifact(kind=kind, path=path, data=upgrade(data)))
    return run
