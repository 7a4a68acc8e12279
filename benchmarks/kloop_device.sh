#!/usr/bin/env bash
# The device half of the one-warpgroup (64-row) per-K-block study (docs/perf.md, "FP8-blockwise
# per-K-block efficiency"): GPU tests, builds, times beside DeepGEMM, profiles with ncu --set full
# (cold L2, as ncu replays by default, and warm), and the suite's rows, in one call.
#   source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH
#   TIME="M,N,K|spec ..." NCU_ENTRIES="..." bash benchmarks/kloop_device.sh     # results: $OUT/k4.tar.xz
# Steps in order of what a time-out should spare: builds, timing, cold ncu, tests, suite, warm ncu.
# TIME / NCU_ENTRIES / NCU_WARM: probe entries (kloop_probe.py) to time, to profile cold, warm;
# TESTS: a pytest -k expression for tests/test_fp8_gpu.py; SUITE (SUITE_KERNELS): shapes (kernel specs)
# for benchmarks/fp8_blockwise.py
set -u
OUT=${OUT:-/tmp/bsprof-k4-out}; W=$OUT/k4; mkdir -p "$W"
export PYTHONUNBUFFERED=1 DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/dgcache}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
t0=$(date +%s); lap() { echo "$1 rc=$2 $(( $(date +%s) - t0 )) s"; }
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; date -u; } > "$W/env.txt" 2>&1
cat "$W/env.txt"
read -r -a TIME_E <<< "${TIME:-}"; read -r -a NCU_E <<< "${NCU_ENTRIES:-}"; read -r -a WARM_E <<< "${NCU_WARM:-}"
ALL=("${TIME_E[@]}" "${NCU_E[@]}" "${WARM_E[@]}")
if [ ${#ALL[@]} -gt 0 ]; then
  timeout ${WARM_S:-150} python3 benchmarks/kloop_probe.py --warm 16 "${ALL[@]}" > "$W/warm.txt" 2>&1
  lap warm $?; grep -E "^warm|Error" "$W/warm.txt" | head -10
fi
if [ ${#TIME_E[@]} -gt 0 ]; then
  timeout ${TIME_S:-120} python3 benchmarks/kloop_probe.py --rounds ${ROUNDS:-5} "${TIME_E[@]}" > "$W/time.txt" 2>&1
  lap time $?; cat "$W/time.txt" | grep -v "^\s*$" | tail -40
fi
common=(--nvtx --nvtx-include probe/ --set full --clock-control none --import-source no --target-processes application-only)
if [ ${#NCU_E[@]} -gt 0 ]; then
  timeout -s INT -k 15 ${NCU_S:-120} "$NCU" "${common[@]}" -o "$W/probe_cold" \
    python3 benchmarks/kloop_probe.py --ncu "${NCU_E[@]}" > "$W/ncu_cold.txt" 2>&1
  lap ncu_cold $?; grep -E "==ERROR|Report" "$W/ncu_cold.txt" | tail -3
fi
if [ -n "${TESTS:-}" ]; then
  timeout ${TESTS_S:-150} python3 -m pytest -q -n 8 -m gpu tests/test_fp8_gpu.py -k "$TESTS" > "$W/tests.txt" 2>&1
  lap tests $?; tail -4 "$W/tests.txt"
fi
if [ -n "${SUITE:-}" ]; then
  DG_PRINT_CONFIGS=1 timeout ${SUITE_S:-150} python3 benchmarks/fp8_blockwise.py --shapes "$SUITE" --rounds 5 --jobs 14 --kernels "${SUITE_KERNELS:-optimized}" \
    --json "$W/suite.json" > "$W/suite.txt" 2>&1
  lap suite $?; grep -v "^\s*$" "$W/suite.txt" | tail -25
fi
if [ ${#WARM_E[@]} -gt 0 ]; then
  timeout -s INT -k 15 ${NCU_S:-120} "$NCU" "${common[@]}" --cache-control none -o "$W/probe_warm" \
    python3 benchmarks/kloop_probe.py --ncu "${WARM_E[@]}" > "$W/ncu_warm.txt" 2>&1
  lap ncu_warm $?; grep -E "==ERROR|Report" "$W/ncu_warm.txt" | tail -3
fi
XZ_OPT="-T0 -6" tar cJf "$OUT/k4.tar.xz" -C "$OUT" k4 && rm -rf "$W" && ls -la "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
