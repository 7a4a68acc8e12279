"""Variant -> kernel switches. ``baseline`` is the plain design; ``optimized`` keeps only the
switches that measurement showed pay (docs/optimizations.md has the go/no-go record)."""

from __future__ import annotations

from bsprof.errors import BsprofError

VARIANTS: dict[str, dict] = {
    # the plain design of issue 4: 128x128 tile, 4-stage ring, direct SIMT epilogue, one compile
    # for every shape (layout-dynamic tensors)
    "baseline": dict(tile_m=128, tile_n=128, cluster_m=1, cluster_n=1, ab_stage=4, epilogue="direct",
                     promote="serial", swizzle=1, static_shapes=False),
    # kept after measurement (docs/optimizations.md): 256x128 tile in two 128-row waves (halves
    # the L2->SMEM bytes per FLOP for B), stages from the smem budget (4), TMA-store epilogue,
    # shape-specialized compile (static layouts: no runtime index math in the K-loop), B scales
    # staged in smem per tile (dropped automatically when K > 16384), A scales by TMA with their
    # stage (dropped automatically when M % 4 != 0), wgmma descriptors in uniform registers,
    # cluster 1x2 with A multicast (the pair shares its A tile: a third less L2->SMEM traffic,
    # which under the power cap buys clock as well as cycles), tile order from the problem size
    # (swizzle=0: grouped when A and B overflow L2)
    # Since #32-#34: a stage is released by one elected lane per warp, the next stage's barrier
    # is tested before the promotion instead of waited on after it, and B scales ride the stage's
    # TMA as the A scales do (no per-tile stash; dropped when K % 512 != 0, the stash then serves).
    # Per-warpgroup epilogues (#35, epi_split=auto: on up to K = 4096, where the tile end is a
    # large share of a tile): +1-4% FLOP per SM-cycle at 4096^3 and 8192^2x1024 in two runs
    "optimized": dict(tile_m=256, tile_n=128, cluster_m=1, cluster_n=2, ab_stage=0, epilogue="tma",
                      promote="serial", swizzle=0, sfb_smem=True, static_shapes=True, sfa_tma=True,
                      uniform_desc=True, elect_release=True, peek=True, sfb_tma=True, epi_split="auto"),
    # the ping-pong schedule (issue 4's first candidate; docs/optimizations.md): each consumer
    # warpgroup owns whole 128x128 tiles and its epilogue runs under the other's K-loop. Its
    # K-loop and epilogue are on different cycles, so the model's binding side can flip
    # (bsprof model --validate --kernel pingpong)
    "pingpong": dict(tile_m=128, tile_n=128, cluster_m=1, cluster_n=1, ab_stage=0, epilogue="tma",
                     promote="serial", swizzle=1, sfb_smem=False, static_shapes=True, schedule="pingpong"),
}

# optimized with rescaled accumulation (promote="rescale", docs/optimizations.md #40): no
# block accumulator; wgmma accumulates every K block into the totals, which are kept divided
# by the current block's scale product (one FMUL per element and block), so each warpgroup
# issues both waves of a K block back to back and waits once. +3-7% over optimized at the
# three issue-4 targets on the H100, at the cost of accumulation precision: the
# tensor cores' FP8 accumulator holds all of K, not one 128-wide block (error vs float64
# 2.5e-3 at K=4096, 5.0e-3 at 16384, against 1.7e-3), so K is capped (launch.RESCALE_MAX_K)
VARIANTS["rescaled"] = dict(VARIANTS["optimized"], promote="rescale", peek=False)

# knobs a user may override per run (bsprof bench --mma-tiler / --cluster map onto these)
KNOBS = ("tile_m", "tile_n", "cluster_m", "cluster_n", "ab_stage", "epilogue", "promote", "consumer_regs", "producer_regs", "swizzle", "sfb_smem",
         "static_shapes", "schedule", "stagger", "uniform_desc", "early_scales", "sfa_tma",
         "sfb_ahead", "elect_release", "peek", "sfb_tma", "epi_split", "balance_grid", "kloop_unroll")


def sfa_tma_conflict(kw: dict) -> str | None:
    """What in these kernel arguments the A-scale TMA (``sfa_tma``) cannot combine with, or None."""
    if kw.get("schedule", "coop") != "coop":
        return "the ping-pong schedule (it takes the coop schedule)"
    if kw.get("promote") == "overlap":
        return "promote='overlap', which reads the A scales from global memory"
    return None


def sfb_tma_conflict(kw: dict) -> str | None:
    """What in these kernel arguments the B-scale TMA (``sfb_tma``) cannot combine with, or None."""
    if not kw.get("sfa_tma"):
        return "sfa_tma=0 (the B scale is read beside the A scales the stage brings)"
    if kw.get("promote", "serial") not in ("serial", "rescale"):
        return f"promote={kw.get('promote')!r}"
    if kw.get("tile_n", 128) > 128:
        return "tile_n > 128 (two B-scale blocks per tile)"
    if kw.get("sfb_ahead"):
        return "sfb_ahead (the per-tile stash it replaces)"
    return None


def epi_split_conflict(kw: dict) -> str | None:
    if kw.get("schedule", "coop") != "coop" or kw.get("epilogue", "direct") != "tma":
        return "a schedule other than coop or an epilogue other than 'tma'"
    return None


def peek_conflict(kw: dict) -> str | None:
    if kw.get("promote", "serial") not in ("serial", "fakescales"):
        return f"promote={kw.get('promote')!r}"
    return None


# switches and what they cannot combine with: a variant's default gives way to an override it does
# not combine with; asked for explicitly, the kernel refuses the combination. Checked in this order
KNOB_CONFLICTS = (("sfa_tma", sfa_tma_conflict), ("sfb_tma", sfb_tma_conflict), ("peek", peek_conflict),
             ("epi_split", epi_split_conflict))


def resolve(variant: str, config: dict | None = None) -> dict:
    """The kernel constructor arguments for ``variant`` with ``config`` overrides applied."""
    if variant not in VARIANTS:
        raise BsprofError(f"unknown fp8-blockwise variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    out = dict(VARIANTS[variant])
    for key, val in (config or {}).items():
        if val is None:
            continue
        if key == "mma_tiler":
            tm, tn = val
            if tm not in (128, 256):
                raise BsprofError(f"--mma-tiler {tm},{tn}: the fp8-blockwise tile M is 128 or 256 "
                                  "(two consumer warpgroups x 64 rows, one or two waves); e.g. --mma-tiler 256,128")
            out["tile_m"] = tm
            if tn not in (64, 128, 192, 256):
                raise BsprofError(f"--mma-tiler {tm},{tn}: tile N must be 64, 128, 192 or 256")
            out["tile_n"] = tn
        elif key == "cluster":
            cm, cn = val
            if (cm, cn) not in ((1, 1), (2, 1), (1, 2), (2, 2)):
                raise BsprofError(f"--cluster {cm},{cn}: fp8-blockwise supports clusters 1,1, 2,1, 1,2 and 2,2")
            out["cluster_m"], out["cluster_n"] = cm, cn
        elif key == "c_dtype":
            if val not in ("BFloat16", "bfloat16"):
                raise BsprofError(f"--c-dtype {val}: the fp8-blockwise family writes BFloat16 only")
        elif key in ("sf_dtype", "sf_vec"):
            raise BsprofError(f"--{key.replace('_', '-')} is an NVFP4 option; fp8-blockwise scales are float32 per 128")
        elif key in KNOBS:
            out[key] = val
        else:
            raise BsprofError(f"unknown fp8-blockwise option {key!r}; known: {', '.join(KNOBS)}")
    for knob, conflict in KNOB_CONFLICTS:
        if knob not in (config or {}) and out.get(knob) and conflict(out):
            out[knob] = False
    return out


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
