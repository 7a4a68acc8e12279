"""`bsprof model` end to end: output, JSON/CSV contract, artifacts, HTML, bad input, imports."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
from click.testing import CliRunner
from conftest import assert_one_line_error, run_bsprof
from test_model_calibrate import blackwell_table, hopper_table

from bsprof.cli import cli


def run(*args):
    return CliRunner().invoke(cli, ["model", *args], catch_exceptions=False)


def test_default_prints_calibrated_equilibrium_and_projection():
    r = run()
    assert r.exit_code == 0, r.output
    out = r.output
    for s in (
        "embedded B200 default",
        "6,067",
        "1,056",
        "epilogue",
        "kloop -5%",
        "phase1 -5%",
        "Pays",
        "Measured on this kernel",
        "K-loop -76",
        "0.536",
    ):
        assert s in out, s
    j = json.loads(run("--json").stdout)
    kl, rw = j["observed_checks"]
    assert round(kl["det_ms"], 3) == 0.543 and round(rw["det_ms"], 3) == 0.536 and round(rw["sto_ms"], 3) == 0.536
    assert -100 < rw["deltas"]["phase1"] < -60


def test_projection_json_contract():
    r = run("--kloop", "-300", "--phase1", "-200", "--json", "--tiles", "20000")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    for model in ("deterministic", "stochastic"):
        d = doc[model]
        for key in ("baseline_tile_cycles", "projected_tile_cycles", "wall_ratio", "binding_before", "binding_after"):
            assert key in d, (model, key)
        assert d["binding_before"] in ("producer", "epilogue")
    # the Monte Carlo band covered too few validation points: no output carries it
    assert not any("p05" in k or "p95" in k for k in doc["stochastic"])
    assert doc["deterministic"]["wall_ratio"] == pytest.approx(5867 / 6067)
    assert doc["deltas"] == {"kloop": "-300", "phase1": "-200"}


def test_percent_form_and_csv():
    r = run("--kloop", "-5%", "--csv", "--tiles", "5000")
    assert r.exit_code == 0
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("model,baseline_tile_cycles") and len(lines) == 3


def test_artifact_dir(tmp_path):
    r = run("--phase1", "-79", "-o", str(tmp_path), "--tiles", "5000")
    assert r.exit_code == 0
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    doc = json.loads((d / "model.json").read_text())
    assert doc["bsprof"] == {"kind": "model", "version": 1}
    assert doc["deterministic"]["wall_ratio"] == pytest.approx(5988 / 6067)
    r2 = run("-o", str(tmp_path), "--tiles", "5000")  # never reuses a results dir
    assert r2.exit_code == 0 and len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2


def test_sweep_html_csv_and_artifact(tmp_path):
    html = tmp_path / "sweep.html"
    r = run(
        "--sweep",
        "kloop=-600:0:300,phase1=-600:0:300",
        "--html",
        str(html),
        "--csv",
        "--tiles",
        "5000",
        "-o",
        str(tmp_path / "res"),
    )
    assert r.exit_code == 0
    rows = [ln.split(",") for ln in r.stdout.strip().splitlines()]
    assert rows[0][:2] == ["kloop", "phase1"] and len(rows) == 1 + 9
    text = html.read_text()
    assert "plotly" in text.lower() and "Heatmap".lower() in text.lower()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sweep.html")]
    (d,) = list((tmp_path / "res").iterdir())
    assert (d / "sweep.csv").is_file() and json.loads((d / "model.json").read_text())["axes"]["kloop"] == [
        -600,
        -300,
        0,
    ]


def test_from_timing_dir_and_file(tmp_path):
    t = blackwell_table(tiles=120)
    t.to_csv(tmp_path / "timing.csv", index=False)
    r = run("--from", str(tmp_path), "--kloop", "-100", "--json", "--tiles", "5000")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["structure"]["name"] == "blackwell" and doc["params"]["distribution"] == "empirical"
    h = hopper_table("coop", tiles=80)
    h.to_parquet(tmp_path / "h.parquet")
    r = run("--from", str(tmp_path / "h.parquet"), "--json", "--tiles", "5000")
    assert json.loads(r.stdout)["structure"]["name"] == "hopper-coop"


BAD = [
    (["--kloop", "-5000"], "makes it negative"),
    (["--phase1", "abc"], "is not a delta"),
    (["--acc-stages", "0"], "out of range"),
    (["--sweep", "kloop=0:-600:50"], "STOP >= START"),
    (["--sweep", "nope=0:1:1"], "not one of"),
    (["--html", "x.html"], "draws a sweep"),
    (["--bogus"], "No such option"),
    (["--kloop"], "requires an argument"),
    (["--structure", "foo"], "is not one of"),
    (["--from", "/nonexistent/timing.csv"], "does not exist"),
    (["--structure", "hopper-coop"], "needs a Hopper timing table"),
    (["--release", "2"], "between 0 and 1"),
]


@pytest.mark.parametrize("args,msg", BAD)
def test_bad_input_is_one_line_exit_2(args, msg):
    code, _, err = run_bsprof(["model", *args])
    assert msg in assert_one_line_error(code, err)
    assert len([ln for ln in err.splitlines() if ln.strip()]) == 1, err


def test_model_does_not_import_heavy_modules():
    code = (
        "import sys\nfrom bsprof.cli import cli\n"
        "try:\n    cli.main(['model', '--kloop', '-76', '--tiles', '5000'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "bad = [m for m in ('torch', 'cutlass', 'plotly') if m in sys.modules]\nprint('HEAVY', bad)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in p.stdout, p.stdout + p.stderr


def test_validate_forwards_to_the_timing_helper(monkeypatch, tmp_path):
    from bsprof.kernels.api import Target

    calls = {}
    fake = types.ModuleType("bsprof.profile.validate")

    def fake_run(target, **kw):
        calls.update(kw, target=target)
        return {"scored": [], "summary": {"n": 0}, "title": "t", "run_dir": str(tmp_path)}

    fake.run = fake_run
    monkeypatch.setitem(sys.modules, "bsprof.profile.validate", fake)
    import bsprof.profile as prof

    monkeypatch.setattr(prof, "validate", fake, raising=False)
    r = run(
        "--validate",
        "--kernel",
        "baseline",
        "--family",
        "fp8-blockwise",
        "--mnkl",
        "4096,4096,4096",
        "-o",
        str(tmp_path),
    )
    assert r.exit_code == 0
    # the kernel, family and problem arrive as one Target, resolved once by the verb
    assert calls["target"] == Target("fp8-blockwise", "baseline", (4096, 4096, 4096, 1))
    assert calls["out_dir"] == str(tmp_path) and "console" in calls
    assert calls["repeats"] == 5


def test_validate_refuses_fewer_than_five_repeats():
    r = run("--validate", "--kernel", "optimized", "--family", "fp8-blockwise", "--repeats", "3")
    assert r.exit_code == 2 and "at least 5 repeats" in r.output
