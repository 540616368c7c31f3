"""The SQL brutus runs, in one place, and the ``Step`` protocol of its operations.

Operations (``ops``, ``compaction_ops``) are generators: they yield ``Step``s (a statement, its parameters
and how to fetch the result), receive the fetched result, and return the API value. ``SessionStore`` runs
them on SQLite's driver connection (``fast``) or a SQLAlchemy ``Connection``, ``AsyncSessionStore`` on an
``AsyncConnection``; each operation runs inside one transaction, so one that raises half way writes nothing.

Statements are built once, here, with named parameters (``prebuilt``), so running one costs no SQL
construction or compilation. Parameter names never equal a column name of the table a statement updates
(SQLAlchemy reserves those for its SET clause): they start with ``b_``.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import cache
from typing import Any, Literal, NamedTuple

from sqlalchemy import ARRAY, String, Text, and_, any_, bindparam, delete, func, insert, literal_column, null, select, tuple_, update
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement, Executable
from sqlalchemy.sql.visitors import InternalTraversal

from .sqlite_driver import prebuilt
from .tables import CompactionRow, MessageRow, PartRow, SessionRow, ToolOutputRow, ToolStateRow

__all__ = [
    "C",
    "M",
    "MESSAGE_COLUMNS",
    "O",
    "Op",
    "P",
    "S",
    "Step",
    "T",
    "refresh_boundary",
    "select_parts",
    "step",
]

# "raw": rows as the driver gives them (the SQLite driver: plain tuples, JSON as text); read by position.
Fetch = Literal["all", "raw", "first", "rowcount", "none"]


class Step(NamedTuple):  # a tuple: built at C speed, some twenty times per agent step
    statement: Executable
    params: dict[str, Any] | list[dict[str, Any]] | None = None
    fetch: Fetch = "none"


Op = Generator[Step, Any, Any]


def step(statement: Executable, params: Any = None, fetch: Fetch = "none") -> Step:
    return Step(statement, params, fetch)


S, M, P, T, O, C = (
    SessionRow.__table__,
    MessageRow.__table__,
    PartRow.__table__,
    ToolStateRow.__table__,
    ToolOutputRow.__table__,
    CompactionRow.__table__,
)

MESSAGE_COLUMNS = [
    M.c.id,
    M.c.session_id,
    M.c.seq,
    M.c.role,
    M.c.parent_id,
    M.c.agent,
    M.c.mode,
    M.c.provider_id,
    M.c.model_id,
    M.c.summary,
    M.c.synthetic,
    M.c.finish,
    M.c.error,
    M.c.cost,
    M.c.tokens_input,
    M.c.tokens_output,
    M.c.tokens_reasoning,
    M.c.tokens_cache_read,
    M.c.tokens_cache_write,
    M.c.metadata.label("meta"),
    M.c.created_at,
    M.c.completed_at,
]


class JSONText(ColumnElement[str]):
    """A JSON column read as its text: PostgreSQL's ``CAST(… AS TEXT)`` of the JSONB, SQLite's stored text (or
    packed bytes) as it is. The load path decodes the texts itself (``convert.build_history``, one
    ``json.loads`` per column), and rows holding text compare exactly (``convert.reuse_history``)."""

    inherit_cache = True
    type = Text()
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]

    def __init__(self, column: Any) -> None:
        self.column = column


@compiles(JSONText)
def _json_text(element: JSONText, compiler: Any, **kw: Any) -> str:
    return compiler.process(element.column, **kw)


@compiles(JSONText, "postgresql")
def _json_text_pg(element: JSONText, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.column, **kw)} AS TEXT)"


def select_parts(outputs: Literal["all", "unpruned", "none"] = "all", *, json_text: bool = False) -> Any:
    """Parts joined with their tool state and output; the caller adds the WHERE clause.

    ``outputs="unpruned"`` does not read the output of a pruned part; ``"none"`` reads no output at all.
    ``json_text``: the JSON columns as their text (``JSONText``).
    """
    source = P.outerjoin(T, T.c.part_id == P.c.id)
    if outputs == "none":
        output = null().label("output")
    else:
        source = source.outerjoin(O, _output_join(outputs))
        output = O.c.output
    data, tools = (JSONText(P.c.data).label("data"), _TOOL_TEXT_COLUMNS) if json_text else (P.c.data, _TOOL_COLUMNS)
    own = (P.c.id, P.c.session_id, P.c.message_id, P.c.position, P.c.type, data)
    return select(*own, *tools, output).select_from(source)


# The tool columns of a part row, in the order ``convert.build_history`` reads them (the output follows).
_TOOL_COLUMNS = (
    T.c.call_id,
    T.c.tool,
    T.c.status,
    T.c.input,
    T.c.title,
    T.c.metadata.label("tool_meta"),
    T.c.error.label("tool_error"),
    T.c.started_at,
    T.c.ended_at,
    T.c.compacted_at,
)
_TOOL_TEXT_COLUMNS = (  # the same with the JSON ones as text (``JSONText``)
    *_TOOL_COLUMNS[:3],
    JSONText(T.c.input).label("input"),
    T.c.title,
    JSONText(T.c.metadata).label("tool_meta"),
    *_TOOL_COLUMNS[6:],
)


def _output_join(outputs: Literal["all", "unpruned"]) -> Any:
    """How a tool state joins its output: always, or only while the part is not pruned."""
    joined = T.c.part_id == O.c.part_id
    return and_(joined, T.c.compacted_at.is_(None)) if outputs == "unpruned" else joined


def _b(name: str) -> Any:
    return bindparam(f"b_{name}")


def _tool_rows_by_session(outputs: Literal["all", "unpruned"]) -> Any:
    """A session's tool states with their outputs: the part id, then the tool columns of ``select_parts``."""
    return prebuilt(
        select(T.c.part_id, *_TOOL_TEXT_COLUMNS, O.c.output)
        .select_from(T.outerjoin(O, _output_join(outputs)))
        .where(T.c.session_id == _b("sid"))
    )


# -- sessions
SESSION = prebuilt(select(S).where(S.c.id == _b("sid")))
SESSION_ID = prebuilt(select(S.c.id).where(S.c.id == _b("sid")))
SESSION_FOR_UPDATE = prebuilt(select(S.c.last_seq, S.c.boundary_seq).where(S.c.id == _b("sid")).with_for_update())
SESSION_BOUNDARY = prebuilt(select(S.c.boundary_seq).where(S.c.id == _b("sid")))
# and whether a compaction marker is pending (the index on compactions' session and status)
SESSION_BOUNDARY_PENDING = prebuilt(
    select(
        S.c.boundary_seq,
        select(C.c.id).where(C.c.session_id == S.c.id, C.c.status == "pending").exists().label("pending"),
    ).where(S.c.id == _b("sid"))
)
INSERT_SESSION = prebuilt(insert(S))
DELETE_SESSION = prebuilt(delete(S).where(S.c.id == _b("sid")))
NEXT_SEQ = prebuilt(
    update(S).where(S.c.id == _b("sid")).values(last_seq=S.c.last_seq + 1, updated_at=_b("now")).returning(S.c.last_seq)
)
TOUCH_SESSION = prebuilt(update(S).where(S.c.id == _b("sid")).values(updated_at=_b("now")))
RENAME_SESSION = prebuilt(update(S).where(S.c.id == _b("sid")).values(title=_b("title"), updated_at=_b("now")))
MOVE_SESSION = prebuilt(update(S).where(S.c.id == _b("sid")).values(directory=_b("directory"), updated_at=_b("now")))
# rewind: the history ends before seq ``b_seq + 1``, and that seq is handed out next
REWIND_SESSION = prebuilt(update(S).where(S.c.id == _b("sid")).values(last_seq=_b("seq"), updated_at=_b("now")))
SET_BOUNDARY = prebuilt(
    update(S).where(S.c.id == _b("sid")).values(boundary_message_id=_b("boundary_id"), boundary_seq=_b("start"))
)


@cache
def session_list(
    *, parent: bool, include_archived: bool, after: Literal["id", "position"] | None, limit: bool, forks: bool = False
) -> Executable:
    """The session list, most recently updated first, ties by id: of parent ``b_parent``; the forks of
    ``b_forked_from`` (``ix_sessions_forked_from``, 0010); after a position
    (a range of ``ix_sessions_updated_at_id``, 0007): session ``b_after``'s as it is now (``"id"``: looked up in
    the same statement, no row when there is no such session), or (``b_updated``, ``b_after``) as given
    (``"position"``); ``b_limit`` rows."""
    query = select(S)
    if parent:
        query = query.where(S.c.parent_id == _b("parent"))
    if forks:
        query = query.where(S.c.forked_from == _b("forked_from"))
    if not include_archived:
        query = query.where(S.c.archived_at.is_(None))
    if after is not None:
        inner = S.alias("after")
        updated = select(inner.c.updated_at).where(inner.c.id == _b("after")).scalar_subquery()
        query = query.where(
            tuple_(S.c.updated_at, S.c.id) < tuple_(updated if after == "id" else _b("updated"), _b("after"))
        )
    query = query.order_by(S.c.updated_at.desc(), S.c.id.desc())
    return prebuilt(query.limit(_b("limit")) if limit else query)

# -- messages
MESSAGE_ID = prebuilt(select(M.c.id).where(M.c.id == _b("mid")))
MESSAGE = prebuilt(select(*MESSAGE_COLUMNS).where(M.c.id == _b("mid")))
MESSAGE_SEQ_IN_SESSION = prebuilt(select(M.c.seq).where(M.c.id == _b("mid"), M.c.session_id == _b("sid")))
INSERT_MESSAGE = prebuilt(insert(M))
# parts, tool states and outputs go with their messages (foreign keys, ON DELETE CASCADE)
DELETE_MESSAGES_FROM = prebuilt(delete(M).where(M.c.session_id == _b("sid"), M.c.seq >= _b("from_seq")))
# the history and view reads (``history_ops.load_messages``) take the JSON columns as text (``JSONText``)
_MESSAGE_TEXT_COLUMNS = [
    *MESSAGE_COLUMNS[:12],
    JSONText(M.c.error).label("error"),
    *MESSAGE_COLUMNS[13:19],
    JSONText(M.c.metadata).label("meta"),
    *MESSAGE_COLUMNS[20:],
]
# the session's newest assistant message, and the session's boundary (None: no session)
NEWEST_ASSISTANT = prebuilt(
    select(*MESSAGE_COLUMNS, select(S.c.boundary_seq).where(S.c.id == _b("sid")).scalar_subquery().label("boundary_seq"))
    .where(M.c.session_id == _b("sid"), M.c.role == "assistant")
    .order_by(M.c.seq.desc())
    .limit(1)
)
MESSAGES = prebuilt(select(*_MESSAGE_TEXT_COLUMNS).where(M.c.session_id == _b("sid")).order_by(M.c.seq))
MESSAGES_FROM = prebuilt(
    select(*_MESSAGE_TEXT_COLUMNS).where(M.c.session_id == _b("sid"), M.c.seq >= _b("from_seq")).order_by(M.c.seq)
)
FINISH_MESSAGE = prebuilt(
    update(M)
    .where(M.c.id == _b("mid"))
    .values(
        finish=_b("finish"),
        cost=_b("cost"),
        error=bindparam("b_error", type_=M.c.error.type),
        completed_at=_b("now"),
        tokens_input=_b("tokens_input"),
        tokens_output=_b("tokens_output"),
        tokens_reasoning=_b("tokens_reasoning"),
        tokens_cache_read=_b("tokens_cache_read"),
        tokens_cache_write=_b("tokens_cache_write"),
    )
    .returning(*MESSAGE_COLUMNS)
)
NEXT_POSITION = prebuilt(
    update(M)
    .where(M.c.id == _b("mid"))
    .values(part_count=M.c.part_count + 1, token_estimate=M.c.token_estimate + _b("tokens"))
    .returning(M.c.part_count, M.c.session_id)
)
ADD_MESSAGE_TOKENS = prebuilt(
    update(M).where(M.c.id == _b("mid")).values(token_estimate=M.c.token_estimate + _b("delta"))
)

# -- parts and tool states
PART_ID = prebuilt(select(P.c.id).where(P.c.id == _b("pid")))
TAKEN_IDS_CHUNK = 256


@cache
def taken_ids(kind: Literal["message", "part"], count: int) -> Executable:
    """Which of ``count`` ids (``b_id0`` …) exist already: one statement per chunk of ids to check, not one
    per id. ``count`` is a power of two up to ``TAKEN_IDS_CHUNK`` (callers pad), so few statements exist."""
    return prebuilt(_taken(kind, count))


def _taken(kind: Literal["message", "part"], count: int) -> Any:
    table = M if kind == "message" else P
    return select(table.c.id).where(table.c.id.in_([_b(f"id{i}") for i in range(count)]))


@cache
def next_seqs(kind: Literal["message", "part"] | None = None, count: int = 0) -> Executable:
    """append_messages: the seqs of ``b_count`` new messages end at the returned last_seq. Given ``kind`` it
    also checks ``count`` ids as ``taken_ids`` does, in the same statement: when one exists it updates
    nothing and returns no row, as for a missing session."""
    query = update(S).where(S.c.id == _b("sid"))
    if kind is not None:
        query = query.where(~_taken(kind, count).exists())
    values = query.values(last_seq=S.c.last_seq + _b("count"), updated_at=_b("now"))
    return prebuilt(values.returning(S.c.last_seq))


# PostgreSQL: every id given, whatever their number, in one array parameter per kind (``b_message_ids``,
# ``b_part_ids``): one statement, no chunks, no statement text growing with the ids. Used where it saves a
# statement (``bulk_ops._arrays_save``): under row-level security it is planned afresh each call.
def _taken_any(kind: Literal["message", "part"]) -> Any:
    table = M if kind == "message" else P
    return select(table.c.id).where(table.c.id == any_(bindparam(f"b_{kind}_ids", type_=ARRAY(String))))


TAKEN_IDS_ANY = {kind: prebuilt(_taken_any(kind)) for kind in ("message", "part")}
NEXT_SEQS_IDS_FREE = prebuilt(
    update(S)
    .where(S.c.id == _b("sid"), ~_taken_any("message").exists(), ~_taken_any("part").exists())
    .values(last_seq=S.c.last_seq + _b("count"), updated_at=_b("now"))
    .returning(S.c.last_seq)
)

INSERT_PART = prebuilt(insert(P))
INSERT_TOOL_STATE = prebuilt(insert(T))
INSERT_TOOL_OUTPUT = prebuilt(insert(O))
# a tool part as a change starts from it (``ops.ToolRow``)
_TOOL_CURRENT_COLUMNS = (
    T.c.status,
    T.c.call_id,
    T.c.tool,
    T.c.input,
    T.c.title,
    T.c.metadata.label("tool_meta"),
    T.c.error,
    T.c.started_at,
    T.c.ended_at,
    T.c.compacted_at,
    P.c.tokens,
    P.c.message_id,
    P.c.session_id,
)
TOOL_CURRENT = prebuilt(
    select(*_TOOL_CURRENT_COLUMNS)
    .select_from(T.join(P, P.c.id == T.c.part_id))
    .where(T.c.part_id == _b("pid"))
    # FOR NO KEY UPDATE on PostgreSQL: an insert whose foreign key names the part (the background indexer's
    # search_vectors) takes KEY SHARE on it, which FOR UPDATE waits for (and deadlocks with across two parts)
    .with_for_update(key_share=True)
)
# a message's tool parts, locked as TOOL_CURRENT locks one, in position order; the part id last
TOOLS_OF_MESSAGE = prebuilt(
    select(*_TOOL_CURRENT_COLUMNS, T.c.part_id)
    .select_from(T.join(P, P.c.id == T.c.part_id))
    .where(P.c.message_id == _b("mid"))
    .order_by(P.c.position)
    .with_for_update(key_share=True)
)
UPDATE_TOOL_STATE = prebuilt(
    update(T)
    .where(T.c.part_id == _b("pid"))
    .values(
        status=_b("status"),
        input=bindparam("b_input", type_=T.c.input.type),
        output_tokens=_b("output_tokens"),
        title=_b("title"),
        metadata=bindparam("b_metadata", type_=T.c.metadata.type),
        error=_b("error"),
        started_at=_b("started_at"),
        ended_at=_b("ended_at"),
    )
)
UPDATE_PART_TOKENS = prebuilt(update(P).where(P.c.id == _b("pid")).values(tokens=_b("tokens"), updated_at=_b("now")))
PARTS_OF_MESSAGE = prebuilt(select_parts().where(P.c.message_id == _b("mid")).order_by(P.c.position))
# A whole session loads in two plain scans (parts, then tool states with outputs) rather than one join: the
# join probes tool_states and tool_outputs for every text part. Parts message by message in position order,
# the order of the parts' session index (0006): neither SQLite nor build_history sorts.
SESSION_PARTS = prebuilt(
    select(P.c.id, P.c.session_id, P.c.message_id, P.c.position, P.c.type, JSONText(P.c.data).label("data"))
    .where(P.c.session_id == _b("sid"))
    .order_by(P.c.message_id, P.c.position)
)
SESSION_TOOLS = _tool_rows_by_session("all")
SESSION_TOOLS_UNPRUNED = _tool_rows_by_session("unpruned")
PARTS_FROM = prebuilt(
    select_parts("unpruned", json_text=True)
    .join(M, M.c.id == P.c.message_id)
    .where(M.c.session_id == _b("sid"), M.c.seq >= _b("from_seq"))
)
# a whole history in chunks (``history_ops.history_in_chunks``): the next messages after a seq, the parts of
# the messages in a seq range, and the times of the whole history
@cache
def messages_after(limit: int) -> Executable:
    query = select(*MESSAGE_COLUMNS).where(M.c.session_id == _b("sid"), M.c.seq > _b("after"))
    return prebuilt(query.order_by(M.c.seq).limit(limit))


PARTS_BETWEEN = prebuilt(
    select_parts("all")
    .join(M, M.c.id == P.c.message_id)
    .where(M.c.session_id == _b("sid"), M.c.seq > _b("after"), M.c.seq <= _b("upto"))
)
HISTORY_TIMES = prebuilt(
    select(func.max(M.c.created_at).label("created"), func.max(M.c.completed_at).label("completed")).where(
        M.c.session_id == _b("sid")
    )
)
PART_WITHOUT_OUTPUT = prebuilt(select_parts("none").where(P.c.id == _b("pid")))
# the parts of a session marked pruned at one instant (the tool_states index on session_id, compacted_at)
PARTS_PRUNED_AT = prebuilt(select_parts("none").where(T.c.session_id == _b("sid"), T.c.compacted_at == _b("now")))

# -- prune
_tool_parts = P.alias("tp")
PRUNE_ROWS = prebuilt(
    select(M.c.seq, M.c.role, M.c.summary, _tool_parts.c.id, T.c.tool, T.c.status, T.c.output_tokens, T.c.compacted_at)
    .select_from(
        M.outerjoin(_tool_parts, (_tool_parts.c.message_id == M.c.id) & (_tool_parts.c.type == "tool")).outerjoin(
            T, T.c.part_id == _tool_parts.c.id
        )
    )
    .where(M.c.session_id == _b("sid"), M.c.seq >= _b("from_seq"))
    .order_by(M.c.seq, _tool_parts.c.position)
)
MARK_PRUNED = prebuilt(
    update(T).where(T.c.part_id == _b("pid"), T.c.compacted_at.is_(None)).values(compacted_at=_b("now"))
)

# -- compactions
FAIL_PENDING_COMPACTIONS = prebuilt(
    update(C)
    .where(C.c.session_id == _b("sid"), C.c.status == "pending")
    .values(status="failed", error=_b("error"), completed_at=_b("now"))
)
LAST_COMPLETED_SUMMARY_SEQ = prebuilt(
    select(M.c.seq)
    .select_from(C.join(M, M.c.id == C.c.summary_message_id))
    .where(C.c.session_id == _b("sid"), C.c.status == "completed")
    .order_by(M.c.seq.desc())
    .limit(1)
)
COUNT_NEW_MESSAGES = prebuilt(
    select(func.count().label("n"))
    .select_from(M)
    .where(M.c.session_id == _b("sid"), M.c.seq > _b("after_seq"), M.c.synthetic.is_(False))
)
FIRST_MESSAGE_AFTER = prebuilt(
    select(M.c.id).where(M.c.session_id == _b("sid"), M.c.seq > _b("after_seq")).order_by(M.c.seq).limit(1)
)
INSERT_COMPACTION = prebuilt(insert(C))
# the markers whose compaction or summary message a rewind deletes
DELETE_COMPACTIONS_FROM = prebuilt(
    delete(C).where(
        C.c.session_id == _b("sid"),
        select(M.c.id)
        .where(
            M.c.session_id == _b("sid"),
            M.c.seq >= _b("from_seq"),
            (M.c.id == C.c.user_message_id) | (M.c.id == C.c.summary_message_id),
        )
        .exists(),
    )
)
FAIL_COMPACTION = prebuilt(
    update(C)
    .where(C.c.id == _b("cid"), C.c.status == "pending")
    .values(status="failed", error=_b("error"), pre_tokens=_b("pre"), post_tokens=_b("post"), completed_at=_b("now"))
)
COMPLETE_COMPACTION = prebuilt(
    update(C)
    .where(C.c.id == _b("cid"), C.c.status == "pending")
    .values(
        status="completed",
        user_message_id=_b("user_id"),
        summary_message_id=_b("summary_id"),
        tail_start_id=_b("tail_id"),
        pre_tokens=_b("pre"),
        post_tokens=_b("post"),
        model=_b("model"),
        cost=_b("cost"),
        fallback_used=_b("fallback"),
        boundary=bindparam("b_boundary", type_=C.c.boundary.type),
        instructions=_b("instructions"),
        completed_at=_b("now"),
    )
)
COMPACTIONS = prebuilt(select(C).where(C.c.session_id == _b("sid")).order_by(C.c.created_at, C.c.id))

# -- boundaries
_a, _u = M.alias("a"), M.alias("u")
NEWEST_BOUNDARY = prebuilt(
    select(_u.c.id, _u.c.seq, P.c.data)
    .select_from(
        _a.join(_u, _u.c.id == _a.c.parent_id).join(P, and_(P.c.message_id == _u.c.id, P.c.type == "compaction"))
    )
    .where(
        _a.c.session_id == _b("sid"),
        _a.c.role == "assistant",
        _a.c.summary.is_(True),
        _a.c.finish.is_not(None),
        _a.c.error.is_(None),
        _u.c.session_id == _b("sid"),
        _u.c.role == "user",
        _u.c.seq < _a.c.seq,
    )
    # ``u.seq + 0``: ordered by an expression, not by an index, so SQLite starts from the session's few
    # summaries (the summary index) instead of walking every message newest first, probing each for a
    # summary after it: that walk read the whole history of a session without a boundary yet.
    .order_by((_u.c.seq + literal_column("0")).desc(), P.c.position)
    .limit(1)
)


def refresh_boundary(session_id: str) -> Op:
    """Recompute the session's cached boundary from the rows (the same rule as ``filter_compacted``).

    The boundary is the newest user message holding a ``compaction`` part whose summary (an assistant
    message with summary set, a finish and no error, written after it) exists; the view starts there, or at
    the part's ``tail_start_id`` when that message lies before it.
    """
    found = yield step(NEWEST_BOUNDARY, {"b_sid": session_id}, fetch="first")
    boundary_id, start = None, 0
    if found is not None:
        boundary_id, start = found.id, found.seq
        tail_id = (found.data or {}).get("tail_start_id")
        if tail_id:
            tail = yield step(MESSAGE_SEQ_IN_SESSION, {"b_mid": tail_id, "b_sid": session_id}, fetch="first")
            if tail is not None and tail.seq < start:
                start = tail.seq
    yield step(SET_BOUNDARY, {"b_sid": session_id, "b_boundary_id": boundary_id, "b_start": start})
    return boundary_id
