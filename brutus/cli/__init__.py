"""The ``brutus`` command line: the top floor, built on the stores, the importers and replay; a command is
one function in the ``*_commands.py`` module of its kind, which registers it on ``app.cli``."""

import sys


def main() -> None:
    """Console-script entry point."""
    from .app import main as run

    sys.exit(run())


__all__ = ["main"]
