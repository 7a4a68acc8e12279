"""Load a bsprof timing table (CSV or Parquet, or a results directory holding one) and check it
against ``timing.schema`` before the model trusts it. Every problem is one BsprofError line."""

from __future__ import annotations

import os
from pathlib import Path

from bsprof.analyzers.timing.schema import COLUMNS, INT_COLUMNS, PHASES, REQUIRED_PHASES, ROLES
from bsprof.errors import BsprofError

SCHEMA_HINT = "see docs/model.md (timing table schema)"


def resolve(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in ("timing.parquet", "timing.csv"):
            if os.path.lexists(p / name):
                from bsprof.io import check_input

                check_input(p / name)  # a FIFO or device by that name is refused by name, unread
                return p / name
        raise BsprofError(
            f"{p} holds no timing.parquet or timing.csv; give a timing table or a directory "
            "written by `bsprof timing -o DIR`"
        )
    if not os.path.lexists(p):
        raise BsprofError(
            f"timing table {p} does not exist; give a .parquet/.csv file or a `bsprof timing` results dir"
        )
    from bsprof.io import check_input

    check_input(p, fix="give a .parquet/.csv file or a `bsprof timing` results dir")  # a FIFO is refused, unread
    if p.suffix.lower() not in (".parquet", ".csv"):
        raise BsprofError(f"timing table {p} is neither .parquet nor .csv; convert it or give a results dir")
    return p


def load(path: str | os.PathLike, needed_by: str = "the model"):
    """The validated timing table at ``path`` (file or results directory); ``needed_by`` names
    what reads it, for the message about a missing role or phase."""
    import pandas as pd

    p = resolve(path)
    try:
        t = pd.read_parquet(p) if p.suffix.lower() == ".parquet" else pd.read_csv(p)
    except pd.errors.EmptyDataError:
        raise BsprofError(f"timing table {p} is empty; capture again with `bsprof timing`") from None
    except Exception as exc:
        raise BsprofError(
            f"cannot read timing table {p} ({type(exc).__name__}); is it a bsprof timing file? {SCHEMA_HINT}"
        ) from None
    return validate(t, name=str(p), needed_by=needed_by)


def validate(table, name: str = "timing table", needed_by: str = "the model"):
    """Check columns, emptiness, numbers, roles, phases and durations; returns the table with its
    integer columns as int64 (a copy when anything had to be converted). ``needed_by`` names what
    needs the required roles and phases (the model, the timing summary)."""
    import pandas as pd

    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise BsprofError(
            f"{name} lacks column(s) {', '.join(missing)}; a timing table needs {', '.join(COLUMNS)} ({SCHEMA_HINT})"
        )
    if len(table) == 0:
        raise BsprofError(f"{name} has no rows; capture again with `bsprof timing`")
    from bsprof.analyzers.timing.checks import check_labels, check_values

    check_labels(table, name)
    t = table
    for c in INT_COLUMNS:
        if not pd.api.types.is_integer_dtype(t[c]):
            num = pd.to_numeric(t[c], errors="coerce").astype("float64")
            # inf passes round(); beyond 2**62 int64 sums would wrap
            bad = num.isna() | (num != num.round()) | ~(num.abs() < 2.0**62)
            if bad.any():
                i = int(bad.to_numpy().nonzero()[0][0])
                val = t[c].iloc[i]
                val = val.item() if hasattr(val, "item") else val  # numpy's repr would say np.float64(nan)
                raise BsprofError(
                    f"{name}: column {c!r} row {i} is {val!r}, not an integer cycle count; "
                    "fix or drop that row (times are integer cycles)"
                )
            if t is table:
                t = table.copy()
            t[c] = num.astype("int64")
    roles = set(t["role"].astype(str).unique())
    unknown = sorted(roles - set(ROLES))
    if unknown:
        raise BsprofError(f"{name}: unknown role(s) {', '.join(unknown)}; roles are {', '.join(ROLES)}")
    for role in REQUIRED_PHASES:
        if role not in roles:
            raise BsprofError(
                f"{name} has no {role!r} rows; {needed_by} needs both the mma and the epilogue "
                "role (was the recorder enabled for every warp role?)"
            )
    for role in roles:
        have = set(t.loc[t["role"] == role, "phase"].astype(str).unique())
        odd = sorted(have - set(PHASES[role]))
        if odd:
            raise BsprofError(
                f"{name}: role {role!r} has unknown phase(s) {', '.join(odd)}; its phases are {', '.join(PHASES[role])}"
            )
        lack = [ph for ph in REQUIRED_PHASES.get(role, ()) if ph not in have]
        if lack:
            raise BsprofError(
                f"{name} has no {role} {'/'.join(lack)} rows; {needed_by} needs them "
                f"(required phases: {', '.join(f'{r}.{p}' for r, ps in REQUIRED_PHASES.items() for p in ps)})"
            )
    check_values(t, name)
    return t
