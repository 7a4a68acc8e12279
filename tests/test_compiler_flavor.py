"""The SASS bsprof counts on the CPU is the SASS the GPU runs: nvidia-cutlass-dsl ships its compiler in a
cu12 and a cu13 flavor, which emit different code for the same kernel, and the GPU host runs cu13
(`kernels/build.py`, ``dsl_toolkit``). Checked against Nsight Compute reports of two bundled builds as an
H100 ran them (tests/data/h100_ncu_elect_release: ``bsprof ncu --kernel SPEC --mnkl 5632,8192,2048 --set
full``)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from bsprof.analyzers.sass import analyze_cubin, analyze_path
from bsprof.kernels.build import dsl_compiler, dsl_toolkit
from bsprof.profile import validate_changes as VC

DATA = Path(__file__).parent / "data"
RAN = DATA / "h100_ncu_elect_release"
BASE = "optimized:tile_m=256,tile_n=128,cluster_m=1,cluster_n=2"
PROBLEM = (5632, 8192, 2048, 1)


def _kloop_opcodes(fa) -> collections.Counter:
    return collections.Counter(fa.instructions[i].opcode for i in fa.kloop.instructions)


def test_the_install_compiles_with_the_flavor_the_gpu_runs():
    """The kernels extra installs the cu13 flavor beside the default cu12; with no driver the DSL takes the
    newest, so this machine compiles what the CUDA 13 GPU host compiles."""
    assert dsl_toolkit() == "cu13"
    assert dsl_compiler().endswith(" cu13")


@pytest.mark.parametrize(
    ("switch", "report"),
    [(None, "optimized_256x128.ncu-rep.xz"), ("elect_release=0", "optimized_256x128_elect_release0.ncu-rep.xz")],
)
def test_the_cpu_build_has_the_kloop_the_gpu_ran(switch, report):
    """Compiled here, each build's K-loop is the one Nsight Compute saw execute, opcode for opcode (724 and
    717 instructions). The cu12 flavor compiled elect_release=0's K-loop to 882, its descriptors moved out
    of the uniform registers (+256 R2UR a tile), which the GPU never ran: every stored check counted before
    counts named their compiler priced that build 2-3 pp high on the 256-row tile."""
    spec = BASE if switch is None else VC.pair_spec(BASE, switch)
    cubin, tile = VC.bundled_cubin(spec, PROBLEM)
    assert tile == (256, 128)
    here = analyze_cubin(cubin)[0]
    ran = analyze_path(RAN / report)[0]
    assert len(here.kloop.instructions) == len(ran.kloop.instructions) == (724 if switch is None else 717)
    assert _kloop_opcodes(here) == _kloop_opcodes(ran)
    assert _kloop_opcodes(here)["R2UR"] == _kloop_opcodes(analyze_path(RAN / "optimized_256x128.ncu-rep.xz")[0])["R2UR"]


def _change_steps():
    """benchmarks/change_steps.py as a module (a script, not a package member)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "change_steps", Path(__file__).parents[1] / "benchmarks" / "change_steps.py"
    )
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)
    return steps


def test_a_one_call_check_refuses_counts_of_another_compiler(tmp_path, capsys):
    """`change_steps.py run` prices from committed counts: counts of another compiler (or of one they do not
    name: every count made before they named theirs was cu12's) are refused in one line before any GPU work,
    and nothing is written."""
    steps = _change_steps()
    committed = json.loads((DATA / "changes_switches_cu13" / "counts.json").read_text())
    for compiler in ("nvidia-cutlass-dsl 4.8.1 cu12", None):
        doc = dict(committed)
        doc.pop("compiler")
        if compiler:
            doc["compiler"] = compiler
        counts = tmp_path / "counts.json"
        counts.write_text(json.dumps(doc))
        out = tmp_path / "out"
        assert steps.main(["run", str(counts), str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "this host builds the kernels with nvidia-cutlass-dsl 4.8.1 cu13" in err[0]
        assert (compiler or "a compiler it does not name") in err[0]
        assert not out.exists()


def test_a_one_call_check_runs_the_counted_problems_asked_for(tmp_path, capsys, monkeypatch):
    """`change_steps.py run --only` captures and times only the counted problems it names (the device time
    left may not run them all); a problem the counts do not hold is refused in one line naming those they
    do, before any GPU work, and nothing is written."""
    steps = _change_steps()
    counts = DATA / "changes_tile_widths" / "counts.json"
    out = tmp_path / "out"
    assert steps.main(["run", str(counts), str(out), "--only", "1024,9472,4096"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1024x9472x4096: not counted" in err[0] and "1024x9472x3072" in err[0]
    assert not out.exists()

    captured = []

    def no_gpu(mnkl: str, where: Path) -> int:
        captured.append(mnkl)
        raise OSError("no GPU here")

    monkeypatch.setattr(steps, "bases", no_gpu)
    assert steps.main(["run", str(counts), str(out), "--only", "2304,4608,3584; 1024,9472,3072"]) == 2
    assert captured == ["1024,9472,3072;2304,4608,3584"]


def test_the_chain_of_bundled_builds_names_their_compiler():
    """`--change` on a bundled spec compiles both builds here and says with what, in its header and JSON, so a
    user comparing with a GPU's run knows which flavor's SASS was priced; two cubins from elsewhere carry no
    such line (bsprof did not compile them)."""
    from click.testing import CliRunner

    from bsprof.cli import cli

    args = ["model", "--change", "optimized:uniform_desc=0", "--mnkl", "4096,4096,4096"]
    out = CliRunner().invoke(cli, args, env={"COLUMNS": "100"})
    assert out.exit_code == 0, out.output
    assert f"compiled here with {dsl_compiler()}" in out.output
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)
    assert doc["change"]["compiler"] == dsl_compiler()
    sample = Path(__file__).parents[1] / "bsprof" / "data" / "samples" / "change"
    cubins = [str(sample / "optimized.sm_90a.cubin.xz"), str(sample / "optimized_uniform_desc0.sm_90a.cubin.xz")]
    out = CliRunner().invoke(cli, ["model", "--change", *cubins, "--mnkl", "4096,4096,4096", "--tile-mn", "256,128"])
    assert out.exit_code == 0 and "compiled here with" not in out.output
