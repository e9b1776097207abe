"""The codebase's own rules, read from the source (issue 13): layering, private names, size.

* No package imports an underscore module or attribute of another of the four packages
  (``featurestore``, ``preprocess``, ``loaders``, ``benchmarks``): what one needs from another
  is public.
* ``featurestore`` imports none of the others; ``preprocess`` and ``loaders`` only
  ``featurestore``; ``benchmarks`` any of them.
* No function outside the tests is longer than 80 lines; no class longer than 300 (issue 17).
  A ported peer script (``examples/`` file opening with ``# Ported from``) is the peer's code
  as written, bar its counted changes: its sizes are the peer's and are not checked.
* No import cycle inside a package, function-local imports and ``from pkg import module``
  included (issue 17): a cycle hidden behind a function-local import is still a cycle.
* Every folder of the four packages is a package whose ``__init__`` docstring says its job.
* Docstring examples are plain code blocks, except the ``>>>`` doctests of the modules of
  :data:`DOCTESTED`, which run here (issue 17).
"""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("featurestore", "preprocess", "loaders", "benchmarks")
ALLOWED = {"featurestore": set(), "preprocess": {"featurestore"},
           "loaders": {"featurestore"}, "benchmarks": set(PACKAGES)}
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 300
#: the modules whose ``>>>`` examples are doctests, run by this file
DOCTESTED = ("featurestore.units",)


def _modules(pkg: str):
    for path in sorted((ROOT / pkg).rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _ported(path: Path) -> bool:
    """Whether ``path`` is a peer's script ported with a counted diff (its header says so)."""
    return path.read_text().startswith("# Ported from")


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
        if _ported(path):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)


@pytest.mark.parametrize("pkg", PACKAGES + ("examples", "scripts"))
def test_no_long_classes(pkg):
    long = []
    for path, tree in _modules(pkg):
        if _ported(path):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_CLASS_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, "\n".join(long)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return ids


def _imports(name: str, is_pkg: bool, tree, modules: set[str]):
    """(line, module) of every module of ``modules`` that module ``name`` imports, wherever the
    import statement is (function bodies included); ``from X import y`` is an import of the
    module ``X.y`` when there is one, else of ``X`` (a package's ``__init__`` then)."""
    skip = _type_checking_only(tree)
    here = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules:
                    yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[:len(here.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in modules:
                    yield node.lineno, sub
                elif base in modules:
                    yield node.lineno, base


def import_graph(pkg: str) -> dict[str, dict[str, int]]:
    """``{module: {imported module of the same package: line}}`` for every module of ``pkg``."""
    trees = {_module_name(path): (path, tree) for path, tree in _modules(pkg)}
    graph = {}
    for name, (path, tree) in trees.items():
        edges = graph.setdefault(name, {})
        for line, target in _imports(name, path.name == "__init__.py", tree, set(trees)):
            if target != name:
                edges.setdefault(target, line)
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycles(pkg):
    graph = import_graph(pkg)
    bad = []
    for comp in import_cycles(graph):
        edges = [f"    {a} -> {b} (line {graph[a][b]})" for a in comp for b in sorted(graph[a])
                 if b in comp]
        bad.append("cycle of " + ", ".join(comp) + ":\n" + "\n".join(edges))
    assert not bad, "\n".join(bad)


def test_import_cycle_check_sees_local_and_module_imports(tmp_path, monkeypatch):
    """The check's own test: a cycle through a function-local ``from pkg import module``."""
    pkg = tmp_path / "cyc"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A package."""\nfrom cyc.a import f\n')
    (pkg / "a.py").write_text("def f():\n    from cyc.sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    (pkg / "c.py").write_text("from cyc import f\n")  # the face, which imports a: no cycle
    (pkg / "d.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from cyc import e\n")
    (pkg / "e.py").write_text("from cyc import d\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    graph = import_graph("cyc")
    assert graph["cyc.a"] == {"cyc.sub.b": 2} and graph["cyc.sub.b"] == {"cyc.a": 1}
    assert graph["cyc.c"] == {"cyc": 1} and graph["cyc.d"] == {}
    assert import_cycles(graph) == [["cyc.a", "cyc.sub.b"]]


def _folders(pkg: str):
    """Every folder of ``pkg`` holding Python files (``__pycache__`` aside)."""
    for d in sorted({p.parent for p in (ROOT / pkg).rglob("*.py")}):
        if "__pycache__" not in d.parts:
            yield d


@pytest.mark.parametrize("pkg", PACKAGES)
def test_every_folder_says_its_job(pkg):
    bad = []
    for d in _folders(pkg):
        init = d / "__init__.py"
        rel = init.relative_to(ROOT)
        if not init.exists():
            bad.append(f"{rel}: missing")
            continue
        doc = (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
        if len(doc.split()) < 3 or doc.split()[0].strip(":.").upper() in ("TODO", "FIXME", "XXX"):
            bad.append(f"{rel}: its docstring does not say the folder's job: {doc[:60]!r}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", DOCTESTED)
def test_doctests_run(module):
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted and not res.failed


def test_no_doctests_that_do_not_run():
    """A ``>>>`` line outside :data:`DOCTESTED` is never run: write it as an ``Example::`` block."""
    bad = []
    for pkg in PACKAGES:
        for path, _ in _modules(pkg):
            if _module_name(path) in DOCTESTED:
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if line.lstrip().startswith(">>>"):
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)
