"""The timing artifact on the terminal (``bsprof timing``); the HTML page's view of it is
:mod:`.sec_timing`."""

from __future__ import annotations


def render(console, doc: dict, run_dir=None, tile: tuple[int, int] | None = None) -> None:
    """Per-phase statistics, the K-loop's cycles a K block against the tile's MMA floor, epilogue
    spread, tiles per SM, the measured SM clock and the timing build's overhead; with ``run_dir``,
    what was written there. ``tile`` names the tile of a capture that did not record it."""
    from rich.table import Table

    from bsprof.analyzers.timing.kblock import kblock_rate

    st = doc["stats"]
    t = Table(title="phase durations (cycles)", title_justify="left")
    for col in ("role", "phase", "n", "mean", "p50", "p95", "max"):
        t.add_column(col, justify="left" if col in ("role", "phase") else "right")
    for r in st["phases"]:
        t.add_row(
            r["role"],
            r["phase"],
            f"{r['n']:,}",
            f"{r['mean']:,.0f}",
            f"{r['p50']:,.0f}",
            f"{r['p95']:,.0f}",
            f"{r['max']:,.0f}",
        )
    console.print(t)
    kb = kblock_rate(doc, tile)
    if kb is not None:
        console.print(kb.describe())
    sp = st["spread"]
    if sp.get("tiles"):
        console.print(
            f"epilogue {sp['phase']} spread across {sp['warps_per_tile']} warps per tile (max - min): "
            f"mean {sp['mean']:,.0f}, p95 {sp['p95']:,.0f} cycles over {sp['tiles']:,} tiles"
        )
    tl = st["tiles"]
    samp = f" (sampled every {tl['sample_every']} tiles)" if tl["sample_every"] > 1 else ""
    console.print(f"tiles per SM: mean {tl['mean']:.1f}, min {tl['min']}, max {tl['max']} on {tl['sms']} SMs{samp}")
    ck = st["clock"]
    if ck["cycles_per_ns"] > 0:
        console.print(
            f"SM clock measured during the run: {ck['cycles_per_ns'] * 1000:,.0f} MHz "
            f"({ck['pairs']:,} clock64/globaltimer pairs over {ck['span_ns'] / 1000:,.1f} us)"
        )
    else:
        console.print("SM clock: the globaltimer did not advance during the run; times stay in cycles")
    for row in doc.get("overhead", []):
        shape = "x".join(str(x) for x in row["mnkl"][:3])
        console.print(
            f"timing-build overhead on {shape}: plain {row['plain_us']:,.1f} us, timing "
            f"{row['timing_us']:,.1f} us -> {row['overhead_pct']:+.2f}% "
            f"({'CUDA graph replays: GPU time' if row.get('timed_with') == 'graph' else 'eager launches'})"
        )
    if run_dir is not None:
        tr = doc.get("trace", {})
        console.print(
            f"wrote {run_dir}/ (timing.parquet, timing.csv, trace.json [{tr.get('tile_sampling', '')}], "
            "timing.json); open trace.json in ui.perfetto.dev",
            markup=False,
        )
