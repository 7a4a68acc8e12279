"""Timing table → Chrome trace JSON (opens in ui.perfetto.dev and chrome://tracing).

One process per SM, one thread per warp (named by its role), one slice per phase per tile. Slices
are named ``t<tile> <phase>`` so the K-loop of tile t and the epilogue of tile t carry the same
prefix and the same colour; flow arrows join the producer's loads of tile t to the K-loop that
consumes them, and each tile's K-loop end (mma) to the start of its Phase 1 on every epilogue warp
(the producer→consumer hand-offs). Times are globaltimer-aligned
microseconds: cycles are converted per SM with the clock fitted during the run, so SMs line up.
"""

from __future__ import annotations

import os
from pathlib import Path

from bsprof.artifacts import dumps
from bsprof.io import write_text_atomic

DEFAULT_MAX_EVENTS = 200_000
# chrome://tracing reserved colour names, cycled by tile so neighbouring tiles differ.
_TILE_COLOURS = (
    "thread_state_running",
    "rail_response",
    "rail_animation",
    "cq_build_passed",
    "good",
    "thread_state_iowait",
    "rail_load",
    "yellow",
)


def build_trace(
    table,
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    flows: bool = True,
    title: str = "bsprof timing",
    sample_every: int | None = None,
) -> dict:
    """The trace as a dict (``traceEvents`` + ``otherData``). Whole tiles are dropped (every k-th
    tile kept, the same tiles on every warp) until the slices fit in ``max_events``."""
    import numpy as np

    from bsprof.analyzers.timing.stats import fit_clock

    if sample_every is None:
        sample_every = int(table.attrs.get("sample_every", 1))
    fit = fit_clock(table)
    n_tiles = max(1, table[["cta", "tile"]].drop_duplicates().shape[0])
    per_tile = len(table) / n_tiles * (2 if flows else 1)
    keep_every = 1
    while len(table) * (2 if flows else 1) / keep_every > max_events and keep_every < 1 << 20:
        keep_every *= 2
    tiles_seen = np.sort(table["tile"].unique())
    tile_rank = {int(t): i for i, t in enumerate(tiles_seen)}
    if keep_every > 1:
        ranks = table["tile"].map(tile_rank)
        table = table[ranks % keep_every == 0]

    if fit.cycles_per_ns > 0:
        t_start = fit.to_ns(table["sm"].to_numpy(), table["start"].to_numpy())
        t_end = fit.to_ns(table["sm"].to_numpy(), table["end"].to_numpy())
        clock_note = f"cycles converted at {fit.cycles_per_ns:.4f} cycles/ns, measured during the run"
    else:  # globaltimer did not move: fall back to cycles as "ns" per SM (no cross-SM alignment)
        t_start = table["start"].to_numpy(dtype=float)
        t_end = table["end"].to_numpy(dtype=float)
        clock_note = "globaltimer did not advance: times are raw cycles, SMs not aligned"
    t0 = float(np.min(t_start)) if len(t_start) else 0.0
    ts = (t_start - t0) / 1000.0
    te = (t_end - t0) / 1000.0

    events: list[dict] = []
    threads: dict[tuple[int, int], str] = {}
    # tid: one per (cta, warp) of an SM; a warp with two roles keeps one thread named after both.
    ctas_on_sm = table.groupby("sm")["cta"].unique()
    cta_slot = {(int(sm), int(c)): i for sm, cs in ctas_on_sm.items() for i, c in enumerate(sorted(cs))}
    roles_of = table.groupby(["sm", "cta", "warp"])["role"].unique()

    cols = [table[c].to_numpy() for c in ("sm", "cta", "warp", "role", "tile", "phase", "start", "end")]
    for i in range(len(table)):
        sm, cta, warp, role, tile, phase, c0, c1 = (col[i] for col in cols)
        sm, cta, warp, tile = int(sm), int(cta), int(warp), int(tile)
        tid = cta_slot[(sm, cta)] * 1000 + warp
        if (sm, tid) not in threads:
            rs = "+".join(sorted(roles_of[(sm, cta, warp)]))
            threads[(sm, tid)] = f"cta {cta} warp {warp} {rs}"
        events.append(
            {
                "name": f"t{tile} {phase}",
                "cat": role,
                "ph": "X",
                "pid": sm,
                "tid": tid,
                "ts": round(float(ts[i]), 4),
                "dur": round(max(float(te[i] - ts[i]), 0.0), 4),
                "cname": _TILE_COLOURS[tile_rank[tile] % len(_TILE_COLOURS)],
                "args": {"cta": cta, "warp": warp, "tile": tile, "cycles": int(c1 - c0)},
            }
        )

    n_flows = 0
    if flows:
        n_flows = _add_flows(events, table, ts, te, cta_slot)

    meta: list[dict] = []
    for sm in sorted({k[0] for k in threads}):
        meta.append({"name": "process_name", "ph": "M", "pid": sm, "args": {"name": f"SM {sm}"}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": sm, "args": {"sort_index": sm}})
    for (sm, tid), name in threads.items():
        meta.append({"name": "thread_name", "ph": "M", "pid": sm, "tid": tid, "args": {"name": name}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": sm, "tid": tid, "args": {"sort_index": tid}})

    tile_step = keep_every * sample_every
    note = (
        "all tiles"
        if tile_step == 1
        else f"sampled: every {tile_step}th tile of each CTA is shown (device sampling {sample_every}, "
        f"trace cap {keep_every}); the same tiles on every warp"
    )
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ns",
        "otherData": {
            "title": title,
            "generator": "bsprof timing",
            "tile_sampling": note,
            "device_sample_every": sample_every,
            "trace_keep_every": keep_every,
            "max_events": max_events,
            "slices": len(events) - 2 * n_flows,
            "flows": n_flows,
            "clock": clock_note,
            "cycles_per_ns": fit.cycles_per_ns,
            "per_tile_events": per_tile,
        },
    }


def _add_flows(events: list[dict], table, ts, te, cta_slot) -> int:
    """Hand-off arrows of each tile: producer load start → the MMA warp's K-loop start (its first
    stage landed), and MMA K-loop end → Phase 1 start on each epilogue warp of the same CTA (none
    where one warp runs both, as a Hopper consumer does)."""
    import numpy as np

    role = table["role"].to_numpy()
    phase = table["phase"].to_numpy()
    sm, cta, warp, tile = (table[c].to_numpy() for c in ("sm", "cta", "warp", "tile"))

    def first_by_tile(mask):
        out = {}
        for i in np.nonzero(mask)[0]:
            out.setdefault((int(cta[i]), int(tile[i])), []).append(i)
        return out

    loads = first_by_tile((role == "producer") & (phase == "load"))
    kloops = first_by_tile((role == "mma") & (phase == "kloop"))
    p1 = first_by_tile((role == "epilogue") & (phase == "phase1"))

    def tid(i):
        return cta_slot[(int(sm[i]), int(cta[i]))] * 1000 + int(warp[i])

    n = 0

    def arrow(name, i, t_i, j, t_j):
        nonlocal n
        n += 1
        events.append(
            {"name": name, "cat": "handoff", "ph": "s", "id": n, "pid": int(sm[i]), "tid": tid(i), "ts": round(t_i, 4)}
        )
        events.append(
            {
                "name": name,
                "cat": "handoff",
                "ph": "f",
                "bp": "e",
                "id": n,
                "pid": int(sm[j]),
                "tid": tid(j),
                "ts": round(t_j, 4),
            }
        )

    for key, ks in kloops.items():
        for i in loads.get(key, [])[:1]:
            for j in ks:
                arrow("load→mma", i, float(ts[i]), j, float(ts[j]))
        for j in p1.get(key, []):
            i = ks[0]
            if int(warp[i]) == int(warp[j]):
                continue
            arrow("mma→epilogue", i, max(float(ts[i]), float(te[i]) - 1e-3), j, float(ts[j]))
    return n


def write_trace(table, path: str | os.PathLike, **kwargs) -> dict:
    """Write the trace atomically; returns its ``otherData``."""
    trace = build_trace(table, **kwargs)
    write_text_atomic(Path(path), dumps(trace, compact=True))
    return trace["otherData"]
