"""Nsight Compute reports -> one row per launch, a bottleneck verdict, ncu's own rules, comparisons.

Modules: :mod:`metrics` (the documented metric table, per-arch names), :mod:`extract` (report ->
DataFrame), :mod:`verdict` (thresholds + rules -> class and candidate optimizations), :mod:`rules`
(ncu's guided-analysis results), :mod:`compare` (two reports side by side), :mod:`peaks` (device
peak TFLOP/s table), :mod:`summary` (the JSON contract).
"""
