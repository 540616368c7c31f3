"""Schema migrations, driven programmatically: where the scripts are, which revision a database is at,
upgrade / downgrade under a lock, and the check ``SessionStore.open(auto_migrate=False)`` makes.

Concurrent upgrades are serialized: on SQLite the migration runs inside ``BEGIN IMMEDIATE``, on PostgreSQL
under a transaction-scoped advisory lock, and alembic reads the current revision inside that transaction,
so a second process that waited finds the schema at head and does nothing.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from ..errors import DatabaseError, InvalidInput, NoDatabase, SchemaOutOfDate
from .engine import WRITE

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = [
    "connection_reason",
    "current_revision",
    "downgrade",
    "head_revision",
    "migrations_dir",
    "prepare_schema",
    "revision_of",
    "upgrade",
]

_ADVISORY_LOCK_KEY = 0x6272_7574  # "brut"


def migrations_dir() -> Path:
    """The migration scripts: ``migrations/`` beside the package in a checkout, ``brutus/_migrations`` in a wheel."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package.parent / "migrations", package / "_migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("brutus migration scripts are missing from this installation")


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    heads = _script().get_heads()
    if len(heads) != 1:
        raise RuntimeError(f"brutus migrations have {len(heads)} heads: {heads}")
    return heads[0]


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def _locked(engine: Engine, fn, *args: object) -> None:
    from alembic.util import CommandError

    with engine.connect().execution_options(**WRITE) as connection:
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
            try:
                fn(_config(connection), *args)
            except CommandError as exc:  # an unknown or ambiguous revision: the user's value, named
                raise InvalidInput(f"{exc}".strip().splitlines()[0]) from None


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    _locked(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    _locked(engine, command.downgrade, revision)


# libpq's preamble before the reason a connection failed: 'connection failed: connection to server at
# "127.0.0.1", port 5432 failed: FATAL:  role "x" does not exist' (or '… on socket "/run/….5432" failed: …')
_CONNECTION_PREAMBLE = re.compile(r'^(?:connection (?:failed|is bad): )?connection to server (?:at|on) .*? failed: (?:FATAL: +)?')
_MISSING_DATABASE = re.compile(r'^database ".*" does not exist$')


def connection_reason(error: BaseException) -> str:
    """Why a connection failed, in one line, as the server or libpq said it: 'role "x" does not exist',
    'Connection refused (Is the server running on that host and accepting TCP/IP connections?)'."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    reason = _CONNECTION_PREAMBLE.sub("", lines[0].strip())
    if len(lines) > 1 and lines[1].startswith("\t"):  # libpq's hint for this attempt
        reason += f" ({lines[1].strip()})"
    return reason


def revision_of(engine: Engine, where: str) -> str | None:
    """The database's revision (None: no brutus schema, the server answered). When it cannot be read, the
    server's reason naming ``where``: ``NoDatabase`` for a PostgreSQL database that does not exist,
    ``DatabaseError`` otherwise (a role that does not exist, authentication failed, connection refused…)."""
    from sqlalchemy.exc import DBAPIError

    try:
        with engine.connect() as connection:
            current = current_revision(connection)
            connection.rollback()
    except DBAPIError as exc:
        reason = connection_reason(exc.orig if exc.orig is not None else exc)
        if _MISSING_DATABASE.match(reason):
            raise NoDatabase(where, reason=reason) from None
        raise DatabaseError(f"cannot open {where}: {reason}") from exc
    return current


def prepare_schema(engine: Engine, where: str, *, migrate: bool, create: bool) -> bool:
    """Bring the schema to head (``migrate``) or check it is there; whether it migrated (wrote). Without
    ``create`` a database holding no brutus schema is ``NoDatabase``: nothing is created. A database at head is
    not touched."""
    current = revision_of(engine, where)
    if current is None and not create:
        raise NoDatabase(where)
    head = head_revision()
    if current == head:
        return False
    if not migrate:
        raise SchemaOutOfDate(current, head, where)
    upgrade(engine)
    return True
