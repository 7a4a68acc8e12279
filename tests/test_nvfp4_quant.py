"""Host side of the NVFP4 family on CPU: E2M1 rounding, packing, quantization round trips, the
tcgen05 scale-factor layout (checked against two independent formulations), shape checks, configs."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")

from bsprof.errors import BsprofError  # noqa: E402
from bsprof.kernels.nvfp4 import config as cfg  # noqa: E402
from bsprof.kernels.nvfp4 import quant  # noqa: E402

E2M1 = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]


def _nearest_e2m1(x: Fraction) -> Fraction:
    """Brute force: nearest representable magnitude, ties to the even mantissa (even index)."""
    a = min(abs(x), Fraction(6))
    best = min(range(8), key=lambda i: (abs(a - E2M1[i]), i % 2))
    return E2M1[best] if x >= 0 else -E2M1[best]


def test_e2m1_decode_all_codes():
    codes = torch.arange(16, dtype=torch.uint8)
    vals = quant.e2m1_decode(codes).tolist()
    assert vals[:8] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert vals[8:] == [-0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def test_e2m1_round_matches_brute_force_including_ties():
    # every quarter step in [-7, 7]: hits all exact values, all midpoints (ties) and saturation
    xs = [Fraction(i, 4) for i in range(-28, 29)]
    got = quant.e2m1_decode(quant.e2m1_round(torch.tensor([float(x) for x in xs]))).tolist()
    want = [float(_nearest_e2m1(x)) for x in xs]
    assert got == want
    # the ties specifically: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert quant.e2m1_decode(quant.e2m1_round(ties)).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]


def test_pack_nibble_order_and_round_trip():
    codes = torch.tensor([[1, 2, 15, 8, 7, 0]], dtype=torch.uint8)
    packed = quant.pack_fp4(codes)
    assert packed.tolist() == [[0x21, 0x8F, 0x07]]  # element 2i in the low nibble
    g = torch.Generator().manual_seed(3)
    c = torch.randint(0, 16, (3, 5, 64), generator=g, dtype=torch.uint8)
    assert torch.equal(quant.unpack_fp4(quant.pack_fp4(c)), c)
    with pytest.raises(BsprofError):
        quant.pack_fp4(torch.zeros(3, dtype=torch.uint8))


@pytest.mark.parametrize("sf_dtype,sf_vec", [("Float8E4M3FN", 16), ("Float8E8M0FNU", 32), ("Float8E8M0FNU", 16)])
def test_quantize_exact_inputs_round_trip(sf_dtype, sf_vec):
    """Inputs built as E2M1 value x power-of-two block scale (max |code| = 6) come back exactly."""
    g = torch.Generator().manual_seed(0)
    L, MN, K = 2, 40, 128
    codes = torch.randint(0, 16, (L, MN, K), generator=g, dtype=torch.uint8)
    codes[..., ::sf_vec] = 7  # each block's amax is exactly 6
    exps = torch.randint(-6, 4, (L, MN, K // sf_vec), generator=g).float()
    x = quant.e2m1_decode(codes) * torch.exp2(exps).repeat_interleave(sf_vec, dim=-1)
    q = quant.quantize(x, sf_vec, sf_dtype)
    assert torch.equal(q.dequant(), x)
    assert torch.equal(q.scales, torch.exp2(exps))
    # the encoded bytes decode to the same scales
    assert torch.equal(quant.scale_from_bytes(quant.scale_bytes(q.scales, sf_dtype), sf_dtype), q.scales)


def test_quantize_random_error_bounds():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1, 64, 256, generator=g)
    nv = quant.quantize(x, 16, "Float8E4M3FN")
    mx = quant.quantize(x, 32, "Float8E8M0FNU")
    # NVFP4: every |x| <= 6*scale, so the error is at most half the widest E2M1 step (2) x scale.
    # MXFP4 (OCP): amax/scale may reach 8 and saturates at 6, so up to 2 x scale.
    for q, vec, bound in ((nv, 16, 1.0), (mx, 32, 2.0)):
        blocks = x.reshape(1, 64, 256 // vec, vec)
        err = (q.dequant() - x).reshape(blocks.shape).abs().amax(-1)
        assert bool((err <= q.scales * bound + 1e-6).all())
        assert bool((err > q.scales * bound / 4).any())  # the bound is not vacuous
    # NVFP4: scale = amax/6 rounded to E4M3 (3 mantissa bits): within 1/16 relative
    amax = x.reshape(1, 64, 16, 16).abs().amax(-1)
    assert torch.allclose(nv.scales, amax / 6, rtol=1 / 16)
    # MXFP4: power-of-two scale with amax/scale in [4, 8)
    r = x.reshape(1, 64, 8, 32).abs().amax(-1) / mx.scales
    assert bool(((r >= 4) & (r < 8)).all())
    assert torch.equal(torch.log2(mx.scales), torch.round(torch.log2(mx.scales)))


def test_zero_block_quantizes_to_zero():
    x = torch.zeros(1, 4, 32)
    x[0, 0, :16] = 1.0
    q = quant.quantize(x, 16, "Float8E4M3FN")
    assert q.scales[0, 1:].eq(0).all() and q.scales[0, 0, 1] == 0
    assert q.dequant()[0, 1:].eq(0).all() and q.dequant()[0, 0, 16:].eq(0).all()
    # 1/6 rounds up to 0.171875 in E4M3, so 1.0 lands on the code 6 -> 1.03125
    assert torch.allclose(q.dequant()[0, 0, :16], torch.full((16,), 6 * 0.171875))


def _offset_from_ptx_formula(batches, m, kb, rows_blocks, k_blocks):
    """Byte offset of SF(row m, scale column kb, batch l): PTX "scale factor A layout" (128x4 atoms,
    32-row groups interleaved), atoms K-block fastest, then row block, then batch."""
    atom = (batches * rows_blocks + m // 128) * k_blocks + kb // 4
    return atom * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + kb % 4


@pytest.mark.parametrize("L,mn,ks", [(1, 128, 4), (2, 256, 8), (1, 200, 6), (3, 130, 3)])
def test_sf_layout_matches_ptx_formula(L, mn, ks):
    g = torch.Generator().manual_seed(L * 1000 + mn + ks)
    sf = torch.randint(1, 255, (L, mn, ks), generator=g, dtype=torch.uint8)
    flat = quant.sf_to_mma_layout(sf)
    rb, kbk = -(-mn // 128), -(-ks // 4)
    assert flat.numel() == quant.sf_mma_size(L, mn, ks) == L * rb * 128 * kbk * 4
    want = torch.zeros_like(flat)
    for batches, m, kb in itertools.product(range(L), range(mn), range(ks)):
        want[_offset_from_ptx_formula(batches, m, kb, rb, kbk)] = sf[batches, m, kb]
    assert torch.equal(flat, want)  # padding stays zero in both
    assert torch.equal(quant.sf_from_mma_layout(flat, L, mn, ks), sf)


def test_sf_layout_matches_cublas_blocked_reshape():
    """The cuBLAS/torch "to_blocked" formulation: (rows/128, cols/4) blocks, each block
    reshaped (4, 32, 4) -> transposed to (32, 4, 4)."""
    g = torch.Generator().manual_seed(7)
    sf = torch.randint(0, 255, (1, 256, 8), generator=g, dtype=torch.uint8)
    m = sf[0]
    blocks = m.view(2, 128, 2, 4).permute(0, 2, 1, 3).reshape(-1, 4, 32, 4)
    blocked = blocks.transpose(1, 2).reshape(-1)
    assert torch.equal(quant.sf_to_mma_layout(sf), blocked)


def test_reference_gemm_matches_float64():
    g = torch.Generator().manual_seed(2)
    qa = quant.quantize(torch.randn(2, 32, 64, generator=g), 16, "Float8E4M3FN")
    qb = quant.quantize(torch.randn(2, 48, 64, generator=g), 16, "Float8E4M3FN")
    ref = quant.reference_gemm(qa, qb)
    assert ref.shape == (2, 32, 48)
    want = qa.dequant().double() @ qb.dequant().double().transpose(-1, -2)
    assert torch.allclose(ref.double(), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "mnkl,kw,needle",
    [
        ((256, 256, 1000, 1), {}, "multiple of the scale vector 16"),
        ((256, 256, 1024 + 16, 1), {}, "multiple of the K tile 256"),
        ((256, 250, 1024, 1), {"c_dtype": "Float16"}, "16-byte aligned"),
        ((200, 256, 1024, 1), {}, "multiples of the CTA tile"),
        ((256, 256, 1024, 1), {"c_dtype": "Float64"}, "--c-dtype Float64"),
        ((256, 256, 1024, 1), {"sf_dtype": "Float8E4M3FN", "sf_vec": 32}, "--sf-vec 32"),
        ((256, 256, 1024, 0), {}, "positive"),
    ],
)
def test_check_shape_one_line_errors(mnkl, kw, needle):
    with pytest.raises(BsprofError) as ei:
        quant.check_shape(mnkl, **kw)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg


def test_check_shape_accepts_good_problems():
    quant.check_shape((8192, 8192, 1024, 1))
    quant.check_shape((128, 128, 256, 3), sf_vec=32, sf_dtype="Float8E8M0FNU", c_dtype="Float32")


def test_config_variants_and_overrides():
    b = cfg.resolve("baseline", {}, (8192, 8192, 1024, 1))
    assert (b["tile_m"], b["cluster_m"], b["epilogue"], b["ab_stage"], b["acc_stage"], b["cache_hint"]) == (
        128,
        1,
        "simt",
        4,
        1,
        False,
    )
    o = cfg.resolve("optimized", {}, (8192, 8192, 1024, 1))
    assert (o["tile_m"], o["cluster_m"], o["epilogue"], o["ab_stage"], o["acc_stage"], o["cache_hint"]) == (
        256,
        2,
        "tma",
        0,
        0,
        True,
    )
    # config map: small M keeps 1-CTA tiles; an explicit --mma-tiler/--cluster wins over the map
    assert cfg.resolve("optimized", {}, (128, 4096, 1024, 1))["tile_m"] == 128
    assert cfg.resolve("optimized", {"config_map": False}, (128, 4096, 1024, 1))["tile_m"] == 256
    o2 = cfg.resolve("optimized", {"mma_tiler": (128, 256), "cluster": (1, 1)}, (8192, 8192, 1024, 1))
    assert (o2["tile_m"], o2["tile_n"], o2["cluster_m"]) == (128, 256, 1)
    # --sf-vec 32 alone means MXFP4
    assert cfg.resolve("baseline", {"sf_vec": 32})["sf_dtype"] == "Float8E8M0FNU"
    # each optimization switch can be turned off on its own
    off = cfg.resolve("optimized", {"epilogue": "simt", "cache_hint": False, "ab_stage": 4, "acc_stage": 1})
    assert (off["epilogue"], off["cache_hint"], off["ab_stage"], off["acc_stage"]) == ("simt", False, 4, 1)


@pytest.mark.parametrize(
    "over,needle",
    [
        ({"mma_tiler": (64, 128)}, "tile M must be 128"),
        ({"mma_tiler": (128, 96)}, "tile N must be 128 or 256"),
        ({"mma_tiler": (256, 128), "cluster": (1, 1)}, "even cluster M"),
        ({"cluster": (3, 1)}, "cluster M and N"),
        ({"bogus": 1}, "unknown nvfp4 option"),
    ],
)
def test_config_errors(over, needle):
    with pytest.raises(BsprofError, match=needle):
        cfg.resolve("optimized", over, (8192, 8192, 1024, 1))
    with pytest.raises(BsprofError, match="unknown nvfp4 variant"):
        cfg.resolve("fast", {})


def test_grid_matches_static_persistent_scheduler():
    """The timing buffer is sized from grid_ctas: it must cover every CTA the scheduler launches."""
    from bsprof.kernels.nvfp4.launch import grid_ctas

    kw = cfg.resolve("optimized", {"mma_tiler": (256, 128), "cluster": (2, 1)})
    # 8192x8192: 64 x 64 CTA tiles of 128x128 -> 2048 clusters of 2; 74 fit -> 148 CTAs, 28 tiles each
    assert grid_ctas((8192, 8192, 1024, 1), kw, 74) == (148, 28)
    # fewer clusters than fit: one wave, one tile each
    assert grid_ctas((512, 256, 1024, 1), kw, 74) == (8, 1)
    kw1 = cfg.resolve("baseline", {})
    assert grid_ctas((384, 384, 256, 3), kw1, 148) == (27, 1)
    assert grid_ctas((4096, 4096, 256, 2), kw1, 148) == (148, 14)  # 2048 tiles / 148


def test_peak_table():
    from bsprof.profile.bench.nvfp4 import peak_tflops

    assert peak_tflops({"name": "NVIDIA B200", "sm_count": 148}) == (9000.0, "data sheet")
    val, src = peak_tflops({"name": "NVIDIA RTX PRO 6000", "sm_count": 188})
    assert src.startswith("estimated") and val > 0
