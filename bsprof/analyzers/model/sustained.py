"""The sustained blocks of ``bsprof model --validate``: what each timed block's readings say.

``bsprof.profile.validate`` runs every build alone in sustained blocks and records, per block, NVML's
polled SM clock and board power and the SMs' own cycle counter (two clock stamps around the block,
``bsprof.kernels.clock_stamp``). This module reads those records, on any machine: the stamps' clock
(``counter_mhz``), each build's pooled clock (``pooled_clocks``, the clock term's input), the
blocks the power controller held below the limit (``held_blocks``) and the run scored without them
(``rescore_held``). The scoring itself is :mod:`bsprof.analyzers.model.validation`.
"""

from __future__ import annotations

import math
import statistics

from bsprof.analyzers.model.validation import Point, base_clock_ratio, from_frame, ratio_stats, summary

# --- blocks the power controller held below the limit -------------------------------------------
#
# A power-capped build in its sustained state draws the board limit: the controller raises its
# clock until the draw meets the limit. A block in which the same build ran at a clock well below
# its own usual one *and* drew well under the limit, with NVML flagging the power cap, was not set
# by its own draw: the controller held it there (its state carried over from what ran before, or a
# limit other than board power). Such a block measures a state the user's kernel, run back to back
# with itself, does not settle in. Its wall time cannot be rescaled by its clock either: in the
# 8192^3 ping-pong baseline's held blocks wall x NVML clock reads 6-9% fewer cycles than its other
# blocks (the reported clock under-reads the rate the kernel ran at; the draw agrees with the wall
# time, not with the reading), so the block is left out of the point's pairs instead.

POWER_CAP_BIT = 0x4  # NVML clock-event reason: software power cap
HELD_CLOCK_DROP = 0.05  # block mean clock this share below the median block of its code ...
HELD_POWER_MARGIN = 0.05  # ... and its draw this share of (limit - floor) under the limit
SAME_CODE = {"plain_b": "plain"}  # a second build of the baseline's code: its blocks are the baseline's too


def block_mhz(b: dict) -> float | None:
    """A timed block's NVML SM clock: its mean over the block's readings, else their median."""
    m = b.get("mhz_mean") or b.get("mhz")
    return float(m) if m else None


def _block_counter_mhz(b: dict) -> float | None:
    m = b.get("counter_mhz")
    return float(m) if m else None


def _block_watts(b: dict) -> float | None:
    w = b.get("watts_mean") or b.get("watts")
    return float(w) if w else None


# 64-bit words per stamp block (bsprof.kernels.clock_stamp writes them): clock and global timer at
# entry, clock and global timer at exit, SM id, a pad (so both 16-byte stores are aligned)
STAMP_WORDS = 6


def _stamps(arr):
    import numpy as np

    a = np.asarray(arr, dtype=np.int64).reshape(-1, STAMP_WORDS)
    return a[(a[:, 0] != 0) & (a[:, 1] != 0) & (a[:, 2] != 0) & (a[:, 3] != 0)]


def counter_mhz(before, after) -> tuple[float | None, float | None]:
    """(mean SM clock in MHz, nanoseconds) over the interval between two clock stamps launched on one
    stream around a timed block: per SM, its cycle counter's advance from the first stamp's exit to
    the second's entry over the global timer's; the median over the SMs both stamps reached (their
    counters share one clock; they differ in offset). (None, None) when no SM pairs up."""
    a, b = _stamps(before), _stamps(after)
    first = {}
    for c0, t0, c1, t1, sm, _ in a:
        if sm not in first or t1 > first[sm][1]:
            first[int(sm)] = (int(c1), int(t1))
    rates, spans = [], []
    for c0, t0, c1, t1, sm, _ in b:
        if int(sm) in first:
            c, t = first[int(sm)]
            if t0 > t and c0 > c:
                rates.append((int(c0) - c) / (int(t0) - t) * 1000.0)
                spans.append(float(int(t0) - t))
    if not rates:
        return None, None
    return statistics.median(rates), statistics.median(spans)


def spin_counter_mhz(stamp) -> float | None:
    """The SM clock during one stamp kernel that spun: median over its blocks of the cycles spun
    over the nanoseconds they took (every SM busy spinning, far under the power limit: the top clock
    in the counter's units)."""
    r = [
        (int(c1) - int(c0)) / (int(t1) - int(t0)) * 1000.0
        for c0, t0, c1, t1, _s, _p in _stamps(stamp)
        if t1 > t0 and c1 > c0
    ]
    return statistics.median(r) if r else None


def held_blocks(blocks: dict, limits, same_code: dict | None = None) -> dict[tuple[str, str], list[int]]:
    """Blocks held below the power limit: ``{(set, build): [repeat, ...]}`` over ``blocks``
    (``{"forward": {build: [reading, ...]}, "reverse": ...}``, the run's ``sustained_blocks``).

    A block is held when its build is power-capped in it (mean clock below ``CAPPED_BELOW`` of the top
    clock, the power-cap reason set), its mean clock is ``HELD_CLOCK_DROP`` or more below the median
    block clock of its code (every block of it in every set: the median, so a minority of held blocks
    does not move the reference), and its mean draw is ``HELD_POWER_MARGIN`` x (limit - floor) or more
    under the limit. A clock that fell with the draw while the limit left room was not the limit's
    doing. Blocks recorded without means use their medians."""
    from bsprof.analyzers.model.clock import CAPPED_BELOW

    if not blocks or limits is None:
        return {}
    same_code = SAME_CODE if same_code is None else same_code
    per_code: dict[str, list[float]] = {}
    for reads in blocks.values():
        for k, bl in (reads or {}).items():
            per_code.setdefault(same_code.get(k, k), []).extend(m for m in map(block_mhz, bl) if m)
    ref = {k: statistics.median(v) for k, v in per_code.items() if v}
    room = HELD_POWER_MARGIN * (limits.power_limit_w - limits.floor_w)
    out: dict[tuple[str, str], list[int]] = {}
    for name, reads in blocks.items():
        for k, bl in (reads or {}).items():
            f0 = ref.get(same_code.get(k, k))
            for i, b in enumerate(bl):
                m, w = block_mhz(b), _block_watts(b)
                if not (m and w and f0):
                    continue
                capped = m < CAPPED_BELOW * limits.max_mhz and int(b.get("reasons") or 0) & POWER_CAP_BIT
                if capped and m <= (1.0 - HELD_CLOCK_DROP) * f0 and w <= limits.power_limit_w - room:
                    out.setdefault((name, k), []).append(i)
    return out


def pooled_clocks(
    *sets: dict,
    same_code: dict | None = None,
    skip: dict[tuple[str, str], list[int]] | None = None,
    names: tuple[str, ...] = (),
    clock: str = "nvml",
) -> dict[str, dict]:
    """Per build: its time-averaged SM clock and board power over every block of its code, in every
    repeat set given (a second plain build counts as the plain build), leaving out the blocks in
    ``skip`` (``{(set name, build): [repeat, ...]}``, ``names[i]`` naming ``sets[i]``).

    Why pooled, and why the mean: a power-capped clock dithers between steps faster than NVML is
    polled, so one set's median of 5 blocks x ~20 readings is a sample of it, not its average: on
    the H100 at 4096^3 the same plain code read 1,740 MHz (forward set), 1,845 (its second build,
    same set) and 1,905 (reverse set) while their wall times agreed within 1.7% (docs/model.md).
    Wall time is cycles over the time-averaged clock: the mean of readings taken at even intervals,
    pooled over all of that code's running. Blocks recorded before means were kept contribute their
    medians.

    ``clock="counter"`` (the diagnostic ``counter_vs_nvml`` only; the clock term reads NVML's): the SM
    cycle counter's clock (``counter_mhz``, each block's cycles over its nanoseconds), pooled as total
    cycles over total time; blocks without a counter reading are left out (their power too, so clock
    and power describe the same blocks)."""
    same_code = SAME_CODE if same_code is None else same_code
    skip = skip or {}
    acc: dict[str, dict] = {}
    for idx, reads in enumerate(sets):
        name = names[idx] if idx < len(names) else str(idx)
        for k, blocks in (reads or {}).items():
            a = acc.setdefault(same_code.get(k, k), {"m": [], "w": [], "n": [], "ns": [], "blocks": 0, "reasons": 0})
            for i, b in enumerate(blocks):
                m = _block_counter_mhz(b) if clock == "counter" else block_mhz(b)
                if not m or i in skip.get((name, k), ()):
                    continue
                n = max(1, int(b.get("readings") or 1))
                a["m"].append(m)
                a["w"].append(_block_watts(b))
                a["n"].append(n)
                a["ns"].append(float(b.get("counter_ns") or 0.0))
                a["blocks"] += 1
                a["reasons"] |= int(b.get("reasons") or 0)
    out = {}
    for k, a in acc.items():
        if not a["m"]:
            continue
        wm = [(w, n) for w, n in zip(a["w"], a["n"]) if w]
        if clock == "counter" and all(t > 0 for t in a["ns"]):
            mhz = sum(m * t for m, t in zip(a["m"], a["ns"])) / sum(a["ns"])  # total cycles / total time
        else:
            mhz = sum(m * n for m, n in zip(a["m"], a["n"])) / sum(a["n"])
        out[k] = {
            "mhz": mhz,
            "clock": clock,
            "watts": sum(w * n for w, n in wm) / sum(n for _, n in wm) if wm else None,
            "mhz_block_spread": [min(a["m"]), max(a["m"])],
            "readings": sum(a["n"]),
            "blocks": a["blocks"],
            "reasons": a["reasons"],
        }
    return out


def point_builds(p: Point) -> tuple[str, str, str]:
    """(repeat set, calibration build, measured build) of a point, by the run's build names."""
    if p.direction == "noise":
        return "forward", "plain", "plain_b"
    key = "plain" if not (p.delay_kloop or p.delay_phase1) else f"kloop{p.delay_kloop}_phase1{p.delay_phase1}"
    return ("reverse", p.calib, "plain") if p.direction == "reverse" else ("forward", "plain", key)


def held_pairs(p: Point, walls: dict, held: dict, same_code: dict | None = None) -> tuple[list, list, int]:
    """The point's per-repeat (base, measured) walls without the held blocks, and how many repeats
    were dropped. ``walls``: ``{"forward": {build: [µs, ...]}, "reverse": ...}``. Where the
    calibration build's block is held but a second build of its code ran unheld in the same repeat
    (the plain build's twin), that block stands in for it: same code, same repeat, same neighbours."""
    same_code = SAME_CODE if same_code is None else same_code
    name, base, meas = point_builds(p)
    w = walls.get(name) or {}
    if base not in w or meas not in w:
        return list(p.base_reps), list(p.meas_reps), 0
    twins = [k for k, c in same_code.items() if c == base and k != meas and k in w]
    bad = lambda k, i: i in held.get((name, k), ())  # noqa: E731
    b_out, m_out, dropped = [], [], 0
    for i, (b, m) in enumerate(zip(w[base], w[meas])):
        if bad(base, i):
            alt = [w[t][i] for t in twins if i < len(w[t]) and not bad(t, i)]
            b = alt[0] if alt else None
        if b is None or bad(meas, i):
            dropped += 1
            continue
        b_out.append(b)
        m_out.append(m)
    return b_out, m_out, dropped


def rescore_held(doc: dict, limits) -> dict:
    """The run scored without the blocks held below the power limit (``held_blocks``, judged on NVML's
    readings against ``limits``, NVML's): each point's ratio from its remaining repeats, its
    calibration build's pooled NVML clock from its remaining blocks, the model's
    stored cycles turned into wall time with that clock. Returns ``{"blocks": [...],
    "points": [...], "summary": ...}``; a run without per-block readings gives ``blocks`` None."""
    import pandas as pd

    blocks = doc.get("sustained_blocks")
    frame = pd.DataFrame(doc.get("points") or [])
    if not blocks or frame.empty or limits is None:
        return {"blocks": None, "points": [], "summary": {}}
    held = held_blocks(blocks, limits)
    walls = {"forward": doc.get("wall_us_forward") or {}, "reverse": doc.get("wall_us_reverse") or {}}
    pooled = pooled_clocks(blocks.get("forward"), blocks.get("reverse"), skip=held, names=("forward", "reverse"))
    pts = from_frame(frame)
    cyc_col = "projected_cycles_det" if "projected_cycles_det" in frame.columns else "projected_wall_det"
    for p, row in zip(pts, frame.to_dict("records")):
        p.base_reps, p.meas_reps, dropped = held_pairs(p, walls, held)
        p.extra["held_repeats"] = dropped
        p.measured_ratio, p.ci_lo, p.ci_hi = ratio_stats(p.base_reps, p.meas_reps)
        p.flip = bool(row.get("flip", False))
        src = pooled.get(point_builds(p)[1]) or {}
        if src.get("mhz"):
            p.extra["mhz_base"], p.extra["watts_base"] = src["mhz"], src.get("watts")
        cyc = float(row[cyc_col])
        p.projected_cycles_det, p.clock_ratio = cyc, base_clock_ratio(p, cyc, limits)
        p.projected_wall_det = cyc / p.clock_ratio
        p.term_clock = p.projected_wall_det - cyc
        m = p.measured_ratio
        p.err_det_pct = 100.0 * (p.projected_wall_det / m - 1.0)
        if math.isfinite(p.ci_hi):
            p.err_ci_pct = 100.0 * p.projected_wall_det * (p.ci_hi - p.ci_lo) / 2.0 / (m * m)
        for key in ("projected_trivial", "projected_oracle"):
            setattr(p, key, float(row.get(key, math.nan)))
        # the trivial and oracle projections as stored, against the re-measured ratio
        p.err_trivial_pct = 100.0 * (p.projected_trivial / m - 1.0)
        p.err_oracle_pct = 100.0 * (p.projected_oracle / m - 1.0)
    listed = [{"set": s, "build": k, "repeat": i} for (s, k), idx in sorted(held.items()) for i in idx]
    return {"blocks": listed, "points": pts, "summary": summary(pts)}


def counter_vs_nvml(*sets: dict) -> dict[str, float]:
    """A diagnostic, not a model input: per build, its SM cycle counter's pooled clock (the clock stamps
    around each block) over NVML's pooled reading, for the runs that recorded both. A ping-pong
    8192^3 run read 0.89-0.93 in GEMM blocks while the stamps' own spin read 1.000 (docs/model.md,
    "The clock term"): the counter tracks the walls, NVML's reading is not the rate cycles turn into time, and a
    clock term in the counter's units has no measured top for a GEMM."""
    counter, nvml = pooled_clocks(*sets, clock="counter"), pooled_clocks(*sets)
    return {k: c["mhz"] / nvml[k]["mhz"] for k, c in counter.items() if (nvml.get(k) or {}).get("mhz")}


def counter_summary(ratio: dict[str, float], limits: dict | None) -> dict:
    """``counter_vs_nvml``'s range over the builds, beside the stamp spin's counter over NVML's top
    (``limits``: the run's recorded device limits)."""
    spin, top = (limits or {}).get("top_counter_mhz"), (limits or {}).get("max_mhz")
    return {"min": min(ratio.values()), "max": max(ratio.values()), "spin": spin / top if spin and top else None}


def sustained_cycles(base_us: list, base_reads: list | None, meas_us: list, meas_reads: list | None) -> dict:
    """The point's measured *cycle* ratio in the sustained blocks: per repeat, (wall x counter clock)
    of the measured build over the calibration build's, and their mean (``sust_cycle_ratio``). What
    the model's cycles (before its clock term) should match where the sustained state runs the
    captures' cycles; {} without counter clocks."""
    rs = []
    for i, (wb, wm) in enumerate(zip(base_us, meas_us)):
        if i < len(base_reads or ()) and i < len(meas_reads or ()):
            fb, fm = _block_counter_mhz(base_reads[i]), _block_counter_mhz(meas_reads[i])
            if fb and fm and wb > 0:
                rs.append(wm * fm / (wb * fb))
    return {"sust_cycle_ratio": statistics.fmean(rs)} if rs else {}


def held_summary(doc: dict, limits) -> dict | None:
    """What ``rescore_held`` changes, for the run's summary: the rule, the held blocks, the model's
    errors without them (overall, on the flip points, per point with the repeats each dropped) and
    the target check on that score; None for a run without per-block readings."""
    res = rescore_held(doc, limits)
    if res["blocks"] is None:
        return None
    s = res["summary"]
    return {
        "rule": {"clock_drop": HELD_CLOCK_DROP, "power_margin": HELD_POWER_MARGIN, "power_cap_bit": POWER_CAP_BIT},
        "blocks": res["blocks"],
        "det": s["det"],
        "noise_floor_pct": s.get("noise_floor_pct"),
        "per_point": [
            {
                "direction": p.direction,
                "knob": p.knob,
                "held_repeats": p.extra.get("held_repeats", 0),
                "repeats_left": len(p.base_reps),
                "measured_ratio": p.measured_ratio,
                "clock_ratio": p.clock_ratio,
                "err_det_pct": p.err_det_pct,
            }
            for p in res["points"]
        ],
    }
