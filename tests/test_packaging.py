"""Every package under brutus/ is listed for the wheel, and the migrations ship inside it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_packaged() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "brutus").rglob("__init__.py")
        if "__pycache__" not in path.parts
    }
    assert found <= listed, f"missing from pyproject packages: {sorted(found - listed)}"
    assert {"brutus._migrations", "brutus._migrations.versions"} <= listed
    assert (ROOT / "migrations" / "env.py").is_file()


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: type checkers read brutus's annotations only when ``py.typed`` ships in the package."""
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["brutus"]
    assert (ROOT / "brutus" / "py.typed").is_file()
