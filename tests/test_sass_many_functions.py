"""`bsprof sass` on a listing of many functions: past four, one summary table across them (name,
size, MMA, loops, the K-loop, overhead per MMA, features) replaces each function's tables. The
listing is real: the nvdisasm output of the foreign cubins in tests/data/sass (DeepGEMM's sm_90
and sm_100 kernels at several shapes, NVIDIA's CuTe DSL examples, CUTLASS C++ examples (one cubin
with two GEMM kernels and the example's reference kernels), Triton's matmuls), concatenated as nvdisasm prints a multi-kernel file; the
K-loop column is checked against the hand labels in kloop_labels.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_bsprof

from bsprof.reports.sass_text import distinct_names

SASS = Path(__file__).parent / "data" / "sass"
LABELS = json.loads((SASS / "kloop_labels.json").read_text())["labels"]
CUBINS = sorted(SASS.glob("*.cubin.xz"))


@pytest.fixture(scope="module")
def listing(tmp_path_factory) -> tuple[Path, list[str], list[tuple[dict, int]]]:
    """The listing, every function's name in listing order, and (label, index into the names) for
    each labelled kernel: a cubin holds one kernel, or its labels pick theirs by a 'function' regex
    (CUTLASS's grouped GEMM example: two schedules and the example's reference kernels)."""
    from bsprof.analyzers.sass.disasm import disassemble
    from bsprof.analyzers.sass.parse import parse_sass

    texts, names, labelled = [], [], []
    for cubin in CUBINS:
        mine = [text for _label, text in disassemble(cubin)]
        here = [fn.name for text in mine for fn in parse_sass(text)]
        for label in (lb for lb in LABELS if lb["file"] == cubin.name):
            if "function" in label:
                (i,) = [i for i, n in enumerate(here) if re.search(label["function"], n)]
            else:
                assert len(here) == 1, cubin.name  # one kernel per cubin
                i = 0
            labelled.append((label, len(names) + i))
        texts += mine
        names += here
    assert len(labelled) >= 11 and len({lb["file"] for lb, _ in labelled}) == len(CUBINS)
    path = tmp_path_factory.mktemp("many") / "foreign_kernels.sass"
    path.write_text("\n".join(texts))
    return path, names, labelled


def _lines(out: str, start: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.strip().startswith(start)]


@pytest.mark.parametrize("columns", [220, 80])
def test_summary_table_names_every_function_and_its_kloop(listing, monkeypatch, columns):
    path, names, labelled = listing
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_bsprof(["sass", str(path), "--features", "--mma-detail"])
    assert code == 0, err
    assert f"{len(names)} functions (each one's instruction mix and feature checklist:" in out
    assert "instruction mix by region" not in out and "feature checklist\n" not in out
    # the DeepGEMM instantiations differ only mid-name; the cuts still differ, and fit the terminal
    shown = distinct_names(names, width=max(16, min(40, columns - 62)))
    # two cubins hold one kernel name (CUTLASS's example with and without -DNDEBUG): distinct names only
    assert len(set(shown)) == len(set(names)) < len(names)
    assert all(not cut.startswith(("…", "msE")) and len(cut) <= max(16, min(40, columns - 62)) for cut in shown)
    assert max(len(ln) for ln in out.splitlines() if ln.startswith(("┃", "│"))) <= columns
    for label, at in labelled:
        name, cut = names[at], shown[at]
        nth = shown[:at].count(cut)  # a repeated name: its rows in listing order
        row = _lines(out, f"│ {cut} ")[nth]
        function, instructions, mma, loops, kloop, per_mma = [c.strip() for c in row.split("│")[1:-1]]
        if label["status"] == "kloop":
            assert re.fullmatch(rf"K-loop \d+ @{int(label['kloop']['header'], 16):#06x}", kloop), row
            assert float(per_mma) > 0
        else:
            assert label["status"] == "unrolled"
            assert kloop == f"unrolled (tile loop {_tile_loop_id(path, name)})", row
            assert per_mma == "—"
        # Triton's smallest labelled kernel (fp16, 2 stages) is 400 instructions
        assert int(mma) > 0 and int(instructions.replace(",", "")) > 300 and int(loops) >= 1
        features = _lines(out, f"{cut}: ")[nth]
        # every kernel but Triton's cp.async one loads with TMA; Triton's non-persistent ones run a
        # tile per CTA
        assert ("tma_load" in features) is label.get("features", {}).get("tma_load", True)
        if label.get("features", {}).get("persistent_tile_loop", True):
            assert "persistent_tile_loop" in out[out.index(features) :]
    assert "K-loop 'unrolled': K is fully unrolled" in out
    # --mma-detail still prints each function's K-loop stream under its heading
    assert out.count("after MMA 0") >= 5


def _tile_loop_id(path: Path, name: str) -> int:
    from bsprof.analyzers.sass import analyze_path

    (fa,) = analyze_path(path, function=re.escape(name))
    return fa.tile_loop.id


def test_four_functions_keep_their_own_tables(listing, monkeypatch):
    path, _names, _labelled = listing
    monkeypatch.setenv("COLUMNS", "220")
    # four of the DeepGEMM kernels: the three 1d1d ones (sm_100 FP8, sm_100 FP8 x FP4, sm_90) and the
    # sm_90 1d2d one at N=2112 K=7168
    code, out, err = run_bsprof(
        ["sass", str(path), "--function", "1d1d.*ELj(7168|2112)E|ELj2112ELj7168E", "--features"]
    )
    assert code == 0, err
    assert out.count("instruction mix by region") == 4 and out.count("feature checklist") == 4
    assert "functions (each one's" not in out


def test_distinct_names_cut_where_names_differ():
    dg = "_ZN9deep_gemm23sm90_fp8_gemm_1d2d_implILN4cute4UMMA5MajorE0ELj0ELj{}ELj{}ELj1ELj64EEvPfS5_jjj14CUtensorMap_st"
    names = [dg.format(2112, 7168), dg.format(7168, 2048), "short_kernel"]
    cuts = distinct_names(names)
    assert cuts[2] == "short_kernel"
    assert all(len(c) == 40 for c in cuts[:2]) and cuts[0] != cuts[1]
    assert cuts[0].startswith("_ZN9deep_gem…") and "2112" in cuts[0] and "2048" in cuts[1]


def test_distinct_names_split_look_alike_cuts_of_two_templates():
    # each name differs from its template sibling at 'ELj128ELj1', so the plain cuts collide
    sm100 = (
        "_ZN9deep_gemm28sm100_fp8_fp4_gemm_1d1d_implILN4cute4UMMA5MajorE0ELS3_0ELj128ELj{}ELj128ELj0ELj7168ELj2048EEvPi"
    )
    sm90 = "_ZN9deep_gemm23sm90_fp8_gemm_1d2d_implILN4cute4UMMA5MajorE0ELj0ELj8192ELj1024ELj1ELj{}ELj128ELj128EEvPfS5_"
    names = [sm100.format(128), sm100.format(32), sm90.format(128), sm90.format(256)]
    cuts = distinct_names(names, width=18)
    assert len(set(cuts)) == 4 and all(len(c) == 18 for c in cuts)
    assert "sm10" in cuts[0] and "sm90" in cuts[2]


def test_distinct_names_never_give_two_kernels_one_label():
    # instantiations of one template with look-alike numbers in several slots (what collided on
    # DeepGEMM's normal and grouped 1d2d kernels at 18 columns): distinct names keep distinct
    # labels at every width, none longer than the width
    from hypothesis import given, settings
    from hypothesis import strategies as st

    tpl = "_ZN9deep_gemm23sm90_fp8_gemm_1d2d_implILN4cute4UMMA5MajorE0ELj0ELj{}ELj{}ELj{}ELj{}ELj{}ELj128EEvPfS5_jjj"
    slot = st.sampled_from([1, 4, 128, 192, 4096, 7168])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(slot, slot, slot, slot, slot), min_size=2, max_size=12, unique=True), st.integers(16, 40))
    def check(fields, width):
        names = [tpl.format(*f) for f in fields]
        cuts = distinct_names(names, width=width)
        assert len(set(cuts)) == len(names), (names, cuts)
        assert all(len(c) <= width for c in cuts)

    check()
