"""The clock-stamp kernel (the SM cycle counter over a timed block) compiles for Hopper to two
clock reads and two globaltimer reads around a clock spin, stored by lane 0 only; and the host
arithmetic turns two stamps into the SMs' mean clock over the interval between them."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bsprof.analyzers.model import sustained as SU
from bsprof.analyzers.model import validation as V


def test_stamp_kernel_reads_the_counter_and_the_timer_around_its_spin(tmp_path):
    import os
    import subprocess

    import nvidia.cu13

    from bsprof.kernels.build import compile_to_cubin

    cubin = compile_to_cubin("bsprof.kernels.clock_stamp:compile_stamp", {"blocks": 4}, "sm_90a", tmp_path / "s.cubin")
    tool = next(
        os.path.join(b, "bin", "cuobjdump")
        for b in nvidia.cu13.__path__
        if os.path.exists(os.path.join(b, "bin", "cuobjdump"))
    )
    sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);", sass)
    assert sum("SR_GLOBALTIMER" in o for o in ops) >= 2
    assert sum(bool(re.search(r"\b(CS2R|S2UR|S2R)\b.*SR_CLOCKLO", o)) for o in ops) >= 3  # entry, spin, exit
    assert sum("SMID" in o for o in ops) == 1
    stores = [o for o in ops if "STG" in o]
    assert len(stores) == 3 and all("STG.E.128" in o for o in stores)
    assert any("SR_LANEID" in o for o in ops)  # lane 0 stores (a predicate or its branch)


def _stamp(rows):
    """A stamp buffer: one (clock in, timer in, clock out, timer out, SM) row per block."""
    return np.array([[c0, t0, c1, t1, sm, sm] for c0, t0, c1, t1, sm in rows], dtype=np.int64).reshape(-1)


def test_two_stamps_give_the_sms_clock_over_the_interval_between_them():
    """Each SM's counter has its own offset; its advance over the timer's is the clock. SMs are
    paired by id (the grid's blocks land on SMs in any order), an SM missing from either stamp is
    left out, and a block the stamp never wrote (zeros) does not count."""
    ns = 100_000_000  # a 0.1 s block
    before = _stamp([(5_000 + 7 * sm, 1_000, 5_100 + 7 * sm, 1_050, sm) for sm in (0, 1, 2, 3)] + [(0, 0, 0, 0, 0)])
    # SM 2 ran at 1,650 MHz, the others 1,700; SM 3 is missing after; a second block of SM 1 entered later
    after = _stamp(
        [(5_100 + 7 * sm + int((1.65 if sm == 2 else 1.70) * ns), 1_050 + ns, 0, 1, sm) for sm in (2, 0, 1)]
        + [(5_100 + 7 + int(1.7 * (ns + 500)), 1_050 + ns + 500, 1, 2, 1)]
    )
    after = after.reshape(-1, 6)
    after[:, 2:4] = [[9, 10]] * len(after)  # exit words written (the stamp did not spin)
    mhz, span = SU.counter_mhz(before, after.reshape(-1))
    assert mhz == pytest.approx(1700.0, rel=1e-6) and span == pytest.approx(ns, rel=1e-4)
    assert SU.counter_mhz(before, np.zeros(24, dtype=np.int64)) == (None, None)


def test_a_spinning_stamp_gives_the_top_clock_per_sm():
    spins = _stamp(
        [(100, 10, 100 + 194_400_000, 10 + 100_000_000, sm) for sm in range(5)]
        + [(100, 10, 100 + 150_000_000, 10 + 100_000_000, 5)]
    )
    assert SU.spin_counter_mhz(spins) == pytest.approx(1944.0)
    assert SU.spin_counter_mhz(np.zeros(12, dtype=np.int64)) is None


def test_counter_pooled_clock_is_total_cycles_over_total_time():
    reads = {
        "plain": [
            {"counter_mhz": 1600.0, "counter_ns": 1e8, "mhz_mean": 1580.0, "watts_mean": 700.0, "readings": 20},
            {"counter_mhz": 1700.0, "counter_ns": 3e8, "mhz_mean": 1690.0, "watts_mean": 690.0, "readings": 20},
            {"mhz_mean": 1500.0, "watts_mean": 600.0, "readings": 20},
        ]
    }  # no counter: left out
    c = SU.pooled_clocks(reads, clock="counter")["plain"]
    assert c["mhz"] == pytest.approx((1600 * 1 + 1700 * 3) / 4) and c["blocks"] == 2 and c["clock"] == "counter"
    assert c["watts"] == pytest.approx(695.0)
    assert SU.pooled_clocks(reads)["plain"]["mhz"] == pytest.approx((1580 + 1690 + 1500) / 3)
    # the diagnostic: counter over NVML, each pooled over its own blocks
    assert SU.counter_vs_nvml(reads)["plain"] == pytest.approx(((1600 + 1700 * 3) / 4) / ((1580 + 1690 + 1500) / 3))


def test_the_clock_term_reads_nvmls_top_even_where_a_counter_top_was_measured():
    from bsprof.analyzers.model.clock import limits_for

    rec = {"max_mhz": 1980.0, "power_limit_w": 700.0, "floor_w": 146.0, "top_counter_mhz": 1944.0}
    assert limits_for("x", rec).max_mhz == 1980.0
    assert limits_for("NVIDIA H100 80GB HBM3", {}).max_mhz == 1980.0  # the data sheet
    assert limits_for("x", {}) is None


def test_sustained_cycle_ratio_is_wall_times_counter_clock():
    base = [{"counter_mhz": 1600.0}, {"counter_mhz": 1650.0}]
    meas = [{"counter_mhz": 1900.0}, {"counter_mhz": 1940.0}]
    out = SU.sustained_cycles([1000.0, 1010.0], base, [1500.0, 1490.0], meas)
    want = (1500 * 1900 / (1000 * 1600) + 1490 * 1940 / (1010 * 1650)) / 2
    assert out["sust_cycle_ratio"] == pytest.approx(want)
    assert SU.sustained_cycles([1000.0], [{"mhz": 1600.0}], [1500.0], meas) == {}
    p = V.Point("forward", "phase1", "plain", 0, 10, 0.0, 1.0, 1000.0, 1500.0, extra=out)
    p.projected_cycles_det = want * 0.98
    assert V.sustained_cycle_error_pct(p) == pytest.approx(-2.0)


def test_the_build_order_is_a_seeded_shuffle_with_no_fixed_predecessor():
    """The rotation gave every build the same predecessor in every repeat (the 8192^3 baseline
    followed the same high-draw build, and was held, in 4 of 5 repeats); the shuffle does not."""
    from bsprof.profile.validate import block_order

    keys = ["plain", "plain_b"] + [f"d{i}" for i in range(11)]
    orders = [block_order(keys, r) for r in range(5)]
    assert orders == [block_order(keys, r) for r in range(5)]  # replayable from the seed
    before = [o[o.index("plain") - 1] if o.index("plain") else None for o in orders]
    assert max(before.count(x) for x in before) <= 2  # no predecessor in most repeats


class _FakeClock:
    """A stand-in GPU for the host loop: every launch advances a global timer; the SMs' counters run
    at ``mhz`` (the build's clock) while it runs."""

    def __init__(self):
        self.ns, self.cycles = 1_000_000, {sm: 10_000 * (sm + 1) for sm in range(4)}

    def run(self, seconds: float, mhz: float) -> None:
        self.ns += int(seconds * 1e9)
        for sm in self.cycles:
            self.cycles[sm] += int(seconds * 1e9 * mhz / 1000.0)


def test_sustained_walls_reads_each_blocks_counter_clock_in_the_shuffled_order(monkeypatch):
    """The host loop on a fake device: each block gets the counter clock of the build that ran in it
    (stamps around the timed launches only, not the settle), its NVML reading and temperature, its
    repeat and predecessor; the order is ``block_order``'s."""
    import torch

    from bsprof.profile import sensors as S
    from bsprof.profile import timing_capture as tc
    from bsprof.profile import validate

    dev, clocks = _FakeClock(), {"plain": 1650.0, "fast": 1940.0, "mid": 1800.0}
    state = {"timing": False, "timed": 0.0}

    def graph(key):
        def replay():
            dev.run(0.02, clocks[key])
            if state["timing"]:
                state["timed"] += 0.02

        return replay

    class Event:
        def __init__(self, enable_timing=True):
            self.t, self.polls = None, 0

        def record(self):
            if self.t is None and not state["timing"]:  # the start event
                state["timing"], state["timed"] = True, 0.0
            else:
                state["timing"] = False
            self.t = state["timed"]

        def query(self):  # not done at the first poll: the host reads the sensors once
            self.polls += 1
            return self.polls > 1

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 1000.0

    class Stamps:
        def stamp(self, spin_cycles=0):
            rows = [[dev.cycles[sm], dev.ns, dev.cycles[sm] + 5, dev.ns + 3, sm, sm] for sm in dev.cycles]
            return torch.tensor(rows, dtype=torch.int64).reshape(-1)

    class Sensors:
        def read(self):
            return 1700.0, 690.0, 4

        def temperature(self):
            return 61.0

    monkeypatch.setattr(tc, "graph_launcher", lambda prep, n: graph(prep))
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(S, "torch_device_sensors", lambda: Sensors())
    keys = list(clocks)
    reps, reads, how = validate.sustained_walls({k: k for k in keys}, keys, 5, stamps=Stamps())
    assert how == "graph" and all(len(v) == 5 for v in reps.values())
    for k in keys:
        assert [b["counter_mhz"] for b in reads[k]] == pytest.approx([clocks[k]] * 5, rel=1e-3)
        assert all(b["counter_ns"] == pytest.approx(0.1e9, rel=0.01) for b in reads[k])  # the timed part only
        assert all(b["temp_c"] == 61.0 and b["mhz_mean"] == 1700.0 for b in reads[k])
    order = [k for r in range(5) for k in validate.block_order(keys, r)]
    prev = [None] + order[:-1]
    assert sorted((str(b["after"]), k) for k in keys for b in reads[k]) == sorted(zip(map(str, prev), order))
    assert SU.pooled_clocks(reads, clock="counter")["plain"]["mhz"] == pytest.approx(1650.0, rel=1e-3)


def test_device_limits_records_the_counter_rate_of_stamp_spins_on_every_sm(monkeypatch):
    import torch

    from bsprof.profile import sensors as S
    from bsprof.profile import validate

    spins = []

    class Stamps:
        def stamp(self, spin_cycles=0):
            spins.append(spin_cycles)
            mhz = (1944.0, 1946.0, 1941.0)[len(spins) - 1]
            ns = int(spin_cycles / mhz * 1000)
            return torch.tensor([[100, 10, 100 + spin_cycles, 10 + ns, sm, sm] for sm in range(3)]).reshape(-1)

    class Sensors:
        def limits(self):
            return {"max_mhz": 1980.0, "power_limit_w": 700.0}

        def read(self):
            return 1980.0, 146.0, 0

    class Event:
        def __init__(self, enable_timing=True):
            self.polls = 0

        def record(self):
            pass

        def query(self):
            self.polls += 1
            return self.polls > 1

        def elapsed_time(self, other):
            return 500.0

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda n: None)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(S, "torch_device_sensors", lambda: Sensors())
    monkeypatch.setattr("time.sleep", lambda s: None)
    lim = validate.device_limits(spin_s=0.03, stamps=Stamps())
    assert spins == [int(validate.TOP_SPIN_S * 1980.0 * 1e6)] * validate.TOP_SPINS
    assert lim["top_counter_mhz"] == pytest.approx(1944.0, rel=1e-4) and lim["max_mhz"] == 1980.0
    assert lim["top_counter_spins"] == pytest.approx([1944.0, 1946.0, 1941.0], rel=1e-4)
    assert validate.device_limits(spin_s=0.03)["top_counter_mhz"] is None  # no stamps: NVML's top only
