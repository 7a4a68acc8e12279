"""benchmarks/fp8_blockwise.py's own command line, without a GPU: per-shape configurations timed as
the 'given' column (how a change to the tile choice is A/B'd on held-out shapes in one process),
an interrupted run keeping the shapes it finished, and one line where there is no GPU."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

BENCH = Path(__file__).parent.parent / "benchmarks" / "fp8_blockwise.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("fp8_bench_shapes", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_shape_carries_its_own_configuration(bench):
    from bsprof.errors import BsprofError

    shapes, given = bench.parse_shapes("150,7168,16384@tile_m=128,tile_n=128; 4096,4096,4096,2", "optimized:swizzle=8")
    assert shapes == [(150, 7168, 16384, 1), (4096, 4096, 4096, 2)]
    # the first kernel's variant, without its own knobs: the given column is that shape's alone
    assert given == ["optimized:tile_m=128,tile_n=128", None]
    for bad, said in (
        ("150,7168,16384@tile_q=1", "unknown fp8-blockwise option 'tile_q'"),
        ("150,7168,16384@", "nothing after '@'"),
        ("150,71a,16384@tile_m=64", "is not M,N,K"),
    ):
        with pytest.raises(BsprofError, match=said):
            bench.parse_shapes(bad, "optimized")


def test_the_given_configuration_is_one_column_against_the_pick(bench, data_dir):
    # a real H100 A/B: at 200x8192x8192 the swizzle-8 build stands for a per-shape configuration
    stored = json.load(open(data_dir / "h100_fp8_ab_swizzle.json"))["results"]
    spec = "optimized:swizzle=8"

    class Args:
        check_only = False
        warmup, iters, no_peers, warmup_s, rounds, peers_graph = 10, 50, False, 0.3, 5, True
        launch_gaps, inputs, cute_example, hold, placements = False, "randn", None, True, None

    def measure(mnkl, kernels, **kw):
        asked.append(kw)
        res = copy.deepcopy(next(r for r in stored if tuple(r["mnkl"]) == tuple(mnkl)))
        res["rows"] = [r for r in res["rows"] if not r["ours"] or r["name"] in kernels]
        return res

    asked: list[dict] = []
    first = bench._measure_one(measure, (200, 8192, 8192, 1), ["optimized", spec], spec, [], Args, ())
    # 5 rounds spread over 3 copies of the operands unless --placements says otherwise
    assert asked[-1]["rounds"] == 5 and asked[-1]["placements"] == 3
    plain = bench._measure_one(measure, (256, 8192, 8192, 1), ["optimized"], None, [], Args, ())
    # the same build as a close call: a column of its own, the spec on the row
    as_close = bench._measure_one(measure, (200, 8192, 8192, 1), ["optimized", spec], None, [spec], Args, ())
    assert [(r["name"], r.get("close_call")) for r in as_close["rows"] if r["ours"]] == [
        ("optimized", None),
        ("close call 1", spec),
    ]
    names = [r["name"] for r in first["rows"] if r["ours"]]
    assert names == ["optimized", bench.GIVEN] and first["rows"][1]["given"] == spec
    assert [r["name"] for r in plain["rows"] if r["ours"]] == ["optimized"]
    from bsprof.reports.bench_text import print_table

    con = Console(record=True, width=250)
    print_table(con, [first, plain], "given")
    text = con.export_text()
    lines = text.splitlines()
    title = next(i for i, ln in enumerate(lines) if "against optimized, round by round" in ln)
    paired = lines[title:]
    assert any(bench.GIVEN in ln for ln in paired[:4])  # the column, named once
    row = next(ln for ln in paired if ln.lstrip("│ ").startswith("200,8192,8192"))
    assert row.split("│")[2].strip().startswith("0.8")  # the group of 8 lost every round there
    assert not any(ln.lstrip("│ ").startswith("256,8192,8192") and "—" not in ln for ln in paired)


def test_sigterm_stops_the_shapes_and_restores_the_handler(bench):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with bench._sigterm_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode
            for _ in range(10**6):
                pass
    assert signal.getsignal(signal.SIGTERM) is before


def test_no_gpu_is_one_line_and_exit_2():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the benchmark would run")
    out = subprocess.run(
        [sys.executable, str(BENCH), "--shapes", "128,256,512@tile_m=64", "--no-peers"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "400"},
    )
    text = (out.stdout + out.stderr).strip()
    assert out.returncode == 2 and "Traceback" not in text
    assert text.startswith("no CUDA GPU here") and len(text.splitlines()) == 1
