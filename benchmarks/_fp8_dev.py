"""Scratch driver for GPU bring-up (removed before hand-off)."""
import sys, time, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch
from bsprof.kernels.fp8_blockwise.bench import parse_spec, time_fn
from bsprof.kernels.fp8_blockwise import prepare

shapes = [tuple(int(x) for x in s.split(",")) for s in sys.argv[1].split(";")]
specs = sys.argv[2].split()
iters = int(sys.argv[3]) if len(sys.argv) > 3 else 0
for shp in shapes:
    if len(shp) == 3:
        shp = shp + (1,)
    for spec in specs:
        v, over = parse_spec(spec)
        t0 = time.time()
        p = prepare(v, shp, **over)
        t1 = time.time()
        p.launch(); torch.cuda.synchronize()
        t2 = time.time()
        err = p.check()
        t3 = time.time()
        msg = f"{spec:40s} {shp} err={err:.3e} prep={t1-t0:.1f}s launch={t2-t1:.2f}s check={t3-t2:.2f}s"
        if iters:
            ms = time_fn(p.launch, 10, iters)
            msg += f" {ms*1e3:.1f}us {p.flops/ms/1e9:.0f} TFLOP/s"
        print(msg, flush=True)
        del p
        torch.cuda.empty_cache()
