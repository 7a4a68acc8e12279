#!/usr/bin/env bash
# The device half of the price check (docs/verdict.md, "What the prices are worth"): times every
# before/after op of scripts/price_pairs.py (CUDA events, L2 flushed before each call, rotating
# order, median) into $OUT/timings.json, apart from the reports, then profiles the "before" launches
# and the "after" launches with ncu --set full --clock-control none, one report per side.
#   bash benchmarks/price_device.sh      # results: $OUT/timings.json, $OUT/pairs.tar.xz
#   SET=other_shapes bash benchmarks/price_device.sh   # tests/data/price/other_shapes/labels.json
#   SET=third_shapes bash benchmarks/price_device.sh   # tests/data/price/third_shapes/labels.json
#   SIDES=before ONLY=op,op BEFORE_S=300 SET=... bash benchmarks/price_device.sh
#       # no timing: the named ops of one side again (pairs_before_only.ncu-rep), where a time limit cut a
#       # report short; `price_score.py extract` merges the two reports
set -u
OUT=${OUT:-/tmp/bsprof-price-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
W=$(mktemp -d); t0=$(date +%s)
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$W/env.txt" 2>&1
cat "$W/env.txt"
# the measured times go to their own file: nothing measured is printed here
SET=${SET:-corpus_shapes}
if [ -z "${ONLY:-}" ]; then
  TORCHINDUCTOR_COMPILE_THREADS=8 timeout -k 10 "${TIME_S:-120}" python3 scripts/price_pairs.py --set "$SET" time \
    --out "$OUT/timings.json" > "$W/log_time.txt" 2>&1
  echo "time rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^pairs:|Error" "$W/log_time.txt" | head -20
fi
common=(--nvtx --nvtx-include pair/ --clock-control none --target-processes application-only --set full --import-source no)
for side in ${SIDES:-before after}; do
  lim=${BEFORE_S:-150}; [ $side = after ] && lim=${AFTER_S:-90}
  timeout -s INT -k 15 "$lim" "$NCU" "${common[@]}" -o "$W/pairs_$side${ONLY:+_only}" \
    python3 scripts/price_pairs.py --set "$SET" profile --side $side --meta "$W/meta_$side${ONLY:+_only}.json" \
    --only "${ONLY:-}" > "$W/log_$side.txt" 2>&1
  echo "$side rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^pairs:|==ERROR|Error" "$W/log_$side.txt" | head -30
done
ls -la "$W"
XZ_OPT="-T0 -6" tar cJf "$OUT/pairs.tar.xz" -C "$W" . && ls -la "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
