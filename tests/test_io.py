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
