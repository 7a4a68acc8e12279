"""Host side of the NVFP4 / MXFP4 family (torch, runs on CPU): quantize, pack, lay out the scale
factors the way tcgen05 reads them, dequantize, reference GEMM, and shape checks.

Formats (both FP4 E2M1 elements, K-major, two elements per byte, the even-K element in the low nibble):

- NVFP4: one Float8E4M3FN scale per 16 consecutive K elements (``sf_vec=16``).
- MXFP4: one Float8E8M0FNU (power of two) scale per 32 consecutive K elements (``sf_vec=32``).

Scale-factor layout for the MMA: tcgen05 reads scale factors in 128 (rows) x 4 (scale columns)
atoms of 512 bytes. Inside an atom, row ``r`` and scale column ``c`` sit at byte
``(r % 32) * 16 + (r // 32) * 4 + c``; atoms are ordered K-block fastest, then row block, then
batch. Rows are padded to a multiple of 128 and scale columns to a multiple of 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from bsprof.errors import BsprofError

E2M1_MAX = 6.0
# the 8 non-negative E2M1 values, indexed by the 3 magnitude bits
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
SF_ATOM_ROWS = 128
SF_ATOM_COLS = 4

SF_FORMATS = {
    # sf_dtype -> allowed scale vector sizes
    "Float8E4M3FN": (16,),
    "Float8E8M0FNU": (16, 32),
}
C_DTYPES = ("Float16", "BFloat16", "Float32")
TILE_K = 256  # four K=64 tcgen05 FP4 MMAs per pipeline stage


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise BsprofError("torch is not installed; install it with: pip install 'bsprof[kernels]'") from exc
    return torch


# ---------------------------------------------------------------------------------------------
# E2M1 elements
# ---------------------------------------------------------------------------------------------
def e2m1_round(x):
    """Round float values (already scaled into [-6, 6]) to the nearest E2M1 code (0..15), ties to
    even mantissa, saturating at +-6. Returns uint8 codes: bit 3 sign, bits 0-2 magnitude index."""
    torch = _torch()
    a = x.abs().clamp(max=E2M1_MAX)
    vals = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    # distance to every representable magnitude; the smaller index wins ties only when its
    # mantissa bit is even (index even), so bias odd indices by a hair on exact ties
    d = (a.unsqueeze(-1).float() - vals).abs()
    odd = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1], dtype=torch.float32, device=x.device) * 1e-7
    idx = (d + odd).argmin(dim=-1).to(torch.uint8)
    sign = ((x < 0) & (idx > 0)).to(torch.uint8) << 3
    return idx | sign


def e2m1_decode(codes):
    torch = _torch()
    vals = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    mag = vals[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -mag, mag)


def pack_fp4(codes):
    """(..., K) uint8 codes -> (..., K/2) bytes; element 2i in the low nibble of byte i."""
    if codes.shape[-1] % 2:
        raise BsprofError(f"FP4 packing needs an even K (got {codes.shape[-1]})")
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_fp4(packed):
    torch = _torch()
    lo = packed & 0xF
    hi = (packed >> 4) & 0xF
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


# ---------------------------------------------------------------------------------------------
# scale factors
# ---------------------------------------------------------------------------------------------
def _scale_values(amax, sf_dtype: str):
    """Block scale (as float32 exactly representable in sf_dtype) for each block's abs-max."""
    torch = _torch()
    if sf_dtype == "Float8E4M3FN":
        return (amax / E2M1_MAX).to(torch.float8_e4m3fn).float()
    if sf_dtype == "Float8E8M0FNU":
        # OCP MX: shared exponent floor(log2(amax)) - emax(E2M1)=2; values above 6*2^e saturate
        e = torch.floor(torch.log2(amax.clamp(min=2.0**-126))) - 2
        return torch.exp2(e.clamp(-127, 127))
    raise BsprofError(f"scale dtype {sf_dtype!r} is not supported; use Float8E4M3FN or Float8E8M0FNU")


def scale_bytes(scales, sf_dtype: str):
    """float32 scales -> their one-byte encodings (uint8)."""
    torch = _torch()
    if sf_dtype == "Float8E4M3FN":
        return scales.to(torch.float8_e4m3fn).view(torch.uint8)
    e = torch.round(torch.log2(scales)).to(torch.int32) + 127
    return e.clamp(0, 254).to(torch.uint8)


def scale_from_bytes(b, sf_dtype: str):
    torch = _torch()
    if sf_dtype == "Float8E4M3FN":
        return b.view(torch.float8_e4m3fn).float()
    return torch.exp2(b.to(torch.float32) - 127)


@dataclass
class Quantized:
    """One operand: ``codes`` (L, MN, K) uint8 E2M1 codes, ``scales`` (L, MN, K/sf_vec) float32."""

    codes: object
    scales: object
    sf_vec: int
    sf_dtype: str

    def dequant(self):
        vals = e2m1_decode(self.codes)
        return vals * self.scales.repeat_interleave(self.sf_vec, dim=-1)

    def packed(self):
        return pack_fp4(self.codes)

    def sf_mma(self):
        return sf_to_mma_layout(scale_bytes(self.scales, self.sf_dtype))


def quantize(x, sf_vec: int = 16, sf_dtype: str = "Float8E4M3FN") -> Quantized:
    """Quantize a float tensor (L, MN, K) (or (MN, K)) to block-scaled FP4."""
    check_sf(sf_dtype, sf_vec)
    torch = _torch()
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3 or x.shape[-1] % sf_vec:
        raise BsprofError(f"quantize: expected (L, MN, K) with K a multiple of {sf_vec}, got {tuple(x.shape)}")
    x = x.float()
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // sf_vec, sf_vec)
    amax = blocks.abs().amax(dim=-1)
    scales = _scale_values(amax, sf_dtype)
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = e2m1_round((blocks / safe.unsqueeze(-1)).reshape(x.shape))
    codes = torch.where((scales > 0).repeat_interleave(sf_vec, dim=-1), codes, torch.zeros_like(codes))
    return Quantized(codes=codes, scales=scales, sf_vec=sf_vec, sf_dtype=sf_dtype)


def sf_to_mma_layout(sf):
    """(L, MN, KS) uint8 scale bytes -> flat uint8 in the tcgen05 128x4 atom layout (padded with 0)."""
    torch = _torch()
    L, mn, ks = sf.shape
    mnp = -(-mn // SF_ATOM_ROWS) * SF_ATOM_ROWS
    ksp = -(-ks // SF_ATOM_COLS) * SF_ATOM_COLS
    pad = torch.zeros((L, mnp, ksp), dtype=sf.dtype, device=sf.device)
    pad[:, :mn, :ks] = sf
    # (L, rowblk, 4 groups of 32, 32 rows, kblk, 4 cols) -> (L, rowblk, kblk, 32, 4, 4)
    v = pad.reshape(L, mnp // 128, 4, 32, ksp // 4, 4).permute(0, 1, 4, 3, 2, 5)
    return v.contiguous().reshape(-1)


def sf_from_mma_layout(flat, L: int, mn: int, ks: int):
    """Inverse of :func:`sf_to_mma_layout` (drops the padding)."""
    mnp = -(-mn // SF_ATOM_ROWS) * SF_ATOM_ROWS
    ksp = -(-ks // SF_ATOM_COLS) * SF_ATOM_COLS
    v = flat.reshape(L, mnp // 128, ksp // 4, 32, 4, 4).permute(0, 1, 4, 3, 2, 5)
    return v.reshape(L, mnp, ksp)[:, :mn, :ks]


def sf_mma_size(L: int, mn: int, ks: int) -> int:
    return L * (-(-mn // 128) * 128) * (-(-ks // 4) * 4)


def reference_gemm(a: Quantized, b: Quantized):
    """float32 D[l] = dequant(A[l]) @ dequant(B[l])^T, shape (L, M, N)."""
    return a.dequant() @ b.dequant().transpose(-1, -2)


# ---------------------------------------------------------------------------------------------
# checks (one-line errors, before any compile or launch)
# ---------------------------------------------------------------------------------------------
def check_sf(sf_dtype: str, sf_vec: int) -> None:
    if sf_dtype not in SF_FORMATS:
        raise BsprofError(f"--sf-dtype {sf_dtype}: use Float8E4M3FN (NVFP4) or Float8E8M0FNU (MXFP4)")
    if sf_vec not in SF_FORMATS[sf_dtype]:
        ok = " or ".join(str(v) for v in SF_FORMATS[sf_dtype])
        raise BsprofError(
            f"--sf-vec {sf_vec} with --sf-dtype {sf_dtype}: the scale vector must be {ok}"
            " (NVFP4: Float8E4M3FN/16, MXFP4: Float8E8M0FNU/32)"
        )


def check_shape(
    mnkl,
    *,
    sf_vec: int = 16,
    sf_dtype: str = "Float8E4M3FN",
    c_dtype: str = "Float16",
    cta_tile_mn: tuple[int, int] = (128, 128),
) -> None:
    """Raise BsprofError (one line: the problem and the fix) if the kernel cannot run ``mnkl``."""
    m, n, k, batches = (int(v) for v in mnkl)
    if min(m, n, k, batches) <= 0:
        raise BsprofError(f"--mnkl {m},{n},{k},{batches}: all of M, N, K, L must be positive")
    check_sf(sf_dtype, sf_vec)
    if c_dtype not in C_DTYPES:
        raise BsprofError(f"--c-dtype {c_dtype}: use one of {', '.join(C_DTYPES)}")
    if k % sf_vec:
        raise BsprofError(f"K={k} is not a multiple of the scale vector {sf_vec}; pad K to a multiple of {sf_vec}")
    if k % TILE_K:
        raise BsprofError(f"K={k} is not a multiple of the K tile {TILE_K}; pad K to a multiple of {TILE_K}")
    # TMA needs 16-byte aligned rows: 32 FP4 elements for A/B, 16 bytes of D
    c_bytes = 4 if c_dtype == "Float32" else 2
    if (n * c_bytes) % 16:
        raise BsprofError(
            f"N={n}: rows of D ({c_dtype}) must be 16-byte aligned; pad N to a multiple of {16 // c_bytes}"
        )
    tm, tn = cta_tile_mn
    if m % tm or n % tn:
        raise BsprofError(
            f"M={m}, N={n} must be multiples of the CTA tile {tm}x{tn} (the epilogue does not "
            f"predicate partial tiles); pad the problem or pick a smaller --mma-tiler"
        )
