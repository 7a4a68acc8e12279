"""Compile (CPU, any machine) and prepare (GPU) the FP8-blockwise kernels: the family contract."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from bsprof.errors import BsprofError
from bsprof.kernels.api import PreparedMixin
from bsprof.kernels.fp8_blockwise import config as cfg
from bsprof.kernels.fp8_blockwise.gemm_config import GemmConfig
from bsprof.kernels.fp8_blockwise.quant import BLOCK, SFA_ALIGN, check_shape
from bsprof.kernels.tile_order import TileOrder, tile_counts

ARCH = "sm_90a"
DEFAULT_MNKL = (4096, 4096, 4096, 1)
H100_SMS = 132
KERNEL_NAME_HINT = "Fp8BlockwiseGemm"  # substring of the mangled kernel name (ncu -k regex:...)


def kernel_kwargs(variant: str, config: dict, timing: bool, delay_kloop: int, delay_phase1: int) -> dict:
    kw = cfg.resolve(variant, config)
    kw.pop("static_shapes", None)  # a launch option (how tensors are bound), not a kernel knob
    kw.update(timing=bool(timing), delay_kloop=int(delay_kloop), delay_phase1=int(delay_phase1))
    return kw


def _fake_args(kw: dict, max_active_clusters: int, mnkl=None):
    """Fake tensors for a CPU compile: symbolic shapes, or the concrete ``mnkl`` for a
    shape-specialized (static_shapes) build."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream, make_fake_tensor

    if mnkl is not None:
        m, n, k, batches = (int(x) for x in mnkl)
        kb, nb = k // BLOCK, -(-n // BLOCK)
    else:
        m = cute.sym_int64(symbol="M")
        n = cute.sym_int64(divisibility=8, symbol="N")
        k = cute.sym_int64(divisibility=BLOCK, symbol="K")
        kb = cute.sym_int64(symbol="KB")
        nb = cute.sym_int64(symbol="NB")
        batches = cute.sym_int64(symbol="L")
    # M = 1 stays a runtime extent in A and D, as in the GPU build (_cute_views)
    mr = cute.sym_int64(symbol="M") if isinstance(m, int) and m == 1 else m
    a = make_fake_compact_tensor(cutlass.Float8E4M3FN, (mr, k, batches), stride_order=(1, 0, 2), assumed_align=16)
    b = make_fake_compact_tensor(cutlass.Float8E4M3FN, (n, k, batches), stride_order=(1, 0, 2), assumed_align=16)
    if isinstance(m, int):
        # the operands' layout (quant.aligned_scales): each K block's row of M scales 16-byte aligned
        rows = -(-m // SFA_ALIGN) * SFA_ALIGN
        sfa = make_fake_tensor(cutlass.Float32, (m, kb, batches), (1, rows, rows * kb), assumed_align=4)
    else:
        sfa = make_fake_compact_tensor(cutlass.Float32, (m, kb, batches), stride_order=(0, 1, 2), assumed_align=4)
    sfb = make_fake_compact_tensor(cutlass.Float32, (nb, kb, batches), stride_order=(1, 0, 2), assumed_align=4)
    c = make_fake_compact_tensor(cutlass.BFloat16, (mr, n, batches), stride_order=(1, 0, 2), assumed_align=16)
    tbuf = make_fake_compact_tensor(cutlass.Int64, (cute.sym_int64(symbol="W"),), assumed_align=16)
    ws = make_fake_compact_tensor(cutlass.Float32, (cute.sym_int64(symbol="WS"),), assumed_align=16)
    cnt = make_fake_compact_tensor(cutlass.Int32, (cute.sym_int64(symbol="T"),), assumed_align=16)
    return a, b, sfa, sfb, c, tbuf, ws, cnt, cutlass.Int32(1), max_active_clusters, make_fake_stream()


def _compile(kw: dict, max_active_clusters: int, mnkl=None):
    import cutlass.cute as cute

    from bsprof.kernels.fp8_blockwise.kernel import Fp8BlockwiseGemm

    gemm = Fp8BlockwiseGemm(GemmConfig.from_switches(**kw))
    args = _fake_args(kw, max_active_clusters, mnkl)
    return cute.compile(gemm, *args)


def compile_entry(mnkl=None, **kw) -> None:
    """Entry for :func:`bsprof.kernels.build.compile_to_cubin` (runs in a fresh interpreter)."""
    max_active = H100_SMS // (kw.get("cluster_m", 1) * kw.get("cluster_n", 1))
    _compile(kw, max_active, mnkl)


def resolve_build(
    variant: str,
    config: dict,
    mnkl,
    num_sms: int = H100_SMS,
    timing: bool = False,
    delay_kloop: int = 0,
    delay_phase1: int = 0,
) -> tuple[dict, bool, str | None, tuple[str, ...]]:
    """The kernel's switches for this problem on ``num_sms`` SMs, whether the build is
    shape-specialized, why the tile and cluster are what they are (None when they were fixed) and
    the close calls' knobs (select.close_calls: other tiles worth timing beside the pick)."""
    config = dict(config)
    check_shape(mnkl)
    static = bool(config.pop("static_shapes", cfg.VARIANTS.get(variant, {}).get("static_shapes", False)))
    kw = kernel_kwargs(variant, config, timing, delay_kloop, delay_phase1)
    why, close = check_knobs_fit(kw, mnkl, static, num_sms, explicit=config)
    return kw, static, why, close


def build_kwargs(
    variant: str, config: dict, mnkl, timing: bool = False, delay_kloop: int = 0, delay_phase1: int = 0
) -> tuple[dict, bool]:
    """The kernel's switches for this problem, and whether the build is shape-specialized."""
    kw, static, _, _ = resolve_build(
        variant, config, mnkl, timing=timing, delay_kloop=delay_kloop, delay_phase1=delay_phase1
    )
    return kw, static


def plan(variant: str, mnkl, *, num_sms: int = H100_SMS, **config) -> dict:
    """What a launch of this problem would build, on the CPU: tile, cluster, split-K and the other
    per-problem switches, why that tile (``choice``; None when the tile was given), the knobs of
    the close calls (``close_calls``: configurations modelled too near the pick to rank, each worth
    timing beside it as ``<spec>,<knobs>``) and why that tile order (``swizzle_why``; None when the
    user fixed it)."""
    mnkl = tuple(int(x) for x in mnkl)
    kw, static, why, close = resolve_build(variant, config, mnkl, num_sms)
    swizzle_why = None
    if cfg.resolve(variant, config).get("swizzle", 1) == 0:
        swizzle_why = swizzle_choice(
            mnkl,
            kw.get("tile_n", 128),
            kw.get("cluster_n", 1),
            kw.get("tile_m", 128),
            kw.get("cluster_m", 1),
            kw.get("split_k", 1),
            num_sms,
        )[1]
    shown = (
        "tile_m",
        "tile_n",
        "cluster_m",
        "cluster_n",
        "split_k",
        "ab_stage",
        "schedule",
        "promote",
        "epilogue",
        "swizzle",
        "epi_split",
        "sfa_tma",
        "sfb_tma",
        "sfb_smem",
        "shift_last_m",
        "a_rows",
    )
    # the row the last M tile starts at when the build shifts it (the kernel applies the same rule)
    shift_start = 0
    if kw.get("shift_last_m") and static:
        shift_start = cfg.shifted_start(
            mnkl[0], kw["tile_m"], kw.get("cluster_m", 1), kw.get("schedule", "coop"), kw.get("epilogue", "direct")
        )
    return dict(
        family="fp8-blockwise",
        variant=variant,
        mnkl=list(mnkl),
        num_sms=num_sms,
        tile=f"{kw['tile_m']}x{kw['tile_n']}",
        cluster=f"{kw.get('cluster_m', 1)}x{kw.get('cluster_n', 1)}",
        split_k=int(kw.get("split_k", 1)),
        static_shapes=static,
        choice=why,
        close_calls=list(close),
        smem_stages=cfg.smem_stages(kw),
        swizzle_why=swizzle_why,
        shift_start=shift_start,
        switches={k: kw[k] for k in shown if k in kw},
    )


def output_tile(variant: str, mnkl=DEFAULT_MNKL, **config) -> tuple[int, int]:
    """The output tile (M, N) one CTA computes in the build :func:`compile_cubin` makes for ``mnkl``."""
    kw, _ = build_kwargs(variant, config, tuple(int(x) for x in mnkl))
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
    """CPU-only compile for sm_90a; returns the kept cubin (cached by sources + knobs).

    The kernel is shape-generic (M, N, K, L are runtime), so ``mnkl`` only validates the problem."""
    from bsprof.kernels.build import compile_to_cubin

    mnkl = tuple(int(x) for x in mnkl)
    kw, static = build_kwargs(variant, config, mnkl, timing, delay_kloop, delay_phase1)
    if static:
        kw["mnkl"] = list(mnkl)  # shape-specialized, like the GPU build of this variant
    suffix = "-timing" if timing else ""
    out = Path(out_dir) / f"fp8_blockwise_{variant}{suffix}.{ARCH}.cubin"
    return compile_to_cubin("bsprof.kernels.fp8_blockwise.launch:compile_entry", kw, ARCH, out, lineinfo=lineinfo)


# ---------------------------------------------------------------------------------------------
# GPU side
# ---------------------------------------------------------------------------------------------
_COMPILED: dict = {}


def _compiled_for(kw: dict, args: tuple, max_active: int, shape_key=None):
    """Compile once per knob set (and per shape for static-shape builds); layout-dynamic builds
    run any shape."""
    import cutlass.cute as cute

    from bsprof.kernels.fp8_blockwise.kernel import Fp8BlockwiseGemm

    key = (tuple(sorted(kw.items())), shape_key)
    if key not in _COMPILED:
        *tensors, slots, stream = args
        gemm = Fp8BlockwiseGemm(GemmConfig.from_switches(**kw))
        _COMPILED[key] = cute.compile(gemm, *tensors, slots, max_active, stream)
    return _COMPILED[key]


def _max_active(kw: dict) -> int:
    import cutlass.utils
    import torch

    torch.empty(1, device="cuda")  # HardwareInfo needs torch's (primary) context to be current
    return cutlass.utils.HardwareInfo().get_max_active_clusters(kw.get("cluster_m", 1) * kw.get("cluster_n", 1))


def cute_tensor(t, leading: int, align: int, static: bool = False, dynamic_m: bool = False):
    """A torch tensor as a CuTe tensor for a launch: its layout dynamic along ``leading`` (one build
    serves every problem), static (a shape-specialized build) or with only M left dynamic."""
    from cutlass.cute.runtime import from_dlpack

    v = from_dlpack(t, assumed_align=align)
    if dynamic_m:
        # keep mode 0 (M) a runtime extent in an otherwise shape-specialized build (see _cute_views)
        order = sorted(range(t.dim()), key=lambda d: (t.stride(d), d), reverse=True)
        return v.mark_compact_shape_dynamic(mode=0, stride_order=tuple(order))
    return v if static else v.mark_layout_dynamic(leading_dim=leading)


def size1_strides(t, inner_first: tuple[int, ...]):
    """``t`` with the stride of each size-1 dimension set to what a compact tensor with this mode
    order has there. torch leaves such strides arbitrary (``contiguous()`` keeps a transposed
    (L, K/128, 1) view as it is), and CuTe reads them: a one-row A-scale matrix came through
    with its M stride = K/128, which a layout-dynamic build refuses (M must be the unit stride)."""
    strides, expect = list(t.stride()), 1
    for d in inner_first:
        if t.shape[d] == 1:
            strides[d] = expect
        expect = strides[d] * t.shape[d]
    return t if strides == list(t.stride()) else t.as_strided(t.shape, strides)


def sfa_view(sfa, static: bool):
    """(L, KB, M) A scales -> the (M, KB, L) view the kernel reads, with the strides of size-1
    modes set to those of the aligned layout (quant.aligned_scales): a static build bakes every
    stride into its A-scale TMA descriptor, which refuses one that is not a multiple of 16 bytes,
    even where the mode has one element."""
    v = sfa.permute(2, 1, 0)
    m, kb, batches = v.shape
    rows = -(-m // SFA_ALIGN) * SFA_ALIGN
    strides = list(v.stride())
    for d, (size, compact) in enumerate(zip((m, kb, batches), (1, rows, rows * kb))):
        if size == 1:
            strides[d] = compact
    if static and (strides[0] != 1 or strides[1] % SFA_ALIGN or strides[2] % SFA_ALIGN):
        raise BsprofError(
            f"the A scales' strides {tuple(sfa.stride())} do not keep each K block's row of M "
            f"scales on a 16-byte boundary, which a shape-specialized build reads by TMA; lay them "
            f"out with quant.aligned_scales"
        )
    return v if strides == list(v.stride()) else v.as_strided(v.shape, strides)


def _cute_views(ops, static: bool = False):
    """torch operands -> cute tensors in the kernel's (M, K, L)-style mode order. Layout-dynamic
    by default (one compile runs every shape); ``static`` bakes the shape into the kernel.

    A static build with M = 1 keeps M a runtime extent in A and D: CuTe folds a static size-1
    mode away, so their TMA copies came out one-dimensional (``cp.async.bulk.tensor.1d``: a
    128-byte box for a 128x128 stage, and a store that does not match the epilogue's swizzled
    tile), and the kernel died with an illegal instruction on the H100."""
    one_row = static and ops.a.shape[1] == 1
    a = cute_tensor(size1_strides(ops.a.permute(1, 2, 0), (1, 0, 2)), 1, 16, static, one_row)
    b = cute_tensor(size1_strides(ops.b.permute(1, 2, 0), (1, 0, 2)), 1, 16, static)
    sfa = cute_tensor(sfa_view(ops.sfa, static), 0, 4, static)
    sfb = cute_tensor(size1_strides(ops.sfb.permute(1, 2, 0), (1, 0, 2)), 1, 4, static)
    c = cute_tensor(size1_strides(ops.d.permute(1, 2, 0), (1, 0, 2)), 1, 16, static, one_row)
    return a, b, sfa, sfb, c


@dataclass
class Prepared(PreparedMixin):
    variant: str
    mnkl: tuple
    kernel_name: str
    flops: float
    ops: object
    config: dict
    choice: str | None = None  # why this tile and cluster (None: fixed by the variant or the user)
    _fn: object = None
    _args: tuple = ()
    _tail: tuple = ()
    _plan: object = None
    _tbuf: object = None
    _ref: object = field(default=None, repr=False)
    _static: bool = False
    _split_ws: tuple = field(default=(), repr=False)  # keeps the split-K workspace alive

    def reference(self):
        from bsprof.kernels.fp8_blockwise.quant import reference

        if self._ref is None:
            self._ref = reference(self.ops.a, self.ops.sfa, self.ops.b, self.ops.sfb)
        return self._ref

    def check(self) -> float:
        """Poison D, launch once, compare against the float64 reference (relative Frobenius)."""
        import torch

        from bsprof.kernels.fp8_blockwise.quant import poison, rel_error

        poison(self.ops.d)
        self.launch()
        torch.cuda.synchronize()
        return rel_error(self.ops.d, self.reference())


# The H100 has 50 MiB of L2 (the H200 60 MiB); the swizzle rule below was measured on the H100
L2_BYTES = 50 * 1024 * 1024
AUTO_SWIZZLE = 8
# epi_split="auto": split the epilogue per warpgroup up to this K (docs/optimizations.md)
EPI_SPLIT_MAX_K = 4096
# promote="rescale": largest K (measured on the H100 with make_operands' inputs: relative error
# 5.0e-3 at K=16384, 8.1e-3 at 32768, 1.4e-2 at 65536; the per-block promotion stays at 1.7e-3)
RESCALE_MAX_K = 16384


def auto_swizzle(
    mnkl,
    tile_n: int = 128,
    cluster_n: int = 1,
    tile_m: int = 128,
    cluster_m: int = 1,
    split_k: int = 1,
    num_sms: int = H100_SMS,
) -> int:
    """``swizzle=0`` resolved: the group (:func:`swizzle_choice`)."""
    return swizzle_choice(mnkl, tile_n, cluster_n, tile_m, cluster_m, split_k, num_sms)[0]


def swizzle_choice(
    mnkl,
    tile_n: int = 128,
    cluster_n: int = 1,
    tile_m: int = 128,
    cluster_m: int = 1,
    split_k: int = 1,
    num_sms: int = H100_SMS,
) -> tuple[int, str]:
    """``swizzle=0``: group tiles when A and B (FP8, one byte each) do not fit in L2 together,
    except on a plain grid whose work units all run in its first round. Grouped, a wave in M-major
    order does not stream all of A from DRAM again for every few N columns, and under the power cap
    that DRAM traffic costs clock; when they fit, grouping only spreads a wave's reads over more
    strips. When a plain grid (no cluster) runs every work unit in its first round, the order
    decides no reuse, only which CTA takes which tile: a group of 8 put the M tiles of each B column
    8 CTAs apart, and 200x8192x8192 (128x128 tiles, 128 of them) ran 1.20-1.21x slower that way
    than in plain M-major order, where they are adjacent; 1.09-1.23x on the other two-M-tile shapes
    with a short second tile, within 2% (or better) where the M tiles are full or there is one
    (H100, docs/perf.md). One-round clustered grids keep the group: there it measured 0.98-1.02x.

    The group (in clusters along N) is the divisor of the cluster columns nearest AUTO_SWIZZLE,
    the groups measured on the H100. (CuTe DSL's scheduler rounded the cluster columns up to a
    multiple of the group and ran the padding as whole tiles: a group of 8 on 28 cluster columns,
    N = 7168 in 256x128 tiles with 1x2 clusters, ran 512 cluster tiles for 448. Our tile order
    leaves a narrower last group instead, as DeepGEMM does, so ``swizzle=8`` there is DeepGEMM's
    own order.) Returns the group and why, in words (``bench --plan``)."""
    m, n, k, batches = mnkl
    if (m + n) * k * batches <= L2_BYTES:
        return 1, "A and B fit in L2"
    size = cluster_m * cluster_n
    one_round = (
        grid_ctas(
            mnkl,
            dict(tile_m=tile_m, tile_n=tile_n, cluster_m=cluster_m, cluster_n=cluster_n, split_k=split_k),
            num_sms // size,
        )[1]
        == 1
    )
    if one_round and size == 1:
        return 1, "every work unit runs in the first round"
    cols = -(-(-(-n // tile_n)) // cluster_n)
    group = min((g for g in range(1, 2 * AUTO_SWIZZLE + 1) if cols % g == 0), key=lambda g: (abs(g - AUTO_SWIZZLE), g))
    why = "A and B overflow L2" + (" (one round, but clustered grids keep the group)" if one_round else "")
    if group == 1:
        return 1, why + f": no group near {AUTO_SWIZZLE} divides the {cols} cluster columns"
    return group, why + f": groups of {group} of the {cols} cluster columns"


def auto_epi_split(mnkl) -> bool:
    """``epi_split="auto"``: per-warpgroup epilogues pay where a tile's K-loop is short (the tile
    end is a larger share of the tile) and cost ~2% of K-loop cycles on long ones (measured on the H100: docs/optimizations.md)."""
    return mnkl[2] <= EPI_SPLIT_MAX_K


def check_knobs_fit(
    kw: dict, mnkl, static: bool, num_sms: int = H100_SMS, explicit: dict | None = None
) -> tuple[str | None, tuple[str, ...]]:
    """Knobs that depend on the problem: ``tiles="auto"`` picks tile and cluster (select.py), the
    smem B-scale stash holds SFB_SMEM_KB K blocks (a shape-specialized build's, its own K blocks up to
    SFB_STASH_MAX_KB), the A-scale TMA a shape-specialized build, and
    ``swizzle=0`` picks the tile order from the operands' size. A shape-specialized build simply
    goes without what does not fit; a shape-generic one must refuse. The rescaled accumulation is
    refused past RESCALE_MAX_K at any build: its error grows with K. Returns why the tile and
    cluster are what they are (None when they were fixed) and the close calls' knobs. ``explicit``:
    the switches the user set, which the chosen tile must take."""
    from bsprof.kernels.fp8_blockwise.config import SFB_SMEM_KB
    from bsprof.kernels.fp8_blockwise.select import choose, knob_string

    if kw.get("promote") == "rescale" and mnkl[2] > RESCALE_MAX_K:
        raise BsprofError(
            f"promote='rescale' (the rescaled variant) accumulates all of K={mnkl[2]} in the tensor "
            f"cores' FP8 accumulator and is limited to K <= {RESCALE_MAX_K} (its error vs float64 "
            "passes 1e-2 near K=65536); use optimized, which promotes every 128-wide K block"
        )

    why, close = None, ()
    if kw.pop("tiles", None) == "auto" and static:

        def fits(c) -> bool:
            # a switch the user asked for stays (split_k too); the variant's defaults give way as they would
            if "split_k" in (explicit or {}) and c.split_k != kw.get("split_k", 1):
                return False
            trial = {**kw, **c.kwargs()}
            cfg.give_way(trial, explicit)
            return cfg.can_implement(trial) is None

        pick, why = choose(mnkl, kw.get("promote", "serial"), num_sms, fits)
        close = tuple(knob_string(c) for c in pick.close)
        kw.update(pick.kwargs())
        cfg.give_way(kw, explicit)
    if kw.get("swizzle", 1) == 0:
        kw["swizzle"] = auto_swizzle(
            mnkl,
            kw.get("tile_n", 128),
            kw.get("cluster_n", 1),
            kw.get("tile_m", 128),
            kw.get("cluster_m", 1),
            kw.get("split_k", 1),
            num_sms,
        )
    if kw.get("epi_split") == "auto":
        kw["epi_split"] = auto_epi_split(mnkl) and kw.get("split_k", 1) == 1
    split = kw.get("split_k", 1)
    if split > mnkl[2] // BLOCK:
        raise BsprofError(
            f"split_k={split} splits K={mnkl[2]} into more units than its {mnkl[2] // BLOCK} "
            f"K blocks of {BLOCK}; use split_k <= {mnkl[2] // BLOCK}"
        )
    if kw.get("sfa_tma") and not static:
        # the scales' box is baked into the TMA descriptor of a shape-specialized build; any M
        # works since the operands keep each K block's scale row 16-byte aligned (quant.aligned_scales)
        drop = "sfa_tma=0,sfb_tma=0" if kw.get("sfb_tma") else "sfa_tma=0"
        raise BsprofError(
            f"sfa_tma loads the A scales by TMA and needs a shape-specialized build (static_shapes=1); run with {drop}"
        )
    if kw.get("sfb_tma") and (mnkl[2] % (4 * BLOCK) or not kw.get("sfa_tma")):
        # the 16-byte box of 4 K blocks' B scales needs the scale rows' stride (K/128 floats) to
        # be a multiple of 16 bytes; it rides the A-scale TMA's path in the K-loop
        if static:
            kw["sfb_tma"] = False
        else:
            raise BsprofError(
                "sfb_tma loads the B scales by TMA and needs a shape-specialized build "
                "with K a multiple of 512 and sfa_tma=1; run with sfb_tma=0"
            )
    k_blocks = mnkl[2] // BLOCK
    stash_kb = cfg.sfb_stash_kb(k_blocks) if static else (SFB_SMEM_KB if k_blocks <= SFB_SMEM_KB else 0)
    if (
        kw.get("tile_m") == 64
        and kw.get("sfb_tma")
        and kw.get("sfb_smem")
        and "sfb_tma" not in (explicit or {})
        and k_blocks <= SFB_SMEM_KB
    ):
        # a one-warpgroup tile's K block is short enough for its producer's per-stage work to
        # count: three TMA copies a stage (A, its scales, B: DeepGEMM's count) with the B scales
        # stashed per tile measured 1.4-2.3% faster than four (docs/optimizations.md; K <= 16384,
        # longer K not measured: the stage's TMA keeps them there)
        kw["sfb_tma"] = False
    # trim_a is the launcher's: the kernel takes the rows it implies (a_rows)
    if kw.pop("trim_a", False) and static:
        rows = cfg.a_box_rows(mnkl[0], kw.get("tile_m", 128), kw.get("cluster_n", 1), kw.get("schedule", "coop"))
        if rows:
            kw["a_rows"] = rows
    if kw.get("sfb_smem") and not kw.get("sfb_tma") and stash_kb > SFB_SMEM_KB:
        kw["sfb_kb"] = stash_kb  # a longer K's B scales in a stash of its own size
    elif kw.get("sfb_smem") and not stash_kb:
        if static:
            kw["sfb_smem"] = False
        else:
            raise BsprofError(
                f"K={mnkl[2]} has more than {SFB_SMEM_KB} scale blocks, the smem B-scale stash; "
                "run with sfb_smem=0 (or static_shapes=1)"
            )
    return why, close


def grid_ctas(mnkl, kw: dict, max_active_clusters: int) -> tuple[int, int]:
    """(CTAs launched, most tiles any CTA runs) in the kernel's persistent tile order."""
    order = _tile_order(kw)
    # the walk covers whole clusters (a grouped order leaves a narrower last group, no padding);
    # split-K runs split_k work units per tile
    units = _work_tiles(mnkl, kw)
    cm, cn, clusters = order.grid(units, max_active_clusters)
    ctas = clusters * cm * cn
    return ctas, -(-order.units(units) // clusters)


def _tile_order(kw: dict) -> TileOrder:
    return TileOrder((kw.get("cluster_m", 1), kw.get("cluster_n", 1)), max(int(kw.get("swizzle", 1)), 1))


def _work_tiles(mnkl, kw: dict, split_k: int | None = None) -> tuple[int, int, int]:
    """The kernel's work units along M, N and L (split_k.WorkUnits.work_tiles on the host)."""
    m, n, _, batches = mnkl
    split = kw.get("split_k", 1) if split_k is None else split_k
    return tile_counts((m, n, batches), (kw.get("tile_m", 128), kw["tile_n"]), split)


def split_workspace(mnkl, kw: dict) -> tuple:
    """The split-K workspace of one prepared kernel: fp32 partials (one slice per work unit) and
    one int32 arrival counter per output tile, zeroed (the kernel leaves each counter at zero).
    Tiny placeholders without split-K."""
    import torch

    split = kw.get("split_k", 1)
    if split == 1:
        return (torch.zeros(4, dtype=torch.float32, device="cuda"), torch.zeros(4, dtype=torch.int32, device="cuda"))
    tm, tn, batches = _tile_order(kw).padded_tiles(_work_tiles(mnkl, kw, split_k=1))
    tiles = tm * tn * batches
    words = tiles * split * kw["tile_m"] * kw["tile_n"]
    if words >= 2**31:
        raise BsprofError(
            f"split_k={split} at {tuple(mnkl)} needs a workspace of {words} floats, past the "
            "kernel's 32-bit index; use split_k=1 (a problem this large fills the GPU unsplit)"
        )
    return (
        torch.empty(words, dtype=torch.float32, device="cuda"),
        torch.zeros(tiles, dtype=torch.int32, device="cuda"),
    )


def prepare(
    variant: str,
    mnkl,
    *,
    timing: bool = False,
    delay_kloop: int = 0,
    delay_phase1: int = 0,
    seed: int = 0,
    inputs: str = "randn",
    **config,
) -> Prepared:
    """GPU: compile for this device (once per process and knob set), fresh random inputs
    (``inputs``: see :func:`~bsprof.kernels.fp8_blockwise.quant.make_operands`)."""
    import os

    # line info for ncu / sass source attribution; CuTe DSL reads it when cutlass is first imported
    os.environ.setdefault("CUTE_DSL_LINEINFO", "1")
    import torch

    mnkl = tuple(int(x) for x in mnkl)
    check_shape(mnkl)
    if not torch.cuda.is_available():
        raise BsprofError("prepare() needs a CUDA GPU; use compile_cubin() for CPU-only builds")
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        raise BsprofError(
            f"the fp8-blockwise kernels are sm_90a (Hopper); this GPU is sm_{major}x — "
            "use the nvfp4 family on Blackwell"
        )
    kw, static, why, _ = resolve_build(
        variant,
        config,
        mnkl,
        torch.cuda.get_device_properties(0).multi_processor_count,
        timing,
        delay_kloop,
        delay_phase1,
    )
    import cuda.bindings.driver as cuda_drv
    import cutlass

    from bsprof.kernels.fp8_blockwise.quant import make_operands

    ops = make_operands(mnkl, seed=seed, inputs=inputs)
    max_active = _max_active(kw)
    ctas, tiles_per_cta = grid_ctas(mnkl, kw, max_active)
    plan = None
    if timing:
        from bsprof.analyzers.timing.buffer import plan_buffer

        plan = plan_buffer(ctas, cfg.warps_per_cta(kw["tile_m"]), tiles_per_cta)
        kw["sample_every"] = plan.sample_every  # compiled in
        tbuf = torch.zeros(math.prod(plan.shape), dtype=torch.int64, device="cuda")
        slots = plan.tile_slots
    else:
        tbuf = torch.zeros(2, dtype=torch.int64, device="cuda")
        slots = 1
    stream = cuda_drv.CUstream(torch.cuda.current_stream().cuda_stream)
    ws, cnt = split_workspace(mnkl, kw)
    tail = (cute_tensor(tbuf, 0, 16), cute_tensor(ws, 0, 16), cute_tensor(cnt, 0, 16), cutlass.Int32(slots), stream)
    args = (*_cute_views(ops, static), *tail)
    fn = _compiled_for(kw, args, max_active, mnkl if static else None)
    m, n, k, batches = mnkl
    return Prepared(
        variant=variant,
        mnkl=mnkl,
        kernel_name=KERNEL_NAME_HINT,
        flops=2.0 * m * n * k * batches,
        ops=ops,
        config=kw,
        choice=why,
        _fn=fn,
        _args=args,
        _tail=tail,
        _plan=plan,
        _tbuf=tbuf if timing else None,
        _static=static,
        _split_ws=(ws, cnt),
    )


def rebind(p: Prepared, ops) -> Prepared:
    """Point ``p`` at other operands of the same shape (so several kernels share one input set)."""
    p.ops = ops
    p._args = (*_cute_views(ops, p._static), *p._tail)
    p._ref = None
    return p
