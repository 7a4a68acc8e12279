"""`bsprof ncu`: profile a bundled kernel with Nsight Compute, or read / compare .ncu-rep files."""

from __future__ import annotations

import json
import math

import click

from bsprof.errors import BsprofError
from bsprof.kernels.api import VARIANTS


def _fmt(v, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        s = f"{int(v):,}"
    elif isinstance(v, float):
        s = f"{v:,.0f}" if abs(v) >= 1000 else (f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}")
    else:
        s = str(v)
    return f"{s} {unit}".rstrip()


def _dims(launch: dict, key: str) -> str:
    vals = launch.get(key) or []
    return "x".join("?" if v is None else str(v) for v in vals)


def _sol_text(c: dict) -> str:
    """ncu's SOL pair; where a triage report lacks it, the verdict's stand-ins marked with '*'."""
    from bsprof.analyzers.ncu.verdict import compute_sol, memory_sol

    row = {k: (math.nan if v is None else v) for k, v in c.items()}
    (comp, ccol), (mem, mcol) = compute_sol(row), memory_sol(row)
    text = f"{_fmt(comp)}{'' if ccol == 'sol_compute_pct' else '*'} / {_fmt(mem)}{'' if mcol == 'sol_memory_pct' else '*'} %"
    return text + (" (*: from " + ", ".join(x for x in (ccol, mcol) if not x.startswith("sol_")) + ")" if "*" in text else "")


def print_launch(console, launch: dict, *, max_rules: int = 8) -> None:
    from rich.table import Table

    c = launch["columns"]
    t = Table(title=f"launch {c.get('launch')}: {launch['kernel']}", show_header=True, title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    left = [
        ("duration", _fmt((c.get("duration_ns") or math.nan) / 1e3, "us")),
        ("SM / DRAM clock", f"{_fmt((c.get('sm_clock_hz') or math.nan) / 1e6)} / {_fmt((c.get('dram_clock_hz') or math.nan) / 1e6)} MHz"),
        ("grid / block / cluster", f"{_dims(launch, 'grid')} / {_dims(launch, 'block')} / {_dims(launch, 'cluster')}"),
        ("registers / thread", _fmt(c.get("registers_per_thread"))),
        ("shared mem / block", _fmt(c.get("smem_per_block_bytes"), "B")),
        ("spill instructions", _fmt(c.get("spill_instructions"))),
        ("occupancy achieved / theor.", f"{_fmt(c.get('achieved_occupancy_pct'))} / {_fmt(c.get('theoretical_occupancy_pct'))} %"),
        ("issue slots busy", _fmt(c.get("issue_active_pct"), "%")),
        ("eligible warps / cycle", _fmt(c.get("eligible_warps_per_cycle"))),
    ]
    right = [
        ("SOL compute / memory", _sol_text(c)),
        ("tensor pipe", f"{_fmt(c.get('tensor_pipe_pct'), '%')} [{c.get('tensor_pipe_metric', '').split('.')[0]}]"),
        ("DRAM / L2 / L1 throughput", f"{_fmt(c.get('dram_throughput_pct'))} / {_fmt(c.get('l2_throughput_pct'))} / {_fmt(c.get('l1_throughput_pct'))} %"),
        ("L2 / L1 hit rate", f"{_fmt(c.get('l2_hit_pct'))} / {_fmt(c.get('l1_hit_pct'))} %"),
        ("shared-memory pipe", _fmt(c.get("smem_pipe_pct"), "%")),
        ("TFLOP/s", _fmt(c.get("tflops"))),
        ("% of peak", f"{_fmt(c.get('pct_of_peak'))} % of {_fmt(c.get('peak_tflops'))} ({c.get('precision') or '?'})"
         if c.get("tflops") is not None else "n/a (problem size unknown: pass --flops)"),
        ("warp cycles / issue", _fmt(c.get("warp_cycles_per_issue"))),
        ("replay passes", _fmt(c.get("replay_passes"))),
    ]
    for name, value in left + right:
        t.add_row(name, value)
    console.print(t)
    stalls = sorted(((k[6:], v) for k, v in c.items() if k.startswith("stall_") and v), key=lambda kv: -kv[1])[:6]
    if stalls:
        console.print("stalls (cycles per issued instruction): " + ", ".join(f"{k} {v:.2f}" for k, v in stalls))
    ops = list(launch.get("inst_executed_by_opcode", {}).items())[:8]
    if ops:
        console.print("executed instructions: " + ", ".join(f"{k} {int(v):,}" for k, v in ops))
    v = launch["verdict_detail"]
    head = v["class"] + (f" ({v['detail']})" if v["detail"] else "") + (f" + {', '.join(v['flags'])}" if v["flags"] else "")
    console.print(f"[bold]verdict: {head}[/bold]")
    for e in v["evidence"]:
        console.print(f"  because {e}")
    for cand in v["candidates"]:
        console.print(f"  try: {cand}")
    rules = [r for r in launch.get("rules", []) if r["kind"] in ("optimization", "warning", "error")]
    if rules:
        console.print("ncu rules (estimated speedup):")
        for r in rules[:max_rules]:
            sp = f"{r['speedup_pct']:.1f}% {r['speedup_type']}" if r["speedup_pct"] is not None else "n/a"
            title = r["title"] or r["name"]
            console.print(f"  {sp:>14}  {r['section']}/{r['rule']}: {title}")
    for note in launch.get("notes", []):
        if note.startswith("missing: "):  # the JSON keeps the ncu names; on screen the columns are enough
            import re
            cols = re.sub(r" \((?:[^()]|\([^()]*\))*\)", "", note[len("missing: "):])
            console.print(f"[dim]not in this report (NaN): {cols}[/dim]")
        else:
            console.print(f"[dim]note: {note}[/dim]")


def _read(report: str, filter: str | None, flops: float | None, precision: str | None, out: str | None) -> dict:
    from pathlib import Path

    from bsprof.analyzers.ncu.compare import recorded_flops, resolve_report
    from bsprof.analyzers.ncu.extract import extract
    from bsprof.analyzers.ncu.summary import summary_json, write_summary

    flops = flops or recorded_flops(report)
    report = str(resolve_report(report))
    ex = extract(report, filter=filter, flops=flops, precision=precision)
    payload = summary_json(ex)
    if out:
        import time

        from bsprof.io import unique_dir

        stem = Path(report).name.removesuffix(".ncu-rep")
        d = unique_dir(out, f"report_{stem}_{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            write_summary(ex, d, "summary", payload)
        except BaseException:
            import shutil
            shutil.rmtree(d, ignore_errors=True)
            raise
        payload["output_dir"] = str(d)
    return payload


def _profile(variant, family, mnkl, set_name, clock_control, out, warmup, console) -> dict:
    from bsprof.analyzers.ncu.metrics import arch_key
    from bsprof.kernels.api import family_for_capability, family_module, parse_kernel_spec, parse_mnkl, spec_label
    from bsprof.profile.ncu_runner import NcuRequest, find_ncu, profile_to_dir, result_name

    parse_kernel_spec(variant, None if family == "auto" else family)
    if family != "auto":
        _require_prepare(family_module(family), family)
    find_ncu()
    from bsprof.gpu import device_info

    info = device_info()
    if family == "auto":
        family = family_for_capability(info["capability"])
        console.print(f"family: {family} (picked from the GPU: {info['name']}, sm_{info['capability'][0]}{info['capability'][1]})")
        _require_prepare(family_module(family), family)
        parse_kernel_spec(variant, family)
    module = family_module(family)
    shape = parse_mnkl(mnkl) if mnkl else tuple(module.DEFAULT_MNKL)
    req = NcuRequest(
        launcher_args=["--family", family, "--variant", variant, "--mnkl", ",".join(map(str, shape)), "--warmup", str(warmup)],
        arch=arch_key(info["capability"][0]), set_name=set_name, clock_control=clock_control,
    )
    directory, payload = profile_to_dir(req, out, result_name(spec_label(variant), family, shape), mnkl=shape,
                                        emit=lambda s: console.print(s, highlight=False))
    payload["output_dir"] = str(directory)
    return payload


def _require_prepare(module, family: str) -> None:
    if not hasattr(module, "prepare"):
        raise BsprofError(f"no bundled {family} kernel is available in this build yet (its prepare() is missing); "
                          "analyze an existing report instead: bsprof ncu --report FILE.ncu-rep")


def _compare(a: str, b: str, filter: str | None, flops: float | None, as_json: bool, console) -> None:
    from bsprof.analyzers.ncu.compare import compare
    from bsprof.analyzers.ncu.summary import KIND

    cmp = compare(a, b, filter=filter, flops=flops)
    if as_json:
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in cmp.table.to_dict("records")]
        click.echo(json.dumps({"bsprof": dict(KIND), "compare": {
            "a": {"report": cmp.a_name, "kernel": cmp.a_kernel, "verdict": cmp.a_verdict.as_dict()},
            "b": {"report": cmp.b_name, "kernel": cmp.b_kernel, "verdict": cmp.b_verdict.as_dict()},
            "metrics": rows}, "launches": []}, indent=2))
        return
    from rich.table import Table

    t = Table(title=f"A: {cmp.a_kernel}  ({cmp.a_name})\nB: {cmp.b_kernel}  ({cmp.b_name})", title_justify="left")
    for col in ("metric", "A", "B", "B - A", "change"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for r in cmp.table.to_dict("records"):
        pct = "" if math.isnan(r["delta_pct"]) else f"{r['delta_pct']:+.1f}%"
        t.add_row(r["metric"], _fmt(r["a"]), _fmt(r["b"]), _fmt(r["delta"]), pct)
    console.print(t)
    for tag, v in (("A", cmp.a_verdict), ("B", cmp.b_verdict)):
        console.print(f"verdict {tag}: {v.cls}" + (f" ({v.detail})" if v.detail else "") + (f" + {', '.join(v.flags)}" if v.flags else ""))
        for e in v.evidence:
            console.print(f"  because {e}")


@click.command(name="ncu")
@click.option("--kernel", "variant", default=None,
              help=f"profile this bundled kernel (needs a GPU and ncu): {' | '.join(VARIANTS)}, on "
                   "fp8-blockwise optionally with switches, e.g. optimized:epi_split=0")
@click.option("--family", type=click.Choice(["auto", "nvfp4", "fp8-blockwise"]), default="auto", show_default=True)
@click.option("--mnkl", default=None, help="M,N,K[,L]; default: the family's default problem")
@click.option("--set", "set_name", type=click.Choice(["triage", "full"]), default="triage", show_default=True,
              help="triage: only what the verdict needs (few replay passes); full: ncu's full set + source")
@click.option("--clock-control", type=click.Choice(["none", "base"]), default="none", show_default=True)
@click.option("-o", "--output", "out", default=None, help="results parent directory (--kernel default: bsprof-results)")
@click.option("--warmup", type=int, default=3, show_default=True, help="launches before the measured one")
@click.option("--report", default=None, help="analyze this .ncu-rep (or the one in a bsprof result directory)")
@click.option("--filter", "filter_", default=None, help="regex on kernel names (with --report / --compare)")
@click.option("--flops", type=float, default=None, help="FLOPs of one launch, for TFLOP/s and %% of peak (--report)")
@click.option("--precision", type=click.Choice(["fp4", "fp8", "fp16"]), default=None,
              help="peak to compare against (default: fp8 on sm_90, fp4 on sm_100)")
@click.option("--compare", nargs=2, default=None, metavar="A B", help="two .ncu-rep files or result directories")
@click.option("--json", "as_json", is_flag=True, help="print the summary JSON")
def command(variant, family, mnkl, set_name, clock_control, out, warmup, report, filter_, flops, precision,
            compare, as_json) -> None:
    """Run or read Nsight Compute: metrics per launch, bottleneck verdict with the thresholds that
    decided it, candidate optimizations, ncu's own rules, and A/B comparison."""
    from rich.console import Console

    console = Console(stderr=as_json, highlight=False)
    modes = [m for m in (variant, report, compare) if m]
    if len(modes) != 1:
        raise BsprofError("give exactly one of --kernel VARIANT (e.g. optimized), --report FILE.ncu-rep, --compare A B")
    if warmup < 0:
        raise BsprofError("--warmup must be >= 0")
    if flops is not None and flops <= 0:
        raise BsprofError("--flops must be positive (FLOPs of one launch, e.g. 2*M*N*K)")
    if compare:
        _compare(compare[0], compare[1], filter_, flops, as_json, console)
        return
    if report:
        payload = _read(report, filter_, flops, precision, out)
    else:
        payload = _profile(variant, family, mnkl, set_name, clock_control, out or "bsprof-results", warmup, console)
    if as_json:
        click.echo(json.dumps(payload, indent=2, default=str))
        return
    for launch in payload["launches"]:
        print_launch(console, launch)
    if payload.get("output_dir"):
        console.print(f"wrote {payload['output_dir']}")
