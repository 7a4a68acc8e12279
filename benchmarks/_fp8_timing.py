"""Scratch: timing build summary (removed before hand-off)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch
from bsprof.kernels.fp8_blockwise import prepare
from bsprof.kernels.fp8_blockwise.bench import parse_spec, time_fn
shp = tuple(int(x) for x in sys.argv[1].split(",")) + (1,)
for spec in sys.argv[2].split():
    v, over = parse_spec(spec)
    p = prepare(v, shp, timing=True, **over)
    err = p.check()
    ms = time_fn(p.launch, 5, 20)
    p.launch(); torch.cuda.synchronize()
    t = p.timing_table()
    t["dur"] = t["end"] - t["start"]
    g = t.groupby(["role", "phase"])["dur"].agg(["count", "mean", "median", "sum"])
    print(f"== {spec} {shp} err={err:.2e} timing-build {ms*1e3:.1f}us rows={len(t)}")
    print(g.to_string())
    span = (t.groupby("cta")["end"].max() - t.groupby("cta")["start"].min()).mean()
    print("mean CTA span cycles", span)
