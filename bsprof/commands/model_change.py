"""`bsprof model --change` and `--validate --changes`: parse, call the chain, render."""

from __future__ import annotations

from bsprof.errors import BsprofError


def _problem(mnkl: str | None, source):
    """--mnkl, else the problem a `bsprof timing` results directory recorded."""
    import json
    from pathlib import Path

    from bsprof.kernels.api import parse_mnkl

    if mnkl:
        return parse_mnkl(mnkl)
    if source is not None:
        meta = Path(source) / "timing.json"
        if meta.is_file():
            try:
                got = json.loads(meta.read_text()).get("mnkl")
            except (OSError, ValueError):
                got = None
            if got:
                return tuple(int(v) for v in got)
    return None


def _base_clock(source, clock: str | None, gpu_limits: str | None) -> tuple[dict | None, dict | None, str, dict]:
    """The base build's sustained clock and power, and the device limits: --clock / --gpu-limits,
    else what the capture's timing.json recorded beside it (``change_sample``), else none."""
    import json
    from pathlib import Path

    from bsprof.analyzers.model.run import parse_clock, parse_limits

    device = ""
    rec: dict = {}
    if source is not None and (Path(source) / "timing.json").is_file():
        try:
            meta = json.loads((Path(source) / "timing.json").read_text())
        except (OSError, ValueError):
            meta = {}
        device = str(meta.get("device", ""))
        rec = meta.get("change_sample") or {}
    if clock is not None:
        mhz, watts = parse_clock(clock)
        sustained = {"mhz": mhz, "watts": watts}
    else:
        sustained = rec.get("sustained")
    limits = parse_limits(gpu_limits).to_json() if gpu_limits else rec.get("device_limits")
    if limits is None and clock is not None:
        limits = parse_limits(None).to_json()
    return sustained, limits, device, rec


def run_change(console, builds, *, source, mnkl, tile_mn, clock, gpu_limits, as_json: bool, out, tiles: int,
               seed: int) -> None:
    import click

    from bsprof import artifacts
    from bsprof.profile.validate_changes import change_chain
    from bsprof.reports import change_text

    if not builds or len(builds) > 2:
        raise BsprofError("--change takes one bundled spec (optimized:uniform_desc=0) or two builds, A then B "
                          "(cubins, SASS listings or specs)")
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
        raise BsprofError(f"--mnkl {mnkl} is not the problem the capture in {source} ran "
                          f"({','.join(map(str, recorded[:3]))}); the chain prices a change on the captured problem: "
                          "drop --mnkl or capture this problem")
    sustained, limits, device, rec = _base_clock(source, clock, gpu_limits)
    if tile is None and rec.get("tile"):
        tile = tuple(rec["tile"])   # the tile the capture's build recorded
    res = change_chain(tuple(builds), problem, source=source, tile_mn=tile, sustained=sustained, limits=limits,
                       device=device, wall_us=rec.get("capture_wall_us"))
    model_result = None
    if "estimate" in res:
        from bsprof.analyzers.model.run import ModelRequest, run_model

        deltas = {k: round(v, 1) for k, v in res["estimate"].cycle_deltas("point").items() if abs(v) >= 0.05}
        model_result = run_model(ModelRequest(source=str(source), deltas=deltas, tiles=tiles, seed=seed))
    doc = change_text.change_doc(res, model_result)
    change_text.render_change(console, res, model_result)
    if as_json:
        import json

        click.echo(json.dumps(artifacts.to_jsonable(doc) if hasattr(artifacts, "to_jsonable") else doc,
                              indent=1, default=float))
    if out is not None:
        import json

        from bsprof.io import unique_dir, write_text_atomic

        d = unique_dir(out, "model-change")
        write_text_atomic(d / "model.json", json.dumps({"bsprof": artifacts.tag("model"), **doc}, indent=1,
                                                       default=float))
        console.print(f"wrote {d}/model.json", markup=False)


def run_validate_changes(console, *, mnkl, repeats: int, out) -> None:
    """On a GPU: capture each problem's base build, project every switch pair from SASS (written to
    projections.json first), time the pairs, score."""
    import json

    from bsprof.gpu import device_info
    from bsprof.io import unique_dir, write_text_atomic
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile import validate_changes as VC
    from bsprof.reports import change_text

    problems = VC.PROBLEMS if not mnkl else tuple(parse_mnkl(p) for p in mnkl.split(";"))
    device_info()       # no GPU: one error line before any directory is made
    d = unique_dir(out, "validation-changes")
    bases = VC.capture_bases(problems, d / "bases", console)
    write_text_atomic(d / "bases" / "bases.json", json.dumps(bases, indent=1, default=float))
    proj = VC.project_pairs(bases, d / "bases", problems, console=console)
    write_text_atomic(d / "projections.json", json.dumps(proj, indent=1, default=float))
    console.print(f"projections written to {d}/projections.json before any pair is timed", markup=False)
    measured = {"device": bases["device"], "device_limits": bases["device_limits"],
                "problems": VC.measure_pairs(problems, VC.PAIRS, repeats, console)}
    write_text_atomic(d / "measured.json", json.dumps(measured, indent=1, default=float))
    from bsprof.analyzers.model.change import score_run

    scored = score_run(proj, measured)
    write_text_atomic(d / "validation.json", json.dumps(scored, indent=1, default=float))
    change_text.render_validation_changes(console, scored)
    console.print(f"wrote {d}/ (bases/, projections.json, measured.json, validation.json)", markup=False)


def rescore_changes(console, source, as_json: bool) -> None:
    """A stored `--validate --changes` run (its projections.json and measured.json, or measured.tar.xz
    as the GPU call returned it) scored again on any machine."""
    import json
    import tarfile
    from pathlib import Path

    import click

    from bsprof.analyzers.model.change import score_run
    from bsprof.reports import change_text

    d = Path(source)
    proj_path = d / "projections.json"
    if not proj_path.is_file():
        raise BsprofError(f"{d}: no projections.json; --validate --changes --from takes a stored run's directory "
                          "(projections.json with measured.json or measured.tar.xz)")
    measured = None
    if (d / "measured.json").is_file():
        measured = json.loads((d / "measured.json").read_text())
    elif (d / "measured.tar.xz").is_file():
        with tarfile.open(d / "measured.tar.xz") as tf:
            member = next((m for m in tf.getmembers() if m.name.endswith("measured.json")), None)
            if member is not None:
                measured = json.loads(tf.extractfile(member).read())
    if measured is None:
        raise BsprofError(f"{d}: no measured.json (or measured.tar.xz holding one); the run's wall times are missing")
    scored = score_run(json.loads(proj_path.read_text()), measured)
    change_text.render_validation_changes(console, scored)
    if as_json:
        click.echo(json.dumps(scored, indent=1, default=float))


def rescore_runs(console, source, as_json: bool) -> None:
    """Every stored delay-injection run under ``source`` (directories holding a validation.csv),
    scored as it came out, with the Monte Carlo band's coverage and the interval that replaces it."""
    import json
    from pathlib import Path

    import click

    from bsprof.analyzers.model.runs_score import score_all
    from bsprof.reports import change_text

    root = Path(source)
    dirs = sorted({p.parent for p in root.rglob("validation.csv")}) if root.is_dir() else []
    if not dirs:
        raise BsprofError(f"{source}: no stored --validate run under it (a directory holding validation.csv); "
                          "--validate --from takes stored runs to score, e.g. tests/data/h100_timing")
    res = score_all(dirs)
    change_text.render_runs(console, res)
    if as_json:
        click.echo(json.dumps(res, indent=1, default=float))
