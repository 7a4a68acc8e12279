"""One spelling per meaning across the verbs: `-o/--output` for where results go, `--kernel` for a
bundled kernel spec (checked by the one parser in kernels.api)."""

from __future__ import annotations

import importlib

import click
import pytest

from bsprof.cli import DEPRECATED_OPTIONS, VERBS


def _command(verb: str) -> click.Command:
    return importlib.import_module(VERBS[verb][0]).command


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_output_is_spelled_one_way(verb: str):
    opts = [p for p in _command(verb).params if isinstance(p, click.Option) and "-o" in p.opts]
    assert opts, f"bsprof {verb} has no -o"
    assert opts[0].opts == ["-o", "--output"], f"bsprof {verb} spells -o as {opts[0].opts}"
    assert not any("--out" in p.opts for p in _command(verb).params), f"bsprof {verb} still takes --out"


@pytest.mark.parametrize("verb", sorted(v for v in VERBS if v != "report"))
def test_kernel_takes_a_spec_not_a_fixed_list(verb: str):
    """`--kernel` is free text that kernels.api parses (variant plus switches), never a click.Choice
    of variants that would refuse `optimized:epi_split=0` with a message of its own."""
    kernel = [p for p in _command(verb).params if isinstance(p, click.Option) and "--kernel" in p.opts]
    assert kernel, f"bsprof {verb} has no --kernel"
    assert not isinstance(kernel[0].type, click.Choice)


def test_every_deprecated_spelling_names_an_option_that_exists():
    for verb, renames in DEPRECATED_OPTIONS.items():
        spelled = {o for p in _command(verb).params for o in getattr(p, "opts", [])}
        for old, new in renames.items():
            assert old not in spelled and new in spelled, (verb, old, new)
