#!/usr/bin/env bash
# The device half of the verdict corpus (tests/data/corpus/, docs/verdict.md): profiles every op of
# scripts/corpus_launches.py with --set full in one process, the L2-resident twin with
# --cache-control none, and two ops with --set basic (a partial report); tars reports, meta and logs.
#   source .gpu-bundle/install.sh; source .peers/deepgemm/install.sh; export PYTHONPATH=$PWD:$PYTHONPATH
#   bash benchmarks/corpus_device.sh          # results: $OUT/corpus.tar.xz[.NN]
# One blind set only (tests/data/corpus/blind_*.md: labelled before the launches ran); blind_mixed_cute
# needs NVIDIA's dense_gemm.py at ext/:
#   PARTS="blind_mixed blind_mixed_cute" bash benchmarks/corpus_device.sh
#   PARTS=blind_precisions bash benchmarks/corpus_device.sh    # or blind_gemm_flags, blind_decode_moe_scan,
#   # blind_fft_adamw_pipes, blind_h200 (profiled on an H200)
set -u
OUT=${OUT:-/tmp/bsprof-corpus-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1 DG_JIT_CACHE_DIR=${DG_JIT_CACHE_DIR:-/tmp/dgcache}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1)
W=$(mktemp -d); t0=$(date +%s)
{ "$NCU" --version | tail -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$W/env.txt" 2>&1
cat "$W/env.txt"
common=(--nvtx --nvtx-include corpus/ --clock-control none --target-processes application-only)
# two processes, so a time-out in one (ncu writes its report at exit) keeps the other's
for part in ${PARTS:-other gemm}; do
  lim=${OTHER_S:-210}; [ $part = gemm ] && lim=${GEMM_S:-250}; [ "${part#blind_}" != "$part" ] && lim=${HELDOUT_S:-100}
  timeout -s INT -k 20 $lim "$NCU" "${common[@]}" --set full --import-source no -o "$W/corpus_$part" \
    python3 scripts/corpus_launches.py --only $part --meta "$W/meta_$part.json" > "$W/log_$part.txt" 2>&1
  echo "$part rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^corpus:|==ERROR|==WARNING" "$W/log_$part.txt" | head -60
done
if [ -z "${PARTS:-}" ]; then
timeout -s INT -k 15 45 "$NCU" "${common[@]}" --set full --cache-control none -o "$W/corpus_l2" \
  python3 scripts/corpus_launches.py --only l2 --meta "$W/meta_l2.json" > "$W/log_l2.txt" 2>&1
echo "l2 rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^corpus:|==ERROR" "$W/log_l2.txt"
timeout -s INT -k 15 45 "$NCU" "${common[@]}" --set basic -o "$W/corpus_basic" \
  python3 scripts/corpus_launches.py --select cublas_bf16_4096x4096x4096,add_fp32_256M --meta "$W/meta_basic.json" > "$W/log_basic.txt" 2>&1
echo "basic rc=$? $(( $(date +%s) - t0 )) s"; grep -E "^corpus:|==ERROR" "$W/log_basic.txt"
fi
[ -d "$DG_JIT_CACHE_DIR" ] && cp -r "$DG_JIT_CACHE_DIR" "$W/dgcache" && du -sh "$W/dgcache"
ls -la "$W"
XZ_OPT="-T0 -6" tar cJf "$OUT/corpus.tar.xz" -C "$W" . && ls -la "$OUT"
if [ "$(stat -c %s "$OUT/corpus.tar.xz")" -gt 15000000 ]; then
  (cd "$OUT" && split -b 15000000 -d corpus.tar.xz corpus.tar.xz. && rm corpus.tar.xz); ls -la "$OUT"
fi
echo "total $(( $(date +%s) - t0 )) s"
