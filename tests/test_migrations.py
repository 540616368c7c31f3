"""Migrations: one head, upgrade → downgrade → upgrade on both backends, models match the migrations,
``auto_migrate=False`` refuses a database behind head."""

from __future__ import annotations

import warnings

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from brutus import SchemaOutOfDate, SessionStore
from brutus.db import migrate
from brutus.db.engine import make_engine
from brutus.db.tables import Base, include_object
from conftest import plain_url

TABLES = {"sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions"}


def test_single_head() -> None:
    script = ScriptDirectory.from_config(migrate._config())
    assert len(script.get_heads()) == 1
    assert migrate.head_revision() == script.get_heads()[0]


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert TABLES <= set(inspect(conn).get_table_names())
        assert "pruned_parts" in inspect(conn).get_view_names()
        assert migrate.current_revision(conn) == migrate.head_revision()
    migrate.downgrade(engine, "base")
    with engine.connect() as conn:
        assert not TABLES & set(inspect(conn).get_table_names())
        assert "pruned_parts" not in inspect(conn).get_view_names()
        assert migrate.current_revision(conn) is None
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert TABLES <= set(inspect(conn).get_table_names())
    engine.dispose()


def test_models_match_migrations(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "include_object": include_object})
        with warnings.catch_warnings():  # the search index's xid8 and pg_snapshot columns (0005), left out
            warnings.filterwarnings("ignore", "Did not recognize type '(xid8|pg_snapshot)'")
            diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def test_auto_migrate_false_on_an_empty_database_raises(db_url: str) -> None:
    with pytest.raises(SchemaOutOfDate) as info:
        SessionStore.open(db_url, auto_migrate=False)
    assert "brutus db upgrade" in str(info.value)
    SessionStore.open(db_url).close()  # auto_migrate=True upgrades in place
    SessionStore.open(db_url, auto_migrate=False).close()


def test_pruned_parts_view_lists_marked_parts(store: SessionStore, store_url: str) -> None:
    ses = store.create_session()
    msg = store.append_message(ses.id, "assistant")
    part = store.append_part(
        msg.id,
        {"type": "tool", "call_id": "c", "tool": "read", "state": {"status": "completed", "input": {}, "output": "x" * 400, "time": {"start": 1, "end": 2, "compacted": 3}}},
    )
    store.append_part(msg.id, {"type": "tool", "call_id": "d", "tool": "read", "state": {"status": "completed", "input": {}, "output": "y"}})
    engine = create_engine(plain_url(store_url))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT session_id, message_id, part_id, tool, tokens, compacted_at FROM pruned_parts")).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [(ses.id, msg.id, part.id, "read", 100, 3)]


def test_data_survives_a_reopen_at_head(store_url: str) -> None:
    store = SessionStore.open(store_url)
    ses = store.create_session(title="t")
    store.append_message(ses.id, "user")
    store.close()
    again = SessionStore.open(store_url, auto_migrate=True)
    assert len(again.messages(ses.id)) == 1
    again.close()
