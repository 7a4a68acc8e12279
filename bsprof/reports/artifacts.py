"""Find the artifacts bsprof verbs wrote, by the ``"bsprof": {"kind", "version"}`` key of their JSON.

A *run* is one directory (or one JSON file) the user named. Everything wrong with it — a truncated
JSON, a temporary file a verb is still writing, a kind this bsprof does not know — becomes a line in
``Run.problems`` rather than an exception, so the page can say what it skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS: tuple[str, ...] = ("bench", "ncu", "sass", "timing", "model", "validation")
VERSION = 1
# kinds whose format moved on; the sections read every version listed
READS = {"validation": (1, 2)}
# A verb's JSON is small; a bigger file is data, not a summary, and is not worth parsing to find out.
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_FILES = 5000


@dataclass
class Artifact:
    kind: str
    path: Path
    data: dict[str, Any]
    _tables: dict[Path, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dir(self) -> Path:
        return self.path.parent

    def table(self, *names: str) -> Path | None:
        """A table written beside this JSON: each name tried as given, then with .parquet / .csv."""
        for name in names:
            if not name:
                continue
            cand = Path(name)
            if not cand.is_absolute():
                cand = self.dir / cand
            candidates = [cand] if cand.suffix in (".parquet", ".csv") else [
                cand.with_name(cand.name + ".parquet"), cand.with_name(cand.name + ".csv")]
            for c in candidates:
                if c.is_file() and c.stat().st_size > 0:
                    return c
        return None

    def read_table(self, *names: str):
        """The first of ``names`` that exists beside the JSON as a DataFrame, or None."""
        path = self.table(*names)
        if path is None:
            return None
        if path in self._tables:  # several sections read the same table
            return self._tables[path]
        import pandas as pd

        try:
            df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
            self._tables[path] = df
            return df
        except Exception as exc:  # a half-written table is a note on the page, not a crash
            raise TableError(f"{path.name} could not be read ({type(exc).__name__}: {exc})") from exc


class TableError(Exception):
    pass


@dataclass
class Run:
    """What one DIR argument holds."""

    label: str
    root: Path
    artifacts: list[Artifact] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[Artifact]:
        return [a for a in self.artifacts if a.kind == kind]

    def first(self, kind: str) -> Artifact | None:
        found = self.of(kind)
        return found[0] if found else None

    @property
    def kinds(self) -> list[str]:
        return [k for k in KINDS if self.of(k)]


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


def _short(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) or path.name
    except ValueError:
        return str(path)


def _ncu_reports(root: Path) -> list[Path]:
    """.ncu-rep files to analyze directly: ``root`` itself, or those under it with no bsprof summary
    beside them (a bsprof result directory already holds its analysis)."""
    if root.is_file():
        return [root] if root.name.endswith(".ncu-rep") else []
    if not root.is_dir():
        return []
    return [p for p in sorted(root.rglob("*.ncu-rep")) if not (p.parent / "summary.json").is_file()][:MAX_FILES]


def _analyze_ncu(path: Path, run: Run, base: Path) -> None:
    from bsprof.analyzers.ncu.summary import analyze_report
    from bsprof.errors import BsprofError

    try:
        _, payload = analyze_report(path)
    except BsprofError as exc:
        run.problems.append(f"{_short(path, base)}: {exc}")
        return
    run.artifacts.append(Artifact(kind="ncu", path=path, data=payload))


def discover(root: str | os.PathLike, label: str | None = None) -> Run:
    """Read every bsprof JSON under ``root`` (recursively), and analyze .ncu-rep files that come without
    one. Never raises for bad content."""
    root = Path(root)
    label = label or (root.name.removesuffix(".ncu-rep") if root.is_file() else root.name) or str(root)
    run = Run(label=label, root=root)
    for rep in _ncu_reports(root):
        _analyze_ncu(rep, run, root if root.is_dir() else root.parent)
    if root.is_file() and root.name.endswith(".ncu-rep"):
        return run
    base = root if root.is_dir() else root.parent
    for path in _json_files(root):
        rel = _short(path, base)
        if path.name.endswith(".tmp"):
            run.problems.append(f"{rel}: a temporary file a bsprof verb is still writing (or was killed while "
                                "writing); re-run the verb or wait for it to finish")
            continue
        try:
            size = path.stat().st_size
            if size > MAX_JSON_BYTES:
                continue
            text = path.read_text(errors="replace")
        except OSError as exc:
            run.problems.append(f"{rel}: unreadable ({exc.strerror or exc})")
            continue
        try:
            data = json.loads(text)
        except ValueError:
            if '"bsprof"' in text[:4096] or not text.strip():
                run.problems.append(f"{rel}: truncated or empty bsprof JSON (a half-written run?); re-run the verb")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("bsprof"), dict):
            continue
        tag = data["bsprof"]
        kind, version = tag.get("kind"), tag.get("version")
        if kind not in KINDS:
            run.problems.append(f"{rel}: unknown artifact kind {kind!r}; this report knows {', '.join(KINDS)}")
            continue
        readable = READS.get(kind, (VERSION,))
        if version not in readable:
            run.problems.append(f"{rel}: {kind} artifact version {version!r}, this bsprof reads version "
                                f"{', '.join(map(str, readable))}; update bsprof")
            continue
        run.artifacts.append(Artifact(kind=kind, path=path, data=data))
    return run


def _norm_arch(val: Any) -> str | None:
    """'sm_100a' / 'sm_100' / (10, 0) / '10.0' -> 'sm_100'; None when unknown."""
    import re

    if isinstance(val, (list, tuple)) and val and isinstance(val[0], int):
        return f"sm_{val[0]}{val[1] if len(val) > 1 else 0}"
    if isinstance(val, str):
        m = re.search(r"sm_?(\d+)", val) or re.fullmatch(r"(\d+)\.(\d+)", val.strip())
        if m:
            digits = m.group(1) + (m.group(2) if m.lastindex and m.lastindex > 1 else "")
            return f"sm_{digits}"
    return None


def mnkl_of(value: Any) -> tuple[int, int, int, int] | None:
    """(M, N, K, L) from an artifact's ``mnkl`` list, or None when it is not one."""
    if not isinstance(value, (list, tuple)) or len(value) not in (3, 4):
        return None
    try:
        out = tuple(int(x) for x in (list(value) + [1])[:4])
    except (TypeError, ValueError):
        return None
    return out if min(out) > 0 else None  # type: ignore[return-value]


def identity(run: Run) -> dict[str, Any]:
    """Which kernel, family, architecture and problem a run is about, as far as its artifacts say."""
    ident: dict[str, Any] = {}

    def put(key: str, val: Any) -> None:
        if key not in ident and val not in (None, "", [], {}):
            ident[key] = val

    for art in run.artifacts:
        try:
            _identity_of(art.data, put)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            continue  # a malformed artifact says nothing about identity; its sections will say what is wrong
    return ident


def _identity_of(d: dict, put) -> None:
    # an ncu summary of a bundled kernel keeps the launcher's facts under "launch"
    if isinstance(d.get("launch"), dict):
        d = {**d["launch"], **{k: v for k, v in d.items() if k != "launch"}}
    meta = d.get("bsprof", {})
    for key, aliases in (("family", ()), ("variant", ()), ("kernel", ("kernel_name",)),
                         ("device", ("device_name",))):
        for name in (key, *aliases):
            val = meta.get(name, d.get(name))
            if isinstance(val, dict):  # e.g. "device": {"name": ..., "capability": ...}
                put("arch", _norm_arch(val.get("capability")))
                val = val.get("name")
            if isinstance(val, str):
                put(key, val)
    put("arch", _norm_arch(meta.get("arch", d.get("arch"))))
    put("arch", _norm_arch(d.get("capability")))
    put("mnkl", mnkl_of(meta.get("mnkl", d.get("mnkl"))))
    launches = d.get("launches")
    if isinstance(launches, list) and launches and isinstance(launches[0], dict):
        cols = launches[0].get("columns") or {}
        put("kernel", launches[0].get("kernel"))
        put("device", cols.get("device"))
        put("arch", _norm_arch(cols.get("arch") or cols.get("compute_capability")))
    fns = d.get("functions")
    if isinstance(fns, list) and fns and isinstance(fns[0], dict):
        put("arch", _norm_arch(fns[0].get("arch")))
