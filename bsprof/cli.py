"""The bsprof command line: a thin click group whose verbs load only when they run.

Each verb lives in ``bsprof/commands/<verb>.py`` as a click command named ``command``; importing it
lazily keeps ``bsprof --help`` instant and keeps torch, cutlass and plotly out of verbs that do not
need them.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from bsprof.errors import BsprofError

# verb -> (module, one-line help shown by `bsprof --help` without importing the module)
VERBS: dict[str, tuple[str, str]] = {
    "model": ("bsprof.commands.model", "Project what K-loop / epilogue changes do to wall time."),
    "sass": ("bsprof.commands.sass", "Classify SASS: instruction mix, K-loop budget, MMA detail, features."),
    "ncu": ("bsprof.commands.ncu", "Run or read Nsight Compute: metrics, bottleneck verdict, compare."),
    "bench": ("bsprof.commands.bench", "Check and time a bundled kernel against cuBLAS (and DeepGEMM)."),
    "timing": ("bsprof.commands.timing", "Capture per-warp, per-tile phase timing from a bundled kernel."),
    "report": ("bsprof.commands.report", "Render bsprof artifacts into one self-contained HTML page."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in VERBS:
            return None
        module_name, short = VERBS[name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return _unavailable(name, short)
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help from the table, not from the modules: listing verbs must not import them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in VERBS.items()])

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BsprofError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)


def _unavailable(name: str, short: str) -> click.Command:
    @click.command(name=name, help=short, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def cmd(args: tuple[str, ...]) -> None:
        raise BsprofError(f"'bsprof {name}' is not available in this build; update bsprof")

    return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bsprof")
def cli() -> None:
    """bsprof: what a block-scaled GEMM kernel spends its time on, which instructions are overhead,
    and what an optimization would buy before you spend a day on it."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user error is one ``error:`` line and exit code 2, never a traceback."""
    # rich falls back to 80 columns when piped (CI logs, `| less`), which folds every table;
    # a real terminal still reports its own width.
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        os.environ["COLUMNS"] = "140"
    try:
        rc = cli.main(args=argv, prog_name="bsprof", standalone_mode=False)
    except BsprofError as exc:  # raised outside a verb's invoke (e.g. while loading one)
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.UsageError as exc:  # unknown flag, missing value, bad choice
        where = exc.ctx.command_path if exc.ctx is not None else "bsprof"
        click.echo(f"error: {exc.format_message()} (see `{where} --help`)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
