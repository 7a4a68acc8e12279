"""Dense peak tensor throughput per device, for "% of peak" next to a measured TFLOP/s.

Numbers are NVIDIA's datasheet values for *dense* math (the datasheets print sparse figures, twice
these) at the boost clock; a run with ``--clock-control none`` may sit below boost, so 100 % is not
reachable in practice. Sources / assumptions:

* H100 SXM5 80GB: FP8 3958 TFLOP/s sparse -> 1979 dense (132 SMs, 1980 MHz boost); FP16/BF16 989.
* H100 PCIe: FP8 3026 sparse -> 1513 dense; FP16 756.
* H200 (SXM, 141GB): same GH100 compute as H100 SXM -> FP8 1979, FP16 989.
* B200: FP4 18 PFLOP/s sparse -> 9000 dense; FP8 4500 dense; FP16 2250 dense (HGX B200 datasheet).
  NVFP4 and MXFP4 run at the FP4 rate.
* GB200 (per GPU): FP4 20 PFLOP/s sparse -> 10000 dense; FP8 5000; FP16 2500 (GB200 NVL72 datasheet,
  per-GPU share). Its name contains "B200", so its rows come first.
* FP32 (CUDA cores, FFMA): H100 SXM 67, H100 PCIe 51, H200 67, B200 80 TFLOP/s.
* FP64 on the tensor cores (DMMA): H100 SXM 67, H100 PCIe 51, H200 67 TFLOP/s (twice the FP64
  vector rate; cuBLAS DGEMM runs DMMA).
* BF16 runs at the FP16 rate on all of these; ``bf16`` is accepted and looked up as ``fp16``; INT8
  runs at the FP8 rate (TOPS), so ``int8`` is looked up as ``fp8``.

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
    # TF32 wgmma (HGMMA .TF32): half the fp16 rate
    ("H100 PCIe", "tf32"): 378.0,
    ("H100", "tf32"): 494.7,
    ("H200", "tf32"): 494.7,
    # GB200 before B200: names match by substring, first row wins
    ("GB200", "fp4"): 10000.0,
    ("GB200", "fp8"): 5000.0,
    ("GB200", "fp16"): 2500.0,
    ("B200", "fp4"): 9000.0,
    ("B200", "fp8"): 4500.0,
    ("B200", "fp16"): 2250.0,
    ("H100 PCIe", "fp32"): 51.0,
    ("H100", "fp32"): 67.0,
    ("H200", "fp32"): 67.0,
    ("B200", "fp32"): 80.0,
    ("H100 PCIe", "fp64"): 51.0,
    ("H100", "fp64"): 67.0,
    ("H200", "fp64"): 67.0,
}
# (name substring) -> (DRAM bandwidth TB/s, SMs): datasheet HBM bandwidth, most specific first
DRAM_TBPS: tuple[tuple[str, float, int], ...] = (
    ("H100 PCIe", 2.0, 114),
    ("H100", 3.35, 132),
    ("H200", 4.8, 132),
    ("GB200", 8.0, 148),
    ("B200", 8.0, 148),
)
PRECISIONS = ("fp4", "fp8", "int8", "fp16", "bf16", "tf32", "fp32", "fp64")
_ALIAS = {"bf16": "fp16", "int8": "fp8"}

# The precision an MMA opcode computes in (the executed-opcode table names no data type beyond
# this): wgmma on sm_90 (HGMMA fp16/bf16, QGMMA fp8, IGMMA int8 at the fp8 rate), legacy mma.sync
# (HMMA, IMMA int8), DMMA fp64, tcgen05 on sm_100 (UTCHMMA fp16/bf16, UTCQMMA fp8/fp6/fp4 kind
# f8f6f4 at the fp8 rate, UTCOMMA block-scaled mxf4/nvf4 at the fp4 rate, UTCIMMA int8). Most
# specific (lowest) first.
OPCODE_PRECISION: tuple[tuple[str, str], ...] = (
    ("UTCOMMA", "fp4"),
    ("UTCQMMA", "fp8"),
    ("UTCIMMA", "int8"),
    ("UTCHMMA", "fp16"),
    ("QGMMA", "fp8"),
    ("IGMMA", "int8"),
    ("HGMMA", "fp16"),
    ("IMMA", "int8"),
    ("HMMA", "fp16"),
    ("DMMA", "fp64"),
)

# the operand type a 16-bit-family MMA opcode names in its SASS modifiers (HGMMA.64x256x8.F32.TF32,
# HMMA.1688.F32.BF16); fp16 names none. The executed-opcode table has the bare opcode only.
SASS_OPERAND_TYPE = ((".TF32", "tf32"), (".BF16", "bf16"))


def precision_from_sass(mma_texts: dict[str, float], precision: str) -> str:
    """Refine an MMA opcode's precision with the operand type its SASS names: ``mma_texts`` maps each
    executed MMA instruction's opcode with modifiers to its executed count; the most executed decides."""
    if precision != "fp16" or not mma_texts:
        return precision
    top = max(mma_texts, key=mma_texts.get)
    return next((prec for mod, prec in SASS_OPERAND_TYPE if mod in top.split(" ")[0]), precision)


# the precision a bundled family computes in
FAMILY_PRECISION = {"fp8-blockwise": "fp8", "nvfp4": "fp4"}
# default when nothing says otherwise: the block-scaled format each arch is here for
ARCH_PRECISION = {9: "fp8", 10: "fp4"}


def precision_from_opcodes(opcodes: dict[str, float]) -> tuple[str | None, str | None]:
    """(precision, opcode) of the MMA instructions that executed the most, or (None, None) where no
    MMA ran. A kernel that executes only FFMA gets (``fp32``, ``FFMA``) when FFMAs dominate its
    floating-point work."""
    best: tuple[float, str, str] | None = None
    for op, count in opcodes.items():
        for prefix, prec in OPCODE_PRECISION:
            if op.startswith(prefix) and count > 0:
                if best is None or count > best[0]:
                    best = (count, prec, op)
                break
    if best:
        return best[1], best[2]
    if opcodes.get("FFMA", 0) > 0:
        return "fp32", "FFMA"
    return None, None


def peak_tflops(device_name: str | None, precision: str) -> float | None:
    if not device_name:
        return None
    precision = _ALIAS.get(precision, precision)
    for (sub, prec), value in PEAK_TFLOPS.items():
        if prec == precision and sub.lower() in device_name.lower():
            return value
    return None


# FLOPs of one executed MMA warp instruction from its SASS shape (ncu counts instructions per warp):
# wgmma (HGMMA/QGMMA/IGMMA.64xNxK) is issued by the 4 warps of a warpgroup, each counted, so a warp's
# share is 2*64*N*K / 4 (cuBLAS FP8 at 4096^3: 1,048,576 QGMMA.64x128x32 x 131,072 = 2*4096^3);
# mma.sync names its shape as digits (HMMA.16816 = 16x8x16, IMMA.16832 = 16x8x32, DMMA.884 = 8x8x4)
_MMA_SYNC_SHAPES = {
    "16816": (16, 8, 16),
    "1688": (16, 8, 8),
    "16832": (16, 8, 32),
    "8816": (8, 8, 16),
    "884": (8, 8, 4),
    "16864": (16, 8, 64),
    "8832": (8, 8, 32),
}


def mma_flops_per_instruction(sass: str) -> float | None:
    """FLOPs one executed warp instruction ``sass`` (e.g. 'QGMMA.64x128x32.F32.E4M3.E4M3') does, or None
    where its shape is not in the SASS (tcgen05 UTC*MMA take theirs from a descriptor)."""
    import re

    parts = sass.split(".")
    if len(parts) < 2:
        return None
    if m := re.fullmatch(r"(\d+)x(\d+)x(\d+)", parts[1]):
        mm, n, k = map(int, m.groups())
        return 2.0 * mm * n * k / 4 if re.match(r"[HQIB]GMMA", parts[0]) else 2.0 * mm * n * k
    if parts[0] in ("HMMA", "IMMA", "DMMA", "BMMA") and parts[1] in _MMA_SYNC_SHAPES:
        mm, n, k = _MMA_SYNC_SHAPES[parts[1]]
        return 2.0 * mm * n * k
    return None


def dram_bandwidth(device: str | None) -> tuple[float, int] | None:
    """(DRAM bytes/s, SMs) of a device by its name (:data:`DRAM_TBPS`), None for one not listed."""
    for sub, tbps, sms in DRAM_TBPS:
        if device and sub in device:
            return tbps * 1e12, sms
    return None
