r"""No string in the package carries the control bytes of an unescaped backslash.

In a non-raw literal, ``\alpha``, ``\beta``, ``\varepsilon`` and ``\frac``
written with one backslash become BEL, BS, VT and FF followed by the rest of the
command, so a formula in a docstring is silently corrupt. Ruff's D301 (enabled in
``pyproject.toml``) asks for a raw docstring wherever one has a backslash; this
test catches the bytes themselves, in any string constant, however they got there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "jurymeter"
# What \a, \b, \v and \f turn into in a non-raw string literal.
CONTROL = {"\x07": r"\a", "\x08": r"\b", "\x0b": r"\v", "\x0c": r"\f"}
MODULES = sorted(PACKAGE.rglob("*.py"))


def _control_bytes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            bad = sorted(CONTROL[c] for c in set(node.value) & CONTROL.keys())
            if bad:
                found.append(f"line {node.lineno}: {', '.join(bad)}")
    return found


def test_the_package_has_modules() -> None:
    assert len(MODULES) > 10, PACKAGE


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_string_constant_holds_control_bytes(path: Path) -> None:
    found = _control_bytes(path)
    assert not found, (
        f"{path.relative_to(PACKAGE)}: string constants hold control bytes of unescaped "
        f'backslashes (write the docstring as r"""..."""): {found}'
    )
