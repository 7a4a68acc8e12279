"""`bsprof model --validate`: the model's projections against delay-injected builds on the GPU.

1. Spin calibration: what a compile-time ``clock64`` spin of d cycles really costs (the probe
   kernel records around spins of several d; cost = slope * d + intercept).
2. Calibrate the model on the plain kernel's timing build; read its tile period and deficit.
3. Build delay-injected variants (K-loop per K block, epilogue Phase 1 per tile, both) whose
   injected cost per tile runs from ~1% of the tile to well past the deficit, so the binding side
   flips inside the sweep when the model says there is a slack to use up.
4. Median wall time of every plain-code variant, interleaved round by round in this process.
5. Forward points: model(plain table, +delta) vs t(delayed)/t(plain). Reverse points: model
   calibrated on the biggest delayed builds' timing, asked for -delta, vs t(plain)/t(delayed).

Writes validation.csv and validation.json (kind "validation") plus the calibration timing tables
(so ``bsprof.analyzers.validation.evaluate`` can re-score the same measurements on a CPU).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from bsprof.errors import BsprofError

KLOOP_FRACTIONS = (0.01, 0.03, 0.06, 0.12, 0.25)
PHASE1_FRACTIONS = (0.01, 0.03, 0.06, 0.12, 0.25)
BOTH_FRACTIONS = ((0.03, 0.03), (0.06, 0.03), (0.12, 0.06))
DEFICIT_MULTIPLES = (0.5, 0.9, 1.3, 2.0, 4.0)
SPIN_PROBE_DELAYS = (0, 64, 256, 1024, 4096)


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
    """The delayed builds: ``{knob, delay_kloop, delay_phase1, delta_kloop, delta_phase1}``.

    Deltas are fractions of the tile period; when the model reports a deficit, the side that is
    NOT binding gets deltas at multiples of it, so the sweep crosses the flip."""
    if tile <= 0:
        raise BsprofError("the calibrated model reports no tile period; cannot size the validation sweep")
    k_targets = [f * tile for f in KLOOP_FRACTIONS]
    p_targets = [f * tile for f in PHASE1_FRACTIONS]
    if deficit > 0 and binding:
        flip = [m * deficit for m in DEFICIT_MULTIPLES]
        if binding == "epilogue":   # the MMA side has the slack: slow the K-loop past it
            k_targets = flip
        else:
            p_targets = flip
    out = []
    for t in k_targets:
        d, cost = _delay_for(t / k_blocks, spin)
        out.append({"knob": "kloop", "delay_kloop": d, "delay_phase1": 0,
                    "delta_kloop": cost * k_blocks, "delta_phase1": 0.0})
    for t in p_targets:
        d, cost = _delay_for(t, spin)
        out.append({"knob": "phase1", "delay_kloop": 0, "delay_phase1": d,
                    "delta_kloop": 0.0, "delta_phase1": cost})
    for fk, fp in BOTH_FRACTIONS:
        dk, ck = _delay_for(fk * tile / k_blocks, spin)
        dp, cp = _delay_for(fp * tile, spin)
        out.append({"knob": "both", "delay_kloop": dk, "delay_phase1": dp,
                    "delta_kloop": ck * k_blocks, "delta_phase1": cp})
    return out


def _key(v: dict) -> str:
    if v["delay_kloop"] == 0 and v["delay_phase1"] == 0:
        return "plain"
    return f"kloop{v['delay_kloop']}_phase1{v['delay_phase1']}"


def _phase_means(table) -> dict:
    g = (table["end"] - table["start"]).groupby([table["role"], table["phase"]]).mean()
    return {f"{r}.{p}": float(v) for (r, p), v in g.items()}


def run(kernel: str = "optimized", family: str = "auto", mnkl=None, out_dir="bsprof-results", console=None,
        *, rounds: int = 60, inner: int = 10, spin: dict | None = None) -> dict:
    """Measure, project, score; returns the validation.json dict (also written under out_dir)."""
    from bsprof.analyzers import validation as V
    from bsprof.analyzers.timing.io import write_table
    from bsprof.io import unique_dir, write_text_atomic
    from bsprof.kernels.api import family_for_capability, family_module, parse_kernel_spec, parse_mnkl, spec_label
    from bsprof.profile import timing_capture as tc
    from bsprof.gpu import device_info

    try:
        calibrate, project = V.model_api()
    except BsprofError as exc:  # measure anyway: `rescore` scores the same measurements later
        calibrate = project = None
        _log(console, f"[yellow]{exc}: measuring only; score later with validate.rescore(DIR)[/]")
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
    base_timed = tc.prepare(family, kernel, mnkl, timing=True)
    cap = tc.capture(base_timed)
    tables["plain"], cap_wall["plain"] = cap.table, cap.wall_us
    clocks = {"plain": V.capture_clock(cap.table)}
    del base_timed, cap
    if calibrate is not None:
        params = calibrate(tables["plain"])
        tile, deficit, binding = _baseline_numbers(params, project)
    else:
        from bsprof.analyzers.timing.stats import measured_tile_period

        tile, deficit, binding = measured_tile_period(tables["plain"]), 0.0, ""
    _log(console, f"model: tile {tile:,.0f} cycles, binding {binding or '?'}, deficit {deficit:,.0f} cycles; "
                  f"{k_blocks} K blocks per tile")
    variants = plan_sweep(tile, deficit, binding, k_blocks, spin)
    seen, uniq = set(), []
    for v in variants:  # the spin's floor can map two small targets onto the same build
        if _key(v) not in seen:
            seen.add(_key(v))
            uniq.append(v)
    variants = uniq

    _log(console, f"[dim]building {len(variants) + 1} plain-code variants...[/]")
    launchers = {"plain": tc.prepare(family, kernel, mnkl, timing=False)}
    for v in variants:
        launchers[_key(v)] = tc.prepare(family, kernel, mnkl, delay_kloop=v["delay_kloop"],
                                        delay_phase1=v["delay_phase1"])
    med, timed_with = tc.median_us_graphs(launchers, rounds=rounds, launches=inner)
    launchers.clear()

    # what each delayed build's own timing says (diagnostics: did the injected cost land where
    # it was put, or was it absorbed by waits?) and the reverse-direction calibrations
    reverse_src = [max((v for v in variants if v["knob"] == k), key=lambda v: v["delta_kloop"] + v["delta_phase1"])
                   for k in ("kloop", "phase1", "both")]
    measured_phases = {"plain": _phase_means(tables["plain"])}
    # Every delayed build's own timing: the model's input is the change the delay made to the
    # phase it sits in (a spin inside the K-loop also holds back the next wgmma issue, so its
    # in-situ cost is not the probe's spin cost), and the reverse points calibrate on it.
    for v in variants:
        p = tc.prepare(family, kernel, mnkl, timing=True, delay_kloop=v["delay_kloop"],
                       delay_phase1=v["delay_phase1"])
        cap = tc.capture(p)
        del p
        measured_phases[_key(v)] = _phase_means(cap.table)
        clocks[_key(v)] = V.capture_clock(cap.table)
        if v in reverse_src:
            tables[_key(v)], cap_wall[_key(v)] = cap.table, cap.wall_us

    points = []
    ref = reference_phases(measured_phases)
    for v in variants:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        dk, dp = _model_deltas(v, landed)
        points.append(V.Point("forward", v["knob"], "plain", v["delay_kloop"], v["delay_phase1"], dk, dp,
                              med["plain"], med[k], extra={**landed, "inj_kloop": v["delta_kloop"],
                                                           "inj_phase1": v["delta_phase1"],
                                                           **_clock_extras(clocks, "plain", k)}))
    for v in reverse_src:
        k = _key(v)
        landed = _landed(ref, measured_phases[k])
        dk, dp = _model_deltas(v, landed)
        points.append(V.Point("reverse", v["knob"], k, 0, 0, -dk, -dp, med[k], med["plain"],
                              extra={**{a: -b for a, b in landed.items()}, "inj_kloop": -v["delta_kloop"],
                                     "inj_phase1": -v["delta_phase1"], **_clock_extras(clocks, k, "plain")}))
    if calibrate is not None:
        V.evaluate(points, tables, calibrate=calibrate, project=project, capture_wall_us=cap_wall)
    else:
        for p in points:
            p.measured_ratio = p.meas_us / p.base_us
    summ = V.summary(points)

    run_dir = unique_dir(out_dir, f"validation_{family}_{spec_label(kernel)}_{shape}_{time.strftime('%Y%m%d-%H%M%S')}")
    frame = V.to_frame(points)
    from bsprof.io import atomic_path

    with atomic_path(run_dir / "validation.csv") as tmp:
        frame.to_csv(tmp, index=False)
    tdir = run_dir / "tables"
    for key, tab in tables.items():
        write_table(tab, tdir, stem=key, csv=False)
    doc = {
        "bsprof": {"kind": "validation", "version": 1},
        "family": family, "variant": kernel, "mnkl": list(mnkl), "device": info["name"],
        "capability": list(info["capability"]), "k_blocks": k_blocks,
        "model_baseline": {"tile_cycles": tile, "deficit": deficit, "binding": binding},
        "spin": spin, "rounds": rounds, "inner": inner,
        "wall_us": med, "wall_timed_with": timed_with, "capture_wall_us": cap_wall, "measured_phase_means": measured_phases,
        "points": frame.to_dict("records"), "summary": summ,
        "files": {"table": "validation.csv", "calibration_tables": {k: f"tables/{k}.parquet" for k in tables}},
        "elapsed_s": time.time() - t0,
    }
    write_text_atomic(run_dir / "validation.json", json.dumps(_clean(doc), indent=2, default=_jd) + "\n")
    doc["run_dir"] = str(run_dir)
    if console is not None:
        print_table(points, summ, console)
        console.print(f"wrote {run_dir}/ (validation.csv, validation.json, tables/)")
    return doc


def _clock_extras(clocks: dict, base: str, meas: str) -> dict:
    """Cycle makespans and clocks of the two builds' captures (the cycle-domain check)."""
    (cb, gb), (cm, gm) = clocks[base], clocks[meas]
    return {"cycles_base": cb, "cycles_meas": cm, "ghz_base": gb, "ghz_meas": gm}


def _model_deltas(v: dict, landed: dict) -> tuple[float, float]:
    """Model input of a delayed build: the measured change of the phase each delay sits in (the
    other phases' responses are the model's to predict); the injected estimate where unmeasured."""
    dk = landed.get("d_mma_kloop", v["delta_kloop"]) if v["delay_kloop"] else 0.0
    dp = landed.get("d_epilogue_phase1", v["delta_phase1"]) if v["delay_phase1"] else 0.0
    return float(dk), float(dp)


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


def _jd(o):
    import numpy as np

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)


def print_table(points, summ: dict, console) -> None:
    from rich.table import Table

    t = Table(title="model validation: projected vs measured wall-time ratio", title_justify="left")
    for c in ("dir", "knob", "Δkloop/tile", "Δphase1/tile", "measured", "det", "stoch", "err det", "err stoch",
              "raw err det", "busy", "binding"):
        t.add_column(c, justify="left" if c in ("dir", "knob", "binding") else "right")
    for p in points:
        t.add_row(p.direction, p.knob, f"{p.delta_kloop:+,.0f}", f"{p.delta_phase1:+,.0f}",
                  f"{p.measured_ratio:.4f}", f"{p.projected_wall_det:.4f}", f"{p.projected_wall_sto:.4f}",
                  f"{p.err_det_pct:+.2f}%", f"{p.err_sto_pct:+.2f}%", f"{p.err_raw_det_pct:+.2f}%",
                  f"{p.busy:.3f}", f"{p.binding_before}→{p.binding_after}" if p.binding_before else "")
    console.print(t)
    console.print("det / stoch: the model's period ratio mapped to wall time through the calibration "
                  "build's busy share; raw: the bare period ratio")
    for key, name in (("det", "deterministic"), ("sto", "stochastic"), ("raw_det", "raw deterministic")):
        s = summ.get(key, {})
        if s.get("median_abs_pct") is None:
            continue
        verdict = "meets" if s["pass"] else "misses"
        console.print(f"{name}: median |error| {s['median_abs_pct']:.2f}%, max {s['max_abs_pct']:.2f}% over "
                      f"{summ['n']} points ({verdict} the target: median <= 2%, max <= 5%, >= 12 points)")
    c = summ.get("cycles")
    if c:
        console.print(f"in cycles (deterministic vs the captures' busiest-CTA makespans): median |error| "
                      f"{c['median_abs_pct']:.2f}%, max {c['max_abs_pct']:.2f}% over {c['n']} points; the builds ran "
                      f"at {c['ghz_min']:.2f}-{c['ghz_max']:.2f} GHz")
        if c["ghz_max"] > 1.03 * c["ghz_min"]:
            console.print("[yellow]the SM clock moved with the injected delays (a power-limited GPU clocks up when "
                          "a build draws less): wall-time errors include that; the cycle errors are the model's own[/]")


def rescore(run_dir, console=None) -> dict:
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
    summ = V.summary(points)
    if console is not None:
        print_table(points, summ, console)
    return {"points": points, "summary": summ}
