"""Click parameter types for every verb's numeric flags: a bad number is one line naming the flag.

Python's ``float()`` takes ``nan``, ``inf`` and ``1e400`` (= inf) without complaint, and a NaN
passes every ``<``/``>`` range check after it; these types refuse them where the value is parsed,
so nothing downstream (models, JSON output) ever sees one.
"""

from __future__ import annotations

import math

import click

# A change of a phase by more than this many cycles (or percent) is a typo, not a what-if, and
# its projection would overflow to inf.
MAX_DELTA_CYCLES = 1e12
MAX_DELTA_PERCENT = 1e6


def _finite(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


class FiniteFloat(click.ParamType):
    """A finite float, optionally in [min, max]."""

    name = "number"

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min, self.max = min, max

    def convert(self, value, param, ctx) -> float:
        v = _finite(str(value).strip())
        if v is None:
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if (self.min is not None and v < self.min) or (self.max is not None and v > self.max):
            rng = (
                f"between {self.min:g} and {self.max:g}"
                if self.min is not None and self.max is not None
                else f">= {self.min:g}"
                if self.min is not None
                else f"<= {self.max:g}"
            )
            self.fail(f"{value!r} is out of range: it must be {rng}", param, ctx)
        return v


def _delta_ok(text: str) -> bool:
    t = text.strip().replace(",", "").replace("_", "")
    if t.endswith("%"):
        v = _finite(t[:-1])
        return v is not None and abs(v) <= MAX_DELTA_PERCENT
    v = _finite(t.removesuffix("cycles").removesuffix("cyc").strip())
    return v is not None and abs(v) <= MAX_DELTA_CYCLES


class Delta(click.ParamType):
    """A change of a phase: cycles (``-300``) or percent (``-5%``), finite and of sane size.
    Passes the text on: the model parses it (it also takes deltas from Python)."""

    name = "delta"

    def convert(self, value, param, ctx) -> str:
        text = str(value)
        if not _delta_ok(text):
            self.fail(
                f"{text!r} is not a delta; give cycles (e.g. -300) or percent (e.g. -5%), "
                f"finite and within ±{MAX_DELTA_CYCLES:g} cycles / ±{MAX_DELTA_PERCENT:g}%",
                param,
                ctx,
            )
        return text


class SweepSpec(click.ParamType):
    """``KNOB=START:STOP:STEP[,KNOB=...]`` whose numbers are finite deltas; the model checks the rest."""

    name = "spec"

    def convert(self, value, param, ctx) -> str:
        text = str(value)
        for part in (p for p in text.split(",") if p.strip()):
            _, _, rng = part.partition("=")
            bits = rng.split(":")
            bad = [b for b in bits if not _delta_ok(b)]
            if bad:
                self.fail(
                    f"{part.strip()!r}: {bad[0].strip()!r} is not a finite number within "
                    f"±{MAX_DELTA_CYCLES:g} (cycles) / ±{MAX_DELTA_PERCENT:g}%; give KNOB=START:STOP:STEP, "
                    "e.g. kloop=-600:0:50",
                    param,
                    ctx,
                )
        return text


class IntTuple(click.ParamType):
    """``A,B`` (or ``AxB``) of integers in [min, max]: tile shapes, cluster shapes."""

    name = "ints"

    def __init__(self, n: int = 2, min: int = 1, max: int = 1 << 20, example: str = "256,128") -> None:
        self.n, self.min, self.max, self.example = n, min, max, example

    def convert(self, value, param, ctx) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        parts = str(value).replace("x", ",").split(",")
        try:
            nums = tuple(int(p) for p in parts if len(p.strip()) <= 12)
        except ValueError:
            nums = ()
        if len(nums) != self.n or len(parts) != self.n or not all(self.min <= v <= self.max for v in nums):
            self.fail(f"{value!r} must be {self.n} integers in {self.min}..{self.max}, e.g. {self.example}", param, ctx)
        return nums


class IntTupleOrAuto(IntTuple):
    """An :class:`IntTuple`, or the word ``auto`` (kept as the string): "derive it where you can"."""

    def convert(self, value, param, ctx):
        return "auto" if str(value).strip().lower() == "auto" else super().convert(value, param, ctx)


def count(min: int = 1, max: int = (1 << 63) - 1) -> click.IntRange:
    """A whole number in [min, max] (repeat counts, seeds, indices)."""
    return click.IntRange(min=min, max=max)
