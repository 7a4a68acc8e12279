"""Projections and score of the price check (docs/verdict.md, "What the prices are worth").

    # 1. the launches of the reports benchmarks/price_device.sh wrote, by op (tests/data/price/)
    python3 scripts/price_score.py extract DIR_WITH_REPORTS
    # 2. the projections, from the "before" reports alone (committed before the timings are opened)
    python3 scripts/price_score.py project
    # 3. the score against the measured speedups (timings.json from the same device call)
    python3 scripts/price_score.py score

Data in tests/data/price/: labels.json (by hand, before any report was read), pairs_before.ncu-rep.xz,
pairs_after.ncu-rep.xz, launches.json.xz (what step 1 extracted), projections.json, timings.json,
score.json.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "price"
sys.path.insert(0, str(ROOT))  # this checkout's bsprof and scripts, whatever is installed


def launches_of(report: Path) -> dict[str, list[dict]]:
    from bsprof.analyzers.ncu.extract import extract
    from bsprof.analyzers.ncu.price_check import launches_by_range

    return launches_by_range(extract(report))


def load_launches(side: str) -> dict[str, list[dict]]:
    return json.loads(lzma.decompress((DATA / "launches.json.xz").read_bytes()))[side]


def _clean(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def main(argv=None) -> int:
    global DATA
    from scripts.price_pairs import SETS

    p = argparse.ArgumentParser()
    p.add_argument(
        "--set",
        dest="set_name",
        choices=tuple(SETS),
        default="corpus_shapes",
        help="corpus_shapes: tests/data/price; the others: tests/data/price/<set>",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    pe = sub.add_parser("extract")
    pe.add_argument("src")
    sub.add_parser("project")
    sub.add_parser("score")
    args = p.parse_args(argv)
    if args.set_name != "corpus_shapes":
        DATA = DATA / args.set_name
    from bsprof.analyzers.ncu.price_check import duration_ratio, project_pairs, score

    labels = json.loads((DATA / "labels.json").read_text())
    pairs = json.loads((DATA / "pairs.json").read_text()) if (DATA / "pairs.json").is_file() else {}
    if args.cmd == "extract":
        src = Path(args.src)
        data = {}
        for side in ("before", "after"):
            # pairs_<side>.ncu-rep, then pairs_<side>_only.ncu-rep (the ops a time limit cut from the first)
            for rep in (src / f"pairs_{side}.ncu-rep", src / f"pairs_{side}_only.ncu-rep"):
                if rep.is_file():
                    data.setdefault(side, {}).update(launches_of(rep))
        (DATA / "launches.json.xz").write_bytes(lzma.compress(json.dumps(data, sort_keys=True).encode(), preset=9))
        (DATA / "pairs.json").write_text(json.dumps({k: list(v) for k, v in SETS[args.set_name][1].items()}, indent=1))
        print({k: sorted(v) for k, v in data.items()})
        return 0
    need = {"project": "launches.json.xz", "score": "timings.json"}.get(args.cmd)
    if need and not (DATA / need).is_file():
        print(
            f"error: {DATA / need} is missing; run `scripts/price_score.py --set {args.set_name} extract DIR` on "
            "the reports of benchmarks/price_device.sh first (score also needs its timings.json)",
            file=sys.stderr,
        )
        return 2
    if args.cmd == "project":
        proj = project_pairs(load_launches("before"), labels, pairs)
        (DATA / "projections.json").write_text(json.dumps(proj, indent=1, default=_clean))
        for pair, pr in proj.items():
            print(f"{pair:22s} {pr['advice'] or '-':34s} {pr['price'].get('text') or pr['price'].get('why')}")
        return 0
    proj = project_pairs(load_launches("before"), labels, pairs)
    timings = json.loads((DATA / "timings.json").read_text())
    measured = {k: v["speedup"] for k, v in timings["pairs"].items() if v.get("speedup")}
    res = score(proj, measured, labels["two_lines"])
    # the same pairs with ncu's own durations of the before and after launches as the measurement
    res_ncu = score(proj, duration_ratio(load_launches("before"), load_launches("after"), pairs), labels["two_lines"])
    (DATA / "score.json").write_text(json.dumps({"events": res, "ncu_durations": res_ncu}, indent=1, default=_clean))
    print_score(
        res, f"measured: CUDA events, {timings['device']}, {timings['runs']} runs x {timings['reps']} calls, median"
    )
    print_score(res_ncu, "measured: ncu's gpu__time_duration of the before and after launches (same device call)")
    return 0


def print_score(res: dict, title: str) -> None:
    print(title)
    print(f"{'pair':22s} {'measured':>8s} {'bsprof':>11s} {'in':>3s} {'ncu':>6s}  binds")
    for r in res["pairs"]:
        rng = f"{r['low']:.2f}-{r['high']:.2f}" if not math.isnan(r["low"]) else "unbounded"
        ncu = f"{r['ncu_speedup']:.2f}" if not math.isnan(r["ncu_speedup"]) else "-"
        print(
            f"{r['pair']:22s} {r['measured'] or math.nan:8.2f} {rng:>11s} {'y' if r['inside'] else 'n':>3s} "
            f"{ncu:>6s}  {r['binds']}"
        )
    print(
        f"inside {res['inside']}/{res['n']} ({100 * res['inside_share']:.0f}%), median width "
        f"{res['median_width']:.2f}, median projected/measured {res['median_ratio']:.2f} (spread x"
        f"{res['spread']:.2f}); ncu: median {res['ncu_median_ratio']:.2f}, spread x{res['ncu_spread']:.2f} "
        f"on {res['ncu_n']}; same {res['same_pairs']} pairs: bsprof x{res['spread_same_pairs']:.2f}, "
        f"ncu x{res['ncu_spread_same_pairs']:.2f}"
    )
    for before, o in res["order"].items():
        print(
            f"order {before}: projected {o['projected_mid']} measured {o['measured']} -> "
            f"{'match' if o['match'] else 'no match'}"
        )


if __name__ == "__main__":
    sys.exit(main())
