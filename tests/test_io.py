"""Outputs appear whole or not at all, and what the user had survives a failed write."""

import os

import pytest

from bsprof.io import atomic_path, unique_dir, write_text_atomic


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


def test_unique_dir_never_reuses(tmp_path):
    a = unique_dir(tmp_path, "run")
    b = unique_dir(tmp_path, "run")
    assert a != b and a.is_dir() and b.is_dir() and b.name == "run-2"


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
    target = tmp_path / "real" / "page.html"
    target.parent.mkdir()
    target.write_text("old")
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


def test_missing_parents_are_made_inside_a_writable_directory(tmp_path):
    code, _, err = run_bsprof(FILE_WRITERS["report"](tmp_path / "a" / "b" / "r.html"))
    assert code == 0, err
    assert (tmp_path / "a" / "b" / "r.html").is_file()


def test_sass_output_dot_is_a_fresh_sass_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        code, _, err = run_bsprof(["sass", str(SASS), "--json", "-o", "."])
        assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sass", "sass-2"]
    assert (tmp_path / "sass" / "sass.json").is_file()


def test_unique_dir_refuses_a_name_with_a_slash_and_a_file_parent(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BsprofError, match="not a directory"):
        unique_dir(tmp_path / "f", "run")
    with pytest.raises(BsprofError, match="plain name"):
        unique_dir(tmp_path, "a/b")
