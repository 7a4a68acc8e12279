"""The bsprof command line: a thin click group whose verbs load only when they run.

Each verb lives in ``bsprof/commands/<verb>.py`` as a click command named ``command``; importing it
lazily keeps ``bsprof --help`` instant and keeps torch, cutlass and plotly out of verbs that do not
need them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading

import click

from bsprof.errors import BsprofError
from bsprof.gpu import NoGpu

# verb -> (module, one-line help shown by `bsprof --help` without importing the module)
VERBS: dict[str, tuple[str, str]] = {
    "model": ("bsprof.commands.model", "Project what K-loop / epilogue changes do to wall time."),
    "sass": ("bsprof.commands.sass", "Classify SASS: instruction mix, K-loop budget, MMA detail, features."),
    "ncu": ("bsprof.commands.ncu", "Run or read Nsight Compute: metrics, bottleneck verdict, compare."),
    "bench": ("bsprof.commands.bench", "Check and time a bundled kernel against cuBLAS (and DeepGEMM)."),
    "timing": ("bsprof.commands.timing", "Capture per-warp, per-tile phase timing from a bundled kernel."),
    "report": ("bsprof.commands.report", "Render bsprof artifacts into one self-contained HTML page."),
}

# verb -> how it reads what a GPU host stored, on any machine: named with the GPU a capture lacks
STORED_WAY: dict[str, str] = {
    "timing": "or read a stored capture here with `bsprof timing --from DIR`",
    "ncu": "or read a stored report here with `bsprof ncu --report FILE`",
}


# Old option spellings kept for one release: verb -> {old: new}. Every verb spells its output
# `-o/--output` and its bundled kernel `--kernel SPEC`; an old spelling still works and says so.
DEPRECATED_OPTIONS: dict[str, dict[str, str]] = {
    "sass": {"--out": "--output"},
}


def undeprecate(verb: str, args: list[str]) -> list[str]:
    """``args`` with old option spellings replaced by today's, one note on stderr per spelling used."""
    renames = DEPRECATED_OPTIONS.get(verb)
    if not renames:
        return args
    out: list[str] = []
    noted: set[str] = set()
    for i, arg in enumerate(args):
        if arg == "--":  # what follows is arguments, not options
            return out + args[i:]
        name, eq, value = arg.partition("=")
        if name in renames:
            if name not in noted:
                click.echo(
                    f"note: `bsprof {verb} {name}` is deprecated and goes in the next release; use {renames[name]}",
                    err=True,
                )
                noted.add(name)
            arg = renames[name] + eq + value
        out.append(arg)
    return out


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in VERBS:
            return None
        return importlib.import_module(VERBS[name][0]).command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, cmd, rest = super().resolve_command(ctx, args)
        # click blames a verb's missing option value on the group (its context is not pushed yet);
        # remembering the verb lets the error point to the verb's own help
        ctx.meta["bsprof.verb"] = name
        return name, cmd, undeprecate(name or "", rest)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help from the table, not from the modules: listing verbs must not import them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in VERBS.items()])

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NoGpu as exc:
            way = STORED_WAY.get(ctx.meta.get("bsprof.verb") or "")
            click.echo(f"error: {exc}{', ' + way if way else ''}", err=True)
            ctx.exit(exc.exit_code)
        except BsprofError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:
            verb = ctx.meta.get("bsprof.verb")
            if verb and (exc.ctx is None or exc.ctx is ctx):
                # raised while parsing the verb's options, before its context existed
                exc.ctx = click.Context(self.get_command(ctx, verb), info_name=verb, parent=ctx)
            raise


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="bsprof")
def cli() -> None:
    """bsprof: what a block-scaled GEMM kernel spends its time on, which instructions are overhead,
    and what an optimization would buy before you spend a day on it."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: every user error is one ``error:`` line and exit code 2, never a traceback."""
    # piped (CI logs, `| less`): laid out for $COLUMNS, else PIPED_WIDTH, by the same rules as a
    # terminal (every view fits its width); a real terminal still reports its own width.
    # A COLUMNS that is no width (0, text) counts as unset: rich lays a view out for 0 columns as
    # nothing at all.
    columns = os.environ.get("COLUMNS", "").strip()
    if not (columns.isdigit() and int(columns) > 0):
        os.environ.pop("COLUMNS", None)
        if not sys.stdout.isatty():
            from bsprof.reports.term import PIPED_WIDTH

            os.environ["COLUMNS"] = str(PIPED_WIDTH)
    with _terminate_unwinds():
        _main(argv)


@contextlib.contextmanager
def _terminate_unwinds():
    """While a verb runs, SIGTERM unwinds it as an interrupt does: its hidden results directory and
    temporary files are removed on the way out (the default action ends the process with no
    cleanup). The handler the caller had comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame) -> None:
    raise SystemExit(128 + signum)


def _main(argv: list[str] | None) -> None:
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
    except MemoryError:
        # the last resort: inputs are capped where they are read (bsprof.io), but a machine with less
        # memory than an input's analysis needs still deserves one line
        click.echo(
            "error: out of memory; free memory or run on a larger machine, or lower BSPROF_MAX_INPUT_BYTES "
            "so an input this large is refused before it is read",
            err=True,
        )
        sys.exit(2)
    sys.exit(rc if isinstance(rc, int) else 0)
