"""The floors of the package hold: data flows artifact -> analyzers -> result -> presentation -> verb,
and no module imports a room above its own.

Imports are read with ``ast`` (every ``import`` and ``from ... import``, at module level or inside a
function, since a lazy import is still a dependency), so the test needs neither a GPU nor any of
the heavy packages the modules import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bsprof"

# room -> rooms it must never import (docs/architecture.md draws the floors)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "analyzers": ("profile", "kernels", "reports", "commands", "cli"),
    "reports": ("profile", "kernels", "commands", "cli"),
    "profile": ("commands", "reports", "cli"),
    "kernels": ("profile", "reports", "commands", "cli"),
    # the ground floor: every room may use these, so they use no room
    "artifacts": ("analyzers", "profile", "kernels", "reports", "commands", "cli", "gpu"),
    "gpu": ("analyzers", "profile", "kernels", "reports", "commands", "cli", "artifacts"),
    "io": ("analyzers", "profile", "kernels", "reports", "commands", "cli", "gpu", "artifacts"),
    "errors": ("analyzers", "profile", "kernels", "reports", "commands", "cli", "gpu", "io", "artifacts"),
    "fmt": ("analyzers", "profile", "kernels", "reports", "commands", "cli", "gpu", "io", "artifacts"),
}


def _room(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
            # `from bsprof import reports` names the room in the alias, not the module
            if mod == "bsprof":
                found += [(node.lineno, f"bsprof.{alias.name}") for alias in node.names]
    return found


def _target_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "bsprof" or len(parts) < 2:
        return None
    return parts[1]


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_package_has_the_rooms_the_floors_name():
    rooms = {_room(p) for p in _sources()}
    for room in FORBIDDEN:
        assert room in rooms, f"bsprof/{room} is gone; update FORBIDDEN and docs/architecture.md"


@pytest.mark.parametrize("room", sorted(FORBIDDEN), ids=lambda r: f"bsprof.{r}")
def test_no_import_runs_up_a_floor(room: str):
    bad = []
    for path in _sources():
        if _room(path) != room:
            continue
        for line, module in _imports(path):
            target = _target_room(module)
            if target in FORBIDDEN[room]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert not bad, f"bsprof/{room} must not import {', '.join(FORBIDDEN[room])}:\n" + "\n".join(bad)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """A floors test that cannot fail is no test: the reader must catch the forms a violation takes."""
    src = tmp_path / "bsprof" / "analyzers" / "x" / "y.py"
    src.parent.mkdir(parents=True)
    src.write_text(
        "def f():\n    from bsprof.profile import gpu\n"
        "from ...reports import page\nfrom bsprof import commands\nimport bsprof.kernels.api\n"
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "bsprof"
    try:
        rooms = [_target_room(m) for _, m in _imports(src)]
    finally:
        PACKAGE = saved
    assert {"profile", "reports", "commands", "kernels"} <= set(rooms)
