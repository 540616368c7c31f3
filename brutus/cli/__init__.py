"""The ``brutus`` command line."""

import sys


def main() -> None:
    """Console-script entry point."""
    from .app import main as run

    sys.exit(run())


__all__ = ["main"]
