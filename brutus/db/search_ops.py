"""The search query: the index finds the matching documents, the rows say where they are, the snippets are cut
from the stored text (``brutus.search`` holds the rules; migration 0004 the index).

- SQLite: one FTS5 ``MATCH`` on ``search_index``; ``search_keys`` maps its rowids to (part, kind). Each word
  goes in as an FTS5 string (``"…"``, quotes doubled), so the user's text is never FTS5 syntax.
- SQLite's index is filled off the write path (migration 0005): ``index_pending`` puts every document written
  since into it, in one write transaction, which a store runs before each search and ``gc`` after its VACUUM
  (``keyless=True``: every document without a key, as VACUUM may renumber rows). The documents still pending
  when the query runs (a read-only store, or writes since) are read from the view ``search_pending`` and
  matched here with the same tokens (``brutus.search.matches``), so a search sees every committed write.
- PostgreSQL: each table's GIN expression index answers ``@@`` a tsquery built from the words with
  ``phraseto_tsquery`` (text in, never query syntax), combined with ``&&``; the three results are a UNION ALL.

Hits come newest first (message time, then message, position and kind), at most ``limit``, then one primary-key
read per hit for its text. Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    Integer,
    bindparam,
    column,
    func,
    literal,
    literal_column,
    or_,
    select,
    table,
    text,
    union_all,
)

from ..errors import InvalidInput, NotFound
from ..search import SearchHit, make_snippet, query_words
from ..search import matches as text_matches
from .convert import text_out
from .sqlite_driver import prebuilt
from .ops import check_id
from .statements import SESSION_ID, M, O, Op, P, S, T, step
from .tables import PG_SEARCH_DOCUMENTS

__all__ = ["DEFAULT_LIMIT", "index_pending", "optimize_index", "search"]

DEFAULT_LIMIT = 50
FIELDS = {0: "text", 1: "call", 2: "output"}
_KEYS = table("search_keys", column("key", Integer), column("part_id"), column("kind", Integer))
_FTS = table("search_index", column("rowid", Integer))
# SQLite: the documents not in the FTS5 index yet (migration 0005), matched in Python
_PENDING = prebuilt(text("SELECT part_id, kind, body FROM search_pending").columns(column("part_id"), column("kind", Integer), column("body")))
_ANY_PENDING = prebuilt(text("SELECT 1 FROM search_pending LIMIT 1").columns(column("1")))
_HAS_INDEX = prebuilt(text("SELECT 1 FROM sqlite_master WHERE name = 'search_pending'").columns(column("1")))
_NEWEST_KEY = prebuilt(text("SELECT coalesce(max(key), 0) AS key FROM search_keys").columns(column("key", Integer)))
_KEY_PENDING = prebuilt(text("INSERT OR IGNORE INTO search_keys(part_id, kind) SELECT part_id, kind FROM search_pending"))
_KEY_KEYLESS = prebuilt(
    text(
        "INSERT OR IGNORE INTO search_keys(part_id, kind) "
        "SELECT id, 0 FROM parts WHERE type IN ('text', 'reasoning') UNION ALL "
        "SELECT part_id, 1 FROM tool_states UNION ALL SELECT part_id, 2 FROM tool_outputs"
    )
)
_INDEX_NEW_KEYS = prebuilt(
    text("INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents WHERE key > :b_key")
)
_SETTLED = (
    prebuilt(text("DELETE FROM search_stale")),
    prebuilt(
        text(
            "UPDATE search_state SET parts_seen = (SELECT coalesce(max(rowid), 0) FROM parts), "
            "tool_states_seen = (SELECT coalesce(max(rowid), 0) FROM tool_states), "
            "tool_outputs_seen = (SELECT coalesce(max(rowid), 0) FROM tool_outputs)"
        )
    ),
)


def _fts_phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def index_pending(*, keyless: bool = False) -> Op:
    """SQLite: put the pending documents into the FTS5 index, in the caller's write transaction: give each a
    key, index the new keys' text, clear the stale list and raise the marks (migration 0005). ``keyless``:
    every document without a key, wherever its row is (after a VACUUM). Nothing on a database without the
    index (an engine at an older revision, which ``SessionStore(engine)`` allows). Returns whether it wrote."""
    if (yield step(_HAS_INDEX, {}, fetch="first")) is None:
        return False
    if not keyless and (yield step(_ANY_PENDING, {}, fetch="first")) is None:
        return False
    newest = yield step(_NEWEST_KEY, {}, fetch="first")
    yield step(_KEY_KEYLESS if keyless else _KEY_PENDING)  # new keys: above ``newest``
    yield step(_INDEX_NEW_KEYS, {"b_key": newest.key})
    for statement in _SETTLED:
        yield step(statement)
    return True


_OPTIMIZE = prebuilt(text("INSERT INTO search_index(search_index) VALUES ('optimize')"))


def optimize_index() -> Op:
    """SQLite: merge FTS5's segments into one, which drops what deleted documents left (``gc``)."""
    if (yield step(_HAS_INDEX, {}, fetch="first")) is not None:
        yield step(_OPTIMIZE)


def _sqlite_matches(words: list[str], pending: list[tuple[str, int]]) -> tuple[Any, dict[str, Any]]:
    """The FTS5 query, and the pending documents that match (``pending``: (part, kind), one JSON parameter)."""
    match = literal_column("search_index").op("MATCH")(bindparam("b_match"))
    query = select(_KEYS.c.part_id, _KEYS.c.kind).select_from(_FTS.join(_KEYS, _KEYS.c.key == _FTS.c.rowid)).where(match)
    params: dict[str, Any] = {"b_match": " ".join(_fts_phrase(w) for w in words)}
    if pending:
        found = text(
            "SELECT json_extract(value, '$[0]') AS part_id, json_extract(value, '$[1]') AS kind FROM json_each(:b_pending)"
        ).columns(column("part_id"), column("kind", Integer)).subquery("pending")
        query = union_all(query, select(found.c.part_id, found.c.kind))
        params["b_pending"] = json.dumps(pending)
    return query, params


def _pg_matches(words: list[str]) -> tuple[Any, dict[str, Any]]:
    simple = literal_column("'simple'::regconfig")
    tsquery = None
    for index in range(len(words)):
        # the same punctuation rule as the indexed text (tables.PG_SEARCH_DOCUMENTS)
        word = func.regexp_replace(bindparam(f"b_w{index}"), "[[:punct:]]+", " ", "g")
        phrase = func.phraseto_tsquery(simple, word)
        tsquery = phrase if tsquery is None else tsquery.op("&&")(phrase)
    ids = {0: P.c.id, 1: T.c.part_id, 2: O.c.part_id}
    selects = []
    for kind, (_, document) in PG_SEARCH_DOCUMENTS.items():
        # only the GIN index here: a part-type condition would let the planner prefer the type index and
        # compute the tsvector of every text part (the caller checks the type instead)
        selects.append(
            select(ids[kind].label("part_id"), literal(kind).label("kind")).where(literal_column(document).op("@@")(tsquery))
        )
    return union_all(*selects), {f"b_w{i}": w for i, w in enumerate(words)}


def search(
    query: Any,
    *,
    dialect: str,
    session_id: Any = None,
    role: Any = None,
    tool: Any = None,
    since: Any = None,
    limit: Any = DEFAULT_LIMIT,
) -> Op:
    """The hits of ``query`` (see ``brutus.search``), newest first; filters narrow them to a session, a role,
    a tool's parts (its call and output) and messages created at or after ``since`` (epoch ms)."""
    words = query_words(query)
    if session_id is not None:
        session_id = check_id("session", session_id)
    if role is not None and role not in ("user", "assistant"):
        raise InvalidInput(f"role must be 'user' or 'assistant', got {role!r}")
    if tool is not None and (not isinstance(tool, str) or not tool):
        raise InvalidInput(f"tool must be a tool name, got {tool!r}")
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
        raise InvalidInput(f"since must be a time in epoch milliseconds, got {since!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a positive integer, got {limit!r}")
    if session_id is not None:
        found = yield step(SESSION_ID, {"b_sid": session_id}, fetch="first")
        if found is None:
            raise NotFound("session", session_id)

    if dialect == "postgresql":
        matches, params = _pg_matches(words)
    else:
        documents = yield step(_PENDING, {}, fetch="all")
        pending = [(row.part_id, row.kind) for row in documents if text_matches(row.body, words)]
        matches, params = _sqlite_matches(words, pending)
    hits = matches.subquery("hits")
    statement = (
        select(
            hits.c.part_id,
            hits.c.kind,
            P.c.type,
            P.c.message_id,
            P.c.session_id,
            S.c.title,
            S.c.boundary_seq,
            M.c.role,
            M.c.summary,
            M.c.seq,
            M.c.created_at,
            T.c.tool,
            T.c.compacted_at,
        )
        .select_from(
            hits.join(P, P.c.id == hits.c.part_id)
            .join(M, M.c.id == P.c.message_id)
            .join(S, S.c.id == P.c.session_id)
            .outerjoin(T, T.c.part_id == P.c.id)
        )
        .where(or_(hits.c.kind != 0, P.c.type == "text", P.c.type == "reasoning"))  # (no IN: the SQLite driver)
        .order_by(M.c.created_at.desc(), M.c.id.desc(), P.c.position.desc(), hits.c.kind)
        .limit(limit)
    )
    if session_id is not None:
        statement = statement.where(P.c.session_id == session_id)
    if role is not None:
        statement = statement.where(M.c.role == role)
    if tool is not None:
        statement = statement.where(T.c.tool == tool)
    if since is not None:
        statement = statement.where(M.c.created_at >= since)
    rows = yield step(statement, params, fetch="all")

    found_hits = []
    for row in rows:
        text = yield from _document_text(row.part_id, row.kind)
        snippet, marks = make_snippet(text, words)
        pruned = row.kind == 2 and row.compacted_at is not None
        found_hits.append(
            SearchHit(
                session_id=row.session_id,
                session_title=text_out(row.title),
                message_id=row.message_id,
                part_id=row.part_id,
                role=row.role,
                summary=bool(row.summary),
                part_type=row.type,
                field=FIELDS[row.kind],
                tool=text_out(row.tool),
                snippet=snippet,
                marks=marks,
                time=row.created_at,
                in_view=row.seq >= row.boundary_seq and not pruned,
                pruned=pruned,
            )
        )
    return found_hits


_PART_TEXT = prebuilt(select(P.c.data).where(P.c.id == bindparam("b_pid")))
_CALL_TEXT = prebuilt(select(T.c.tool, T.c.title, T.c.error, T.c.input).where(T.c.part_id == bindparam("b_pid")))
_OUTPUT_TEXT = prebuilt(select(O.c.output).where(O.c.part_id == bindparam("b_pid")))


def _document_text(part_id: str, kind: int) -> Op:
    """The text a document of ``kind`` indexes, as stored (decoded), for its snippet."""
    params = {"b_pid": part_id}
    if kind == 0:
        row = yield step(_PART_TEXT, params, fetch="first")
        text = (row.data or {}).get("text") if row is not None else None
        return text if isinstance(text, str) else None  # JSON comes back decoded
    if kind == 1:
        row = yield step(_CALL_TEXT, params, fetch="first")
        if row is None:
            return None
        strings = [text_out(row.tool), text_out(row.title), text_out(row.error), *_json_strings(row.input)]
        return " ".join(s for s in strings if s)
    row = yield step(_OUTPUT_TEXT, params, fetch="first")
    return text_out(row.output) if row is not None else None


def _json_strings(value: Any) -> list[str]:
    """The string values in a JSON value, in document order (what the index reads of a tool's input)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []
