#!/usr/bin/env bash
# The device half of the one-warpgroup (64-row) per-K-block study (docs/perf.md, "FP8-blockwise
# per-K-block efficiency"): builds, times beside DeepGEMM and profiles with ncu --set full, in one call.
#   source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH
#   bash benchmarks/kloop_device.sh            # results: $OUT/k4.tar.xz
# TIME / NCU: the probe entries to time and to profile (M,N,K|spec|l2, see kloop_probe.py)
set -u
OUT=${OUT:-/tmp/bsprof-k4-out}; W=$OUT/k4; mkdir -p "$W"
export PYTHONUNBUFFERED=1 DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/dgcache}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
t0=$(date +%s)
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } > "$W/env.txt" 2>&1
cat "$W/env.txt"
gcc -shared -fPIC -O2 -o /tmp/tma_l2_shim.so benchmarks/tma_l2_shim.c -ldl || echo "no shim"
read -r -a TIME_E <<< "${TIME:?}"; read -r -a NCU_E <<< "${NCU_ENTRIES:-}"
timeout ${WARM_S:-150} python3 benchmarks/kloop_probe.py --warm 16 "${TIME_E[@]}" > "$W/warm.txt" 2>&1
echo "warm rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^warm|Error|error" "$W/warm.txt" | head -20
BSPROF_TMA_LOG=1 LD_PRELOAD=/tmp/tma_l2_shim.so timeout ${TIME_S:-120} python3 benchmarks/kloop_probe.py \
  --rounds ${ROUNDS:-5} "${TIME_E[@]}" > "$W/time.txt" 2> "$W/time_err.txt"
echo "time rc=$? $(( $(date +%s) - t0 )) s"; cat "$W/time.txt"; grep -v "^tma-encode" "$W/time_err.txt" | tail -5
grep "^tma-encode" "$W/time_err.txt" | cut -c1-150 | sort | uniq -c | head -20
if [ ${#NCU_E[@]} -gt 0 ]; then
  LD_PRELOAD=/tmp/tma_l2_shim.so timeout -s INT -k 15 ${NCU_S:-150} "$NCU" --nvtx --nvtx-include probe/ --set full \
    --clock-control none --import-source no --target-processes application-only -o "$W/probe" \
    python3 benchmarks/kloop_probe.py --ncu "${NCU_E[@]}" > "$W/ncu.txt" 2>&1
  echo "ncu rc=$? $(( $(date +%s) - t0 )) s"; grep -E "==PROF==|==ERROR|==WARNING" "$W/ncu.txt" | tail -15
fi
[ -n "${EXTRA:-}" ] && { eval "$EXTRA" > "$W/extra.txt" 2>&1; echo "extra rc=$?"; tail -30 "$W/extra.txt"; }
XZ_OPT="-T0 -6" tar cJf "$OUT/k4.tar.xz" -C "$OUT" k4 && rm -rf "$W" && ls -la "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
