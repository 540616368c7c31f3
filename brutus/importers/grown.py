"""Importing a Claude Code transcript again after it grew: the session is brought up to what importing the
whole file gives, by appending, without rewriting what was settled.

Rules:

- The file is planned whole, as on a first import, and each planned session is compared with the one in the
  store, message by message (everything but what the store assigns: seq, the parts' session and message
  ids, and prune marks, which are brutus's own). Equal histories: nothing is written ("already imported").
- Lines appended to a transcript can still change the last messages imported from it: an assistant message
  streamed over several lines, a tool call answered later, a compaction boundary waiting for its summary. So
  the stored messages from the last *cut* on may be rewound and written again (``store.rewind``), as the
  Claude Agent SDK mirror does (``brutus.integrations.claude_mirror``). A cut is a user message that starts a
  turn after at least one other message, with no tool call before it unanswered and no compaction just
  before it: appending lines never changes the messages before it.
- A settled message (before the last cut) that differs, a file that plans fewer messages than the store
  holds, or a message brutus added after the import (a ``brutus compact``, which has no Claude Code line
  behind it) in the part that would be rewritten: the file is not the one imported plus new lines, and the
  import is refused with ``ImportFormatError`` naming the session and the first message that differs,
  nothing written. To take the file as it is now, delete the session and import it again.
- A sidechain (child session) new in the file is created; the session's title, directory and times follow
  the file.
"""

from __future__ import annotations

from typing import Any

from ..errors import ImportFormatError
from ..models import MessageWithParts
from ..store import SessionStore
from .claude_code_builder import NAMESPACE
from .plan import ImportedSession, restore_times

__all__ = ["bring_up_to_date", "comparable", "last_cut"]


def comparable(message: MessageWithParts) -> dict[str, Any]:
    """What a message says, without what the store assigns or brutus works out (the cost, priced from the
    usage by brutus's own table, which an earlier import may have priced otherwise or not at all)."""
    dumped = message.model_dump(mode="python")
    dumped["info"]["seq"] = 0
    dumped["info"]["cost"] = 0.0
    for part in dumped["parts"]:
        part["session_id"] = part["message_id"] = None
        time = (part.get("state") or {}).get("time")
        if isinstance(time, dict):
            time.pop("compacted", None)
    return dumped


def last_cut(history: list[MessageWithParts]) -> int:
    """The index of the last cut in ``history`` (0 when there is none): the messages before it are settled."""
    cut = 0
    open_calls = 0
    for index, entry in enumerate(history):
        info = entry.info
        compaction = any(part.type == "compaction" for part in entry.parts)
        if info.role == "user" and index > 0 and not compaction and not open_calls:
            previous = history[index - 1]
            if not previous.info.summary and not any(p.type == "compaction" for p in previous.parts):
                cut = index
        open_calls += sum(1 for p in entry.parts if p.type == "tool" and p.state.status in ("pending", "running"))
    return cut


def bring_up_to_date(store: SessionStore, planned: ImportedSession, *, name: str) -> int:
    """Bring a stored session up to its plan; the number of messages written (0: it was current)."""
    stored = store.messages(planned.id)
    plan = planned.history
    same = 0
    while same < min(len(stored), len(plan)) and comparable(stored[same]) == comparable(plan[same]):
        same += 1
    changed = same < len(stored)
    if not changed and same == len(plan):
        return 0
    where = f"{name}: session {planned.id} was imported from this file before, but"
    if changed:
        first = stored[same].info.id
        if same < last_cut(stored):
            raise ImportFormatError(
                f"{where} its earlier entries changed (message {first} differs), not only new lines at the end; "
                f"to import it as it is now, delete the session (brutus sessions delete {planned.id} --yes) first"
            )
        added = next((m.info.id for m in stored[same:] if NAMESPACE not in (m.info.metadata or {})), None)
        if added is not None:
            raise ImportFormatError(
                f"{where} message {added} was added in brutus after the import (a compaction?): "
                "the new lines cannot be written before it"
            )
        if len(plan) < len(stored):
            raise ImportFormatError(f"{where} the file now holds fewer messages than the session ({len(plan)} < {len(stored)})")
        store.rewind(planned.id, first)
    store.append_messages(planned.id, plan[same:])
    session = store.get_session(planned.id)
    if (session.title, session.directory) != (planned.title, planned.directory):
        store.update_session(planned.id, title=planned.title, directory=planned.directory)
    restore_times(store, planned)
    return len(plan) - same
