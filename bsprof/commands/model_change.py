"""`bsprof model --change` and `--validate --changes`: parse, call the chain, render."""

from __future__ import annotations

from bsprof.errors import BsprofError


def run_change(
    console, builds, *, source, mnkl, tile_mn, clock, gpu_limits, as_json: bool, out, tiles: int, seed: int
) -> None:
    import click

    from bsprof import artifacts
    from bsprof.profile.change_inputs import change_inputs
    from bsprof.profile.validate_changes import change_chain
    from bsprof.reports import change_text

    if not builds or len(builds) > 2:
        raise BsprofError(
            "--change takes one bundled spec (optimized:uniform_desc=0) or two builds, A then B "
            "(cubins, SASS listings or specs)"
        )
    if out is not None:
        from bsprof.io import check_output_dir

        check_output_dir(out)
    inputs = change_inputs(source, mnkl, tile_mn, clock, gpu_limits)
    res = change_chain(tuple(builds), inputs.pop("problem"), source=source, **inputs)
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


def run_validate_changes(console, *, mnkl, pairs: str | None, repeats: int, out) -> None:
    """On a GPU: capture each problem's base build, project every switch pair from SASS (written to
    projections.json first), time the pairs, score."""
    from bsprof.gpu import device_info
    from bsprof.kernels.api import parse_mnkl
    from bsprof.profile import validate_changes as VC
    from bsprof.reports import change_text

    problems = VC.PROBLEMS if not mnkl else tuple(parse_mnkl(p) for p in mnkl.split(";"))
    VC.check_problems(problems)
    switches = VC.PAIRS if pairs is None else VC.parse_pairs(pairs, problems)
    device_info()  # no GPU: one error line before any directory is made
    scored, where = VC.validate_changes(problems, repeats, out, console, pairs=switches)
    change_text.render_validation_changes(console, scored)
    console.print(f"wrote {where}/ (bases/, projections.json, measured.json, validation.json)", markup=False)


def rescore_changes(console, source, as_json: bool) -> None:
    """A stored `--validate --changes` run (its projections.json and measured.json, or measured.tar.xz
    as the GPU call returned it) scored again on any machine."""
    import click

    from bsprof.analyzers.model.change import rescore_stored_run
    from bsprof.artifacts import dumps
    from bsprof.reports import change_text

    scored = rescore_stored_run(source)
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
