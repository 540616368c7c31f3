"""alembic environment for brutus.

The store and the CLI hand over an open connection in ``config.attributes["connection"]`` (already inside
the transaction that serializes concurrent upgrades). Run by the ``alembic`` command itself, the URL comes
from ``-x url=…``, else ``$BRUTUS_DATABASE_URL``.
"""

from __future__ import annotations

import os

from alembic import context

from brutus.db.engine import make_engine
from brutus.db.tables import Base, include_object

config = context.config
target_metadata = Base.metadata


def _configure_and_run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite ALTERs go through table copies
        compare_type=True,
        include_object=include_object,  # the search index's objects differ per backend (see tables.py)
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("BRUTUS_DATABASE_URL")
    if not url:
        raise SystemExit("no database URL: pass -x url=… or set BRUTUS_DATABASE_URL")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            _configure_and_run(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("brutus migrations run online only")
run_migrations_online()
