"""Variant -> kernel switches and the constraints on them. ``baseline`` is the plain
design; ``optimized`` keeps only the switches that measurement showed pay (docs/optimizations.md
has the go/no-go record). :func:`resolve` turns a variant and overrides into flat switches (what
``select.py``, the launcher and ``bench --plan`` work with) and :func:`can_implement` states the
constraints they must meet; :mod:`.gemm_config` groups one build's switches for the kernel."""

from __future__ import annotations

import math

from bsprof.errors import BsprofError
from bsprof.kernels.fp8_blockwise.quant import SFA_ALIGN

VARIANTS: dict[str, dict] = {
    # the plain design: 128x128 tile, 4-stage ring, direct SIMT epilogue, one compile
    # for every shape (layout-dynamic tensors)
    "baseline": dict(
        tile_m=128,
        tile_n=128,
        cluster_m=1,
        cluster_n=1,
        ab_stage=4,
        epilogue="direct",
        promote="serial",
        swizzle=1,
        static_shapes=False,
    ),
    # kept after measurement (docs/optimizations.md): 256x128 tile in two 128-row waves (halves
    # the L2->SMEM bytes per FLOP for B), stages from the smem budget (4), TMA-store epilogue,
    # shape-specialized compile (static layouts: no runtime index math in the K-loop), B scales
    # staged in smem per tile (dropped automatically when K > 16384), A scales by TMA with their
    # stage (any M: the operands keep each scale row 16-byte aligned), wgmma descriptors in uniform registers,
    # cluster 1x2 with A multicast (the pair shares its A tile: a third less L2->SMEM traffic,
    # which under the power cap buys clock as well as cycles), tile order from the problem size
    # (swizzle=0: grouped when A and B overflow L2)
    # A stage is released by one elected lane per warp, the next stage's barrier
    # is tested before the promotion instead of waited on after it, and B scales ride the stage's
    # TMA as the A scales do (no per-tile stash; dropped when K % 512 != 0, the stash then serves).
    # Per-warpgroup epilogues (epi_split=auto: on up to K = 4096, where the tile end is a
    # large share of a tile): +1-4% FLOP per SM-cycle at 4096^3 and 8192^2x1024 in two runs
    # Tile and cluster per problem (tiles="auto", select.py): 256x128 in 1x2 clusters where that
    # fills the GPU evenly, narrower or 128-row tiles where its last wave would run nearly empty
    "optimized": dict(
        tile_m=256,
        tile_n=128,
        cluster_m=1,
        cluster_n=2,
        ab_stage=0,
        epilogue="tma",
        promote="serial",
        swizzle=0,
        sfb_smem=True,
        static_shapes=True,
        sfa_tma=True,
        uniform_desc=True,
        elect_release=True,
        peek=True,
        sfb_tma=True,
        epi_split="auto",
        tiles="auto",
        shift_last_m=True,
        trim_a=True,
        ring_unroll=True,
    ),
    # the ping-pong schedule (docs/optimizations.md): each consumer
    # warpgroup owns whole 128x128 tiles and its epilogue runs under the other's K-loop. Its
    # K-loop and epilogue are on different cycles, so the model's binding side can flip
    # (bsprof model --validate --kernel pingpong)
    "pingpong": dict(
        tile_m=128,
        tile_n=128,
        cluster_m=1,
        cluster_n=1,
        ab_stage=0,
        epilogue="tma",
        promote="serial",
        swizzle=1,
        sfb_smem=False,
        static_shapes=True,
        schedule="pingpong",
    ),
}

# optimized with rescaled accumulation (promote="rescale", docs/optimizations.md): no
# block accumulator; wgmma accumulates every K block into the totals, which are kept divided
# by the current block's scale product (one FMUL per element and block), so each warpgroup
# issues both waves of a K block back to back and waits once. +3-7% over optimized at the
# three target problems on the H100, at the cost of accumulation precision: the
# tensor cores' FP8 accumulator holds all of K, not one 128-wide block (error vs float64
# 2.5e-3 at K=4096, 5.0e-3 at 16384, against 1.7e-3), so K is capped (launch.RESCALE_MAX_K)
# The per-problem tile choice is left off: its cost model was checked against the serial promotion
VARIANTS["rescaled"] = dict(VARIANTS["optimized"], promote="rescale", peek=False, tiles=False, ring_unroll=False)

# knobs a user may override per run (bsprof bench --mma-tiler / --cluster map onto these)
KNOBS = (
    "tile_m",
    "tile_n",
    "cluster_m",
    "cluster_n",
    "ab_stage",
    "epilogue",
    "promote",
    "consumer_regs",
    "producer_regs",
    "swizzle",
    "sfb_smem",
    "static_shapes",
    "schedule",
    "uniform_desc",
    "sfa_tma",
    "elect_release",
    "peek",
    "sfb_tma",
    "epi_split",
    "tiles",
    "launch_cluster",
    "split_k",
    "shift_last_m",
    "trim_a",
    "ring_unroll",
)
# a fixed tile or cluster turns the per-problem choice off
TILE_KNOBS = ("tile_m", "tile_n", "cluster_m", "cluster_n", "mma_tiler", "cluster")
# split-K (``split_k`` > 1): each output tile's K blocks are shared by this many work units, whose
# fp32 partials the last to finish sums in split order (kernel.py); the launcher keeps the workspace
MAX_SPLIT_K = 8
SMEM_CAPACITY = 232448  # sm_90 dynamic shared memory per CTA (227 KiB)
SFB_SMEM_KB = 128  # K blocks whose B scales the smem stash holds (K <= 16384)
# a shape-specialized build with longer K sizes its stash to its K blocks, up to this many (8 KB):
# without the stash the K-loop reads each B scale from global memory (an LDG whose R2UR move
# stalls), which ran 16% fewer FLOP per SM cycle than DeepGEMM's same 128x96 tile at K = 18944
SFB_STASH_MAX_KB = 1024
SFB_TMA_SLOT = 32  # floats per stage slot of the B-scale TMA (128 bytes: a TMA destination's alignment)

BLOCK_K = 128  # the scale block along K and N
# one consumer warpgroup's 64 rows, or one or two 128-row waves of two consumer warpgroups
TILE_MS = (64, 128, 256)
# a 192-row tile is one wave of three consumer warpgroups: select.py ranks it at one width
# (192x128, the one timed) beside every TILE_MS tile; any width is taken when asked for
TILE_MS_ASKED = TILE_MS + (192,)
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
# widest tile whose accumulators fit the consumers' 232 registers: the serial promotion keeps a
# block accumulator beside each wave's totals (tile_n/2 registers each). 128x192 (96 + 96) spilled
# in the unpruned kernel (docs/optimizations.md) and compiles with no local memory since; it
# is DeepGEMM's tile where N tiles unevenly by 128 (4096x2112x7168); 256x128 (192) does not spill.
# A 64-row tile's one warpgroup holds what each of a 128-row tile's two holds
MAX_TILE_N = {
    ("serial", 64): 192,
    ("serial", 128): 192,
    ("serial", 256): 128,
    ("serial", 192): 128,
    ("rescale", 64): 256,
    ("rescale", 128): 256,
    ("rescale", 256): 128,
}


def two_scale_blocks(tile_n: int) -> bool:
    """Whether a tile of this width can straddle two 128-wide B-scale blocks (it reads two B scales)."""
    return BLOCK_K % tile_n != 0


def tile_n_fits_scales(tile_n: int) -> bool:
    """Every tile n0 = t * tile_n touches at most two B-scale blocks: the latest start inside a
    block (128 - gcd(tile_n, 128)) plus the width stays within two blocks."""
    return BLOCK_K - math.gcd(tile_n, BLOCK_K) + tile_n <= 2 * BLOCK_K


def tile_ns(tile_m: int = 128, promote: str = "serial") -> tuple[int, ...]:
    """Every tile width the kernel takes for this tile height and promotion."""
    top = MAX_TILE_N[(promote, tile_m)]
    return tuple(
        n
        for n in range(16, top + 1, 16)
        if tile_n_fits_scales(n) and (promote != "rescale" or n % BLOCK_K == 0 or not two_scale_blocks(n))
    )


def can_implement(kw: dict) -> str | None:
    """Why the kernel cannot be built with these switches (one line naming the
    combination and what to change), or None. The one place the combination rules live."""
    tm, tn = kw.get("tile_m", 128), kw.get("tile_n", 128)
    cm, cn = kw.get("cluster_m", 1), kw.get("cluster_n", 1)
    promote, schedule, epilogue = kw.get("promote", "serial"), kw.get("schedule", "coop"), kw.get("epilogue", "direct")
    if tm not in TILE_MS_ASKED:
        return (
            f"tile_m={tm}: the tile is one consumer warpgroup's 64 rows, one or two 128-row waves of two or "
            "one 192-row wave of three; use 64, 128, 192 or 256"
        )
    if tm == 192 and (promote != "serial" or schedule != "coop"):
        return "tile_m=192 (three consumer warpgroups) takes the coop schedule with the serial promotion"
    if promote not in ("serial", "rescale"):
        return f"promote={promote!r}: use 'serial' or 'rescale'"
    if schedule not in ("coop", "pingpong"):
        return f"schedule={schedule!r}: use 'coop' or 'pingpong'"
    if epilogue not in ("direct", "tma"):
        return f"epilogue={epilogue!r}: use 'direct' or 'tma'"
    if (cm, cn) not in CLUSTERS:
        return f"cluster {cm}x{cn}: use 1x1, 2x1, 1x2 or 2x2"
    split = kw.get("split_k", 1)
    if not isinstance(split, int) or not 1 <= split <= MAX_SPLIT_K:
        return f"split_k={split!r}: use 1 (no split) .. {MAX_SPLIT_K} work units per output tile"
    if split > 1 and (schedule != "coop" or promote != "serial"):
        return (
            f"split_k={split} with schedule={schedule!r}, promote={promote!r}: split-K takes the coop "
            "schedule with the serial promotion (the optimized variant); use split_k=1 there"
        )
    if int(kw.get("swizzle", 1)) < 0:
        return f"swizzle={kw.get('swizzle')}: use 0 (from the problem size) or a group of >= 1 N tiles"
    if tn % 16 or not 16 <= tn <= 256 or not tile_n_fits_scales(tn):
        near = min((n for n in range(16, 257, 16) if tile_n_fits_scales(n)), key=lambda n: abs(n - tn))
        return (
            f"tile_n={tn}: a tile is a multiple of 16 up to 256 whose columns touch at most two 128-wide "
            f"B-scale blocks; nearest: {near}"
        )
    if schedule == "pingpong":
        if tm != 128 or promote != "serial" or cm * cn > 1 or kw.get("sfb_smem") or tn > 128:
            return "schedule='pingpong' takes tile_m=128, tile_n <= 128, promote='serial', cluster 1x1 and sfb_smem=0"
    elif tn > MAX_TILE_N[(promote, tm)]:
        return (
            f"tile {tm}x{tn} with promote={promote!r}: the accumulators do not fit the registers; "
            f"widest: {tm}x{MAX_TILE_N[(promote, tm)]}"
        )
    if promote == "rescale" and schedule == "coop" and two_scale_blocks(tn) and tn % BLOCK_K:
        return f"promote='rescale' with tile_n={tn}: the rescale takes tile widths that divide 128, or 256"
    for knob, conflict in KNOB_CONFLICTS:
        why = kw.get(knob) and conflict(kw)
        if why:
            return f"{knob} does not combine with {why}; add {knob}=0"
    return None


def sfa_tma_conflict(kw: dict) -> str | None:
    """What in these kernel arguments the A-scale TMA (``sfa_tma``) cannot combine with, or None."""
    if kw.get("schedule", "coop") != "coop":
        return "the ping-pong schedule (it takes the coop schedule)"
    return None


def sfb_tma_conflict(kw: dict) -> str | None:
    """What in these kernel arguments the B-scale TMA (``sfb_tma``) cannot combine with, or None."""
    if not kw.get("sfa_tma"):
        return "sfa_tma=0 (the B scale is read beside the A scales the stage brings)"
    if two_scale_blocks(kw.get("tile_n", 128)):
        return f"tile_n={kw.get('tile_n')} (a tile whose width does not divide 128 needs two B-scale blocks)"
    if kw.get("split_k", 1) > 1:
        return f"split_k={kw['split_k']} (a work unit's K range need not start on a 4-block scale box)"
    return None


def epi_split_conflict(kw: dict) -> str | None:
    if kw.get("schedule", "coop") != "coop" or kw.get("epilogue", "direct") != "tma":
        return "a schedule other than coop or an epilogue other than 'tma'"
    if kw.get("tile_m", 128) == 64:
        return "tile_m=64 (its one consumer warpgroup stores the whole tile already)"
    if kw.get("split_k", 1) > 1:
        return f"split_k={kw['split_k']} (the unit that sums the partials stores the tile with both warpgroups)"
    return None


def peek_conflict(kw: dict) -> str | None:
    if kw.get("promote", "serial") != "serial":
        return f"promote={kw.get('promote')!r}"
    return None


# switches and what they cannot combine with: a variant's default gives way to an override it does
# not combine with; asked for explicitly, the kernel refuses the combination. Checked in this order
KNOB_CONFLICTS = (
    ("sfa_tma", sfa_tma_conflict),
    ("sfb_tma", sfb_tma_conflict),
    ("peek", peek_conflict),
    ("epi_split", epi_split_conflict),
)


def resolve(variant: str, config: dict | None = None) -> dict:
    """The kernel switches for ``variant`` with ``config`` overrides applied (GemmConfig.from_switches takes them)."""
    if variant not in VARIANTS:
        raise BsprofError(f"unknown fp8-blockwise variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    out = dict(VARIANTS[variant])
    for key, val in (config or {}).items():
        if val is None:
            continue
        if key == "mma_tiler":
            out["tile_m"], out["tile_n"] = val
        elif key == "cluster":
            out["cluster_m"], out["cluster_n"] = val
        elif key == "c_dtype":
            if val not in ("BFloat16", "bfloat16"):
                raise BsprofError(f"--c-dtype {val}: the fp8-blockwise family writes BFloat16 only")
        elif key in ("sf_dtype", "sf_vec"):
            raise BsprofError(f"--{key.replace('_', '-')} is an NVFP4 option; fp8-blockwise scales are float32 per 128")
        elif key in KNOBS:
            _check_value(key, val)
            out[key] = val
        else:
            raise BsprofError(f"unknown fp8-blockwise option {key!r}; known: {', '.join(KNOBS)}")
    if any((config or {}).get(k) is not None for k in TILE_KNOBS):
        out.pop("tiles", None)
    give_way(out, config)
    why = can_implement(out)
    if why:
        raise BsprofError(f"fp8-blockwise {variant}: {why}")
    return out


# the values a switch takes (the rest are checked by can_implement or name a choice): on/off
# switches 0 or 1, sizes whole numbers, and the two that the launcher resolves per problem
BOOL_KNOBS = (
    "sfb_smem",
    "static_shapes",
    "uniform_desc",
    "sfa_tma",
    "elect_release",
    "peek",
    "sfb_tma",
    "launch_cluster",
    "shift_last_m",
    "trim_a",
    "ring_unroll",
)
INT_KNOBS = (
    "tile_m",
    "tile_n",
    "cluster_m",
    "cluster_n",
    "ab_stage",
    "consumer_regs",
    "producer_regs",
    "swizzle",
    "split_k",
)
AUTO_KNOBS = {"epi_split": (0, 1, "auto"), "tiles": (0, "auto")}


def _check_value(key: str, val) -> None:
    if key in BOOL_KNOBS and not (isinstance(val, int) and val in (0, 1)):
        raise BsprofError(f"fp8-blockwise switch {key}={val!r}: takes 0 or 1")
    if key in INT_KNOBS and not isinstance(val, int):
        raise BsprofError(f"fp8-blockwise switch {key}={val!r}: takes a whole number")
    if key in AUTO_KNOBS and val not in AUTO_KNOBS[key]:
        raise BsprofError(
            f"fp8-blockwise switch {key}={val!r}: takes one of " + ", ".join(repr(v) for v in AUTO_KNOBS[key])
        )


def give_way(kw: dict, config: dict | None = None) -> None:
    """Switch off the variant defaults that do not combine with the rest (what ``config`` asked
    for explicitly stays, and can_implement refuses it)."""
    for knob, conflict in KNOB_CONFLICTS:
        if knob not in (config or {}) and kw.get(knob) and conflict(kw):
            kw[knob] = False


def shifted_start(m: int, tile_m: int, cluster_m: int = 1, schedule: str = "coop", epilogue: str = "tma") -> int:
    """The first row of the last M tile when ``shift_last_m`` shifts it up to end at M; 0 where it
    stays put. A TMA box that runs past the tensor's end (its rows past M zero-filled) made every K
    block of that tile's stages land late: l2-bound 128-row tiles of 64-128 columns with 32-112
    rows past M ran 1.24-1.66x slower than the same tiles kept inside (docs/perf.md). The shifted
    tile recomputes rows of the tile before it and stores the same values there. The start is
    rounded up to a multiple of SFA_ALIGN rows: the A-scale box runs along its tensor's innermost
    dimension, and a box start off 16 bytes faulted on the GPU; the tile then ends up to
    SFA_ALIGN - 1 rows past M, which costs nothing measurable. Only for 128- and 256-row tiles
    without an M cluster (whose multicast pairs tiles by row), the cooperative schedule and the
    TMA epilogue, the paths the GPU tests check."""
    if tile_m < 128 or m <= tile_m or m % tile_m == 0 or cluster_m != 1 or schedule == "pingpong" or epilogue != "tma":
        return 0
    start = -(-(m - tile_m) // SFA_ALIGN) * SFA_ALIGN
    return start if start < (m - 1) // tile_m * tile_m else 0


def sfb_stash_kb(k_blocks: int) -> int:
    """K blocks the smem B-scale stash of a shape-specialized build holds: SFB_SMEM_KB, or this
    problem's K blocks (rounded up to 4, 16 bytes) where K is longer; 0 past SFB_STASH_MAX_KB,
    where the build goes without the stash."""
    if k_blocks <= SFB_SMEM_KB:
        return SFB_SMEM_KB
    return -(-k_blocks // 4) * 4 if k_blocks <= SFB_STASH_MAX_KB else 0


def a_box_rows(m: int, tile_m: int, cluster_n: int = 1, schedule: str = "coop") -> int:
    """Rows of A one TMA box brings when ``trim_a`` trims it to a problem of fewer rows than the
    tile: M rounded up to 8 (the swizzle atom's rows); 0 where the box stays the whole tile. A box
    that runs past M slowed the tiles whose last M tile it filled with zeros (docs/perf.md,
    shift_last_m); a problem of one M tile cannot shift, but its box can stop at M. Only for tiles
    loaded in one box per stage (64 rows, or 128 in the cooperative schedule) without A multicast
    (cluster_n 1)."""
    rows = -(-m // 8) * 8
    one_box = tile_m == 64 or (tile_m == 128 and schedule != "pingpong")
    return rows if one_box and cluster_n == 1 and rows < tile_m else 0


def split_range(s, kb, split: int) -> tuple:
    """(first K block, K blocks) of work unit ``s`` of ``split`` over ``kb`` K blocks: the same
    formula in the kernel's producer, its consumers and the cost model (uneven ranges differ by one)."""
    k0 = s * kb // split
    return k0, (s + 1) * kb // split - k0


def parse_spec(spec: str) -> tuple[str, dict]:
    """'optimized' or 'baseline:epilogue=tma,ab_stage=6' -> (variant, knob overrides)."""
    name, _, rest = spec.partition(":")
    over: dict = {}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if not eq:
            raise BsprofError(f"kernel spec {spec!r}: expected key=value after ':', e.g. baseline:epilogue=tma")
        over[key.strip()] = int(val) if val.strip().lstrip("-").isdigit() else val.strip()
    return name, over


def epi_stages(sfa_tma: bool) -> int:
    """Epilogue sub-tile buffers in a ring: 3 with the A-scale TMA (its 1 KB a stage would
    otherwise cost a whole A/B stage), 4 without."""
    return 3 if sfa_tma else 4


def epi_tile_cols(tile_n: int) -> int:
    """Columns of an epilogue sub-tile: 32, or 16 where the tile width is an odd multiple of 16."""
    return 32 if tile_n % 32 == 0 else 16


def consumer_wgs(tile_m: int) -> int:
    """Consumer warpgroups of a coop tile (ping-pong has two, each with whole 128-row tiles)."""
    return {64: 1, 192: 3}.get(tile_m, 2)


def wave_rows(tile_m: int, pingpong: bool = False) -> int:
    """Rows of one wave: 64 a consumer warpgroup side by side (ping-pong: one warpgroup's 64)."""
    return 64 if pingpong else 64 * consumer_wgs(tile_m)


def warps_per_cta(tile_m: int) -> int:
    """Warps of a CTA: the producer warpgroup and the consumers (the timing buffer's rows a CTA)."""
    return 4 * (1 + consumer_wgs(tile_m))


def max_smem_stages(
    tile_m: int,
    tile_n: int,
    *,
    wave_m: int,
    epi_per_wg: bool,
    sfa_tma: bool,
    sfb_tma: bool,
    sfb_smem: bool,
    epilogue: str,
    sfb_kb: int = SFB_SMEM_KB,
) -> int:
    """How many A/B stages (with their scale slots) fit the shared memory the epilogue buffers and
    the B-scale stash leave: the ring depth of a build with ``ab_stage=0``. Plain arithmetic, shared
    by the kernel's setup and ``bench --plan``."""
    ab_bytes = (tile_m + tile_n) * BLOCK_K  # fp8: one byte per element
    ab_bytes += tile_m * 4 if sfa_tma else 0  # float32 A scale per row
    ab_bytes += SFB_TMA_SLOT * 4 if sfb_tma else 0
    epi_rows = 64 if epi_per_wg else wave_m
    # a ring of epilogue buffers per warpgroup where each stores its own rows
    epi_buffers = epi_stages(sfa_tma) * (consumer_wgs(tile_m) if epi_per_wg else 1)
    epi_bytes = epi_rows * epi_tile_cols(tile_n) * 2 * epi_buffers if epilogue != "direct" else 0
    epi_bytes += 2 * sfb_kb * 4 if sfb_smem and not sfb_tma else 0
    return (SMEM_CAPACITY - 2048 - epi_bytes) // ab_bytes


def smem_stages(kw: dict) -> int:
    """The ring depth a build with these switches gets: ``ab_stage`` capped by the
    budget, or the budget itself when ``ab_stage`` is 0."""
    tile_m = kw.get("tile_m", 128)
    pingpong = kw.get("schedule") == "pingpong"
    most = max_smem_stages(
        tile_m,
        kw["tile_n"],
        wave_m=wave_rows(tile_m, pingpong),
        epi_per_wg=pingpong or bool(kw.get("epi_split")),
        sfa_tma=bool(kw.get("sfa_tma")),
        sfb_tma=bool(kw.get("sfb_tma")),
        sfb_smem=bool(kw.get("sfb_smem")),
        epilogue=kw.get("epilogue", "direct"),
        sfb_kb=int(kw.get("sfb_kb", SFB_SMEM_KB)),
    )
    asked = int(kw.get("ab_stage", 0) or 0)
    return most if asked <= 0 else min(asked, most)
