"""Schema migrations, driven programmatically: where the scripts are, which revision a database is at,
upgrade / downgrade under a lock, and the check ``SessionStore.open(auto_migrate=False)`` makes.

Concurrent upgrades are serialized: on SQLite the migration runs inside ``BEGIN IMMEDIATE``, on PostgreSQL
under a transaction-scoped advisory lock, and alembic reads the current revision inside that transaction,
so a second process that waited finds the schema at head and does nothing.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from ..errors import SchemaOutOfDate
from .engine import WRITE

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = ["check_schema", "current_revision", "downgrade", "head_revision", "migrations_dir", "upgrade"]

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
    with engine.connect().execution_options(**WRITE) as connection:
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
            fn(_config(connection), *args)


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    _locked(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    _locked(engine, command.downgrade, revision)


def check_schema(engine: Engine, url: str) -> None:
    """Raise ``SchemaOutOfDate`` when the database is not at the head revision."""
    with engine.connect() as connection:
        current = current_revision(connection)
        connection.rollback()
    head = head_revision()
    if current != head:
        raise SchemaOutOfDate(current, head, url)
