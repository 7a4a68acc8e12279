"""Host side of the FP8-blockwise family: DeepSeek-V3 style quantization and the float64 reference.

Layouts (the ones ``torch._scaled_mm`` takes for blockwise scaling, so one set of tensors feeds
our kernel and cuBLAS alike):

- ``a``  (L, M, K) float8_e4m3fn, K contiguous; ``sfa`` (L, K/128, M) float32, M contiguous, i.e.
  the (M, K/128) scale matrix stored column-major (one scale per row and 128-wide K block), its
  column stride M rounded up to a multiple of 4 (:func:`aligned_scales`).
- ``b``  (L, N, K) float8_e4m3fn, K contiguous; ``sfb`` (L, ceil(N/128), K/128) float32 row-major
  (one scale per 128x128 block).
- ``d``  (L, M, N) bfloat16.

Dequantized: ``A[m, k] = a[m, k] * sfa[k // 128, m]``, ``B[n, k] = b[n, k] * sfb[n // 128, k // 128]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from bsprof.errors import BsprofError

BLOCK = 128
FP8_MAX = 448.0
SFA_ALIGN = 4  # floats: 16 bytes, TMA's alignment for every global stride
# bf16 bit pattern we poison the output with: the most negative finite bf16 (0xFF7F), a value the
# kernel never produces from our inputs, so "still poison" means "never written".
POISON_BITS = -129  # int16 view of 0xFF7F


def check_shape(mnkl: tuple[int, int, int, int]) -> None:
    """One-line errors for problems the kernel cannot run."""
    m, n, k, batches = mnkl
    if min(mnkl) <= 0:
        raise BsprofError(f"--mnkl {m},{n},{k},{batches}: every extent must be positive")
    n_pad, k_pad = -(-n // 8) * 8, -(-k // BLOCK) * BLOCK
    near = f"{m},{n_pad},{k_pad},{batches}"
    # name every extent the nearest shape changes, with its reason: a silent N change reads as a typo
    n_rule = "bf16 rows of D must be 16-byte aligned for TMA"
    if k % BLOCK:
        pads = f"K to {k_pad}" + (f" and N to {n_pad} ({n_rule})" if n % 8 else "")
        raise BsprofError(
            f"K={k} is not a multiple of {BLOCK} (the scale block); pad {pads}: the nearest shape "
            f"the kernel takes is {near}"
        )
    if n % 8:
        raise BsprofError(
            f"N={n} is not a multiple of 8 ({n_rule}); pad N to {n_pad}: the nearest shape the kernel takes is {near}"
        )


def quantize_rows(x):
    """(L, M, K) float -> (fp8 (L, M, K), sfa (L, K/128, M)) with one scale per row and K block."""
    import torch

    batches, m, k = x.shape
    blk = x.reshape(batches, m, k // BLOCK, BLOCK).float()
    amax = blk.abs().amax(dim=-1).clamp_min(1e-12)  # (L, M, KB)
    scale = amax / FP8_MAX
    q = (blk / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(batches, m, k), aligned_scales(scale.transpose(1, 2))  # (L, KB, M): M contiguous


def aligned_scales(sfa):
    """(L, KB, M) A scales -> the same values, M contiguous, each K block's row of M floats starting
    on a 16-byte boundary (row stride M rounded up to SFA_ALIGN): the layout a TMA copy of the
    scales needs at any M, and the one DeepGEMM asks its callers for (its "TMA-aligned" scales;
    handed anything else, it transposes them on every call)."""
    import torch

    batches, kb, m = sfa.shape
    padded = -(-m // SFA_ALIGN) * SFA_ALIGN
    out = torch.zeros(batches, kb, padded, device=sfa.device, dtype=sfa.dtype)[:, :, :m]
    out.copy_(sfa)
    return out


def quantize_blocks(x):
    """(L, N, K) float -> (fp8 (L, N, K), sfb (L, ceil(N/128), K/128)) with one scale per 128x128 block."""
    import torch

    batches, n, k = x.shape
    nb = -(-n // BLOCK)
    pad = nb * BLOCK - n
    xp = torch.nn.functional.pad(x.float(), (0, 0, 0, pad)) if pad else x.float()
    blk = xp.reshape(batches, nb, BLOCK, k // BLOCK, BLOCK)
    amax = blk.abs().amax(dim=(2, 4)).clamp_min(1e-12)  # (L, NB, KB)
    scale = amax / FP8_MAX
    q = (blk / scale[:, :, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    q = q.reshape(batches, nb * BLOCK, k)[:, :n].contiguous()
    return q, scale.contiguous()


def dequantize(a, sfa, b, sfb):
    """float64 (L, M, K) and (L, N, K) from the quantized operands."""
    import torch

    batches, m, k = a.shape
    n = b.shape[1]
    sa = sfa.transpose(1, 2).double().repeat_interleave(BLOCK, dim=2)[:, :, :k]  # (L, M, K)
    sb = sfb.double().repeat_interleave(BLOCK, dim=1)[:, :n].repeat_interleave(BLOCK, dim=2)[:, :, :k]
    return a.to(torch.float64) * sa, b.to(torch.float64) * sb


def reference(a, sfa, b, sfb):
    """float64 D (L, M, N) = A_deq @ B_deq^T."""
    import torch

    ad, bd = dequantize(a, sfa, b, sfb)
    return torch.matmul(ad, bd.transpose(1, 2))


@dataclass
class Operands:
    a: object
    sfa: object
    b: object
    sfb: object
    d: object


# what make_operands can draw: "randn" (ours: DeepSeek-quantized Gaussians) or "int" (small
# integers with unit scales, the data CUTLASS's CuTe DSL examples time on)
INPUTS = ("randn", "int")


def make_operands(mnkl, *, seed: int = 0, device: str = "cuda", inputs: str = "randn") -> Operands:
    """Fresh random inputs.

    ``randn``: Gaussians quantized per block, each 128-block with its own magnitude (2^[-4, 4]),
    so a wrong scale index shows up as a large error instead of hiding behind uniform scales.
    ``int``: integers in [-2, 2] with unit scales, what ``cutlass.torch.matrix`` gives the CuTe DSL
    examples. Their few set bits draw less power: on the power-capped H100 every kernel runs
    5-14% faster on them (docs/perf.md has the measurement), so compare numbers taken on the same inputs."""
    import torch

    check_shape(mnkl)
    if inputs not in INPUTS:
        raise BsprofError(f"--inputs {inputs!r}: choose one of {', '.join(INPUTS)}")
    m, n, k, batches = mnkl
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    kb = k // BLOCK
    nb = -(-n // BLOCK)
    d = torch.empty(batches, m, n, device=device, dtype=torch.bfloat16)
    if inputs == "int":
        a = torch.randint(-2, 3, (batches, m, k), device=device, generator=g).float().to(torch.float8_e4m3fn)
        b = torch.randint(-2, 3, (batches, n, k), device=device, generator=g).float().to(torch.float8_e4m3fn)
        return Operands(
            a,
            aligned_scales(torch.ones(batches, kb, m, device=device)),
            b,
            torch.ones(batches, nb, kb, device=device),
            d,
        )
    xa = torch.randn(batches, m, k, device=device, generator=g)
    mag_a = torch.exp2(torch.randint(-4, 5, (batches, m, kb), device=device, generator=g).float())
    xa = xa * mag_a.repeat_interleave(BLOCK, dim=2)
    xb = torch.randn(batches, n, k, device=device, generator=g)
    mag_b = torch.exp2(torch.randint(-4, 5, (batches, nb, kb), device=device, generator=g).float())
    xb = xb * mag_b.repeat_interleave(BLOCK, dim=1)[:, :n].repeat_interleave(BLOCK, dim=2)
    a, sfa = quantize_rows(xa)
    b, sfb = quantize_blocks(xb)
    return Operands(a, sfa, b, sfb, d)


def poison(d) -> None:
    import torch

    d.view(torch.int16).fill_(POISON_BITS)


def rel_error(d, ref) -> float:
    """Relative Frobenius error of ``d`` against float64 ``ref``; BsprofError on NaN / unwritten."""
    import torch

    unwritten = int((d.view(torch.int16) == POISON_BITS).sum())
    if unwritten:
        raise BsprofError(
            f"{unwritten} of {d.numel()} output elements were never written by the kernel "
            "(the epilogue misses part of the tile); this is a kernel bug"
        )
    nans = int(torch.isnan(d).sum())
    if nans:
        raise BsprofError(f"{nans} output elements are NaN; this is a kernel bug (or corrupt inputs)")
    diff = d.to(torch.float64) - ref
    denom = float(torch.linalg.vector_norm(ref))
    return float(torch.linalg.vector_norm(diff)) / max(denom, 1e-300)
