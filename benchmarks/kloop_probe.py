"""Per-K-block and fixed costs of one-warpgroup (64-row) tiles beside DeepGEMM, in one process.

Each entry is ``M,N,K|spec``: a problem and one of our kernel specs (``optimized:tile_m=64,...``).
DeepGEMM runs at every problem an entry names, on the first entry's operands. Modes:

  --warm JOBS     build every entry (and DeepGEMM) in JOBS processes: the JIT caches on disk
  --rounds R      time each entry and DeepGEMM R rounds (held queue, CUDA graphs), median round
  --ncu           one launch of each inside NVTX ranges ``probe`` / ``probe_<label>`` for
                  ``ncu --nvtx --nvtx-include probe/``

Run on the GPU host (benchmarks/kloop_device.sh runs the whole study), e.g.
  python3 benchmarks/kloop_probe.py --warm 16 --rounds 5 \
      "128,4096,7168|optimized:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1" \
      "128,4096,7168|optimized:tile_m=64,tile_n=64,cluster_m=1,cluster_n=1,launch_cluster=1"
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def parse_entry(text: str) -> tuple[tuple[int, int, int, int], str]:
    shape, _, spec = text.partition("|")
    m, n, k = (int(x) for x in shape.split(","))
    return (m, n, k, 1), spec or "optimized"


def label(entry) -> str:
    from bsprof.kernels.fp8_blockwise.config import parse_spec

    (m, n, k, _), spec = entry
    variant, kw = parse_spec(spec)
    tile = ""
    if "tile_m" in kw:
        tile = f"{kw.pop('tile_m')}x{kw.pop('tile_n', '?')} {kw.pop('cluster_m', 1)}x{kw.pop('cluster_n', 1)}"
    rest = " ".join(f"{key}={val}" for key, val in kw.items())
    return " ".join(x for x in (f"{m}x{n}x{k}", variant, tile, rest) if x)


def _prepare(entry):
    from bsprof.kernels.fp8_blockwise.config import parse_spec
    from bsprof.kernels.fp8_blockwise.launch import prepare

    mnkl, spec = entry
    variant, over = parse_spec(spec)
    return prepare(variant, mnkl, **over)


def _warm_one(entries) -> str:
    from bsprof.profile.bench.fp8_blockwise import peer_fns

    t0 = time.time()
    p = None
    for e in entries:
        p = _prepare(e)
    if p is not None:
        peer_fns(p.ops, entries[0][0], only=("deepgemm",))
    return f"{entries[0][0][:3]}: {len(entries)} builds + DeepGEMM in {time.time() - t0:.0f} s"


def by_shape(entries) -> dict:
    out: dict = {}
    for e in entries:
        out.setdefault(e[0], []).append(e)
    return out


def warm(entries, jobs: int) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    groups = [[e] for e in dict.fromkeys(entries)]
    t0 = time.time()
    with ProcessPoolExecutor(min(jobs, len(groups)), mp_context=multiprocessing.get_context("spawn")) as ex:
        for line in ex.map(_warm_one, groups):
            print("built", line, flush=True)
    print(f"warm: {len(entries)} builds in {time.time() - t0:.0f} s", flush=True)


def setups(entries):
    """problem -> (DeepGEMM launch, [(entry, prepared, launch, rel_err, how)], what the launches
    use): every launch a graph replay. The last item keeps DeepGEMM's closure and output alive: a
    graph holds raw pointers, not the tensors."""
    from bsprof.kernels.fp8_blockwise.launch import rebind
    from bsprof.profile.bench.fp8_blockwise import graphed, peer_fns, torch_graphed

    out = {}
    for mnkl, group in by_shape(entries).items():
        rows, first = [], None
        for e in group:
            p = _prepare(e)
            if first is None:
                first = p
            else:
                p = rebind(p, first.ops)
            err = p.check()
            fn, how = graphed(p)
            rows.append((e, p, fn, err, how))
        fns, skipped = peer_fns(first.ops, mnkl, only=("deepgemm",))
        dg = torch_graphed(fns["deepgemm"][0])[0] if "deepgemm" in fns else None
        if dg is None:
            print(f"{mnkl}: no DeepGEMM ({skipped.get('deepgemm')})", flush=True)
        out[mnkl] = (dg, rows, (fns, first))
    return out


def time_all(entries, rounds: int, iters: int) -> None:
    from bsprof.profile.bench.fp8_blockwise import time_fn

    table = setups(entries)
    for mnkl, (dg, rows, _keep) in table.items():
        us = {label(r[0]): [] for r in rows}
        dg_us = []
        for _ in range(rounds):
            if dg is not None:
                dg_us.append(time_fn(dg, 10, iters, 0.2)[0] * 1e3)
            for e, _p, fn, _err, _how in rows:
                us[label(e)].append(time_fn(fn, 10, iters, 0.2)[0] * 1e3)
        print(f"\n{mnkl[:3]}  DeepGEMM {statistics.median(dg_us):.2f} us" if dg_us else f"\n{mnkl[:3]}", flush=True)
        for e, p, _fn, err, how in rows:
            mine = us[label(e)]
            pair = [d / o for d, o in zip(dg_us, mine)] if dg_us else []
            ratio = f"ours/DG {statistics.median(pair):.3f} ({min(pair):.3f}-{max(pair):.3f})" if pair else ""
            print(f"  {label(e):58s} {statistics.median(mine):7.2f} us  {ratio}  err {err:.2e}  {how}", flush=True)


def ncu_launches(entries) -> None:
    import torch

    table = setups(entries)
    for mnkl, (dg, rows, _keep) in table.items():
        m, n, k, _ = mnkl
        for name, fn in [(f"dg {m}x{n}x{k}", dg)] + [(label(r[0]), r[2]) for r in rows]:
            if fn is None:
                continue
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            # outer range for ncu's --nvtx-include probe/, inner one names the launch in the report
            torch.cuda.nvtx.range_push("probe")
            torch.cuda.nvtx.range_push("probe_" + name.replace(" ", "_").replace("=", ""))
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("entries", nargs="+", help="M,N,K|spec")
    ap.add_argument("--warm", type=int, default=0, metavar="JOBS")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--ncu", action="store_true")
    args = ap.parse_args(argv)
    entries = [parse_entry(t) for t in args.entries]
    if args.warm:
        warm(entries, args.warm)
    if args.rounds:
        time_all(entries, args.rounds, args.iters)
    if args.ncu:
        ncu_launches(entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
