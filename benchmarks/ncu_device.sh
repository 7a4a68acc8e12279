#!/usr/bin/env bash
# The GPU half of benchmarks/ncu.py, as run for docs/perf.md on the device machine:
#   source .gpu-bundle/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH; bash benchmarks/ncu_device.sh
# Writes results under $OUT (default /tmp/bsprof-ncu-out).
set -u
OUT=${OUT:-/tmp/bsprof-ncu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
R=$(mktemp -d)
ncu --version | tail -1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
# 1. cuBLAS FP8 through torch._scaled_mm: triage vs full, no kernel compile in the way
timeout 110 python3 benchmarks/ncu.py triage-vs-full --torch-scaled-mm --out "$OUT/bench_cublas.json" > "$R/s1.txt" 2>&1
grep -v "replay pass ~" "$R/s1.txt" | tail -40
if grep -q "profiled no kernel" "$R/s1.txt"; then   # NVTX capture failed here: use the profiler API
  export BSPROF_NCU_CAPTURE=profiler-api; echo "retrying with BSPROF_NCU_CAPTURE=$BSPROF_NCU_CAPTURE"
  timeout 90 python3 benchmarks/ncu.py triage-vs-full --torch-scaled-mm --out "$OUT/bench_cublas.json" 2>&1 | grep -v "replay pass ~" | tail -40
fi
echo "step1 $(( $(date +%s) - t0 )) s"
# 2. the bundled FP8-blockwise kernel end to end through the CLI, both sets
if python3 -c "import bsprof.kernels.fp8_blockwise as m; assert hasattr(m, 'prepare')" 2>/dev/null; then
  for s in triage full; do
    timeout 120 python3 -m bsprof ncu --kernel optimized --set $s -o "$R/$s" > "$OUT/cli_$s.txt" 2>&1
    echo "cli $s rc=$? $(( $(date +%s) - t0 )) s"; grep -v "replay pass ~" "$OUT/cli_$s.txt" | tail -60
    d=$(ls -d "$R/$s"/*/ 2>/dev/null | head -1)
    [ -n "$d" ] && cp "$d"/*.ncu-rep "$OUT/opt_$s.ncu-rep" && cp "$d/summary.json" "$OUT/opt_$s.json"
  done
  # 3. the GPU-marked test, if time is left
  if [ $(( $(date +%s) - t0 )) -lt 250 ]; then
    timeout 100 python3 -m pytest -q tests/test_ncu_gpu.py -p no:cacheprovider 2>&1 | tail -5
  fi
else
  echo "fp8-blockwise has no prepare(): bundled kernel skipped"
fi
echo "total $(( $(date +%s) - t0 )) s"
ls -la "$OUT"
