"""Every command in PROFILE_INSTRUCTIONS.md and README.md runs, so the documents cannot rot, and
runs as on a fresh machine: from an empty home directory, with no bsprof cache (BSPROF_CACHE and
XDG_CACHE_HOME unset), so a directory an earlier run left behind cannot hide a defect.

Convention (stated in the document): fenced ```bash blocks are commands; a block with a line ending
in ``# gpu`` needs a GPU and is skipped without one; a line ending in ``# setup`` installs packages
and is left to CI's own set-up step (the rest of its block still runs). CPU blocks run from a scratch directory that
links the repository's ``tests``, ``bsprof``, ``scripts`` and ``benchmarks`` (so commands read the
shipped artifacts and write nowhere in the checkout). A ```text block right after a bash block is a
real output excerpt: each of its lines must appear in what that block printed, whitespace and line
breaks aside (``...`` elides).
Output is piped, so it is laid out at the documented piped width (bsprof.reports.term.PIPED_WIDTH).

README.md: each ``$ command`` line of a fenced block runs, the lines after it up to the next
``$`` are its output excerpt (a line starting with ``...`` elides); a command ending in ``# gpu``
needs a GPU. The set-up line's commands run too, but for ``pip install`` and the test suite itself.
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
    from tests.conftest import gpu_capability

    return gpu_capability() is not None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("profile_instructions")
    for name in ("tests", "bsprof", "scripts", "benchmarks"):
        if (REPO / name).exists():
            (d / name).symlink_to(REPO / name)
    return d


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> dict[str, str]:
    """The environment of a fresh machine: an empty home (one for the module, as one user's
    session), no bsprof cache setting, output piped."""
    home = tmp_path_factory.mktemp("empty_home")
    env = {k: v for k, v in os.environ.items() if k not in ("BSPROF_CACHE", "XDG_CACHE_HOME", "COLUMNS")}
    env.update(
        HOME=str(home), PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), NO_COLOR="1", TERM="dumb"
    )
    return env


def _run_and_match(where: str, body: str, excerpt: str | None, workdir: Path, env: dict[str, str]) -> None:
    res = subprocess.run(["bash", "-e", "-c", body], cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{where} failed ({res.returncode}):\n{body}\n{out[-3000:]}"
    assert "Traceback" not in out, out[-3000:]
    if excerpt:
        # whitespace aside: a document's excerpt is one line where the terminal's width broke it
        printed = " ".join(out.split())
        for want in excerpt.splitlines():
            want = " ".join(want.split())
            if not want or want.startswith("..."):
                continue
            assert want in printed, (
                f"{where}: excerpt line not in the command's output: {want!r}\noutput:\n{out[-3000:]}"
            )


def test_document_has_cpu_and_gpu_commands():
    kinds = [k for _, k, _, _ in blocks()]
    assert kinds.count("cpu") >= 5 and kinds.count("gpu") >= 3, kinds


_BLOCKS = blocks() if DOC.exists() else []


@pytest.mark.parametrize("line,kind,body,excerpt", _BLOCKS, ids=[f"L{b[0]}-{b[1]}" for b in _BLOCKS])
def test_command_block_runs(line, kind, body, excerpt, workdir, fresh_env):
    if kind == "gpu" and not _has_gpu():
        pytest.skip(f"PROFILE_INSTRUCTIONS.md line {line}: GPU command (# gpu), no GPU here")
    body = "\n".join(x for x in body.splitlines() if not re.search(r"#\s*setup\s*$", x))
    if not body.strip():
        pytest.skip(f"PROFILE_INSTRUCTIONS.md line {line}: package set-up (# setup), done by CI's set-up step")
    _run_and_match(f"PROFILE_INSTRUCTIONS.md line {line}", body, excerpt, workdir, fresh_env)


README = REPO / "README.md"


def readme_commands() -> list[tuple[int, str, str, str | None]]:
    """(line number, kind 'cpu'|'gpu', command, its output excerpt or None) of README.md."""
    lines = README.read_text().splitlines()
    out: list[tuple[int, str, str, str | None]] = []
    fenced = False
    for i, ln in enumerate(lines):
        if ln.startswith("```"):
            fenced = not fenced
            continue
        if fenced and ln.startswith("$ "):
            cmd, j = ln[2:], i + 1
            while cmd.endswith("\\") and j < len(lines):  # a command continued on the next line, as a shell reads it
                cmd, j = cmd[:-1].rstrip() + " " + lines[j].strip(), j + 1
            rest = []
            for nxt in lines[j:]:
                if nxt.startswith("```") or nxt.startswith("$ "):
                    break
                rest.append(nxt)
            kind = "gpu" if re.search(r"#\s*gpu\s*$", cmd) else "cpu"
            out.append((i + 1, kind, re.sub(r"\s*#.*$", "", cmd), "\n".join(rest) or None))
        elif not fenced and ln.startswith("    python3 -m pip install"):
            # the set-up line: its commands but the install and the test suite (CI's own steps)
            cmds = [c.strip() for c in ln.split("&&")]
            cmds = [c for c in cmds if not c.startswith("python3 -m pip") and "pytest" not in c]
            if cmds:
                out.append((i + 1, "cpu", " && ".join(cmds), None))
    return out


_README = readme_commands() if README.exists() else []


def test_readme_has_the_commands_it_shows():
    cmds = [c for _, _, c, _ in _README]
    assert any(c.startswith("bsprof model && bsprof report") for c in cmds), cmds
    assert sum(k == "cpu" for _, k, _, _ in _README) >= 4, _README


@pytest.mark.parametrize("line,kind,command,excerpt", _README, ids=[f"L{c[0]}-{c[1]}" for c in _README])
def test_readme_command_runs(line, kind, command, excerpt, workdir, fresh_env):
    if kind == "gpu" and not _has_gpu():
        pytest.skip(f"README.md line {line}: GPU command (# gpu), no GPU here")
    _run_and_match(f"README.md line {line}", command, excerpt, workdir, fresh_env)
