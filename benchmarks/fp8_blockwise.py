"""FP8-blockwise (Hopper) benchmark: our kernels beside cuBLAS blockwise / tensorwise FP8, bf16 cuBLAS
and DeepGEMM, side by side in ONE process, fresh random inputs, warm L2, median of --iters.

Target (issue 4): optimized >= 1.15x cuBLAS blockwise FP8 on 4096^3, 8192^3 and 8192x8192x1024.

    python3 benchmarks/fp8_blockwise.py                       # the three target problems
    python3 benchmarks/fp8_blockwise.py --rounds 7 --kernels 'optimized rescaled'   # A/B, interleaved
    python3 benchmarks/fp8_blockwise.py --shapes 4096,4096,4096 --kernels 'optimized baseline:epilogue=tma'
    python3 benchmarks/fp8_blockwise.py --check-only --shapes 1000,1000,512;256,384,1024,2
    python3 benchmarks/fp8_blockwise.py --inputs int --cute-example ~/cutlass   # + NVIDIA's dense FP8 example

On the device machine: ``source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh;
export PYTHONPATH=$PWD:$PYTHONPATH; python3 benchmarks/fp8_blockwise.py``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TARGET_SHAPES = "4096,4096,4096;8192,8192,8192;8192,8192,1024"


def main(argv=None) -> int:
    from rich.console import Console

    from bsprof.errors import BsprofError
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile.bench.fp8_blockwise import measure, print_table
    from bsprof.kernels.fp8_blockwise.quant import INPUTS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=TARGET_SHAPES, help="';'-separated M,N,K[,L]")
    ap.add_argument("--kernels", default="optimized baseline",
                    help="space-separated specs variant[:knob=v,knob=v], e.g. 'optimized baseline:epilogue=tma'")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup-s", type=float, default=0.3,
                    help="seconds of warm-up launches per kernel (0: just --warmup launches, burst clocks)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every kernel this many times, interleaved, and keep each one's median round")
    ap.add_argument("--check-only", action="store_true", help="correctness only, no peers, few iterations")
    ap.add_argument("--no-peers", action="store_true")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--peers-graph", dest="peers_graph", action="store_true", default=True,
                     help="launch the peers as CUDA-graph replays, as ours always are (the default: every "
                          "kernel pays the same launch path)")
    how.add_argument("--peers-eager", dest="peers_graph", action="store_false",
                     help="launch the peers as eager torch calls instead")
    ap.add_argument("--launch-gaps", action="store_true",
                    help="also trace 30 launches of every kernel with CUPTI (torch.profiler): its GPU "
                         "duration and the idle gap before it")
    ap.add_argument("--inputs", choices=INPUTS, default="randn",
                    help="operands: randn (DeepSeek-quantized Gaussians, the default) or int (integers in "
                         "[-2, 2] with unit scales, what the CuTe DSL examples time on; 5-14%% faster for "
                         "every kernel on the power-capped H100)")
    ap.add_argument("--cute-example", default=os.environ.get("BSPROF_CUTE_EXAMPLE"),
                    help="NVIDIA's CuTe DSL Hopper dense_gemm_persistent.py (or a CUTLASS checkout): time it "
                         "as the peer without block scaling (default: $BSPROF_CUTE_EXAMPLE)")
    ap.add_argument("--json", default=None, help="write the results to this JSON file")
    args = ap.parse_args(argv)

    console = Console(width=160)
    if args.cute_example:
        from bsprof.kernels.fp8_blockwise.cute_example_peer import example_file

        try:
            args.cute_example = str(example_file(args.cute_example))
        except BsprofError as exc:
            console.print(f"[red]{exc}[/red]")
            return 2
    kernels = args.kernels.split()
    shapes = [parse_mnkl(s) for s in args.shapes.split(";") if s.strip()]
    import torch

    dev = torch.cuda.get_device_name(0)
    results = []
    failed = False
    for mnkl in shapes:
        try:
            res = measure(mnkl, kernels, warmup=0 if args.check_only else args.warmup,
                          iters=3 if args.check_only else args.iters, check=True,
                          peers=not (args.check_only or args.no_peers),
                          warmup_s=0.0 if args.check_only else args.warmup_s,
                          rounds=1 if args.check_only else args.rounds, peers_graph=args.peers_graph,
                          launch_gaps=args.launch_gaps and not args.check_only, inputs=args.inputs,
                          cute_example=None if (args.check_only or args.no_peers) else args.cute_example)
        except BsprofError as exc:
            console.print(f"[red]{mnkl}: {exc}[/red]")
            failed = True
            continue
        results.append(res)
        for r in res["rows"]:
            if r["ours"] and (not isinstance(r["rel_err"], float) or r["rel_err"] > 1e-2):
                console.print(f"[red]{mnkl} {r['name']}: rel error {r['rel_err']} > 1e-2[/red]")
                failed = True
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rounds = f", median round of {args.rounds}" if args.rounds > 1 else ""
    print_table(console, results, f"fp8-blockwise, {dev}, {when}, median of {args.iters}{rounds}, warm L2, "
                                  f"{args.inputs} inputs")
    if args.json:
        from bsprof.io import write_text_atomic

        write_text_atomic(args.json, json.dumps({"bsprof": {"kind": "bench", "version": 1}, "family": "fp8-blockwise",
                                                 "variant": "optimized", "device": dev, "date": when,
                                                 "inputs": args.inputs, "results": results}, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
