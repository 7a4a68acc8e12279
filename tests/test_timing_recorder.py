"""The device recorder compiles for Hopper and Blackwell to one 128-bit store per event."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from bsprof.kernels.build import compile_to_cubin

ENTRY = "bsprof.kernels.timing_probe:compile_probe"
RECORDS_IN_PROBE = 8  # tile_start + 1 producer + 3 mma + 3 epilogue record calls


def _sass(cubin) -> str:
    import nvidia.cu13

    tool = next(
        os.path.join(b, "bin", "cuobjdump")
        for b in nvidia.cu13.__path__
        if os.path.exists(os.path.join(b, "bin", "cuobjdump"))
    )
    return subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout


def _ops(sass: str) -> list[str]:
    return re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);", sass)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("kwargs", [{}, {"sample_every": 2, "tiles": 5}, {"dynamic_slots": True}])
def test_recorder_is_one_128bit_store_per_event(tmp_path, arch, kwargs):
    ops = _ops(_sass(compile_to_cubin(ENTRY, kwargs, arch, tmp_path / "p.cubin")))
    stores = [o for o in ops if "STG" in o]
    assert len(stores) == RECORDS_IN_PROBE
    assert all("STG.E.128" in o for o in stores), stores
    # clock read by CS2R (or S2UR on uniform paths), globaltimer and SM id read once per event
    assert sum("SR_GLOBALTIMER" in o for o in ops) == RECORDS_IN_PROBE
    assert sum(bool(re.search(r"\b(CS2R|S2UR)\b.*SR_CLOCKLO", o)) for o in ops) >= RECORDS_IN_PROBE
    assert sum("SMID" in o for o in ops) == RECORDS_IN_PROBE
    # only lane 0 stores: the lane id is read and the stores sit under a predicate or its branch
    assert any("SR_LANEID" in o for o in ops)
    assert any(o.startswith("@") for o in stores)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_plain_build_has_no_recorder_code(tmp_path, arch):
    ops = _ops(_sass(compile_to_cubin(ENTRY, {"enabled": False}, arch, tmp_path / "p.cubin")))
    assert not [o for o in ops if "STG" in o or "GLOBALTIMER" in o or "SMID" in o]
    # the delay spins stay (they are the injected cost, not the recorder's)
    assert any("SR_CLOCKLO" in o for o in ops)


def test_recorder_rejects_non_power_of_two_sampling():
    from bsprof.kernels.timing_recorder import TimingRecorder

    with pytest.raises(ValueError, match="power of two"):
        TimingRecorder(True, 4, 8, 3)
    TimingRecorder(False, 4, 8, 3)  # the plain build never looks at the layout


def test_events_of_one_instant_share_one_clock_read():
    from bsprof.kernels.timing_recorder import record_asm

    one, _ = record_asm(12, 4, 1, (5,))
    two, _ = record_asm(12, 4, 1, (5, 6))
    for asm in (one, two):
        assert asm.count("%clock64") == 1 and asm.count("%globaltimer") == 1
    assert one.count("st.global.v2.u64") == 1 and two.count("st.global.v2.u64") == 2
    # each event keeps its own slot: 16 bytes x event id past the (cta, warp, tile) base
    assert "[addr+80]" in two and "[addr+96]" in two
