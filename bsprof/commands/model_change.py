"""`bsprof model --change` and `--validate --changes`: parse, call the chain, render."""

from __future__ import annotations

from bsprof.errors import BsprofError


def _capture(source) -> dict:
    """The timing.json of a `bsprof timing` results directory ``source`` (read within bounds and
    type-checked: a damaged one is one error line), or {} where there is none."""
    import os
    from pathlib import Path

    from bsprof.analyzers.timing.io import capture_meta

    meta = Path(source) / "timing.json"
    if source is None or not Path(source).is_dir() or not os.path.lexists(meta):
        return {}
    return capture_meta(meta)


def _problem(mnkl: str | None, source):
    """--mnkl, else the problem a `bsprof timing` results directory recorded."""
    from bsprof.artifacts import mnkl_of
    from bsprof.kernels.api import parse_mnkl

    if mnkl:
        return parse_mnkl(mnkl)
    if source is not None:
        return mnkl_of(_capture(source).get("mnkl"))
    return None


def _number(value, *, none: bool = False) -> bool:
    import math

    if value is None:
        return none
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_record(source, rec: dict) -> None:
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


def _base_clock(source, clock: str | None, gpu_limits: str | None) -> tuple[dict | None, dict | None, str, dict]:
    """The base build's sustained clock and power, and the device limits: --clock / --gpu-limits,
    else what the capture's timing.json recorded beside it (``change_sample``), else none."""
    from bsprof.analyzers.model.run import parse_clock, parse_limits

    device = ""
    rec: dict = {}
    if source is not None:
        meta = _capture(source)
        device = str(meta.get("device", ""))
        rec = meta.get("change_sample") or {}
        if not isinstance(rec, dict) or not all(
            isinstance(rec.get(k), (dict, type(None))) for k in ("sustained", "device_limits")
        ):
            raise BsprofError(
                f"{source}/timing.json: its change_sample is not what `bsprof timing` records; capture again"
            )
        _check_record(source, rec)
    if clock is not None:
        mhz, watts = parse_clock(clock)
        sustained = {"mhz": mhz, "watts": watts}
    else:
        sustained = rec.get("sustained")
    limits = parse_limits(gpu_limits).to_json() if gpu_limits else rec.get("device_limits")
    if limits is None and clock is not None:
        limits = parse_limits(None).to_json()
    return sustained, limits, device, rec


def run_change(
    console, builds, *, source, mnkl, tile_mn, clock, gpu_limits, as_json: bool, out, tiles: int, seed: int
) -> None:
    import click

    from bsprof import artifacts
    from bsprof.profile.validate_changes import change_chain
    from bsprof.reports import change_text

    if not builds or len(builds) > 2:
        raise BsprofError(
            "--change takes one bundled spec (optimized:uniform_desc=0) or two builds, A then B "
            "(cubins, SASS listings or specs)"
        )
    tile = None
    if tile_mn:
        try:
            tile = tuple(int(v) for v in tile_mn.split(","))
        except ValueError:
            tile = ()
        if len(tile) != 2 or min(tile) <= 0:
            raise BsprofError(f"--tile-mn {tile_mn!r}: give the output tile as M,N, e.g. --tile-mn 128,128")
    if out is not None:
        from bsprof.io import check_output_dir

        check_output_dir(out)
    problem = _problem(mnkl, source)
    recorded = _problem(None, source) if source is not None else None
    if mnkl and recorded and tuple(problem[:3]) != tuple(recorded[:3]):
        raise BsprofError(
            f"--mnkl {mnkl} is not the problem the capture in {source} ran "
            f"({','.join(map(str, recorded[:3]))}); the chain prices a change on the captured problem: "
            "drop --mnkl or capture this problem"
        )
    sustained, limits, device, rec = _base_clock(source, clock, gpu_limits)
    if tile is None and rec.get("tile"):
        tile = tuple(rec["tile"]) if isinstance(rec["tile"], list) else ()  # the tile the capture's build recorded
        if len(tile) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in tile):
            raise BsprofError(
                f"{source}/timing.json: change_sample.tile is {rec['tile']!r}, not M,N; capture again or pass --tile-mn"
            )
    res = change_chain(
        tuple(builds),
        problem,
        source=source,
        tile_mn=tile,
        sustained=sustained,
        limits=limits,
        device=device,
        wall_us=rec.get("capture_wall_us"),
    )
    model_result = None
    if "estimate" in res:
        from bsprof.analyzers.model.run import ModelRequest, run_model

        deltas = {k: round(v, 1) for k, v in res["estimate"].cycle_deltas("point").items() if abs(v) >= 0.05}
        model_result = run_model(ModelRequest(source=str(source), deltas=deltas, tiles=tiles, seed=seed))
    doc = change_text.change_doc(res, model_result)
    change_text.render_change(console, res, model_result)
    if as_json:
        click.echo(artifacts.dumps(doc))
    if out is not None:
        from bsprof.io import results_dir

        with results_dir(out, "model-change") as staged:
            artifacts.save(staged.path / "model.json", artifacts.document("model", doc))
        console.print(f"wrote {staged.path}/model.json", markup=False)


def run_validate_changes(console, *, mnkl, repeats: int, out) -> None:
    """On a GPU: capture each problem's base build, project every switch pair from SASS (written to
    projections.json first), time the pairs, score."""
    from bsprof.artifacts import dumps
    from bsprof.gpu import device_info
    from bsprof.io import ensure_dir, results_dir, write_text_atomic
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile import validate_changes as VC
    from bsprof.reports import change_text

    problems = VC.PROBLEMS if not mnkl else tuple(parse_mnkl(p) for p in mnkl.split(";"))
    device_info()  # no GPU: one error line before any directory is made
    # the run lands whole when it ends (an interrupted one leaves nothing); inside it the projections
    # are written before any pair is timed
    with results_dir(out, "validation-changes") as staged:
        d = staged.path
        bases = VC.capture_bases(problems, ensure_dir(d / "bases"), console)
        write_text_atomic(d / "bases" / "bases.json", dumps(bases))
        proj = VC.project_pairs(bases, d / "bases", problems, console=console)
        write_text_atomic(d / "projections.json", dumps(proj))
        console.print("projections written (projections.json) before any pair is timed", markup=False)
        measured = {
            "device": bases["device"],
            "device_limits": bases["device_limits"],
            "problems": VC.measure_pairs(problems, VC.PAIRS, repeats, console),
        }
        write_text_atomic(d / "measured.json", dumps(measured))
        from bsprof.analyzers.model.change import score_run

        scored = score_run(proj, measured)
        write_text_atomic(d / "validation.json", dumps(scored))
    change_text.render_validation_changes(console, scored)
    console.print(f"wrote {staged.path}/ (bases/, projections.json, measured.json, validation.json)", markup=False)


def rescore_changes(console, source, as_json: bool) -> None:
    """A stored `--validate --changes` run (its projections.json and measured.json, or measured.tar.xz
    as the GPU call returned it) scored again on any machine."""
    import os
    import tarfile
    from pathlib import Path

    import click

    from bsprof.analyzers.model.change import score_run
    from bsprof.artifacts import dumps, max_json_bytes, parse_json, read_json
    from bsprof.io import open_input, too_large
    from bsprof.reports import change_text

    d = Path(source)
    proj_path = d / "projections.json"
    if not os.path.lexists(proj_path):
        raise BsprofError(
            f"{d}: no projections.json; --validate --changes --from takes a stored run's directory "
            "(projections.json with measured.json or measured.tar.xz)"
        )
    proj = read_json(proj_path)
    measured, where = None, d / "measured.json"
    if os.path.lexists(where):
        measured = read_json(where)
    elif os.path.lexists(d / "measured.tar.xz"):
        where = d / "measured.tar.xz"
        cap = max_json_bytes()
        try:
            with open_input(where) as fh, tarfile.open(fileobj=fh, mode="r:xz") as tf:
                member = next((m for m in tf.getmembers() if m.isfile() and m.name.endswith("measured.json")), None)
                if member is not None:
                    if member.size > cap:
                        raise too_large(f"{where}:{member.name}", member.size, cap, "BSPROF_MAX_JSON_BYTES")
                    measured = parse_json(tf.extractfile(member).read(cap + 1), f"{where}:{member.name}")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise BsprofError(f"{where}: not a readable tar.xz ({type(exc).__name__}); copy the run again") from None
    if measured is None:
        raise BsprofError(f"{d}: no measured.json (or measured.tar.xz holding one); the run's wall times are missing")
    for path, doc, key in ((proj_path, proj, "points"), (where, measured, "problems")):
        if not isinstance(doc, dict) or not isinstance(doc.get(key), (list if key == "points" else dict)):
            raise BsprofError(
                f"{path}: not what `bsprof model --validate --changes` writes (no {key!r}); copy the run again"
            )
    try:
        scored = score_run(proj, measured)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # the files' inner records are read field by field: one that is not a run's record is named here
        raise BsprofError(
            f"{d}: projections.json and measured.json do not hold a run's records "
            f"({type(exc).__name__}: {str(exc)[:120]}); copy the run again"
        ) from None
    change_text.render_validation_changes(console, scored)
    if as_json:
        click.echo(dumps(scored))


def rescore_runs(console, source, as_json: bool) -> None:
    """Every stored delay-injection run under ``source`` (directories holding a validation.csv),
    scored as it came out, with the Monte Carlo band's coverage and the interval that replaces it."""
    from pathlib import Path

    import click

    from bsprof.analyzers.model.runs_score import score_all
    from bsprof.reports import change_text

    root = Path(source)
    dirs = sorted({p.parent for p in root.rglob("validation.csv")}) if root.is_dir() else []
    if not dirs:
        raise BsprofError(
            f"{source}: no stored --validate run under it (a directory holding validation.csv); "
            "--validate --from takes stored runs to score, e.g. tests/data/h100_timing"
        )
    res = score_all(dirs)
    change_text.render_runs(console, res)
    if as_json:
        from bsprof.artifacts import dumps

        click.echo(dumps(res))
