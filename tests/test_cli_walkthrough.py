"""What a fresh user meets at the command line: --json prints the data alone, `timing --from -o`
writes the results directory it promises, messages speak the user's units, and an option that
means nothing where it is given is refused, not ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_bsprof

ROOT = Path(__file__).resolve().parent.parent
TIMING = ROOT / "tests/data/h100_timing"
SASS = ROOT / "tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
NCU = ROOT / "tests/data/h100_cute_tiny.ncu-rep.xz"


def test_timing_from_with_output_writes_a_results_directory(tmp_path):
    code, out, err = run_bsprof(["timing", "--from", str(TIMING), "-o", str(tmp_path / "tout")])
    assert code == 0, err
    (run,) = (tmp_path / "tout").iterdir()
    # the line naming what it wrote keeps its bracketed note (rich would read "[all tiles]" as markup)
    assert "trace.json [all tiles]" in " ".join((out + err).split()), out + err
    assert sorted(p.name for p in run.iterdir()) == ["timing.csv", "timing.json", "timing.parquet", "trace.json"]
    doc = json.loads((run / "timing.json").read_text())
    assert doc["bsprof"]["kind"] == "timing" and doc["stats"]["phases"]
    assert doc["mnkl"] and doc["source"] == str(TIMING)
    # what it wrote reads back as a capture: summarized again, and rendered by `bsprof report`
    code, out, err = run_bsprof(["timing", "--from", str(run), "--json"])
    assert code == 0, err
    assert json.loads(out)["stats"] == doc["stats"]


def test_timing_from_without_output_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_bsprof(["timing", "--from", str(TIMING)])
    assert code == 0, err
    assert list(tmp_path.iterdir()) == []


def test_timing_from_refuses_a_file_as_output_before_reading(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("keep")
    line = assert_one_line_error(*run_bsprof(["timing", "--from", str(TIMING), "-o", str(f)])[::2])
    assert "not a directory" in line and f.read_text() == "keep"


@pytest.mark.parametrize(
    "args",
    [
        ["model", "--tiles", "1000", "--json"],
        ["model", "--tiles", "1000", "--from", str(TIMING), "--json"],
        ["model", "--tiles", "1000", "--sweep", "kloop=-100:0:50", "--json"],
        ["timing", "--from", str(TIMING), "--json"],
    ],
)
def test_json_prints_the_data_alone(args):
    code, out, err = run_bsprof(args)
    assert code == 0, err
    json.loads(out)
    assert err.strip() == "", err[:500]


def test_csv_prints_the_data_alone():
    code, out, err = run_bsprof(["model", "--tiles", "1000", "--csv"])
    assert code == 0, err
    assert out.splitlines()[0].count(",") >= 2 and err.strip() == "", err[:500]


def test_a_percent_delta_is_bounded_in_percent():
    line = assert_one_line_error(*run_bsprof(["model", "--kloop", "-200%"])[::2])
    assert "above -100%" in line and "-4,154" not in line.split("use")[-1], line
    line = assert_one_line_error(*run_bsprof(["model", "--kloop", "-5000"])[::2])
    assert "above -4,154" in line, line


def test_a_nan_in_a_timing_table_is_shown_as_nan(tmp_path):
    import pandas as pd

    t = pd.read_parquet(TIMING / "timing.parquet")
    t["start"] = t["start"].astype("float64")
    t.loc[5, "start"] = float("nan")
    t.to_csv(tmp_path / "nan.csv", index=False)
    for verb in ("model", "timing"):
        line = assert_one_line_error(*run_bsprof([verb, "--from", str(tmp_path / "nan.csv")])[::2])
        assert "row 5 is nan," in line and "np." not in line, line


def test_a_missing_phase_says_what_the_verb_needs(tmp_path):
    import pandas as pd

    t = pd.read_parquet(TIMING / "timing.parquet")
    t[t.phase != "kloop"].to_csv(tmp_path / "nokloop.csv", index=False)
    line = assert_one_line_error(*run_bsprof(["timing", "--from", str(tmp_path / "nokloop.csv")])[::2])
    assert "the timing summary" in line and "model" not in line, line
    line = assert_one_line_error(*run_bsprof(["model", "--from", str(tmp_path / "nokloop.csv")])[::2])
    assert "the model needs them" in line, line


def test_ncu_help_shows_a_plain_percent():
    code, out, _ = run_bsprof(["ncu", "--help"])
    assert code == 0 and "%%" not in out and "% of" in out


@pytest.mark.parametrize(
    "mnkl, says, not_says",
    [
        ("100,100,100", "pad K to 128 and N to 104 (bf16 rows of D must be 16-byte aligned", None),
        ("100,96,100", "pad K to 128:", "N to"),
        ("100,100,128", "pad N to 104:", None),
    ],
)
def test_the_padding_message_names_every_padded_extent(mnkl, says, not_says):
    line = assert_one_line_error(*run_bsprof(["bench", "--plan", "--family", "fp8-blockwise", "--mnkl", mnkl])[::2])
    assert says in line, line
    assert not_says is None or not_says not in line, line


@pytest.mark.parametrize(
    "args, says",
    [
        (["sass", str(SASS), "--launch", "3"], "--launch picks a launch of an .ncu-rep"),
        (["ncu", "--report", str(NCU), "--set", "full"], "--set picks what a profiling run (--kernel) collects"),
        (["ncu", "--report", str(NCU), "--set", "triage"], "--set picks what a profiling run (--kernel) collects"),
        (["model", "--kernel", "bogus"], "--kernel applies only with --validate"),
        (["model", "--mnkl", "4096,4096,4096"], "--mnkl applies only with --validate"),
    ],
)
def test_an_option_that_does_not_apply_is_refused(args, says):
    line = assert_one_line_error(*run_bsprof(args)[::2])
    assert says in line, line


def test_launch_still_applies_to_a_report():
    code, _, err = run_bsprof(["sass", str(NCU), "--launch", "0", "--json"])
    assert code == 0, err
