"""One Target: --family / --kernel / --mnkl resolved once, printable, and carried whole to the
process ncu launches, which does not parse the spec again."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from bsprof.cli import cli
from bsprof.errors import BsprofError
from bsprof.kernels import api
from bsprof.kernels.api import Target


def test_parse_resolves_spec_switches_config_and_problem():
    t = Target.parse("fp8-blockwise", "optimized:epi_split=0,swizzle=8", "8192,8192,1024", {"mma_tiler": (128, 128)})
    assert (t.family, t.variant, t.mnkl) == ("fp8-blockwise", "optimized", (8192, 8192, 1024, 1))
    assert t.switches == {"epi_split": 0, "swizzle": 8} and t.config == {"mma_tiler": (128, 128)}
    assert t.knobs == {"mma_tiler": (128, 128), "epi_split": 0, "swizzle": 8}
    assert t.spec == "optimized:epi_split=0,swizzle=8"
    assert str(t) == "fp8-blockwise optimized:epi_split=0,swizzle=8 8192x8192x1024x1 --mma-tiler (128, 128)"
    assert t.label == "fp8-blockwise_optimized_epi_split_0_swizzle_8_8192x8192x1024"
    assert not t.picked_from_gpu


def test_default_problem_is_the_family_default():
    from bsprof.kernels import fp8_blockwise

    assert Target.parse("fp8-blockwise", "baseline").mnkl == tuple(fp8_blockwise.DEFAULT_MNKL)


def test_round_trip_through_an_argument():
    t = Target.parse("fp8-blockwise", "optimized:swizzle=4", (4096, 4096, 4096, 2), {"cluster": (2, 1)})
    back = Target.from_arg(t.to_arg())
    assert back == t and back.config["cluster"] == (2, 1)
    assert Target.from_json(t.to_json()) == t


@pytest.mark.parametrize(
    "family,spec,mnkl,message",
    [
        ("fp8-blockwise", "fastest", None, "unknown kernel 'fastest'"),
        ("fp8-blockwise", "optimized:nope=1", None, "unknown fp8-blockwise option 'nope'"),
        ("nvfp4", "optimized:swizzle=8", None, "switches after ':' are an fp8-blockwise option"),
        ("fp8-blockwise", "optimized", "4096,0,4096", "not M,N,K[,L] with positive integers"),
    ],
)
def test_bad_targets_are_one_line_errors(family, spec, mnkl, message):
    with pytest.raises(BsprofError, match=re.escape(message)):
        Target.parse(family, spec, mnkl)


def test_bad_argument_is_one_line():
    with pytest.raises(BsprofError, match="not a kernel target"):
        Target.from_arg("[1, 2]")
    with pytest.raises(BsprofError, match="not a target written by"):
        Target.from_arg("{cut")


def test_a_typo_is_refused_before_the_gpu_is_asked(monkeypatch):
    def no_gpu():
        raise AssertionError("the GPU was asked before the spec was checked")

    monkeypatch.setattr("bsprof.gpu.device_info", no_gpu)
    with pytest.raises(BsprofError, match="unknown kernel"):
        Target.parse("auto", "fastest")
    # a malformed shape is malformed for every family
    with pytest.raises(BsprofError, match="is not M,N,K"):
        Target.parse("auto", "optimized", "1,2")


def test_the_launcher_takes_the_target_whole(monkeypatch, tmp_path):
    """`python -m bsprof.profile.launch --target ...` builds the kernel from the Target as given:
    the spec is not parsed again in the subprocess."""
    from bsprof.profile import launch

    calls: list[str] = []
    monkeypatch.setattr(api, "parse_kernel_spec", lambda *a, **k: calls.append("parse") or ("x", {}))
    seen: dict = {}
    monkeypatch.setattr(
        launch,
        "run",
        lambda target, warmup, torch_scaled_mm=False: seen.update(target=target, warmup=warmup) or {"ok": True},
    )
    t = Target.from_json(
        {"family": "fp8-blockwise", "variant": "optimized", "mnkl": [256, 256, 512, 1], "switches": {"epi_split": 0}}
    )
    assert launch.main(["--target", t.to_arg(), "--warmup", "2", "--info", str(tmp_path / "i.json")]) == 0
    assert seen == {"target": t, "warmup": 2} and calls == []
    assert (tmp_path / "i.json").read_text().strip() == '{\n  "ok": true\n}'


def test_ncu_verb_passes_the_target_to_the_launcher(monkeypatch, tmp_path):
    """`bsprof ncu --kernel` resolves the target once and hands ncu's launcher one --target argument."""
    from bsprof.profile import ncu_runner

    monkeypatch.setattr(ncu_runner, "find_ncu", lambda: "/usr/bin/ncu")
    monkeypatch.setattr(
        "bsprof.gpu.device_info", lambda: {"name": "NVIDIA H100", "capability": (9, 0), "sm_count": 132}
    )
    got: dict = {}

    def fake_profile(req, out, name, **kw):
        got["args"] = req.launcher_args
        raise BsprofError("stop here")

    monkeypatch.setattr(ncu_runner, "profile_to_dir", fake_profile)
    res = CliRunner().invoke(
        cli,
        [
            "ncu",
            "--kernel",
            "optimized:epi_split=0",
            "--family",
            "fp8-blockwise",
            "--mnkl",
            "4096,4096,1024",
            "-o",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 2 and "stop here" in res.output
    args = got["args"]
    assert args[0] == "--target" and "--variant" not in args and "--family" not in args
    t = Target.from_arg(args[1])
    assert (t.spec, t.mnkl) == ("optimized:epi_split=0", (4096, 4096, 1024, 1))


def test_old_option_spelling_still_works_and_says_so(tmp_path, data_dir):
    cubin = data_dir / "sass" / "nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
    res = CliRunner().invoke(cli, ["sass", str(cubin), "--out", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    assert "`bsprof sass --out` is deprecated" in res.stderr and "use --output" in res.stderr
    assert (tmp_path / "s" / "sass.json").is_file()
    res = CliRunner().invoke(cli, ["sass", str(cubin), "-o", str(tmp_path / "t")])
    assert res.exit_code == 0 and "deprecated" not in res.stderr
