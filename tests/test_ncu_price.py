"""The price on each advice line (bsprof/analyzers/ncu/price.py) and its check on 15 before/after pairs
measured on an H100 (tests/data/price/, docs/verdict.md "What the prices are worth"): the projections
are recomputed here from the shipped reports, the score from them and the shipped measurements."""

from __future__ import annotations

import json
import lzma
import math
import re
from pathlib import Path

import pytest

from bsprof.analyzers.ncu.extract import extract
from bsprof.analyzers.ncu.price import price_line, price_sequence
from bsprof.analyzers.ncu.price_check import duration_ratio, launches_by_range, project_pairs, score
from bsprof.analyzers.ncu.verdict import classify

DATA = Path(__file__).parent / "data" / "price"
LABELS = json.loads((DATA / "labels.json").read_text())
PAIRS = json.loads((DATA / "pairs.json").read_text())
TIMINGS = json.loads((DATA / "timings.json").read_text())
CORPUS = json.loads(lzma.decompress((Path(__file__).parent / "data" / "corpus" / "launches.json.xz").read_bytes()))


@pytest.fixture(scope="module")
def before() -> dict:
    return launches_by_range(extract(DATA / "pairs_before.ncu-rep.xz"))


@pytest.fixture(scope="module")
def after() -> dict:
    return launches_by_range(extract(DATA / "pairs_after.ncu-rep.xz"))


@pytest.fixture(scope="module")
def projections(before) -> dict:
    return project_pairs(before, LABELS, PAIRS)


def test_every_pair_has_its_before_and_after_report(before, after):
    assert len(PAIRS) >= 12 and set(PAIRS) == set(LABELS["pairs"])
    for pair, (b, a) in PAIRS.items():
        assert b in before and a in after, pair
    # the chain and the tiny adds are sequences: 5 and 8 launches in one range
    assert len(before["chain_eager_fp32_16M"]) == 5 and len(before["tiny_adds_8x4096"]) == 8


def test_the_labelled_line_is_advised_and_priced(projections):
    """Each label names a line bsprof gives for the before launch; it is priced from the report."""
    for pair, proj in projections.items():
        assert proj["advice"] in LABELS["pairs"][pair]["follows"], (pair, [ln["advice"] for ln in proj["lines"]])
        assert proj["price"]["bounded"], (pair, proj["price"])
        assert 0 < proj["price"]["low"] <= proj["price"]["high"]


def test_committed_projections_rescored():
    """The projections committed before the measurements were opened, scored again."""
    committed = json.loads((DATA / "projections.json").read_text())
    measured = {k: v["speedup"] for k, v in TIMINGS["pairs"].items()}
    res = score(committed, measured, LABELS["two_lines"])
    committed_score = json.loads((DATA / "score_as_committed.json").read_text())
    assert res["inside"] == committed_score["inside"] == 4 and res["n"] == 15
    assert res["median_width"] == pytest.approx(committed_score["median_width"]) and res["median_width"] <= 1.5
    assert 0.8 <= res["median_ratio"] <= 1.25
    assert res["spread_same_pairs"] < res["ncu_spread_same_pairs"]
    assert sum(o["match"] for o in res["order"].values()) == 2


def _percentile(vals: list[float], q: float) -> float:
    vals = sorted(vals)
    k = (len(vals) - 1) * q
    return vals[int(k)] + (vals[min(int(k) + 1, len(vals) - 1)] - vals[int(k)]) * (k - int(k))


def test_efficiency_bands_come_from_the_corpus():
    """EFFICIENCY's L2, L1, pipe and issue ends are the lowest and highest of the binding unit's % over the
    corpus's launches (>= 20 us) the verdict finds bound by it; DRAM's the 10th/90th percentiles over every
    launch (>= 5 us) whose busiest unit is DRAM at >= 50% of its peak."""
    from bsprof.analyzers.ncu.price import EFFICIENCY, unit_times

    found: dict[str, list[float]] = {"dram": []}
    for e in CORPUS.values():
        c = e["columns"]
        t = unit_times(c)
        if c.get("duration_ns", 0) >= 5000 and t and max(t, key=t.get) == "dram":
            if (share := t["dram"] / (c["duration_ns"] / 1e3)) >= 0.5:
                found["dram"].append(100 * share)
        if c.get("duration_ns", 0) < 20000:
            continue
        v = classify(c, rules=e["rules"])
        if v.cls == "memory-bound" and v.unit != "dram":
            found.setdefault(v.unit, []).append(c[f"{v.unit}_throughput_pct"])
        elif v.cls == "compute-bound" and v.unit == "issue":
            found.setdefault("issue", []).append(c["issue_active_pct"])
        elif v.cls == "compute-bound" and v.unit != "tensor":
            found.setdefault("pipe", []).append(c[f"pipe_{v.unit}_pct"])
    assert set(found) == {"dram", "l2", "l1", "pipe", "issue"} and len(found["dram"]) >= 20
    for unit, vals in found.items():
        lo, hi = (_percentile(vals, 0.1), _percentile(vals, 0.9)) if unit == "dram" else (min(vals), max(vals))
        assert EFFICIENCY[unit][0] == pytest.approx(lo / 100, abs=0.015), (unit, lo)
        assert EFFICIENCY[unit][1] == pytest.approx(hi / 100, abs=0.015), (unit, hi)


def test_combine_cycles_come_from_the_checked_privatizations():
    """COMBINE_CYCLES is the slowest per-element combine among the checked per-CTA privatizations (set on
    the first five; then the largest of every set since, torch's bincount at 2048 destinations 7.4): each after's SM cycles
    (its duration x SMs x SM clock) over the elements its before's atomics carried."""
    from bsprof.analyzers.ncu.facts import global_atomics
    from bsprof.analyzers.ncu.price import COMBINE_CYCLES

    per_element = []
    for labels_path in sorted(DATA.rglob("labels.json")):
        d = labels_path.parent
        if not (d / "launches.json.xz").is_file():
            continue  # a set labelled, not yet run
        labels = json.loads(labels_path.read_text())
        pairs = json.loads((d / "pairs.json").read_text())
        launches = json.loads(lzma.decompress((d / "launches.json.xz").read_bytes()))
        for pair, lab in labels["pairs"].items():
            if lab["follows"] != ["global-atomics/*/*"] or "per-CTA" not in lab["why"]:
                continue  # a sort-then-segment reduction is no per-CTA combine (torch_composites: 0.14x)
            b, a = pairs[pair]
            before = launches["before"][b][0]["columns"]
            atoms, _ = global_atomics(before)
            after_s = sum(e["columns"]["duration_ns"] for e in launches["after"][a]) * 1e-9
            per_element.append(after_s * before["sm_count"] * before["sm_clock_hz"] / (32 * atoms))
    assert len(per_element) >= 7
    assert COMBINE_CYCLES == pytest.approx(max(per_element), abs=0.05), sorted(per_element)


def test_fixed_cost_comes_from_the_corpus():
    """LAUNCH_FIXED_US spans the corpus's launches that do next to no work: under 1 MB of DRAM traffic,
    under 5 us, no GEMM or FP8 kernel (whose setup launches are no general launch)."""
    from bsprof.analyzers.ncu.price import LAUNCH_FIXED_US

    tiny = [
        c["duration_ns"] / 1e3
        for k, e in CORPUS.items()
        if (c := e["columns"]).get("duration_ns", 1e9) < 5000
        and c.get("dram_bytes_read", 0) + c.get("dram_bytes_write", 0) < 1e6
        and not re.search(r"gemm|fp8|_mm_", k)
    ]
    assert len(tiny) >= 5
    assert LAUNCH_FIXED_US == (pytest.approx(min(tiny), abs=0.05), pytest.approx(max(tiny), abs=0.05))


def test_score_recomputed_from_reports_and_measurements(projections, before, after):
    """The current pricing, recomputed from the shipped reports and scored on the same pairs: in-sample
    (changed after the committed projections were scored), so this is no validation (docs/verdict.md)."""
    measured = {k: v["speedup"] for k, v in TIMINGS["pairs"].items()}
    res = score(projections, measured, LABELS["two_lines"])
    assert res["n"] == 15 and res["inside"] == 13
    assert res["median_width"] <= 1.5 and 0.8 <= res["median_ratio"] <= 1.25
    assert res["spread_same_pairs"] < res["ncu_spread_same_pairs"]
    assert sum(o["match"] for o in res["order"].values()) == 3
    # the same pairs measured by ncu's own durations of the before and after launches
    res_ncu = score(projections, duration_ratio(before, after, PAIRS), LABELS["two_lines"])
    assert res_ncu["inside"] == 14 and 0.8 <= res_ncu["median_ratio"] <= 1.25
    assert res_ncu["spread_same_pairs"] < res_ncu["ncu_spread_same_pairs"]


def test_advice_is_ordered_by_price():
    e = CORPUS["cublas_bf16_misaligned_4095x4097x4099"]
    v = classify(e["columns"], rules=e["rules"])
    assert len(v.prices) == len(v.candidates) == len(v.advice_ids) >= 3
    mids = [p.mid for p in v.prices if p.bounded]
    assert mids == sorted(mids, reverse=True)
    # unbounded lines come last
    bounded = [p.bounded for p in v.prices]
    assert bounded == sorted(bounded, reverse=True)


def test_one_price_is_ordered_by_the_work_left():
    """The compiled 8-exp sum (balanced-and-fused set): exp2 and fewer exps leave the same next limiter,
    so both get one price; fewer exps drops the MUFUs too and leaves less work, so it comes first."""
    held_out = DATA / "balanced_and_fused"
    launches = json.loads(lzma.decompress((held_out / "launches.json.xz").read_bytes()))
    row = launches["before"]["exp8_sum_fp32_8M"][0]
    v = classify(row["columns"], rules=row["rules"])
    ids = {"compute-bound/xu/exp-range-reduced", "compute-bound/xu/*"}
    lines = [(a, p) for a, p in zip(v.advice_ids, v.prices) if a in ids]
    assert len(lines) == 2 and lines[0][1].mid == lines[1][1].mid
    assert lines[0][0] == "compute-bound/xu/*"
    assert lines[0][1].work_left_us < lines[1][1].work_left_us


def test_price_text_names_the_limiter_the_next_one_and_ncu():
    e = CORPUS["transpose_fp32_8192"]
    v = classify(e["columns"], rules=e["rules"])
    i = v.advice_ids.index("memory-bound/l2/uncoalesced")
    text = v.prices[i].text()
    assert re.match(r"[\d.]+-[\d.]+x \(L2 \d+% → (DRAM|L2)-bound at [\d.]+ MB\); ncu 7\d% → [\d.]+x$", text), text
    # ncu's estimate read as the share of the duration removed
    p = v.prices[i]
    assert p.ncu_speedup == pytest.approx(1 / (1 - p.ncu_pct / 100))


def test_cannot_bound_says_why_and_a_sequence_prices_it(before):
    e = CORPUS["add_fp32_256"]
    v = classify(e["columns"], rules=e["rules"])
    assert v.advice_ids == ["launch-bound/*/*"]
    assert not v.prices[0].bounded and v.prices[0].text().startswith("cannot bound: ")
    seq = price_sequence([x["columns"] for x in before["tiny_adds_8x4096"]])
    assert seq["launch-bound/*/*"].bounded and seq["launch-bound/*/*"].low > 1.5


def test_a_report_without_rules_says_so():
    e = CORPUS["transpose_fp32_8192"]
    v = classify(e["columns"], rules=None)
    p = price_line("memory-bound/l2/*", v, e["columns"], None)
    assert "ncu: no rules run" in p.text()


def test_the_cli_shows_the_price_under_each_line(data_dir):
    from click.testing import CliRunner

    from bsprof.cli import cli

    res = CliRunner().invoke(
        cli,
        ["ncu", "--report", str(DATA / "pairs_before.ncu-rep.xz"), "--filter", "elementwise_kernel$"],
        env={"COLUMNS": "80"},
    )
    assert res.exit_code == 0, res.output
    prices = [ln for ln in res.output.splitlines() if ln.lstrip().startswith("→ ")]
    assert prices and all(len(ln) <= 80 for ln in prices), prices
    assert any(re.search(r"→ [\d.]+-[\d.]+x \(L2", ln) for ln in prices), prices


def test_the_json_carries_the_prices(data_dir, tmp_path):
    from click.testing import CliRunner

    from bsprof.cli import cli

    res = CliRunner().invoke(
        cli, ["ncu", "--report", str(DATA / "pairs_before.ncu-rep.xz"), "--filter", "sgemm|xmma_gemm", "--json"]
    )
    assert res.exit_code == 0, res.output
    text = res.output[res.output.index("{") :]
    doc = json.loads(text)
    launches = doc.get("launches", doc)
    vd = launches[0]["verdict_detail"]
    assert vd["advice_ids"][0] == "compute-bound/fma/*"
    p = vd["prices"][0]
    assert p["bounded"] and p["binds"].startswith("tensor-bound") and not math.isnan(p["mid"])


def test_a_sequence_missing_a_duration_cannot_be_bounded(before):
    # the same real launches, one of them with its duration lost: a NaN total would print as "nanx"
    rows = [dict(x["columns"]) for x in before["tiny_adds_8x4096"]]
    rows[3]["duration_ns"] = math.nan
    seq = price_sequence(rows)
    assert seq and all(not p.bounded and "no duration" in p.why for p in seq.values())
    assert "nan" not in " ".join(p.why for p in seq.values())


@pytest.mark.parametrize(
    "set_name, committed_inside, now_inside, order",
    [
        ("other_shapes", (6, 7), (10, 10), (3, 3)),
        ("third_shapes", (10, 10), (14, 14), (2, 2)),
        ("large_shapes", (10, 11), (11, 12), (3, 3)),
        ("library_ops", (10, 11), (11, 12), (2, 2)),
        ("mixed_sizes", (7, 7), (11, 11), (1, 1)),
        ("torch_composites", (10, 10), (11, 11), (3, 3)),
        ("norms_and_gathers", (14, 14), (14, 14), (1, 1)),
        ("balanced_and_fused", (14, 16), (14, 16), (2, 2)),
        ("activations_and_bins", (15, 16), (15, 16), (2, 2)),
        ("mlp_and_lookups", (14, 14), (14, 15), (3, 3)),
        ("norms_and_scatters", (16, 17), (16, 17), (3, 2)),
    ],
)
def test_held_out_projections_rescored(set_name, committed_inside, now_inside, order):
    """The held-out sets (other shapes, dtypes, ops and sizes; H200 and H100): labelled before their reports
    existed, projected with the pricing frozen before the reports were read, and committed before the
    timings were opened. Scored again from the shipped files, by events and by ncu's durations: the centre,
    the width and the spread hold on every set; the coverage and the order on some (docs/verdict.md)."""
    held_out = DATA / set_name
    labels = json.loads((held_out / "labels.json").read_text())
    pairs = json.loads((held_out / "pairs.json").read_text())
    committed = json.loads((held_out / "projections.json").read_text())
    timings = json.loads((held_out / "timings.json").read_text())
    launches = json.loads(lzma.decompress((held_out / "launches.json.xz").read_bytes()))
    for pair, proj in committed.items():
        assert proj["advice"] in (None, "headroom", *labels["pairs"][pair]["follows"]), pair
    events = {k: v["speedup"] for k, v in timings["pairs"].items()}
    ncu = duration_ratio(launches["before"], launches["after"], pairs)
    res, res_ncu = score(committed, events, labels["two_lines"]), score(committed, ncu, labels["two_lines"])
    assert res["n"] == res_ncu["n"] == len(labels["pairs"]) >= 16
    assert (res["inside"], res_ncu["inside"]) == committed_inside
    for r in (res, res_ncu):
        assert r["median_width"] <= 1.5 and 0.8 <= r["median_ratio"] <= 1.25
        assert r["spread_same_pairs"] < r["ncu_spread_same_pairs"]
    # the order as committed, by events and by ncu's durations (two lines at one price are ordered by the
    # work each leaves; projections from before that was recorded tie, and a tie counts as a miss)
    assert tuple(sum(o["match"] for o in r["order"].values()) for r in (res, res_ncu)) == order
    # the pricing as it is now, which the earlier sets' misses shaped (a coalescing rewrite's instructions,
    # the bands' ends): in-sample for those, so no validation there
    now = project_pairs(launches["before"], labels, pairs)
    res, res_ncu = score(now, events, labels["two_lines"]), score(now, ncu, labels["two_lines"])
    assert (res["inside"], res_ncu["inside"]) == now_inside and res["median_width"] <= 1.5


def test_headroom_prices_the_change_no_line_names():
    """Row sums DRAM-bound at 71% and 82% of its peak (third and mixed-sizes sets): no line names the changes
    the pairs made (more warps, more loads a step); the headroom does, symmetric about 1x, and holds the
    measured speedups. A one-CTA launch's headroom is its spread over every SM; a launch at its units'
    reach has next to none."""
    from bsprof.analyzers.ncu.price import headroom

    for set_name, pairs_of, high in (
        ("third_shapes", ("rowsum_2warps", "rowsum_unrolled2"), (1.2, 1.3)),
        ("mixed_sizes", ("rowsum_2warps_4096", "rowsum_unrolled2_4096"), (1.05, 1.15)),
    ):
        d = DATA / set_name
        labels = json.loads((d / "labels.json").read_text())
        pairs = json.loads((d / "pairs.json").read_text())
        launches = json.loads(lzma.decompress((d / "launches.json.xz").read_bytes()))
        timings = json.loads((d / "timings.json").read_text())
        ncu = duration_ratio(launches["before"], launches["after"], pairs)
        proj = project_pairs(launches["before"], labels, pairs)
        for pair in pairs_of:
            p = proj[pair]["price"]
            assert proj[pair]["advice"] == "headroom" and high[0] < p["high"] < high[1], p
            assert p["low"] == pytest.approx(1 / p["high"])
            assert p["low"] <= timings["pairs"][pair]["speedup"] <= p["high"] and p["low"] <= ncu[pair] <= p["high"]
            assert re.match(r"[\d.]+-[\d.]+x \(DRAM \d+% of peak → 90%\)", p["text"]), p["text"]
    d = DATA / "third_shapes"
    launches = json.loads(lzma.decompress((d / "launches.json.xz").read_bytes()))
    assert headroom([e["columns"] for e in launches["before"]["one_cta_sum_fp32_2M"]]).high > 50
    large = json.loads(lzma.decompress((DATA / "large_shapes" / "launches.json.xz").read_bytes()))
    assert headroom([e["columns"] for e in large["after"]["transpose_tiled_fp32_16384"]]).high < 1.05  # DRAM 89%


def test_a_report_holding_a_sequence_prices_its_fusion_and_batch(tmp_path):
    """`bsprof ncu --report` on launches of one NVTX range: the JSON's sequences carry the fusion and
    batching prices a single launch's line cannot give (the same numbers as the price check's), and the
    terminal shows them under `sequence:`."""
    from click.testing import CliRunner

    from bsprof.cli import cli

    report = str(DATA / "pairs_before.ncu-rep.xz")
    r = CliRunner().invoke(cli, ["ncu", "--report", report, "--filter", "chain_eager|tiny_adds", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    chain, adds = doc["sequences"]
    assert len(chain["launches"]) == 5 and len(adds["launches"]) == 8 and "chain_eager" in chain["range"]
    expected = project_pairs(launches_by_range(extract(report, filter="chain_eager")), LABELS, PAIRS)["chain_compiled"][
        "price"
    ]
    assert chain["prices"]["memory-bound/dram/*"]["low"] == pytest.approx(expected["low"])
    assert adds["prices"]["launch-bound/*/*"]["bounded"] and "memory-bound/dram/*" not in adds["prices"]
    # each launch alone still says it cannot bound the fusion
    first = doc["launches"][0]["verdict_detail"]
    assert any(p["text"].startswith("cannot bound") for p in first["prices"])
    r = CliRunner().invoke(cli, ["ncu", "--report", report, "--filter", "chain_eager"], env={"COLUMNS": "80"})
    assert "sequence: NVTX range" in r.output and "try: fuse them into one launch" in r.output
    # each launch's headroom under its lines: the most a change buys that keeps its work
    assert re.search(r"headroom, the work kept: [\d.]+-[\d.]+x \((DRAM|L2|L1|issue)", r.output), r.output
    # one launch: no sequence
    r = CliRunner().invoke(cli, ["ncu", "--report", report, "--filter", "transpose_torch", "--json"])
    assert "sequences" not in json.loads(r.output)


@pytest.mark.parametrize("set_name", ["corpus_shapes", *sorted(p.parent.name for p in DATA.glob("*/labels.json"))])
def test_each_price_set_labels_the_pairs_its_table_builds(set_name):
    """Every set's labels name exactly the pairs scripts/price_pairs.py builds for it, each pair's ops
    exist on their side, and the two-line befores are the befores of their pairs (no GPU needed: the
    workloads are built lazily)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from scripts.price_pairs import SETS

    table, pairs = SETS[set_name][0](), SETS[set_name][1]
    d = DATA if set_name == "corpus_shapes" else DATA / set_name
    labels = json.loads((d / "labels.json").read_text())
    assert set(labels["pairs"]) == set(pairs) and len(pairs) >= 12
    for pair, (b, a) in pairs.items():
        assert b in table["before"] and a in table["after"], pair
    for before, two in labels["two_lines"].items():
        assert len(two) == 2 and all(pairs[p][0] == before for p in two), before
