"""`bsprof report` on bad input: one clear line and exit 2, or a clearly marked section — never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bsprof.cli import cli
from bsprof.reports.runs import discover
from bsprof.reports.samples import RUN as SAMPLES


def _run(args: list[str]):
    return CliRunner().invoke(cli, ["report", *args])


def _one_artifact_dir(tmp_path: Path) -> Path:
    """A copy of one real shipped artifact (with its tables) in a fresh run directory."""
    arts = sorted(p for p in SAMPLES.rglob("*.json") if '"bsprof"' in p.read_text()[:4096])
    if not arts:
        pytest.skip("no shipped sample artifacts yet (scripts/make_samples.sh)")
    src = arts[0].parent
    dst = tmp_path / "run"
    shutil.copytree(src, dst)
    return dst


def test_no_artifacts_is_one_line_exit_2(tmp_path):
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    res = _run([str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert "nothing to render" in res.output and "no bsprof artifacts" in res.output
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("inside", [False, True], ids=["file", "in-a-directory"])
def test_an_unreadable_report_is_named_once(tmp_path, inside):
    """The reader's message already names the file: the refusal says which file once, not three times."""
    rep = (tmp_path / "d" if inside else tmp_path) / "broken.ncu-rep"
    rep.parent.mkdir(exist_ok=True)
    rep.write_bytes(b"not a report")
    res = _run([str(rep.parent if inside else rep), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "not a readable Nsight Compute report" in res.output
    assert res.output.count("broken.ncu-rep") == 1, res.output


def test_missing_dir_exit_2(tmp_path):
    res = _run([str(tmp_path / "nope"), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_half_written_only_is_exit_2_naming_the_file(tmp_path):
    (tmp_path / "ncu_summary.json").write_text('{"bsprof": {"kind": "ncu", "version": 1}, "launches": [{"ker')
    res = _run([str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "ncu_summary.json" in res.output and "truncated" in res.output


def test_three_runs_refused(tmp_path):
    for n in "abc":
        (tmp_path / n).mkdir()
    res = _run([str(tmp_path / n) for n in "abc"] + ["-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "two to compare" in res.output


def test_discover_notes_every_kind_of_bad_file(tmp_path):
    (tmp_path / "a.json").write_text('{"bsprof": {"kind": "sass", "version": 1}, "functions": [')
    (tmp_path / ".b.json.x1.tmp").write_text("{")
    (tmp_path / "c.json").write_text(json.dumps({"bsprof": {"kind": "weird", "version": 1}}))
    (tmp_path / "d.json").write_text(json.dumps({"bsprof": {"kind": "model", "version": 7}}))
    (tmp_path / "e.json").write_text(json.dumps([1, 2, 3]))
    run = discover(tmp_path)
    text = "\n".join(run.problems)
    assert run.artifacts == []
    assert "a.json: truncated" in text
    assert "temporary file" in text
    assert "unknown artifact kind 'weird'" in text
    assert "version 7" in text
    assert "e.json" not in text  # not a bsprof file: ignored silently


def test_half_written_beside_a_good_artifact_renders_with_marked_section(tmp_path):
    run_dir = _one_artifact_dir(tmp_path)
    (run_dir / "broken.json").write_text('{"bsprof": {"kind": "ncu", "version": 1}, "laun')
    out = tmp_path / "r.html"
    res = _run([str(run_dir), "-o", str(out)])
    assert res.exit_code == 0, res.output
    html = out.read_text()
    assert 'id="skipped"' in html and "broken.json: truncated" in html


def test_existing_report_replaced_atomically(tmp_path, monkeypatch):
    run_dir = _one_artifact_dir(tmp_path)
    from bsprof.io import BSPROF_MARK

    out = tmp_path / "r.html"
    old = f"<!DOCTYPE html><html><head>{BSPROF_MARK}</head>OLD</html>"  # an earlier page of bsprof's
    out.write_text(old)
    real_write = Path.write_text

    def half_then_fail(self, text, *a, **k):  # the disk fills up half-way through the new report
        real_write(self, text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_fail)
    res = _run([str(run_dir), "-o", str(out)])
    monkeypatch.undo()
    assert res.exit_code != 0
    assert out.read_text() == old  # the old report is whole, not half of the new one
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    res = _run([str(run_dir), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("<!DOCTYPE html>") and out.read_text().rstrip().endswith("</html>")


def test_output_is_a_directory(tmp_path):
    run_dir = _one_artifact_dir(tmp_path)
    res = _run([str(run_dir), "-o", str(tmp_path)])
    assert res.exit_code == 2 and "is a directory" in res.output


def test_no_dir_renders_the_shipped_samples(tmp_path):
    out = tmp_path / "report.html"
    res = _run(["-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "section verdict" in res.output and "wrote" in res.output
    html = out.read_text()
    assert "bsprof sample report" in html and 'data-figures-total="' in html
    assert (out.stat().st_mode & 0o777) != 0o600  # a report is a normal file, not a private temp file


def test_unknown_section_and_label_count(tmp_path):
    res = _run(["--only", "nonsense", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "unknown section nonsense" in res.output
    res = _run([str(SAMPLES), "--label", "a", "--label", "b", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "--label" in res.output
