"""Assemble the report: discover runs, render each section per run, lay them out, write atomically."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bsprof.artifacts import KINDS, Run
from bsprof.errors import BsprofError
from bsprof.fmt import plural
from bsprof.io import check_input
from bsprof.reports.page import Row, Section, note, render_page
from bsprof.reports.runs import discover


def _sections() -> list[tuple[str, str, Callable[[Run], Section | None]]]:
    # imported here: each section module pulls plotly / pandas only when a report is built
    from bsprof.reports import sec_ceiling, sec_model, sec_ncu, sec_sass, sec_summary, sec_timing, sec_validation

    return [
        ("summary", "Summary", sec_summary.render),
        ("verdict", "Bottleneck verdict", sec_ncu.verdict),
        ("sol", "Speed of light", sec_ncu.sol),
        ("stalls", "Warp stalls", sec_ncu.stalls),
        ("sass-mix", "SASS instruction mix per region", sec_sass.mix),
        ("mma-gaps", "K-loop: instructions between MMA issues", sec_sass.mma_gaps),
        ("timing", "Per-phase timing", sec_timing.distributions),
        ("timeline", "Per-warp timeline", sec_timing.timeline),
        ("model", "Model projection", sec_model.heatmap),
        ("validation", "Model validation: projected vs measured", sec_validation.scatter),
        ("ceiling", "Epilogue shared-path ceiling", sec_ceiling.curves),
    ]


@dataclass
class ReportInfo:
    """What went into a report (printed by the CLI, asserted by tests)."""

    runs: list[Run]
    sections: dict[str, list[str]] = field(default_factory=dict)  # section id -> run labels that had data
    failed: dict[str, str] = field(default_factory=dict)  # "section/run" -> error line
    notes: list[str] = field(default_factory=list)  # page-level warnings worth a line on the console
    figures: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def console_lines(self, out: Path) -> list[tuple[str, bool]]:
        """What the verb prints after writing ``out``: (line, to stderr), runs and sections first,
        then every warning and skipped input, then what was written."""
        lines = [(f"{run.label}: {run.root} ({', '.join(run.kinds) or 'no artifacts'})", False) for run in self.runs]
        lines += [(f"  section {sid}: {', '.join(who)}", False) for sid, who in self.sections.items()]
        lines += [(f"  warning: {line}", True) for line in self.notes]
        lines += [(f"  warning: {key}: {line}", True) for key, line in self.failed.items()]
        lines += [(f"  skipped: {run.label}: {p}", True) for run in self.runs for p in run.problems]
        lines.append(
            (f"wrote {out} ({self.bytes / 1e6:.1f} MB, {plural(self.figures, 'figure')}, {self.seconds:.2f} s)", False)
        )
        return lines


def _safe(fn: Callable[[Run], Section | None], run: Run, sid: str, title: str, info: ReportInfo) -> Section | None:
    """A section that throws becomes a clearly marked warning on the page, never a traceback."""
    try:
        return fn(run)
    except Exception as exc:  # noqa: BLE001 - the page must survive any one producer's surprise
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        info.failed[f"{sid}/{run.label}"] = line
        return Section(
            sid,
            title,
            [note(f"this section could not be rendered from {run.label}'s artifacts: {line}", "warning")],
            level="warning",
        )


def _problems_section(runs: list[Run]) -> Section | None:
    lines = [f"{run.label}: {p}" for run in runs for p in run.problems]
    if not lines:
        return None
    return Section("skipped", "Skipped inputs", [note(line, "warning") for line in lines], level="warning")


def _labels(paths: list[Path], labels: list[str] | None) -> list[str]:
    if labels:
        return labels
    if len(paths) == 2:
        return ["baseline", "optimized"]
    return [p.name or str(p) for p in paths]


def _first_problem(run) -> str:
    """The run's first problem led by its input once: a file given directly is named by its problem
    already (by the short name discovery uses), a directory leads the problems found inside it."""
    if not run.problems:
        return f"{run.root}: no bsprof artifacts"
    problem = run.problems[0]
    if Path(run.root).is_file() and problem.startswith(Path(run.root).name + ":"):
        problem = problem[len(Path(run.root).name) + 1 :].lstrip()
    return problem if problem.startswith(str(run.root)) else f"{run.root}: {problem}"


def section_ids() -> list[str]:
    return ["compare"] + [sid for sid, _, _ in _sections()]


def build(
    paths: list[Path], labels: list[str] | None = None, title: str | None = None, only: set[str] | None = None
) -> tuple[str, ReportInfo]:
    """Render the HTML for one run (or two: baseline, optimized). BsprofError when nothing can be rendered.

    ``only``: render just these section ids (see :func:`section_ids`)."""
    from bsprof.reports import sec_compare

    t0 = time.perf_counter()
    if not paths:
        raise BsprofError("no input: give a results directory (bsprof report DIR) or none for the shipped samples")
    if len(paths) > 2:
        raise BsprofError(
            f"{len(paths)} inputs given; give one run, or two to compare (bsprof report BASELINE OPTIMIZED)"
        )
    for p in paths:
        if not p.exists():
            raise BsprofError(f"{p} does not exist; give a directory a bsprof verb wrote with -o DIR")
        if not p.is_dir():
            check_input(p, fix="give a directory a bsprof verb wrote with -o DIR")  # a FIFO or device: refused, unread
    names = _labels(paths, labels)
    runs = [discover(p, label) for p, label in zip(paths, names)]
    info = ReportInfo(runs=runs)
    empty = [r for r in runs if not r.artifacts]
    if len(empty) == len(runs):
        detail = "; ".join(_first_problem(r) for r in runs)
        raise BsprofError(
            f"nothing to render ({detail}); point bsprof report at a directory written by "
            "a bsprof verb with -o DIR (bsprof ncu/sass/model/timing/bench)"
        )

    rows: list[Row] = []
    problems = _problems_section(runs)
    if problems:
        rows.append(Row(problems.id, problems.title, [("", problems)]))
    for r in empty:
        msg = Section(
            "empty",
            "",
            [note(f"{r.label} ({r.root}) holds no bsprof artifacts; only the other run is shown", "warning")],
            level="warning",
        )
        rows.append(Row(f"empty-{r.label}", f"{r.label}: no artifacts", [("", msg)]))
    if only:
        unknown = sorted(set(only) - set(section_ids()))
        if unknown:
            raise BsprofError(f"unknown section {', '.join(unknown)}; sections: {', '.join(section_ids())}")
    if len(runs) == 2 and not empty:
        try:
            why = sec_compare.mismatch(runs[0], runs[1])
        except Exception:  # noqa: BLE001 - the comparison section itself reports what broke
            why = []
        if why:
            info.notes.append(
                f"{runs[0].label} and {runs[1].label} are runs of different kernels, not compared "
                "cell by cell: " + "; ".join(why)
            )
    if len(runs) == 2 and not empty and (not only or "compare" in only):
        cmp = _safe(lambda _r: sec_compare.render(runs[0], runs[1]), runs[0], "compare", "Baseline vs optimized", info)
        if cmp is not None:
            rows.append(Row("compare", "Baseline vs optimized", [("", cmp)]))
            info.sections["compare"] = [r.label for r in runs]
    for sid, title_, fn in _sections():
        if only and sid not in only:
            continue
        cols = [(r.label, _safe(fn, r, sid, title_, info) if r.artifacts else None) for r in runs]
        present = [label for label, sec in cols if sec is not None]
        if not present:
            continue
        info.sections[sid] = present
        rows.append(Row(sid, title_, cols if len(runs) > 1 else [("", cols[0][1])]))

    try:  # the summary's subject (bench, then the subject ncu launch), not whichever artifact came first
        from bsprof.reports.sec_summary import facts

        ident = facts(runs[0])
    except Exception:  # a title is not worth failing the page for
        ident = {}
    what = " · ".join(str(ident[k])[:80] for k in ("kernel", "device") if k in ident) or str(runs[0].root)
    page_title = title or ("bsprof report: " + (" vs ".join(r.label for r in runs) if len(runs) > 1 else what))
    kinds = ", ".join(f"{r.label}: {', '.join(r.kinds) or 'none'}" for r in runs)
    html = render_page(page_title, f"artifacts — {kinds}", rows)
    info.figures = html.count('class="bsprof-fig"')
    info.bytes = len(html.encode())
    info.seconds = time.perf_counter() - t0
    return html, info


def write(html: str, out: Path) -> Path:
    """Write the page to ``out`` by bsprof's output policy (bsprof.io: atomic for a file, through
    for a device or FIFO, never over a file bsprof did not write; a new file gets the mode a plain
    open() gives, an old one keeps its own)."""
    from bsprof.io import write_output_file

    path = write_output_file(out, html)
    return path


__all__ = ["build", "write", "ReportInfo", "KINDS"]
