"""`bsprof model --validate`: the model's projections against delay-injected builds on the GPU.

1. Spin calibration: what a compile-time ``clock64`` spin of d cycles costs (the probe kernel
   records around spins of several d; cost = slope * d + intercept). Cost x units = the nominal
   change of a delayed build, the only size of the change the projections are given.
2. Calibrate the model on the plain build's timing capture; read its tile period, binding side and
   deficit (the slack of the side that does not bind).
3. Build delay-injected variants (K-loop per K block, epilogue Phase 1 per tile, both). The side
   that does not bind gets deltas at multiples of the deficit, from well below to well past it, so
   the binding side flips inside the sweep and the equilibrium and the trivial predictor differ.
4. Wall times: ``repeats`` repeats over every plain-code build, each build per repeat one sustained
   block (``sustained_walls``: it runs alone long enough for the power-capped clock to settle,
   then is timed with its SM clock and power read), plus a second plain build as the null point
   (its ratio to the first is the noise floor). The reverse points (delayed build -> plain) get
   their own, fresh repeats. The device's top clock, power limit and idle power are read first:
   with each calibration build's sustained clock they give the model's clock term.
5. Every delayed build's timing capture: the measured change of each phase (the oracle's input)
   and, for the reverse points' source builds, the table the model calibrates on.

Writes validation.csv and validation.json (kind "validation") plus the calibration timing tables
(so ``bsprof.analyzers.model.validation.evaluate`` can re-score the same measurements on a CPU).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from bsprof import artifacts
from bsprof.errors import BsprofError
from bsprof.kernels.api import Target

KLOOP_FRACTIONS = (0.15, 0.3)  # of the tile period, where the K-loop binds
KLOOP_MIN_DELAY = 250  # per K block: below ~250 the spin costs the K-loop more than
# its probe cost (it also holds back the next wgmma issue)
PHASE1_FRACTIONS = (0.01, 0.03, 0.06, 0.12, 0.25)
DEFICIT_MULTIPLES = (0.3, 0.6, 0.9, 1.1, 1.4, 2.0, 3.0)
BOTH_FRACTIONS = ((0.15, 0.03), (0.3, 0.06))
SPIN_PROBE_DELAYS = (0, 64, 256, 1024, 4096)
REPEATS = 5
ROUNDS_PER_REPEAT = 8


def _log(console, msg: str) -> None:
    if console is not None:
        console.print(msg)


def spin_calibration(console=None) -> dict:
    """Measured cost (cycles) of ``spin(d)`` on this GPU, from the probe kernel."""
    import numpy as np

    from bsprof.analyzers.model.validation import spin_cost_fit
    from bsprof.analyzers.timing.buffer import decode_buffer
    from bsprof.kernels import timing_probe

    per_d = {}
    for d in SPIN_PROBE_DELAYS:
        buf, plan = timing_probe.run_probe(num_ctas=8, tiles=16, spin_cycles=d)
        t = decode_buffer(buf, plan)
        # every phase of the probe is one spin between two records; the first tile warms up
        t = t[t["tile"] > 0]
        per_d[d] = float(np.median((t["end"] - t["start"]).to_numpy()))
    base = per_d[0]
    cost = {d: v - base for d, v in per_d.items() if d > 0}
    slope, icpt = spin_cost_fit(cost)
    _log(
        console,
        f"spin calibration: spin(d) costs {slope:.3f}*d + {icpt:.1f} cycles (record-to-record floor {base:.0f})",
    )
    return {"samples": {str(k): v for k, v in per_d.items()}, "slope": slope, "intercept": icpt, "record_floor": base}


def delay_for(delta_per_unit: float, spin: dict) -> tuple[int, float]:
    """Device knob d for a wanted per-unit cost, and the cost it really injects."""
    raw = (delta_per_unit - spin["intercept"]) / spin["slope"]
    # two significant digits: shapes with similar per-unit targets share compiled builds
    d = int(float(f"{raw:.2g}")) if raw >= 1 else 1
    return d, spin["slope"] * d + spin["intercept"]


def _baseline_numbers(params, project) -> tuple[float, float, str]:
    """(tile cycles, deficit, binding side) of the calibrated model; deficit 0 when unknown."""
    from bsprof.analyzers.model.validation import projection_json
    from bsprof.fmt import dig

    pj = projection_json(project(params, {}))
    det = pj.get("deterministic", {})
    tile = float(det.get("baseline_tile_cycles") or det.get("projected_tile_cycles") or 0.0)
    deficit = dig(det, "deficit")
    if deficit is None:
        deficit = dig(pj, "baseline", "deficit", default=0.0)
    return tile, float(deficit or 0.0), str(det.get("binding_before", ""))


def plan_sweep(tile: float, deficit: float, binding: str, k_blocks: int, spin: dict) -> list[dict]:
    """The delayed builds: ``{knob, delay_kloop, delay_phase1, delta_kloop, delta_phase1}`` (deltas:
    nominal cycles per tile). The side that does not bind gets deltas at multiples of the deficit
    (the sweep crosses the flip); a side that binds gets fractions of the tile period."""
    if tile <= 0:
        raise BsprofError("the calibrated model reports no tile period; cannot size the validation sweep")
    k_targets = [f * tile for f in KLOOP_FRACTIONS]
    p_targets = [f * tile for f in PHASE1_FRACTIONS]
    both = [(fk * tile, fp * tile) for fk, fp in BOTH_FRACTIONS]
    if deficit > 0 and binding:
        flip = [m * deficit for m in DEFICIT_MULTIPLES]
        if binding == "epilogue":  # the MMA side has the slack: slow the K-loop past it
            k_targets = flip
        else:
            p_targets = flip
            both = [(KLOOP_FRACTIONS[0] * tile, 0.6 * deficit), (KLOOP_FRACTIONS[0] * tile, 1.4 * deficit)]
    out = []
    kloop_on_slack = deficit > 0 and binding == "epilogue"  # multiples of the deficit: keep them small

    def kl(target: float) -> tuple[int, float]:
        d, cost = delay_for(target / k_blocks, spin)
        if d < KLOOP_MIN_DELAY and not kloop_on_slack:
            d = KLOOP_MIN_DELAY
            cost = spin["slope"] * d + spin["intercept"]
        return d, cost * k_blocks

    for t in k_targets:
        d, cost = kl(t)
        out.append({"knob": "kloop", "delay_kloop": d, "delay_phase1": 0, "delta_kloop": cost, "delta_phase1": 0.0})
    for t in p_targets:
        d, cost = delay_for(t, spin)
        out.append({"knob": "phase1", "delay_kloop": 0, "delay_phase1": d, "delta_kloop": 0.0, "delta_phase1": cost})
    for tk, tp in both:
        dk, ck = kl(tk)
        dp, cp = delay_for(tp, spin)
        out.append({"knob": "both", "delay_kloop": dk, "delay_phase1": dp, "delta_kloop": ck, "delta_phase1": cp})
    return out


def reverse_sources(variants: list[dict], deficit: float, binding: str) -> list[dict]:
    """Builds the reverse points start from: the largest of each knob, and every build whose
    change of the non-binding side passed the deficit (its reverse point flips back)."""
    src = [
        max((v for v in variants if v["knob"] == k), key=lambda v: v["delta_kloop"] + v["delta_phase1"])
        for k in ("kloop", "phase1", "both")
        if any(v["knob"] == k for v in variants)
    ]
    if deficit > 0 and binding:
        side = "delta_kloop" if binding == "epilogue" else "delta_phase1"
        src += [v for v in variants if v[side] > deficit and v not in src]
    else:
        ph = sorted((v for v in variants if v["knob"] == "phase1"), key=lambda v: v["delta_phase1"])
        if len(ph) >= 2 and ph[-2] not in src:
            src.append(ph[-2])
    return src


def _key(v: dict) -> str:
    if v["delay_kloop"] == 0 and v["delay_phase1"] == 0:
        return "plain"
    return f"kloop{v['delay_kloop']}_phase1{v['delay_phase1']}"


def phase_means(table) -> dict:
    g = (table["end"] - table["start"]).groupby([table["role"], table["phase"]]).mean()
    return {f"{r}.{p}": float(v) for (r, p), v in g.items()}


SETTLE_S = 0.6  # each build runs alone this long, untimed, before its block is timed
BLOCK_S = 0.1  # the timed part of a block
GRAPH_LAUNCHES = 10  # kernel launches per graph replay
ORDER_SEED = 20261125  # the build order of repeat r: a shuffle seeded by ORDER_SEED + r (recorded, replayable)


def sustained_walls(
    launchers: dict,
    keys: list[str],
    repeats: int,
    rounds: int = ROUNDS_PER_REPEAT,
    first: int = 0,
    settle_s: float = SETTLE_S,
    stamps=None,
) -> tuple[dict, dict, str]:
    """``repeats`` sustained blocks per build: per repeat each build in turn (``block_order``: a seeded
    shuffle, no build twice in a row) runs back to back for ``settle_s`` untimed, then ``BLOCK_S``
    timed with its SM clock read two ways (NVML polled while it runs: the clock term's input; and, a
    recorded diagnostic, the SM cycle counter over the block, from ``stamps``, a
    ``kernels.clock_stamp.ClockStamps``, launched just before and just after the timed launches),
    board power (NVML) and the GPU temperature after it. Returns (µs per launch
    per repeat, the readings per repeat, "graph" | "eager").

    Why blocks and not rounds of a few launches: a power-capped H100 sets its clock from the draw
    of what ran over the last several milliseconds, so a build interleaved every ~20 ms with others
    runs at a clock set partly by its neighbours (the 8192^3 ping-pong runs measured the same plain
    build 4-5% apart in two repeat sets with different neighbours, while builds at the top clock
    agreed within 0.3%). A user's kernel runs back to back with itself: its own sustained clock.
    Why 0.6 s of settling: after a block that drew the limit the controller's cut outlasts 0.2 s (the
    stored runs: 6 of 100 blocks held after 0.2 s, 1 of 46 after 0.6 s). Why shuffled: a fixed order
    gives a build the same predecessor in every repeat, so one high-draw neighbour lands on it every
    time (the 8192^3 baseline followed the same build, held, in 4 of 5 repeats). Why no build twice
    in a row: a capped build's clock keeps falling past one block (the plain 8192^3 build's second
    block in a row ran ~9% slower)."""
    import statistics
    import time as _t

    from bsprof.profile import timing_capture as tc

    reps: dict[str, list[float]] = {k: [] for k in keys}
    reads: dict[str, list[dict]] = {k: [] for k in keys}
    graphs = {k: tc.graph_launcher(launchers[k], GRAPH_LAUNCHES) for k in keys}
    if not all(g is not None for g in graphs.values()):
        # no graphs (host-bound eager launches): blocks of one build at a time, no clock readings
        for r in range(first, first + repeats):
            for k in block_order(keys, r):
                med = tc.median_us({k: tc.raw_launcher(launchers[k])}, rounds=rounds, inner=GRAPH_LAUNCHES)
                reps[k].append(float(med[k]))
        return reps, {}, "eager"

    import torch

    from bsprof.analyzers.model.sustained import counter_mhz
    from bsprof.profile.sensors import torch_device_sensors

    sensors = torch_device_sensors()
    span: dict[str, float] = {}
    for k, g in graphs.items():  # seconds per replay, to size the blocks
        g()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g()
        e.record()
        e.synchronize()
        span[k] = max(1e-6, s.elapsed_time(e) / 1000.0)
    prev = None
    for r in range(first, first + repeats):
        for k in block_order(keys, r):
            g = graphs[k]
            timed = max(3, math.ceil(BLOCK_S / span[k]))
            for _ in range(max(2, math.ceil(settle_s / span[k]))):
                g()
            before = stamps.stamp() if stamps is not None else None
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(timed):
                g()
            e.record()
            after = stamps.stamp() if stamps is not None else None
            mhz, watts, why = [], [], 0
            while sensors is not None and not s.query():
                _t.sleep(0.002)
            while sensors is not None and not e.query():
                m, w, r_bits = sensors.read()
                mhz.append(m)
                watts.append(w)
                why |= r_bits
                _t.sleep(0.005)
            torch.cuda.synchronize()
            reps[k].append(s.elapsed_time(e) * 1000.0 / (timed * GRAPH_LAUNCHES))
            cmhz, cns = counter_mhz(before.cpu().numpy(), after.cpu().numpy()) if stamps is not None else (None, None)
            good_m, good_w = [x for x in mhz if x == x], [x for x in watts if x == x]
            reads[k].append(
                {
                    "mhz": statistics.median(good_m) if good_m else None,
                    "watts": statistics.median(good_w) if good_w else None,
                    "mhz_mean": statistics.fmean(good_m) if good_m else None,
                    "watts_mean": statistics.fmean(good_w) if good_w else None,
                    "mhz_min": min(good_m) if good_m else None,
                    "mhz_max": max(good_m) if good_m else None,
                    "reasons": why,
                    "readings": len(good_m),
                    "counter_mhz": cmhz,
                    "counter_ns": cns,
                    "temp_c": sensors.temperature() if sensors is not None else None,
                    "repeat": r,
                    "after": prev,
                }
            )
            prev = k
    return reps, reads, "graph"


RETIME_MAX = 1  # extra repeats a set may get to replace blocks held below the power limit: with every block
# settled 0.6 s a held block is the exception, and each extra repeat costs a whole set


def retime_held(
    launchers: dict,
    keys: list[str],
    reps: dict,
    reads: dict,
    limits,
    repeats: int,
    rounds: int = ROUNDS_PER_REPEAT,
    earlier: dict | None = None,
    stamps=None,
    max_extra: int = RETIME_MAX,
) -> int:
    """Extra repeats of a whole repeat set for the blocks the power controller held below the limit
    (``analyzers.model.sustained.held_blocks``): one per held block of the most-held build, at most
    ``max_extra``, appended to ``reps`` / ``reads`` in place (the order continues the seeded shuffle).
    The whole set runs again, not the held build alone, so every point keeps ratios of blocks timed
    side by side; scoring leaves the held blocks out of their pairs. ``earlier``: the readings of the
    sets already run (``{"forward": {build: [reading, ...]}}``), so a build's usual clock is judged
    over every block of its code, as scoring judges it: a build held in most of this set's blocks
    would otherwise set its own reference. Returns the number of extra repeats run."""
    from bsprof.analyzers.model.clock import limits_for
    from bsprof.analyzers.model.sustained import held_blocks

    lim = limits_for(None, limits)
    if lim is None or not reads:
        return 0
    this = "this set"
    held = {k: v for (s, k), v in held_blocks({**(earlier or {}), this: reads}, lim).items() if s == this}
    extra = min(max(0, max_extra), max((len(v) for v in held.values()), default=0))
    if extra:
        more, more_reads, _ = sustained_walls(launchers, keys, extra, rounds, first=repeats, stamps=stamps)
        for k in keys:
            reps[k].extend(more[k])
            reads.setdefault(k, []).extend(more_reads.get(k, []))
    return extra


def block_order(keys: list[str], r: int) -> list[str]:
    """The builds' order in repeat ``r``: a shuffle seeded by ``ORDER_SEED + r``, its first build moved
    one place on when it was repeat ``r - 1``'s last (no build runs two blocks in a row)."""
    import random

    def shuffled(i: int) -> list[str]:
        out = list(keys)
        random.Random(ORDER_SEED + i).shuffle(out)
        return out

    out = shuffled(r)
    if r > 0 and len(out) > 1 and out[0] == _last(keys, r - 1):
        out[0], out[1] = out[1], out[0]
    return out


def _last(keys: list[str], r: int) -> str:
    return block_order(keys, r)[-1]


def rotated_order(keys: list[str], r: int) -> list[str]:
    """The order the runs before the shuffle used (``keys`` rotated left by ``r``): kept to read their
    stored blocks in the order they ran."""
    n = r % len(keys) if len(keys) > 2 else 0
    return keys[n:] + keys[:n]


def sustained_summary(reads: dict) -> dict[str, dict]:
    """Per build: median over its blocks of the median SM clock and board power."""
    import statistics

    out = {}
    for k, blocks in reads.items():
        m = [b["mhz"] for b in blocks if b.get("mhz")]
        w = [b["watts"] for b in blocks if b.get("watts")]
        if m:
            out[k] = {
                "mhz": statistics.median(m),
                "watts": statistics.median(w) if w else None,
                "readings": sum(b.get("readings", 0) for b in blocks),
                "blocks": len(blocks),
            }
    return out


TOP_SPINS = 3  # stamp spins on every SM: the counter's rate at the top clock (a diagnostic)
TOP_SPIN_S = 0.1


def device_limits(spin_s: float = 0.5, stamps=None) -> dict | None:
    """The GPU's top SM clock and enforced power limit (NVML), and its power floor: the board
    power while a one-thread spin kernel keeps the GPU at its working clock and voltage with no
    tensor or memory work (static power, memory refresh, the board), the part of a kernel's draw
    that does not scale with its work. The idle reading is kept beside it.

    With ``stamps`` (``kernels.clock_stamp.ClockStamps``), right after the floor spin (the clock
    already at the top): ``TOP_SPINS`` spins of ``TOP_SPIN_S`` on every SM, each timing its own
    cycles by the global timer: ``top_counter_mhz`` (their median; each spin's value is kept). A
    recorded diagnostic, not the clock term's top: it reads NVML's top exactly, while GEMM blocks at
    that NVML clock count 7-10% fewer cycles per second (``analyzers.model.sustained.counter_vs_nvml``)."""
    import statistics
    import time as _t

    import torch

    from bsprof.profile.sensors import torch_device_sensors

    if not torch.cuda.is_available():
        return None
    sensors = torch_device_sensors()
    if sensors is None:
        return None
    lim = sensors.limits()
    if not lim.get("max_mhz") or not lim.get("power_limit_w"):
        return None
    torch.cuda.synchronize()
    _t.sleep(0.3)
    idle = [sensors.read()[1] for _ in range(10)]
    ghz = max(0.5, lim["max_mhz"] / 1000.0)
    per_launch, launches = int(0.01 * ghz * 1e9), max(1, int(spin_s / 0.01))
    start, done = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        torch.cuda._sleep(per_launch)  # ~10 ms of spinning on the SM cycle counter per launch
    done.record()
    # queued behind the floor spin, so the clock is still at the top when they start
    try:
        bufs = [stamps.stamp(int(TOP_SPIN_S * lim["max_mhz"] * 1e6)) for _ in range(TOP_SPINS)] if stamps else []
    except Exception:  # noqa: BLE001 - the diagnostic is optional: the clock term reads NVML
        bufs = []
    _t.sleep(spin_s / 3)  # let the clock and the power settle
    mhz, watts = [], []
    while not done.query():
        m, w, _r = sensors.read()
        mhz.append(m)
        watts.append(w)
        _t.sleep(0.01)
    torch.cuda.synchronize()
    from bsprof.analyzers.model.sustained import spin_counter_mhz

    top = [spin_counter_mhz(b.cpu().numpy()) for b in bufs]
    ok = lambda xs: [x for x in xs if x == x]  # noqa: E731
    floor = statistics.median(ok(watts)) if ok(watts) else 0.0
    # the rate the SM cycle counter ran at during the spin (cycles spun / elapsed time): whether the
    # clock NVML reports is the clock that turns a kernel's cycles into time
    spin_ms = start.elapsed_time(done)
    counted = per_launch * launches / (spin_ms * 1000.0) if spin_ms > 0 else None
    return {
        **lim,
        "floor_w": floor,
        "floor_mhz": statistics.median(ok(mhz)) if ok(mhz) else None,
        "floor_counter_mhz": counted,
        "top_counter_mhz": statistics.median([t for t in top if t]) if any(top) else None,
        "top_counter_spins": top,
        "idle_w": statistics.median(ok(idle)) if ok(idle) else None,
        "source": "NVML (floor: board power while one thread spins)",
    }


def run(
    target: Target,
    out_dir="bsprof-results",
    console=None,
    *,
    repeats: int = REPEATS,
    rounds: int = ROUNDS_PER_REPEAT,
    spin: dict | None = None,
) -> dict:
    """Measure, project, score ``target`` (the kernel and problem, resolved once by the caller: every
    build here is ``target.prepare`` with a timing or delay option, never the spec parsed again);
    returns the validation.json dict (also written under out_dir)."""
    import statistics

    from bsprof.analyzers.model import sustained as SU
    from bsprof.analyzers.model import validation as V
    from bsprof.analyzers.model.clock import limits_for
    from bsprof.analyzers.timing.io import write_table
    from bsprof.gpu import device_info
    from bsprof.io import atomic_path, results_dir
    from bsprof.profile import timing_capture as tc

    calibrate, project = V.model_api()
    info = device_info()
    family, kernel, mnkl = target.family, target.spec, target.mnkl
    module = target.module()
    block_k = int(getattr(getattr(module, "kernel", None), "BLOCK_K", 0) or 128)
    k_blocks = -(-mnkl[2] // block_k)
    shape = "x".join(map(str, mnkl[:3]))
    t0 = time.time()

    stamps = None
    if _has_gpu():
        try:
            from bsprof.kernels.clock_stamp import ClockStamps

            stamps = ClockStamps()
            stamps.check()
        except Exception as exc:  # noqa: BLE001 - no stamp kernel: NVML's clock readings only
            stamps = None
            _log(console, f"[yellow]SM clock stamps unavailable ({exc}); sustained clocks from NVML[/]")
    try:
        limits = device_limits(stamps=stamps) if _has_gpu() else None
    except Exception as exc:  # noqa: BLE001 - a driver without these NVML calls: no clock term
        _log(console, f"[yellow]device limits unreadable ({exc}); the clock term falls back to the data sheet[/]")
        limits = None
    if limits:
        _log(
            console,
            f"device: top SM clock {limits['max_mhz']:.0f} MHz, power limit {limits['power_limit_w']:.0f} W, "
            f"floor {limits['floor_w']:.0f} W at {limits['floor_mhz'] or 0:.0f} MHz (idle {limits['idle_w'] or 0:.0f} W); "
            f"SM counter during a stamp spin {limits.get('top_counter_mhz') or 0:.0f} MHz (diagnostic)",
        )
    if spin is None:
        spin = spin_calibration(console)

    _log(console, f"[dim]calibrating the model on the plain {kernel} timing build ({shape})...[/]")
    tables, cap_wall = {}, {}
    cap = tc.capture(target.prepare(timing=True))
    tables["plain"], cap_wall["plain"] = cap.table, cap.wall_us
    clocks = {"plain": V.capture_clock(cap.table)}
    del cap
    params = calibrate(tables["plain"])
    tile, deficit, binding = _baseline_numbers(params, project)
    _log(
        console,
        f"model: tile {tile:,.0f} cycles, binding {binding or '?'}, deficit {deficit:,.0f} cycles; "
        f"{k_blocks} K blocks per tile",
    )
    variants, seen = [], set()
    for v in plan_sweep(tile, deficit, binding, k_blocks, spin):
        if _key(v) not in seen:  # the spin's floor can map two small targets onto the same build
            seen.add(_key(v))
            variants.append(v)
    rev = reverse_sources(variants, deficit, binding)

    _log(console, f"[dim]building {len(variants) + 2} plain-code variants...[/]")
    launchers = {"plain": target.prepare(timing=False), "plain_b": target.prepare(timing=False)}
    for v in variants:
        launchers[_key(v)] = target.prepare(delay_kloop=v["delay_kloop"], delay_phase1=v["delay_phase1"])
    fwd, fwd_reads, timed_with = sustained_walls(launchers, list(launchers), repeats, rounds, stamps=stamps)
    retimed = {
        "forward": retime_held(launchers, list(launchers), fwd, fwd_reads, limits, repeats, rounds, stamps=stamps)
    }
    # the reverse points' own measurements: fresh repeats of the source builds and the plain build
    back_keys = ["plain"] + [_key(v) for v in rev]
    back, back_reads, _ = sustained_walls(launchers, back_keys, repeats, rounds, stamps=stamps)
    retimed["reverse"] = retime_held(
        launchers, back_keys, back, back_reads, limits, repeats, rounds, earlier={"forward": fwd_reads}, stamps=stamps
    )
    if any(retimed.values()):
        _log(
            console,
            f"re-timed blocks held below the power limit: {retimed['forward']} extra forward and "
            f"{retimed['reverse']} extra reverse repeat(s)",
        )
    clocks_sustained = sustained_summary(fwd_reads)
    clocks_back = sustained_summary(back_reads)
    clocks_pooled = SU.pooled_clocks(fwd_reads, back_reads)
    counter_ratio = SU.counter_vs_nvml(fwd_reads, back_reads)  # a recorded diagnostic, not a model input
    launchers.clear()

    measured_phases = {"plain": phase_means(tables["plain"])}
    for v in variants:
        cap = tc.capture(target.prepare(timing=True, delay_kloop=v["delay_kloop"], delay_phase1=v["delay_phase1"]))
        measured_phases[_key(v)] = phase_means(cap.table)
        clocks[_key(v)] = V.capture_clock(cap.table)
        if v in rev:
            tables[_key(v)], cap_wall[_key(v)] = cap.table, cap.wall_us
        del cap

    ref = reference_phases(measured_phases)
    mean = statistics.fmean
    points = [
        V.Point(
            "noise",
            "none",
            "plain",
            0,
            0,
            0.0,
            0.0,
            mean(fwd["plain"]),
            mean(fwd["plain_b"]),
            base_reps=fwd["plain"],
            meas_reps=fwd["plain_b"],
            oracle_kloop=0.0,
            oracle_phase1=0.0,
        )
    ]
    for v in variants:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        points.append(
            V.Point(
                "forward",
                v["knob"],
                "plain",
                v["delay_kloop"],
                v["delay_phase1"],
                v["delta_kloop"],
                v["delta_phase1"],
                mean(fwd["plain"]),
                mean(fwd[k]),
                base_reps=fwd["plain"],
                meas_reps=fwd[k],
                oracle_kloop=landed.get("d_mma_kloop", math.nan),
                oracle_phase1=landed.get("d_epilogue_phase1", math.nan),
                extra={
                    **landed,
                    **_clock_extras(clocks, "plain", k),
                    **_sustained(clocks_pooled, "plain", k),
                    **SU.sustained_cycles(fwd["plain"], fwd_reads.get("plain"), fwd[k], fwd_reads.get(k)),
                },
            )
        )
    for v in rev:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        points.append(
            V.Point(
                "reverse",
                v["knob"],
                k,
                0,
                0,
                -v["delta_kloop"],
                -v["delta_phase1"],
                mean(back[k]),
                mean(back["plain"]),
                base_reps=back[k],
                meas_reps=back["plain"],
                oracle_kloop=-landed.get("d_mma_kloop", math.nan),
                oracle_phase1=-landed.get("d_epilogue_phase1", math.nan),
                extra={
                    **{a: -b for a, b in landed.items()},
                    **_clock_extras(clocks, k, "plain"),
                    **_sustained(clocks_pooled, k, "plain"),
                    **SU.sustained_cycles(back[k], back_reads.get(k), back["plain"], back_reads.get("plain")),
                },
            )
        )
    V.evaluate(
        points,
        tables,
        calibrate=calibrate,
        project=project,
        capture_wall_us=cap_wall,
        limits=limits_for(info["name"], limits),
    )
    summ = V.summary(points)

    # every file lands in a hidden directory renamed into place whole: an interrupted run leaves none
    with results_dir(out_dir, f"validation_{target.label}_{time.strftime('%Y%m%d-%H%M%S')}") as staged:
        run_dir = staged.path
        frame = V.to_frame(points)
        with atomic_path(run_dir / "validation.csv") as tmp:
            frame.to_csv(tmp, index=False)
        tdir = run_dir / "tables"
        for key, tab in tables.items():
            write_table(tab, tdir, stem=key, csv=False)
        doc = {
            "bsprof": artifacts.tag("validation"),
            "family": family,
            "variant": kernel,
            "mnkl": list(mnkl),
            "device": info["name"],
            "capability": list(info["capability"]),
            "k_blocks": k_blocks,
            "model_baseline": {"tile_cycles": tile, "deficit": deficit, "binding": binding},
            "spin": spin,
            "repeats": repeats,
            "rounds_per_repeat": rounds,
            "wall_us_forward": fwd,
            "wall_us_reverse": back,
            "wall_timed_with": timed_with,
            "capture_wall_us": cap_wall,
            "measured_phase_means": measured_phases,
            "sustained_clocks": clocks_sustained,
            "sustained_clocks_reverse": clocks_back,
            "sustained_clocks_pooled": clocks_pooled,
            "counter_vs_nvml": counter_ratio,
            "sustained_blocks": {"forward": fwd_reads, "reverse": back_reads},
            "retimed_repeats": retimed,
            "wall_protocol": {
                "settle_s": SETTLE_S,
                "block_s": BLOCK_S,
                "graph_launches": GRAPH_LAUNCHES,
                "order": "shuffled",
                "order_seed": ORDER_SEED,
                "retime_max": RETIME_MAX,
            },
            "device_limits": limits,
            "points": frame.to_dict("records"),
            "summary": summ,
            "files": {"table": "validation.csv", "calibration_tables": {k: f"tables/{k}.parquet" for k in tables}},
            "elapsed_s": time.time() - t0,
        }
        doc["summary"]["held"] = SU.held_summary(doc, limits_for(info["name"], limits))
        if counter_ratio:
            doc["summary"]["counter_vs_nvml"] = SU.counter_summary(counter_ratio, limits)
        artifacts.save(run_dir / "validation.json", _clean(doc))
    run_dir = staged.path
    doc["run_dir"] = str(run_dir)
    doc["scored"] = points  # the Point objects, for the verb to render
    doc["title"] = f"{kernel} {shape} on {info['name']}"
    return doc


def _sustained(clocks: dict, base: str, meas: str) -> dict:
    """The two builds' sustained SM clocks (MHz), when NVML read them."""
    b, m = clocks.get(base) or {}, clocks.get(meas) or {}
    if b.get("mhz") and m.get("mhz"):
        return {"mhz_base": b["mhz"], "mhz_meas": m["mhz"], "watts_base": b.get("watts"), "watts_meas": m.get("watts")}
    return {}


def _clock_extras(clocks: dict, base: str, meas: str) -> dict:
    """Cycle makespans and clocks of the two builds' captures (the cycle-domain check)."""
    (cb, gb), (cm, gm) = clocks[base], clocks[meas]
    return {"cycles_base": cb, "cycles_meas": cm, "ghz_base": gb, "ghz_meas": gm}


def reference_phases(measured: dict) -> dict:
    """Undelayed per-tile phase means: each delayed phase (K-loop, Phase 1) averaged over every
    capture whose build does not delay it (the plain build and the builds that delay only the
    other phase); the rest from the plain capture. Captures run minutes apart at whatever clock
    the GPU is at, and memory-bound parts of a phase cost a different number of cycles at another
    clock: one plain capture as the zero point puts its drift into every delta."""
    import statistics

    ref = dict(measured["plain"])
    for phase, knob in (("mma.kloop", "kloop"), ("epilogue.phase1", "phase1")):
        vals = [m[phase] for key, m in measured.items() if phase in m and _undelayed(key, knob)]
        if vals:
            ref[phase] = statistics.fmean(vals)
    return ref


def _undelayed(key: str, knob: str) -> bool:
    """Does build ``key`` ("plain" or "kloop{d}_phase1{d}") leave ``knob`` undelayed?"""
    if key == "plain":
        return True
    dk, dp = key[len("kloop") :].split("_phase1")
    return int(dk) == 0 if knob == "kloop" else int(dp) == 0


def _landed(before: dict, after: dict) -> dict:
    """Measured per-tile change of the phases the delays target (mean over warps and tiles)."""
    out = {}
    for key in ("mma.kloop", "mma.tma0", "epilogue.phase1", "epilogue.phase2", "producer.load"):
        if key in before and key in after:
            out[f"d_{key.replace('.', '_')}"] = after[key] - before[key]
    return out


def _clean(o):
    """Strict JSON: NaN / inf become null (a point the model could not score)."""
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def rescore(run_dir) -> dict:
    """Re-run the arithmetic of a validation directory on this machine (no GPU)."""
    import pandas as pd

    from bsprof.analyzers.model import sustained as SU
    from bsprof.analyzers.model import validation as V
    from bsprof.analyzers.model.clock import limits_for
    from bsprof.analyzers.timing.io import read_table

    run_dir = Path(run_dir)
    csv = run_dir / "validation.csv"
    if not csv.is_file():
        raise BsprofError(f"{run_dir} has no validation.csv; give a directory written by `bsprof model --validate`")
    points = V.from_frame(pd.read_csv(csv))
    tables = {}
    for key in {p.calib for p in points}:
        path = run_dir / "tables" / f"{key}.parquet"
        if not path.is_file():
            raise BsprofError(f"{run_dir} lacks tables/{key}.parquet, the timing the model calibrates on")
        tables[key] = read_table(path)
    doc = _read_json(run_dir / "validation.json")
    walls = doc.get("capture_wall_us") or None
    if walls:  # the capture walls are on record: the busy share is recomputed by this code
        for p in points:
            p.busy = math.nan
    lim = limits_for(doc.get("device"), doc.get("device_limits"))
    blocks = doc.get("sustained_blocks") or {}
    if blocks:  # the clock term's inputs from the blocks: NVML's, whichever clock the run scored with
        pooled = SU.pooled_clocks(blocks.get("forward"), blocks.get("reverse"))
        for p in points:
            _, base, meas = SU.point_builds(p)
            p.extra.update(_sustained(pooled, base, meas))
    V.evaluate(points, tables, capture_wall_us=walls, limits=lim)
    summ = V.summary(points)
    if doc.get("sustained_blocks"):
        summ["held"] = SU.held_summary({**doc, "points": V.to_frame(points).to_dict("records")}, lim)
    return {"points": points, "summary": summ}


def _read_json(path: Path) -> dict:
    from bsprof.artifacts import read_json

    try:
        doc = read_json(path)  # bounded: size, depth, regular file
    except BsprofError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
