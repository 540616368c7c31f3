"""``opencode export`` JSON → a brutus session, one to one, ids kept.

Rules:

- The session keeps the export's id, title and directory; message and part ids, times, tokens, cost, finish,
  errors, tool states (status, input, output, title, metadata, start/end/compacted times), compaction parts
  and summary messages map onto the brutus field of the same meaning (camelCase → snake_case). The
  ``sessionID`` / ``messageID`` inside an entry are not kept: a part belongs where it sits.
- A user message's ``model`` object gives ``model_id`` / ``provider_id``; its ``summary`` object (title,
  diffs) is not the assistant's summary flag and stays an extra.
- Nothing is dropped. Whatever brutus has no field for is kept in the message's ``metadata["opencode"]``:
  ``info`` (message fields such as ``path``, ``variant``, ``system``, ``tokens.total``), ``parts``
  (per part id: e.g. a tool part's provider ``metadata``, ``state.attachments``, a step's ``tokens.total``)
  and, on the first message, ``session`` (``slug``, ``projectID``, ``version``, ``summary``; keys of the
  session ``time`` besides created/updated; a ``parentID`` naming a session that is not in the store).
  ``brutus.importers.export.export_opencode`` lays them back, so export(import(file)) == file.
- The session keeps its ``time.created`` / ``time.updated`` (else its messages' first creation and latest
  activity), not the time of the import.
- ``children`` (brutus's export: the sub-agent sessions, each an export of its own, recursively) become
  child sessions of the session they sit in, written after it.
- A ``metadata`` object or a ``synthetic`` flag on a message (written by brutus's own export) maps back onto
  ``Message.metadata`` / ``Message.synthetic``.
- A part type brutus does not know, a missing id, or a value of the wrong type is refused with
  ``ImportFormatError`` naming the entry.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..errors import ImportFormatError
from ..models import PART_TYPES, Message, MessageWithParts, Part
from .base import Document, Importer
from .fields import JSON, model_error, split
from .plan import ImportedSession, SessionExists, history_times

__all__ = ["NAMESPACE", "RENAMES", "OpenCodeImporter", "plan_opencode", "with_extras"]

NAMESPACE = "opencode"
RENAMES = {
    "sessionID": "session_id",
    "messageID": "message_id",
    "parentID": "parent_id",
    "modelID": "model_id",
    "providerID": "provider_id",
    "callID": "call_id",
    "tailStartID": "tail_start_id",
}
_SESSION_COLUMNS = ("id", "title", "directory", "parentID", "time")
_NOT_KEPT = ("session_id", "message_id", "seq")  # where an entry sits decides these


class OpenCodeImporter(Importer):
    """An ``opencode export`` file: a JSON object with ``info`` and ``messages``."""

    name = "opencode"
    reads = "json"
    describes = "an OpenCode export ({info, messages})"

    def detect(self, data: Any) -> bool:
        return isinstance(data, dict) and "info" in data and "messages" in data

    def read(self, data: JSON, *, name: str) -> JSON:
        return _checked(data, f"{name}: an OpenCode export")

    def plan(self, document: Document, *, exists: SessionExists) -> list[ImportedSession]:
        return plan_opencode(document.data, name=document.name, session_exists=exists)


def with_extras(metadata: JSON | None, extras: JSON) -> JSON:
    """``metadata`` with ``extras`` added under ``metadata["opencode"]``. A metadata that was exactly ``{}``
    is remembered as such (``empty_metadata``), so the export can tell it from no metadata at all."""
    existing = (metadata or {}).get(NAMESPACE)
    namespace = {**(existing if isinstance(existing, dict) else {}), **extras}
    if metadata == {}:
        namespace["empty_metadata"] = True
    return {**(metadata or {}), NAMESPACE: namespace}


def plan_opencode(
    export: JSON, *, name: str, session_exists: SessionExists, parent: str | None = None
) -> list[ImportedSession]:
    """The session an OpenCode export describes, then the child sessions under its ``children`` (brutus's
    export adds them; OpenCode ignores the field), depth first. ``parent``: the session enclosing this one."""
    info = export["info"]
    session_id = info.get("id")
    if not isinstance(session_id, str):
        raise ImportFormatError(f"{name}: info.id must be a string (the session id)")
    history: list[MessageWithParts] = []
    for index, entry in enumerate(export["messages"]):
        where = f"{name}: messages[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("info"), dict) or not isinstance(entry.get("parts"), list):
            raise ImportFormatError(f"{where}: an entry needs an 'info' object and a 'parts' array")
        history.append(_entry(entry, session_id, where))
    parent_id = info.get("parentID")
    stash = {key: value for key, value in info.items() if key not in _SESSION_COLUMNS}
    if parent is not None:
        if parent_id != parent and parent_id is not None:
            stash["parentID"] = parent_id
        parent_id = parent
    elif parent_id is not None and not (isinstance(parent_id, str) and session_exists(parent_id)):
        stash["parentID"] = parent_id
        parent_id = None
    created, updated = history_times(history)
    time = info.get("time")
    if isinstance(time, dict) and all(_is_ms(time.get(key)) for key in ("created", "updated")):
        created, updated = time["created"], time["updated"]
        rest = {key: value for key, value in time.items() if key not in ("created", "updated")}
        if rest:
            stash["time"] = rest
    elif time is not None:
        stash["time"] = time
    if stash and history:
        first = history[0].info
        first.metadata = with_extras(first.metadata, {"session": stash})
    sessions = [ImportedSession(session_id, info.get("title"), info.get("directory"), parent_id, history, created, updated)]
    children = export.get("children", [])
    if not isinstance(children, list):
        raise ImportFormatError(f"{name}: 'children' must be an array of exports (the child sessions)")
    for index, child in enumerate(children):
        where = f"{name}: children[{index}]"
        _checked(child, f"{where}: a child session")
        sessions += plan_opencode(child, name=where, session_exists=session_exists, parent=session_id)
    return sessions


def _checked(export: Any, what: str) -> JSON:
    if not isinstance(export, dict) or not isinstance(export.get("info"), dict) or not isinstance(export.get("messages"), list):
        raise ImportFormatError(f"{what} needs an 'info' object and a 'messages' array")
    return export


def _is_ms(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _entry(entry: JSON, session_id: str, where: str) -> MessageWithParts:
    raw = dict(entry["info"])
    if "id" not in raw:
        raise ImportFormatError(f"{where}: the message has no id")
    where = f"{where} ({raw['id']})"
    metadata = raw.pop("metadata", None)
    if metadata is not None and not isinstance(metadata, dict):
        raise ImportFormatError(f"{where}: info.metadata must be an object")
    before: JSON = {}
    if "summary" in raw and not isinstance(raw["summary"], bool):
        before["summary"] = raw.pop("summary")  # a user message's summary object (title, diffs)
    model = raw.pop("model", None) if isinstance(raw.get("model"), dict) else None
    known, extras = split(raw, Message, RENAMES)
    if model is not None:
        model = dict(model)
        known.setdefault("model_id", model.pop("modelID", None))
        known.setdefault("provider_id", model.pop("providerID", None))
        if model or raw.get("role") != "user":  # the object form is kept when it is not the usual one
            extras["model"] = model
    for key in _NOT_KEPT:
        known.pop(key, None)
    info_extras = {**before, **extras}
    part_extras: JSON = {}
    parts = [_part(raw_part, part_extras, f"{where}.parts[{n}]") for n, raw_part in enumerate(entry["parts"])]
    namespace = {key: value for key, value in (("info", info_extras), ("parts", part_extras)) if value}
    if namespace:
        metadata = with_extras(metadata, namespace)
    try:
        message = Message.model_validate({**known, "session_id": session_id, "metadata": metadata})
        return MessageWithParts(info=message, parts=parts)
    except ValidationError as exc:
        raise ImportFormatError(model_error(exc, where)) from None


def _part(raw: Any, part_extras: JSON, where: str) -> Part:
    if not isinstance(raw, dict):
        raise ImportFormatError(f"{where}: a part must be an object")
    kind = raw.get("type")
    model = PART_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ImportFormatError(f"{where}: unsupported part type {kind!r} (brutus knows {', '.join(PART_TYPES)})")
    part_id = raw.get("id")
    if not isinstance(part_id, str):
        raise ImportFormatError(f"{where}: the part has no id")
    known, extras = split(raw, model, RENAMES)
    for key in _NOT_KEPT:
        known.pop(key, None)
    if extras:
        part_extras[part_id] = extras
    try:
        return model.model_validate(known)  # type: ignore[return-value]
    except ValidationError as exc:
        raise ImportFormatError(model_error(exc, f"{where} ({part_id})")) from None
