"""Benchmarks of the bundled kernels: correctness against the reference, then timing beside the
peers (cuBLAS, DeepGEMM, NVIDIA's CuTe DSL example), in one process so every kernel is measured
under the same clocks.

A kernel family exposes operands, a launch and a reference (:mod:`bsprof.kernels.api`); how they
are timed is profiling, so it lives here, one module per family.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from bsprof.kernels.api import Target

MODULES: dict[str, str] = {
    "nvfp4": "bsprof.profile.bench.nvfp4",
    "fp8-blockwise": "bsprof.profile.bench.fp8_blockwise",
}


@dataclass
class BenchRequest:
    target: Target
    warmup: int = 10
    iters: int = 50
    skip_ref_check: bool = False
    seed: int = 0
    # fp8-blockwise only: the operands (quant.INPUTS) and NVIDIA's CuTe DSL example as a peer
    inputs: str = "randn"
    cute_example: str | None = None
    # fp8-blockwise only: rounds of every kernel (None: the family's default) and copies of the
    # operands they are spread over (None: ``placements_for`` the rounds)
    rounds: int | None = None
    placements: int | None = None
    # fp8-blockwise only: also time the configurations the tile choice calls too close to rank
    # against its pick (select.close_calls), each paired round by round with the pick
    close_calls: bool = False

    # what the family benches read, all from the one target
    @property
    def family(self) -> str:
        return self.target.family

    @property
    def variant(self) -> str:
        """The kernel spec (variant and switches): the name of our row."""
        return self.target.spec

    @property
    def mnkl(self) -> tuple[int, int, int, int]:
        return self.target.mnkl

    @property
    def config(self) -> dict:
        """The family flags (mma_tiler, cluster, sf_dtype, sf_vec, c_dtype); switches ride in the spec."""
        return self.target.config


def run(request: BenchRequest) -> tuple[dict, list[str]]:
    """Check, time and compare one bundled kernel: the bench artifact, and one line per kernel of
    ours that computed a wrong product (the verb shows the table, then refuses)."""
    return importlib.import_module(MODULES[request.family]).run(request)
