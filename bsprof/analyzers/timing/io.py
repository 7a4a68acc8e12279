"""Timing tables on disk: Parquet (typed, compact) and CSV (greppable) beside each other."""

from __future__ import annotations

import os
from pathlib import Path

from bsprof.analyzers.timing.schema import COLUMNS, INT_COLUMNS
from bsprof.io import atomic_path

_OPTIONAL = ("start_ns", "end_ns", "kernel", "variant")


def _ordered(table):
    cols = list(COLUMNS) + [c for c in _OPTIONAL if c in table.columns]
    out = table[cols].copy()
    for c in INT_COLUMNS + tuple(c for c in ("start_ns", "end_ns") if c in out.columns):
        out[c] = out[c].astype("int64")
    return out


def write_table(table, out_dir: str | os.PathLike, stem: str = "timing", *, csv: bool = True) -> dict[str, Path]:
    """Write ``<stem>.parquet`` and (unless ``csv=False``) ``<stem>.csv`` atomically."""
    out_dir = Path(out_dir)
    t = _ordered(table)
    paths = {"parquet": out_dir / f"{stem}.parquet"}
    with atomic_path(paths["parquet"]) as tmp:
        t.to_parquet(tmp, index=False, compression="zstd")
    if csv:
        paths["csv"] = out_dir / f"{stem}.csv"
        with atomic_path(paths["csv"]) as tmp:
            t.to_csv(tmp, index=False)
    return paths


# what `bsprof timing --from` builds from a table: named when a required role or phase is missing
SUMMARY_NEEDS = "the timing summary (phase statistics, K-loop per K block, epilogue spread)"


def read_table(path: str | os.PathLike, needed_by: str = "the model"):
    """A validated timing table from a .parquet / .csv file, or from a directory holding one."""
    from bsprof.analyzers.timing.table import load

    return load(path, needed_by=needed_by)


def summarize_file(path: str | os.PathLike) -> dict:
    """An earlier capture (a timing table, or the results directory holding one) summarized again,
    without a GPU: the ``stats`` of a timing artifact, and no overhead."""
    return _resummary(path)[0]


def _resummary(path: str | os.PathLike):
    from bsprof.analyzers.timing.buffer import check_table
    from bsprof.analyzers.timing.stats import summarize

    table = read_table(path, needed_by=SUMMARY_NEEDS)
    check_table(table)
    doc = {"stats": summarize(table).to_json(), "overhead": []}
    # a results directory keeps what was captured beside the table: the problem and the tile
    meta = Path(path) / "timing.json"
    if Path(path).is_dir() and os.path.lexists(meta):
        doc = {**{k: v for k, v in capture_meta(meta).items() if k in _CAPTURE_FIELDS}, **doc}
    return doc, table


def resummarize_to(
    path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    tile: tuple[int, int] | None = None,
    max_trace_events: int | None = None,
) -> tuple[dict, Path]:
    """`bsprof timing --from X -o DIR`: an earlier capture summarized again and written as a fresh
    results directory under ``out``, as a capture writes one (timing.parquet / .csv, trace.json,
    timing.json; no raw buffer, no overhead: neither can be had without the GPU). ``tile`` is the
    capture's tile M,N where its own timing.json does not record it. Returns (timing.json, dir)."""
    import time

    from bsprof.io import results_dir

    summary, table = _resummary(path)
    meta = {k: v for k, v in summary.items() if k in _CAPTURE_FIELDS}
    if tile is not None and not {"tile_m", "tile_n"} <= set(meta.get("config") or {}):
        meta["config"] = {**(meta.get("config") or {}), "tile_m": tile[0], "tile_n": tile[1]}
    meta["source"] = str(path)
    stem = Path(path).name.removesuffix(".parquet").removesuffix(".csv") or "timing"
    with results_dir(out, f"timing_from_{stem}_{time.strftime('%Y%m%d-%H%M%S')}") as staged:
        doc = write_timing_run(staged.path, table, meta=meta, max_trace_events=max_trace_events)
    return doc, staged.path


def capture_meta(path: Path) -> dict:
    """The capture's own timing.json, checked: an object (tagged or from before the tag) whose
    fields have the types a timing artifact gives them; anything else is one error line."""
    from bsprof.artifacts import check_schema, check_tag, read_json, upgrade
    from bsprof.errors import BsprofError

    data = read_json(path)
    if not isinstance(data, dict):
        raise BsprofError(
            f"{path}: not a JSON object (a timing.json is one); re-capture, or remove it to "
            "re-summarize the table alone"
        )
    if "bsprof" in data:
        kind, why = check_tag(data)
        if why is None and kind != "timing":
            why = f"a {kind} artifact where a timing artifact was expected"
        if why:
            raise BsprofError(f"{path}: {why}")
        data = upgrade(data)
    why = check_schema("timing", data, required="bsprof" in data)
    if why:
        raise BsprofError(f"{path}: {why}")
    return data


# what a re-summary keeps of the capture's timing.json (its stats are recomputed from the table)
_CAPTURE_FIELDS = ("family", "variant", "mnkl", "device", "sm_count", "kernel_name", "config")


def write_timing_run(
    out_dir: str | os.PathLike,
    table,
    *,
    meta: dict,
    overhead: list[dict] | None = None,
    raw=None,
    plan=None,
    max_trace_events: int | None = None,
) -> dict:
    """Everything `bsprof timing` leaves in a results dir: timing.parquet / .csv, trace.json, the
    raw buffer (buffer.npy, when given) and timing.json (kind "timing"). Returns the JSON dict."""
    from bsprof.analyzers.timing.stats import summarize
    from bsprof.analyzers.timing.trace import DEFAULT_MAX_EVENTS, write_trace
    from bsprof.artifacts import document, save

    out_dir = Path(out_dir)
    paths = write_table(table, out_dir)
    summary = summarize(table)
    trace_meta = write_trace(
        table,
        out_dir / "trace.json",
        max_events=max_trace_events or DEFAULT_MAX_EVENTS,
        title=f"bsprof timing {meta.get('kernel_name', '')}".strip(),
    )
    files = {"table": paths["parquet"].name, "csv": paths["csv"].name, "trace": "trace.json"}
    if raw is not None:
        import numpy as np

        with atomic_path(out_dir / "buffer.npy") as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, np.asarray(raw))
        files["buffer"] = "buffer.npy"
    doc = document(
        "timing",
        {
            **meta,
            "files": files,
            "sample_every": int(table.attrs.get("sample_every", 1)),
            "buffer_plan": plan.to_json() if plan is not None and hasattr(plan, "to_json") else None,
            "stats": summary.to_json(),
            "overhead": overhead or [],
            "trace": trace_meta,
        },
    )
    save(out_dir / "timing.json", doc)
    return doc
