"""Scratch: print DeepGEMM's chosen configs and time it (removed before hand-off)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ["DG_PRINT_CONFIGS"] = "1"
import torch, deep_gemm
from bsprof.kernels.fp8_blockwise.quant import make_operands
from bsprof.kernels.fp8_blockwise.bench import time_fn
for s in sys.argv[1].split(";"):
    m, n, k = (int(x) for x in s.split(","))
    ops = make_operands((m, n, k, 1))
    a, b, sfa, sfb = ops.a[0], ops.b[0], ops.sfa[0].t(), ops.sfb[0]
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    f = lambda: deep_gemm.fp8_gemm_nt((a, sfa), (b, sfb), d)
    ms = time_fn(f, 10, 50)
    print(f"deepgemm {m},{n},{k}: {ms*1e3:.1f} us {2*m*n*k/ms/1e9:.0f} TFLOP/s", flush=True)
