"""The producer–consumer equilibrium model of a warp-specialized persistent GEMM.

Public API (pure, no GPU, no plotting):

- ``calibrate(table, structure=None, ...) -> ModelParams``: every input from a timing table.
- ``default_params() -> ModelParams``: the embedded B200 measurement, calibrated.
- ``project(params, deltas) -> Projection``: deterministic + stochastic baseline vs projected;
  ``Projection.to_json()`` is the JSON contract of ``bsprof model --json``.
- ``sweep(params, axes) -> SweepResult``: a grid of projections.
"""

from bsprof.analyzers.model.calibrate import calibrate, detect_structure
from bsprof.analyzers.model.default import default_params
from bsprof.analyzers.model.params import STRUCTURES, ModelParams, Structure
from bsprof.analyzers.model.project import Projection, SweepResult, parse_deltas, parse_sweep, project, sweep

__all__ = [
    "calibrate",
    "detect_structure",
    "default_params",
    "project",
    "sweep",
    "parse_deltas",
    "parse_sweep",
    "Projection",
    "SweepResult",
    "ModelParams",
    "Structure",
    "STRUCTURES",
]
