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
- ``write_export`` streams the same bytes as ``dumps(export_opencode(...))`` to a binary file, the history
  read ``HISTORY_CHUNK`` messages at a time (``history_ops.history_in_chunks``) and each entry written as
  ``json.dumps`` would indent it in place, so memory holds one chunk, not the history; the whole export
  (children included) is one read transaction, one snapshot. Text UTF-8 cannot carry (a lone surrogate)
  switches the whole file to ``\\u`` escapes, as ``dumps`` does: met while streaming, the file is written
  again from its start in the same transaction (stdout, which cannot go back, is streamed through a
  temporary file).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from typing import IO, Any, NamedTuple

from ..models import Message, MessageWithParts, Part, Session
from ..store import SessionStore
from ..flows import Tx
from .fields import JSON, merge
from .opencode import NAMESPACE
from .plan import history_times

__all__ = ["Exported", "dumps", "export_opencode", "write_export"]

_PART_RENAMES = {"call_id": "callID", "tail_start_id": "tailStartID"}
_PART_OWN = {"id", "session_id", "message_id"}


def export_opencode(store: SessionStore, session_id: str, *, children: bool = True) -> JSON:
    """The session's whole history (pruned outputs included) as an OpenCode export object, with its child
    sessions under ``children`` (recursively) unless ``children`` is False."""
    session = store.get_session(session_id)
    history = store.messages(session_id)
    first_namespace = _split_metadata(history[0].info.metadata)[0] if history else {}
    exported: JSON = {
        "info": _session_info(session, history_times(history), first_namespace.get("session")),
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


def _session_info(session: Session, times: tuple[int | None, int | None], stash: JSON | None) -> JSON:
    created, updated = times
    if created is None or session.created_at <= created:
        created, updated = session.created_at, session.updated_at
    info = {"id": session.id, "parentID": session.parent_id, "directory": session.directory, "title": session.title}
    info = {key: value for key, value in info.items() if value is not None}
    return merge({**info, "time": {"created": created, "updated": updated}}, stash)


def _entry(entry: MessageWithParts, session_id: str) -> JSON:
    namespace, metadata = _split_metadata(entry.info.metadata)
    part_extras = namespace.get("parts") or {}
    return {
        "info": _message_info(entry.info, session_id, namespace.get("info") or {}, metadata),
        "parts": [_part(part, session_id, entry.info.id, part_extras.get(part.id)) for part in entry.parts],
    }


def _message_info(message: Message, session_id: str, extras: JSON, metadata: JSON | None) -> JSON:
    time = message.time.model_dump(exclude_none=True)
    info: JSON = {"id": message.id, "sessionID": session_id, "role": message.role, "time": time, "parentID": message.parent_id}
    model = {
        key: value
        for key, value in (("providerID", message.provider_id), ("modelID", message.model_id))
        if value is not None
    }
    if model and (message.role == "user" or "model" in extras):
        info["model"] = model
    elif model:
        info.update(sorted(model.items()))  # modelID, providerID, as OpenCode writes them
    info.update(mode=message.mode, agent=message.agent)
    if message.role == "assistant" or message.cost or message.tokens.total:
        info["cost"] = message.cost
        info["tokens"] = message.tokens.model_dump(mode="json")
    info.update(
        summary=message.summary or None,  # left out when false, as the flags below
        synthetic=message.synthetic or None,
        finish=message.finish,
        error=message.error,
        metadata=metadata,
    )
    return merge({key: value for key, value in info.items() if value is not None}, extras)


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


# -- streaming ------------------------------------------------------------------------------------------------


class _NeedsAscii(Exception):
    """A text UTF-8 cannot carry: the export starts again with ``\\u`` escapes (see ``dumps``)."""


class Exported(NamedTuple):
    messages: int  # the session's own
    children: int  # child sessions, theirs included


def write_export(store: SessionStore, session_id: str, out: IO[bytes], *, children: bool = True) -> Exported:
    """Write ``dumps(export_opencode(store, session_id, children=children))`` to the binary file ``out`` as it
    reads the history (module docstring)."""
    from ..db.history_ops import consistent_reads

    seekable = out.seekable()
    target = out if seekable else tempfile.TemporaryFile()
    start = target.tell()

    def op() -> Any:
        yield from consistent_reads(store.engine.dialect.name)
        for ascii_only in (False, True):
            writer = _Writer(target, ascii_only)
            try:
                count = yield from _export_session(session_id, writer, "", children)
            except _NeedsAscii:
                target.seek(start)
                target.truncate()
                continue
            writer.write("\n")
            return Exported(count, writer.sessions - 1)
        raise AssertionError("an export with ensure_ascii always encodes")

    try:
        count = store.run(Tx(op(), write=False, replica=True))
        if not seekable:
            target.seek(start)
            shutil.copyfileobj(target, out)
        return count
    finally:
        if not seekable:
            target.close()


class _Writer:
    def __init__(self, target: IO[bytes], ascii_only: bool) -> None:
        self.target, self.ascii_only = target, ascii_only
        self.sessions = 0

    def write(self, text: str) -> None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise _NeedsAscii from None
        self.target.write(data)

    def value(self, value: Any, indent: str) -> str:
        """``value`` as ``json.dumps(..., indent=2)`` writes it nested ``indent`` deep."""
        return json.dumps(value, ensure_ascii=self.ascii_only, indent=2).replace("\n", "\n" + indent)


def _export_session(session_id: str, out: _Writer, indent: str, children: bool) -> Any:
    """One session's export object (``export_opencode``), ``indent`` deep, its entries as they are read."""
    from ..db import ops
    from ..db.history_ops import history_in_chunks, history_times as latest_times

    session = yield from ops.get_session(session_id)
    out.sessions += 1
    created, completed = yield from latest_times(session_id)
    inner = indent + "  "
    state = {"entries": 0}

    def header(first: MessageWithParts | None) -> None:
        times = (None, None) if first is None else (first.info.time.created, max(created, completed or 0))
        stash = _split_metadata(first.info.metadata)[0].get("session") if first is not None else None
        info = _session_info(session, times, stash)
        out.write(f'{{\n{inner}"info": {out.value(info, inner)},\n{inner}"messages": [')

    def on_chunk(entries: list[MessageWithParts]) -> None:
        if not state["entries"]:
            header(entries[0])
        for entry in entries:
            comma = "," if state["entries"] else ""
            out.write(f"{comma}\n{inner}  {out.value(_entry(entry, session.id), inner + '  ')}")
            state["entries"] += 1

    count = yield from history_in_chunks(session_id, on_chunk)
    if count:
        out.write(f"\n{inner}]")
    else:
        header(None)
        out.write("]")
    if children:
        found = yield from ops.list_sessions(parent_id=session_id, limit=None, include_archived=True)
        for n, child in enumerate(sorted(found, key=lambda c: (c.created_at, c.id))):
            out.write(f',\n{inner}"children": [\n{inner}  ' if n == 0 else f",\n{inner}  ")
            yield from _export_session(child.id, out, inner + "  ", True)
        if found:
            out.write(f"\n{inner}]")
    out.write(f"\n{indent}}}")
    return count
