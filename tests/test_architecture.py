"""ARCHITECTURE.md's layer table against the imports the code really makes.

Independent reference: the table in ARCHITECTURE.md, parsed from the
markdown; the imports are read from every module's syntax tree, so neither
side is derived from the other.

What counts as an import (:func:`module_graph`): every ``import`` and
``from ... import`` statement anywhere in a module, at module level, inside a
function and under ``if TYPE_CHECKING:`` alike, absolute or relative (a
relative one is resolved against the module's package; ruff's
``ban-relative-imports = "all"`` keeps them out, this test would still see one).
A function's import is a dependency all the same (it runs when the function is
called, and a cycle through it is a tangle deferred, not removed); a
type-checking import is one too (the types say what the module knows, and mypy
reads it). An import names the module it loads, never its parent packages
(``import a.b.c`` is an edge to ``a.b.c`` only): a package's ``__init__``
runs first, but that is how Python loads modules, not a dependency the code
chose; ``from a.b import c`` is an edge to ``a.b.c`` when that is a module,
else to ``a.b``.

What fails: a unit importing a unit its row of the table does not list (or the
table listing one it does not import), any import that goes up the table (a
row may import only rows above it: the table is written bottom up), and any
cycle between modules, inside a unit or across units.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "jurymeter"
RESTRICTED = {"prefect", "distributed", "dask", "typer", "rich", "matplotlib"}


def _module_name(path: Path, package_dir: Path, package: str) -> str:
    return ".".join((package, *path.relative_to(package_dir).with_suffix("").parts)).removesuffix(".__init__")


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement loads (relative ones resolved); ``from m import n`` gives ``m.n``
    and ``m`` (the caller keeps whichever is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        # The package a relative import starts from: the module's own package (itself if it is one).
        parts = module.split(".") if is_package else module.split(".")[:-1]
        base = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
        stem = ".".join((*base, node.module)) if node.module else ".".join(base)
    else:
        stem = node.module or ""
    return [stem, *(f"{stem}.{alias.name}" for alias in node.names)]


def module_graph(package_dir: Path, package: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Every module of the package -> the modules of the package it imports, and -> the restricted
    outside libraries it imports (see the module docstring for what counts)."""
    paths = {_module_name(p, package_dir, package): p for p in package_dir.rglob("*.py")}
    inner: dict[str, set[str]] = {m: set() for m in paths}
    outer: dict[str, set[str]] = defaultdict(set)
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported_names(node, module, is_package)
            if isinstance(node, ast.ImportFrom):
                stem, members = names[0], names[1:]
                names = [m for m in members if m in paths] or [stem]
                if len(names) < len(members) and stem not in names:
                    names.append(stem)  # `from pkg import module, function`: both
            for name in names:
                if name == package or name.startswith(f"{package}."):
                    while name not in paths and "." in name:  # `import a.b.c` of a name that is no module
                        name = name.rsplit(".", 1)[0]
                    if name != module:
                        inner[module].add(name)
                elif name.split(".")[0] in RESTRICTED:
                    outer[module].add(name.split(".")[0])
    return inner, outer


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's cycles: each strongly connected component of more than one node (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "jurymeter"
    if parts[1] == "render":  # its modules are layers of their own (the package holds a docstring only)
        return f"render.{parts[2]}" if len(parts) > 2 else "render.html"
    if parts[1] == "analyses" and parts[-1] == "command":
        return "analyses.command"
    return parts[1]


def _unit_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules, libraries = module_graph(PACKAGE, "jurymeter")
    inner: dict[str, set[str]] = defaultdict(set)
    outer: dict[str, set[str]] = defaultdict(set)
    for module, targets in modules.items():
        unit = _unit(module)
        inner[unit] |= {_unit(t) for t in targets} - {unit, "jurymeter"}
        outer[unit] |= libraries.get(module, set())
    return inner, outer


def _table() -> tuple[list[str], dict[str, set[str]], dict[str, set[str]]]:
    """The table's units bottom up, what each may import of jurymeter, and its restricted libraries."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers and the dependency direction", 1)[1].split("\n## ", 1)[0]
    order: list[str] = []
    inner: dict[str, set[str]] = {}
    outer: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        unit = cells[0].strip("`")
        order.append(unit)
        inner[unit] = set(re.findall(r"`([\w.]+)`", cells[1]))
        outer[unit] = set(re.findall(r"`([\w.]+)`", cells[2]))
    return order, inner, outer


def test_every_import_between_units_is_the_one_architecture_md_lists() -> None:
    _, documented, _ = _table()
    actual, _ = _unit_graph()
    units = {_unit(_module_name(p, PACKAGE, "jurymeter")) for p in PACKAGE.rglob("*.py") if p.read_text().strip()}
    units -= {"jurymeter"}
    assert units <= set(documented), f"units missing from the table: {sorted(units - set(documented))}"
    for unit in sorted(documented):
        assert actual.get(unit, set()) == documented[unit], (
            f"{unit}: the code imports {sorted(actual.get(unit, set()))}, ARCHITECTURE.md says {sorted(documented[unit])}"
        )


def test_prefect_dask_typer_rich_and_matplotlib_stay_in_their_units() -> None:
    _, _, documented = _table()
    _, actual = _unit_graph()
    for unit in sorted(set(documented) | set(actual)):
        assert actual.get(unit, set()) == documented.get(unit, set()), (unit, sorted(actual.get(unit, set())))


def upward_imports(graph: dict[str, set[str]], order: list[str]) -> list[str]:
    """Every edge of ``graph`` from a unit to one of its own row or a row after it (``order`` is bottom up)."""
    row = {unit: k for k, unit in enumerate(order)}
    return sorted(f"{unit} -> {target}" for unit, targets in graph.items() for target in targets
                  if unit in row and target in row and row[target] >= row[unit])


def test_no_import_goes_up_the_layer_table() -> None:
    order, _, _ = _table()
    actual, _ = _unit_graph()
    upward = upward_imports(actual, order)
    assert not upward, f"imports up the table (a row imports only rows above it): {upward}"


def test_no_cycle_between_modules() -> None:
    modules, _ = module_graph(PACKAGE, "jurymeter")
    found = cycles(modules)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_graph_sees_relative_function_and_type_checking_imports_and_cycles(tmp_path: Path) -> None:
    """The test of the test: a tiny package whose every kind of import it must see, and whose cycle it must report."""
    package = tmp_path / "toy"
    (package / "low").mkdir(parents=True)
    (package / "high").mkdir()
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "high" / "__init__.py").write_text("from toy.high import view\n")
    # An upward import written relatively, inside a function: low.base -> high.view.
    (package / "low" / "base.py").write_text("def f():\n    from ..high import view\n    return view\n")
    # A 2-module cycle inside one unit, one side only for type checking.
    (package / "low" / "a.py").write_text("from . import b\n")
    (package / "low" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.low.a import thing\n"
    )
    (package / "high" / "view.py").write_text("import toy.low.base\nimport typer\nfrom .. import low\n")
    graph, libraries = module_graph(package, "toy")
    assert graph["toy.low.base"] == {"toy.high.view"}
    assert graph["toy.low.a"] == {"toy.low.b"}
    assert graph["toy.low.b"] == {"toy.low.a"}
    assert graph["toy.high.view"] == {"toy.low.base", "toy.low"}
    assert graph["toy.high"] == {"toy.high.view"}
    assert libraries["toy.high.view"] == {"typer"}
    assert cycles(graph) == [["toy.high.view", "toy.low.base"], ["toy.low.a", "toy.low.b"]]
    units = {".".join(m.split(".")[:2]): set() for m in graph}
    for module, targets in graph.items():
        unit = ".".join(module.split(".")[:2])
        units[unit] |= {".".join(t.split(".")[:2]) for t in targets} - {unit}
    assert upward_imports(units, ["toy.low", "toy.high"]) == ["toy.low -> toy.high"]
    assert cycles({"x": {"y"}, "y": set()}) == []


@pytest.mark.parametrize(("level", "expected"), [(1, "jurymeter.stats.x"), (2, "jurymeter.x"), (3, "x")])
def test_a_relative_import_resolves_against_its_package(level: int, expected: str) -> None:
    node = ast.ImportFrom(module="x", names=[ast.alias(name="y")], level=level)
    assert _imported_names(node, "jurymeter.stats.ranking", is_package=False)[0] == expected


def test_the_wheel_installs_no_top_level_flows_package() -> None:
    import tomllib

    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert build["packages"] == ["src/jurymeter"]
    assert (PACKAGE / "py.typed").exists()


def test_the_public_api_resolves() -> None:
    import jurymeter

    for name in jurymeter.__all__:
        assert getattr(jurymeter, name) is not None, name
