#!/usr/bin/env bash
# Where do triage's replay passes go? Each metric group alone and candidate lists on torch._scaled_mm,
# then the picked list on the bundled kernel vs --set full (docs/perf.md). Results under $OUT.
set -u
OUT=${OUT:-/tmp/bsprof-ncu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 260 python3 benchmarks/ncu.py triage-search --out "$OUT/search.json" 2>&1 | grep -v '^{' | grep -v '^ ' | tail -30
echo "search $(( $(date +%s) - t0 )) s"
timeout 100 python3 benchmarks/ncu.py triage-vs-full --family fp8-blockwise --variant optimized \
  --search-json "$OUT/search.json" --out "$OUT/picked_opt.json" 2>&1 | grep -v "replay" | grep -v '"' | tail -5
python3 -c "import json; d=json.load(open('$OUT/picked_opt.json')); d.pop('picked', None); print(json.dumps(d, indent=1))" 2>&1 | head -40
echo "total $(( $(date +%s) - t0 )) s"
