"""Compile (CPU, any machine) and prepare (GPU) the NVFP4 kernels: the family contract."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.kernels.api import PreparedMixin
from bsprof.kernels.nvfp4 import config as cfg
from bsprof.kernels.nvfp4.quant import check_shape
from bsprof.kernels.tile_order import TileOrder, tile_counts

ARCH = "sm_100a"
DEFAULT_MNKL = (8192, 8192, 1024, 1)
B200_SMS = cfg.B200_SMS
KERNEL_NAME_HINT = "Nvfp4Gemm"  # substring of the mangled kernel name (ncu -k regex:...)


def kernel_kwargs(
    variant: str, config: dict, mnkl, timing: bool = False, delay_kloop: int = 0, delay_phase1: int = 0
) -> dict:
    kw = cfg.resolve(variant, config, mnkl)
    check_shape(
        mnkl, sf_vec=kw["sf_vec"], sf_dtype=kw["sf_dtype"], c_dtype=kw["c_dtype"], cta_tile_mn=cfg.cta_tile_mn(kw)
    )
    kw.update(timing=bool(timing), delay_kloop=int(delay_kloop), delay_phase1=int(delay_phase1))
    return kw


def plan(variant: str, mnkl, *, num_sms: int = B200_SMS, **config) -> dict:
    """What a launch of this problem would build, on the CPU: MMA tile, cluster and the other
    switches, and why that tile (``choice``; None when the tile was given or the variant has no map)."""
    mnkl = tuple(int(x) for x in mnkl)
    kw = kernel_kwargs(variant, config, mnkl)
    mapped = cfg.VARIANTS[variant]["config_map"] and not {"mma_tiler", "cluster"} & set(config)
    choice = None
    if mapped:
        picked, choice = cfg.choose_for_shape(mnkl, num_sms)
        kw.update(picked)
    shown = (
        "tile_m",
        "tile_n",
        "cluster_m",
        "cluster_n",
        "ab_stage",
        "acc_stage",
        "epilogue",
        "cache_hint",
        "sf_dtype",
        "sf_vec",
        "c_dtype",
    )
    return dict(
        family="nvfp4",
        variant=variant,
        mnkl=list(mnkl),
        num_sms=num_sms,
        tile=f"{kw['tile_m']}x{kw['tile_n']}",
        cluster=f"{kw['cluster_m']}x{kw['cluster_n']}",
        split_k=1,
        static_shapes=False,
        choice=choice,
        switches={k: kw[k] for k in shown if k in kw},
    )


def _pointers(kw: dict, ptrs=(0, 0, 0, 0, 0, 0)):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_ptr

    from bsprof.kernels.nvfp4.kernel import DTYPES

    gmem = cute.AddressSpace.gmem
    a, b, sfa, sfb, c, t = ptrs
    return (
        make_ptr(cutlass.Float4E2M1FN, a, gmem, assumed_align=32),
        make_ptr(cutlass.Float4E2M1FN, b, gmem, assumed_align=32),
        make_ptr(DTYPES[kw["sf_dtype"]], sfa, gmem, assumed_align=32),
        make_ptr(DTYPES[kw["sf_dtype"]], sfb, gmem, assumed_align=32),
        make_ptr(DTYPES[kw["c_dtype"]], c, gmem, assumed_align=16),
        make_ptr(cutlass.Int64, t, gmem, assumed_align=16),
    )


def _compile(kw: dict, max_active_clusters: int, stream=None):
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream

    from bsprof.kernels.nvfp4.kernel import Nvfp4Gemm

    gemm = Nvfp4Gemm(**kw)
    mnkl = tuple(cutlass.Int32(1) for _ in range(4))
    return cute.compile(
        gemm,
        *_pointers(kw),
        mnkl,
        cutlass.Int32(1),
        max_active_clusters,
        stream if stream is not None else make_fake_stream(),
    )


def compile_entry(**kw) -> None:
    """Entry for :func:`bsprof.kernels.build.compile_to_cubin` (runs in a fresh interpreter)."""
    _compile(kw, B200_SMS // (kw.get("cluster_m", 1) * kw.get("cluster_n", 1)))


def output_tile(variant: str, mnkl=DEFAULT_MNKL, **config) -> tuple[int, int]:
    """The output tile (M, N) one CTA computes in the build :func:`compile_cubin` makes for ``mnkl``."""
    kw = kernel_kwargs(variant, config, tuple(int(x) for x in mnkl), False, 0, 0)
    return int(kw["tile_m"]), int(kw["tile_n"])


def compile_cubin(
    variant: str,
    out_dir,
    *,
    mnkl=DEFAULT_MNKL,
    timing: bool = False,
    lineinfo: bool = True,
    delay_kloop: int = 0,
    delay_phase1: int = 0,
    **config,
) -> Path:
    """CPU-only compile for sm_100a; returns the kept cubin (cached by sources + knobs).

    The kernel is shape-generic (M, N, K, L are runtime); ``mnkl`` validates the problem and, for
    the optimized variant without --mma-tiler/--cluster, picks the tile through the config map."""
    from bsprof.kernels.build import compile_to_cubin

    kw = kernel_kwargs(variant, config, tuple(mnkl), timing, delay_kloop, delay_phase1)
    tag = f"{kw['tile_m']}x{kw['tile_n']}_c{kw['cluster_m']}x{kw['cluster_n']}_sf{kw['sf_vec']}"
    suffix = (
        ("-timing" if timing else "")
        + (f"-dk{delay_kloop}" if delay_kloop else "")
        + (f"-dp{delay_phase1}" if delay_phase1 else "")
    )
    out = Path(out_dir) / f"nvfp4_{variant}_{tag}{suffix}.{ARCH}.cubin"
    return compile_to_cubin("bsprof.kernels.nvfp4.launch:compile_entry", kw, ARCH, out, lineinfo=lineinfo)


# ---------------------------------------------------------------------------------------------
# GPU side (sm_100 only)
# ---------------------------------------------------------------------------------------------
_COMPILED: dict = {}

TORCH_C = {"Float16": "float16", "BFloat16": "bfloat16", "Float32": "float32"}


@dataclass
class Prepared(PreparedMixin):
    variant: str
    mnkl: tuple
    kernel_name: str
    flops: float
    kw: dict
    operands: dict
    _fn: object = None
    _args: tuple = ()
    _plan: object = None
    _tbuf: object = None
    _ref: object = field(default=None, repr=False)
    extra: dict = field(default_factory=dict)

    def reference(self):
        from bsprof.kernels.nvfp4.quant import reference_gemm

        if self._ref is None:
            self._ref = reference_gemm(self.operands["qa"], self.operands["qb"]).double()
        return self._ref

    def check(self) -> float:
        """Poison D with NaN, launch once, relative Frobenius error against the float64 reference."""
        import torch

        d = self.operands["d"]
        d.fill_(float("nan"))
        self.launch()
        torch.cuda.synchronize()
        out = d.double().cpu()
        if torch.isnan(out).any():
            raise BsprofError(
                f"nvfp4 {self.variant}: {int(torch.isnan(out).sum())} entries of D were not written "
                "(NaN); the tiling or launch is wrong for this shape"
            )
        ref = self.reference()
        return float((out - ref).norm() / ref.norm().clamp(min=1e-30))


def grid_ctas(mnkl, kw: dict, max_active_clusters: int) -> tuple[int, int]:
    """(CTAs launched, most tiles any CTA runs) in the kernel's persistent tile order."""
    m, n, _, batches = mnkl
    tiles = tile_counts((m, n, batches), cfg.cta_tile_mn(kw))
    order = TileOrder((kw["cluster_m"], kw["cluster_n"]))
    cm, cn, launched = order.grid(tiles, max(1, max_active_clusters))
    return launched * cm * cn, -(-order.units(tiles) // launched)


def prepare(
    variant: str,
    mnkl=DEFAULT_MNKL,
    *,
    timing: bool = False,
    delay_kloop: int = 0,
    delay_phase1: int = 0,
    seed: int = 0,
    **config,
) -> Prepared:
    """GPU (sm_100 only): compile for this device, quantize fresh random inputs, return launchers."""
    from bsprof.gpu import require_capability

    require_capability(10, "the NVFP4 kernels (tcgen05 block-scaled MMA)")
    import cutlass
    import cutlass.utils
    import torch
    from cuda.bindings import driver as cuda

    from bsprof.kernels.nvfp4 import quant

    mnkl = tuple(int(v) for v in mnkl)
    kw = kernel_kwargs(variant, config, mnkl, timing, delay_kloop, delay_phase1)
    m, n, k, batches = mnkl
    g = torch.Generator().manual_seed(seed)
    qa = quant.quantize(torch.randn(batches, m, k, generator=g), kw["sf_vec"], kw["sf_dtype"])
    qb = quant.quantize(torch.randn(batches, n, k, generator=g), kw["sf_vec"], kw["sf_dtype"])
    dev = torch.device("cuda")
    ops = {
        "a": qa.packed().to(dev),
        "b": qb.packed().to(dev),
        "sfa": qa.sf_mma().to(dev),
        "sfb": qb.sf_mma().to(dev),
        "qa": qa,
        "qb": qb,
        "d": torch.empty((batches, m, n), dtype=getattr(torch, TORCH_C[kw["c_dtype"]]), device=dev),
    }
    torch.empty(1, device="cuda")  # HardwareInfo needs torch's (primary) context to be current
    max_active = cutlass.utils.HardwareInfo().get_max_active_clusters(kw["cluster_m"] * kw["cluster_n"])
    plan = None
    slots = 1
    tbuf = torch.zeros(2, dtype=torch.int64, device=dev)  # never written by a plain build
    if timing:
        from bsprof.analyzers.timing.buffer import plan_buffer

        ctas, tiles_per_cta = grid_ctas(mnkl, kw, max_active)
        plan = plan_buffer(ctas, 6, tiles_per_cta)
        kw["sample_every"] = plan.sample_every  # compiled in
        tbuf = torch.zeros(math.prod(plan.shape), dtype=torch.int64, device=dev)
        slots = plan.tile_slots
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    key = (tuple(sorted(kw.items())), max_active)
    if key not in _COMPILED:
        _COMPILED[key] = _compile(kw, max_active, stream)
    ptrs = _pointers(
        kw,
        (
            ops["a"].data_ptr(),
            ops["b"].data_ptr(),
            ops["sfa"].data_ptr(),
            ops["sfb"].data_ptr(),
            ops["d"].data_ptr(),
            tbuf.data_ptr(),
        ),
    )
    args = (*ptrs, tuple(cutlass.Int32(v) for v in mnkl), cutlass.Int32(slots), stream)
    return Prepared(
        variant=variant,
        mnkl=mnkl,
        kernel_name=KERNEL_NAME_HINT,
        flops=2.0 * m * n * k * batches,
        kw=kw,
        operands=ops,
        _fn=_COMPILED[key],
        _args=args,
        _plan=plan,
        _tbuf=tbuf if timing else None,
        extra={"tile": cfg.cta_tile_mn(kw), "max_active_clusters": max_active},
    )
