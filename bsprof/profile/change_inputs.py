"""The inputs of a change priced from a `bsprof timing` results directory: the problem it ran, the base
build's sustained clock and power and the device limits it recorded (``change_sample`` in its
timing.json), the tile, each checked so that a damaged record is one error line, not a TypeError deep
in the projection. `bsprof model --change` parses its options and calls :func:`change_inputs`."""

from __future__ import annotations

from pathlib import Path

from bsprof.errors import BsprofError


def capture_record(source: str | Path | None) -> dict:
    """The timing.json of a `bsprof timing` results directory ``source`` (read within bounds and
    type-checked: a damaged one is one error line), or {} where there is none."""
    import os

    from bsprof.analyzers.timing.io import capture_meta

    meta = Path(source) / "timing.json"
    if source is None or not Path(source).is_dir() or not os.path.lexists(meta):
        return {}
    return capture_meta(meta)


def problem_of(mnkl: str | None, source: str | Path | None) -> tuple[int, ...] | None:
    """--mnkl, else the problem a `bsprof timing` results directory recorded."""
    from bsprof.artifacts import mnkl_of
    from bsprof.kernels.api import parse_mnkl

    if mnkl:
        return parse_mnkl(mnkl)
    if source is not None:
        return mnkl_of(capture_record(source).get("mnkl"))
    return None


def _number(value, *, none: bool = False) -> bool:
    import math

    if value is None:
        return none
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_record(source: str | Path, rec: dict) -> None:
    """The change_sample fields the chain computes with are the numbers `bsprof timing` records
    (a damaged one is one error line here, not a TypeError or KeyError deep in the projection)."""
    sustained, limits = rec.get("sustained"), rec.get("device_limits")
    bad = (
        "capture_wall_us"
        if not _number(rec.get("capture_wall_us"), none=True)
        else "sustained"
        if sustained is not None
        and not (_number(sustained.get("mhz"), none=True) and _number(sustained.get("watts"), none=True))
        else "device_limits"
        if limits is not None
        and not (
            _number(limits.get("max_mhz"))
            and _number(limits.get("power_limit_w"))
            and (limits.get("floor_w") in (None, 0) or _number(limits.get("floor_w")))
        )
        else None
    )
    if bad:
        raise BsprofError(
            f"{source}/timing.json: change_sample.{bad} is {rec.get(bad)!r:.120}, not what `bsprof timing` "
            "records; capture again (or pass --clock / --gpu-limits)"
        )


def base_clock(
    source: str | Path | None, clock: str | None, gpu_limits: str | None
) -> tuple[dict | None, dict | None, str, dict]:
    """The base build's sustained clock and power, and the device limits: --clock / --gpu-limits,
    else what the capture's timing.json recorded beside it (``change_sample``), else none."""
    from bsprof.analyzers.model.run import parse_clock, parse_limits

    device = ""
    rec: dict = {}
    if source is not None:
        meta = capture_record(source)
        device = str(meta.get("device", ""))
        rec = meta.get("change_sample") or {}
        if not isinstance(rec, dict) or not all(
            isinstance(rec.get(k), (dict, type(None))) for k in ("sustained", "device_limits")
        ):
            raise BsprofError(
                f"{source}/timing.json: its change_sample is not what `bsprof timing` records; capture again"
            )
        check_record(source, rec)
    if clock is not None:
        mhz, watts = parse_clock(clock)
        sustained = {"mhz": mhz, "watts": watts}
    else:
        sustained = rec.get("sustained")
    limits = parse_limits(gpu_limits).to_json() if gpu_limits else rec.get("device_limits")
    if limits is None and clock is not None:
        limits = parse_limits(None).to_json()
    return sustained, limits, device, rec


def parse_tile(tile_mn: str | None) -> tuple[int, int] | None:
    """--tile-mn M,N as a pair of positive ints (None where not given)."""
    if not tile_mn:
        return None
    try:
        tile = tuple(int(v) for v in tile_mn.split(","))
    except ValueError:
        tile = ()
    if len(tile) != 2 or min(tile) <= 0:
        raise BsprofError(f"--tile-mn {tile_mn!r}: give the output tile as M,N, e.g. --tile-mn 128,128")
    return tile  # type: ignore[return-value]


def _tile_sizes(values) -> bool:
    """Whether every value is a tile size: a positive int, not a bool."""
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def change_inputs(
    source: str | Path | None, mnkl: str | None, tile_mn: str | None, clock: str | None, gpu_limits: str | None
) -> dict:
    """What :func:`bsprof.profile.validate_changes.change_chain` takes besides the builds: the problem
    (--mnkl, else the capture's, and they must agree), the tile (--tile-mn, else the capture's), the base
    build's clock, power and device limits, its device and capture wall time."""
    tile = parse_tile(tile_mn)
    problem = problem_of(mnkl, source)
    recorded = problem_of(None, source) if source is not None else None
    if mnkl and recorded and tuple(problem[:3]) != tuple(recorded[:3]):
        raise BsprofError(
            f"--mnkl {mnkl} is not the problem the capture in {source} ran "
            f"({','.join(map(str, recorded[:3]))}); the chain prices a change on the captured problem: "
            "drop --mnkl or capture this problem"
        )
    sustained, limits, device, rec = base_clock(source, clock, gpu_limits)
    if tile is None and rec.get("tile"):
        tile = tuple(rec["tile"]) if isinstance(rec["tile"], list) else ()  # the tile the capture's build recorded
        if len(tile) != 2 or not _tile_sizes(tile):
            raise BsprofError(
                f"{source}/timing.json: change_sample.tile is {rec['tile']!r}, not M,N; capture again or pass --tile-mn"
            )
    if tile is None and source is not None:
        # a `bsprof timing` capture records the tile its build ran under config (a per-problem choice)
        cfg = capture_record(source).get("config") or {}
        ran = (cfg.get("tile_m"), cfg.get("tile_n"))
        tile = ran if _tile_sizes(ran) else None
    return {
        "problem": problem,
        "tile_mn": tile,
        "sustained": sustained,
        "limits": limits,
        "device": device,
        "wall_us": rec.get("capture_wall_us"),
    }
