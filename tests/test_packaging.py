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
