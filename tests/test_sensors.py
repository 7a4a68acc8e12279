"""Clock/power bookkeeping of the benchmark (bsprof.profile.sensors) and its median-round pick."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bsprof.profile.sensors import SensorLog, flop_per_sm_cycle


class _Recorded:
    """Readings as NVML gave them during one H100 run (4096^3): MHz, W, reason bits."""

    def __init__(self, readings):
        self._it = iter(readings)

    def read(self):
        return next(self._it)


def test_summary_is_the_median_and_names_what_held_the_clock():
    log = SensorLog(
        _Recorded(
            [(1470.0, 654.0, 0x4), (1485.0, 700.0, 0x4), (float("nan"), float("nan"), 0), (1455.0, 690.0, 0x4 | 0x20)]
        )
    )
    for _ in range(4):
        log.poll()
    s = log.summary()
    assert s["sm_mhz"] == 1470.0 and s["watts"] == 690.0 and s["samples"] == 4
    assert s["clock_limiters"] == ["power cap", "sw thermal"]


def test_summary_without_readings_is_empty_not_zero():
    s = SensorLog(_Recorded([])).summary()
    assert s["sm_mhz"] is None and s["watts"] is None and s["clock_limiters"] == []


def test_flop_per_sm_cycle_divides_out_the_clock():
    # 4096^3 in 0.125696 ms at 1,470 MHz on 132 SMs (the optimized row of that run)
    v = flop_per_sm_cycle(2 * 4096**3, 0.125696, 1470.0, 132)
    assert v == pytest.approx(5635.0, rel=1e-4)
    assert v < 8192  # below the H100's dense FP8 peak per SM-cycle
    assert flop_per_sm_cycle(1e9, 1.0, None, 132) is None
    assert flop_per_sm_cycle(1e9, 0.0, 1500.0, 132) is None


def test_median_round_keeps_the_middle_round_and_its_clocks():
    from bsprof.profile.bench.fp8_blockwise import median_round

    runs = [
        (0.142, {"sm_mhz": 1470}),
        (0.118, {"sm_mhz": 1530}),
        (0.120, {"sm_mhz": 1500}),
        (0.119, {"sm_mhz": 1515}),
        (0.140, {"sm_mhz": 1455}),
    ]
    ms, clocks = median_round(runs)
    assert ms == 0.120 and clocks["sm_mhz"] == 1500
    assert median_round([(0.2, {}), (0.1, {})])[0] == 0.1  # even count: the lower middle
    assert math.isfinite(ms)


def test_round_order_gives_each_kernel_both_neighbours_across_rounds():
    from bsprof.profile.bench.fp8_blockwise import round_order

    assert round_order(3, 0) == [0, 1, 2]
    assert round_order(3, 1) == [2, 1, 0]
    # over two rounds every kernel but the ends runs after each of its neighbours
    seq = round_order(4, 0) + round_order(4, 1)
    before = {(seq[i - 1], seq[i]) for i in range(1, len(seq))}
    assert (0, 1) in before and (2, 1) in before


@given(copies=st.integers(1, 6), passes=st.integers(1, 3))
def test_every_copy_of_the_operands_meets_both_round_orders_equally(copies, passes):
    from bsprof.profile.bench.fp8_blockwise import placement_of, round_order

    rounds = 2 * copies * passes
    seen = [placement_of(r, copies) for r in range(rounds)]
    assert all(0 <= c < copies for c in seen)
    for c in range(copies):
        forward = sum(1 for r, got in enumerate(seen) if got == c and round_order(2, r) == [0, 1])
        backward = sum(1 for r, got in enumerate(seen) if got == c and round_order(2, r) == [1, 0])
        assert forward == backward == passes
    # the first pass over the copies uses each once, so a run of exactly `copies` rounds sees them all
    assert sorted(seen[:copies]) == list(range(copies))
