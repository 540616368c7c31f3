"""What the commands share: the ``--db``, ``--tenant``, ``--read-url`` and ``--json`` options, opening the
store, printing JSON.

Its own module, so the command modules import it and ``app`` imports them, with no cycle.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = [
    "DB_HELP",
    "TENANT_HELP",
    "command_tenant",
    "db_option",
    "json_option",
    "note_tenant",
    "open_store",
    "print_json",
    "read_url_option",
    "write_output",
]

DB_HELP = "Database URL (default: $BRUTUS_DATABASE_URL, else a SQLite file in the user data dir)."
TENANT_HELP = "Work in this tenant's sessions only (default: $BRUTUS_TENANT, else none)."
_TENANT = "brutus.tenant"  # where the given tenant is kept: the context's meta, which every nested context shares


def db_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--db`` and ``--tenant`` on a command; when the command is not given one, the one given before the
    command (``brutus --db URL --tenant NAME COMMAND``) counts. The tenant reaches ``open_store`` through
    ``command_tenant``, so no command takes it as an argument."""
    fn = click.option(
        "--tenant", metavar="NAME", default=None, expose_value=False, help=TENANT_HELP, callback=note_tenant
    )(fn)
    return click.option("--db", "db", metavar="URL", default=None, help=DB_HELP, callback=_group_db)(fn)


def _group_db(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return value if value is not None else ctx.find_root().params.get("db")


def read_url_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--read-url`` on the reading commands that may use a replica (list, search, stats, export)."""
    help = "A PostgreSQL read replica of --db to read from (default: $BRUTUS_READ_URL)."
    return click.option("--read-url", "read_url", metavar="URL", envvar="BRUTUS_READ_URL", default=None, help=help)(fn)


def note_tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """Keep a given ``--tenant`` (the command's, given after the group's, wins)."""
    if value is not None:
        ctx.meta[_TENANT] = value


def command_tenant() -> str | None:
    """The tenant the command works in: ``--tenant``, else ``$BRUTUS_TENANT``, else None (empty is none)."""
    context = click.get_current_context(silent=True)
    given = context.meta.get(_TENANT) if context is not None else None
    return (given if given is not None else os.environ.get("BRUTUS_TENANT")) or None


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")(fn)


def open_store(db: str | None, *, read_only: bool = False, create: bool = True, read_url: str | None = None) -> Any:
    """The store at ``--db``, in ``--tenant``'s sessions. Reading commands open it ``read_only``: never created,
    migrated or written. Commands that work on what is there pass ``create=False``; only import, replay and
    demo create one. ``read_url``: ``--read-url``, a replica for the reads that may use one."""
    from ..store import SessionStore

    return SessionStore.open(db, read_only=read_only, create=create, read_url=read_url, tenant=command_tenant())


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def write_output(data: bytes, output: Path | None) -> None:
    """``data`` to ``output``, or to stdout (as bytes: the text is the caller's encoding) when None. Never
    over a file of a database in use (``db.files``)."""
    if output is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        return
    from ..db.files import refuse_database_file

    refuse_database_file(output, doing="write")
    try:
        output.write_bytes(data)
    except OSError as exc:
        from ..errors import InvalidInput

        raise InvalidInput(f"cannot write {output}: {exc.strerror or exc}") from None


def open_output(output: Path) -> Any:
    """``output`` opened to write bytes as they come (a streamed export or transcript), never a file of a
    database in use (``db.files``)."""
    from ..db.files import refuse_database_file
    from ..errors import InvalidInput

    refuse_database_file(output, doing="write")
    try:
        return output.open("wb")
    except OSError as exc:
        raise InvalidInput(f"cannot write {output}: {exc.strerror or exc}") from None
