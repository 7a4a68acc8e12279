"""A K block of the K-loop against the tensor pipe's rate: how many cycles the timing build's
``kloop`` phase spends per K block, and how many the tile's MMA needs at the SM's dense rate.

The rate is per SM and cycle (a CTA has the SM's tensor cores to itself: one CTA an SM), so the
floor of one K block is its tile's FLOPs over that rate, whatever the clock. The one family
listed is the one whose rate is known on the GPUs we time on."""

from __future__ import annotations

from dataclasses import dataclass

# (dense MMA FLOP per SM cycle, K per block): Hopper's FP8 wgmma (QGMMA) does 4,096 multiply-adds
# a cycle an SM (H100 SXM: 1,979 TFLOP/s dense over 132 SMs at 1,830 MHz); the fp8-blockwise
# kernels' K block is the 128-wide scale block
MMA_RATE: dict[str, tuple[int, int]] = {"fp8-blockwise": (8192, 128)}


@dataclass(frozen=True)
class KBlockRate:
    tile_m: int
    tile_n: int
    k_blocks: int  # K blocks of one tile (of one work unit under split-K)
    cycles: float  # mean kloop cycles a K block
    floor: float  # the tile's MMA for one K block at the dense rate

    @property
    def share(self) -> float:
        return self.floor / self.cycles

    def describe(self) -> str:
        return (
            f"K-loop: {self.cycles:,.0f} cycles a K block ({self.k_blocks} a tile); a {self.tile_m}x{self.tile_n} "
            f"tile's MMA needs {self.floor:,.0f} at the tensor pipe's dense rate: {self.share:.0%} of it"
        )


def kblock_rate(doc: dict, tile: tuple[int, int] | None = None) -> KBlockRate | None:
    """The K-block line of a timing artifact (``doc``: timing.json's fields, with ``family``,
    ``mnkl`` and the capture's ``config``), or None where the family's rate, the problem or the
    tile is not known. ``tile`` (M, N) stands in for a capture that did not record its tile."""
    rate = MMA_RATE.get(doc.get("family", ""))
    cfg = doc.get("config") or {}
    if tile is None and "tile_m" in cfg and "tile_n" in cfg:
        tile = (int(cfg["tile_m"]), int(cfg["tile_n"]))
    kloop = [p for p in doc.get("stats", {}).get("phases", []) if p["role"] == "mma" and p["phase"] == "kloop"]
    if rate is None or tile is None or not doc.get("mnkl") or not kloop or kloop[0]["mean"] <= 0:
        return None
    flop_per_cycle, block_k = rate
    split = max(int(cfg.get("split_k", 1)), 1)
    blocks = -(-int(doc["mnkl"][2]) // block_k)
    k_blocks = -(-blocks // split)
    return KBlockRate(
        tile[0], tile[1], k_blocks, kloop[0]["mean"] / k_blocks, 2.0 * tile[0] * tile[1] * block_k / flop_per_cycle
    )
