"""Transcripts: an agent SDK's own records, kept exactly, beside the brutus session they are parsed into.

Rules:

- A transcript is named by its SDK's key (``TranscriptKey``: sdk, project_key, the SDK's session id and a
  subpath, ``""`` where the SDK has none, within the store's tenant) and mirrored into one brutus session
  whose id is derived from that key, so it is found without a lookup and never clashes across projects or
  tenants (a tenant's rows hold only its keys: ``brutus.db.tenants``). Message and part ids inside it are
  derived from the key too (``TranscriptKey.tag``). The one exception is an OpenAI Agents branch: its
  session is a ``store.fork`` (its row names it), and the entries copied into it name the fork's copies.
- Entries are rows of ``transcript_entries`` numbered in arrival order from 1 (``seq``, never reused), each
  exactly as given (a JSON column read back deep-equal); reading them is one index range scan. An entry whose
  ``uuid`` (a string) is in the transcript already, or earlier in the same batch, is skipped: the uuid is the
  idempotency key. Entries without one are always appended.
- Writers of one transcript take turns: ``lock`` is the first statement of their transaction (a PostgreSQL
  transaction-level advisory lock on the SDK session; on SQLite brutus's write transactions hold the
  database's write lock from their start).
- ``mtime`` is the storage write time: the store's clock, strictly increasing per transcript.

Operations in the ``Step`` protocol (``brutus.db.statements``), run inside the caller's ``store.batch()``
through ``run``. They write only these two tables; what they read of brutus's own (where an item session's
messages stand: its last message, last user message, boundary) they never write: the integrations change
sessions, messages and parts through the store's public methods only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import String, and_, bindparam, delete, func, insert, or_, select, update

from ..codec import encode_json, encode_text
from ..db.convert import text_out
from ..db.sqlite_driver import prebuilt
from ..db import statements as st
from ..db.statements import M, Op, P, step
from ..db.tables import TranscriptEntryRow, TranscriptRow
from ..errors import InvalidInput, NotFound
from ..flows import Tx

__all__ = [
    "ItemsAt",
    "JSON",
    "NewEntry",
    "TranscriptKey",
    "answered_after",
    "append_entries",
    "conversation_uuids",
    "copy_entries",
    "delete_last_entry",
    "entries",
    "find",
    "insert_transcript",
    "item_rows",
    "item_rows_of",
    "items_at",
    "last_entry",
    "last_items",
    "list_main",
    "load",
    "lock",
    "message_before",
    "messages_from",
    "open_calls",
    "run",
    "save",
    "save_state",
    "subkeys",
    "user_turn",
]

JSON = dict[str, Any]
TR, EN = TranscriptRow.__table__, TranscriptEntryRow.__table__
_PREFIX = {"claude-agent-sdk": "cas", "openai-agents": "oai"}
_CHUNK = 256


def _b(name: str) -> Any:
    return bindparam(f"b_{name}")


@dataclass(frozen=True)
class TranscriptKey:
    """What an SDK names a transcript by."""

    sdk: str
    project_key: str
    external_id: str
    subpath: str = ""
    tenant: str = ""  # the store's tenant (``brutus.db.tenants``): "" for none

    @property
    def digest(self) -> str:
        # a tenant's keys name sessions of their own (ids are global); the untenanted keep their ids of before
        tenant = [self.tenant] if self.tenant else []
        named = json.dumps([self.sdk, self.project_key, self.external_id, self.subpath, *tenant], ensure_ascii=True)
        return hashlib.sha256(named.encode("ascii")).hexdigest()

    @property
    def session_id(self) -> str:
        """The brutus session this transcript is mirrored into."""
        return f"ses_{_PREFIX[self.sdk]}_{self.digest[:32]}"

    @property
    def tag(self) -> str:
        """What the ids of this transcript's messages and parts start with (after ``msg_`` / ``prt_``)."""
        return self.digest[:12]

    def main(self) -> TranscriptKey:
        return TranscriptKey(self.sdk, self.project_key, self.external_id, tenant=self.tenant)


@dataclass(frozen=True)
class NewEntry:
    seq: int
    entry: JSON


async def run(store: Any, op: Op, *, write: bool = True) -> Any:
    """Run an operation of this module on ``store`` (an ``AsyncSessionStore``), in its current batch if one
    is open. Operations on brutus's own tables run as the store's methods do, through its runner."""
    return await store.run(Tx(op, write=write))


# -- statements --------------------------------------------------------------------------------------------

_ADVISORY = prebuilt(select(func.pg_advisory_xact_lock(_b("key"))))
FIND = prebuilt(
    select(TR).where(
        TR.c.sdk == _b("sdk"), TR.c.project_key == _b("pk"), TR.c.external_id == _b("ext"), TR.c.subpath == _b("sub")
    )
)
INSERT_TRANSCRIPT = prebuilt(insert(TR))
SAVE = prebuilt(
    update(TR)
    .where(TR.c.session_id == _b("sid"))
    .values(
        last_seq=_b("last_seq"),
        mtime=_b("mtime"),
        summary=bindparam("b_summary", type_=TR.c.summary.type),
        state=bindparam("b_state", type_=TR.c.state.type),
    )
)
SAVE_STATE = prebuilt(
    update(TR).where(TR.c.session_id == _b("sid")).values(state=bindparam("b_state", type_=TR.c.state.type))
)
LIST_MAIN = prebuilt(
    select(TR.c.external_id, TR.c.mtime, TR.c.summary).where(
        TR.c.sdk == _b("sdk"), TR.c.project_key == _b("pk"), TR.c.subpath == ""
    )
)
SUBKEYS = prebuilt(
    select(TR.c.subpath)
    .where(TR.c.sdk == _b("sdk"), TR.c.project_key == _b("pk"), TR.c.external_id == _b("ext"), TR.c.subpath != "")
    .order_by(TR.c.subpath)
)
INSERT_ENTRIES = prebuilt(insert(EN))
ENTRIES_FROM = prebuilt(
    select(EN.c.seq, EN.c.entry).where(EN.c.session_id == _b("sid"), EN.c.seq >= _b("from_seq")).order_by(EN.c.seq)
)
_CONVERSATION = or_(EN.c.type == "user", EN.c.type == "assistant", EN.c.type == "system")
CONVERSATION_FROM = prebuilt(
    select(EN.c.seq, EN.c.entry)
    .where(EN.c.session_id == _b("sid"), EN.c.seq >= _b("from_seq"), _CONVERSATION)
    .order_by(EN.c.seq)
)
LAST_ENTRY = prebuilt(
    select(EN.c.seq, EN.c.type, EN.c.call_id, EN.c.message_id, EN.c.part_id, EN.c.entry)
    .where(EN.c.session_id == _b("sid"))
    .order_by(EN.c.seq.desc())
    .limit(1)
)
DELETE_ENTRY = prebuilt(delete(EN).where(EN.c.session_id == _b("sid"), EN.c.seq == _b("seq")))


# item sessions (OpenAI Agents): where the session's messages stand
_LAST_MESSAGE = prebuilt(select(M.c.id, M.c.seq).where(M.c.session_id == _b("sid")).order_by(M.c.seq.desc()).limit(1))
_LAST_USER = prebuilt(
    select(M.c.id).where(M.c.session_id == _b("sid"), M.c.role == "user").order_by(M.c.seq.desc()).limit(1)
)
_MESSAGE_IDS_FROM = prebuilt(
    select(M.c.id).where(M.c.session_id == _b("sid"), M.c.seq >= _b("from_seq")).order_by(M.c.seq)
)
_USER_BEFORE = prebuilt(
    select(M.c.id)
    .where(M.c.session_id == _b("sid"), M.c.role == "user", M.c.seq < _b("seq"))
    .order_by(M.c.seq.desc())
    .limit(1)
)
_ENTRIES_OF_CALL = prebuilt(
    select(EN.c.seq, EN.c.type, EN.c.part_id, EN.c.message_id)
    .where(EN.c.session_id == _b("sid"), EN.c.call_id == _b("call"))
    .order_by(EN.c.seq)
)
_LAST_ITEMS = prebuilt(
    select(EN.c.seq, EN.c.entry).where(EN.c.session_id == _b("sid")).order_by(EN.c.seq.desc()).limit(_b("limit"))
)
_ITEM_ROWS_FROM = prebuilt(
    select(EN.c.seq, EN.c.message_id, EN.c.part_id, EN.c.entry)
    .where(EN.c.session_id == _b("sid"), EN.c.seq >= _b("from_seq"))
    .order_by(EN.c.seq)
)


# branches (OpenAI Agents): the turns' user items, the start of a message's items, the copy of a branch's items
_ROLE = {"sqlite": func.json_extract(EN.c.entry, "$.role"), "postgresql": EN.c.entry.op("->>")("role")}
_USER_TURN = {
    dialect: prebuilt(
        select(EN.c.seq, EN.c.message_id)
        .where(EN.c.session_id == _b("sid"), role == "user")
        .order_by(EN.c.seq)
        .limit(1)
        .offset(_b("skip"))
    )
    for dialect, role in _ROLE.items()
}
_MESSAGE_BEFORE = prebuilt(
    select(M.c.id).where(M.c.session_id == _b("sid"), M.c.seq < _b("seq")).order_by(M.c.seq.desc()).limit(1)
)
_LAST_ITEM_BEFORE = prebuilt(  # outputs answer calls of earlier messages: only the other items follow message order
    select(EN.c.seq)
    .select_from(EN.join(M, and_(M.c.id == EN.c.message_id, M.c.session_id == EN.c.session_id)))
    .where(
        EN.c.session_id == _b("sid"),
        M.c.seq < _b("mseq"),
        or_(EN.c.type.is_(None), EN.c.type != "function_call_output"),
    )
    .order_by(EN.c.seq.desc())
    .limit(1)
)
_from, _to = bindparam("b_from", type_=String), bindparam("b_to", type_=String)
_answered, _copy = M.alias("answered"), M.alias("copy")
_ANSWERED_AFTER = prebuilt(
    select(_copy.c.id)
    .select_from(
        EN.join(_answered, and_(_answered.c.id == EN.c.message_id, _answered.c.session_id == EN.c.session_id))
        .join(_copy, and_(_copy.c.session_id == _to, _copy.c.seq == _answered.c.seq))
    )
    .where(EN.c.session_id == _from, EN.c.seq > _b("last_seq"))
    .order_by(_copy.c.seq)
    .limit(1)
)
_om, _fm, _pm, _fpm = M.alias("om"), M.alias("fm"), M.alias("pm"), M.alias("fpm")
_op, _fp = P.alias("op"), P.alias("fp")
COPY_ENTRIES = prebuilt(
    insert(EN).from_select(
        ["session_id", "seq", "uuid", "type", "call_id", "message_id", "part_id", "entry"],
        select(
            _to.label("session_id"), EN.c.seq, EN.c.uuid, EN.c.type, EN.c.call_id,
            _fm.c.id.label("message_id"), _fp.c.id.label("part_id"), EN.c.entry,
        )  # fmt: skip
        .select_from(
            EN.outerjoin(_om, and_(_om.c.id == EN.c.message_id, _om.c.session_id == _from))
            .outerjoin(_fm, and_(_fm.c.session_id == _to, _fm.c.seq == _om.c.seq))
            .outerjoin(_op, and_(_op.c.id == EN.c.part_id, _op.c.session_id == _from))
            .outerjoin(_pm, _pm.c.id == _op.c.message_id)
            .outerjoin(_fpm, and_(_fpm.c.session_id == _to, _fpm.c.seq == _pm.c.seq))
            .outerjoin(_fp, and_(_fp.c.message_id == _fpm.c.id, _fp.c.position == _op.c.position))
        )
        .where(EN.c.session_id == _from, EN.c.seq <= _b("last_seq")),
    )
)


@cache
def _uuids_in(count: int, conversation: bool) -> Any:
    """Which of ``count`` uuids (``b_u0`` …) the transcript holds (conversation lines only, if asked): one
    statement per chunk, ``count`` a power of two so few statements exist."""
    query = select(EN.c.uuid).where(EN.c.session_id == _b("sid"), EN.c.uuid.in_([_b(f"u{i}") for i in range(count)]))
    return prebuilt(query.where(_CONVERSATION) if conversation else query)


# -- operations --------------------------------------------------------------------------------------------


def lock(key: TranscriptKey, dialect: str) -> Op:
    """Take the turn of the SDK session ``key`` belongs to (its main transcript and subpaths share it)."""
    if dialect == "postgresql":
        named = f"brutus-transcript:{key.main().digest}".encode("ascii")
        number = int.from_bytes(hashlib.blake2b(named, digest_size=8).digest(), "big", signed=True)
        yield step(_ADVISORY, {"b_key": number}, fetch="all")


def load(key: TranscriptKey) -> Op:
    """The transcript's entries in order, or None when it was never written."""
    row = yield from find(key)
    if row is None:
        return None
    rows = yield step(ENTRIES_FROM, {"b_sid": row.session_id, "b_from_seq": 1}, fetch="all")
    return [r.entry for r in rows]


def find(key: TranscriptKey) -> Op:
    """The transcript's row, or None."""
    params = {"b_sdk": key.sdk, "b_pk": encode_text(key.project_key), "b_ext": encode_text(key.external_id)}
    row = yield step(FIND, {**params, "b_sub": encode_text(key.subpath)}, fetch="first")
    return row


def insert_transcript(key: TranscriptKey, *, now: int, session_id: str | None = None) -> Op:
    """A new transcript, mirrored into ``session_id`` (the key's own session when None: a branch's is a fork)."""
    yield step(
        INSERT_TRANSCRIPT,
        dict(
            session_id=session_id or key.session_id,
            sdk=key.sdk,
            project_key=encode_text(key.project_key),
            external_id=encode_text(key.external_id),
            subpath=encode_text(key.subpath),
            last_seq=0,
            mtime=now,
            summary=None,
            state=None,
            created_at=now,
        ),
    )
    return (yield from find(key))


def save_state(session_id: str, state: Any) -> Op:
    yield step(SAVE_STATE, {"b_sid": session_id, "b_state": encode_json(state)})


def save(session_id: str, *, last_seq: int, mtime: int, summary: Any, state: Any) -> Op:
    params = {
        "b_sid": session_id,
        "b_last_seq": last_seq,
        "b_mtime": mtime,
        "b_summary": encode_json(summary),
        "b_state": encode_json(state),
    }
    yield step(SAVE, params)


def append_entries(
    session_id: str, given: Sequence[JSON], last_seq: int, *, dedupe: bool = True, columns: Sequence[JSON] = ()
) -> Op:
    """Append the entries not in the transcript yet (by uuid, unless ``dedupe`` is off: then every one, and
    no uuid is kept); the new ones with their seqs. ``columns``: per entry, values for ``call_id``,
    ``message_id`` and ``part_id``."""
    rows: list[JSON] = []
    added: list[NewEntry] = []
    uuids = [_uuid(entry) if dedupe else _checked(entry) for entry in given]
    seen = yield from _taken(session_id, [u for u in dict.fromkeys(uuids) if u is not None], conversation=False)
    for index, (entry, uuid) in enumerate(zip(given, uuids, strict=True)):
        if uuid is not None:
            if uuid in seen:
                continue
            seen.add(uuid)
        last_seq += 1
        kind = entry.get("type")
        extra = columns[index] if columns else {}
        rows.append(
            dict(
                session_id=session_id,
                seq=last_seq,
                uuid=uuid,
                type=encode_text(kind) if isinstance(kind, str) else None,
                call_id=_text(extra.get("call_id")),
                message_id=extra.get("message_id"),
                part_id=extra.get("part_id"),
                entry=encode_json(entry),
            )
        )
        added.append(NewEntry(last_seq, entry))
    if rows:
        yield step(INSERT_ENTRIES, rows)
    return added


def entries(session_id: str, *, from_seq: int = 1, conversation: bool = False) -> Op:
    """The entries from ``from_seq`` on (``conversation``: user, assistant and system lines only), in order."""
    query = CONVERSATION_FROM if conversation else ENTRIES_FROM
    rows = yield step(query, {"b_sid": session_id, "b_from_seq": from_seq}, fetch="all")
    return [NewEntry(row.seq, row.entry) for row in rows]


def conversation_uuids(session_id: str, uuids: Sequence[str]) -> Op:
    """Which of ``uuids`` name a user, assistant or system line of the transcript."""
    encoded = {encode_text(uuid): uuid for uuid in uuids}
    found = yield from _taken(session_id, list(encoded), conversation=True)
    return {encoded[uuid] for uuid in found}


def last_entry(session_id: str) -> Op:
    row = yield step(LAST_ENTRY, {"b_sid": session_id}, fetch="first")
    return row


def delete_last_entry(session_id: str, seq: int) -> Op:
    yield step(DELETE_ENTRY, {"b_sid": session_id, "b_seq": seq})


def list_main(sdk: str, project_key: str) -> Op:
    """``(external_id, mtime, summary)`` of every main transcript under ``project_key``."""
    rows = yield step(LIST_MAIN, {"b_sdk": sdk, "b_pk": encode_text(project_key)}, fetch="all")
    return [(text_out(row.external_id), row.mtime, row.summary) for row in rows]


def subkeys(key: TranscriptKey) -> Op:
    params = {"b_sdk": key.sdk, "b_pk": encode_text(key.project_key), "b_ext": encode_text(key.external_id)}
    rows = yield step(SUBKEYS, params, fetch="all")
    return [text_out(row.subpath) for row in rows]


# -- values ------------------------------------------------------------------------------------------------


def _checked(entry: Any) -> None:
    if not isinstance(entry, dict):
        raise InvalidInput(f"a transcript entry must be a JSON object, got {type(entry).__name__}")


def _uuid(entry: Any) -> str | None:
    _checked(entry)
    uuid = entry.get("uuid")
    return encode_text(uuid) if isinstance(uuid, str) else None


def _text(value: Any) -> str | None:
    return encode_text(value) if isinstance(value, str) else None


def _taken(session_id: str, uuids: list[str], *, conversation: bool) -> Any:
    """The (encoded) ``uuids`` the transcript holds."""
    found: set[str] = set()
    for start in range(0, len(uuids), _CHUNK):
        chunk = uuids[start : start + _CHUNK]
        size = 1 << (len(chunk) - 1).bit_length()
        padded = chunk + chunk[:1] * (size - len(chunk))
        params = {"b_sid": session_id, **{f"b_u{i}": value for i, value in enumerate(padded)}}
        rows = yield step(_uuids_in(size, conversation), params, fetch="all")
        found.update(row.uuid for row in rows)
    return found


# -- item sessions (OpenAI Agents) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemsAt:
    """Where an item session stands: its last item (seq, type, message and part ids, the item), its last
    message (id, seq), its last user message, and its compaction boundary (0: none)."""

    last_item: Any
    last_message: Any
    last_user: str | None
    boundary_seq: int


def items_at(session_id: str) -> Op:
    boundary = yield step(st.SESSION_BOUNDARY, {"b_sid": session_id}, fetch="first")
    item = yield step(LAST_ENTRY, {"b_sid": session_id}, fetch="first")
    message = yield step(_LAST_MESSAGE, {"b_sid": session_id}, fetch="first")
    user = yield step(_LAST_USER, {"b_sid": session_id}, fetch="first")
    return ItemsAt(item, message, None if user is None else user.id, boundary.boundary_seq if boundary else 0)


def open_calls(session_id: str, call_ids: Sequence[str]) -> Op:
    """Of ``call_ids``, the calls waiting for their output: call id → (tool part id, message id)."""
    found: dict[str, tuple[str, str]] = {}
    for call_id in dict.fromkeys(call_ids):
        rows = yield step(_ENTRIES_OF_CALL, {"b_sid": session_id, "b_call": encode_text(call_id)}, fetch="all")
        calls = [r for r in rows if r.type == "function_call"]
        if calls and not any(r.part_id == calls[-1].part_id and r.seq > calls[-1].seq for r in rows):
            found[call_id] = (calls[-1].part_id, calls[-1].message_id)
    return found


def last_items(session_id: str, limit: int | None) -> Op:
    """The last ``limit`` items (all when None), in order."""
    if limit is None:
        rows = yield step(ENTRIES_FROM, {"b_sid": session_id, "b_from_seq": 1}, fetch="all")
        return [row.entry for row in rows]
    rows = yield step(_LAST_ITEMS, {"b_sid": session_id, "b_limit": limit}, fetch="all")
    return [row.entry for row in reversed(rows)]


def item_rows(session_id: str, from_seq: int) -> Op:
    """``(seq, message id, part id, item)`` from ``from_seq`` on."""
    rows = yield step(_ITEM_ROWS_FROM, {"b_sid": session_id, "b_from_seq": from_seq}, fetch="all")
    return [(row.seq, row.message_id, row.part_id, row.entry) for row in rows]


def messages_from(session_id: str, message_id: str) -> Op:
    """``message_id``'s seq (0: no such message), the ids of it and the messages after it, and the last user
    message before it."""
    found = yield step(st.MESSAGE_SEQ_IN_SESSION, {"b_mid": message_id, "b_sid": session_id}, fetch="first")
    if found is None:
        return 0, [], None
    rows = yield step(_MESSAGE_IDS_FROM, {"b_sid": session_id, "b_from_seq": found.seq}, fetch="all")
    user = yield step(_USER_BEFORE, {"b_sid": session_id, "b_seq": found.seq}, fetch="first")
    return found.seq, [row.id for row in rows], None if user is None else user.id


# -- branches (OpenAI Agents) --------------------------------------------------------------------------------


def user_turn(session_id: str, turn: int, dialect: str) -> Op:
    """The ``turn``-th item with the role "user" (from 1, as the SDK numbers turns): its seq and message id,
    or None."""
    row = yield step(_USER_TURN[dialect], {"b_sid": session_id, "b_skip": turn - 1}, fetch="first")
    return row


def message_before(session_id: str, message_id: str | None) -> Op:
    """The id of the session's message before ``message_id`` (None when it is the first); ``NotFound`` when
    the session has no such message."""
    found = yield step(st.MESSAGE_SEQ_IN_SESSION, {"b_mid": message_id, "b_sid": session_id}, fetch="first")
    if found is None:
        raise NotFound("message", message_id)
    row = yield step(_MESSAGE_BEFORE, {"b_sid": session_id, "b_seq": found.seq}, fetch="first")
    return None if row is None else row.id


def item_rows_of(session_id: str, message_seq: int) -> Op:
    """``item_rows`` from the first item of the message at ``message_seq`` (the items of the messages from
    there on, and outputs answering calls before it)."""
    before = yield step(_LAST_ITEM_BEFORE, {"b_sid": session_id, "b_mseq": message_seq}, fetch="first")
    return (yield from item_rows(session_id, 1 if before is None else before.seq + 1))


def copy_entries(source: str, target: str, last_seq: int) -> Op:
    """Copy the entries of the transcript of ``source`` up to ``last_seq`` to the transcript of ``target``
    (a fork of ``source``), in the database: their message and part columns name the fork's copies (the
    message at the same seq, the part at the same position)."""
    yield step(COPY_ENTRIES, {"b_from": source, "b_to": target, "b_last_seq": last_seq})


def answered_after(source: str, target: str, last_seq: int) -> Op:
    """The first of the fork ``target``'s messages that an item of ``source`` after ``last_seq`` went into (an
    output answering a call before the branch point), or None."""
    row = yield step(_ANSWERED_AFTER, {"b_from": source, "b_to": target, "b_last_seq": last_seq}, fetch="first")
    return None if row is None else row.id
