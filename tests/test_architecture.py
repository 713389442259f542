"""ARCHITECTURE.md's layer table against the imports the code really makes.

Independent reference: the table in ARCHITECTURE.md, parsed from the
markdown; the imports are read from every module's syntax tree (module level,
inside functions, and under ``TYPE_CHECKING`` alike), so neither side is
derived from the other.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "jurymeter"
RESTRICTED = {"prefect", "distributed", "dask", "typer", "rich", "matplotlib"}


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "jurymeter"
    if parts[1] == "render":  # its modules are layers of their own (the package holds a docstring only)
        return f"render.{parts[2]}" if len(parts) > 2 else "render.html"
    if parts[1] == "analyses" and parts[-1] == "command":
        return "analyses.command"
    return parts[1]


def _imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    inner: dict[str, set[str]] = defaultdict(set)
    outer: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(("jurymeter", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        unit = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name == "jurymeter" or name.startswith("jurymeter."):
                    target = _unit(name)
                    if target not in (unit, "jurymeter"):
                        inner[unit].add(target)
                elif name.split(".")[0] in RESTRICTED:
                    outer[unit].add(name.split(".")[0])
    return inner, outer


def _table() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers and the dependency direction", 1)[1].split("\n## ", 1)[0]
    inner: dict[str, set[str]] = {}
    outer: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        unit = cells[0].strip("`")
        inner[unit] = set(re.findall(r"`([\w.]+)`", cells[1]))
        outer[unit] = set(re.findall(r"`([\w.]+)`", cells[2]))
    return inner, outer


def test_every_import_between_units_is_the_one_architecture_md_lists() -> None:
    documented, _ = _table()
    actual, _ = _imports()
    units = {_unit(".".join(("jurymeter", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"))
             for p in PACKAGE.rglob("*.py") if p.read_text().strip()} - {"jurymeter"}
    assert units <= set(documented), f"units missing from the table: {sorted(units - set(documented))}"
    for unit in sorted(documented):
        assert actual.get(unit, set()) == documented[unit], (
            f"{unit}: the code imports {sorted(actual.get(unit, set()))}, ARCHITECTURE.md says {sorted(documented[unit])}"
        )


def test_prefect_dask_typer_rich_and_matplotlib_stay_in_their_units() -> None:
    _, documented = _table()
    _, actual = _imports()
    for unit in sorted(set(documented) | set(actual)):
        assert actual.get(unit, set()) == documented.get(unit, set()), (unit, sorted(actual.get(unit, set())))


def test_the_layers_have_no_cycle() -> None:
    documented, _ = _table()
    seen: dict[str, int] = {}

    def visit(unit: str, path: tuple[str, ...]) -> None:
        if seen.get(unit) == 2:
            return
        assert seen.get(unit) != 1, f"import cycle: {' -> '.join((*path, unit))}"
        seen[unit] = 1
        for target in documented.get(unit, ()):
            visit(target, (*path, unit))
        seen[unit] = 2

    for unit in documented:
        visit(unit, ())


def test_the_wheel_installs_no_top_level_flows_package() -> None:
    import tomllib

    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert build["packages"] == ["src/jurymeter"]
    assert (PACKAGE / "py.typed").exists()


def test_the_public_api_resolves() -> None:
    import jurymeter

    for name in jurymeter.__all__:
        assert getattr(jurymeter, name) is not None, name
