"""`bsprof report`: render bsprof artifacts into one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="report")
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("report.html"),
    show_default=True,
    help="HTML file to write (new, empty, or a page bsprof wrote earlier; replaced atomically)",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    help="column heading per DIR (default: the directory name; baseline/optimized for two)",
)
@click.option("--title", default=None, help="page title")
@click.option("--only", default=None, help="comma-separated section ids to render (e.g. summary,verdict,sol)")
def command(dirs: tuple[Path, ...], out: Path, labels: tuple[str, ...], title: str | None, only: str | None) -> None:
    """Render DIR (a results directory of any bsprof verb), or BASELINE OPTIMIZED side by side, into one
    HTML file that opens offline. With no DIR, renders the shipped sample artifacts."""
    from bsprof.errors import BsprofError
    from bsprof.io import check_output_file
    from bsprof.reports.build import build, write
    from bsprof.reports.samples import sample_runs

    paths = list(dirs) or sample_runs()
    if not dirs and title is None:
        title = "bsprof sample report (shipped artifacts: bsprof/data/samples/run)"
    if labels and len(labels) != len(paths):
        raise BsprofError(f"{len(labels)} --label given for {len(paths)} inputs; give one per DIR or none")
    if out.exists() and out.is_dir():
        raise BsprofError(f"-o {out} is a directory; give a file name, e.g. -o {out / 'report.html'}")
    check_output_file(out)  # before the page is built: a refused path costs no work
    sections = {s.strip() for s in only.split(",") if s.strip()} if only else None
    html, info = build(paths, list(labels) or None, title, sections)
    write(html, out)
    import shutil
    import textwrap

    width = shutil.get_terminal_size().columns  # $COLUMNS, the terminal's, or (piped) bsprof's width
    for line, to_stderr in info.console_lines(out):
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        click.echo(
            textwrap.fill(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False),
            err=to_stderr,
        )
