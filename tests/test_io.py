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


@pytest.mark.skipif(
    not os.path.isdir("/proc/sys") or os.access("/proc/sys", os.W_OK), reason="needs a directory no one may write"
)
def test_an_unwritable_output_directory_is_refused_before_the_work():
    """-o names an existing directory the results cannot land in: one line before the chain runs
    (it printed the whole chain, then failed to make its hidden directory)."""
    sample = Path(__file__).resolve().parent.parent / "bsprof" / "data" / "samples" / "change"
    builds = [str(sample / "optimized.sm_90a.cubin.xz"), str(sample / "optimized_uniform_desc0.sm_90a.cubin.xz")]
    code, out, err = run_bsprof(["model", "--change", *builds, "-o", "/proc/sys"])
    line = assert_one_line_error(code, err)
    assert "/proc/sys is not writable" in line, line
    assert out == "", out[-400:]


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
    old.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>bsprof report: h100_timing</title>'
        "<style>\nbody { margin:0; }\n#bsprof-console:empty { display:none; }\n</style>"
        "</head><body></body></html>"
    )
    mine = tmp_path / "mine.html"
    # the default title alone, on a page of the user's: not bsprof's
    mine.write_text(
        "<!DOCTYPE html><html><head><title>bsprof report: my notes</title><style>body{}</style>"
        "</head><body>keep</body></html>"
    )
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


# ---------------------------------------------------------------------------------------------
# What is bsprof's page is parsed, not searched for: a file that quotes the mark is the user's.

MARK = '<meta name="generator" content="bsprof">'


@pytest.mark.parametrize("verb", sorted(FILE_WRITERS))
@pytest.mark.parametrize(
    "content",
    [
        f"# Design notes\n\nOur pages carry `{MARK}` in the head.\n",  # markdown quoting it
        f"<!DOCTYPE html><html><head><title>t</title></head><body><pre>{MARK}</pre></body></html>",  # in the body
        f"draft\n<!DOCTYPE html><html><head>{MARK}</head></html>",  # text before the document
        f"<!DOCTYPE html><html><head><script>var s = '{MARK}';</script></head></html>",  # inside a script
        f"<!DOCTYPE html><html><head><title>x</title><div>{MARK}</div></head></html>",  # after the head ended
        f"{MARK}\n",  # the bare mark, no document
    ],
    ids=["markdown", "body", "text-first", "script", "after-head", "bare"],
)
def test_a_file_that_only_quotes_the_mark_is_refused_and_kept(tmp_path, verb, content):
    target = tmp_path / "page.html"
    target.write_text(content)
    line = assert_one_line_error(*run_bsprof(FILE_WRITERS[verb](target))[::2])
    assert "not written by bsprof" in line, line
    assert target.read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]


@pytest.mark.parametrize(
    "content",
    [
        f"<!DOCTYPE html>\n<html lang='en'>\n  <head>\n    <meta charset='utf-8'>\n    {MARK}\n",
        "\ufeff<!-- saved -->\n<html><head><META NAME='Generator' CONTENT='bsprof'></head><body>x</body></html>",
    ],
)
def test_a_page_with_the_mark_in_its_head_is_bsprofs(tmp_path, content):
    from bsprof.io import check_output_file

    page = tmp_path / "page.html"
    page.write_text(content)
    assert check_output_file(page) == page


# ---------------------------------------------------------------------------------------------
# The path is judged again when the page takes it: what appears there meanwhile is never replaced.


@pytest.fixture(params=["renameat2", "fallback"])
def rename_kind(request, monkeypatch):
    """Each race test runs with the kernel's renameat2 and with the fallbacks used where it is missing."""
    if request.param == "fallback":
        import bsprof.io

        monkeypatch.setattr(bsprof.io, "_renameat2", lambda *a: False)
    return request.param


@pytest.mark.parametrize("before", ["absent", "bsprof page", "empty"])
def test_a_file_created_while_the_report_is_built_is_not_replaced(tmp_path, monkeypatch, rename_kind, before):
    import bsprof.reports.build as build_mod

    out = tmp_path / "report.html"
    if before == "bsprof page":
        out.write_text(f"<!DOCTYPE html><html><head>{MARK}</head><body>old</body></html>")
    elif before == "empty":
        out.touch()
    real_build = build_mod.build

    def build_then_race(*args, **kw):
        page = real_build(*args, **kw)
        out.unlink(missing_ok=True)
        out.write_text("the user's notes, saved while the page was built\n")
        return page

    monkeypatch.setattr(build_mod, "build", build_then_race)
    line = assert_one_line_error(*run_bsprof(FILE_WRITERS["report"](out))[::2])
    assert "not written by bsprof" in line, line
    assert out.read_text() == "the user's notes, saved while the page was built\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary file left


def test_bsprofs_page_at_the_path_when_it_lands_is_replaced(tmp_path, monkeypatch, rename_kind):
    import bsprof.reports.build as build_mod

    out = tmp_path / "report.html"
    real_build = build_mod.build

    def build_then_page(*args, **kw):
        page = real_build(*args, **kw)
        out.write_text(f"<!DOCTYPE html><html><head>{MARK}</head><body>another run's page</body></html>")
        return page

    monkeypatch.setattr(build_mod, "build", build_then_page)
    code, _, err = run_bsprof(FILE_WRITERS["report"](out))
    assert code == 0, err
    assert "another run's page" not in out.read_text() and 'class="bsprof-fig"' in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


@pytest.mark.parametrize("failure", ["unreadable", "interrupt"])
def test_a_file_swapped_out_to_be_judged_goes_back_when_judging_fails(tmp_path, monkeypatch, failure):
    """The exchange puts the page at the path and what held it at the temporary name; a file there
    that cannot be read (or an interrupt while it is read) must go back, not be removed with the
    temporary file."""
    import bsprof.io as io

    out = tmp_path / "report.html"
    out.write_text("the user's notes, saved after the check before the work\n")
    real_is_own = io._is_own

    def judged(path):
        if Path(path) != out:  # the swapped-out file, at the temporary name
            raise BsprofError("cannot read it") if failure == "unreadable" else KeyboardInterrupt()
        return real_is_own(path)

    monkeypatch.setattr(io, "_is_own", judged)
    monkeypatch.setattr(io, "check_output_file", Path)  # the file came after that check
    with pytest.raises(BsprofError if failure == "unreadable" else KeyboardInterrupt):
        io.write_output_file(out, f"<!DOCTYPE html><html><head>{MARK}</head><body>page</body></html>")
    assert out.read_text() == "the user's notes, saved after the check before the work\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_rename_noreplace_never_replaces(tmp_path, rename_kind):
    from bsprof.io import rename_noreplace

    (tmp_path / "new").write_text("new")
    (tmp_path / "theirs").write_text("theirs")
    with pytest.raises(FileExistsError):
        rename_noreplace(tmp_path / "new", tmp_path / "theirs")
    assert (tmp_path / "theirs").read_text() == "theirs" and (tmp_path / "new").read_text() == "new"
    (tmp_path / "d").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    for taken in ("full", "theirs"):
        with pytest.raises(FileExistsError):
            rename_noreplace(tmp_path / "d", tmp_path / taken)
    rename_noreplace(tmp_path / "d", tmp_path / "landed")
    assert (tmp_path / "landed").is_dir() and (tmp_path / "full" / "x").read_text() == "x"


# ---------------------------------------------------------------------------------------------
# Results directories appear whole or not at all.


def test_an_interrupted_results_directory_leaves_nothing(tmp_path, monkeypatch):
    """The model's sweep.csv is written, then the interrupt comes before model.json: neither the
    directory nor its hidden staging copy is left."""
    import bsprof.artifacts

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(bsprof.artifacts, "save", interrupted)
    code, _, _ = run_bsprof(["model", "--tiles", "1000", "--sweep", "kloop=-100:0:50", "--json", "-o", str(tmp_path)])
    assert code == 130
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("verb", sorted(DIR_WRITERS))
def test_a_results_directory_lands_whole_beside_a_taken_name(tmp_path, verb, rename_kind):
    # an empty directory squatting the name and a file named like the next one: neither is touched
    out = tmp_path / "out"
    code, _, err = run_bsprof(DIR_WRITERS[verb](out))
    assert code == 0, err
    made = [p for p in (out.iterdir() if out.is_dir() else [out])]
    code, _, err = run_bsprof(DIR_WRITERS[verb](out))
    assert code == 0, err
    again = [p for p in (out.iterdir() if out.is_dir() else [out])]
    hidden = [p for p in tmp_path.rglob(".*") if p.is_dir()]
    assert not hidden, hidden
    assert all(p.is_dir() and any(p.glob("*.json")) for p in again if p.is_dir()), again
    assert len(again) >= len(made)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_sweep_write_leaves_only_whole_directories(tmp_path, signame):
    """A real interrupt (or termination) at random moments of `model --sweep -o DIR`: every
    directory left holds both files; nothing hidden is left behind."""
    import random
    import signal
    import subprocess
    import sys
    import time

    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bsprof",
                "model",
                "--tiles",
                "1000",
                "--sweep",
                "kloop=-100:0:50",
                "--json",
                "-o",
                str(tmp_path),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.4, 1.2))
        proc.send_signal(getattr(signal, signame))
        proc.wait(timeout=60)
    for d in tmp_path.iterdir():
        assert not d.name.startswith("."), d
        assert sorted(p.name for p in d.iterdir()) == ["model.json", "sweep.csv"], d
