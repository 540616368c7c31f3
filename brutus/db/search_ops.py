"""The search query: the index finds the matching documents, the rows say where they are, the snippets are cut
from the stored text (``brutus.search`` holds the rules; migrations 0004 and 0005 the index).

- SQLite: one FTS5 ``MATCH`` on ``search_index``; ``search_keys`` maps its rowids to (part, kind). Each word
  goes in as an FTS5 string (``"…"``, quotes doubled), so the user's text is never FTS5 syntax.
  After its VACUUM, ``gc`` indexes every document without a key (``keyless=True``), as VACUUM may renumber
  the rows the marks count.
- PostgreSQL: the GIN index of ``search_vectors`` answers ``@@`` a tsquery built from the words with
  ``phraseto_tsquery`` (text in, never query syntax), combined with ``&&``.
- Both indexes are filled off the write path (migration 0005): ``index_pending`` puts every document written
  since into one, in a write transaction, which a store runs before each search (and ``gc``). The documents
  still pending when the query runs (a read-only store, or writes since) are read from the view
  ``search_pending`` and matched here with the same tokens (``brutus.search.matches``), so a search sees every
  committed write; on PostgreSQL their older vectors, if any, are left out.

Hits come newest first (message time, then message, position and kind), at most ``limit``, then one primary-key
read per hit for its text. Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from sqlalchemy import (
    Integer,
    bindparam,
    column,
    func,
    literal_column,
    or_,
    select,
    table,
    text,
    union_all,
)

from ..errors import DatabaseError, InvalidInput, NotFound
from ..search import SearchHit, make_snippet, query_words
from ..search import matches as text_matches
from .convert import text_out
from .sqlite_driver import prebuilt
from .ops import check_id
from .statements import SESSION_ID, M, O, Op, P, S, T, step

__all__ = ["DEFAULT_LIMIT", "index_pending", "optimize_index", "search", "search_flow"]

DEFAULT_LIMIT = 50
FIELDS = {0: "text", 1: "call", 2: "output"}
_KEYS = table("search_keys", column("key", Integer), column("part_id"), column("kind", Integer))
_FTS = table("search_index", column("rowid", Integer))
_VECTORS = table("search_vectors", column("part_id"), column("kind", Integer), column("vector"))
# the documents not in the index yet (migration 0005), matched in Python by a search that could not index them
_PENDING = prebuilt(
    text("SELECT part_id, kind, body FROM search_pending").columns(column("part_id"), column("kind", Integer), column("body"))
)
_ANY_PENDING = prebuilt(text("SELECT 1 FROM search_pending LIMIT 1").columns(column("1")))
_HAS_INDEX = {
    "sqlite": prebuilt(text("SELECT 1 FROM sqlite_master WHERE name = 'search_pending'").columns(column("1"))),
    "postgresql": prebuilt(text("SELECT 1 FROM pg_class WHERE relname = 'search_pending'").columns(column("1"))),
}

# SQLite: keys for the pending documents, their text into FTS5, then nothing stale and the marks raised
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
_SQLITE_SETTLED = (
    prebuilt(text("DELETE FROM search_stale")),
    prebuilt(
        text(
            "UPDATE search_state SET parts_seen = (SELECT coalesce(max(rowid), 0) FROM parts), "
            "tool_states_seen = (SELECT coalesce(max(rowid), 0) FROM tool_states), "
            "tool_outputs_seen = (SELECT coalesce(max(rowid), 0) FROM tool_outputs)"
        )
    ),
)
_OPTIMIZE = prebuilt(text("INSERT INTO search_index(search_index) VALUES ('optimize')"))

# PostgreSQL: the state row held (index runs take turns), a snapshot, the vectors of the rows pending against
# the last snapshot upserted, the new snapshot stored
_PG_HOLD = prebuilt(text("SELECT 1 FROM search_state FOR UPDATE").columns(column("1")))
_PG_SNAPSHOT = prebuilt(text("SELECT CAST(pg_current_snapshot() AS text) AS snapshot").columns(column("snapshot")))
# (a row is pending when its transaction is not visible in the snapshot the last index run took)
_PG_UPSERTS = (
    prebuilt(
        text(
            "INSERT INTO search_vectors (part_id, kind, vector) "
            "SELECT id, 0, coalesce(brutus_search_vector(data ->> 'text'), ''::tsvector) FROM parts "
            "WHERE type IN ('text', 'reasoning') AND search_xid >= (SELECT pg_snapshot_xmin(indexed) FROM search_state) "
            "AND NOT pg_visible_in_snapshot(search_xid, (SELECT indexed FROM search_state))"
            " ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector"
        )
    ),
    prebuilt(
        text(
            "INSERT INTO search_vectors (part_id, kind, vector) "
            "SELECT part_id, 1, coalesce(brutus_search_vector(tool || ' ' || coalesce(title, '') || ' ' || "
            "coalesce(error, '') || ' ' || coalesce(brutus_json_strings(input), '')), ''::tsvector) FROM tool_states "
            "WHERE search_xid >= (SELECT pg_snapshot_xmin(indexed) FROM search_state) "
            "AND NOT pg_visible_in_snapshot(search_xid, (SELECT indexed FROM search_state))"
            " ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector"
        )
    ),
    prebuilt(
        text(
            "INSERT INTO search_vectors (part_id, kind, vector) "
            "SELECT part_id, 2, coalesce(brutus_search_vector(output), ''::tsvector) FROM tool_outputs "
            "WHERE search_xid >= (SELECT pg_snapshot_xmin(indexed) FROM search_state) "
            "AND NOT pg_visible_in_snapshot(search_xid, (SELECT indexed FROM search_state))"
            " ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector"
        )
    ),
)
_PG_SETTLED = prebuilt(text("UPDATE search_state SET indexed = CAST(:b_snapshot AS pg_snapshot)"))


def _fts_phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def index_pending(dialect: str, *, keyless: bool = False) -> Op:
    """Put the pending documents into the index, in the caller's write transaction (migration 0005 has the
    rules). SQLite: give each a key, index the new keys' text, clear the stale list and raise the marks;
    ``keyless``: every document without a key, wherever its row is (after a VACUUM). PostgreSQL: upsert the
    vectors of the rows written since the last run's snapshot, and store this run's. Nothing on a database
    without the index (an engine at an older revision, which ``SessionStore(engine)`` allows). Returns
    whether anything was pending."""
    if (yield step(_HAS_INDEX[dialect], {}, fetch="first")) is None:
        return False
    if dialect == "postgresql":
        yield step(_PG_HOLD, {}, fetch="first")
    if not keyless and (yield step(_ANY_PENDING, {}, fetch="first")) is None:
        return False
    if dialect == "postgresql":
        snapshot = yield step(_PG_SNAPSHOT, {}, fetch="first")  # before reading: what it sees is indexed
        for statement in _PG_UPSERTS:
            yield step(statement)
        yield step(_PG_SETTLED, {"b_snapshot": snapshot.snapshot})
        return True
    newest = yield step(_NEWEST_KEY, {}, fetch="first")
    yield step(_KEY_KEYLESS if keyless else _KEY_PENDING)  # new keys: above ``newest``
    yield step(_INDEX_NEW_KEYS, {"b_key": newest.key})
    for statement in _SQLITE_SETTLED:
        yield step(statement)
    return True


def search_flow(query: Any, *, dialect: str, index: bool, **filters: Any) -> Generator[Any, Any, list[SearchHit]]:
    """A search as a flow (``brutus.flows``): with ``index`` (a store that may write), what is pending goes
    into the index first, in a transaction of its own; if that fails (a read-only file, another SQLite writer
    holding the lock past the busy timeout), the search reads the pending documents itself."""
    from ..flows import Tx

    if index:
        try:
            yield Tx(index_pending(dialect))
        except DatabaseError:
            pass
    return (yield Tx(search(query, dialect=dialect, **filters), write=False))


def optimize_index() -> Op:
    """SQLite: merge FTS5's segments into one, which drops what deleted documents left (``gc``)."""
    if (yield step(_HAS_INDEX["sqlite"], {}, fetch="first")) is not None:
        yield step(_OPTIMIZE)


def _sqlite_matches(words: list[str], found: list[tuple[str, int]]) -> tuple[Any, dict[str, Any]]:
    """The FTS5 query, and the pending documents that match (``found``: (part, kind), one JSON parameter; a
    pending document is not in FTS5)."""
    match = literal_column("search_index").op("MATCH")(bindparam("b_match"))
    query = select(_KEYS.c.part_id, _KEYS.c.kind).select_from(_FTS.join(_KEYS, _KEYS.c.key == _FTS.c.rowid)).where(match)
    params: dict[str, Any] = {"b_match": " ".join(_fts_phrase(w) for w in words)}
    if found:
        listed = text(
            "SELECT json_extract(value, '$[0]') AS part_id, json_extract(value, '$[1]') AS kind FROM json_each(:b_found)"
        ).columns(column("part_id"), column("kind", Integer)).subquery("found")
        query = union_all(query, select(listed.c.part_id, listed.c.kind))
        params["b_found"] = json.dumps(found)
    return query, params


def _pg_matches(words: list[str], found: list[tuple[str, int]], pending: list[tuple[str, int]]) -> tuple[Any, dict[str, Any]]:
    """The GIN query, less the pending documents (their vectors, if any, are of an older text), and the pending
    documents that match."""
    simple = literal_column("'simple'::regconfig")
    tsquery: Any = None
    for index in range(len(words)):
        # the same punctuation rule as the indexed text (brutus_search_vector, migration 0004)
        word = func.regexp_replace(bindparam(f"b_w{index}"), "[[:punct:]]+", " ", "g")
        phrase = func.phraseto_tsquery(simple, word)
        tsquery = phrase if tsquery is None else tsquery.op("&&")(phrase)
    query: Any = select(_VECTORS.c.part_id, _VECTORS.c.kind).where(_VECTORS.c.vector.op("@@")(tsquery))
    params: dict[str, Any] = {f"b_w{i}": w for i, w in enumerate(words)}
    if pending:
        query = query.where(
            text(
                "NOT EXISTS (SELECT 1 FROM jsonb_array_elements(CAST(:b_pending AS jsonb)) AS e "
                "WHERE e ->> 0 = search_vectors.part_id AND CAST(e ->> 1 AS integer) = search_vectors.kind)"
            )
        )
        params["b_pending"] = json.dumps(pending)
    if found:
        listed = text(
            "SELECT e ->> 0 AS part_id, CAST(e ->> 1 AS integer) AS kind "
            "FROM jsonb_array_elements(CAST(:b_found AS jsonb)) AS e"
        ).columns(column("part_id"), column("kind", Integer)).subquery("found")
        query = union_all(query, select(listed.c.part_id, listed.c.kind))
        params["b_found"] = json.dumps(found)
    return query, params


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

    documents = yield step(_PENDING, {}, fetch="all")
    found = [(row.part_id, row.kind) for row in documents if text_matches(row.body, words)]
    if dialect == "postgresql":
        matches, params = _pg_matches(words, found, [(row.part_id, row.kind) for row in documents])
    else:
        matches, params = _sqlite_matches(words, found)
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
