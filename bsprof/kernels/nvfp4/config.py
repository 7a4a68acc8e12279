"""Variant -> kernel switches, and the per-shape config map of the optimized variant.

Every optimization of ``optimized`` is one switch here, so each can be turned off to measure it:

==============  ==========================  ===================================================
switch          baseline / optimized        optimization
==============  ==========================  ===================================================
``ab_stage``    4 / 0 (=from smem capacity) stage count computed from shared-memory capacity
``epilogue``    "simt" / "tma"              TMA-store epilogue (R2S -> fence -> barrier -> TMA)
``cache_hint``  False / True                L2 evict-first on streamed A, evict-last on B
``cluster_m``   1 / from config map         cluster multicast (2x1: B tile multicast along M)
``tile_m``      128 / from config map       256 = 2-CTA MMA (tcgen05 cta_group::2)
``acc_stage``   1 / 0 (=2 if TMEM allows)   two accumulator stages: epilogue/MMA overlap
``config_map``  False / True                tile and cluster chosen per problem shape
==============  ==========================  ===================================================
"""

from __future__ import annotations

from bsprof.errors import BsprofError
from bsprof.kernels.nvfp4.quant import C_DTYPES, check_sf

B200_SMS = 148

COMMON = dict(tile_n=128, cluster_n=1, sf_dtype="Float8E4M3FN", sf_vec=16, c_dtype="Float16", sample_every=1)
VARIANTS: dict[str, dict] = {
    "baseline": dict(
        COMMON, tile_m=128, cluster_m=1, ab_stage=4, epilogue="simt", cache_hint=False, acc_stage=1, config_map=False
    ),
    "optimized": dict(
        COMMON, tile_m=256, cluster_m=2, ab_stage=0, epilogue="tma", cache_hint=True, acc_stage=0, config_map=True
    ),
}
KNOBS = (
    "tile_m",
    "tile_n",
    "cluster_m",
    "cluster_n",
    "ab_stage",
    "epilogue",
    "cache_hint",
    "acc_stage",
    "config_map",
    "sf_dtype",
    "sf_vec",
    "c_dtype",
    "sample_every",
)


def choose_for_shape(mnkl, num_sms: int = B200_SMS) -> tuple[dict, str]:
    """The optimized variant's choice of MMA tile and cluster for a problem (M, N, K, L), and why.

    Small M cannot fill 256-row 2-CTA tiles; when 256x128 tiles would leave most SMs idle the
    128x128 tile with a 2x1 multicast cluster keeps more CTAs busy while still sharing B."""
    m, n, _, batches = (int(v) for v in mnkl)
    if m <= 128:
        return dict(tile_m=128, tile_n=128, cluster_m=1, cluster_n=1), f"M = {m} <= 128 fills one 128-row tile"
    tiles_256 = -(-m // 256) * -(-n // 128) * batches
    if m % 256 or tiles_256 < num_sms // 2:
        why = (
            f"M = {m} is not a multiple of 256"
            if m % 256
            else f"{tiles_256} tiles of 256x128 would leave more than half of {num_sms} SMs idle"
        )
        return dict(tile_m=128, tile_n=128, cluster_m=2 if m % 256 == 0 else 1, cluster_n=1), why
    return (
        dict(tile_m=256, tile_n=128, cluster_m=2, cluster_n=1),
        f"{tiles_256} tiles of 256x128 (2-CTA MMA, 2x1 cluster) fill {num_sms} SMs",
    )


def config_for_shape(mnkl) -> dict:
    """The optimized variant's MMA tile and cluster for a problem (:func:`choose_for_shape`)."""
    return choose_for_shape(mnkl)[0]


def resolve(variant: str, config: dict | None = None, mnkl=None) -> dict:
    """Kernel constructor arguments for ``variant`` with ``config`` overrides applied."""
    if variant not in VARIANTS:
        raise BsprofError(f"unknown nvfp4 variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    out = dict(VARIANTS[variant])
    config = {k: v for k, v in (config or {}).items() if v is not None}
    if "config_map" in config:
        out["config_map"] = bool(config["config_map"])
    if out["config_map"] and mnkl is not None and "mma_tiler" not in config and "cluster" not in config:
        out.update(config_for_shape(mnkl))
    for key, val in config.items():
        if key == "mma_tiler":
            tm, tn = (int(v) for v in val)
            if tm not in (128, 256):
                raise BsprofError(f"--mma-tiler {tm},{tn}: tile M must be 128 (1-CTA MMA) or 256 (2-CTA MMA)")
            if tn not in (128, 256):
                raise BsprofError(f"--mma-tiler {tm},{tn}: tile N must be 128 or 256")
            out["tile_m"], out["tile_n"] = tm, tn
            if tm == 256 and "cluster" not in config and out["cluster_m"] % 2:
                out["cluster_m"] = 2
        elif key == "cluster":
            cm, cn = (int(v) for v in val)
            if cm not in (1, 2, 4) or cn not in (1, 2, 4) or cm * cn > 4:
                raise BsprofError(f"--cluster {cm},{cn}: cluster M and N must be 1, 2 or 4 with M*N <= 4")
            out["cluster_m"], out["cluster_n"] = cm, cn
        elif key == "sf_vec":
            out["sf_vec"] = int(val)
            if "sf_dtype" not in config and int(val) == 32:
                out["sf_dtype"] = "Float8E8M0FNU"
        elif key == "epilogue" and val not in ("simt", "tma"):
            raise BsprofError(f"epilogue={val!r}: use 'simt' or 'tma'")
        elif key in KNOBS:
            out[key] = val
        elif key != "config_map":
            raise BsprofError(f"unknown nvfp4 option {key!r}; known: mma_tiler, cluster, {', '.join(KNOBS)}")
    if out["tile_m"] == 256 and out["cluster_m"] % 2:
        raise BsprofError(
            f"--mma-tiler 256,{out['tile_n']} uses the 2-CTA MMA and needs an even cluster M; e.g. --cluster 2,1"
        )
    check_sf(out["sf_dtype"], out["sf_vec"])
    if out["c_dtype"] not in C_DTYPES:
        raise BsprofError(f"--c-dtype {out['c_dtype']}: use one of {', '.join(C_DTYPES)}")
    out.pop("config_map")
    return out


def cta_tile_mn(kw: dict) -> tuple[int, int]:
    return kw["tile_m"] // (2 if kw["tile_m"] == 256 else 1), kw["tile_n"]
