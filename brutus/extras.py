"""The optional parts of brutus: which extra brings which module, and the error that says what to install.

brutus is published on the package index as ``brutus-store`` (``brutus`` there is an unrelated project); the
import package and the command are ``brutus``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from .errors import MissingDependency

__all__ = ["DISTRIBUTION", "pip_install", "require"]

DISTRIBUTION = "brutus-store"  # [project] name in pyproject.toml


def pip_install(*extras: str) -> str:
    """The command that installs brutus with ``extras``: ``pip install 'brutus-store[postgres,async]'``."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'"


def require(what: str, modules: Mapping[str, str]) -> None:
    """Import each of ``modules`` (module name → the extra that brings it). Any missing: ``MissingDependency``
    saying that ``what`` needs them, with the pip line of their extras."""
    missing: dict[str, str] = {}
    for name, extra in modules.items():
        try:
            importlib.import_module(name)
        except ImportError:
            missing[name] = extra
    if missing:
        raise MissingDependency(f"{what} needs {' and '.join(missing)}: {pip_install(*sorted(set(missing.values())))}")
