"""What an importer produces (``ImportedSession``: a session and its history as brutus models) and how it is
written through the public store API.

Rules:

- Importers are pure: they turn a parsed file into ``ImportedSession``s and never touch the store, except to
  ask whether a session exists. Writing is done here, a session's history in one ``append_messages`` call,
  with the ids, times, tool states and token counts the importer chose: the store keeps them as they are.
- A session keeps the times it was recorded with (``created_at`` / ``updated_at``: the export's session time,
  else its first message's creation and its latest activity), not the time of the import.
- The caller wraps the writes in ``store.batch()``, so a file is written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import NotFound
from ..models import MessageWithParts
from ..store import SessionStore

__all__ = ["ImportedSession", "SessionExists", "history_times", "restore_times", "session_exists", "write_session"]

SessionExists = Callable[[str], bool]


@dataclass(frozen=True)
class ImportedSession:
    """A session to create, with its history in order (``Message.seq`` is ignored: the store numbers them)."""

    id: str
    title: str | None = None
    directory: str | None = None
    parent_id: str | None = None
    history: list[MessageWithParts] = field(default_factory=list)
    created_at: int | None = None  # None: the time of the import
    updated_at: int | None = None


def session_exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.get_session(session_id)
    except NotFound:
        return False
    return True


def write_session(store: SessionStore, session: ImportedSession) -> int:
    """Create the session and append its history in one ``append_messages`` call (inside the caller's batch);
    the number of messages written."""
    store.create_session(id=session.id, title=session.title, directory=session.directory, parent_id=session.parent_id)
    store.append_messages(session.id, session.history)
    restore_times(store, session)
    return len(session.history)


def restore_times(store: SessionStore, session: ImportedSession) -> None:
    """Give the session the times it was recorded with (the writes set them to now)."""
    if session.created_at is not None or session.updated_at is not None:
        store.update_session(session.id, created_at=session.created_at, updated_at=session.updated_at)


def history_times(history: list[MessageWithParts]) -> tuple[int | None, int | None]:
    """A session's times derived from its messages: the first creation, the latest activity."""
    if not history:
        return None, None
    created = history[0].info.time.created
    updated = max(max(m.info.time.created, m.info.time.completed or 0) for m in history)
    return created, updated
