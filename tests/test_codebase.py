"""The codebase's own rules, read from the source (issue 13): layering, private names, size.

* No package imports an underscore module or attribute of another of the four packages
  (``featurestore``, ``preprocess``, ``loaders``, ``benchmarks``): what one needs from another
  is public.
* ``featurestore`` imports none of the others; ``preprocess`` and ``loaders`` only
  ``featurestore``; ``benchmarks`` any of them.
* No function outside the tests is longer than 80 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("featurestore", "preprocess", "loaders", "benchmarks")
ALLOWED = {"featurestore": set(), "preprocess": {"featurestore"},
           "loaders": {"featurestore"}, "benchmarks": set(PACKAGES)}
MAX_FUNCTION_LINES = 80


def _modules(pkg: str):
    for path in sorted((ROOT / pkg).rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _cross_imports(pkg: str):
    """(file:line, imported package, dotted name) of every import of another package."""
    for path, tree in _modules(pkg):
        rel = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    if top in PACKAGES and top != pkg:
                        yield f"{rel}:{node.lineno}", top, a.name
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top = node.module.split(".")[0]
                if top in PACKAGES and top != pkg:
                    for a in node.names:
                        yield f"{rel}:{node.lineno}", top, f"{node.module}.{a.name}"


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_private_names_across_packages(pkg):
    bad = [f"{where} imports {name}" for where, _, name in _cross_imports(pkg) if _private(name)]
    assert not bad, "\n".join(bad)


def _private_defs(pkg: str) -> set[str]:
    """Underscore names a package defines: functions, methods and ``self._x`` attributes."""
    names = set()
    for _, tree in _modules(pkg):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if _private(n)}


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_private_attributes_of_other_packages(pkg):
    """``obj._name`` where only another package defines ``_name`` (store._ntype, F._rows)."""
    own = _private_defs(pkg)
    theirs = set().union(*(_private_defs(p) for p in ALLOWED[pkg] if p != pkg)) - own
    bad = []
    for path, tree in _modules(pkg):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in theirs:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_layering(pkg):
    bad = [f"{where} imports {name}" for where, top, name in _cross_imports(pkg)
           if top not in ALLOWED[pkg]]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("pkg", PACKAGES + ("examples", "scripts"))
def test_no_long_functions(pkg):
    long = []
    for path, tree in _modules(pkg):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)
