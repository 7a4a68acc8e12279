"""Outputs appear whole or not at all, and what the user had survives a failed write."""

import os

import pytest

from bsprof.io import atomic_path, results_dir, write_text_atomic


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    dest = write_text_atomic(tmp_path / "report.html", "old")
    with pytest.raises(RuntimeError):
        with atomic_path(dest) as tmp:
            tmp.write_text("half")
            raise RuntimeError("renderer crashed")
    assert dest.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_new_file_gets_the_usual_mode(tmp_path):
    umask = os.umask(0o022)
    try:
        dest = write_text_atomic(tmp_path / "a.json", "{}")
    finally:
        os.umask(umask)
    assert os.stat(dest).st_mode & 0o777 == 0o644


def test_results_dir_never_reuses(tmp_path):
    with results_dir(tmp_path, "run") as a:
        (a.path / "x.json").write_text("{}")
    with results_dir(tmp_path, "run") as b:
        pass
    assert a.path != b.path and a.path.is_dir() and b.path.is_dir() and b.path.name == "run-2"
    assert (a.path / "x.json").read_text() == "{}"


# ---------------------------------------------------------------------------------------------
# The output policy through the CLI of every verb that writes without a GPU: report -o, model -o
# and --html, sass -o, ncu --report -o (bench and timing write only after a GPU run, through the
# same bsprof.io functions).

import stat  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

from conftest import assert_one_line_error, run_bsprof  # noqa: E402

from bsprof.errors import BsprofError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "bsprof/data/samples/run"
SASS = ROOT / "tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
NCU = ROOT / "tests/data/h100_cute_tiny.ncu-rep.xz"

# verb arguments that write one file at PATH / into a directory under PATH
FILE_WRITERS = {
    "report": lambda p: ["report", str(SAMPLES / "bench_h100"), "-o", str(p)],
    "model --html": lambda p: ["model", "--tiles", "1000", "--sweep", "kloop=-100:0:50", "--html", str(p)],
}
DIR_WRITERS = {
    "sass": lambda p: ["sass", str(SASS), "--json", "-o", str(p)],
    "model": lambda p: ["model", "--tiles", "1000", "--json", "-o", str(p)],
    "ncu": lambda p: ["ncu", "--report", str(NCU), "--json", "-o", str(p)],
}


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_a_fifo_is_written_through_not_replaced(tmp_path, verb):
    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = run_bsprof(FILE_WRITERS[verb](fifo))
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and b"<html" in got[0][:5000].lower()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html"]  # no temp file left


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_a_symlink_stays_and_its_target_is_written(tmp_path, verb):
    from bsprof.io import BSPROF_MARK

    target = tmp_path / "real" / "page.html"
    target.parent.mkdir()
    target.write_text(f"<html><head>{BSPROF_MARK}</head>an earlier page</html>")  # bsprof's own: replaceable
    os.chmod(target, 0o640)
    link = tmp_path / "link.html"
    link.symlink_to(target)
    code, _, err = run_bsprof(FILE_WRITERS[verb](link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "<html" in target.read_text()[:5000].lower()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640  # the file keeps its permissions


def test_a_dangling_symlink_gets_its_target_created(tmp_path):
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "made.html")
    code, _, err = run_bsprof(FILE_WRITERS["report"](link))
    assert code == 0, err
    assert link.is_symlink() and (tmp_path / "made.html").is_file()


def test_a_character_device_is_written_through(tmp_path):
    # a private copy of /dev/null (char 1,3): the test never touches the system's own
    dev = tmp_path / "null"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a character device here ({exc})")
    for make in FILE_WRITERS.values():
        code, _, err = run_bsprof(make(dev))
        assert code == 0, err
        assert stat.S_ISCHR(os.lstat(dev).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_dev_stdout_writes_to_stdout(tmp_path, capfd):
    from bsprof.io import write_text_atomic

    write_text_atomic("/dev/stdout", "to the terminal\n")
    assert "to the terminal" in capfd.readouterr().out


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS) + sorted(DIR_WRITERS))
@pytest.mark.parametrize("where", ["/proc/bsprof-none/x/out", "/proc/self/out", "FILE/sub"])
def test_an_unwritable_output_is_one_line(tmp_path, verb, where):
    if where.startswith("FILE"):
        (tmp_path / "f").write_text("keep")
        where = str(tmp_path / "f") + where[4:]
    make = FILE_WRITERS.get(verb) or DIR_WRITERS[verb]
    code, _, err = run_bsprof(make(where))
    line = assert_one_line_error(code, err)
    assert where.split("/out")[0].split("/sub")[0] in line or "/proc" in line, line
    if (tmp_path / "f").exists():
        assert (tmp_path / "f").read_text() == "keep"


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_a_directory_is_not_a_file_output(tmp_path, verb):
    code, _, err = run_bsprof(FILE_WRITERS[verb](tmp_path))
    assert "directory" in assert_one_line_error(code, err)


def test_a_missing_parent_is_made_inside_a_writable_directory(tmp_path):
    code, _, err = run_bsprof(FILE_WRITERS["report"](tmp_path / "a" / "r.html"))
    assert code == 0, err
    assert (tmp_path / "a" / "r.html").is_file()


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS) + sorted(DIR_WRITERS))
def test_only_one_missing_directory_level_is_made(tmp_path, verb):
    # a typo'd path is refused, not built out: nothing appears under tmp_path
    make = FILE_WRITERS.get(verb) or DIR_WRITERS[verb]
    code, _, err = run_bsprof(make(tmp_path / "nonexist" / "deep" / "out"))
    line = assert_one_line_error(code, err)
    assert "does not exist" in line and str(tmp_path / "nonexist") in line, line
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# A single output file goes only over an empty file or a page bsprof wrote: never over the user's.

@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_a_file_bsprof_did_not_write_is_refused_and_kept(tmp_path, verb):
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    code, _, err = run_bsprof(FILE_WRITERS[verb](notes))
    line = assert_one_line_error(code, err)
    assert "notes.txt exists and was not written by bsprof" in line and "new path or remove it" in line, line
    assert notes.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no temp file left


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_a_link_to_a_file_bsprof_did_not_write_is_refused(tmp_path, verb):
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    link = tmp_path / "link.html"
    link.symlink_to(notes)
    line = assert_one_line_error(*run_bsprof(FILE_WRITERS[verb](link))[::2])
    assert "not written by bsprof" in line, line
    assert notes.read_text() == "precious\n" and link.is_symlink()


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
def test_an_empty_file_and_bsprofs_own_page_are_replaced(tmp_path, verb):
    page = tmp_path / "page.html"
    page.touch()
    for _ in range(2):  # empty, then the page the first run wrote
        code, _, err = run_bsprof(FILE_WRITERS[verb](page))
        assert code == 0, err
        head = page.read_text()[:5000]
        assert '<meta name="generator" content="bsprof">' in head


def test_a_report_page_from_before_the_mark_is_still_replaced(tmp_path):
    # the head of a page `bsprof report` wrote before pages carried the generator mark: its default
    # title is how the README's re-run over it is told from a user's own HTML page
    old = tmp_path / "bsprof-report.html"
    old.write_text('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
                   'content="width=device-width, initial-scale=1"><title>bsprof report: h100_timing</title>'
                   '</head><body></body></html>')
    mine = tmp_path / "mine.html"
    mine.write_text("<!DOCTYPE html><html><head><title>my notes</title></head><body>keep</body></html>")
    code, _, err = run_bsprof(FILE_WRITERS["report"](old))
    assert code == 0, err
    assert '<meta name="generator" content="bsprof">' in old.read_text()[:5000]
    line = assert_one_line_error(*run_bsprof(FILE_WRITERS["report"](mine))[::2])
    assert "not written by bsprof" in line and "keep" in mine.read_text()


def test_every_html_bsprof_writes_carries_its_mark():
    from bsprof.io import BSPROF_MARK
    from bsprof.reports.figures_model import figure_html, projection_figure
    from bsprof.reports.page import render_page

    assert BSPROF_MARK in render_page("t", "s", [])[:2000]
    assert BSPROF_MARK in figure_html(projection_figure({"deltas": {}}))[:2000]


# ---------------------------------------------------------------------------------------------
# Output paths are checked before any work: a refused -o costs no computation.

@pytest.mark.parametrize("verb", sorted(FILE_WRITERS) + ["model", "ncu"])
def test_a_refused_output_is_refused_before_any_work(tmp_path, verb, monkeypatch):
    import bsprof.analyzers.model.run as model_run
    import bsprof.analyzers.ncu.summary as ncu_summary
    import bsprof.reports.build as report_build

    def no_work(*a, **k):
        raise AssertionError("the verb did its work before checking its output path")

    monkeypatch.setattr(model_run, "run_model", no_work)
    monkeypatch.setattr(report_build, "build", no_work)
    monkeypatch.setattr(ncu_summary, "analyze_report", no_work)
    notes = tmp_path / "file.txt"
    notes.write_text("keep")
    make = FILE_WRITERS.get(verb) or DIR_WRITERS[verb]
    assert_one_line_error(*run_bsprof(make(notes))[::2])
    assert notes.read_text() == "keep"


def test_sass_output_dot_is_a_fresh_sass_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        code, _, err = run_bsprof(["sass", str(SASS), "--json", "-o", "."])
        assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sass", "sass-2"]
    assert (tmp_path / "sass" / "sass.json").is_file()


def test_results_dir_refuses_a_name_with_a_slash_and_a_file_parent(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BsprofError, match="not a directory"):
        with results_dir(tmp_path / "f", "run"):
            pass
    with pytest.raises(BsprofError, match="plain name"):
        with results_dir(tmp_path, "a/b"):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
