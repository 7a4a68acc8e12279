"""Build the record of checked change prices (``bsprof/data/model/change_record.json``) from the stored
held-out checks: each check's committed SASS counts and base captures re-projected with this checkout's
pricing (``validate_changes.project_pairs``, no compile), scored against its committed timings, grouped by
what each change touches (``analyzers.model.change_record``). A point the pricing no longer re-projects as
committed (a fit used it, or a count changed, since) is counted apart from the held-out ones.

    python3 scripts/change_record.py bsprof/data/model/change_record.json

Counts committed before a count the pricing reads now existed (the K-loop's barrier probes, the
instructions per warp) lack it: the same builds are compiled again on the CPU, checked against the
committed counts phase by phase, and what was missing is written beside them (``probes.json``,
``per_warp.json``), which the record then merges:

    python3 scripts/change_record.py --probes tests/data/changes_held_out
    python3 scripts/change_record.py --per-warp tests/data/changes_held_out

Counts committed before counts named their compiler were made with nvidia-cutlass-dsl's cu12 compiler,
while every stored check's GPU ran cu13 builds (the device bundle ships cu13 alone), and the two emit
different SASS for some builds. The same builds counted again with the cu13 compiler (refused elsewhere)
go beside them (``counts_cu13.json``), and the record reads those instead:

    python3 scripts/change_record.py --as-run tests/data/changes_held_out

A check whose builds count otherwise since its timing (the counting changed: the phases of a build that runs
the whole K in one pass) is counted again with the counting now (``counts_recounted.json``), which the record
reads instead; the points it moves count apart from the held-out ones:

    python3 scripts/change_record.py --recount tests/data/changes_deepgemm_shapes

How the checked interval's settings compare, each check left out of the quantiles in turn (the shipped
scale per % against others, and one quantile for every kind):

    python3 scripts/change_record.py --checked-scales
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's bsprof, whatever is installed

# the checks made in one call from committed counts (counts.json, bases.tar.xz, projections.json,
# measured.tar.xz), each projected with the pricing as it stands before its pairs were timed
CHECKS = (
    "changes_held_out",
    "changes_stage_counts",
    "changes_ring_tiles",
    "changes_probe",
    "changes_probe_short_k",
    "changes_switches_k_range",
    "changes_per_warp",
    "changes_switches_more_problems",
    "changes_switches_aspect_ratios",
    "changes_switches_short_m",
    "changes_switches_tall_wide",
    "changes_switches_192_rows",
    "changes_switches_256_rows",
    "changes_stage_ring",
    "changes_switches_cu13",
    "changes_switches_cu13_tiles",
    "changes_store_share",
    "changes_rows_128",
    "changes_unseen_pairs",
    "changes_clusters_split_k",
    "changes_scale_loads",
    "changes_split_k_clock",
    "changes_split_k_units",
    "changes_split_k_partials",
    "changes_loads_exposed",
    "changes_tile_widths",
    "changes_tile_widths_112_160",
    "changes_deepgemm_shapes",
)


# a count added to the builds' counts since some checks were committed -> the file beside them holding it
COUNTED_SINCE = {"probes": "probes.json", "per_warp": "per_warp.json", "exposed_loads": "exposed_loads.json"}
# counts the pricing reads only where a pair adds global loads to the K-loop: the others' builds are not
# compiled again for them
READ_WITH_LOADS = ("exposed_loads",)
# what compiled the builds every stored check timed: the device bundle's nvidia-cutlass-dsl, cu13 only
RAN_WITH = "nvidia-cutlass-dsl 4.8.1 cu13"
# a check's builds counted again with that compiler (``as_run``), read instead of counts.json
AS_RUN = "counts_cu13.json"
# a check's builds counted again after its timing by a counting that changed since (the same compiler and
# builds; ``as_run``): read instead of counts.json, so a point it moves counts apart from the held-out ones
RECOUNTED = "counts_recounted.json"


def as_run(run_dir: Path) -> dict:
    """Every build of a check's committed counts counted again with the compiler its GPU ran (``RAN_WITH``),
    on the same problems and base builds; refused where this host compiles with another."""
    from bsprof.kernels.build import dsl_compiler
    from bsprof.profile import validate_changes as VC

    here = dsl_compiler()
    if here != RAN_WITH:
        raise SystemExit(
            f"this host compiles with {here}; the checks ran {RAN_WITH}: pip install 'nvidia-cutlass-dsl[cu13]==4.8.1'"
        )
    committed = json.loads((run_dir / "counts.json").read_text())
    again = VC.count_pairs([e["mnkl"] for e in committed["problems"].values()], tuple(committed["pairs"]))
    for shape, e in committed["problems"].items():
        if again["problems"][shape]["base"] != e["base"]:
            raise SystemExit(
                f"{run_dir.name} {shape}: the base build is {again['problems'][shape]['base']} now, {e['base']} as committed"
            )
    return again


def recount(run_dir: Path, what: str) -> dict:
    """One count (``what``: a key of ``COUNTED_SINCE``) of every build a check's committed counts hold,
    counted again from the same builds compiled here; a build whose phases no longer count as committed
    is refused (the kernel's code moved since), so what is merged comes from the builds that were timed."""
    from bsprof.analyzers.model import change as C
    from bsprof.profile import validate_changes as VC

    committed = merged_counts(run_dir) if what in READ_WITH_LOADS else json.loads((run_dir / "counts.json").read_text())
    pairs = tuple(committed["pairs"])
    if what in READ_WITH_LOADS:
        pairs = tuple(
            sw
            for sw in pairs
            if any(
                sw in e["b"]
                and C.op_delta(C.counts_from_json(e["a"]), C.counts_from_json(e["b"][sw]), ("kloop",), ("LDG",)) >= 0.5
                for e in committed["problems"].values()
            )
        )
    if not pairs:
        return {}
    again = VC.count_pairs([e["mnkl"] for e in committed["problems"].values()], pairs)
    out: dict = {}
    for shape, e in committed["problems"].items():
        builds = [("a", e["a"], again["problems"][shape]["a"])]
        builds += [(sw, b, again["problems"][shape]["b"][sw]) for sw, b in e["b"].items() if sw in pairs]
        for name, was, now in builds:
            if any(abs(was["per_tile"][ph] - now["per_tile"][ph]) > 0.01 for ph in C.PHASES):
                raise SystemExit(f"{run_dir.name} {shape} {name}: the build no longer counts as committed")
        out[shape] = {"a": builds[0][2][what], "b": {name: now[what] for name, _, now in builds[1:]}}
    return out


def with_counted(counts: dict, what: str, got_all: dict) -> dict:
    """Committed counts with one count counted since (``what``) filled in where they lack it."""
    doc = json.loads(json.dumps(counts))
    for shape, e in doc["problems"].items():
        got = got_all.get(shape, {})
        if e["a"].get(what) is None and "a" in got:
            e["a"][what] = got["a"]
        for sw, b in e["b"].items():
            if b.get(what) is None and sw in got.get("b", {}):
                b[what] = got["b"][sw]
    return doc


def committed_counts(run_dir: Path) -> dict:
    """A check's committed counts (``RECOUNTED`` where its builds were counted again since) with what was
    counted since (``COUNTED_SINCE``) merged in."""
    counts = json.loads((run_dir / (RECOUNTED if (run_dir / RECOUNTED).is_file() else "counts.json")).read_text())
    for what, name in COUNTED_SINCE.items():
        if (run_dir / name).is_file():
            counts = with_counted(counts, what, json.loads((run_dir / name).read_text()))
    return counts


def merged_counts(run_dir: Path) -> dict:
    """A check's counts as its GPU ran them (``AS_RUN``) where counted again, else ``committed_counts``."""
    if (run_dir / AS_RUN).is_file():
        counts = json.loads((run_dir / AS_RUN).read_text())
        # a count counted since with this compiler fills what the recount lacked
        for what in READ_WITH_LOADS:
            if (run_dir / COUNTED_SINCE[what]).is_file():
                counts = with_counted(counts, what, json.loads((run_dir / COUNTED_SINCE[what]).read_text()))
        return counts
    return committed_counts(run_dir)


def score_check(run_dir: Path) -> dict:
    """One stored check re-projected from the SASS its GPU ran (``merged_counts``) and its bases, scored
    against its timings. A point is held out while the pricing re-projects, from the counts committed before
    the timing, what was committed (no fit or count-based price has moved it since); ``as_committed`` where
    the projection from the SASS the GPU ran is that too (a recount with the right compiler moved none)."""
    from bsprof.analyzers.model import change as C
    from bsprof.analyzers.model.change_record import AS_COMMITTED_PP
    from bsprof.profile import validate_changes as VC

    counts = merged_counts(run_dir)
    committed = json.loads((run_dir / "projections.json").read_text())
    tar, pairs = run_dir / "bases.tar.xz", tuple(counts["pairs"])
    doc = VC.project_archive(tar, pairs, counts=counts)
    recounted = (run_dir / AS_RUN).is_file()
    priced_then = VC.project_archive(tar, pairs, counts=committed_counts(run_dir)) if recounted else doc
    measured, _ = C.stored_measured(run_dir)
    was = {(p["change"], p["problem"]): p["projected_pct"] for p in committed["points"]}
    then = {(p["change"], p["problem"]): p["projected_pct"] for p in priced_then["points"]}
    kinds = {(p["change"], p["problem"]): p["kinds"] for p in doc["points"]}

    def same(a: float, key) -> bool:
        return abs(a - was.get(key, math.inf)) <= AS_COMMITTED_PP

    points = []
    for p in C.score_run(doc, measured)["points"]:
        key = (p["change"], p["problem"])
        points.append(
            {**p, "kinds": kinds[key], "held_out": same(then[key], key), "as_committed": same(p["projected_pct"], key)}
        )
    return {"run": run_dir.name, "device": measured.get("device") or "", "points": points}


def score_checks(data_dir: Path) -> list[dict]:
    """Every check of CHECKS scored with this checkout's pricing (``score_check``)."""
    return [score_check(data_dir / name) for name in CHECKS]


def build(checks: list[dict]) -> dict:
    from bsprof.analyzers.model.change_record import build_record

    doc = build_record(checks)
    return {"made_by": "python3 scripts/change_record.py bsprof/data/model/change_record.json", **doc}


# the scales per % of projected change the checked interval's is weighed against
CHECKED_SCALES = (0.0, 0.05, 0.1, 0.2, 0.5)


def checked_scales(checks: list[dict]) -> list[str]:
    """One line per setting of the checked interval over scored checks: its left-out coverage and median
    half-width."""
    from bsprof.analyzers.model import change_record as R

    settings = [(f"{c:g} per %, by kind", c, True) for c in CHECKED_SCALES]
    settings.append((f"{R.CHECKED_PER_PCT:g} per %, one quantile for every kind", None, False))
    out = []
    for what, per_pct, by_kind in settings:
        lo = R.left_out_coverage(checks, per_pct, by_kind)
        shipped = " (shipped)" if by_kind and per_pct == R.CHECKED_PER_PCT else ""
        out.append(
            f"{what}{shipped}: {lo['covered']} of {lo['points']} ({100 * lo['covered'] / lo['points']:.1f}%), "
            f"median ±{lo['median_half_pp']:.2f} pp"
        )
    return out


def _check_dir(text: str) -> Path:
    """A stored check's directory: the one-call checks' counts.json must be there."""
    d = Path(text)
    if not (d / "counts.json").is_file():
        raise argparse.ArgumentTypeError(f"{d}: no counts.json there; name a one-call check's directory")
    return d


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="change_record.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out", nargs="?", type=Path, help="the record to write (bsprof/data/model/change_record.json)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--checked-scales", action="store_true", help="the checked interval's settings compared")
    what.add_argument("--as-run", type=_check_dir, metavar="CHECK_DIR", help="count a check's builds with cu13")
    what.add_argument(
        "--recount", type=_check_dir, metavar="CHECK_DIR", help="count a check's builds again with the counting now"
    )
    for name in COUNTED_SINCE:
        what.add_argument(
            f"--{name.replace('_', '-')}", type=_check_dir, metavar="CHECK_DIR", dest=name, help=f"count {name} since"
        )
    args = p.parse_args(argv)
    since = next((name for name in COUNTED_SINCE if getattr(args, name) is not None), None)
    chosen = [x for x in (args.checked_scales, args.as_run is not None, args.recount is not None, since) if x]
    if chosen and args.out is not None:
        p.error(f"{args.out}: a record path goes alone, without --checked-scales, --as-run, --recount or a count")
    if args.checked_scales:
        print("\n".join(checked_scales(score_checks(ROOT / "tests" / "data"))))
        return 0
    if args.as_run is not None:
        (args.as_run / AS_RUN).write_text(json.dumps(as_run(args.as_run), indent=1) + "\n")
        print(f"wrote {args.as_run / AS_RUN}")
        return 0
    if args.recount is not None:
        (args.recount / RECOUNTED).write_text(json.dumps(as_run(args.recount), indent=1) + "\n")
        print(f"wrote {args.recount / RECOUNTED}")
        return 0
    if since is not None:
        run_dir = getattr(args, since)
        (run_dir / COUNTED_SINCE[since]).write_text(json.dumps(recount(run_dir, since), indent=1) + "\n")
        print(f"wrote {run_dir / COUNTED_SINCE[since]}")
        return 0
    if args.out is None:
        p.error("name the record to write (bsprof/data/model/change_record.json), or --checked-scales")
    # checked before the minutes of scoring, so a wrong path costs nothing and replaces nothing
    if args.out.suffix != ".json" or not args.out.parent.is_dir():
        p.error(f"{args.out}: the record is a .json file in an existing directory")
    doc = build(score_checks(ROOT / "tests" / "data"))
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}: {doc['all']['points']} points, {len(doc['kinds'])} kinds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
