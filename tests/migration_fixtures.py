"""Databases as past revisions wrote them, for tests/test_migrations_data.py.

``tests/data/migrations/rev_<REVISION>.json`` holds every row of a sample database written by brutus through
its API on a schema at that revision, read back raw (text and JSON exactly as stored, escapes included).
A fixture is written once, when its revision is the newest, and then never regenerated: it is what that
version of brutus left on users' disks.

    python tests/migration_fixtures.py REVISION    writes rev_REVISION.json from the current code, on a
                                                   SQLite schema upgraded to REVISION only

``load_rows`` inserts such rows into a database at that revision with plain SQL (no brutus code), and
``raw_rows`` reads every table back the same way, so a test can compare them after a migration.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, create_engine, null, select
from sqlalchemy.engine import Engine
from conftest import plain_url

DATA = Path(__file__).with_name("data") / "migrations"
# Parents before children, so the foreign keys hold while the rows go in.
TABLE_ORDER = ["sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions"]


def fixture_path(revision: str) -> Path:
    return DATA / f"rev_{revision}.json"


def past_revisions() -> list[str]:
    return sorted(p.stem.removeprefix("rev_") for p in DATA.glob("rev_*.json"))


def read_fixture(revision: str) -> dict[str, Any]:
    return json.loads(fixture_path(revision).read_text())


def plain_engine(url: str) -> Engine:
    """An engine without brutus's codec or pragmas: rows go in and come out exactly as stored (JSON text
    written as brutus writes it: UTF-8, not ``\\u`` escapes)."""
    return create_engine(plain_url(url), json_serializer=lambda value: json.dumps(value, ensure_ascii=False))


def _tables(engine: Engine) -> MetaData:
    metadata = MetaData()
    with warnings.catch_warnings():  # PostgreSQL's search_xid (0005) is an xid8, a type SQLAlchemy does not know
        warnings.filterwarnings("ignore", "Did not recognize type 'xid8'")
        metadata.reflect(bind=engine, only=TABLE_ORDER)
    return metadata


def _columns(table: Any) -> list[Any]:
    """A table's columns but the search index's (``search_xid``: which transaction wrote the row)."""
    return [column for column in table.columns if column.name != "search_xid"]


def raw_rows(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of the brutus tables, as column → value, ordered by primary key."""
    engine = plain_engine(url)
    try:
        metadata = _tables(engine)
        out: dict[str, list[dict[str, Any]]] = {}
        with engine.connect() as conn:
            for name in TABLE_ORDER:
                table = metadata.tables[name]
                rows = conn.execute(select(*_columns(table)).order_by(*table.primary_key.columns))
                out[name] = [dict(row._mapping) for row in rows]
        return out
    finally:
        engine.dispose()


def load_rows(url: str, tables: dict[str, list[dict[str, Any]]]) -> None:
    """Insert fixture rows with plain SQL into a database whose schema is at the fixture's revision."""
    engine = plain_engine(url)
    try:
        metadata = _tables(engine)
        with engine.begin() as conn:
            for name in TABLE_ORDER:
                rows = tables[name]
                if name == "sessions":  # parents first
                    rows = sorted(rows, key=lambda r: r["parent_id"] is not None)
                for row in rows:  # None is SQL NULL, never the JSON text 'null' (as brutus writes it)
                    conn.execute(metadata.tables[name].insert().values(**{k: null() if v is None else v for k, v in row.items()}))
    finally:
        engine.dispose()


def write_sample(url: str, revision: str) -> None:
    """A database at ``revision`` holding a bit of everything: two sessions (one a child), every part type,
    tool states in every status, pruned parts, a completed and a failed compaction, hostile text."""
    from brutus import CompactionConfig, CompactionStalled, SessionStore
    from brutus.db import migrate
    from brutus.db.engine import make_engine
    from brutus.models import TokenCounts
    from brutus.summarizers import Summary

    from crash_writer import CountingClock

    class Summarizer:
        def summarize(self, request: Any) -> Summary:
            return Summary(text="We added the parser; next: tests.", model="claude-haiku-4-5", tokens=TokenCounts(input=800, output=30), cost=0.0012)

    engine = make_engine(url)
    migrate.upgrade(engine, revision)
    store = SessionStore(engine, clock=CountingClock())  # the constructor does not migrate: rows at `revision`
    small = CompactionConfig(prune_protect=2_000, prune_minimum=1_000)
    odd = "nul \x00, lone \ud800, escape \ue000, crlf\r\n, é漢🤖"
    main = store.create_session(title=f"main {odd}", directory="/work/proj")
    child = store.create_session(title="sub-agent", parent_id=main.id)
    user = store.append_message(main.id, "user", agent="build", metadata={"k": odd})
    store.append_part(user.id, {"type": "text", "text": f"please {odd}"})
    store.append_part(user.id, {"type": "file", "mime": "text/x-python", "filename": "a.py", "url": "file:///a.py", "source": {"path": "a.py"}})
    store.append_part(user.id, {"type": "agent", "name": "general"})
    store.append_part(user.id, {"type": "subtask", "prompt": "look around", "description": "scan", "agent": "explore"})
    reply = store.append_message(main.id, "assistant", parent_id=user.id, agent="build", mode="build", model_id="claude-sonnet-4-5", provider_id="anthropic")
    store.append_part(reply.id, {"type": "step-start", "snapshot": "abc123"})
    store.append_part(reply.id, {"type": "reasoning", "text": "think", "metadata": {"signature": "sig"}})
    for status in ("pending", "running", "completed", "error"):
        state: dict[str, Any] = {"status": status, "input": {"cmd": f"run {status}", "odd": odd}}
        if status == "completed":
            state.update(output=f"done {odd}\n" * 50, title="ran", metadata={"exit": 0})
        if status == "error":
            state["error"] = f"failed {odd}"
        store.append_part(reply.id, {"type": "tool", "call_id": f"call_{status}", "tool": "bash", "state": state})
    store.append_part(reply.id, {"type": "patch", "hash": "deadbeef", "files": ["a.py"]})
    store.append_part(reply.id, {"type": "snapshot", "snapshot": "def456"})
    store.append_part(reply.id, {"type": "retry", "attempt": 1, "error": {"message": "overloaded"}})
    store.append_part(reply.id, {"type": "step-finish", "reason": "tool-calls", "cost": 0.01, "tokens": {"input": 10, "output": 5}})
    store.append_part(reply.id, {"type": "text", "text": "first pass done"})
    store.finish_message(reply.id, finish="tool-calls", tokens={"input": 1200, "output": 80, "cache": {"read": 300, "write": 20}}, cost=0.02)
    for turn in range(4):
        u = store.append_message(main.id, "user")
        store.append_part(u.id, {"type": "text", "text": f"turn {turn}"})
        a = store.append_message(main.id, "assistant", parent_id=u.id)
        tool = store.append_part(a.id, {"type": "tool", "call_id": f"read_{turn}", "tool": "read", "state": {"status": "pending", "input": {"path": f"f{turn}.py"}}})
        store.update_tool(tool.id, status="running")
        store.update_tool(tool.id, status="completed", output="line\n" * 1600)
        store.finish_message(a.id, finish="stop", tokens={"input": 2000 + turn, "output": 40})
    assert store.prune(main.id, small).parts, "the sample needs pruned parts"
    store.compact(main.id, Summarizer(), trigger="auto", config=small)
    try:
        store.compact(main.id, Summarizer(), config=small)  # nothing new: refused (NothingToCompact), no row
    except CompactionStalled:
        pass
    store.append_message(child.id, "user")
    store.close()


def main(argv: list[str]) -> None:
    [revision] = argv
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'sample.db'}"
        write_sample(url, revision)
        tables = raw_rows(url)
    DATA.mkdir(parents=True, exist_ok=True)
    fixture = {"revision": revision, "tables": tables}
    fixture_path(revision).write_text(json.dumps(fixture, indent=1, ensure_ascii=True, sort_keys=True) + "\n")
    print(f"wrote {fixture_path(revision)}: " + ", ".join(f"{len(v)} {k}" for k, v in tables.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
