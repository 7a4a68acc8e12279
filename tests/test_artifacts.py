"""bsprof.artifacts owns the format of every file a verb writes; `bsprof report` renders every kind.

The samples are real artifacts written by the verbs on an H100 (bsprof/data/samples, tests/data);
the one kind of file no GPU here can write (an NVFP4 bench, which needs sm_100) is built from the
rows the NVFP4 bench writes, in the field names it used before the bench rows shared one schema.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from bsprof import artifacts
from bsprof.artifacts import KINDS
from bsprof.errors import BsprofError
from bsprof.reports import sec_bench, sec_ceiling, sec_model, sec_ncu, sec_sass, sec_timing, sec_validation
from bsprof.reports.build import build
from bsprof.reports.runs import discover
from bsprof.reports.samples import RUN as SAMPLES

TESTS_DATA = Path(__file__).parent / "data"
SHIPPED_DATA = Path(__file__).resolve().parents[1] / "bsprof" / "data" / "model"  # measured curves the model reads

# kind -> the section that shows it; a kind added to artifacts.VERSIONS without one fails below
RENDERERS = {
    "bench": sec_bench.peers_table,
    "ncu": sec_ncu.verdict,
    "sass": sec_sass.mix,
    "timing": sec_timing.distributions,
    "model": sec_model.heatmap,
    "validation": sec_validation.scatter,
    "epi_ceiling": sec_ceiling.curves,
}


def _nvfp4_bench(tmp_path: Path) -> Path:
    """A bench.json as the NVFP4 bench wrote it (rows with ``ms_median``, no ``ours``)."""
    d = tmp_path / "bench_nvfp4"
    d.mkdir()
    doc = {
        "bsprof": {"kind": "bench", "version": 1},
        "family": "nvfp4",
        "variant": "optimized",
        "device": {"name": "NVIDIA B200", "capability": [10, 0], "sm_count": 148},
        "mnkl": [8192, 8192, 1024, 1],
        "warmup": 10,
        "iters": 50,
        "rows": [
            {
                "name": "optimized",
                "ms_median": 0.0712,
                "ms_min": 0.0705,
                "tflops": 1930.4,
                "pct_peak": 21.4,
                "rel_err": 3.1e-3,
                "config": {},
                "vs_cublas": 1.07,
            },
            {"name": "cublas", "ms_median": 0.0762, "ms_min": 0.0751, "tflops": 1803.8},
        ],
        "skipped": {},
        "peak_tflops": 9000.0,
        "peak_source": "data sheet",
    }
    (d / "bench.json").write_text(json.dumps(doc))
    return d


def _samples_of(kind: str, tmp_path: Path) -> list[Path]:
    found = [a.path for root in (SAMPLES, TESTS_DATA, SHIPPED_DATA) for a in discover(root).of(kind)]
    if kind == "bench":
        found.append(_nvfp4_bench(tmp_path) / "bench.json")
    return found


def test_every_kind_has_a_renderer():
    assert set(RENDERERS) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_report_renders_every_sample_of_every_kind(kind: str, tmp_path: Path):
    paths = _samples_of(kind, tmp_path)
    assert paths, f"no sample {kind} artifact under {SAMPLES} or {TESTS_DATA}"
    for parent in dict.fromkeys(p.parent for p in paths):
        run = discover(parent)
        assert run.problems == [], run.problems
        found = {a.path for a in run.of(kind)}
        missing = [p for p in paths if p.parent == parent and p not in found]
        assert not missing, f"{missing}: not discovered as {kind}"
        assert RENDERERS[kind](run) is not None, f"{parent}: the {kind} section rendered nothing"
        html, info = build([parent], only=None)
        assert info.failed == {}, info.failed


def test_nvfp4_bench_rows_reach_the_page(tmp_path: Path):
    html, info = build([_nvfp4_bench(tmp_path)])
    assert info.failed == {}
    assert "cublas" in html and "1,930.4" in html


def test_dumps_never_writes_invalid_json(tmp_path: Path):
    import numpy as np

    doc = artifacts.document(
        "timing",
        {
            "a": math.nan,
            "b": [math.inf, -math.inf],
            "c": np.float32(1.5),
            "d": np.int64(3),
            "e": np.array([1.0, np.nan]),
            "f": (1, 2),
            "g": tmp_path,
            "bsprof": "replaced",
        },
    )
    text = artifacts.dumps(doc)
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in artifact JSON"))
    assert back == {
        "bsprof": {"kind": "timing", "version": artifacts.VERSIONS["timing"]},
        "a": None,
        "b": [None, None],
        "c": 1.5,
        "d": 3,
        "e": [1.0, None],
        "f": [1, 2],
        "g": str(tmp_path),
    }


def test_save_and_load_round_trip_and_refuse_what_is_not_theirs(tmp_path: Path):
    path = artifacts.save(tmp_path / "bench.json", artifacts.document("bench", {"rows": [], "x": math.nan}))
    assert artifacts.load(path, "bench")["x"] is None
    with pytest.raises(BsprofError, match="a bench artifact where a timing artifact was expected"):
        artifacts.load(path, "timing")
    with pytest.raises(ValueError):
        artifacts.save(tmp_path / "x.json", {"rows": []})  # no tag: not an artifact
    (tmp_path / "new.json").write_text(json.dumps({"bsprof": {"kind": "bench", "version": 99}}))
    with pytest.raises(BsprofError, match="reads versions 1 to"):
        artifacts.load(tmp_path / "new.json")
    (tmp_path / "cut.json").write_text('{"bsprof": {"kind": "be')
    with pytest.raises(BsprofError, match="not valid JSON"):
        artifacts.load(tmp_path / "cut.json")


def test_sample_copies_load_through_the_module(tmp_path: Path):
    """Every shipped artifact loads with load(); a copy saved again is the same document."""
    for kind in KINDS:
        for art in discover(SAMPLES).of(kind):
            data = artifacts.load(art.path, kind)
            again = artifacts.load(artifacts.save(tmp_path / art.path.name, data), kind)
            assert again == json.loads(artifacts.dumps(data))
            shutil.rmtree(tmp_path, ignore_errors=True)
            tmp_path.mkdir()


def test_the_terminal_renders_both_families_benches(tmp_path: Path):
    """One terminal renderer for the bench artifact, whichever family wrote it."""
    from rich.console import Console

    from bsprof.reports.bench_text import render

    nv = artifacts.load(_nvfp4_bench(tmp_path) / "bench.json", "bench")
    con = Console(record=True, width=200)
    render(con, nv)
    text = con.export_text()
    assert "nvfp4 optimized on NVIDIA B200 (8192, 8192, 1024, 1): median 0.0712 ms" in text
    assert "ours / cuBLAS speed: 1.070x" in text
    fp8 = artifacts.load(SAMPLES / "bench_h100" / "bench.json", "bench")
    con = Console(record=True, width=200)
    render(con, fp8)
    text = con.export_text()
    assert "fp8-blockwise on NVIDIA H100 80GB HBM3 (median of 100, median round of 5, randn inputs)" in text
    assert "cublas_blockwise" in text


def test_the_bench_section_names_the_choice_and_the_close_calls_timed(tmp_path: Path):
    # `benchmarks/fp8_blockwise.py --close-calls` on the H100: the report says which configuration the
    # kernel ran and why, and which close calls were timed beside it
    from conftest import unxz_text

    d = tmp_path / "bench_close_calls"
    d.mkdir()
    (d / "bench.json").write_text(unxz_text(TESTS_DATA / "h100_fp8_close_calls.json.xz"))
    html, info = build([d])
    assert info.failed == {}
    assert "optimized ran 192x128 cluster 1x2 (chosen: 192x128 tile" in html
    assert "close call 1 = optimized:tile_m=128,tile_n=160,cluster_m=1,cluster_n=2" in html
