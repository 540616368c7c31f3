"""The ``brutus`` command: parse, call the library, print. Errors become one line and a non-zero exit.

Heavy imports (SQLAlchemy, rich) happen inside the commands, so ``brutus --help`` answers at once.
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from .options import DB_HELP, TENANT_HELP, note_tenant

__all__ = ["cli", "main"]


class _ClosedPipe(Exception):
    """A ``BrokenPipeError`` carried past click, whose own handler of a closed pipe exits 1."""


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:  # a command writing as it reads (show --full) meets it inside click
            raise _ClosedPipe from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__)
@click.option("--db", "db", metavar="URL", default=None, help=f"{DB_HELP} Every command takes it too; its own wins.")
@click.option(
    "--tenant", metavar="NAME", default=None, expose_value=False, callback=note_tenant,
    help=f"{TENANT_HELP} Every command that takes --db takes it too; its own wins.",
)
def cli(db: str | None) -> None:
    """brutus: the compaction-aware session store behind a long-running coding agent."""


# The commands live in their own modules and register themselves on `cli`.
from . import db_commands, io_commands, maintenance_commands, replay_commands, search_commands, session_commands  # noqa: E402

for _module in (db_commands, session_commands, io_commands, maintenance_commands, replay_commands, search_commands):
    _module.register(cli)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning every error into one line on stderr and a non-zero exit
    (``BRUTUS_DEBUG=1`` prints the traceback of any error first). A reader that closed the pipe early
    (``brutus show … | head``) is not an error."""
    from ..errors import BrutusError

    try:
        cli.main(args=argv, prog_name="brutus", standalone_mode=False)
    except (BrokenPipeError, _ClosedPipe):
        return _closed_pipe()
    except click.exceptions.Abort:
        click.echo("brutus: aborted", err=True)
        return 130
    except click.ClickException as exc:
        _debug()
        exc.show()
        return exc.exit_code
    except BrutusError as exc:
        _debug()
        _error(f"brutus: error: {exc}")
        return 1
    except KeyboardInterrupt:
        click.echo("brutus: interrupted", err=True)
        return 130
    except OSError as exc:  # a file or directory the user named: permission, missing, a directory…
        _debug()
        where = f": {exc.filename}" if exc.filename else ""
        _error(f"brutus: error: {exc.strerror or exc}{where}")
        return 1
    except Exception as exc:  # noqa: BLE001  no traceback reaches a user; BRUTUS_DEBUG=1 shows it
        _debug()
        _error(f"brutus: internal error: {type(exc).__name__}: {exc} (set BRUTUS_DEBUG=1 for details)")
        return 2
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _closed_pipe()
    return 0


def _error(line: str) -> None:
    """An error line on stderr: one line for a program reading it; on a terminal, wrapped between words at its
    width (a path or a URL is never split), the lines after the first indented."""
    if sys.stderr.isatty():
        import shutil
        import textwrap

        width = shutil.get_terminal_size().columns
        line = "\n".join(
            textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        )
    click.echo(line, err=True)


def _debug() -> None:
    """With ``BRUTUS_DEBUG`` set, the traceback of the error being handled, on stderr."""
    if os.environ.get("BRUTUS_DEBUG"):
        import traceback

        traceback.print_exc()


def _closed_pipe() -> int:
    """stdout's reader went away: point stdout at /dev/null so the interpreter's final flush is quiet too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
