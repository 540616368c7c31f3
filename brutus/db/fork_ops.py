"""Forks: a new session holding copies of another's messages up to one of them (``store.fork``).

Rules:

- One transaction, copied in the database: messages, parts, tool states and outputs go by ``INSERT …
  SELECT`` on both backends, never through Python; only the few rows that hold ids inside JSON (compaction
  parts, tier summaries) and the compaction markers are read and written here. On PostgreSQL the reads are
  one snapshot (REPEATABLE READ), so a compaction of the original that completes meanwhile is in the fork
  whole or not at all.
- New ids are made in SQL from the copy's position, so every id inside the copies can be remapped without a
  lookup table: a message's is ``msg_`` + a stamp of this fork (the time part and randomness of a new id) +
  its seq; a part's is ``prt_`` + the stamp + its message's seq + its position. Parent ids, the tool states'
  and outputs' part ids, a compaction part's ``tail_start_id``, a tier summary's ``covers`` and the markers'
  message pointers are remapped; everything else is copied exactly (recorded responses, prune marks,
  packed values, times, estimates, usage and cost).
- Inside ``store.batch()`` the fork is one more write of the batch's transaction, which it reads as it is
  (``fork_flow`` asks; PostgreSQL takes an isolation level only before a transaction's first statement).
- The view is the original's at that point: the same prune marks, and the boundary recomputed from the
  copied rows (``refresh_boundary``), so a fork before a compaction has no boundary. A marker is copied when
  it was resolved by then (completed with its summary inside the copy, or failed); a pending one, or one
  whose summary lies after the point, is left out: a fork never holds another caller's compaction in flight.
- The fork is a top-level session (``parent_id`` None: it is no sub-agent child) with ``forked_from`` /
  ``forked_at``; it shares nothing with the original, so deleting either leaves the other whole. Sub-agent
  sessions and SDK transcripts are not copied.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, String, and_, bindparam, case, cast, insert, literal, select, update

from ..errors import InvalidInput, NotFound
from ..ids import new_id
from . import statements as st
from .convert import loads_json, session_from_row, text_in
from .history_ops import consistent_reads
from .ops import check_id
from .sqlite_driver import prebuilt
from .statements import C, M, O, Op, P, T, refresh_boundary, step

__all__ = ["fork_flow", "fork_session"]

SEQ_BASE = 100_000_000  # seq + this, as text: nine digits for any seq below 900 million (a fixed width)
POSITION_BASE = 10_000  # position + this, as text, after the seq: unique since the seq part has a fixed width

_sid, _cut = bindparam("b_sid", type_=String), bindparam("b_cut", type_=Integer)
_stamp, _new = bindparam("b_stamp", type_=String), bindparam("b_new", type_=String)


def _text(value: Any) -> Any:
    return cast(value, String)


def _message_id(seq: Any) -> Any:
    """The fork's id of the original's message at ``seq`` (SQL)."""
    return literal("msg_") + _stamp + _text(seq + SEQ_BASE)


def _part_id(seq: Any, position: Any) -> Any:
    return literal("prt_") + _stamp + _text(seq + SEQ_BASE) + _text(position + POSITION_BASE)


def message_id_of(stamp: str, seq: int) -> str:
    """``_message_id`` in Python, for the rows remapped here."""
    return f"msg_{stamp}{seq + SEQ_BASE}"


_copied = and_(M.c.session_id == _sid, M.c.seq <= _cut)  # the original's messages the fork takes
_parent = M.alias("parent")
_parent_join = and_(_parent.c.id == M.c.parent_id, _parent.c.session_id == _sid, _parent.c.seq <= _cut)


def _columns(table: Any, replaced: dict[str, Any]) -> list[Any]:
    return [replaced.get(c.name, c).label(c.name) if c.name in replaced else c for c in table.c]


COPY_MESSAGES = prebuilt(
    insert(M).from_select(
        [c.name for c in M.c],
        select(
            *_columns(
                M,
                {
                    "id": _message_id(M.c.seq),
                    "session_id": _new,
                    "parent_id": case((_parent.c.id.is_not(None), _message_id(_parent.c.seq)), else_=M.c.parent_id),
                },
            )
        )
        .select_from(M.outerjoin(_parent, _parent_join))
        .where(_copied),
    )
)

_parts_copied = P.join(M, and_(M.c.id == P.c.message_id, _copied))

COPY_PARTS = prebuilt(
    insert(P).from_select(
        [c.name for c in P.c],
        select(
            *_columns(
                P,
                {
                    "id": _part_id(M.c.seq, P.c.position),
                    "session_id": _new,
                    "message_id": _message_id(M.c.seq),
                },
            )
        ).select_from(_parts_copied),
    )
)

COPY_TOOL_STATES = prebuilt(
    insert(T).from_select(
        [c.name for c in T.c],
        select(*_columns(T, {"part_id": _part_id(M.c.seq, P.c.position), "session_id": _new})).select_from(
            T.join(_parts_copied, P.c.id == T.c.part_id)
        ),
    )
)

COPY_OUTPUTS = prebuilt(
    insert(O).from_select(
        [c.name for c in O.c],
        select(*_columns(O, {"part_id": _part_id(M.c.seq, P.c.position)})).select_from(
            O.join(_parts_copied, P.c.id == O.c.part_id)
        ),
    )
)

# the few rows holding message ids inside their JSON: compaction parts (tail_start_id) and tier summaries
# (covers), as copied; and the seq of every message id they name
COMPACTION_PARTS = prebuilt(
    select(P.c.id, P.c.data).where(P.c.session_id == _new, P.c.type == "compaction")
)
TIER_SUMMARIES = prebuilt(
    select(M.c.id, M.c.metadata).where(M.c.session_id == _new, M.c.synthetic.is_(True), M.c.agent == "compaction")
)
SEQS = prebuilt(select(M.c.id, M.c.seq).where(_copied))
SET_PART_DATA = prebuilt(update(P).where(P.c.id == bindparam("b_pid")).values(data=bindparam("b_data")))
SET_METADATA = prebuilt(update(M).where(M.c.id == bindparam("b_mid")).values(metadata=bindparam("b_metadata")))
MARKERS = prebuilt(select(C).where(C.c.session_id == _sid, C.c.status != "pending").order_by(C.c.created_at, C.c.id))
INSERT_MARKER = prebuilt(insert(C))
ORIGINAL_MESSAGE = prebuilt(select(M.c.seq).where(M.c.id == bindparam("b_mid"), M.c.session_id == _sid))
ANY_MESSAGE = prebuilt(select(M.c.session_id).where(M.c.id == bindparam("b_mid")))
LAST_MESSAGE = prebuilt(select(M.c.id, M.c.seq).where(M.c.session_id == _sid).order_by(M.c.seq.desc()).limit(1))


def fork_flow(session_id: Any, message_id: Any, *, title: str | None, dialect: str, clock: Any) -> Any:
    """``store.fork`` as a flow (``brutus.flows``): the copy in a transaction of its own (one snapshot), or in
    the batch's."""
    from ..flows import InBatch, Tx

    in_batch = yield InBatch()
    op = fork_session(session_id, message_id, title=title, dialect=dialect, now=clock(), snapshot=not in_batch)
    return (yield Tx(op))


def fork_session(
    session_id: Any, message_id: Any, *, title: str | None, dialect: str, now: int, snapshot: bool = True
) -> Op:
    """Copy ``session_id``'s messages up to ``message_id`` (None: all) into a new session; the new ``Session``.
    ``snapshot``: the transaction is the operation's own, so its reads may be made one snapshot."""
    session_id = check_id("session", session_id)
    if title is not None and not isinstance(title, str):
        raise InvalidInput(f"session title must be a string, got {type(title).__name__}")
    if snapshot:
        yield from consistent_reads(dialect)
    original = yield step(st.SESSION, {"b_sid": session_id}, fetch="first")
    if original is None:
        raise NotFound("session", session_id)
    cut, at = yield from _cut_at(session_id, message_id)
    new_session = new_id("session", now)
    stamp = new_id("message", now)[4:21]  # the time part and five random characters
    values = dict(
        id=new_session,
        parent_id=None,
        title=text_in(title) if title is not None else original.title,
        directory=original.directory,
        created_at=now,
        updated_at=now,
        archived_at=None,
        last_seq=cut,
        boundary_message_id=None,
        boundary_seq=0,
        forked_from=session_id,
        forked_at=at,
    )
    yield step(st.INSERT_SESSION, values)
    params = {"b_sid": session_id, "b_cut": cut, "b_stamp": stamp, "b_new": new_session}
    for statement in (COPY_MESSAGES, COPY_PARTS, COPY_TOOL_STATES, COPY_OUTPUTS):
        yield step(statement, params)
    parts = yield step(COMPACTION_PARTS, params, fetch="all")
    summaries = yield step(TIER_SUMMARIES, params, fetch="all")
    markers = yield step(MARKERS, params, fetch="all")
    if parts or summaries or markers:  # the seq of every copied message, read once for the remaps
        seqs = {r.id: r.seq for r in (yield step(SEQS, params, fetch="all"))}
        yield from _remap_json(parts, summaries, seqs, stamp)
        yield from _copy_markers(markers, seqs, stamp, new_session)
    yield from refresh_boundary(new_session)
    row = yield step(st.SESSION, {"b_sid": new_session}, fetch="first")
    return session_from_row(row)


def _cut_at(session_id: str, message_id: Any) -> Op:
    """The last seq the fork copies and the original's message there (None, None for an empty session)."""
    if message_id is None:
        last = yield step(LAST_MESSAGE, {"b_sid": session_id}, fetch="first")
        return (last.seq, last.id) if last is not None else (0, None)
    message_id = check_id("message", message_id)
    found = yield step(ORIGINAL_MESSAGE, {"b_sid": session_id, "b_mid": message_id}, fetch="first")
    if found is not None:
        return found.seq, message_id
    elsewhere = yield step(ANY_MESSAGE, {"b_mid": message_id}, fetch="first")
    if elsewhere is None:
        raise NotFound("message", message_id)
    raise InvalidInput(f"message {message_id} belongs to session {elsewhere.session_id}, not to {session_id}")


def _remap_json(parts: list[Any], summaries: list[Any], seqs: dict[str, int], stamp: str) -> Op:
    """The message ids inside the copies' JSON: a compaction part's ``tail_start_id``, a tier summary's
    ``covers.from_id`` / ``to_id``."""

    def remap(value: Any) -> Any:
        return message_id_of(stamp, seqs[value]) if isinstance(value, str) and value in seqs else value

    for row in parts:
        data = _json(row.data)
        if isinstance(data, dict) and data.get("tail_start_id") in seqs:
            yield step(SET_PART_DATA, {"b_pid": row.id, "b_data": {**data, "tail_start_id": remap(data["tail_start_id"])}})
    for row in summaries:
        metadata = _json(row.metadata)
        covers = metadata.get("covers") if isinstance(metadata, dict) else None
        if isinstance(covers, dict) and (covers.get("from_id") in seqs or covers.get("to_id") in seqs):
            covers = {**covers, "from_id": remap(covers.get("from_id")), "to_id": remap(covers.get("to_id"))}
            yield step(SET_METADATA, {"b_mid": row.id, "b_metadata": {**metadata, "covers": covers}})


def _copy_markers(markers: list[Any], seqs: dict[str, int], stamp: str, new_session: str) -> Op:
    """The original's compaction markers resolved inside the copy (module rules), under new ids."""
    for marker in markers:
        if marker.user_message_id not in seqs:
            continue  # after the point
        if marker.status == "completed" and marker.summary_message_id not in seqs:
            continue  # its summary came after the point: in flight there
        values = {c.name: getattr(marker, c.name) for c in C.c}
        for column in ("user_message_id", "summary_message_id", "tail_start_id"):
            if values[column] in seqs:
                values[column] = message_id_of(stamp, seqs[values[column]])
        boundary = _json(values["boundary"])
        if isinstance(boundary, dict) and "session_id" in boundary:
            values["boundary"] = {**boundary, "session_id": new_session}
        values.update(id=new_id("compaction"), session_id=new_session)
        yield step(INSERT_MARKER, values)


def _json(value: Any) -> Any:
    return loads_json(value) if isinstance(value, (str, bytes)) else value
