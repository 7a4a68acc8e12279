"""The contract every bundled kernel family meets, so bench, ncu, timing, sass and validate treat
NVFP4 (sm_100a) and FP8-blockwise (sm_90a) alike.

A family package (``bsprof.kernels.nvfp4``, ``bsprof.kernels.fp8_blockwise``) exposes:

``ARCH``             "sm_100a" or "sm_90a"
``DEFAULT_MNKL``     (M, N, K, L) used when the user gives none
``compile_cubin(variant, out_dir, *, mnkl=DEFAULT_MNKL, timing=False, lineinfo=True, **config) -> Path``
                     CPU-only compile (``CUTE_DSL_ARCH``, fake tensors); returns the kept cubin.
``prepare(variant, mnkl, *, timing=False, delay_kloop=0, delay_phase1=0, seed=0, **config) -> Prepared``
                     GPU: compile for the current device, allocate fresh random inputs.
``plan(variant, mnkl, *, num_sms=..., **config) -> dict``
                     CPU: the tile, cluster and switches a launch of this problem would build, and
                     why that tile (``bsprof bench --plan``).

Benchmarking a family (correctness, timing beside its peers) is profiling, so it lives in
:mod:`bsprof.profile.bench`; a family exposes only what that needs: operands, launch, reference.

``Prepared`` has ``kernel_name: str`` (the name ncu sees), ``flops: float``, ``launch()`` (one
asynchronous launch), ``check() -> float`` (relative Frobenius error against the float64 reference
of the dequantized inputs; raises BsprofError on NaN or unwritten output) and, for timing builds,
``timing_table() -> pandas.DataFrame`` in :mod:`bsprof.analyzers.timing.schema`.

What a user names with ``--family``, ``--kernel SPEC`` and ``--mnkl`` is resolved once into a
:class:`Target`; verbs, benchmarks and the process ncu launches take the Target, not the strings.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from bsprof.errors import BsprofError

FAMILIES: dict[str, str] = {
    "nvfp4": "bsprof.kernels.nvfp4",
    "fp8-blockwise": "bsprof.kernels.fp8_blockwise",
}
# every family has baseline and optimized; pingpong (a schedule) and rescaled (an accumulation)
# only the Hopper family has
VARIANTS: tuple[str, ...] = ("baseline", "optimized", "rescaled", "pingpong")
# what --kernel means on every verb that runs or compiles a bundled kernel
KERNEL_HELP = (
    f"bundled kernel: {' | '.join(VARIANTS)}; on fp8-blockwise optionally with switches after ':', "
    "e.g. optimized:epi_split=0,swizzle=8 (docs/kernels-fp8-blockwise.md lists them)"
)
# compute-capability major -> family that runs there
FAMILY_BY_MAJOR: dict[int, str] = {10: "nvfp4", 9: "fp8-blockwise"}


def family_module(family: str) -> ModuleType:
    if family not in FAMILIES:
        raise BsprofError(f"unknown kernel family {family!r}; choose one of {', '.join(FAMILIES)}")
    return importlib.import_module(FAMILIES[family])


def family_for_capability(capability: tuple[int, int]) -> str:
    fam = FAMILY_BY_MAJOR.get(capability[0])
    if fam is None:
        raise BsprofError(
            f"no bundled kernel family runs on compute capability {capability[0]}.{capability[1]}; "
            "bsprof's kernels need sm_90 (Hopper) or sm_100 (Blackwell)"
        )
    return fam


def family_for_arch(arch: str) -> str:
    """The family that compiles for ``arch`` (sm_100a: nvfp4, sm_90a: fp8-blockwise)."""
    major = 10 if arch.startswith("sm_10") else 9 if arch.startswith("sm_9") else None
    family = FAMILY_BY_MAJOR.get(major) if major else None
    if family is None:
        raise BsprofError(f"--arch {arch}: bundled kernels exist for sm_100a (nvfp4) and sm_90a (fp8-blockwise)")
    return family


def compile_for_sass(spec: str, arch: str, mnkl=None) -> tuple[Path, tuple[int, int]]:
    """Compile the bundled kernel ``spec`` for ``arch`` on the CPU, with line info, for the problem
    ``mnkl`` (the family's default when None). Returns the cubin and the output tile (M, N) that
    build computes, so a per-tile budget never guesses the tile of a kernel we built ourselves."""
    family = family_for_arch(arch)
    variant, switches = parse_kernel_spec(spec, family)
    try:
        module = family_module(family)
    except ImportError as exc:
        raise BsprofError(f"the bundled {family} kernels are not importable ({exc}); reinstall bsprof") from None
    from bsprof.io import cache_dir

    shape = tuple(module.DEFAULT_MNKL) if mnkl is None else tuple(int(v) for v in mnkl)
    # beside the build cache: one small cubin per variant, replaced on rebuild, never a temp-dir leak
    out_dir = cache_dir("sass", family)
    cubin = Path(module.compile_cubin(variant, out_dir, mnkl=shape, lineinfo=True, **switches))
    return cubin, module.output_tile(variant, shape, **switches)


def parse_kernel_spec(spec: str, family: str | None = None, config: dict | None = None) -> tuple[str, dict]:
    """'optimized' or, on fp8-blockwise, 'optimized:epi_split=0,swizzle=8' -> (variant, switches).
    With ``family`` known, the switches are checked against that family's kernel (``config``: the
    other overrides they must combine with), so a bad spec is refused before any GPU work."""
    name, sep, _ = spec.partition(":")
    if name not in VARIANTS:
        raise BsprofError(
            f"--kernel {spec!r}: unknown kernel {name!r}; choose {', '.join(VARIANTS)} "
            "(fp8-blockwise switches go after ':', e.g. optimized:epi_split=0)"
        )
    if not sep or family is None:
        return name, {}
    if family != "fp8-blockwise":
        raise BsprofError(
            f"--kernel {spec!r}: switches after ':' are an fp8-blockwise option; drop them "
            f"for {family} (bench and timing configure it with --mma-tiler / --cluster / "
            "--sf-dtype / --sf-vec / --c-dtype)"
        )
    from bsprof.kernels.fp8_blockwise import config as cfg

    name, over = cfg.parse_spec(spec)
    cfg.resolve(name, {**(config or {}), **over})
    return name, over


@dataclass(frozen=True)
class Target:
    """One bundled kernel on one problem, resolved once: every verb, benchmark and subprocess
    that runs a kernel takes a Target, so the spec is parsed and checked in one place.

    ``switches`` are the fp8-blockwise switches written after ':' in the spec
    (``optimized:epi_split=0``); ``config`` the family options given as flags (``--mma-tiler``,
    ``--cluster``, ``--sf-dtype`` ...). ``str(target)`` is how a person reads it; :meth:`to_arg` /
    :meth:`from_arg` carry it whole to a subprocess.
    """

    family: str
    variant: str
    mnkl: tuple[int, int, int, int]
    switches: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    # the family was picked from the GPU (``--family auto``), which a verb says on the console
    picked_from_gpu: bool = field(default=False, compare=False)

    @classmethod
    def parse(cls, family: str, spec: str, mnkl=None, config: dict | None = None) -> "Target":
        """Resolve ``--family`` / ``--kernel`` / ``--mnkl`` (+ family flags) into a Target.

        The variant name is checked before anything else, so a typo is refused before the GPU is
        asked which family runs here (``family="auto"``); then the switches are checked against that
        family's kernel together with ``config``."""
        parse_kernel_spec(spec, None)
        # a malformed --mnkl is malformed for every family: refused before the GPU is asked too
        shape = parse_mnkl(mnkl) if isinstance(mnkl, str) else None
        picked = family == "auto"
        if picked:
            from bsprof.gpu import device_info

            family = family_for_capability(device_info()["capability"])
        name, switches = parse_kernel_spec(spec, family, config)
        if mnkl is None:
            shape = tuple(family_module(family).DEFAULT_MNKL)
        elif shape is None:
            shape = tuple(int(v) for v in mnkl)
        return cls(
            family=family,
            variant=name,
            mnkl=shape,
            switches=switches,  # type: ignore[arg-type]
            config=dict(config or {}),
            picked_from_gpu=picked,
        )

    def on_problem(self, mnkl) -> "Target":
        """This kernel on another problem (``(M, N, K, L)`` or ``"M,N,K[,L]"``); the spec is not
        parsed again."""
        shape = parse_mnkl(mnkl) if isinstance(mnkl, str) else tuple(int(v) for v in mnkl)
        return dataclasses.replace(self, mnkl=shape)

    @property
    def spec(self) -> str:
        """The kernel as ``--kernel`` takes it: the variant, then its switches after ':'."""
        if not self.switches:
            return self.variant
        return self.variant + ":" + ",".join(f"{k}={v}" for k, v in self.switches.items())

    @property
    def knobs(self) -> dict[str, Any]:
        """Every override the kernel is built with: the family flags, then the spec's switches."""
        return {**self.config, **self.switches}

    @property
    def shape(self) -> str:
        return "x".join(map(str, self.mnkl))

    @property
    def label(self) -> str:
        """The target as a file-name part: family, spec and M,N,K (':' ',' '=' become '_')."""
        return f"{self.family}_{spec_label(self.spec)}_{'x'.join(map(str, self.mnkl[:3]))}"

    def __str__(self) -> str:
        extra = "".join(f" --{k.replace('_', '-')} {v}" for k, v in self.config.items())
        return f"{self.family} {self.spec} {self.shape}{extra}"

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "variant": self.variant,
            "mnkl": list(self.mnkl),
            "switches": dict(self.switches),
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in self.config.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Target":
        """The Target :meth:`to_json` wrote; its spec is not parsed again (it was, once)."""
        try:
            return cls(
                family=str(data["family"]),
                variant=str(data["variant"]),
                mnkl=tuple(int(v) for v in data["mnkl"]),  # type: ignore[arg-type]
                switches=dict(data.get("switches") or {}),
                config={k: tuple(v) if isinstance(v, list) else v for k, v in (data.get("config") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BsprofError(f"not a kernel target: {data!r} ({type(exc).__name__}: {exc})") from None

    def to_arg(self) -> str:
        """One command-line argument a subprocess turns back into this Target (:meth:`from_arg`)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_arg(cls, text: str) -> "Target":
        try:
            data = json.loads(text)
        except ValueError:
            raise BsprofError(f"--target {text!r} is not a target written by Target.to_arg()") from None
        return cls.from_json(data if isinstance(data, dict) else {})

    def module(self) -> ModuleType:
        return family_module(self.family)

    def prepare(self, **kwargs):
        """``family.prepare(variant, mnkl, **knobs, **kwargs)``: compile for this GPU, allocate the
        operands."""
        return self.module().prepare(self.variant, self.mnkl, **{**self.knobs, **kwargs})


def spec_label(spec: str) -> str:
    """A kernel spec as a file-name part: its ':' ',' '=' become '_'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec)


def parse_mnkl(text: str) -> tuple[int, int, int, int]:
    """'8192,8192,1024' or '8192,8192,1024,1' -> (M, N, K, L)."""
    try:
        parts = [int(p) for p in text.replace("x", ",").split(",") if p.strip()]
    except ValueError:
        parts = []
    if len(parts) == 3:
        parts.append(1)
    if len(parts) != 4 or min(parts) <= 0:
        raise BsprofError(f"--mnkl {text!r} is not M,N,K[,L] with positive integers; e.g. --mnkl 4096,4096,4096,1")
    check_problem(tuple(parts), f"--mnkl {text!r}")  # type: ignore[arg-type]
    return tuple(parts)  # type: ignore[return-value]


# A GEMM's extents are 32-bit in every launcher (CUTLASS, CuTe DSL, cuBLAS take int32 sizes), and one
# operand of more than 2**40 elements (1 TiB at one byte each) fits on no GPU: beyond either a
# problem is a typo, and tile counts and FLOPs computed from it would mean nothing.
MAX_EXTENT = 2**31 - 1
MAX_OPERAND_ELEMENTS = 2**40


def check_problem(mnkl: tuple[int, int, int, int], what: str = "--mnkl") -> None:
    """Refuse a problem no GPU can run: an extent over :data:`MAX_EXTENT`, or an operand (A, B or
    the output, over all L batches) over :data:`MAX_OPERAND_ELEMENTS` elements."""
    m, n, k, l_ = mnkl
    big = max(mnkl)
    if big > MAX_EXTENT:
        raise BsprofError(
            f"{what}: an extent of {big:,} is over 2**31-1, the largest a GEMM launch takes; "
            "give the problem's real M,N,K[,L]"
        )
    largest = max(m * k, n * k, m * n) * l_
    if largest > MAX_OPERAND_ELEMENTS:
        raise BsprofError(
            f"{what}: an operand of {largest:.3g} elements (over 2**40, 1 TiB at one byte each) "
            "fits on no GPU; give the problem's real M,N,K[,L]"
        )


class PreparedMixin:
    """What every family's ``Prepared`` shares: the launch and the decoded timing-build table.

    The host class holds ``_fn`` / ``_args`` (the compiled kernel and its arguments), ``_plan``
    (the timing-buffer plan, None for a plain build), ``_tbuf`` (the device buffer),
    ``kernel_name`` and ``variant``.
    """

    _plan: object = None
    _tbuf: object = None

    def launch(self) -> None:
        """One asynchronous launch; a timing build starts from an empty buffer (0 = not written)."""
        if self._tbuf is not None:
            self._tbuf.zero_()
        self._fn(*self._args)

    def timing_table(self):
        if self._plan is None:
            raise BsprofError("timing_table() needs a timing build: prepare(..., timing=True)")
        import torch

        from bsprof.analyzers.timing.buffer import decode_buffer

        torch.cuda.synchronize()
        return decode_buffer(self._tbuf, self._plan, kernel=self.kernel_name, variant=self.variant)

    @property
    def kernel_call(self) -> tuple[object, tuple]:
        """``(fn, args)``: the compiled kernel and its arguments; ``fn(*args)`` launches it without
        the timing buffer's reset that :meth:`launch` does."""
        return self._fn, self._args

    @property
    def timing_plan(self):
        return self._plan

    @property
    def timing_buffer(self):
        return self._tbuf
