"""``brutus db upgrade|downgrade|current|check``: the schema, driven through alembic."""

from __future__ import annotations

import click

from .options import command_tenant, db_option, json_option, print_json


def register(cli: click.Group) -> None:
    cli.add_command(db)


@click.group()
def db() -> None:
    """Schema migrations."""


def _engine(url: str | None, *, create: bool, read_only: bool = False):
    """The database's engine; on SQLite ``--tenant``'s file (PostgreSQL's schema is every tenant's)."""
    from ..db.engine import default_url, make_engine
    from ..db.tenants import check_tenant, tenant_url

    url = tenant_url(url or default_url(), check_tenant(command_tenant()))
    return url, make_engine(url, create=create, read_only=read_only)


def _migrate(db: str | None, direction: str, revision: str) -> None:
    """Upgrade (which may create the database) or downgrade (which needs one) to ``revision``."""
    from ..db import migrate
    from ..db.engine import describe
    from ..db.runner import translate_errors

    url, engine = _engine(db, create=direction == "upgrade")
    try:
        with translate_errors():
            migrate.revision_of(engine, describe(url))  # a database that is not there is named, not made
            getattr(migrate, direction)(engine, revision)
            current = migrate.revision_of(engine, describe(url))
    finally:
        engine.dispose()
    click.echo(f"database at revision {current or 'base'}")


@db.command()
@db_option
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def upgrade(db: str | None, revision: str) -> None:
    """Upgrade the database schema in place (to the newest revision by default)."""
    _migrate(db, "upgrade", revision)


@db.command()
@db_option
@click.argument("revision")
def downgrade(db: str | None, revision: str) -> None:
    """Downgrade the schema to REVISION ('base' removes every brutus table: their data is lost)."""
    _migrate(db, "downgrade", revision)


def _status(db: str | None) -> dict:
    """The revision of an existing database, read without creating or changing anything."""
    from ..db import migrate
    from ..db.engine import describe, redact
    from ..db.runner import translate_errors

    url, engine = _engine(db, create=False, read_only=True)
    try:
        with translate_errors():
            current = migrate.revision_of(engine, describe(url))
    finally:
        engine.dispose()
    head = migrate.head_revision()
    return {"url": redact(url), "current": current, "head": head, "up_to_date": current == head}


@db.command()
@db_option
@json_option
def current(db: str | None, as_json: bool) -> None:
    """Print the database's schema revision and the newest one brutus ships."""
    status = _status(db)
    if as_json:
        print_json(status)
    else:
        click.echo(f"current: {status['current'] or 'base (empty)'}\nhead:    {status['head']}")


@db.command()
@db_option
@json_option
def check(db: str | None, as_json: bool) -> None:
    """Exit non-zero when the database schema is behind (run `brutus db upgrade`)."""
    status = _status(db)
    if as_json:
        print_json(status)
    elif status["up_to_date"]:
        click.echo(f"schema up to date ({status['head']})")
    if not status["up_to_date"]:
        from ..errors import SchemaOutOfDate

        raise SchemaOutOfDate(status["current"], status["head"], status["url"])
