"""`bsprof model --validate --changes`: code changes priced from their SASS, then timed on the GPU.

Each point is a (switch pair, problem): the bundled FP8 kernel's base build (``optimized`` with the
problem's tile pinned) and the same build with one switch changed. The projection comes from the
two builds' SASS (compiled on the CPU) and the base build's timing capture alone
(``analyzers.model.change``); the measurement times both plain builds in sustained blocks, the
builds of one problem interleaved in one process in a seeded shuffle, ``repeats`` blocks each after one
round that is not scored (``WARMUP_REPEATS``; ``profile.validate.sustained_walls``, the protocol of
``--validate``).

Three steps, each usable alone so the projections can be written (and committed) before any wall
time is measured:

1. :func:`capture_bases` (GPU): per problem, the base build's timing capture, its capture wall time,
   and its sustained SM clock and power; the device's limits.
2. ``analyzers.model.change.project_switch_pairs`` (CPU): the projections, from 1 and the SASS.
3. :func:`measure_pairs` (GPU): the wall times; ``analyzers.model.change.score_changes`` scores them.
"""

from __future__ import annotations

import time
from pathlib import Path

from bsprof.kernels.api import Target

FAMILY = "fp8-blockwise"
# switch pairs that change the SASS of different phases (base -> this switch); the delay-injection
# spins of `--validate` are not among them
PAIRS = (
    "uniform_desc=0",
    "elect_release=0",
    "peek=0",
    "ring_unroll=0",
    "sfb_tma=0",
    "sfa_tma=0",
    "epi_split=0",
    "epilogue=direct",
    "ab_stage=2",
    "ab_stage=3",
    "swizzle=8",
)
# the problems of the shipped run: two the kernel was tuned on, one no fit has used
PROBLEMS = ((4096, 4096, 4096, 1), (8192, 8192, 1024, 1), (6144, 5120, 2560, 1))
BASE_CLOCK_REPEATS = 3
# untimed-for-scoring rounds before a problem's repeats: every build once in the shuffled order, kept in
# the record as ``warmup_walls_us``. Why: in two of fourteen stored checks the first repeat measured most
# changes 4-9 pp apart from the other four (the base's first block ran slow, just after the builds were
# loaded), which the mean of five paired ratios cannot absorb
WARMUP_REPEATS = 1
# SMs the persistent grid spreads tiles over (H100 and H200 SXM): only the prologue's share per tile uses it
SMS = 132


def base_spec(mnkl, variant: str = "optimized") -> str:
    """The base build of a problem with the launcher's tile and cluster pinned, so a switch that the
    per-problem tile choice reads cannot move the pair onto another tile."""
    from bsprof.kernels.fp8_blockwise.launch import plan

    p = plan(variant, tuple(mnkl))
    tm, tn = (int(x) for x in p["tile"].split("x"))
    cm, cn = (int(x) for x in p["cluster"].split("x"))
    return f"{variant}:tile_m={tm},tile_n={tn},cluster_m={cm},cluster_n={cn}"


def pair_spec(base: str, switch: str) -> str:
    return f"{base},{switch}"


def shape_key(mnkl) -> str:
    return "x".join(str(int(v)) for v in tuple(mnkl)[:3])


def capture_bases(problems, out_dir, console=None, *, repeats: int = BASE_CLOCK_REPEATS) -> dict:
    """Step 1 on the GPU: per problem the base build's timing table (``<shape>.parquet`` in
    ``out_dir``), the capture's wall time and the base plain build's sustained clock and power."""
    from bsprof.analyzers.model.validation import capture_clock
    from bsprof.analyzers.timing.io import write_table
    from bsprof.gpu import device_info
    from bsprof.kernels.build import dsl_compiler
    from bsprof.profile import timing_capture as tc
    from bsprof.profile.validate import (
        device_limits,
        phase_means,
        sustained_summary,
        sustained_walls,
    )

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    info = device_info()
    limits = device_limits()
    doc: dict = {
        "device": info["name"],
        "compiler": dsl_compiler(),
        "capability": list(info["capability"]),
        "device_limits": limits,
        "problems": {},
    }
    for mnkl in problems:
        key, spec = shape_key(mnkl), base_spec(mnkl)
        t0 = time.time()
        cap = tc.capture(Target.parse(FAMILY, spec, tuple(mnkl)).prepare(timing=True))
        write_table(cap.table, out_dir, stem=key, csv=False)
        cyc, ghz = capture_clock(cap.table)
        launchers = {"base": Target.parse(FAMILY, spec, tuple(mnkl)).prepare(timing=False)}
        walls, reads, how = sustained_walls(launchers, ["base"], repeats)
        doc["problems"][key] = {
            "mnkl": list(mnkl),
            "base": spec,
            "capture_wall_us": cap.wall_us,
            "capture_cycles": cyc,
            "capture_ghz": ghz,
            "phase_means": phase_means(cap.table),
            "table": f"{key}.parquet",
            "base_wall_us": walls["base"],
            "wall_timed_with": how,
            "sustained": sustained_summary(reads).get("base"),
            "blocks": reads.get("base", []),
            "elapsed_s": time.time() - t0,
        }
        if console is not None:
            console.print(
                f"{key}: {spec} capture {cap.wall_us:.1f} us, sustained "
                f"{(doc['problems'][key]['sustained'] or {}).get('mhz')} MHz",
                markup=False,
            )
        del cap, launchers
    return doc


def measure_pairs(problems, pairs, repeats: int = 5, console=None) -> dict:
    """Step 3 on the GPU: per problem the base build and every pair's changed build, timed in
    sustained blocks, interleaved in a seeded shuffle per repeat, after ``WARMUP_REPEATS`` rounds that
    are recorded apart and not scored. Returns {shape: {walls_us, reads, warmup_walls_us, ...}}."""
    from bsprof.errors import BsprofError
    from bsprof.profile.validate import sustained_summary, sustained_walls

    if repeats < 5:
        raise BsprofError(f"--repeats {repeats}: a point needs at least 5 repeats for its confidence interval")
    out: dict = {}
    for mnkl in problems:
        key, base = shape_key(mnkl), base_spec(mnkl)
        t0 = time.time()
        launchers, failed = {"base": Target.parse(FAMILY, base, tuple(mnkl)).prepare(timing=False)}, {}
        for sw in pairs:
            try:
                launchers[sw] = Target.parse(FAMILY, pair_spec(base, sw), tuple(mnkl)).prepare(timing=False)
            except Exception as exc:  # noqa: BLE001 - one build that does not combine: the rest still run
                failed[sw] = f"{type(exc).__name__}: {exc}"[:300]
        built = time.time() - t0
        walls, reads, how = sustained_walls(launchers, list(launchers), WARMUP_REPEATS + repeats)
        warm = {k: w[:WARMUP_REPEATS] for k, w in walls.items()}
        walls = {k: w[WARMUP_REPEATS:] for k, w in walls.items()}
        reads = {k: r[WARMUP_REPEATS:] for k, r in reads.items()}
        out[key] = {
            "mnkl": list(mnkl),
            "base": base,
            "walls_us": walls,
            "reads": reads,
            "warmup_walls_us": warm,
            "timed_with": how,
            "sustained": sustained_summary(reads),
            "failed": failed,
            "build_s": built,
            "elapsed_s": time.time() - t0,
        }
        if console is not None:
            console.print(f"{key}: {len(launchers)} builds timed ({built:.0f} s to build)", markup=False)
        launchers.clear()
    return out


def switch_stages(spec: str, mnkl) -> int:
    """The A/B ring depth a bundled build gets (its configuration, as the launcher resolves it)."""
    from bsprof.kernels.fp8_blockwise import config as cfg
    from bsprof.kernels.fp8_blockwise.launch import plan

    variant, over = cfg.parse_spec(spec)
    return int(plan(variant, tuple(mnkl), **over)["smem_stages"])


def bundled_cubin(spec: str, mnkl, keep_dir: Path | None = None) -> tuple[Path, tuple[int, int]]:
    """A bundled build compiled on the CPU with line info; copied into ``keep_dir`` when given (the
    compile's own output is one file per variant, replaced by the next build)."""
    import shutil

    from bsprof.kernels.api import compile_for_sass

    cubin, tile = compile_for_sass(spec, "sm_90a", tuple(mnkl))
    if keep_dir is not None:
        keep_dir.mkdir(parents=True, exist_ok=True)
        dst = keep_dir / f"{spec.replace(':', '__').replace(',', '_').replace('=', '-')}.{shape_key(mnkl)}.cubin"
        shutil.copy(cubin, dst)
        cubin = dst
    return cubin, tile


def consumer_warpgroups(tile_m: int) -> int:
    from bsprof.kernels.fp8_blockwise import config as cfg

    return cfg.consumer_wgs(tile_m)


def output_tiles(mnkl, tm: int, tn: int) -> int:
    """The output tiles of a problem (M, N, K[, L]) on a tm x tn tile."""
    import math

    return math.ceil(mnkl[0] / tm) * math.ceil(mnkl[1] / tn) * (mnkl[3] if len(mnkl) > 3 else 1)


def _problem_count(mnkl, tm: int, tn: int) -> dict:
    """count_build's arguments for a problem on a tile: K blocks, warpgroups, tiles per CTA."""

    from bsprof.analyzers.model import change as C

    tiles = output_tiles(mnkl, tm, tn)
    wgs = consumer_warpgroups(tm)
    return {"k_blocks": -(-mnkl[2] // C.BLOCK_K), "tile_m": tm, "consumer_wgs": wgs, "tiles_per_cta": tiles / SMS}


def _counted(spec: str, mnkl, count: dict, cubin_dir=None):
    """One bundled build compiled on the CPU and counted per phase (``change.count_build``)."""
    from bsprof.analyzers.model import change as C
    from bsprof.analyzers.sass import analyze_cubin

    cubin, _ = bundled_cubin(spec, mnkl, cubin_dir)
    return C.count_build(analyze_cubin(cubin)[0], spec, **count)


def count_pairs(problems, pairs=PAIRS, console=None) -> dict:
    """The SASS half of every projection, on the CPU: each problem's base build and every pair's build
    compiled and counted per phase (``change.count_build``). What step 2 reads instead of compiling, so a
    GPU host without nvdisasm can project between capturing the bases and timing the pairs (one call),
    from counts committed before it. Returns {"pairs", "problems": {shape: {mnkl, base, tile, a, b}}}."""
    from bsprof.analyzers.model import change as C
    from bsprof.errors import BsprofError
    from bsprof.kernels.build import dsl_compiler

    # the compiler goes with the counts: a GPU that runs another flavor's builds runs other SASS
    out: dict = {"pairs": list(pairs), "compiler": dsl_compiler(), "problems": {}}
    for mnkl in problems:
        mnkl = tuple(mnkl)
        base = base_spec(mnkl)
        _, (tm, tn) = bundled_cubin(base, mnkl)
        count = _problem_count(mnkl, tm, tn)
        entry = {"mnkl": list(mnkl), "base": base, "tile": [tm, tn], "failed": {}, "b": {}}
        entry["a"] = C.counts_json(_counted(base, mnkl, count))
        for sw in pairs:
            try:
                entry["b"][sw] = C.counts_json(_counted(pair_spec(base, sw), mnkl, count))
            except BsprofError as exc:
                entry["failed"][sw] = str(exc)[:300]
                continue
            if console is not None:
                console.print(f"{shape_key(mnkl)} {sw}: counted", markup=False)
        out["problems"][shape_key(mnkl)] = entry
    return out


def project_pairs(
    bases: dict, tables_dir, problems=None, pairs=PAIRS, cubin_dir=None, console=None, counts: dict | None = None
) -> dict:
    """Step 2 on the CPU: every (pair, problem)'s projection from the two builds' SASS and the base
    build's capture (``bases``: what :func:`capture_bases` returned; ``tables_dir``: its tables).
    ``counts``: what :func:`count_pairs` returned, read instead of compiling the builds.
    Returns {"points": [...], ...}: what is committed before the wall times are measured."""

    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model import change as C
    from bsprof.analyzers.timing.table import load
    from bsprof.errors import BsprofError

    tables_dir = Path(tables_dir)
    cubin_dir = Path(cubin_dir) if cubin_dir is not None else None
    points, failed = [], {}
    for key, info in bases["problems"].items():
        if problems is not None and key not in {shape_key(p) for p in problems}:
            continue
        mnkl, base = tuple(info["mnkl"]), info["base"]
        k_blocks = -(-mnkl[2] // C.BLOCK_K)
        table = load(tables_dir / info["table"])
        params = calibrate(table)
        counted = (counts or {}).get("problems", {}).get(key)
        if counts is not None and (counted is None or counted["base"] != base):
            raise BsprofError(f"{key}: the counts hold no base build {base}; count this problem's pairs first")
        tm, tn = counted["tile"] if counted is not None else bundled_cubin(base, mnkl, cubin_dir)[1]
        count = _problem_count(mnkl, tm, tn)
        wgs = count["consumer_wgs"]
        bm = C.base_measurement(
            params,
            table,
            info["capture_wall_us"],
            (info.get("sustained") or {}),
            bases.get("device_limits"),
            bases.get("device", ""),
            producer=info.get("phase_means", {}).get("producer.load"),
        )
        A = C.counts_from_json(counted["a"]) if counted else _counted(base, mnkl, count, cubin_dir)
        costs = C.calibrate_costs(A, bm.phases, k_blocks, tile_mn=(tm, tn), consumer_warps=4 * wgs)
        sa = switch_stages(base, mnkl)
        for sw in pairs:
            spec = pair_spec(base, sw)
            if counted is not None:
                if sw not in counted["b"]:
                    failed.setdefault(key, {})[sw] = counted["failed"].get(sw, "not in the counts")
                    continue
                B = C.counts_from_json(counted["b"][sw])
            else:
                try:
                    B = _counted(spec, mnkl, count, cubin_dir)
                except BsprofError as exc:
                    # a change this problem's build cannot take: named, the other pairs still projected
                    failed.setdefault(key, {})[sw] = str(exc)[:300]
                    continue
            est = C.estimate_change(
                A,
                B,
                costs,
                k_blocks,
                mechanisms=_mechanisms(base, spec),
                tile_cycles=bm.tile_cycles,
                stages=(sa, switch_stages(spec, mnkl)),
                first_load=bm.first_load,
                consumer_warps=4 * wgs,
                tie_wait=bm.tie_wait,
                store=C.store_cycles(bm),
                tile_m=tm,
                **switch_traffic(base, spec),
            )
            pr = C.project_change(params, est, bm)
            points.append(C.point_record(sw, key, pr))
            if console is not None:
                console.print(
                    f"{key} {sw}: {pr.wall_pct:+.2f}% [{100 * (pr.wall_lo - 1):+.2f}, "
                    f"{100 * (pr.wall_hi - 1):+.2f}] (count rule {100 * (pr.count_rule_ratio - 1):+.2f}%)",
                    markup=False,
                )
    doc = {"device": bases.get("device"), "noise_pp": C.NOISE_PP, "pairs": list(pairs), "points": points}
    return {**doc, "failed": failed} if failed else doc


def project_archive(tar: Path, pairs: str | tuple[str, ...] | None = None, counts: dict | None = None) -> dict:
    """The projections of a stored run from the base captures in its archive (``bases.tar.xz``, or a
    one-command run's ``measured.tar.xz``, whose ``bases/`` sits beside ``measured.json``): every problem
    captured there, ``pairs`` as --pairs text or a tuple (default: the shipped validation's), both builds
    of each compiled here for their SASS, or read from ``counts`` (:func:`count_pairs`) where given."""
    import json
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tar) as tf:
            tf.extractall(tmp, filter="data")
        bases_dir = next(p.parent for p in Path(tmp).rglob("bases.json"))
        bases = json.loads((bases_dir / "bases.json").read_text())
        problems = [tuple(p["mnkl"]) for p in bases["problems"].values()]
        wanted = parse_pairs(pairs, problems) if isinstance(pairs, str) else tuple(pairs or PAIRS)
        cubins = Path(tmp) / "cubins"
        cubins.mkdir()
        return project_pairs(bases, bases_dir, problems=problems, pairs=wanted, cubin_dir=cubins, counts=counts)


# the capture's tile period is a CTA's slope from its second tile to its last (calibrate.observed_period):
# a problem whose tiles fill fewer rounds of the persistent grid leaves it nothing to measure
MIN_TILE_ROUNDS = 3


def check_problems(problems) -> None:
    """One error line, before any compiling or GPU work, for a problem too small for its base capture
    (its planned tile fills fewer than ``MIN_TILE_ROUNDS`` rounds of the persistent grid)."""
    import math

    from bsprof.errors import BsprofError
    from bsprof.kernels.fp8_blockwise.launch import plan

    for mnkl in problems:
        tm, tn = (int(x) for x in plan("optimized", tuple(mnkl))["tile"].split("x"))
        tiles = output_tiles(mnkl, tm, tn)
        rounds = math.ceil(tiles / SMS)
        if rounds >= MIN_TILE_ROUNDS:
            continue
        raise BsprofError(
            f"{shape_key(mnkl)}: its {tm}x{tn} tile gives {tiles} tiles, {rounds} round(s) of the {SMS}-CTA "
            f"persistent grid; the base capture measures the tile period from a CTA's second to its last "
            f"tile, so it needs at least {MIN_TILE_ROUNDS} rounds: choose a larger M or N"
        )


def parse_pairs(text: str, problems) -> tuple[str, ...]:
    """--pairs 'a=0;b=1,c=2': each entry the switches one changed build sets on every problem's base build.
    Each is parsed against every problem's base (an unknown switch or a value the kernel cannot take is
    one error line here, before any GPU work)."""
    from bsprof.errors import BsprofError

    out = tuple(p.strip() for p in text.split(";") if p.strip())
    if not out:
        raise BsprofError(f"--pairs {text!r}: name at least one switch change, e.g. --pairs 'ab_stage=2;peek=0'")
    bases = {tuple(mnkl): base_spec(mnkl) for mnkl in problems}  # each problem's planned base, once
    for sw in out:
        if not all("=" in kv for kv in sw.split(",")):
            raise BsprofError(f"--pairs: {sw!r} is not switch=value[,switch=value]; e.g. --pairs 'ab_stage=2;peek=0'")
        only_stages = {kv.split("=")[0].strip() for kv in sw.split(",")} == {"ab_stage"}
        for mnkl, base in bases.items():
            try:
                Target.parse(FAMILY, pair_spec(base, sw), tuple(mnkl))
                stages = switch_stages(pair_spec(base, sw), mnkl)  # the problem's launch plan takes it
                if only_stages and stages == switch_stages(base, mnkl):
                    # shared memory holds no more stages than the base has: the same build, timed as noise
                    raise BsprofError(f"it plans {stages} stages, the base build's own: the same kernel")
            except BsprofError as exc:
                raise BsprofError(
                    f"--pairs {sw!r} on {shape_key(mnkl)} ({base.split(':', 1)[1]}): {exc}; drop "
                    "it or choose problems whose tile takes it"
                ) from None
    return out


def validate_changes(problems, repeats: int, out, console=None, *, pairs=PAIRS) -> tuple[dict, Path]:
    """The whole check on a GPU, into a results directory ``out``: each problem's base build captured,
    every pair projected from SASS and the projections written, then the pairs timed and scored.
    Returns (the score, the directory)."""
    from bsprof.analyzers.model.change import score_run
    from bsprof.artifacts import dumps
    from bsprof.io import ensure_dir, results_dir, write_text_atomic

    # the run lands whole when it ends (an interrupted one leaves nothing); inside it the projections
    # are written before any pair is timed
    with results_dir(out, "validation-changes") as staged:
        d = staged.path
        bases = capture_bases(problems, ensure_dir(d / "bases"), console)
        write_text_atomic(d / "bases" / "bases.json", dumps(bases))
        proj = project_pairs(bases, d / "bases", problems, pairs=pairs, console=console)
        write_text_atomic(d / "projections.json", dumps(proj))
        if console is not None:
            console.print("projections written (projections.json) before any pair is timed", markup=False)
        measured = {
            "device": bases["device"],
            "device_limits": bases["device_limits"],
            "problems": measure_pairs(problems, pairs, repeats, console),
        }
        write_text_atomic(d / "measured.json", dumps(measured))
        scored = score_run(proj, measured)
        write_text_atomic(d / "validation.json", dumps(scored))
    return scored, staged.path


def _warm_one(spec: str, mnkl: tuple, timing: bool = False) -> str:
    """Build one kernel in a worker process: the JIT compile lands in CuTe DSL's on-disk cache, which
    the timing process then reads instead of compiling again."""
    t0 = time.time()
    try:
        Target.parse(FAMILY, spec, tuple(mnkl)).prepare(timing=timing)
        return f"{spec} {shape_key(mnkl)}{' timing' if timing else ''}: {time.time() - t0:.0f} s"
    except Exception as exc:  # noqa: BLE001 - reported again by the timed run
        return f"{spec} {shape_key(mnkl)}: failed ({type(exc).__name__})"


def warm_builds(problems, pairs=PAIRS, jobs: int = 12, timing: bool = False) -> list[str]:
    """Every build of the measurement compiled in ``jobs`` spawned processes (one compile each at a
    time; the GPU host has the cores); ``timing``: the base builds' timing builds too."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    work = []
    for mnkl in problems:
        base = base_spec(mnkl)
        work += [(base, tuple(mnkl), False)] + [(pair_spec(base, sw), tuple(mnkl), False) for sw in pairs]
        if timing:
            work.append((base, tuple(mnkl), True))
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
        return list(ex.map(_warm_one, *zip(*work)))


# --- `bsprof model --change`: the chain for one pair, on the CPU --------------------------------

BORROWED = {"rate": None, "from": ""}  # filled from the shipped sample capture when a pair has none


def _missing_file(item: str):
    """The error for a build that names a file that is not there (a path, or a name with a file's
    suffix: no bundled variant has a '/' or a '.'), rather than judging it as a bundled spec."""
    from bsprof.errors import BsprofError

    if "/" in item or "." in item.partition(":")[0]:
        what = "a dangling link" if Path(item).is_symlink() else "no such file"
        return BsprofError(
            f"--change {item}: {what}; give a cubin or SASS listing that exists, "
            "or a bundled spec such as optimized:uniform_desc=0"
        )
    return None


def _is_spec(item: str) -> bool:
    """Whether a --change build names a bundled kernel (variant:switches), not a file."""
    return not Path(item).exists() and _missing_file(item) is None


def _refuse_before_compiling(a: str, b: str, mnkl, tile_mn=None) -> None:
    """One line, before anything compiles, where two bundled specs resolve to the same build (a switch the
    base already sets that way prices nothing, and a price of 0 would read as a measured no-op), to two
    output tiles (``_refuse_retiled``), or A to another tile than the capture's (``_refuse_other_capture``)."""
    from bsprof.errors import BsprofError
    from bsprof.kernels.fp8_blockwise import config as cfg

    try:
        ra, rb = (cfg.resolve(*cfg.parse_spec(x)) for x in (a, b))
    except (BsprofError, ValueError, KeyError):  # a spec the kernel refuses is named where it is compiled
        return
    if ra == rb:
        where = f" at {shape_key(mnkl)}" if mnkl else ""
        raise BsprofError(
            f"--change: {b} is the same build as {a}{where} (the base already sets what it names); "
            "name a switch the base sets otherwise"
        )
    ta, tb = ((r.get("tile_m"), r.get("tile_n")) for r in (ra, rb))
    if None not in ta + tb and ta != tb:
        _refuse_retiled(ta, tb)
    if None not in ta:
        _refuse_other_capture(ta, tile_mn)


def _refuse_other_capture(tile_a, tile_mn) -> None:
    """The capture's tile (or --tile-mn) is what the counts are read per and what the costs come from: a
    build A of another tile is priced with another kernel's costs."""
    from bsprof.errors import BsprofError

    if tile_mn and tuple(int(v) for v in tile_mn) != tuple(int(v) for v in tile_a):
        raise BsprofError(
            f"--change: A runs {tile_a[0]}x{tile_a[1]} output tiles, but the capture (or --tile-mn) is of "
            f"{int(tile_mn[0])}x{int(tile_mn[1])}: the chain prices a change from a capture of A; capture A "
            "(bsprof timing --kernel SPEC --mnkl M,N,K -o DIR) or compare switches on the captured tile"
        )


def _refuse_retiled(ta, tb) -> None:
    from bsprof.errors import BsprofError

    raise BsprofError(
        f"--change: A runs {ta[0]}x{ta[1]} output tiles and B {tb[0]}x{tb[1]}: their cycles a tile do not "
        "compare, and a tile change moves the tile count, which SASS does not price; compare switches on one "
        "tile (give both builds the same tile_m and tile_n)"
    )


def _analyze_build(item: str, mnkl, keep_dir):
    """(analysis, label, tile or None, bundled spec or None) for a cubin / SASS file or a bundled spec."""
    from bsprof.analyzers.sass import analyze_path
    from bsprof.analyzers.sass.budget import tile_from_name

    p = Path(item)
    if p.exists():
        fa = _pick(analyze_path(p), item)
        if fa.roles_missing and (SAMPLE / "kernel.py.xz").is_file():
            # a shipped sample: its line info names a kernel file this machine does not have
            from bsprof.analyzers.sass.roles import attribute

            attribute(fa, None, sample_kernel_sources())
        named = tile_from_name(fa.name)
        return fa, p.name, (named[0] if named else None), None
    missing = _missing_file(item)
    if missing:
        raise missing
    from bsprof.kernels.api import parse_kernel_spec

    parse_kernel_spec(item, FAMILY)
    cubin, tile = bundled_cubin(item, mnkl, keep_dir)
    return _pick(analyze_path(cubin), item), item, tile, item


def _pick(fas, where: str):
    from bsprof.errors import BsprofError

    mma = [fa for fa in fas if fa.mma_count]
    if not mma:
        raise BsprofError(f"{where}: no kernel with MMAs in it; pass the GEMM's cubin (or --function in bsprof sass)")
    return max(mma, key=lambda fa: (fa.mma_count, len(fa.instructions)))


# two builds of one kernel share their function name up to its template arguments at least this far (a
# CUTLASS or DeepGEMM configuration changes arguments deep in the name; another library's kernel shares
# nothing past a mangling prefix such as "_ZN")
SAME_KERNEL_PREFIX = 24


def kernels_differ(name_a: str | None, name_b: str | None) -> bool:
    """Whether A and B are two kernels rather than two builds of one: their function names part within
    the first SAME_KERNEL_PREFIX characters."""
    if not name_a or not name_b:
        return False
    n = min(SAME_KERNEL_PREFIX, len(name_a), len(name_b))
    return name_a[:n] != name_b[:n]


def change_chain(
    builds: tuple[str, ...],
    mnkl,
    *,
    source=None,
    tile_mn=None,
    sustained=None,
    limits=None,
    device: str = "",
    wall_us: float | None = None,
    keep_dir=None,
) -> dict:
    """The chain for one change: ``builds`` is (B,) a bundled spec priced against its variant's base
    build, or (A, B): two cubins / SASS listings / bundled specs. With ``source`` (a timing capture of
    A) every phase is priced and projected; without, the K-loop alone (``change.kloop_only``).
    Returns {"estimate", "projection", "kloop_only", "params", ...} for the verb to render."""
    import math

    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model import change as C
    from bsprof.analyzers.timing.table import load
    from bsprof.errors import BsprofError

    if len(builds) == 1:
        spec = builds[0]
        if Path(spec).exists():
            raise BsprofError(
                f"--change {spec}: one cubin has nothing to compare with; give two (A then B), "
                "or a bundled spec such as optimized:uniform_desc=0"
            )
        missing = _missing_file(spec)
        if missing:
            raise missing
        if mnkl is None:
            raise BsprofError("--change with a bundled spec needs the problem: add --mnkl M,N,K")
        variant, _, switches = spec.partition(":")
        from bsprof.kernels.fp8_blockwise.config import TILE_KNOBS

        # a tile or cluster the spec pins is the base's too: the change is the other switches, on one tile
        given = [kv.strip() for kv in switches.split(",") if kv.strip()]
        pinned = {kv.split("=")[0].strip(): kv for kv in given if kv.split("=")[0].strip() in TILE_KNOBS}
        changed = ",".join(kv for kv in given if kv not in pinned.values())
        base = base_spec(mnkl, variant)
        if pinned and changed:
            keep = [kv for kv in base.split(":", 1)[1].split(",") if kv.split("=")[0] not in pinned]
            base = f"{variant}:{','.join(keep + list(pinned.values()))}"
        # a spec of tile or cluster knobs alone asks for that change itself, from the launcher's build
        builds = (base, f"{base},{changed or ','.join(given)}" if given else base)
    if all(_is_spec(b) for b in builds):
        _refuse_before_compiling(*builds, mnkl, tile_mn)
    fa_a, name_a, tile_a, spec_a = _analyze_build(builds[0], mnkl, keep_dir)
    fa_b, name_b, tile_b, spec_b = _analyze_build(builds[1], mnkl, keep_dir)
    if tile_a and tile_b and tuple(tile_a) != tuple(tile_b):
        _refuse_retiled(tile_a, tile_b)
    if tile_a:
        _refuse_other_capture(tile_a, tile_mn)
    tile = tuple(tile_mn) if tile_mn else tile_a or tile_b
    if tile is None:
        raise BsprofError(f"{name_a}: the output tile is not in the kernel's name; give it with --tile-mn M,N")
    tm, tn = int(tile[0]), int(tile[1])
    wgs = consumer_warpgroups(tm) if tm in (64, 128, 192, 256) else 2
    k_blocks = -(-int(mnkl[2]) // C.BLOCK_K) if mnkl else None
    count = {"k_blocks": k_blocks or 32, "tile_m": tm, "consumer_wgs": wgs}
    if mnkl:
        count["tiles_per_cta"] = output_tiles(mnkl, tm, tn) / SMS
    A = C.count_build(fa_a, name_a, **count)
    B = C.count_build(fa_b, name_b, **count)
    out: dict = {
        "a": name_a,
        "b": name_b,
        "kernels_differ": kernels_differ(fa_a.name, fa_b.name),
        "tile": [tm, tn],
        "mnkl": list(mnkl) if mnkl else None,
        "consumer_warpgroups": wgs,
    }
    if spec_a or spec_b:
        from bsprof.kernels.build import dsl_compiler

        # what compiled the bundled builds here: their SASS is what a GPU runs only from the same flavor
        out["compiler"] = dsl_compiler()
    floor = tm * tn * C.BLOCK_K / C.FMA_PER_CYCLE["fp8"]
    if source is None:
        rate, where = borrowed_rate()
        stages = (switch_stages(spec_a, mnkl), switch_stages(spec_b, mnkl)) if spec_a and spec_b else None
        hint = (
            f"capture it with bsprof timing --kernel {spec_a} --mnkl {','.join(map(str, mnkl))} -o DIR "
            "and pass --from DIR"
            if spec_a and mnkl
            else ""
        )
        out["kloop_only"] = C.kloop_only(
            A,
            B,
            consumer_warps=4 * wgs,
            borrowed_rate=rate,
            floor_kblock=floor,
            k_blocks=k_blocks,
            capture_hint=hint,
            stages=stages,
            mechanisms=_mechanisms(spec_a, spec_b),
        )
        out["borrowed_from"] = where
        return out
    if not k_blocks:
        raise BsprofError("--change with --from needs the problem the capture ran (--mnkl M,N,K)")
    table = load(source)
    params = calibrate(table)
    bm = C.base_measurement(params, table, wall_us if wall_us else math.nan, sustained, limits, device)
    costs = C.calibrate_costs(A, bm.phases, k_blocks, tile_mn=(tm, tn), consumer_warps=4 * wgs)
    stages = None
    if spec_a and spec_b:
        stages = (switch_stages(spec_a, mnkl), switch_stages(spec_b, mnkl))
    est = C.estimate_change(
        A,
        B,
        costs,
        k_blocks,
        mechanisms=_mechanisms(spec_a, spec_b),
        tile_cycles=bm.tile_cycles,
        stages=stages,
        first_load=bm.first_load,
        consumer_warps=4 * wgs,
        tie_wait=bm.tie_wait,
        store=C.store_cycles(bm),
        tile_m=tm,
        **switch_traffic(spec_a, spec_b),
    )
    out.update(estimate=est, projection=C.project_change(params, est, bm), params=params, base=bm)
    return out


def _mechanisms(a: str | None, b: str | None) -> tuple[str, ...]:
    from bsprof.analyzers.model import change as C

    return tuple(sorted({C.SWITCH_MECHANISMS[k] for k in _switch_diff(a, b) if k in C.SWITCH_MECHANISMS}))


def switch_traffic(a: str | None, b: str | None) -> dict:
    """``estimate_change``'s traffic arguments for two bundled specs, before and after: the FP8 operand
    bytes a CTA loads from L2 a K block (a 1xN cluster multicasts A over its N CTAs, an Mx1 one B over its
    M), the CTAs of a cluster, the bytes split-K's fp32 partials move a tile (each of its S units writes
    one, the last reads the other S - 1 back, its own from L2: (2 x S - 1) x 4 bytes an element; none
    unsplit) and the S work units a tile is split into. Empty unless both are bundled specs."""
    from bsprof.analyzers.model.change import BLOCK_K
    from bsprof.kernels.fp8_blockwise import config as cfg

    if not a or not b:
        return {}
    out = []
    for spec in (a, b):
        r = cfg.resolve(*cfg.parse_spec(spec))
        tm, tn, cm, cn = (int(r[k]) for k in ("tile_m", "tile_n", "cluster_m", "cluster_n"))
        split = int(r.get("split_k") or 1)
        partials = (2 * split - 1) * 4 * tm * tn if split > 1 else 0
        out.append((BLOCK_K * (tm / cn + tn / cm), cm * cn, partials, split))
    return {
        "operand_bytes": (out[0][0], out[1][0]),
        "cluster_ctas": (out[0][1], out[1][1]),
        "partial_bytes": (out[0][2], out[1][2]),
        "work_units": (out[0][3], out[1][3]),
    }


def _switch_diff(a: str | None, b: str | None) -> set[str]:
    """The switches two bundled specs set differently (empty unless both are bundled specs)."""
    if not a or not b:
        return set()
    from bsprof.kernels.fp8_blockwise import config as cfg

    va, oa = cfg.parse_spec(a)
    vb, ob = cfg.parse_spec(b)
    ra, rb = cfg.resolve(va, oa), cfg.resolve(vb, ob)
    return {k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k)}


SAMPLE = Path(__file__).resolve().parent.parent / "data" / "samples" / "change"


def sample_kernel_sources() -> dict[str, str]:
    """{line-info path: source text} of the shipped sample cubins: their line info names the kernel
    file they were compiled from, which a user's machine does not have; the snapshot beside them
    gives the role attribution the same source."""
    import json
    import lzma

    meta = json.loads((SAMPLE / "timing.json").read_text())
    text = lzma.decompress((SAMPLE / "kernel.py.xz").read_bytes()).decode()
    return {meta["change_sample"]["kernel_source_path"]: text}


def borrowed_rate() -> tuple[float, str]:
    """The K-loop's exposed cycles per instruction measured on the shipped sample (the bundled kernel's
    base build and its H200 capture): the point a pair without a capture of its own is priced at."""
    import json

    from bsprof.analyzers.model import calibrate
    from bsprof.analyzers.model import change as C
    from bsprof.analyzers.timing.table import load

    meta = json.loads((SAMPLE / "timing.json").read_text())
    info = meta["change_sample"]
    mnkl = tuple(meta["mnkl"])
    fa = _sample_analysis(SAMPLE / info["a"])
    tm, tn = info["tile"]
    wgs = consumer_warpgroups(tm)
    kb = -(-mnkl[2] // C.BLOCK_K)
    A = C.count_build(fa, info["a"], kb, tile_m=tm, consumer_wgs=wgs)
    params = calibrate(load(SAMPLE / "timing.parquet"))
    costs = C.calibrate_costs(A, C.measured_phases(params), kb, tile_mn=(tm, tn), consumer_warps=4 * wgs)
    return costs["kloop"].point, f"the bundled kernel's {meta['device']} capture ({costs['kloop'].why})"


def _sample_analysis(path: Path):
    from bsprof.analyzers.sass import analyze_path
    from bsprof.analyzers.sass.roles import attribute

    fa = _pick(analyze_path(path), str(path))
    attribute(fa, None, sample_kernel_sources())
    return fa
