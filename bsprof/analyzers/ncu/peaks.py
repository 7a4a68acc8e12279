"""Dense peak tensor throughput per device, for "% of peak" next to a measured TFLOP/s.

Numbers are NVIDIA's datasheet values for *dense* math (the datasheets print sparse figures, twice
these) at the boost clock; a run with ``--clock-control none`` may sit below boost, so 100 % is not
reachable in practice. Sources / assumptions:

* H100 SXM5 80GB: FP8 3958 TFLOP/s sparse -> 1979 dense (132 SMs, 1980 MHz boost); FP16/BF16 989.
* H100 PCIe: FP8 3026 sparse -> 1513 dense; FP16 756.
* H200 (SXM, 141GB): same GH100 compute as H100 SXM -> FP8 1979, FP16 989.
* B200: FP4 18 PFLOP/s sparse -> 9000 dense; FP8 4500 dense; FP16 2250 dense (HGX B200 datasheet).
  NVFP4 and MXFP4 run at the FP4 rate.

The lookup is by substring of the device name ncu records (``device__attribute_display_name``),
most specific first.
"""

from __future__ import annotations

# (name substring, precision) -> dense TFLOP/s
PEAK_TFLOPS: dict[tuple[str, str], float] = {
    ("H100 PCIe", "fp8"): 1513.0,
    ("H100 PCIe", "fp16"): 756.0,
    ("H100", "fp8"): 1979.0,
    ("H100", "fp16"): 989.0,
    ("H200", "fp8"): 1979.0,
    ("H200", "fp16"): 989.0,
    ("B200", "fp4"): 9000.0,
    ("B200", "fp8"): 4500.0,
    ("B200", "fp16"): 2250.0,
}

# the precision a bundled family computes in
FAMILY_PRECISION = {"fp8-blockwise": "fp8", "nvfp4": "fp4"}
# default when nothing says otherwise: the block-scaled format each arch is here for
ARCH_PRECISION = {9: "fp8", 10: "fp4"}


def peak_tflops(device_name: str | None, precision: str) -> float | None:
    if not device_name:
        return None
    for (sub, prec), value in PEAK_TFLOPS.items():
        if prec == precision and sub.lower() in device_name.lower():
            return value
    return None
