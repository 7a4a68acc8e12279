"""Re-project a stored `bsprof model --validate --changes` run with the current pricing, on the CPU:
the same base captures, both builds of every pair compiled here for their SASS (cached; the compiler
flavor installed here must be the GPU's, cu13: kernels/build.py), or for a one-call check its builds counted
again with that compiler where they were (counts_cu13.json), else its committed counts with what was counted
since; the projections written as the run's step 2 writes them. In-sample where the pricing was fitted on
the run (docs/model.md, "Code changes priced from SASS").

    python3 scripts/reproject_changes.py tests/data/h200_changes /tmp/projections.json
    python3 scripts/reproject_changes.py tests/data/h100_changes_pairs /tmp/projections.json
    bsprof model --validate --changes --from DIR   # with DIR holding those projections and measured.tar.xz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's bsprof, whatever is installed


def _run_dir(text: str) -> Path:
    """A stored change run: its committed projections.json and the archive of its base captures."""
    run = Path(text)
    if not (run / "projections.json").is_file() or not any(
        (run / name).is_file() for name in ("bases.tar.xz", "measured.tar.xz")
    ):
        raise argparse.ArgumentTypeError(
            f"{run}: no stored change run there (projections.json with bases.tar.xz or measured.tar.xz)"
        )
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="reproject_changes.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", type=_run_dir, help="a stored run, e.g. tests/data/h200_changes")
    p.add_argument("out", type=Path, help="the projections to write (.json)")
    args = p.parse_args(argv)
    run, out = args.run, args.out
    if out.suffix != ".json" or not out.parent.is_dir():
        p.error(f"{out}: the projections are a .json file in an existing directory")
    from bsprof.profile import validate_changes as VC

    # the base captures the projections came from: step 1's bases.tar.xz where the run was made in
    # steps, else the one-command run's measured.tar.xz (its bases/ beside measured.json)
    tar = run / "bases.tar.xz" if (run / "bases.tar.xz").is_file() else run / "measured.tar.xz"
    committed = json.loads((run / "projections.json").read_text())
    if (run / "counts.json").is_file():  # a one-call check: its counts, nothing compiled
        from change_record import merged_counts  # beside this script

        counts = merged_counts(run)
        doc = VC.project_archive(tar, tuple(counts["pairs"]), counts=counts)
    else:
        doc = VC.project_archive(tar, tuple(committed.get("pairs") or VC.PAIRS))  # the changes the run timed
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}: {len(doc['points'])} projections")
    return 0


if __name__ == "__main__":
    sys.exit(main())
