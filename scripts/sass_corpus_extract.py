"""Turn launches of .ncu-rep reports into a SASS corpus file like tests/data/sass/h100_gemm_corpus_sass.json.xz:
per launch the name, arch, PCs (relative to the first), SASS text and ``inst_executed`` per PC from
SourceCounters. The reports are tens of MB; the SASS and counts of a few launches, xz-compressed,
are a few hundred KB, and the K-loop tests need nothing else. Labels are written apart, by hand,
in tests/data/sass/kloop_labels.json.

    python3 scripts/sass_corpus_extract.py --out tests/data/sass/h200_gemm_corpus_sass.json.xz \\
        --about "..." REPORT:LAUNCH:OP:M,N,K:SOURCE ...

M,N,K may be ``-`` where the launch is no single GEMM (grouped, batched, attention).
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path


def launch_entry(report: str, launch: int, op: str, mnk: list[int] | None, source: str) -> dict:
    """One corpus entry: what the K-loop tests rebuild the function and its counts from."""
    from bsprof.analyzers.sass.ncu_source import read_source_counters

    (sc,) = read_source_counters(report, launch=launch)
    fn = sc.function
    return {
        "op": op,
        "mnk": mnk,
        "source": source,
        "name": sc.name,
        "arch": fn.arch,
        "pc_base": fn.pc_base,
        "pcs": [ins.pc for ins in fn.instructions],
        "sass": [ins.text for ins in fn.instructions],
        "executed": sc.executed,
    }


def _spec(text: str) -> tuple[str, int, str, list[int] | None, str]:
    # split from the left: the free-text source is last and may hold colons of its own
    report, launch, op, mnk, source = text.split(":", 4) if text.count(":") >= 4 else (None,) * 5
    if report is None:
        raise SystemExit(f"bad launch spec {text!r}: expected REPORT:LAUNCH:OP:M,N,K:SOURCE")
    return report, int(launch), op, None if mnk == "-" else [int(x) for x in mnk.split(",")], source


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument(
        "launches", nargs="+", help="REPORT:LAUNCH:OP:M,N,K:SOURCE (LAUNCH as `bsprof ncu --report` numbers it)"
    )
    p.add_argument("--out", required=True)
    p.add_argument("--about", default="")
    args = p.parse_args(argv)
    entries = [launch_entry(*_spec(s)) for s in args.launches]
    data = json.dumps({"about": args.about, "launches": entries}, separators=(",", ":")).encode()
    Path(args.out).write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    print(f"wrote {len(entries)} launches to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
