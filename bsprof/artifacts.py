"""Every file bsprof writes for a later reader, and the way back in.

An artifact is a JSON object whose ``"bsprof"`` key says what it is: ``{"kind": ..., "version": ...}``.
This module is the one owner of that format:

* :data:`VERSIONS` — every kind any verb writes, and the newest version this bsprof writes and reads;
* :func:`document` — an artifact's dict (the tag in front of the body);
* :func:`dumps` — the one JSON encoder: numpy scalars and arrays, paths, tuples and dataclasses
  become JSON, and NaN / infinity become ``null``, so no artifact is ever invalid JSON (Python's
  ``json`` writes ``NaN``, which browsers, ``jq`` and strict parsers refuse);
* :func:`save` / :func:`load` — one artifact to or from a file, atomically and with one-line errors;
  :func:`read_json` reads any JSON input within bounds (size, nesting depth, UTF-8) and
  :func:`check_schema` holds each kind to the types its readers expect;
* :class:`Run` / :class:`Artifact` — what one directory the user named holds (filled by
  :func:`bsprof.reports.runs.discover`, which may analyze raw ``.ncu-rep`` files and so sits above
  the analyzers), and :func:`identity`, which kernel and problem a run is about.

It sits on the ground floor beside :mod:`bsprof.io`: analyzers, profile, reports and verbs all use it,
and it imports none of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bsprof.errors import BsprofError

# kind -> the version this bsprof writes; it reads every version from 1 up to that one
VERSIONS: dict[str, int] = {
    "bench": 1,  # bsprof bench, benchmarks/fp8_blockwise.py: rows of kernels and peers timed together
    "ncu": 1,  # bsprof ncu: per-launch metrics, verdict and rules
    "sass": 1,  # bsprof sass: instruction mix, K-loop, MMA detail
    "timing": 1,  # bsprof timing: per-warp phase statistics beside timing.parquet / trace.json
    "model": 1,  # bsprof model: calibration and projection
    "validation": 2,  # bsprof model --validate: projected against measured (2: repeats with confidence
    # intervals and a null point; 1 is still read)
    "epi_ceiling": 1,  # bsprof model --measure-ceiling: per-warp epilogue time against warps per SM
}
KINDS: tuple[str, ...] = tuple(VERSIONS)
# the name each verb gives its artifact inside its results directory
FILENAMES: dict[str, str] = {kind: f"{kind}.json" for kind in KINDS}
# A verb's JSON is small; a bigger file is data, not a summary, and is not worth parsing to find out
# (BSPROF_MAX_JSON_BYTES raises it).
MAX_JSON_BYTES = 64 * 1024 * 1024
# bsprof's artifacts nest at most ~10 deep; deeper JSON is not one of them, and Python's parser and
# every reader that walks it recurse, so it is refused before it is parsed
MAX_JSON_DEPTH = 64
MAX_FILES = 5000

# What each kind's readers take for granted at the top level: field -> the type(s) it must have when
# present (None is taken as absent), and (for lists) the type of every item. A field a kind always
# carries is listed in REQUIRED. An artifact that breaks these is refused, one line, before any
# reader touches it.
_NUM = (int, float)
SCHEMAS: dict[str, dict[str, tuple[tuple[type, ...], type | None]]] = {
    "bench": {
        "results": ((list,), dict),
        "rows": ((list,), dict),
        "family": ((str,), None),
        "variant": ((str,), None),
        "device": ((str, dict), None),
        "mnkl": ((list,), None),
    },
    "ncu": {
        "launches": ((list,), dict),
        "launch": ((dict,), None),
        "report": ((str,), None),
        "table": ((str,), None),
        "compare": ((dict,), None),
        "mnkl": ((list,), None),
        "sequences": ((list,), dict),
    },
    "sass": {"functions": ((list,), dict), "source": ((str,), None), "compare": ((dict,), None)},
    "timing": {
        "stats": ((dict,), None),
        "files": ((dict,), None),
        "config": ((dict,), None),
        "overhead": ((list,), dict),
        "mnkl": ((list,), None),
        "capability": ((list,), None),
        "family": ((str,), None),
        "variant": ((str,), None),
        "device": ((str, dict), None),
        "kernel_name": ((str,), None),
        "sm_count": (_NUM, None),
        "trace": ((dict,), None),
        "buffer_plan": ((dict,), None),
        "sample_every": (_NUM, None),
        "change_sample": ((dict,), None),
    },
    "model": {
        "deterministic": ((dict,), None),
        "stochastic": ((dict,), None),
        "deltas": ((dict,), None),
        "params": ((dict,), None),
        "axes": ((dict,), None),
        "fixed": ((dict,), None),
        "files": ((dict,), None),
        "structure": ((dict,), None),
        "wall_ms": ((dict,), None),
        "provenance": ((dict,), None),
        "fitted_terms": ((list,), None),
        "source": ((str,), None),
        "sentence": ((str,), None),
    },
    "validation": {
        "points": ((list,), dict),
        "summary": ((dict,), None),
        "files": ((dict,), None),
        "mnkl": ((list,), None),
        "model_baseline": ((dict,), None),
        "capability": ((list,), None),
        "family": ((str,), None),
        "variant": ((str,), None),
        "device": ((str, dict), None),
    },
    "epi_ceiling": {"curves": ((dict,), None), "device": ((str, dict), None)},
}
REQUIRED: dict[str, tuple[str, ...]] = {
    "ncu": ("launches",),
    "sass": ("functions",),
    "validation": ("points",),
    "epi_ceiling": ("curves",),
}


def tag(kind: str) -> dict[str, Any]:
    """The ``"bsprof"`` value of a new artifact of ``kind``."""
    if kind not in VERSIONS:
        raise ValueError(f"unknown artifact kind {kind!r}; add it to bsprof.artifacts.VERSIONS")
    return {"kind": kind, "version": VERSIONS[kind]}


def document(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """The artifact: its tag first, then ``body`` (whose own ``"bsprof"`` key, if any, is replaced)."""
    return {"bsprof": tag(kind), **{k: v for k, v in body.items() if k != "bsprof"}}


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values: NaN and infinities become None, numpy values Python ones,
    tuples and sets lists, paths strings, dataclasses dicts; anything else unknown its ``str``.
    Dict keys become strings as ``json`` writes them (``True`` -> ``"true"``), others their ``str``."""
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    for method in ("to_json", "tolist", "item"):  # our own result objects, numpy arrays and scalars
        fn = getattr(obj, method, None)
        if callable(fn):
            try:
                return jsonable(fn())
            except (TypeError, ValueError):
                pass
    return str(obj)


def dumps(obj: Any, *, indent: int | None = 2, compact: bool = False) -> str:
    """The one JSON encoder for everything bsprof writes or prints: always valid, strict JSON.

    The same document as ``json.dumps(jsonable(obj), allow_nan=False)``. Indented output has a line
    per key of the document and puts each row below it (a container with at most one level of
    containers inside: an instruction, a region, a table row) on one line, the levels between
    indented ``indent`` spaces apiece; ``compact`` drops every optional space."""
    try:
        if compact or indent is None:
            text = (_COMPACT if compact else _ONE_LINE)(obj)
        else:
            out: list[str] = []
            _layout(obj, "\n", " " * indent, out, top=True)
            text = "".join(out)
    except (TypeError, ValueError):  # keys of types json refuses (a tuple), a cycle: the slow path
        seps = (",", ":") if compact else None
        return json.dumps(jsonable(obj), indent=None if compact else indent, separators=seps, allow_nan=False)
    return _null_nonfinite(text)


# Speed: ``json.dumps`` with any ``indent`` runs the pure-Python encoder, and ``jsonable`` first
# walks the whole object in Python; a 50,000-instruction `bsprof sass --json` spent ~0.4 s in
# the two. Here json's C encoder writes each row, with NaN / infinities as bare tokens that
# ``_null_nonfinite`` turns into null, and ``jsonable`` sees only what that encoder cannot write.
_ONE_LINE = json.JSONEncoder(default=lambda o: jsonable(o), allow_nan=True).encode
_COMPACT = json.JSONEncoder(default=lambda o: jsonable(o), allow_nan=True, separators=(",", ":")).encode
_STRING = json.encoder.encode_basestring_ascii
# a JSON string (skipped as it is) or a token only a non-finite float makes
_NONFINITE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|-?Infinity|NaN')


def _null_nonfinite(text: str) -> str:
    if "NaN" not in text and "Infinity" not in text:
        return text
    return _NONFINITE.sub(lambda m: m.group() if m.group()[0] == '"' else "null", text)


def _is_row(x: dict | list | tuple) -> bool:
    """One line: a list of scalars, or a dict whose values are scalars or lists / dicts of scalars
    (an instruction, a region, a table row). A list of rows is laid out a row per line."""
    if not isinstance(x, dict):
        return not any(isinstance(v, _CONTAINERS) for v in x)
    for v in x.values():
        if isinstance(v, _CONTAINERS) and any(
            isinstance(w, _CONTAINERS) for w in (v.values() if isinstance(v, dict) else v)
        ):
            return False
    return True


_CONTAINERS = (dict, list, tuple)


def _key(k: Any) -> str:
    """A dict key as json writes it (``True`` -> ``"true"``, ``1.5`` -> ``"1.5"``); another
    type's ``str``."""
    if isinstance(k, str):
        return k
    if k is True or k is False or k is None:
        return "true" if k else "false" if k is False else "null"
    if isinstance(k, (int, float)):
        return _ONE_LINE(k)
    return str(k)


def _layout(x: Any, nl: str, step: str, out: list[str], top: bool = False) -> None:
    """``x`` indented: ``nl`` is the newline and indentation of the level ``x`` sits at; the
    document itself (``top``) always has a line per key, as ``json.dumps(indent=...)`` writes it."""
    if x is not None and not isinstance(x, (dict, list, tuple, str, int, float)):
        x = jsonable(x)  # a dataclass or array is laid out as the containers it becomes
    if not isinstance(x, (dict, list, tuple)) or not x or (not top and _is_row(x)):
        out.append(_ONE_LINE(x))
        return
    inner = nl + step
    sep = inner
    if isinstance(x, dict):
        out.append("{")
        for k, v in x.items():
            out.append(f"{sep}{_STRING(_key(k))}: ")
            _layout(v, inner, step, out)
            sep = "," + inner
        out.append(nl + "}")
    else:
        out.append("[")
        for v in x:
            out.append(sep)
            _layout(v, inner, step, out)
            sep = "," + inner
        out.append(nl + "]")


def save(path: str | os.PathLike, doc: dict[str, Any], *, indent: int | None = 2) -> Path:
    """Write the artifact ``doc`` (made by :func:`document`) to ``path`` atomically."""
    from bsprof.io import write_text_atomic

    meta = doc.get("bsprof") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("kind"), str) or meta["kind"] not in VERSIONS:
        raise ValueError("save() takes an artifact made by bsprof.artifacts.document(kind, body)")
    return Path(write_text_atomic(path, dumps(doc, indent=indent) + "\n"))


def check_tag(data: Any) -> tuple[str | None, str | None]:
    """(kind, None) for a bsprof artifact this bsprof reads; (kind or None, why not) otherwise."""
    if not isinstance(data, dict) or not isinstance(data.get("bsprof"), dict):
        return None, 'not a bsprof artifact (no "bsprof": {"kind", "version"} key)'
    kind, version = data["bsprof"].get("kind"), data["bsprof"].get("version")
    if not isinstance(kind, str) or kind not in VERSIONS:
        return None, f"unknown artifact kind {kind!r}; this bsprof knows {', '.join(KINDS)}"
    if not isinstance(version, int) or not 1 <= version <= VERSIONS[kind]:
        return kind, (
            f"{kind} artifact version {version!r}, this bsprof reads versions 1 to {VERSIONS[kind]}; update bsprof"
        )
    return kind, None


def max_json_bytes() -> int:
    """The largest JSON file bsprof parses (``BSPROF_MAX_JSON_BYTES``, default 64 MiB)."""
    from bsprof.io import env_limit

    return env_limit("BSPROF_MAX_JSON_BYTES", MAX_JSON_BYTES)


# a JSON string, or an unterminated one running to the end (optional closing quote): every match
# consumes what it reads and none fails after scanning, so the cut is linear in the text
_JSON_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, without parsing it (no recursion:
    strings are cut out, then the brackets left are summed in one vectorised pass). Exact above
    :data:`MAX_JSON_DEPTH`; at or below it, possibly an upper bound (the brackets counted)."""
    opening = text.count("[") + text.count("{")
    if opening <= MAX_JSON_DEPTH:
        return opening
    import numpy as np

    brackets = _JSON_STRINGS.sub("", text).encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    step = np.zeros(256, dtype=np.int8)
    step[[ord("["), ord("{")]] = 1
    step[[ord("]"), ord("}")]] = -1
    return int(np.cumsum(step[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int64).max(initial=0))


def parse_json(data: bytes | str, where: str | os.PathLike) -> Any:
    """JSON from ``data`` (a file's bytes), or one BsprofError naming ``where``: not UTF-8, nested
    deeper than :data:`MAX_JSON_DEPTH`, not JSON (truncated)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BsprofError(
                f"{where}: not UTF-8 text (byte {exc.start}); bsprof's JSON is UTF-8, re-run the verb that wrote it"
            ) from None
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise BsprofError(
            f"{where}: JSON nested {depth} levels deep; bsprof's artifacts nest at most "
            f"{MAX_JSON_DEPTH}, so this is not one (re-run the verb that wrote it)"
        )
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise BsprofError(f"{where}: not valid JSON (truncated? re-run the verb that wrote it)") from None


def read_json(path: str | os.PathLike) -> Any:
    """The JSON in the file ``path``, read by bsprof's input policy (a regular file, at most
    :func:`max_json_bytes`) and parsed by :func:`parse_json`."""
    from bsprof.io import read_input_bytes

    path = Path(path)
    data = read_input_bytes(
        path, limit=max_json_bytes(), var="BSPROF_MAX_JSON_BYTES", fix="re-run the verb that writes it"
    )
    return parse_json(data, path)


def check_schema(kind: str, data: dict[str, Any], *, required: bool = True) -> str | None:
    """Why ``data`` is not a well-formed ``kind`` artifact at its top level, or None (``required``:
    also insist on the fields the kind always carries)."""
    for name in REQUIRED.get(kind, ()) if required else ():
        if data.get(name) is None:
            return f"{_a(kind)} artifact without its {name!r} field (truncated or hand-edited?); re-run the verb"
    for name, (types, item) in SCHEMAS.get(kind, {}).items():
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            want = " or ".join(_TYPE_NAMES[t] for t in types)
            return (
                f"field {name!r} of {_a(kind)} artifact is {_TYPE_NAMES.get(type(value), type(value).__name__)}, "
                f"not {want}; re-run the verb that wrote it"
            )
        if item is not None and isinstance(value, list):
            bad = next((v for v in value if not isinstance(v, item)), None)
            if bad is not None or any(v is None for v in value):
                got = _TYPE_NAMES.get(type(bad), type(bad).__name__)
                return (
                    f"field {name!r} of {_a(kind)} artifact holds {got} where each item is "
                    f"{_TYPE_NAMES[item]}; re-run the verb that wrote it"
                )
    return None


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" or kind == "ncu" else f"a {kind}"


_TYPE_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def load(path: str | os.PathLike, kind: str | None = None) -> dict[str, Any]:
    """The artifact at ``path`` (of ``kind``, when given), upgraded to today's field names.
    Every problem is one BsprofError line naming the file."""
    path = Path(path)
    data = read_json(path)
    got, why = check_tag(data)
    if why:
        raise BsprofError(f"{path}: {why}")
    if kind is not None and got != kind:
        raise BsprofError(f"{path}: a {got} artifact where a {kind} artifact was expected")
    why = check_schema(got, data)
    if why:
        raise BsprofError(f"{path}: {why}")
    return upgrade(data)


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """An older artifact in today's field names, so readers know one schema per kind.

    bench: every row has ``ms`` (the median) and ``ours``; the NVFP4 bench once wrote ``ms_median``
    and no ``ours``, and its rows were then invisible to the report.
    """
    if data.get("bsprof", {}).get("kind") == "bench":
        family = data.get("family")
        results = data.get("results")
        for problem in [data, *[r for r in results if isinstance(r, dict)]] if isinstance(results, list) else [data]:
            rows = problem.get("rows")
            for row in rows if isinstance(rows, list) else []:
                if not isinstance(row, dict):
                    continue
                if "ms" not in row and "ms_median" in row:
                    row["ms"] = row["ms_median"]
                if "ours" not in row and family == "nvfp4":
                    row["ours"] = row.get("name") != "cublas"
    return data


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
            candidates = (
                [cand]
                if cand.suffix in (".parquet", ".csv")
                else [cand.with_name(cand.name + ".parquet"), cand.with_name(cand.name + ".csv")]
            )
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
    except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's Infinity
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
    for key, aliases in (("family", ()), ("variant", ()), ("kernel", ("kernel_name",)), ("device", ("device_name",))):
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
