"""`bsprof model --validate`: the model's projections against delay-injected builds on the GPU.

1. Spin calibration: what a compile-time ``clock64`` spin of d cycles costs (the probe kernel
   records around spins of several d; cost = slope * d + intercept). Cost x units = the nominal
   change of a delayed build, the only size of the change the projections are given.
2. Calibrate the model on the plain build's timing capture; read its tile period, binding side and
   deficit (the slack of the side that does not bind).
3. Build delay-injected variants (K-loop per K block, epilogue Phase 1 per tile, both). The side
   that does not bind gets deltas at multiples of the deficit, from well below to well past it, so
   the binding side flips inside the sweep and the equilibrium and the trivial predictor differ.
4. Wall times: ``repeats`` interleaved repeats over every plain-code build (one median per build
   per repeat), plus a second plain build as the null point (its ratio to the first is the noise
   floor). The reverse points (delayed build -> plain) get their own, fresh repeats.
5. Every delayed build's timing capture: the measured change of each phase (the oracle's input)
   and, for the reverse points' source builds, the table the model calibrates on.

Writes validation.csv and validation.json (kind "validation") plus the calibration timing tables
(so ``bsprof.analyzers.validation.evaluate`` can re-score the same measurements on a CPU).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from bsprof import artifacts
from bsprof.errors import BsprofError

KLOOP_FRACTIONS = (0.15, 0.3)            # of the tile period, where the K-loop binds
KLOOP_MIN_DELAY = 250                    # per K block: below ~250 the spin costs the K-loop more than
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

    from bsprof.analyzers.timing.buffer import decode_buffer
    from bsprof.analyzers.validation import spin_cost_fit
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
    _log(console, f"spin calibration: spin(d) costs {slope:.3f}*d + {icpt:.1f} cycles "
                  f"(record-to-record floor {base:.0f})")
    return {"samples": {str(k): v for k, v in per_d.items()}, "slope": slope, "intercept": icpt,
            "record_floor": base}


def _delay_for(delta_per_unit: float, spin: dict) -> tuple[int, float]:
    """Device knob d for a wanted per-unit cost, and the cost it really injects."""
    raw = (delta_per_unit - spin["intercept"]) / spin["slope"]
    # two significant digits: shapes with similar per-unit targets share compiled builds
    d = int(float(f"{raw:.2g}")) if raw >= 1 else 1
    return d, spin["slope"] * d + spin["intercept"]


def _baseline_numbers(params, project) -> tuple[float, float, str]:
    """(tile cycles, deficit, binding side) of the calibrated model; deficit 0 when unknown."""
    from bsprof.analyzers.validation import _as_json, _get

    pj = _as_json(project(params, {}))
    det = pj.get("deterministic", {})
    tile = float(det.get("baseline_tile_cycles") or det.get("projected_tile_cycles") or 0.0)
    deficit = _get(det, "deficit", default=None)
    if deficit is None:
        deficit = _get(pj, "baseline", "deficit", default=0.0)
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
        if binding == "epilogue":   # the MMA side has the slack: slow the K-loop past it
            k_targets = flip
        else:
            p_targets = flip
            both = [(KLOOP_FRACTIONS[0] * tile, 0.6 * deficit), (KLOOP_FRACTIONS[0] * tile, 1.4 * deficit)]
    out = []
    kloop_on_slack = deficit > 0 and binding == "epilogue"   # multiples of the deficit: keep them small

    def kl(target: float) -> tuple[int, float]:
        d, cost = _delay_for(target / k_blocks, spin)
        if d < KLOOP_MIN_DELAY and not kloop_on_slack:
            d = KLOOP_MIN_DELAY
            cost = spin["slope"] * d + spin["intercept"]
        return d, cost * k_blocks

    for t in k_targets:
        d, cost = kl(t)
        out.append({"knob": "kloop", "delay_kloop": d, "delay_phase1": 0, "delta_kloop": cost, "delta_phase1": 0.0})
    for t in p_targets:
        d, cost = _delay_for(t, spin)
        out.append({"knob": "phase1", "delay_kloop": 0, "delay_phase1": d, "delta_kloop": 0.0, "delta_phase1": cost})
    for tk, tp in both:
        dk, ck = kl(tk)
        dp, cp = _delay_for(tp, spin)
        out.append({"knob": "both", "delay_kloop": dk, "delay_phase1": dp, "delta_kloop": ck, "delta_phase1": cp})
    return out


def reverse_sources(variants: list[dict], deficit: float, binding: str) -> list[dict]:
    """Builds the reverse points start from: the largest of each knob, and every build whose
    change of the non-binding side passed the deficit (its reverse point flips back)."""
    src = [max((v for v in variants if v["knob"] == k), key=lambda v: v["delta_kloop"] + v["delta_phase1"])
           for k in ("kloop", "phase1", "both") if any(v["knob"] == k for v in variants)]
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


def _phase_means(table) -> dict:
    g = (table["end"] - table["start"]).groupby([table["role"], table["phase"]]).mean()
    return {f"{r}.{p}": float(v) for (r, p), v in g.items()}


def wall_repeats(launchers: dict, keys: list[str], repeats: int, rounds: int) -> tuple[dict[str, list[float]], str]:
    """``repeats`` independent medians (µs) of each build in ``keys``: each repeat interleaves the
    builds round by round (``median_us_graphs``), so drift hits them alike within a repeat."""
    from bsprof.profile import timing_capture as tc

    reps: dict[str, list[float]] = {k: [] for k in keys}
    how = ""
    for _ in range(repeats):
        med, how = tc.median_us_graphs({k: launchers[k] for k in keys}, rounds=rounds, launches=10)
        for k in keys:
            reps[k].append(float(med[k]))
    return reps, how


def sustained_clocks(launchers: dict, us: dict, seconds: float = 0.4) -> dict[str, dict]:
    """Each build's SM clock and board power under sustained back-to-back launches (NVML, polled
    while ~``seconds`` of queued graph replays drain; the second half of the readings). The wall
    repeats interleave builds every few ms, too fast to read a clock per build; this tells whether
    a delayed build runs at another clock than the plain one (a power-capped GPU clocks up when a
    build draws less)."""
    import statistics
    import time as _t

    import torch

    from bsprof.profile import timing_capture as tc
    from bsprof.profile.sensors import torch_device_sensors

    if not torch.cuda.is_available():
        return {}
    sensors = torch_device_sensors()
    if sensors is None:
        return {}
    out: dict[str, dict] = {}
    for key, prep in launchers.items():
        replay = tc.graph_launcher(prep, 10)
        if replay is None:
            continue
        n = max(5, int(seconds * 1e6 / max(1.0, 10 * us.get(key, 100.0))))
        done = torch.cuda.Event()
        for _ in range(n):
            replay()
        done.record()
        mhz, watts = [], []
        while not done.query():
            m, w, _r = sensors.read()
            mhz.append(m)
            watts.append(w)
            _t.sleep(0.01)
        torch.cuda.synchronize()
        half = len(mhz) // 2
        good = lambda xs: [x for x in xs[half:] if x == x]  # noqa: E731
        out[key] = {"mhz": statistics.median(good(mhz)) if good(mhz) else None,
                    "watts": statistics.median(good(watts)) if good(watts) else None, "readings": len(mhz)}
    return out


def run(kernel: str = "optimized", family: str = "auto", mnkl=None, out_dir="bsprof-results", console=None,
        *, repeats: int = REPEATS, rounds: int = ROUNDS_PER_REPEAT, spin: dict | None = None) -> dict:
    """Measure, project, score; returns the validation.json dict (also written under out_dir)."""
    import statistics

    from bsprof.analyzers import validation as V
    from bsprof.analyzers.timing.io import write_table
    from bsprof.io import atomic_path, unique_dir
    from bsprof.kernels.api import family_for_capability, family_module, parse_kernel_spec, parse_mnkl, spec_label
    from bsprof.profile import timing_capture as tc
    from bsprof.gpu import device_info

    if repeats < 5:
        raise BsprofError(f"--repeats {repeats}: a point needs at least 5 repeats for its confidence interval")
    calibrate, project = V.model_api()
    info = device_info()
    if family in (None, "auto"):
        family = family_for_capability(info["capability"])
    module = family_module(family)
    parse_kernel_spec(kernel, family)
    if isinstance(mnkl, str):
        mnkl = parse_mnkl(mnkl)
    mnkl = tuple(mnkl) if mnkl else tuple(getattr(module, "DEFAULT_MNKL", (4096, 4096, 4096, 1)))
    block_k = int(getattr(getattr(module, "kernel", None), "BLOCK_K", 0) or 128)
    k_blocks = -(-mnkl[2] // block_k)
    shape = "x".join(map(str, mnkl[:3]))
    t0 = time.time()

    if spin is None:
        spin = spin_calibration(console)

    _log(console, f"[dim]calibrating the model on the plain {kernel} timing build ({shape})...[/]")
    tables, cap_wall = {}, {}
    cap = tc.capture(tc.prepare(family, kernel, mnkl, timing=True))
    tables["plain"], cap_wall["plain"] = cap.table, cap.wall_us
    clocks = {"plain": V.capture_clock(cap.table)}
    del cap
    params = calibrate(tables["plain"])
    tile, deficit, binding = _baseline_numbers(params, project)
    _log(console, f"model: tile {tile:,.0f} cycles, binding {binding or '?'}, deficit {deficit:,.0f} cycles; "
                  f"{k_blocks} K blocks per tile")
    variants, seen = [], set()
    for v in plan_sweep(tile, deficit, binding, k_blocks, spin):
        if _key(v) not in seen:   # the spin's floor can map two small targets onto the same build
            seen.add(_key(v))
            variants.append(v)
    rev = reverse_sources(variants, deficit, binding)

    _log(console, f"[dim]building {len(variants) + 2} plain-code variants...[/]")
    launchers = {"plain": tc.prepare(family, kernel, mnkl, timing=False),
                 "plain_b": tc.prepare(family, kernel, mnkl, timing=False)}
    for v in variants:
        launchers[_key(v)] = tc.prepare(family, kernel, mnkl, delay_kloop=v["delay_kloop"],
                                        delay_phase1=v["delay_phase1"])
    fwd, timed_with = wall_repeats(launchers, list(launchers), repeats, rounds)
    # the reverse points' own measurements: fresh repeats of the source builds and the plain build
    back, _ = wall_repeats(launchers, ["plain"] + [_key(v) for v in rev], repeats, rounds)
    clocks_sustained = sustained_clocks(launchers, {k: statistics.fmean(v) for k, v in fwd.items()})
    launchers.clear()

    measured_phases = {"plain": _phase_means(tables["plain"])}
    for v in variants:
        cap = tc.capture(tc.prepare(family, kernel, mnkl, timing=True, delay_kloop=v["delay_kloop"],
                                    delay_phase1=v["delay_phase1"]))
        measured_phases[_key(v)] = _phase_means(cap.table)
        clocks[_key(v)] = V.capture_clock(cap.table)
        if v in rev:
            tables[_key(v)], cap_wall[_key(v)] = cap.table, cap.wall_us
        del cap

    ref = reference_phases(measured_phases)
    mean = statistics.fmean
    points = [V.Point("noise", "none", "plain", 0, 0, 0.0, 0.0, mean(fwd["plain"]), mean(fwd["plain_b"]),
                      base_reps=fwd["plain"], meas_reps=fwd["plain_b"], oracle_kloop=0.0, oracle_phase1=0.0)]
    for v in variants:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        points.append(V.Point("forward", v["knob"], "plain", v["delay_kloop"], v["delay_phase1"],
                              v["delta_kloop"], v["delta_phase1"], mean(fwd["plain"]), mean(fwd[k]),
                              base_reps=fwd["plain"], meas_reps=fwd[k],
                              oracle_kloop=landed.get("d_mma_kloop", math.nan),
                              oracle_phase1=landed.get("d_epilogue_phase1", math.nan),
                              extra={**landed, **_clock_extras(clocks, "plain", k),
                                     **_sustained(clocks_sustained, "plain", k)}))
    for v in rev:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        points.append(V.Point("reverse", v["knob"], k, 0, 0, -v["delta_kloop"], -v["delta_phase1"],
                              mean(back[k]), mean(back["plain"]), base_reps=back[k], meas_reps=back["plain"],
                              oracle_kloop=-landed.get("d_mma_kloop", math.nan),
                              oracle_phase1=-landed.get("d_epilogue_phase1", math.nan),
                              extra={**{a: -b for a, b in landed.items()}, **_clock_extras(clocks, k, "plain"),
                                     **_sustained(clocks_sustained, k, "plain")}))
    V.evaluate(points, tables, calibrate=calibrate, project=project, capture_wall_us=cap_wall)
    summ = V.summary(points)

    run_dir = unique_dir(out_dir, f"validation_{family}_{spec_label(kernel)}_{shape}_{time.strftime('%Y%m%d-%H%M%S')}")
    frame = V.to_frame(points)
    with atomic_path(run_dir / "validation.csv") as tmp:
        frame.to_csv(tmp, index=False)
    tdir = run_dir / "tables"
    for key, tab in tables.items():
        write_table(tab, tdir, stem=key, csv=False)
    doc = {
        "bsprof": artifacts.tag("validation"),
        "family": family, "variant": kernel, "mnkl": list(mnkl), "device": info["name"],
        "capability": list(info["capability"]), "k_blocks": k_blocks,
        "model_baseline": {"tile_cycles": tile, "deficit": deficit, "binding": binding},
        "spin": spin, "repeats": repeats, "rounds_per_repeat": rounds,
        "wall_us_forward": fwd, "wall_us_reverse": back, "wall_timed_with": timed_with,
        "capture_wall_us": cap_wall, "measured_phase_means": measured_phases,
        "sustained_clocks": clocks_sustained,
        "points": frame.to_dict("records"), "summary": summ,
        "files": {"table": "validation.csv", "calibration_tables": {k: f"tables/{k}.parquet" for k in tables}},
        "elapsed_s": time.time() - t0,
    }
    artifacts.save(run_dir / "validation.json", _clean(doc))
    doc["run_dir"] = str(run_dir)
    doc["scored"] = points          # the Point objects, for the verb to render
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
    dk, dp = key[len("kloop"):].split("_phase1")
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

    from bsprof.analyzers import validation as V
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
    V.evaluate(points, tables)
    return {"points": points, "summary": V.summary(points)}
