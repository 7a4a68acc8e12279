"""Turn the corpus reports (benchmarks/corpus_device.sh) into tests/data/corpus/launches.json.xz:
per launch (keyed by name) the extracted metric columns the verdict reads, ncu's rule results and
what was launched (scripts/corpus_launches.py's meta); xz keeps it at ~40 KB in the repository.
The labels are written by hand, apart, in tests/data/corpus/labels.json.

    python3 scripts/corpus_extract.py DIR_WITH_REPORTS_AND_META [--out tests/data/corpus]

A report whose launches sit in NVTX ranges ``<prefix>_<name>`` (e.g. benchmarks/kloop_probe.py's
``probe_dg_128x576x7168`` and ``probe_128x576x7168_optimized_64x16_1x1``) is added with --report:

    python3 scripts/corpus_extract.py --report probe.ncu-rep --prefix fp8m128_before \
        --collection "--set full --clock-control none" --merge
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

# report stem -> how it was collected (benchmarks/corpus_device.sh)
COLLECTION = {
    "other": "--set full",
    "gemm": "--set full",
    "l2": "--set full --cache-control none",
    "basic": "--set basic",
    "blind_mixed": "--set full",
    "blind_mixed_cute": "--set full",
    "blind_precisions": "--set full",
    "blind_gemm_flags": "--set full",
    "blind_decode_moe_scan": "--set full",
    "blind_fft_adamw_pipes": "--set full",
    "blind_h200": "--set full",
    "blind_h200_second": "--set full",
}


def _clean(v):
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def main(argv=None) -> int:
    from bsprof.analyzers.ncu.extract import extract

    p = argparse.ArgumentParser()
    p.add_argument("src", nargs="?")
    p.add_argument("--out", default="tests/data/corpus")
    p.add_argument("--merge", action="store_true", help="add to (or replace in) the launches already stored")
    p.add_argument("--report", help="one report whose launches are named by their innermost NVTX range")
    p.add_argument("--prefix", default="", help="with --report: the entries' name prefix")
    p.add_argument("--collection", default="--set full", help="with --report: how ncu collected it")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import lzma

    dest = out / "launches.json.xz"
    entries: dict[str, dict] = json.loads(lzma.decompress(dest.read_bytes())) if args.merge and dest.is_file() else {}
    if args.report:
        entries.update(named_launches(Path(args.report), args.prefix, args.collection))
    src = Path(args.src) if args.src else None
    for stem, how in COLLECTION.items() if src else ():
        rep = src / f"corpus_{stem}.ncu-rep"
        if not rep.is_file():
            continue
        meta = json.loads((src / f"meta_{stem}.json").read_text())
        ex = extract(rep)
        seen: dict[str, int] = {}
        for i, (_, row) in enumerate(ex.table.iterrows()):
            # the innermost of our own ranges: a library may push its own inside it (CUB's scan does)
            ranges = row["nvtx"].split(" / ")
            op = next((r for r in reversed(ranges) if r.startswith("corpus_")), ranges[-1]).removeprefix("corpus_")
            k = seen[op] = seen.get(op, -1) + 1
            name = op + (f"__{k}" if k else "") + ("__basic" if stem == "basic" else "")
            cols = {c: _clean(v) for c, v in row.items() if _clean(v) is not None and c != "notes"}
            cols["notes"] = row["notes"]
            entry = {
                "name": name,
                "op": op,
                "collection": how,
                "report": rep.name,
                "launch_in_report": i,
                "device": meta.get("device"),
                "torch": meta.get("torch"),
                "launched": meta["ops"].get(op, {}),
                "columns": cols,
                "rules": ex.rules[i],
            }
            entries[name] = entry
    dest.write_bytes(lzma.compress(json.dumps(entries, indent=0, sort_keys=True).encode(), preset=9))
    print(f"wrote {len(entries)} launches to {dest}")
    return 0


# what a probe launch's NVTX name says it ran
PROBE_SOURCES = (
    ("dg_", "DeepGEMM fp8_gemm_nt (1x128 / 128x128 scales)"),
    ("", "bsprof bundled fp8-blockwise optimized"),
)


def named_launches(report: Path, prefix: str, how: str) -> dict[str, dict]:
    """Entries for the launches of one report, each named by its innermost NVTX range (its first
    "_"-separated word dropped: the probe's own prefix)."""
    from bsprof.analyzers.ncu.extract import extract

    ex = extract(report)
    found: dict[str, dict] = {}
    for i, (_, row) in enumerate(ex.table.iterrows()):
        op = row["nvtx"].split(" / ")[-1].split("_", 1)[-1].replace("_optimized_", "_ours_")
        source = next(text for start, text in PROBE_SOURCES if op.startswith(start))
        name = f"{prefix}_{op}" if prefix else op
        cols = {c: _clean(v) for c, v in row.items() if _clean(v) is not None and c != "notes"}
        cols["notes"] = row["notes"]
        found[name] = {
            "name": name,
            "op": op,
            "collection": how,
            "report": report.name,
            "launch_in_report": i,
            "device": row.get("device"),
            "launched": {"source": source},
            "columns": cols,
            "rules": ex.rules[i],
        }
    return found


if __name__ == "__main__":
    sys.exit(main())
