"""The verdict on the corpus of foreign H100 launches (tests/data/corpus/, docs/verdict.md): every
hand label is met, and no advice contradicts the class, the kernel kind or the architecture."""

from __future__ import annotations

import hashlib
import json
import lzma
import re
from pathlib import Path

import pytest

from bsprof.analyzers.ncu.verdict import classify

CORPUS = Path(__file__).parent / "data" / "corpus"
LABELS = json.loads((CORPUS / "labels.json").read_text())["labels"]
ENTRIES = json.loads(lzma.decompress((CORPUS / "launches.json.xz").read_bytes()))

GEMM_ONLY = re.compile(r"split-K|wgmma|tcgen05|K-loop|MMA kernel|tile count|epilogue", re.I)
SM100_ONLY = re.compile(r"2-CTA|TMEM|tcgen05|UTC", re.I)
OCCUPANCY = re.compile(r"occupancy|registers or shared memory per CTA", re.I)


def held_out(name: str) -> bool:
    """The third of the corpus kept out of rule design (fixed by name, before the rules)."""
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % 3 == 0


def test_corpus_size_and_classes():
    assert set(ENTRIES) == set(LABELS)
    assert len(ENTRIES) >= 25
    assert len({lab["class"] for lab in LABELS.values()}) >= 6
    assert sum(held_out(n) for n in ENTRIES) >= 8
    sources = {e["launched"].get("source", "").split()[0] for e in ENTRIES.values()}
    assert {"cuBLAS", "DeepGEMM", "SDPA", "torch.compile:"} <= sources


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_verdict_matches_label(name):
    entry, lab = ENTRIES[name], LABELS[name]
    v = classify(entry["columns"], rules=entry["rules"])
    assert v.label in [lab["class"], *lab.get("accept", [])], f"{name}: {v.label} ({v.detail}); label says {lab['evidence']}"
    want_kind = "gemm" if lab["kind"] in ("gemm", "attention") else "other"
    assert v.kind == want_kind
    text = " ".join(v.candidates)
    assert v.candidates, "every verdict comes with advice"
    if v.arch == "sm_90":
        assert not SM100_ONLY.search(text), text
    if v.kind != "gemm":
        assert not GEMM_ONLY.search(text), text
    if "low-occupancy" not in v.flags:
        assert not OCCUPANCY.search(text), text
    if v.cls in ("memory-bound", "launch-bound", "under-filled"):
        assert "pipe is the limit" not in text
    if v.cls == "compute-bound" and v.unit != "tensor":
        assert "tensor pipe is the limit" not in text
    # each piece of advice cites a number
    assert all(re.search(r"\d", c) for c in v.candidates), v.candidates
    if entry["rules"]:
        assert any(line.startswith("ncu SOLBottleneck") for line in v.ncu)
    if entry["collection"] == "--set basic":
        assert v.missing and any("ComputeWorkloadAnalysis" in m for m in v.missing)


def test_held_out_accuracy_reported(capsys):
    hits = {True: [0, 0], False: [0, 0]}
    for name, entry in ENTRIES.items():
        v = classify(entry["columns"], rules=entry["rules"])
        lab = LABELS[name]
        hits[held_out(name)][0] += v.label in [lab["class"], *lab.get("accept", [])]
        hits[held_out(name)][1] += 1
    print(f"design set {hits[False][0]}/{hits[False][1]}, held out {hits[True][0]}/{hits[True][1]}")
    assert hits[True][0] == hits[True][1]


def test_heldout2_round_reported(capsys):
    """Round 2 (heldout2_predictions.md): labelled before the launches ran; every label the
    evidence supports is met, and the share of the pre-registered predictions is reported."""
    names = [n for n, lab in LABELS.items() if lab.get("round") == "heldout2"]
    assert len(names) >= 8
    met = predicted = 0
    for name in names:
        v = classify(ENTRIES[name]["columns"], rules=ENTRIES[name]["rules"])
        lab = LABELS[name]
        met += v.label in [lab["class"], *lab.get("accept", [])]
        predicted += v.label == lab["predicted"].split(" (")[0]
    print(f"heldout2: {met}/{len(names)} evidence labels, {predicted}/{len(names)} pre-registered primary labels")
    assert met == len(names)


def _verdicts():
    for name, entry in sorted(ENTRIES.items()):
        yield name, entry["columns"], classify(entry["columns"], rules=entry["rules"])


def test_advice_fits_the_mma_family():
    """wgmma knobs only where wgmma executes (mma.sync and DMMA kernels have none of them)."""
    for name, row, v in _verdicts():
        ops = {k[len("inst_op_"):] for k, x in row.items() if k.startswith("inst_op_") and x}
        text = " ".join(v.candidates)
        if ops and not any(re.match(r"[HQIB]GMMA", o) for o in ops):
            assert "wgmma knobs" not in text and "wgmma N tile" not in text, name
        if "DMMA" in ops or "IMMA" in ops or "HMMA" in ops:
            assert v.mma in ("dmma", "mma.sync"), name


def test_no_resource_advice_when_the_grid_limits_warps():
    """Under one wave every CTA is resident: cutting registers or shared memory adds no warps."""
    for name, row, v in _verdicts():
        if (row.get("waves_per_sm") or 2.0) < 1.0:
            assert not re.search(r"registers or shared memory per CTA", " ".join(v.candidates)), name


def test_spill_traffic_is_not_called_unavoidable():
    """Where local (spill) memory is a large share of the L2 traffic, the advice removes the spills
    first instead of calling the bandwidth a floor no in-kernel change beats."""
    for name, row, v in _verdicts():
        local = 32.0 * ((row.get("local_load_sectors") or 0) + (row.get("local_store_sectors") or 0))
        if v.cls == "memory-bound" and local >= 0.25 * 32.0 * (row.get("l2_sectors") or float("inf")):
            text = " ".join(v.candidates)
            assert "no in-kernel change" not in text and "spills" in text, name


def test_tied_pipes_and_atomics_are_named():
    """A pipe within the balanced margin of the limiting one gets its own advice; a latency-bound
    launch whose global memory instructions are largely atomics is told about the atomics."""
    from bsprof.analyzers.ncu.verdict import THRESHOLDS, global_atomics, pipe_values

    for name, row, v in _verdicts():
        text = " ".join(v.candidates)
        if v.cls == "compute-bound" and v.unit not in ("issue",):
            top = dict(pipe_values(row)).get(v.unit, 0.0)
            for p, val in pipe_values(row):
                if p != v.unit and val >= THRESHOLDS["unit_bound_pct"] and top - val < THRESHOLDS["balanced_margin"]:
                    assert f"the {p.upper()} pipe" in text, (name, p)
        if v.cls == "latency-bound" and global_atomics(row)[1] >= 0.1:
            assert "global atomics" in text, name
    assert "xu" in classify(ENTRIES["triton_exp32_sum_16M"]["columns"]).co_units


@pytest.mark.parametrize("report, names", [
    ("corpus_l2.ncu-rep.xz", ["add_fp32_1M_l2resident"]),
    ("corpus_basic.ncu-rep.xz", ["cublas_bf16_4096x4096x4096__basic", "add_fp32_256M__basic"]),
    ("corpus_heldout2_cute.ncu-rep.xz", ["cute_dense_gemm_fp16_8192x8192x8192", "cute_dense_gemm_fp16_256x1024x16384"]),
])
def test_stored_metrics_are_the_reports(report, names, tmp_path, monkeypatch):
    """The stored columns are what bsprof extracts from the shipped full reports (read as .xz)."""
    from bsprof.analyzers.ncu.extract import extract

    monkeypatch.setenv("BSPROF_CACHE", str(tmp_path))
    ex = extract(CORPUS / "reports" / report)
    assert len(ex.table) == len(names)
    for (_, row), name in zip(ex.table.iterrows(), names):
        stored = ENTRIES[name]["columns"]
        for col in ("duration_ns", "sm_active_cycles_avg", "dram_throughput_pct", "tensor_pipe_elapsed_pct", "grid_size"):
            assert row[col] == pytest.approx(stored[col]), col
        assert classify(row.to_dict()).label == classify(stored).label
