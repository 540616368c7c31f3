"""What an importer produces (``ImportedSession``: a session and its history as brutus models) and how it is
written through the public store API.

Rules:

- Importers are pure: they turn a parsed file into ``ImportedSession``s and never touch the store, except to
  ask whether a session exists. Writing is done here, a session's history in one ``append_messages`` call,
  with the ids, times, tool states and token counts the importer chose: the store keeps them as they are.
- The caller wraps the writes in ``store.batch()``, so a file is written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import NotFound
from ..models import MessageWithParts
from ..store import SessionStore

__all__ = ["ImportedSession", "SessionExists", "session_exists", "write_session"]

SessionExists = Callable[[str], bool]


@dataclass(frozen=True)
class ImportedSession:
    """A session to create, with its history in order (``Message.seq`` is ignored: the store numbers them)."""

    id: str
    title: str | None = None
    directory: str | None = None
    parent_id: str | None = None
    history: list[MessageWithParts] = field(default_factory=list)


def session_exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.get_session(session_id)
    except NotFound:
        return False
    return True


def write_session(store: SessionStore, session: ImportedSession) -> None:
    """Create the session and append its history in one ``append_messages`` call (inside the caller's batch)."""
    store.create_session(id=session.id, title=session.title, directory=session.directory, parent_id=session.parent_id)
    store.append_messages(session.id, session.history)
