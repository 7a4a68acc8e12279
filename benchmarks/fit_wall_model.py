"""Check or refit the wall-time constants of the FP8-blockwise tile choice on stored GPU runs.

The choice (bsprof/kernels/fp8_blockwise/select.py) costs the tiles of two or three consumer
warpgroups on problems that fill the GPU in wall time under the power cap, with constants
(``select.WallFit``) fitted on pairs of configurations the H100 timed side by side. This prints,
for each set of pairs, the error of the modelled ratio of two configurations' times against the
measured one (rms of the log), how often the model orders a pair that differs by more than 2% the
right way round, and per tile its mean error (the model's bias against that tile).

    python3 benchmarks/fit_wall_model.py                      # the shipped constants, stored H100 runs
    python3 benchmarks/fit_wall_model.py --fit                # refit on all of them (needs scipy)
    python3 benchmarks/fit_wall_model.py --fit --fit-on grid  # on the grid alone, the rest held out
    python3 benchmarks/fit_wall_model.py --runs mygrid.json --fit --fit-on mygrid --sms 132

A grid of your own GPU's (what the shipped constants were fitted on; docs/perf.md):
``benchmarks/fp8_blockwise.py --shapes '<M,N,K;...>' --kernels 'optimized
optimized:tile_m=192,tile_n=128,cluster_m=1,cluster_n=2 optimized:tile_m=128,tile_n=160,...'
--rounds 3 --no-peers --json mygrid.json``: every configuration is paired with 192x128 1x2. A run
with a ``given`` configuration per shape pairs the first kernel with it. Refitted constants go
into ``select.WallFit`` by hand, with the run in docs/perf.md.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
# shortk: six problems of 4-12 K blocks timed after the shipped constants were fitted (docs/perf.md),
# held out from them; a refit on every set takes it in like the rest
STORED = {
    "grid": DATA / "h100_fp8_wall_grid.json.xz",
    "ab": DATA / "h100_fp8_wall_ab.json.xz",
    "shortk": DATA / "h100_fp8_wall_shortk.json.xz",
}
STORED_PAIRS = DATA / "h100_fp8_wall_pairs.json"
# the parameters a refit moves, with the range it may take each in
BOUNDS = {
    "per_row": (0, 3),
    "per_column": (0, 3),
    "h192": (0.8, 1.3),
    "h256": (0.8, 1.4),
    "narrow": (0.8, 1.2),
    "end_128": (0, 6000),
    "last_round_base": (0, 1),
}


def load_sets(runs: list[str]) -> dict[str, list[tuple]]:
    """Each set's pairs (problem, configuration a, configuration b, a's time over b's)."""
    from bsprof.analyzers.bench_rows import config_pairs
    from bsprof.errors import BsprofError

    sets = {name: config_pairs(json.loads(lzma.open(path).read())["results"]) for name, path in STORED.items()}
    for p in json.loads(STORED_PAIRS.read_text())["pairs"]:
        sets.setdefault(p["source"], []).append(
            (tuple(p["mnkl"]) + (1,), tuple(p["a"]), tuple(p["b"]), p["time_ratio"])
        )
    for run in runs:
        path = Path(run)
        try:
            doc = json.loads(lzma.open(path).read() if path.suffix == ".xz" else path.read_text())
            sets[path.name.split(".")[0]] = config_pairs(doc["results"])
        except (OSError, ValueError, KeyError, lzma.LZMAError) as exc:
            raise BsprofError(
                f"{run}: not a bench run's JSON ({exc.__class__.__name__}); pass the file "
                "benchmarks/fp8_blockwise.py --json wrote"
            ) from None
    return sets


def to_fit(x: list[float]):
    from bsprof.kernels.fp8_blockwise.select import WallFit

    p = dict(zip(BOUNDS, x))
    return WallFit(
        per_row=p["per_row"],
        per_column=p["per_column"],
        height=((128, 1.0), (192, p["h192"]), (256, p["h256"])),
        narrow=p["narrow"],
        end_128=p["end_128"],
        last_round_base=p["last_round_base"],
    )


def from_fit(fit) -> list[float]:
    h = dict(fit.height)
    return [fit.per_row, fit.per_column, h[192], h[256], fit.narrow, fit.end_128, fit.last_round_base]


def log_errors(pairs: list[tuple], fit, num_sms: int) -> list[float]:
    from bsprof.kernels.fp8_blockwise.select import cost

    def model(mnkl, c):
        return cost(mnkl, *c, num_sms=num_sms, wall_fit=fit).cycles

    return [math.log(model(m, a) / model(m, b)) - math.log(r) for m, a, b, r in pairs]


def report(sets: dict[str, list[tuple]], fit, num_sms: int) -> None:
    from bsprof.kernels.fp8_blockwise.select import fills_gpu

    for name, pairs in sets.items():
        pairs = [p for p in pairs if fills_gpu(p[0], num_sms)]
        if not pairs:
            print(f"{name}: no pair on a problem that fills the GPU")
            continue
        err = log_errors(pairs, fit, num_sms)
        rms = math.sqrt(sum(e * e for e in err) / len(err))
        clear = [(e, r) for e, (_, _, _, r) in zip(err, pairs) if abs(math.log(r)) > 0.02]
        right = sum((e + math.log(r) < 0) == (r < 1) for e, r in clear)
        bias = {}
        for e, (_, a, b, _) in zip(err, pairs):
            bias.setdefault(a[:2], []).append(e)
            bias.setdefault(b[:2], []).append(-e)
        worst = sorted(((sum(v) / len(v), t) for t, v in bias.items()), key=lambda x: -abs(x[0]))[:3]
        print(
            f"{name}: {len(pairs)} pairs, rms log error {rms:.3f}, ordered right {right} of {len(clear)} "
            f"that differ by > 2%; largest mean error by tile: "
            + ", ".join(f"{t[0]}x{t[1]} {m:+.3f}" for m, t in worst)
        )


def refit(sets: dict[str, list[tuple]], on: list[str], start, num_sms: int):
    try:
        from scipy.optimize import minimize
    except ImportError:
        from bsprof.errors import BsprofError

        raise BsprofError("--fit needs scipy: pip install scipy") from None
    from bsprof.kernels.fp8_blockwise.select import fills_gpu

    pairs = [p for name in on for p in sets[name] if fills_gpu(p[0], num_sms)]

    def loss(x):
        err = log_errors(pairs, to_fit(list(x)), num_sms)
        return sum(e * e for e in err) / len(err)

    bounds = list(BOUNDS.values())
    best = minimize(loss, from_fit(start), method="L-BFGS-B", bounds=bounds)
    best = minimize(loss, best.x, method="Powell", bounds=bounds)
    return to_fit([float(v) for v in best.x])


def main(argv=None) -> int:
    from bsprof.errors import BsprofError
    from bsprof.kernels.fp8_blockwise.select import WALL

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="*", default=[], help="more bench runs (benchmarks/fp8_blockwise.py --json)")
    ap.add_argument("--fit", action="store_true", help="refit the constants (needs scipy)")
    ap.add_argument(
        "--fit-on", default=None, help="comma-separated sets to fit on (default: all); the others are held out"
    )
    ap.add_argument("--sms", type=int, default=132, help="the GPU's SM count (132: the H100 SXM)")
    args = ap.parse_args(argv)
    try:
        sets = load_sets(args.runs)
        on = args.fit_on.split(",") if args.fit_on else list(sets)
        unknown = [name for name in on if name not in sets]
        if unknown:
            raise BsprofError(f"--fit-on {','.join(unknown)}: no such set; the sets are {', '.join(sets)}")
        fit = WALL
        if args.fit:
            fit = refit(sets, on, WALL, args.sms)
            shown = ", ".join(f"{k}={round(v, 3)}" for k, v in zip(BOUNDS, from_fit(fit)))
            print(f"refit on {', '.join(on)}: {shown}")
        else:
            print("the shipped constants (select.WALL)")
        report(sets, fit, args.sms)
    except BsprofError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
