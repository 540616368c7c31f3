"""A brutus session → ``opencode export`` JSON (OpenCode 1.2's ``{info, messages: [{info, parts}]}``).

Rules:

- Field names are OpenCode's (camelCase: ``sessionID``, ``parentID``, ``modelID``, ``callID``…); times are
  integer milliseconds. A user message carries its model as ``model: {providerID, modelID}``, an assistant
  message as ``modelID`` / ``providerID``; a user message has ``tokens`` / ``cost`` only when they are not
  zero. Optional fields are left out when unset (``finish``, ``error``, ``snapshot``, a text part's
  ``synthetic``/``ignored`` when false, a compaction's ``overflow`` when false, a pending tool's empty ``time``).
- What an OpenCode import kept in ``metadata["opencode"]`` (see ``brutus.importers.opencode``) is laid back
  over the result, so exporting an imported OpenCode session gives the original file's JSON back.
- brutus's own extras travel as OpenCode-shaped additions that the importer reads back: the rest of
  ``Message.metadata`` as ``info.metadata``, ``Message.synthetic`` as ``info.synthetic``. So
  export → import into another database gives the same messages, parts and tool states.
- The session ``time`` is the session's own (``created_at`` / ``updated_at``), which an import restores. A
  session created after its first message (imported before brutus kept imported times) gets the time derived
  from its messages instead: first creation, latest activity.
- ``children``, an addition OpenCode ignores, holds the child sessions (sub-agents: ``parent_id`` this session),
  each an export of its own with its own ``children``, oldest first; left out when there are none, and with
  ``children=False``. ``brutus import`` writes them back as children of this session.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Message, MessageWithParts, Part, Session
from ..store import SessionStore
from .fields import JSON, merge
from .opencode import NAMESPACE
from .plan import history_times

__all__ = ["dumps", "export_opencode"]

_PART_RENAMES = {"call_id": "callID", "tail_start_id": "tailStartID"}
_PART_OWN = {"id", "session_id", "message_id"}


def export_opencode(store: SessionStore, session_id: str, *, children: bool = True) -> JSON:
    """The session's whole history (pruned outputs included) as an OpenCode export object, with its child
    sessions under ``children`` (recursively) unless ``children`` is False."""
    session = store.get_session(session_id)
    history = store.messages(session_id)
    first_namespace = _split_metadata(history[0].info.metadata)[0] if history else {}
    exported: JSON = {
        "info": _session_info(session, history, first_namespace.get("session")),
        "messages": [_entry(entry, session.id) for entry in history],
    }
    if children:
        found = sorted(store.list_sessions(parent_id=session_id), key=lambda child: (child.created_at, child.id))
        if found:
            exported["children"] = [export_opencode(store, child.id) for child in found]
    return exported


def dumps(export: JSON) -> str:
    """JSON text for an export, indented like ``opencode export``. Text that UTF-8 cannot carry (a lone
    surrogate) is written with ``\\u`` escapes instead, which every JSON reader turns back into the same text."""
    text = json.dumps(export, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(export, ensure_ascii=True, indent=2)
    return text + "\n"


def _split_metadata(metadata: JSON | None) -> tuple[JSON, JSON | None]:
    """``(opencode extras, the rest of the metadata or None)``."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get(NAMESPACE), dict):
        return {}, metadata
    namespace = metadata[NAMESPACE]
    rest = {key: value for key, value in metadata.items() if key != NAMESPACE}
    return namespace, rest if rest or namespace.get("empty_metadata") else None


def _session_info(session: Session, history: list[MessageWithParts], stash: JSON | None) -> JSON:
    info: JSON = {"id": session.id}
    if session.parent_id is not None:
        info["parentID"] = session.parent_id
    if session.directory is not None:
        info["directory"] = session.directory
    if session.title is not None:
        info["title"] = session.title
    created, updated = history_times(history)
    if created is None or session.created_at <= created:
        created, updated = session.created_at, session.updated_at
    info["time"] = {"created": created, "updated": updated}
    return merge(info, stash)


def _entry(entry: MessageWithParts, session_id: str) -> JSON:
    namespace, metadata = _split_metadata(entry.info.metadata)
    part_extras = namespace.get("parts") or {}
    return {
        "info": _message_info(entry.info, session_id, namespace.get("info") or {}, metadata),
        "parts": [_part(part, session_id, entry.info.id, part_extras.get(part.id)) for part in entry.parts],
    }


def _message_info(message: Message, session_id: str, extras: JSON, metadata: JSON | None) -> JSON:
    time: JSON = {"created": message.time.created}
    if message.time.completed is not None:
        time["completed"] = message.time.completed
    info: JSON = {"id": message.id, "sessionID": session_id, "role": message.role, "time": time}
    if message.parent_id is not None:
        info["parentID"] = message.parent_id
    model = {
        key: value
        for key, value in (("providerID", message.provider_id), ("modelID", message.model_id))
        if value is not None
    }
    if model and (message.role == "user" or "model" in extras):
        info["model"] = model
    elif model:
        info.update(sorted(model.items()))  # modelID, providerID, as OpenCode writes them
    for key in ("mode", "agent"):
        value = getattr(message, key)
        if value is not None:
            info[key] = value
    if message.role == "assistant" or message.cost or message.tokens.total:
        info["cost"] = message.cost
        info["tokens"] = message.tokens.model_dump(mode="json")
    if message.summary:
        info["summary"] = True
    if message.synthetic:
        info["synthetic"] = True
    if message.finish is not None:
        info["finish"] = message.finish
    if message.error is not None:
        info["error"] = message.error
    if metadata is not None:
        info["metadata"] = metadata
    return merge(info, extras)


def _part(part: Part, session_id: str, message_id: str, extras: JSON | None) -> JSON:
    data: dict[str, Any] = part.model_dump(exclude_none=True, exclude=_PART_OWN)  # python mode: JSON mode mangles keys holding lone surrogates
    data = {_PART_RENAMES.get(key, key): value for key, value in data.items()}
    if part.type == "text":
        for flag in ("synthetic", "ignored"):
            if not data.get(flag):
                data.pop(flag, None)
    elif part.type == "compaction" and not data.get("overflow"):
        data.pop("overflow", None)
    elif part.type == "tool" and not data["state"].get("time"):
        data["state"].pop("time", None)
    data.update(id=part.id, sessionID=session_id, messageID=message_id)
    return merge(data, extras)
