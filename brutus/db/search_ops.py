"""The search query: the index finds the matching documents newest first, the rows say where they are, the
snippets are cut from the stored text (``brutus.search`` holds the rules; migrations 0004, 0005 and 0008 the
index).

- SQLite: FTS5 ``MATCH`` on ``search_index``; ``search_keys`` maps its rowids to (part, kind). Each word goes
  in as an FTS5 string (``"…"``, quotes doubled), so the user's text is never FTS5 syntax. A key is its
  message's time (ms) times ``SLOT`` plus a counter (0008), so ``ORDER BY rowid DESC LIMIT n`` walks the
  matches newest first and stops after ``n`` hits that pass the filters (``since`` bounds the rowid); the rest
  of the last hit's millisecond is read too, and the hits sorted exactly here. After its VACUUM, ``gc``
  indexes every document without a key (``keyless=True``), as VACUUM may renumber the rows the marks count.
- PostgreSQL: ``@@`` a tsquery built from the words with ``phraseto_tsquery`` (text in, never query syntax),
  combined with ``&&``, ordered by ``search_vectors.created_at`` (0008): the planner walks its btree newest
  first for a common word and takes the GIN index for a rare one.
- Both indexes are filled off the write path (migration 0005): ``index_pending`` puts the documents written
  since into one, in a write transaction, which the store's background indexer runs in small batches after
  commits (``brutus.db.indexer``), and a store runs before each search (and ``gc``, ``settle``). The documents
  still pending when the query runs (a read-only store, or writes since) are read from the view
  ``search_pending`` and matched here with the same tokens (``brutus.search.matches``), so a search sees every
  committed write; on PostgreSQL their older vectors, if any, are left out.

Hits come newest first (message time, then message, position and kind), at most ``limit``, then one read per
kind for their texts. Kinds: 0 a part's text, 1 a tool call, 2 a tool output.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

from sqlalchemy import (
    BigInteger,
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

__all__ = ["DEFAULT_LIMIT", "index_pending", "optimize_index", "pg_walk", "search", "search_flow", "sqlite_walk"]

DEFAULT_LIMIT = 50
FIELDS = {0: "text", 1: "call", 2: "output"}
_KEYS = table("search_keys", column("key", Integer), column("part_id"), column("kind", Integer))
_FTS = table("search_index", column("rowid", Integer))
_VECTORS = table("search_vectors", column("part_id"), column("kind", Integer), column("vector"), column("created_at", BigInteger))
# the documents not in the index yet (migration 0005), matched in Python by a search that could not index them
_PENDING = prebuilt(
    text("SELECT part_id, kind, body FROM search_pending").columns(column("part_id"), column("kind", Integer), column("body"))
)
_ANY_PENDING = prebuilt(text("SELECT 1 FROM search_pending LIMIT 1").columns(column("1")))
# PostgreSQL, for a search's own transaction: the view's bounds come from a subquery, so the planner guesses a
# third of each table pending (200,000 rows at 1M messages) and compiles the query with JIT and plans parallel
# workers for what is nearly always no row: 56 ms of a 70 ms search, 0.12 ms without them.
_PG_NO_JIT = prebuilt(
    text("SELECT set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)")
)
_HAS_INDEX = {
    "sqlite": prebuilt(text("SELECT 1 FROM sqlite_master WHERE name = 'search_pending'").columns(column("1"))),
    "postgresql": prebuilt(text("SELECT 1 FROM pg_class WHERE relname = 'search_pending'").columns(column("1"))),
}

# SQLite: a key is the bucket of its message's time (epoch ms, clamped) times ``SLOT``, plus a counter within
# the millisecond (migration 0008), so FTS5's rowid order is time order up to ties within a millisecond
# (room for 2**21 documents of one millisecond; times before 1970 share bucket 0, after 2109 the last one)
SLOT = 2**21
NEWEST_BUCKET = 2**42 - 1
TEXT_TYPES = "('text', 'reasoning')"
_BATCH_TABLE = prebuilt(
    text(
        "CREATE TEMP TABLE IF NOT EXISTS search_batch "
        "(key INTEGER PRIMARY KEY, part_id VARCHAR(64) NOT NULL, kind INTEGER NOT NULL)"
    )
)
# the rows up to the bounds above the marks, and the stale documents (what ``search_pending`` lists, in batches)
_BOUNDS = prebuilt(
    text(
        "SELECT min(s.parts_seen + :b_batch, (SELECT coalesce(max(rowid), 0) FROM parts)) AS parts, "
        "min(s.tool_states_seen + :b_batch, (SELECT coalesce(max(rowid), 0) FROM tool_states)) AS tool_states, "
        "min(s.tool_outputs_seen + :b_batch, (SELECT coalesce(max(rowid), 0) FROM tool_outputs)) AS tool_outputs "
        "FROM search_state s"
    ).columns(column("parts", Integer), column("tool_states", Integer), column("tool_outputs", Integer))
)
BATCH_DOCUMENTS = (
    f"SELECT id AS part_id, 0 AS kind FROM parts WHERE rowid > (SELECT parts_seen FROM search_state) "
    f"AND rowid <= :b_parts AND type IN {TEXT_TYPES} "
    "UNION ALL SELECT part_id, 1 FROM tool_states WHERE rowid > (SELECT tool_states_seen FROM search_state) "
    "AND rowid <= :b_tool_states "
    "UNION ALL SELECT part_id, 2 FROM tool_outputs WHERE rowid > (SELECT tool_outputs_seen FROM search_state) "
    "AND rowid <= :b_tool_outputs "
    "UNION ALL SELECT part_id, kind FROM search_stale"
)
KEYLESS_DOCUMENTS = (
    f"SELECT id AS part_id, 0 AS kind FROM parts WHERE type IN {TEXT_TYPES} "
    "UNION ALL SELECT part_id, 1 FROM tool_states UNION ALL SELECT part_id, 2 FROM tool_outputs"
)


# the keys of the documents (``{documents}``) that have none, into ``temp.search_batch``: the next free numbers
# of their millisecond, in the order message id, position, then a call before its output (the search's, reversed)
NEW_KEYS = (
    "INSERT INTO temp.search_batch (key, part_id, kind) "
    f"SELECT base + coalesce((SELECT max(k.key) + 1 FROM search_keys k WHERE k.key >= base AND k.key < base + {SLOT})"
    " - base, 0) + row_number() OVER (PARTITION BY base ORDER BY message_id, position, kind DESC) - 1, part_id, kind "
    f"FROM (SELECT d.part_id, d.kind, p.message_id, p.position, min(max(m.created_at, 0), {NEWEST_BUCKET}) * {SLOT} AS base "
    "FROM ({documents}) AS d JOIN parts p ON p.id = d.part_id JOIN messages m ON m.id = p.message_id "
    f"WHERE (d.kind != 0 OR p.type IN {TEXT_TYPES}) "
    "AND NOT EXISTS (SELECT 1 FROM search_keys k WHERE k.part_id = d.part_id AND k.kind = d.kind))"
)
_KEY_BATCH = prebuilt(text(NEW_KEYS.format(documents=BATCH_DOCUMENTS)))
_KEY_KEYLESS = prebuilt(text(NEW_KEYS.format(documents=KEYLESS_DOCUMENTS)))
_INDEX_BATCH = tuple(
    prebuilt(text(sql))
    for sql in (
        "INSERT INTO search_keys (key, part_id, kind) SELECT key, part_id, kind FROM temp.search_batch ORDER BY key",
        # ascending: FTS5 buffers a transaction's documents while their rowids ascend, and flushes when one does not
        "INSERT INTO search_index(rowid, body) SELECT d.key, d.body FROM temp.search_batch b "
        "JOIN search_documents d ON d.key = b.key ORDER BY b.key",
        "DELETE FROM temp.search_batch",
        "DELETE FROM search_stale",
    )
)
_MARKS = prebuilt(
    text("UPDATE search_state SET parts_seen = :b_parts, tool_states_seen = :b_tool_states, tool_outputs_seen = :b_tool_outputs")
)
_OPTIMIZE = prebuilt(text("INSERT INTO search_index(search_index) VALUES ('optimize')"))

# PostgreSQL: the state row held (one index run at a time; a run that finds another under way leaves the work
# to it, never waits: a sync call waiting on an async store's run in the same thread would wait forever), a
# snapshot, the vectors of the rows pending against the last snapshot upserted with their message's time, the
# new snapshot stored. A run gives up on any row lock it waits for past ``PG_LOCK_TIMEOUT`` (its transaction's
# ``lock_timeout``): only a delete holds what it needs (a session's, a rewind's: their cascade locks the part's
# vector, then waits on the part, which the run's upserts of one kind hold while it upserts the next), and the
# run, not the caller's delete, must be the one that gives way; what it left stays pending for the next.
# The state row is the transaction's tenant's (0011: a tenant's run marks its own rows only; a role that passes
# row-level security sees every tenant's row, so the statements name the one they mean)
PG_TENANT_STATE = "search_state WHERE tenant = coalesce(current_setting('brutus.tenant', true), '')"
PG_LOCK_TIMEOUT = "100ms"  # well under PostgreSQL's deadlock_timeout (1 s): the run times out before a deadlock is found
_PG_HOLD = prebuilt(
    text(f"SELECT set_config('lock_timeout', '{PG_LOCK_TIMEOUT}', true) FROM {PG_TENANT_STATE} FOR UPDATE SKIP LOCKED")
    .columns(column("set_config"))
)
_PG_SNAPSHOT = prebuilt(text("SELECT CAST(pg_current_snapshot() AS text) AS snapshot").columns(column("snapshot")))
_PG_INDEXED = prebuilt(
    text(f"SELECT CAST(pg_snapshot_xmin(indexed) AS text) AS xmin, CAST(indexed AS text) AS indexed FROM {PG_TENANT_STATE}")
    .columns(column("xmin"), column("indexed"))
)
# (a row is pending when its transaction is not visible in the snapshot the last index run took)
# the vectors of each kind of document pending (its row's ``search_xid`` not visible in the snapshot the last
# index run took), upserted with its message's time and its part's tenant (a run that passes row-level security
# indexes every tenant's rows, each as its own)
PG_UPSERT_TEXT = (
    "INSERT INTO search_vectors (part_id, kind, vector, created_at, tenant) "
    "SELECT p.id, 0, coalesce(brutus_search_vector(p.data ->> 'text'), ''::tsvector), m.created_at, p.tenant FROM parts p "
    "JOIN messages m ON m.id = p.message_id WHERE {pending} AND p.type IN ('text', 'reasoning') "
    "ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector, created_at = excluded.created_at"
)
PG_UPSERT_CALL = (
    "INSERT INTO search_vectors (part_id, kind, vector, created_at, tenant) "
    "SELECT p.id, 1, coalesce(brutus_search_vector(t.tool || ' ' || coalesce(t.title, '') || ' ' || "
    "coalesce(t.error, '') || ' ' || coalesce(brutus_json_strings(t.input), '')), ''::tsvector), m.created_at, p.tenant "
    "FROM tool_states t JOIN parts p ON p.id = t.part_id "
    "JOIN messages m ON m.id = p.message_id WHERE {pending} "
    "ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector, created_at = excluded.created_at"
)
PG_UPSERT_OUTPUT = (
    "INSERT INTO search_vectors (part_id, kind, vector, created_at, tenant) "
    "SELECT p.id, 2, coalesce(brutus_search_vector(o.output), ''::tsvector), m.created_at, p.tenant "
    "FROM tool_outputs o JOIN parts p ON p.id = o.part_id "
    "JOIN messages m ON m.id = p.message_id WHERE {pending} "
    "ON CONFLICT (part_id, kind) DO UPDATE SET vector = excluded.vector, created_at = excluded.created_at"
)
# the last run's snapshot as parameters (``_PG_INDEXED``), not subqueries: the planner then estimates the pending
# rows from the xid's histogram (a few) and joins them to their messages by index; with subqueries it guessed a
# third of each table and hashed every message (535 ms at 1M messages for one pending part)
PG_PENDING_PART = (
    "p.search_xid >= CAST(:b_xmin AS xid8) AND NOT pg_visible_in_snapshot(p.search_xid, CAST(:b_indexed AS pg_snapshot))"
)
PG_PENDING_CALL = PG_PENDING_PART.replace("p.search_xid", "t.search_xid")
PG_PENDING_OUTPUT = PG_PENDING_PART.replace("p.search_xid", "o.search_xid")
_PG_UPSERTS = (
    prebuilt(text(PG_UPSERT_TEXT.format(pending=PG_PENDING_PART))),
    prebuilt(text(PG_UPSERT_CALL.format(pending=PG_PENDING_CALL))),
    prebuilt(text(PG_UPSERT_OUTPUT.format(pending=PG_PENDING_OUTPUT))),
)
_PG_SETTLED = prebuilt(text("UPDATE search_state SET indexed = CAST(:b_snapshot AS pg_snapshot)"))


def _fts_phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def index_pending(dialect: str, *, keyless: bool = False, batch: int | None = None) -> Op:
    """Put the pending documents into the index, in the caller's write transaction (migrations 0005 and 0008
    have the rules). SQLite: give each a key in time order, index the new keys' text, clear the stale list and
    raise the marks; ``batch``: only the rows up to that many rowids past each mark (the background indexer's
    small transactions; call again while it returns True); ``keyless``: every document without a key, wherever
    its row is (after a VACUUM). PostgreSQL: upsert the vectors of the rows written since the last run's
    snapshot, and store this run's. Nothing on a database without the index (an engine at an older revision,
    which ``SessionStore(engine)`` allows). Returns whether anything was pending."""
    if (yield step(_HAS_INDEX[dialect], {}, fetch="first")) is None:
        return False
    if dialect == "postgresql" and (yield step(_PG_HOLD, {}, fetch="first")) is None:
        return False  # another run is indexing: what it does not see stays pending for the next
    if not keyless and (yield step(_ANY_PENDING, {}, fetch="first")) is None:
        return False
    if dialect == "postgresql":
        indexed = yield step(_PG_INDEXED, {}, fetch="first")  # the last run's snapshot: what is pending
        snapshot = yield step(_PG_SNAPSHOT, {}, fetch="first")  # before reading: what it sees is indexed
        for statement in _PG_UPSERTS:
            yield step(statement, {"b_xmin": indexed.xmin, "b_indexed": indexed.indexed})
        yield step(_PG_SETTLED, {"b_snapshot": snapshot.snapshot})
        return True
    bounds = yield step(_BOUNDS, {"b_batch": NEWEST_BUCKET if batch is None or keyless else batch}, fetch="first")
    marks = {"b_parts": bounds.parts, "b_tool_states": bounds.tool_states, "b_tool_outputs": bounds.tool_outputs}
    yield step(_BATCH_TABLE)
    yield step(_KEY_KEYLESS, {}) if keyless else step(_KEY_BATCH, marks)
    for statement in _INDEX_BATCH:
        yield step(statement)
    yield step(_MARKS, marks)
    return True


def search_flow(query: Any, *, dialect: str, index: bool, **filters: Any) -> Generator[Any, Any, list[SearchHit]]:
    """A search as a flow (``brutus.flows``): with ``index`` (a store that may write), what is pending goes
    into the index first, in a transaction of its own; if that fails (a read-only file, another SQLite writer
    holding the lock past the busy timeout, a PostgreSQL run timed out on a delete's lock), or inside
    ``store.batch()`` (whose transaction an index run would hold the index's lock and its lock timeout for
    to the end), the search reads the pending documents itself."""
    from ..flows import InBatch, Tx

    if index and not (yield InBatch()):
        try:
            yield Tx(index_pending(dialect))
        except DatabaseError:
            pass
    return (yield Tx(search(query, dialect=dialect, **filters), write=False, replica=True))


def optimize_index() -> Op:
    """SQLite: merge FTS5's segments into one, which drops what deleted documents left (``gc``)."""
    if (yield step(_HAS_INDEX["sqlite"], {}, fetch="first")) is not None:
        yield step(_OPTIMIZE)


def _hit_rows(source: Any, part_id: Any, kind: Any, filters: dict[str, Any]) -> Any:
    """The columns a hit is made of, for the documents ``source`` lists (its ``part_id`` and ``kind``
    columns), narrowed by the search's filters."""
    statement = (
        select(
            part_id.label("part_id"),
            kind.label("kind"),
            P.c.type,
            P.c.message_id,
            P.c.position,
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
            source.join(P, P.c.id == part_id)
            .join(M, M.c.id == P.c.message_id)
            .join(S, S.c.id == P.c.session_id)
            .outerjoin(T, T.c.part_id == P.c.id)
        )
        .where(or_(kind != 0, P.c.type == "text", P.c.type == "reasoning"))  # (no IN: the SQLite driver)
    )
    if filters["session_id"] is not None:
        statement = statement.where(P.c.session_id == bindparam("b_sid"))
    if filters["role"] is not None:
        statement = statement.where(M.c.role == bindparam("b_role"))
    if filters["tool"] is not None:
        statement = statement.where(T.c.tool == bindparam("b_tool"))
    if filters["since"] is not None:
        statement = statement.where(M.c.created_at >= bindparam("b_since"))
    return statement


def _found_rows(dialect: str, found: list[tuple[str, int]], filters: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The hit rows of the pending documents that match (``found``: (part, kind), one JSON parameter)."""
    if dialect == "postgresql":
        sql = "SELECT e ->> 0 AS part_id, CAST(e ->> 1 AS integer) AS kind FROM jsonb_array_elements(CAST(:b_found AS jsonb)) AS e"
    else:
        sql = "SELECT json_extract(value, '$[0]') AS part_id, json_extract(value, '$[1]') AS kind FROM json_each(:b_found)"
    listed = text(sql).columns(column("part_id"), column("kind", Integer)).subquery("found")
    return _hit_rows(listed, listed.c.part_id, listed.c.kind, filters), {"b_found": json.dumps(found)}


def sqlite_walk(words: list[str], filters: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """SQLite: the hits of the indexed documents, unordered and unlimited (``_sqlite_search`` adds FTS5's
    rowid order and the limit), and its parameters."""
    match = literal_column("search_index").op("MATCH")(bindparam("b_match"))
    walk = _hit_rows(_FTS.join(_KEYS, _KEYS.c.key == _FTS.c.rowid), _KEYS.c.part_id, _KEYS.c.kind, filters)
    walk = walk.add_columns(_KEYS.c.key).where(match)
    params = {"b_match": " ".join(_fts_phrase(w) for w in words), **_filter_params(filters)}
    if filters["since"] is not None:  # the bound lets FTS5 stop at the first key older than ``since``
        walk = walk.where(_FTS.c.rowid >= bindparam("b_low"))
        params["b_low"] = min(filters["since"], NEWEST_BUCKET) * SLOT
    return walk, params


def _sqlite_search(words: list[str], found: list[tuple[str, int]], filters: dict[str, Any], limit: int) -> Op:
    """SQLite: FTS5 walks its matches newest key first, each joined to its rows and filtered as it comes,
    until ``limit`` hits (no sort, no read of older matches); then the rest of the last hit's millisecond,
    whose keys are not in the hits' order; with the pending documents that match, sorted exactly here."""
    walk, params = sqlite_walk(words, filters)
    rows = list((yield step(walk.order_by(_FTS.c.rowid.desc()).limit(bindparam("b_limit")), {**params, "b_limit": limit}, fetch="all")))
    if len(rows) == limit:
        last = rows[-1].key
        ties = walk.where(_FTS.c.rowid >= bindparam("b_tie"), _FTS.c.rowid < bindparam("b_last"))
        rows += yield step(ties, {**params, "b_tie": last - last % SLOT, "b_last": last}, fetch="all")
    if found:
        statement, found_params = _found_rows("sqlite", found, filters)
        rows += yield step(statement, {**found_params, **_filter_params(filters)}, fetch="all")
    # the order of the old query's ORDER BY (SQLite compares text as UTF-8 bytes: code point order, as here)
    rows.sort(key=lambda row: row.kind)
    rows.sort(key=lambda row: (row.created_at, row.message_id, row.position), reverse=True)
    return rows[:limit]


def pg_walk(words: list[str], pending: list[tuple[str, int]], filters: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """PostgreSQL: the first ``b_limit`` hits of the indexed documents, less the pending ones (their vectors,
    if any, are of an older text), newest first by their message's time (0008: a btree to walk, so for a
    common word the scan stops after ``limit`` hits; the planner keeps the GIN bitmap for a rare one), and
    its parameters."""
    simple = literal_column("'simple'::regconfig")
    tsquery: Any = None
    for index in range(len(words)):
        # the same punctuation rule as the indexed text (brutus_search_vector, migration 0004)
        word = func.regexp_replace(bindparam(f"b_w{index}"), "[[:punct:]]+", " ", "g")
        phrase = func.phraseto_tsquery(simple, word)
        tsquery = phrase if tsquery is None else tsquery.op("&&")(phrase)
    walk = _hit_rows(_VECTORS, _VECTORS.c.part_id, _VECTORS.c.kind, filters).where(_VECTORS.c.vector.op("@@")(tsquery))
    params: dict[str, Any] = {f"b_w{i}": w for i, w in enumerate(words)}
    params.update(_filter_params(filters))
    if filters["since"] is not None:
        walk = walk.where(_VECTORS.c.created_at >= bindparam("b_since"))
    if pending:
        walk = walk.where(
            text(
                "NOT EXISTS (SELECT 1 FROM jsonb_array_elements(CAST(:b_pending AS jsonb)) AS e "
                "WHERE e ->> 0 = search_vectors.part_id AND CAST(e ->> 1 AS integer) = search_vectors.kind)"
            )
        )
        params["b_pending"] = json.dumps(pending)
    order = (_VECTORS.c.created_at.desc(), M.c.id.desc(), P.c.position.desc(), _VECTORS.c.kind)
    return walk.order_by(*order).limit(bindparam("b_limit")), params


def _pg_search(words: list[str], found: list[tuple[str, int]], pending: list[tuple[str, int]], filters: dict[str, Any], limit: int) -> Op:
    """PostgreSQL: the walk (``pg_walk``), with the pending documents that match, ordered in SQL (its
    collation orders the ids)."""
    statement, params = pg_walk(words, pending, filters)
    params["b_limit"] = limit
    if found:
        listed, found_params = _found_rows("postgresql", found, filters)
        params.update(found_params)
        both = union_all(statement.subquery("walk").select(), listed).subquery("hits")
        statement = select(both).order_by(
            both.c.created_at.desc(), both.c.message_id.desc(), both.c.position.desc(), both.c.kind
        ).limit(bindparam("b_limit"))
    return (yield step(statement, params, fetch="all"))


def _filter_params(filters: dict[str, Any]) -> dict[str, Any]:
    names = {"session_id": "b_sid", "role": "b_role", "tool": "b_tool", "since": "b_since"}
    return {names[k]: v for k, v in filters.items() if v is not None}


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
        yield step(_PG_NO_JIT, {}, fetch="first")
    documents = yield step(_PENDING, {}, fetch="all")
    found = [(row.part_id, row.kind) for row in documents if text_matches(row.body, words)]
    filters = {"session_id": session_id, "role": role, "tool": tool, "since": since}
    if dialect == "postgresql":
        pending = [(row.part_id, row.kind) for row in documents]
        rows = yield from _pg_search(words, found, pending, filters, limit)
    else:
        rows = yield from _sqlite_search(words, found, filters, limit)

    texts = yield from _document_texts(dialect, [(row.part_id, row.kind) for row in rows])
    found_hits = []
    for row in rows:
        snippet, marks = make_snippet(texts.get((row.part_id, row.kind)), words)
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


# The hits' part ids, one JSON array parameter: a statement per kind, not a round trip per hit (50 reads of
# cold pages took 1.3 ms each on PostgreSQL at 1M messages).
_IDS = {
    "sqlite": text("SELECT value FROM json_each(:b_ids)").columns(column("value")),
    "postgresql": text("SELECT jsonb_array_elements_text(CAST(:b_ids AS jsonb))").columns(column("value")),
}
_TEXTS = {
    dialect: (
        prebuilt(select(P.c.id, P.c.data).where(P.c.id.in_(ids))),
        prebuilt(select(T.c.part_id, T.c.tool, T.c.title, T.c.error, T.c.input).where(T.c.part_id.in_(ids))),
        prebuilt(select(O.c.part_id, O.c.output).where(O.c.part_id.in_(ids))),
    )
    for dialect, ids in _IDS.items()
}


def _document_texts(dialect: str, documents: list[tuple[str, int]]) -> Generator[Any, Any, dict[tuple[str, int], str | None]]:
    """The text each document (part id, kind) indexes, as stored (decoded), for its snippet: one read per kind."""
    texts: dict[tuple[str, int], str | None] = {}
    for kind, statement in enumerate(_TEXTS[dialect]):
        ids = sorted({part_id for part_id, k in documents if k == kind})
        if not ids:
            continue
        for row in (yield step(statement, {"b_ids": json.dumps(ids)}, fetch="all")):
            texts[(row[0], kind)] = _text_of(kind, row)
    return texts


def _text_of(kind: int, row: Any) -> str | None:
    if kind == 0:
        text = (row.data or {}).get("text")
        return text if isinstance(text, str) else None  # JSON comes back decoded
    if kind == 1:
        strings = [text_out(row.tool), text_out(row.title), text_out(row.error), *_json_strings(row.input)]
        return " ".join(s for s in strings if s)
    return text_out(row.output)


def _json_strings(value: Any) -> list[str]:
    """The string values in a JSON value, in document order (what the index reads of a tool's input)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []
