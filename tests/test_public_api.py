"""The public surface: a sorted ``__all__`` whose names all resolve, and a fast ``import brutus``."""

from __future__ import annotations

import subprocess
import sys

import brutus


def test_all_is_sorted_and_resolves() -> None:
    assert brutus.__all__ == sorted(brutus.__all__)
    for name in brutus.__all__:
        assert getattr(brutus, name) is not None


def test_errors_form_one_tree() -> None:
    for name in ("NotFound", "InvalidInput", "InvalidTransition", "SchemaOutOfDate", "DatabaseError", "CompactionInProgress", "CompactionStalled"):
        assert issubclass(getattr(brutus, name), brutus.BrutusError)


def test_import_brutus_does_not_import_heavy_dependencies() -> None:
    code = "import sys, brutus; print(' '.join(m for m in ('sqlalchemy', 'anthropic', 'tiktoken', 'rich', 'pydantic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_type_checkers_see_every_top_level_name() -> None:
    """``brutus/__init__.py`` imports its names lazily; an ``if TYPE_CHECKING:`` block imports each from the
    module ``_EXPORTS`` names, so type checkers and IDEs resolve them (py.typed ships)."""
    import ast
    from pathlib import Path

    import brutus

    tree = ast.parse(Path(brutus.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    seen = {
        alias.name: "brutus" + ("." + node.module if node.module else "")
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == brutus._EXPORTS
