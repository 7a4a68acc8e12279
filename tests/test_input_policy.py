"""Hostile inputs: every input is a regular file within a limit, every JSON is bounded and checked
against its kind, tool arguments are never options, and what a report embeds cannot end its
script elements. Each case fails with one `error:` line (exit 2) or works, in bounded time and
memory, and nothing the user had is replaced.

The limits are exercised with small caps set through their environment variables, never with
gigabytes.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_bsprof, unxz_bytes, unxz_text

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "bsprof/data/samples/run"
CUBIN_XZ = ROOT / "tests/data/sass/cutlass_sm90_fp8_pingpong_128x128x128_c1x2.sm_90a.cubin.xz"
LISTING_XZ = ROOT / "tests/data/sass/nvidia_dense_fp16_persistent_256x256_c2x1.sm_100a.sass.xz"
REPORT_XZ = ROOT / "tests/data/h100_cute_tiny.ncu-rep.xz"
TIMING = SAMPLES / "timing_h100/timing.parquet"

FIFO_MSG = "a named pipe (FIFO), not a regular file"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("BSPROF_CACHE", str(path))
    return path


class _Unblock:
    """Opens a FIFO's write end after ``after`` seconds, so a reader that (wrongly) opened it ends
    and the test fails on its assertion instead of hanging CI."""

    def __init__(self, fifo: Path, after: float = 20.0) -> None:
        self.fifo, self.after, self.done = fifo, after, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        if not self.done.wait(self.after):
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "_Unblock":
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()


def _timed(args: list[str], limit_s: float = 20.0) -> tuple[int, str, str]:
    t = time.perf_counter()
    out = run_bsprof(args)
    elapsed = time.perf_counter() - t
    assert elapsed < limit_s, f"bsprof {' '.join(args)[:200]} took {elapsed:.1f} s"
    return out


# ---------------------------------------------------------------------------------------------
# Inputs that are not regular files are refused before they are read, and named for what they are.

FIFO_READERS = {
    "sass": lambda p: ["sass", str(p)],
    "sass --ncu": lambda p: ["sass", str(LISTING_XZ), "--ncu", str(p)],
    "sass --source": lambda p: ["sass", str(LISTING_XZ), "--source", str(p)],
    "model --from": lambda p: ["model", "--from", str(p), "--tiles", "1000"],
    "timing --from": lambda p: ["timing", "--from", str(p)],
    "ncu --report": lambda p: ["ncu", "--report", str(p)],
    "report": lambda p: ["report", str(p), "-o", str(p.parent / "r.html")],
}
FIFO_NAMES = {
    "sass": "k.cubin",
    "sass --ncu": "k.ncu-rep",
    "sass --source": "kernel.py",
    "model --from": "timing.csv",
    "timing --from": "timing.parquet",
    "ncu --report": "k.ncu-rep.xz",
    "report": "summary.json",
}


@pytest.mark.parametrize("verb", sorted(FIFO_READERS))
def test_a_fifo_input_is_refused_unread(tmp_path, verb):
    fifo = tmp_path / FIFO_NAMES[verb]
    os.mkfifo(fifo)
    with _Unblock(fifo):
        code, _, err = _timed(FIFO_READERS[verb](fifo))
    line = assert_one_line_error(code, err)
    assert FIFO_MSG in line and "no such file" not in line, line


@pytest.mark.parametrize("name", ["timing.json", "validation.json", "notes.json"])
def test_a_fifo_inside_a_results_directory_is_skipped_by_name(tmp_path, name):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "bench_h100", run)
    fifo = run / name
    os.mkfifo(fifo)
    with _Unblock(fifo):
        code, out, err = _timed(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert code == 0, err
    assert f"{name}: {FIFO_MSG}" in err, err
    assert (tmp_path / "r.html").is_file()


def test_timing_from_a_directory_whose_timing_json_is_a_fifo(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TIMING, run / "timing.parquet")
    os.mkfifo(run / "timing.json")
    with _Unblock(run / "timing.json"):
        line = assert_one_line_error(*_timed(["timing", "--from", str(run)])[::2])
    assert FIFO_MSG in line, line


@pytest.mark.parametrize("verb", ["model", "timing"])
def test_a_results_directory_whose_table_is_a_fifo(tmp_path, verb):
    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / "timing.parquet")
    with _Unblock(run / "timing.parquet"):
        line = assert_one_line_error(*_timed([verb, "--from", str(run)])[::2])
    assert f"timing.parquet: {FIFO_MSG}" in line, line


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_character_device_input_is_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    for args in (["sass", device], ["model", "--from", device], ["ncu", "--report", device], ["report", device]):
        line = assert_one_line_error(*_timed(args, 10)[::2])
        assert "a character device, not a regular file" in line, line


def test_a_missing_input_and_a_dangling_link_are_named(tmp_path):
    line = assert_one_line_error(*run_bsprof(["sass", str(tmp_path / "gone.cubin")])[::2])
    assert "no such file" in line
    link = tmp_path / "k.cubin"
    link.symlink_to(tmp_path / "moved.cubin")
    line = assert_one_line_error(*run_bsprof(["sass", str(link)])[::2])
    assert "a link to" in line and "does not exist" in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: no permission problem to name")
def test_an_unreadable_input_says_permission_denied(tmp_path):
    path = tmp_path / "k.sass"
    path.write_text(unxz_text(LISTING_XZ))
    path.chmod(0)
    line = assert_one_line_error(*run_bsprof(["sass", str(path)])[::2])
    assert "permission denied" in line and "empty" not in line, line


# ---------------------------------------------------------------------------------------------
# A file name is a file name on a tool's command line, never an option.


@pytest.mark.parametrize("name", ["--version", "-c", "-gi.cubin", "-ofoo"])
def test_a_cubin_named_like_an_option_is_disassembled(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    Path(name).write_bytes(unxz_bytes(CUBIN_XZ))
    code, out, err = run_bsprof(["sass", "--json", "--", name])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["functions"] and doc["functions"][0]["instructions"] > 100


# ---------------------------------------------------------------------------------------------
# Sizes: a cap on every input and on what an xz file unpacks to, raisable by the user.


def test_an_input_over_the_cap_is_refused_naming_the_variable(tmp_path, monkeypatch):
    listing = tmp_path / "k.sass"
    listing.write_text(unxz_text(LISTING_XZ))
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", "4096")
    line = assert_one_line_error(*run_bsprof(["sass", str(listing)])[::2])
    assert "over bsprof's input limit" in line and "BSPROF_MAX_INPUT_BYTES=" in line, line
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", str(10 * listing.stat().st_size))
    code, _, err = run_bsprof(["sass", str(listing)])
    assert code == 0, err


def test_the_limit_the_refusal_suggests_admits_the_input(tmp_path, monkeypatch):
    """The refusal's `export VAR=N` is the fix it names: N must be at least the input's size, even
    when the cap was far below it (four times the cap alone was not)."""
    import re

    listing = tmp_path / "k.sass"
    listing.write_text(unxz_text(LISTING_XZ))
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", "16")
    line = assert_one_line_error(*run_bsprof(["sass", str(listing)])[::2])
    suggested = re.search(r"export BSPROF_MAX_INPUT_BYTES=(\d+)", line)
    assert suggested, line
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", suggested.group(1))
    code, _, err = run_bsprof(["sass", str(listing)])
    assert code == 0, err


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1e9"])
def test_a_malformed_cap_is_one_line(tmp_path, monkeypatch, value):
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", value)
    line = assert_one_line_error(*run_bsprof(["sass", str(LISTING_XZ)])[::2])
    assert "BSPROF_MAX_INPUT_BYTES" in line and "positive whole number" in line, line


def _zeros_xz(path: Path, megabytes: int) -> Path:
    comp = lzma.LZMACompressor(preset=0)
    block = b"\0" * (1 << 20)
    with open(path, "wb") as fh:
        for _ in range(megabytes):
            fh.write(comp.compress(block))
        fh.write(comp.flush())
    return path


@pytest.mark.parametrize("verb", ["sass", "ncu", "report"])
def test_an_xz_bomb_is_refused_and_leaves_nothing_in_the_cache(tmp_path, cache, verb):
    """96 MB of zeros in ~15 KB: far past 1,000x its size. Refused while unpacking, the partial copy
    removed."""
    name = {"sass": "k.cubin.xz", "ncu": "k.ncu-rep.xz", "report": "run/k.ncu-rep.xz"}[verb]
    bomb = tmp_path / name
    bomb.parent.mkdir(exist_ok=True)
    _zeros_xz(bomb, 96)
    args = {
        "sass": ["sass", str(bomb)],
        "ncu": ["ncu", "--report", str(bomb)],
        "report": ["report", str(bomb.parent), "-o", str(tmp_path / "r.html")],
    }[verb]
    line = assert_one_line_error(*_timed(args)[::2])
    assert "compression bomb" in line and "BSPROF_MAX_XZ_RATIO=" in line, line
    assert not list(cache.rglob("*.tmp")) and not [p for p in cache.rglob("*") if p.is_file()]
    assert not (tmp_path / "r.html").exists()


# runs bsprof and then prints its own peak resident memory (VmHWM belongs to the process image, so
# nothing of the forking test process is counted)
_PEAK = (
    "import sys\nfrom bsprof.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
    "    print([ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0], file=sys.stderr)"
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for the peak memory")
def test_an_xz_bomb_is_unpacked_in_flat_memory(tmp_path, cache):
    """Unpacking streams: the 96 MB bomb is refused at 64 MB without ever being held; the peak is
    what `bsprof sass` on a small listing needs, not the bomb's size."""
    import subprocess
    import sys

    bomb = _zeros_xz(tmp_path / "k.cubin.xz", 96)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BSPROF_CACHE": str(cache)}

    def peak_mb(path: Path) -> tuple[float, str]:
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK, "sass", str(path)], env=env, capture_output=True, text=True, timeout=120
        )
        kb = int(re.search(r"VmHWM:\s+(\d+) kB", proc.stderr).group(1))
        return kb / 1024, proc.stderr

    bomb_mb, err = peak_mb(bomb)
    assert "compression bomb" in err, err
    small_mb, _ = peak_mb(LISTING_XZ)
    assert bomb_mb < small_mb + 40, f"peak {bomb_mb:.0f} MB refusing the bomb, {small_mb:.0f} MB on a listing"


def test_a_real_xz_input_over_the_unpacked_cap_is_refused_then_works_when_raised(tmp_path, cache, monkeypatch):
    packed = tmp_path / "k.sass.xz"
    packed.write_bytes(LISTING_XZ.read_bytes())
    size = len(unxz_bytes(LISTING_XZ))
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", str(size // 2))
    line = assert_one_line_error(*run_bsprof(["sass", str(packed)])[::2])
    assert "unpacks to more than" in line and "BSPROF_MAX_INPUT_BYTES" in line, line
    assert not [p for p in cache.rglob("*") if p.is_file()]
    monkeypatch.setenv("BSPROF_MAX_INPUT_BYTES", str(size * 2))
    code, _, err = run_bsprof(["sass", str(packed)])
    assert code == 0, err


def test_concatenated_xz_streams_unpack_whole(tmp_path, cache):
    text = unxz_bytes(LISTING_XZ)
    half = len(text) // 2
    cut = text.rfind(b"\n", 0, half) + 1
    packed = tmp_path / "k.sass.xz"
    packed.write_bytes(lzma.compress(text[:cut]) + lzma.compress(text[cut:]))
    code, out, err = run_bsprof(["sass", "--json", str(packed)])
    assert code == 0, err
    code2, out2, _ = run_bsprof(["sass", "--json", str(LISTING_XZ)])
    assert json.loads(out)["functions"][0]["instructions"] == json.loads(out2)["functions"][0]["instructions"]


def test_memory_exhaustion_is_one_line(monkeypatch):
    """The last resort: whatever runs out of memory, the user reads one line."""
    import bsprof.analyzers.sass as sass_mod

    def exhausted(*a, **kw):
        raise MemoryError

    monkeypatch.setattr(sass_mod, "analyze_path", exhausted)
    line = assert_one_line_error(*run_bsprof(["sass", str(LISTING_XZ)])[::2])
    assert "out of memory" in line and "BSPROF_MAX_INPUT_BYTES" in line


# ---------------------------------------------------------------------------------------------
# Rendering is linear in the input; text that is no SASS is refused.


@pytest.mark.parametrize(
    "make",
    [
        lambda: "R" * 4_000_000,  # one word, no newline
        lambda: "MOVX R1, R2 ; " * 300_000,  # instruction-like, one line
        lambda: "\n".join(f"NOTANOP{i} R1, R2 ;" for i in range(50_000)),  # many lines, no known opcode
        lambda: "# build log\n" + "warning: " * 200_000,
    ],
    ids=["word", "one-line", "unknown-ops", "log"],
)
def test_text_that_is_no_sass_is_refused_quickly(tmp_path, make):
    path = tmp_path / "k.sass"
    path.write_text(make())
    line = assert_one_line_error(*_timed(["sass", str(path)], 15)[::2])
    assert "SASS listing" in line, line


def test_huge_unknown_opcodes_inside_a_real_listing_print_in_bounded_time(tmp_path):
    lines = unxz_text(LISTING_XZ).splitlines()
    at = next(i for i, ln in enumerate(lines) if "/*0010*/" in ln)
    lines[at:at] = [f"        /*0{i:03x}*/  FOO{i}BAR R1, R2 ;" for i in range(3000)]
    lines.insert(at, "        /*0fff*/  " + "W" * 2_000_000 + " R1 ;")
    path = tmp_path / "k.sass"
    path.write_text("\n".join(lines))
    code, out, err = _timed(["sass", str(path)], 30)
    assert code == 0, err
    tail = out[out.index("unclassified opcodes") :].split("\n\n")[0]  # the paragraph, however it wraps
    assert "(+2980 more)" in tail and len(tail) < 2000, tail[:300]
    assert "W" * 200 not in out


@pytest.mark.parametrize(
    "mnkl, words",
    [
        ("2147483648,128,128", "2**31-1"),
        ("4194304,4194304,4096", "2**40"),
        ("2097152,1048576,1024", "2**40"),
    ],
)
def test_impossible_problem_sizes_are_refused(mnkl, words):
    for args in (
        ["sass", str(LISTING_XZ), "--tile-mn", "256,256", "--mnkl", mnkl],
        ["ncu", "--report", str(REPORT_XZ), "--mnkl", mnkl],
    ):
        line = assert_one_line_error(*run_bsprof(args)[::2])
        assert words in line, line
    code, _, err = run_bsprof(["sass", str(LISTING_XZ), "--tile-mn", "256,256", "--mnkl", "16384,16384,16384,8"])
    assert code == 0, err


# ---------------------------------------------------------------------------------------------
# JSON: bounded depth and size, a schema per kind, one line for anything else.


def _deep(depth: int, tagged: bool) -> str:
    inner = '{"k": ' * depth + "0" + "}" * depth
    return ('{"bsprof": {"kind": "model", "version": 1}, "deterministic": ' + inner + "}") if tagged else inner


@pytest.mark.parametrize("depth", [200, 4000])
def test_deep_json_in_a_results_directory(tmp_path, depth):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "bench_h100", run)
    (run / "sub").mkdir()
    (run / "sub" / "model.json").write_text(_deep(depth, tagged=True))
    (run / "theirs.json").write_text("[" * depth + "]" * depth)  # someone else's JSON: not judged
    code, _, err = _timed(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert code == 0, err
    assert f"JSON nested {depth + 1} levels deep" in err, err
    assert "theirs.json" not in err


@pytest.mark.parametrize(
    "content, words",
    [
        (b'{"bsprof": {"kind": "timing", "ver', "not valid JSON"),
        (b"[[1, 2], [3]]", "not a JSON object"),
        (b'\xfe\xff{"a": 1}', "not UTF-8"),
        (b"[" * 3000 + b"]" * 3000, "nested 3000 levels"),
        (b'{"config": "256x128"}', "'config'"),
        (b'{"bsprof": {"kind": "timing", "version": 1}, "stats": {}, "overhead": [1, 2]}', "'overhead'"),
        (b'{"bsprof": {"kind": "bench", "version": 1}, "results": []}', "a bench artifact where a timing"),
        (b'{"bsprof": {"kind": "timing", "version": 7}, "stats": {}}', "versions 1 to"),
    ],
)
def test_timing_from_a_directory_with_a_damaged_timing_json(tmp_path, content, words):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TIMING, run / "timing.parquet")
    (run / "timing.json").write_bytes(content)
    line = assert_one_line_error(*_timed(["timing", "--from", str(run)])[::2])
    assert words in line, line
    assert "timing.json" in line


@pytest.mark.parametrize(
    "content, words",
    [
        ('"summary"', "not a bsprof artifact"),
        ("{}", "not a bsprof artifact"),
        ('{"bsprof": {"kind": "ncu", "version": 1}, "launches": {}}', "'launches'"),
        ('{"bsprof": {"kind": "ncu", "version": 1}, "launches": [], "launch": 7}', "'launch'"),
        ('{"bsprof": {"kind": "ncu", "version": 1}, "launches": [], "launch": {"flops": [1]}}', "launch.flops"),
        ('{"bsprof": {"kind": "ncu", "version": 1}, "launches": [], "launch": {"flops": -3}}', "launch.flops"),
        ('{"bsprof": {"kind": "ncu", "version": 1}, "launches": [null]}', "'launches'"),
    ],
)
@pytest.mark.parametrize("how", ["report", "compare"])
def test_ncu_with_a_damaged_summary_json(tmp_path, content, words, how):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(REPORT_XZ, run / REPORT_XZ.name)
    (run / "summary.json").write_text(content)
    args = ["ncu", "--report", str(run)] if how == "report" else ["ncu", "--compare", str(run), str(REPORT_XZ)]
    line = assert_one_line_error(*_timed(args, 60)[::2])
    assert words in line and "summary.json" in line, line


def test_a_json_artifact_over_the_json_cap_is_named(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "sass_sm100a_cubin", run)
    size = (run / "sass.json").stat().st_size
    monkeypatch.setenv("BSPROF_MAX_JSON_BYTES", str(size // 2))
    line = assert_one_line_error(*run_bsprof(["report", str(run), "-o", str(tmp_path / "r.html")])[::2])
    assert "sass.json" in line and "BSPROF_MAX_JSON_BYTES=" in line, line
    monkeypatch.setenv("BSPROF_MAX_JSON_BYTES", str(size * 2))
    code, _, err = run_bsprof(["report", str(run), "-o", str(tmp_path / "r.html")])
    assert code == 0, err


@pytest.mark.parametrize(
    "kind, body, words",
    [
        ("sass", {"functions": {"name": "k"}}, "'functions'"),
        ("sass", {}, "without its 'functions'"),
        ("model", {"deterministic": [1, 2]}, "'deterministic'"),
        ("validation", {"points": [{"a": 1}, "x"]}, "'points'"),
        ("bench", {"results": [[]]}, "'results'"),
        ("epi_ceiling", {"curves": None}, "without its 'curves'"),
        ("timing", {"stats": {}, "device": 3}, "'device'"),
    ],
)
def test_each_kind_is_held_to_its_schema(tmp_path, kind, body, words):
    from bsprof.artifacts import document, load
    from bsprof.errors import BsprofError

    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(document(kind, body)))
    with pytest.raises(BsprofError, match=re.escape(words)):
        load(path)
    # the report names it and renders what else is there
    shutil.copytree(SAMPLES / "bench_h100", tmp_path / "run")
    (tmp_path / "run" / "extra").mkdir()
    shutil.copy(path, tmp_path / "run" / "extra" / path.name)
    code, _, err = run_bsprof(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")])
    assert code == 0 and words in err, err


# ---------------------------------------------------------------------------------------------
# What the report embeds cannot end or open its script elements; text is escaped once.


@pytest.mark.parametrize("name", ["fp8 <!--<script>", "x</script><script>alert(1)</script>", "a]]><!--", "ok & <b>"])
def test_a_hostile_row_name_stays_inside_its_figure(tmp_path, name):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "bench_h100", run)
    doc = json.loads((run / "bench.json").read_text())
    rows = [r for res in doc["results"] for r in res.get("rows", [])]
    for row in rows:
        row["name"] = f"{row['name']} {name}"
    (run / "bench.json").write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    code, _, err = run_bsprof(["report", str(run), "-o", str(out)])
    assert code == 0, err
    html = out.read_text()
    specs = re.findall(r'<script type="application/json" class="bsprof-fig"[^>]*>(.*?)</script>', html, re.S)
    assert specs and len(specs) == html.count('class="bsprof-fig"')
    assert all("<" not in s and ">" not in s and "&" not in s for s in specs)
    assert any(name in json.dumps(json.loads(s), ensure_ascii=False) for s in specs)


def test_text_on_the_page_is_escaped_once(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "model_b200_projection", run)
    doc = json.loads((run / "model.json").read_text())
    doc["provenance"] = {"measured on": "the lab's B200 & <spare> node"}
    (run / "model.json").write_text(json.dumps(doc))
    out = tmp_path / "r.html"
    code, _, err = run_bsprof(["report", str(run), "-o", str(out)])
    assert code == 0, err
    html = out.read_text()
    assert "the lab&#x27;s B200 &amp; &lt;spare&gt; node" in html
    assert not re.search(r"&amp;(#x?[0-9a-f]+|[a-z]+);", html, re.I), re.search(
        r".{40}&amp;(#x?[0-9a-f]+|[a-z]+);", html
    )


# ---------------------------------------------------------------------------------------------
# Names from the input and the command line are printed as they are: brackets are not markup.


def test_paths_and_names_with_brackets_print_literally(tmp_path, cache):
    # directories "x[" and "dim]y [red]": the path reads ".../x[/dim]y [red]", a closing tag with no
    # opening one, which rich refuses as markup
    odd = tmp_path / "x[" / "dim]y [red]"
    odd.mkdir(parents=True)
    code, out, err = run_bsprof(["sass", str(LISTING_XZ), "-o", str(odd / "s")])
    assert code == 0, err
    assert "x[/dim]y" in out
    html = odd / "h.html"
    code, out, err = run_bsprof(["model", "--tiles", "1000", "--sweep", "kloop=-100:0:50", "--html", str(html)])
    assert code == 0 and html.is_file(), err
    run = odd / "t"
    run.mkdir()
    shutil.copy(TIMING, run / "timing.parquet")
    code, out, err = run_bsprof(["timing", "--from", str(run), "-o", str(odd)])
    assert code == 0 and "x[/dim]y" in out, err
    rep = odd / "k.ncu-rep.xz"
    shutil.copy(REPORT_XZ, rep)
    for args in (["ncu", "--report", str(rep), "-o", str(odd)], ["ncu", "--compare", str(rep), str(REPORT_XZ)]):
        code, out, err = run_bsprof(args)
        assert code == 0, err


@pytest.mark.parametrize(
    "text",
    [
        '{"bsprof": {"kind": "sass", "version": 1}, "functions": [' + '"\\' * 3_000_000 + "[" * 100,  # no closing quote
        '{"bsprof": {"kind": "sass", "version": 1}, "functions": ' + "[" * 8_000_000,
        '{"bsprof": {"kind": "sass", "version": 1}, "functions": [' + '"a[{", ' * 1_000_000 + '"x"]}',
    ],
)
def test_pathological_json_is_judged_in_linear_time(tmp_path, text):
    from bsprof.artifacts import load
    from bsprof.errors import BsprofError

    path = tmp_path / "sass.json"
    path.write_text(text)
    t = time.perf_counter()
    try:
        load(path)
    except BsprofError as exc:
        assert "\n" not in str(exc)
    assert time.perf_counter() - t < 10


# ---------------------------------------------------------------------------------------------
# Stored runs scored again without a GPU: damaged files are named, never a traceback.


@pytest.mark.parametrize(
    "projections, words",
    [
        ("[3]", "no 'points'"),
        ('{"points": ["x"]}', "do not hold a run's records"),
        ('{"points": [{"change": "a"}]}', "do not hold a run's records"),
        ("[" * 2500 + "]" * 2500, "nested 2500 levels"),
    ],
)
def test_validate_changes_from_a_damaged_run(tmp_path, projections, words):
    (tmp_path / "projections.json").write_text(projections)
    (tmp_path / "measured.json").write_text('{"device": "x", "problems": {}}')
    line = assert_one_line_error(*run_bsprof(["model", "--validate", "--changes", "--from", str(tmp_path)])[::2])
    assert words in line, line


@pytest.mark.parametrize("table", [b"a,b\n1,2\n", b"\xff\xfe\x00\x01", b""])
def test_validate_from_a_damaged_validation_table(tmp_path, table):
    run = tmp_path / "h100_timing" / "validation_x"
    run.mkdir(parents=True)
    (run / "validation.csv").write_bytes(table)
    line = assert_one_line_error(*run_bsprof(["model", "--validate", "--from", str(tmp_path)])[::2])
    assert "validation.csv" in line, line
