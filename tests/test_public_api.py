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
