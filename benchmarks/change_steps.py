"""The change check in three steps, so the projections can be committed between the GPU calls
(docs/model.md, "Code changes priced from SASS"; the stored runs under tests/data/h*_changes*):

    # 1. GPU: capture each problem's base build (timing table, wall time, sustained clock)
    python3 benchmarks/change_steps.py bases --mnkl "6144,8192,1024;7168,7168,1024" OUT/bases
    tar cJf DIR/bases.tar.xz -C OUT bases
    # 2. CPU: project every pair from the two builds' SASS and those captures; commit DIR/projections.json
    python3 benchmarks/change_steps.py project DIR --pairs "sfb_tma=0;epi_split=0"
    # 3. GPU: time every pair (sustained blocks, seeded shuffle, 5 repeats or --repeats), the bases re-captured
    python3 benchmarks/change_steps.py time DIR/projections.json OUT/run
    tar cJf DIR/measured.tar.xz -C OUT run
    # then, anywhere: bsprof model --validate --changes --from DIR

Where a GPU host is scarce, steps 1-3 fit one call with the SASS half of every projection counted and
committed first (the host needs no nvdisasm; the projection is a pure function of those counts, the
committed pricing and the bases it captures, so the CPU re-derives it afterwards):

    # CPU: compile and count every build; commit DIR/counts.json
    python3 benchmarks/change_steps.py counts --mnkl "8192,5120,3072;..." --pairs "a=0;b=1,c=2" DIR/counts.json
    # GPU, one call: bases, then projections.json (with its sha256) from the counts, then the timing
    python3 benchmarks/change_steps.py run DIR/counts.json OUT
    #   (--only "M,N,K;...": those counted problems alone, where the device time left runs no more)
    # CPU: the same projections from OUT's bases and compiled builds (``project``), compared

`bsprof model --validate --changes --pairs ... --mnkl ...` runs the same steps in one call, with the
projections written (not committed) before the timing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's bsprof, whatever is installed


def _problems(text: str) -> tuple[tuple[int, ...], ...]:
    out = []
    for part in text.split(";"):
        dims = [int(x) for x in part.split(",")]
        out.append(tuple(dims + [1] * (4 - len(dims))))
    return tuple(out)


def bases(mnkl: str, out: Path) -> int:
    from rich.console import Console

    from bsprof.profile import validate_changes as VC

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    doc = VC.capture_bases(_problems(mnkl), out, Console())
    doc["elapsed_s"] = time.time() - t0
    (out / "bases.json").write_text(json.dumps(doc, indent=1, default=float))
    return 0


def project(run: Path, pairs: str) -> int:
    from bsprof.profile import validate_changes as VC

    doc = VC.project_archive(run / "bases.tar.xz", pairs)
    (run / "projections.json").write_text(json.dumps(doc, indent=1))
    print(f"wrote {run / 'projections.json'}: {len(doc['points'])} projections")
    return 0


def time_pairs(projections: Path, out: Path, repeats: int = 5) -> int:
    from rich.console import Console

    from bsprof.profile import validate_changes as VC

    proj = json.loads(projections.read_text())
    # the problems in the order they were projected ("MxNxK", batch 1)
    problems = tuple(dict.fromkeys((*map(int, p["problem"].split("x")), 1) for p in proj["points"]))
    pairs = tuple(proj["pairs"])
    out.mkdir(parents=True, exist_ok=True)
    console, t0 = Console(), time.time()
    done = VC.warm_builds(problems, pairs, jobs=14, timing=True)
    doc_bases = VC.capture_bases(problems, out / "bases", console)
    (out / "bases" / "bases.json").write_text(json.dumps(doc_bases, indent=1, default=float))
    doc = {"device": doc_bases["device"], "device_limits": doc_bases["device_limits"], "warm": done, "problems": {}}
    for mnkl in problems:
        doc["problems"].update(VC.measure_pairs([mnkl], pairs, repeats=repeats, console=console))
        doc["elapsed_s"] = time.time() - t0
        # written after each problem: a call cut short keeps what it measured
        (out / "measured.json").write_text(json.dumps(doc, indent=1, default=float))
    return 0


def counts(mnkl: str, pairs: str, out: Path) -> int:
    from rich.console import Console

    from bsprof.profile import validate_changes as VC

    problems = _problems(mnkl)
    VC.check_problems(problems)
    doc = VC.count_pairs(problems, VC.parse_pairs(pairs, problems), Console())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}: {sum(len(p['b']) for p in doc['problems'].values())} builds counted")
    return 0


def run_all(counts_file: Path, out: Path, repeats: int = 5, only: str | None = None) -> int:
    """Bases, projections from the committed counts (written with their sha256 before any pair is
    timed), then the timing: steps 1-3 in one GPU call. ``only``: 'M,N,K;...', a subset of the counted
    problems (the device time left may not run them all; the others stay counted and untimed)."""
    import hashlib

    from rich.console import Console

    from bsprof.errors import BsprofError
    from bsprof.kernels.build import dsl_compiler
    from bsprof.profile import validate_changes as VC

    doc = json.loads(counts_file.read_text())
    here = dsl_compiler()
    if doc.get("compiler") != here:
        # the projections would price SASS this host does not run (cu12 and cu13 differ: kernels/build.py)
        raise BsprofError(
            f"{counts_file}: counted with {doc.get('compiler') or 'a compiler it does not name'}, but this host "
            f"builds the kernels with {here}; count the pairs again where the compiler is the same"
        )
    if only:
        keep = {VC.shape_key(p) for p in _problems(only)}
        missing = sorted(keep - set(doc["problems"]))
        if missing:
            raise BsprofError(
                f"--only {', '.join(missing)}: not counted in {counts_file} (it holds {', '.join(doc['problems'])})"
            )
        doc = {**doc, "problems": {k: v for k, v in doc["problems"].items() if k in keep}}
    problems = tuple((*p["mnkl"][:3], 1) for p in doc["problems"].values())
    VC.check_problems(problems)  # counted before the check existed: refused here, not after the capture
    bases(";".join(",".join(map(str, p[:3])) for p in problems), out / "bases")
    captured = json.loads((out / "bases" / "bases.json").read_text())
    proj = VC.project_pairs(captured, out / "bases", problems, tuple(doc["pairs"]), console=Console(), counts=doc)
    text = json.dumps(proj, indent=1)
    (out / "projections.json").write_text(text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    (out / "projections.sha256").write_text(
        f"{digest}  projections.json {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
    )
    print(f"projections written before any pair is timed: sha256 {digest}", flush=True)
    return time_pairs(out / "projections.json", out / "run", repeats)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pb = sub.add_parser("bases", help="GPU: capture each problem's base build")
    pb.add_argument("--mnkl", required=True, help="problems 'M,N,K[,L];...'")
    pb.add_argument("out", type=Path)
    pp = sub.add_parser("project", help="CPU: the projections from DIR/bases.tar.xz")
    pp.add_argument("run", type=Path)
    pp.add_argument("--pairs", required=True, help="switch changes 'a=0;b=1,c=2'")
    pt = sub.add_parser("time", help="GPU: time the pairs of a committed projections.json")
    pt.add_argument("projections", type=Path)
    pt.add_argument("out", type=Path)
    pt.add_argument("--repeats", type=int, default=5, help="timed blocks per build (at least 5)")
    pc = sub.add_parser("counts", help="CPU: compile and count every build of the pairs (commit it)")
    pc.add_argument("--mnkl", required=True, help="problems 'M,N,K[,L];...'")
    pc.add_argument("--pairs", required=True, help="switch changes 'a=0;b=1,c=2'")
    pc.add_argument("out", type=Path)
    pr = sub.add_parser("run", help="GPU: bases, projections from committed counts, timing (one call)")
    pr.add_argument("counts", type=Path)
    pr.add_argument("out", type=Path)
    pr.add_argument("--repeats", type=int, default=5, help="timed blocks per build (at least 5)")
    pr.add_argument("--only", help="time these counted problems only: 'M,N,K;...'")
    args = p.parse_args(argv)
    from bsprof.errors import BsprofError

    try:
        if args.cmd == "bases":
            return bases(args.mnkl, args.out)
        if args.cmd == "project":
            return project(args.run, args.pairs)
        if args.cmd == "counts":
            return counts(args.mnkl, args.pairs, args.out)
        if args.cmd == "run":
            return run_all(args.counts, args.out, args.repeats, args.only)
        return time_pairs(args.projections, args.out, args.repeats)
    except (BsprofError, OSError, ValueError, KeyError) as exc:
        # one line naming the problem (no GPU, a missing bases.tar.xz, a pair no problem can build)
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
