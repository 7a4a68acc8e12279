#!/usr/bin/env bash
# Regenerates the shipped sample artifacts (bsprof/data/samples/) by RUNNING the bsprof verbs on the
# repository's real inputs; `bsprof report` with no DIR renders samples/run. No GPU needed.
#
#   scripts/make_samples.sh            (from anywhere; works on the repository it lives in)
#
# Inputs: the H100 Nsight Compute reports in tests/data (the bundled fp8-blockwise optimized kernel,
# --set full with line info; cuBLAS FP8 at the same 4096^3), the real sm_100a cubin in
# tests/data/sass/, the bundled kernels compiled for sm_90a on the CPU, the model's embedded B200
# default, and the H100 timing/validation captures under tests/data/h100_timing/.
# A step whose input or verb is missing says so and is skipped; nothing is hand-written.
set -euo pipefail
cd "$(dirname "$0")/.."
BSPROF=${BSPROF:-"python3 -m bsprof"}
OUT=bsprof/data/samples
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
new="$tmp/samples"; run="$new/run"; mkdir -p "$run" "$new/pair"
skip() { echo "   skipped: $*"; }
# the one directory a verb created under $1 (verbs name their result directories by time)
only_dir() { local d=("$1"/*/); [ ${#d[@]} -eq 1 ] && [ -d "${d[0]}" ] && echo "${d[0]%/}"; }

echo "== ncu: the bundled fp8-blockwise optimized kernel on the H100, 4096^3 (--set full report)"
$BSPROF ncu --report tests/data/h100_bsprof_fp8_optimized.ncu-rep.xz --flops 137438953472 -o "$tmp/ncu_ours" >/dev/null
mv "$(only_dir "$tmp/ncu_ours")" "$run/ncu_h100_fp8_optimized"

echo "== ncu: its peer, cuBLAS FP8 (torch._scaled_mm) at 4096^3 on the same H100"
$BSPROF ncu --report tests/data/h100_cublas_fp8_4096.ncu-rep.xz --flops 137438953472 -o "$tmp/ncu_peer" >/dev/null
mv "$(only_dir "$tmp/ncu_peer")" "$run/ncu_h100_cublas"

echo "== sass: the bundled kernel's SASS from that report, with line info -> warp roles, stall samples per role"
$BSPROF sass tests/data/h100_bsprof_fp8_optimized.ncu-rep.xz \
  --mma-detail --mnkl 4096,4096,4096 --tile-mn 256,128 -o "$run/sass_h100_fp8_optimized" >/dev/null

echo "== sass: NVIDIA's CuTe DSL persistent dense GEMM, sm_100a cubin (2-CTA UTCHMMA, TMA store)"
$BSPROF sass tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.cubin.xz --mma-detail --features \
  -o "$run/sass_sm100a_cubin" >/dev/null

echo "== sass: the bundled fp8-blockwise kernels, compiled for sm_90a on this CPU (the baseline/optimized pair)"
for v in baseline optimized; do
  $BSPROF sass --kernel "$v" --arch sm_90a --features -o "$new/pair/$v/sass" >/dev/null
done

echo "== model: the embedded B200 default: a K-loop x Phase-1 sweep across the binding flip, one projection"
$BSPROF model --sweep kloop=-1000:1500:125,phase1=-1500:500:125 -o "$tmp/model_sweep" >/dev/null 2>&1
mv "$(only_dir "$tmp/model_sweep")" "$run/model_b200_sweep"
$BSPROF model --kloop -300 --phase1 -200 -o "$tmp/model_proj" >/dev/null 2>&1
mv "$(only_dir "$tmp/model_proj")" "$run/model_b200_projection"

cap=${BSPROF_TIMING_CAPTURE:-tests/data/h100_timing}
if [ -d "$cap" ]; then
  echo "== timing + validation: the H100 captures in $cap"
  # each timing capture: its JSON and Parquet table (the CSV twin, Chrome trace and raw buffer stay in
  # tests/data); the optimized one joins the sample run, each variant its side of the pair
  for j in $(grep -l '"kind": *"timing"' -r "$cap" --include='*.json' | sort || true); do
    d=$(dirname "$j")
    v=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('variant', ''))" "$j")
    case "$v" in baseline|optimized) ;; *) continue ;; esac
    [ -d "$tmp/timing/$v" ] && continue
    mkdir -p "$tmp/timing/$v"; cp "$j" "$d"/timing.parquet "$tmp/timing/$v/"
  done
  [ -d "$tmp/timing/optimized" ] && cp -r "$tmp/timing/optimized" "$run/timing_h100"
  if [ -d "$tmp/timing/baseline" ] && [ -d "$tmp/timing/optimized" ]; then  # the pair only with both sides
    for v in baseline optimized; do cp -r "$tmp/timing/$v" "$new/pair/$v/timing"; done
  fi
  # one validation sweep per variant: optimized -> validation_h100, pingpong -> validation_h100_pingpong
  for j in $(grep -l '"kind": *"validation"' -r "$cap" --include='*.json' | sort || true); do
    d=$(dirname "$j")
    v=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('variant', ''))" "$j")
    case "$v" in optimized) out="$run/validation_h100" ;; pingpong) out="$run/validation_h100_pingpong" ;; *) continue ;; esac
    [ -d "$out" ] && continue
    mkdir -p "$out"; cp "$d"/validation.json "$d"/validation.csv "$out/"
  done
else
  skip "no H100 timing capture in $cap"
fi

echo "== bench: an H100 bench capture (bsprof bench --json), when one is shipped in tests/data"
found=""
for j in $(grep -l '"kind": *"bench"' -r tests/data --include='*.json' 2>/dev/null || true); do
  mkdir -p "$run/bench_h100"; cp "$j" "$run/bench_h100/bench.json"; found=1; break
done
[ -n "$found" ] || skip "no bench JSON under tests/data (python3 -m bsprof bench --json > tests/data/h100_bench.json on the H100)"

# the report reads the ncu summaries' JSON; their Parquet twins (one row per launch, 80 KB each) stay out
rm -f "$run"/ncu_*/summary.parquet

rm -rf "$OUT.new" && mv "$new" "$OUT.new"
rm -rf "$OUT" && mv "$OUT.new" "$OUT"
du -sh "$OUT"; (cd "$OUT" && find . -type f | sort)
