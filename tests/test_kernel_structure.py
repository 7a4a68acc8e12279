"""The bundled kernels stay readable in parts: no file under bsprof/kernels over 700 lines and no
function (method, nested function) over 120. A kernel that grows past either is split the way
the FP8 family's is (a configuration, a producer, a K-loop, an epilogue, a schedule), with
tests/test_kernel_sass_identity.py showing the split changed no instruction."""

from __future__ import annotations

import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "bsprof" / "kernels"
MAX_FILE_LINES = 700
MAX_FUNCTION_LINES = 120


def _sources() -> list[Path]:
    files = sorted(KERNELS.rglob("*.py"))
    assert len(files) > 10 and any(p.name == "kernel.py" for p in files)
    return files


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function in ``source`` longer than ``limit`` lines, its
    decorators and signature included."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    if child.end_lineno - first + 1 > limit:
                        out.append((name, child.end_lineno - first + 1))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_no_kernel_file_over_700_lines():
    lines = {str(p.relative_to(KERNELS)): len(p.read_text().splitlines()) for p in _sources()}
    long = {name: n for name, n in lines.items() if n > MAX_FILE_LINES}
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"


def test_no_kernel_function_over_120_lines():
    long = {str(p.relative_to(KERNELS)): fns for p in _sources() if (fns := long_functions(p.read_text()))}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_length_check_sees_methods_nested_functions_and_decorators():
    body = "\n".join(f"        x{i} = {i}" for i in range(118))
    method = f"class K:\n    @staticmethod\n    def f():\n{body}\n"
    assert long_functions(method, 119) == [("K.f", 120)] and long_functions(method) == []
    nested = f"def outer():\n    def inner():\n{body}\n        pass\n    return inner\n"
    assert ("outer.inner", 120) in long_functions(nested, 119)
