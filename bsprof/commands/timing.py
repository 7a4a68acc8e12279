"""`bsprof timing`: per-warp, per-tile phase timing of a bundled kernel, captured on the GPU."""

from __future__ import annotations

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import VARIANTS


@click.command(name="timing")
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option("--kernel", "variant", default="optimized", show_default=True,
              help=f"{' | '.join(VARIANTS)}; on fp8-blockwise optionally with switches, e.g. optimized:epi_split=0")
@click.option("--mnkl", default=None, help="M,N,K[,L]; default: the family's default problem")
@click.option("-o", "--output", "out", default="bsprof-results", show_default=True,
              help="parent directory; each capture gets a fresh sub-directory")
@click.option("--overhead", type=click.Choice(["shape", "all", "none"]), default="shape", show_default=True,
              help="plain vs timing build wall time: on the captured shape, on the three benchmark shapes, or skip")
@click.option("--rounds", type=int, default=30, show_default=True, help="timing rounds for the overhead medians")
@click.option("--max-trace-events", type=int, default=200_000, show_default=True,
              help="cap on trace.json slices; whole tiles are sampled beyond it")
@click.option("--from", "from_dir", default=None, type=click.Path(),
              help="re-summarize an earlier capture (a timing table or results dir) without a GPU")
@click.option("--json", "as_json", is_flag=True, help="print the artifact as JSON")
def command(family, variant, mnkl, out, overhead, rounds, max_trace_events, from_dir, as_json) -> None:
    """Capture per-warp phase timing (producer / mma / epilogue) of a bundled kernel's timing build.

    Writes timing.parquet, timing.csv, trace.json (ui.perfetto.dev) and timing.json into a fresh
    directory under -o, and prints per-phase statistics, the epilogue-warp spread, tiles per SM,
    the SM clock measured during the run, and the timing build's overhead.
    """
    import json

    from rich.console import Console

    console = Console(stderr=as_json)
    if rounds < 3 or max_trace_events < 100:
        raise BsprofError("--rounds must be >= 3 and --max-trace-events >= 100")
    if from_dir is not None:
        from bsprof.analyzers.timing.buffer import check_table
        from bsprof.analyzers.timing.io import read_table
        from bsprof.analyzers.timing.stats import summarize

        table = read_table(from_dir)
        check_table(table)
        doc = {"stats": summarize(table).to_json(), "overhead": []}
        _print(console, doc, None)
        if as_json:
            click.echo(json.dumps(doc, indent=2, default=str))
        return

    from bsprof.kernels.api import parse_kernel_spec

    parse_kernel_spec(variant, None if family == "auto" else family)   # a bad spec before any GPU work
    doc, run_dir = run_capture(family, variant, mnkl, out, overhead=overhead, rounds=rounds,
                               max_trace_events=max_trace_events, console=console)
    _print(console, doc, run_dir)
    if as_json:
        click.echo(json.dumps(doc, indent=2, default=str))


def run_capture(family, variant, mnkl, out, *, overhead="shape", rounds=30, max_trace_events=200_000,
                console=None):
    """Capture + overhead + artifacts; returns (timing.json dict, results dir)."""
    import time

    from bsprof.analyzers.timing.io import write_timing_run
    from bsprof.io import unique_dir
    from bsprof.kernels.api import family_for_capability, family_module, parse_mnkl, spec_label
    from bsprof.profile import timing_capture as tc
    from bsprof.gpu import device_info

    info = device_info()
    if family == "auto":
        family = family_for_capability(info["capability"])
    module = family_module(family)
    want = getattr(module, "ARCH", None)
    have = "sm_%d%d" % info["capability"]
    if want and not want.startswith(have[:5]):
        raise BsprofError(f"the {family} kernels need {want}; this {info['name']} is {have} "
                          f"(use --family {family_for_capability(info['capability'])})")
    mnkl_t = parse_mnkl(mnkl) if mnkl else tuple(getattr(module, "DEFAULT_MNKL", (4096, 4096, 4096, 1)))
    log = (lambda msg: console.print(msg)) if console else (lambda msg: None)

    log(f"[dim]building {family} {variant} timing build for {'x'.join(map(str, mnkl_t))}...[/]")
    timed = tc.prepare(family, variant, mnkl_t, timing=True)
    cap = tc.capture(timed)
    shapes = {"shape": [mnkl_t], "all": list(tc.BENCH_SHAPES), "none": []}[overhead]
    ovh = []
    if shapes:
        del timed  # free its inputs before building the overhead pairs
        log(f"[dim]overhead: plain vs timing build on {len(shapes)} shape(s), {rounds} rounds each...[/]")
        ovh = tc.overhead(family, variant, shapes, rounds=rounds)
    stem = f"timing_{family}_{spec_label(variant)}_{'x'.join(map(str, mnkl_t[:3]))}_{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir = unique_dir(out, stem)
    meta = {"family": family, "variant": variant, "mnkl": list(mnkl_t), "device": info["name"],
            "capability": list(info["capability"]), "sm_count": info["sm_count"],
            "kernel_name": cap.kernel_name}
    doc = write_timing_run(run_dir, cap.table, meta=meta, overhead=ovh, raw=cap.raw, plan=cap.plan,
                           max_trace_events=max_trace_events)
    return doc, run_dir


def _print(console, doc: dict, run_dir) -> None:
    from rich.table import Table

    st = doc["stats"]
    t = Table(title="phase durations (cycles)", title_justify="left")
    for col in ("role", "phase", "n", "mean", "p50", "p95", "max"):
        t.add_column(col, justify="left" if col in ("role", "phase") else "right")
    for r in st["phases"]:
        t.add_row(r["role"], r["phase"], f"{r['n']:,}", f"{r['mean']:,.0f}", f"{r['p50']:,.0f}",
                  f"{r['p95']:,.0f}", f"{r['max']:,.0f}")
    console.print(t)
    sp = st["spread"]
    if sp.get("tiles"):
        console.print(f"epilogue {sp['phase']} spread across {sp['warps_per_tile']} warps per tile (max - min): "
                      f"mean {sp['mean']:,.0f}, p95 {sp['p95']:,.0f} cycles over {sp['tiles']:,} tiles")
    tl = st["tiles"]
    samp = f" (sampled every {tl['sample_every']} tiles)" if tl["sample_every"] > 1 else ""
    console.print(f"tiles per SM: mean {tl['mean']:.1f}, min {tl['min']}, max {tl['max']} on {tl['sms']} SMs{samp}")
    ck = st["clock"]
    if ck["cycles_per_ns"] > 0:
        console.print(f"SM clock measured during the run: {ck['cycles_per_ns'] * 1000:,.0f} MHz "
                      f"({ck['pairs']:,} clock64/globaltimer pairs over {ck['span_ns'] / 1000:,.1f} us)")
    else:
        console.print("SM clock: the globaltimer did not advance during the run; times stay in cycles")
    for row in doc.get("overhead", []):
        shape = "x".join(str(x) for x in row["mnkl"][:3])
        console.print(f"timing-build overhead on {shape}: plain {row['plain_us']:,.1f} us, timing "
                      f"{row['timing_us']:,.1f} us -> {row['overhead_pct']:+.2f}% "
                      f"({'CUDA graph replays: GPU time' if row.get('timed_with') == 'graph' else 'eager launches'})")
    if run_dir is not None:
        tr = doc.get("trace", {})
        console.print(f"wrote {run_dir}/ (timing.parquet, timing.csv, trace.json [{tr.get('tile_sampling', '')}], "
                      "timing.json); open trace.json in ui.perfetto.dev")
