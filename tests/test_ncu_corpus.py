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


@pytest.mark.parametrize("report, names", [
    ("corpus_l2.ncu-rep.xz", ["add_fp32_1M_l2resident"]),
    ("corpus_basic.ncu-rep.xz", ["cublas_bf16_4096x4096x4096__basic", "add_fp32_256M__basic"]),
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
