"""The event-buffer decoder, its checks, and the buffer planner."""

from __future__ import annotations

import numpy as np
import pytest

from bsprof.analyzers.timing.buffer import BufferPlan, check_table, decode_buffer, plan_buffer
from bsprof.analyzers.timing.schema import EVENT_ID, NUM_EVENTS
from bsprof.errors import BsprofError

NS0 = 1_700_000_000_000_000_000 & ((1 << 56) - 1)


def synth_buffer(num_ctas=3, tiles=4, sample_every=1, epi_warps=(2, 3, 4, 5), ghz=1.755, seed=0):
    """A buffer as a warp-specialized kernel's timing build would leave it: warp 0 producer,
    warp 1 MMA, ``epi_warps`` epilogue; each CTA on SM 2*cta+1 with its own clock origin."""
    rng = np.random.default_rng(seed)
    warps = 2 + len(epi_warps)
    plan = plan_buffer(num_ctas, warps, tiles, max_bytes=1 << 30)
    if sample_every > 1:
        plan = BufferPlan((num_ctas, warps, -(-tiles // sample_every), NUM_EVENTS, 2), sample_every)
    buf = np.zeros(plan.shape, dtype=np.int64)

    def put(cta, warp, tile, ev, clk):
        if tile % plan.sample_every:
            return
        slot = tile // plan.sample_every
        ns = NS0 + int(clk / ghz)
        sm = 2 * cta + 1
        buf[cta, warp, slot, EVENT_ID[ev]] = (clk, np.uint64((sm << 56) | ns).astype(np.int64))

    for cta in range(num_ctas):
        t = 10_000_000 * (cta + 1)  # clocks of different SMs have different origins
        free = {w: t for w in epi_warps}  # an epilogue warp starts a tile after its last one
        for tile in range(tiles):
            put(cta, 0, tile, "tile_start", t)
            put(cta, 0, tile, "load_end", t + 3000)
            put(cta, 1, tile, "tile_start", t)
            put(cta, 1, tile, "acc_acquired", t + 100)
            put(cta, 1, tile, "tma0_landed", t + 900)
            k_end = t + 900 + 4000
            put(cta, 1, tile, "kloop_end", k_end)
            for w in epi_warps:
                put(cta, w, tile, "tile_start", max(t, free[w]))
                ml = max(k_end, free[w]) + 20
                put(cta, w, tile, "ml_done", ml)
                p1 = ml + 4000 + int(rng.integers(0, 800))
                put(cta, w, tile, "phase1_end", p1)
                put(cta, w, tile, "phase2_end", p1 + 900)
                free[w] = p1 + 900
            t = k_end + 200
    return buf, plan


def test_plan_buffer_fits_and_samples_whole_tiles():
    p = plan_buffer(132, 12, 40)
    assert p.shape == (132, 12, 40, NUM_EVENTS, 2) and p.sample_every == 1
    small = plan_buffer(132, 12, 1000, max_bytes=8 << 20)
    assert small.nbytes <= 8 << 20
    assert small.sample_every & (small.sample_every - 1) == 0  # power of two
    assert small.tile_slots * small.sample_every >= 1000
    shape, every = small  # unpacks as (shape, sample_every)
    assert every == small.sample_every
    with pytest.raises(BsprofError, match="max_bytes"):
        plan_buffer(132, 12, 1, max_bytes=1000)


def test_decode_synthetic_buffer_roundtrip():
    buf, plan = synth_buffer()
    t = decode_buffer(buf, plan, kernel="k", variant="optimized")
    assert set(t["role"]) == {"producer", "mma", "epilogue"}
    kl = t[t["phase"] == "kloop"]
    assert (kl["end"] - kl["start"] == 4000).all()
    assert len(kl) == 3 * 4
    p1 = t[t["phase"] == "phase1"]
    assert len(p1) == 3 * 4 * 4 and p1["warp"].between(2, 5).all()
    assert set(t["sm"]) == {1, 3, 5}
    assert (t["kernel"] == "k").all()
    # the ns stamps are the globaltimer, decoded apart from the SM id
    assert ((t["end_ns"] - t["start_ns"]) >= 0).all() and t["start_ns"].min() >= NS0


def test_decode_sampled_buffer_keeps_real_tile_numbers():
    buf, plan = synth_buffer(tiles=8, sample_every=4)
    t = decode_buffer(buf, plan)
    assert sorted(t["tile"].unique()) == [0, 4]
    assert t.attrs["sample_every"] == 4


def test_truncated_buffer_is_one_line_error():
    buf, plan = synth_buffer()
    with pytest.raises(BsprofError, match="truncated"):
        decode_buffer(buf.reshape(-1)[:-2], plan)


def test_zero_clock_is_an_error():
    buf, plan = synth_buffer()
    buf[1, 1, 2, EVENT_ID["kloop_end"], 0] = 0
    with pytest.raises(BsprofError, match="clock of 0"):
        decode_buffer(buf, plan)


def test_missing_role_is_an_error():
    buf, plan = synth_buffer()
    buf[:, 1] = 0  # the MMA warp never recorded
    with pytest.raises(BsprofError, match="mma"):
        decode_buffer(buf, plan)


def test_missing_tile_of_one_role_is_an_error():
    buf, plan = synth_buffer()
    buf[2, 2:, 3] = 0  # epilogue lost tile 3 of CTA 2
    with pytest.raises(BsprofError, match="missing tiles"):
        decode_buffer(buf, plan)


def test_empty_buffer_is_an_error():
    _, plan = synth_buffer()
    with pytest.raises(BsprofError, match="empty"):
        decode_buffer(np.zeros(plan.shape, np.int64), plan)


def test_end_before_start_is_an_error():
    buf, plan = synth_buffer()
    t = decode_buffer(buf, plan)
    t.loc[5, "end"] = t.loc[5, "start"] - 1
    with pytest.raises(BsprofError, match="ends before it starts"):
        check_table(t)


def synth_hopper_buffer(num_ctas=2, tiles=5, consumers=range(4, 12), ghz=1.755):
    """The Hopper cooperative layout: producer warp 0; consumer warps 4-11 each record their own
    K-loop and epilogue (no ml_done event)."""
    plan = plan_buffer(num_ctas, 12, tiles, max_bytes=1 << 30)
    buf = np.zeros(plan.shape, dtype=np.int64)
    for cta in range(num_ctas):
        t = 5_000_000 * (cta + 1)
        for tile in range(tiles):
            for w, evs in [(0, [("tile_start", 0), ("load_end", 7000)])] + [
                (
                    w,
                    [
                        ("tile_start", 0),
                        ("acc_acquired", 5),
                        ("tma0_landed", 300),
                        ("kloop_end", 8300 + w),
                        ("phase1_end", 9800 + w),
                        ("phase2_end", 9810 + w),
                    ],
                )
                for w in consumers
            ]:
                for ev, dt in evs:
                    clk = t + dt
                    word1 = np.uint64((((2 * cta) % 256) << 56) | (NS0 + int(clk / ghz))).astype(np.int64)
                    buf[cta, w, tile, EVENT_ID[ev]] = (clk, word1)
            t += 10_000
    return buf, plan


def test_decode_hopper_consumer_runs_its_own_epilogue():
    buf, plan = synth_hopper_buffer()
    t = decode_buffer(buf, plan)
    cons = t[t["warp"] == 6]
    assert set(cons["role"]) == {"mma", "epilogue"}
    assert "ml_wait" not in set(t["phase"])  # its mainloop wait is the mainloop itself
    p1 = cons[cons["phase"] == "phase1"].iloc[0]
    kl = cons[cons["phase"] == "kloop"].iloc[0]
    assert p1["start"] == kl["end"] and p1["end"] - p1["start"] == 1500
    assert set(t.loc[t["warp"] == 0, "phase"]) == {"load"}
