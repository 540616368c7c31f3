"""Test-only: row counts, and databases holding the whole imported corpus (its files: ``corpus_helpers``).

Importing the corpus takes seconds, so ``corpus_database`` builds one database per backend per test run and
the import and export tests share it (read only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from brutus.importers import ImportReport, import_files
from brutus.store import SessionStore
from corpus_helpers import all_files

TABLES = ("sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions")


def row_counts(store: SessionStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() for table in TABLES}


def dumps(history: list[Any]) -> list[dict[str, Any]]:
    return [entry.model_dump(mode="json") for entry in history]


def comparable(history: list[Any]) -> list[dict[str, Any]]:
    """A dump without what the store assigns (seq, the parts' session and message ids)."""
    dumped = dumps(history)
    for entry in dumped:
        entry["info"]["seq"] = 0
        for part in entry["parts"]:
            part.update(session_id=None, message_id=None)
    return dumped


def fresh_url(backend: str, tmp_path_factory: Any, pg_server: Any) -> str:
    """A new, migrated database on ``backend``."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('corpus') / 'brutus.db'}"
    else:
        url = pg_server.new_database()
    SessionStore.open(url).close()
    return url


@dataclass(frozen=True)
class CorpusDatabase:
    url: str
    reports: list[ImportReport]

    def open(self) -> SessionStore:
        return SessionStore.open(self.url)


_BUILT: dict[str, CorpusDatabase] = {}


def corpus_database(backend: str, tmp_path_factory: Any, pg_server: Any) -> CorpusDatabase:
    """Every corpus file imported (one ``import_files`` call) into a database of its own on ``backend``."""
    if backend not in _BUILT:
        url = fresh_url(backend, tmp_path_factory, pg_server)
        with SessionStore.open(url) as store:
            reports = import_files(store, all_files())
        _BUILT[backend] = CorpusDatabase(url, reports)
    return _BUILT[backend]
