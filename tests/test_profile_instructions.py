"""Every command in PROFILE_INSTRUCTIONS.md runs, so the document cannot rot.

Convention (stated in the document): fenced ```bash blocks are commands; a block with a line ending
in ``# gpu`` needs a GPU and is skipped without one; a line ending in ``# setup`` installs packages
and is left to CI's own set-up step (the rest of its block still runs). CPU blocks run from a scratch directory that
links the repository's ``tests``, ``bsprof``, ``scripts`` and ``benchmarks`` (so commands read the
shipped artifacts and write nowhere in the checkout). A ```text block right after a bash block is a
real output excerpt: each of its lines must appear in what that block printed (``...`` elides).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "PROFILE_INSTRUCTIONS.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks() -> list[tuple[int, str, str, str | None]]:
    """(line number, kind 'cpu'|'gpu', bash text, the text excerpt after it or None)."""
    text = DOC.read_text()
    found = [(m.start(), m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    out = []
    for i, (pos, lang, body) in enumerate(found):
        if lang != "bash":
            continue
        excerpt = found[i + 1][2] if i + 1 < len(found) and found[i + 1][1] == "text" else None
        kind = "gpu" if re.search(r"#\s*gpu\s*$", body, re.M) else "cpu"
        out.append((text.count("\n", 0, pos) + 1, kind, body, excerpt))
    return out


def _has_gpu() -> bool:
    from tests.conftest import _gpu_capability

    return _gpu_capability() is not None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("profile_instructions")
    for name in ("tests", "bsprof", "scripts", "benchmarks"):
        if (REPO / name).exists():
            (d / name).symlink_to(REPO / name)
    return d


def test_document_has_cpu_and_gpu_commands():
    kinds = [k for _, k, _, _ in blocks()]
    assert kinds.count("cpu") >= 5 and kinds.count("gpu") >= 3, kinds


_BLOCKS = blocks() if DOC.exists() else []


@pytest.mark.parametrize("line,kind,body,excerpt", _BLOCKS, ids=[f"L{b[0]}-{b[1]}" for b in _BLOCKS])
def test_command_block_runs(line, kind, body, excerpt, workdir):
    if kind == "gpu" and not _has_gpu():
        pytest.skip(f"PROFILE_INSTRUCTIONS.md line {line}: GPU command (# gpu), no GPU here")
    body = "\n".join(x for x in body.splitlines() if not re.search(r"#\s*setup\s*$", x))
    if not body.strip():
        pytest.skip(f"PROFILE_INSTRUCTIONS.md line {line}: package set-up (# setup), done by CI's set-up step")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COLUMNS="120", NO_COLOR="1", TERM="dumb")
    res = subprocess.run(["bash", "-e", "-c", body], cwd=workdir, env=env, capture_output=True, text=True,
                         timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"PROFILE_INSTRUCTIONS.md line {line} failed ({res.returncode}):\n{body}\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]
    if excerpt:
        printed = [" ".join(x.split()) for x in out.splitlines()]
        for want in excerpt.splitlines():
            want = " ".join(want.split())
            if not want or want == "...":
                continue
            assert any(want in got for got in printed), (
                f"PROFILE_INSTRUCTIONS.md line {line}: excerpt line not in the command's output: {want!r}\n"
                f"output:\n{out[-3000:]}")
