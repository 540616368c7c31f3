"""Search bounded by its limit (migration 0008, issue 32): the hits are exactly what a search over every
document, sorted newest first (message time, then message id, position, kind), gives, on random and corpus
histories, with pending documents, filters and limits; and the query stops early on both backends (a plan
that walks the index newest first, reading about ``limit`` matches of a common word, not all of them)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from sqlalchemy import text

from raw_sqlite import raw_sqlite
from brutus import SessionStore
from brutus.codec import loads_json
from brutus.db import search_ops
from brutus.db.convert import text_out
from brutus.db.tables import SEARCH_TEXT_LIMIT
from brutus.importers import import_file
from brutus.search import matches, query_words
from corpus_helpers import all_files

T0 = 1_767_225_600_000
VOCAB = ["otter", "heron", "common", "lynx", "moth"]
FIELDS = ("text", "call", "output")


def _json(value: Any) -> Any:
    return loads_json(value) if isinstance(value, (str, bytes)) else value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def documents(store: SessionStore) -> list[dict[str, Any]]:
    """Every searchable document, read from the rows (not the index), with what a hit says of it."""
    sql = text(
        "SELECT p.id, p.type, p.position, p.data, m.id AS message_id, m.session_id, m.role, m.seq, m.created_at, "
        "s.boundary_seq, t.part_id AS tool_part, t.tool, t.title, t.error, t.input, t.compacted_at, o.output "
        "FROM parts p JOIN messages m ON m.id = p.message_id JOIN sessions s ON s.id = m.session_id "
        "LEFT JOIN tool_states t ON t.part_id = p.id LEFT JOIN tool_outputs o ON o.part_id = p.id"
    )
    out = []
    with store.engine.connect() as conn:
        for row in conn.execute(sql):
            texts: list[tuple[int, str | None]] = []
            if row.type in ("text", "reasoning"):
                body = (_json(row.data) or {}).get("text")
                texts.append((0, body if isinstance(body, str) else None))
            if row.tool_part is not None:
                call = [text_out(row.tool), text_out(row.title), text_out(row.error), *_strings(_json(row.input))]
                texts.append((1, " ".join(s for s in call if s)))
            if row.output is not None:
                texts.append((2, text_out(row.output)))
            for kind, body in texts:
                pruned = kind == 2 and row.compacted_at is not None
                out.append({
                    "text": (body or "")[:SEARCH_TEXT_LIMIT], "kind": kind, "position": row.position, "tool": text_out(row.tool),
                    "hit": (row.session_id, row.message_id, row.id, FIELDS[kind], row.seq >= row.boundary_seq and not pruned,
                            pruned, row.created_at), "role": row.role,
                })
    return out


def expected(docs: list[dict[str, Any]], query: str, *, session_id: str | None = None, role: str | None = None,
             tool: str | None = None, since: int | None = None, limit: int = 50) -> list[tuple[Any, ...]]:
    """The old query's answer: every match, sorted by message time, message id, position (newest first) and
    kind."""
    words = query_words(query)
    found = [d for d in docs if matches(d["text"], words)
             and (session_id is None or d["hit"][0] == session_id) and (role is None or d["role"] == role)
             and (tool is None or d["tool"] == tool) and (since is None or d["hit"][6] >= since)]
    found.sort(key=lambda d: d["kind"])
    found.sort(key=lambda d: (d["hit"][6], d["hit"][1], d["position"]), reverse=True)
    return [d["hit"] for d in found[:limit]]


def got(store: SessionStore, query: str, **kwargs: Any) -> list[tuple[Any, ...]]:
    return [(h.session_id, h.message_id, h.part_id, h.field, h.in_view, h.pruned, h.time) for h in store.search(query, **kwargs)]


def _words(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randrange(1, 4)))


def random_history(store: SessionStore, rng: random.Random, sessions: int, messages: int) -> list[str]:
    """Sessions of random turns whose times collide often (within a session and across), ids in no time order,
    tool calls with outputs (some pruned), and a compaction in every other session."""
    ids = []
    for s in range(sessions):
        session = store.create_session(title=f"s{s}")
        ids.append(session.id)
        batch = []
        for n in range(messages):
            role = "user" if n % 2 == 0 else "assistant"
            parts: list[dict[str, Any]] = []
            for _ in range(rng.randrange(1, 4)):
                choice = rng.random()
                if choice < 0.5:
                    parts.append({"type": rng.choice(["text", "reasoning"]), "text": _words(rng)})
                elif role == "assistant":
                    state: dict[str, Any] = {"status": "completed", "input": {"command": _words(rng)}, "output": _words(rng),
                                             "title": rng.choice(["ran", None]), "time": {"start": 1, "end": 2}}
                    if rng.random() < 0.3:
                        state["time"]["compacted"] = T0
                    parts.append({"type": "tool", "call_id": f"c{s}_{n}_{len(parts)}", "tool": rng.choice(["bash", "read"]), "state": state})
            info = {"id": f"msg_{rng.getrandbits(48):012x}", "role": role, "time": {"created": T0 + rng.randrange(40)}}
            batch.append({"info": info, "parts": parts or [{"type": "text", "text": "common"}]})
            if s % 2 and n == messages // 2:
                batch.append({"info": {"role": "user", "time": {"created": T0 + 20}}, "parts": [{"type": "compaction", "auto": False}]})
                batch.append({"info": {"role": "assistant", "summary": True, "finish": "stop", "mode": "compaction",
                                       "time": {"created": T0 + 20}}, "parts": [{"type": "text", "text": "summary common otter"}]})
        store.append_messages(session.id, batch)
    return ids


QUERIES = ["common", "otter", "heron lynx", "moth", "ran"]


def _compare_all(store: SessionStore, searcher: SessionStore, sessions: list[str], rng: random.Random) -> int:
    docs = documents(store)
    checked = 0
    for query in QUERIES:
        for limit in (1, 2, 5, 50, 1000):
            assert got(searcher, query, limit=limit) == expected(docs, query, limit=limit), (query, limit)
            checked += 1
        for filters in ({"session_id": rng.choice(sessions)}, {"role": "assistant"}, {"tool": "bash"},
                        {"since": T0 + 25}, {"role": "user", "since": T0 + 10}):
            limit = rng.choice([1, 3, 50])
            assert got(searcher, query, limit=limit, **filters) == expected(docs, query, limit=limit, **filters), (query, filters)
            checked += 1
    return checked


def test_hits_equal_the_whole_sort_on_random_histories(store_url: str) -> None:
    """Indexed, pending (a reader's search reads them), changed after indexing (stale): the same hits as
    sorting every match, for every limit and filter."""
    rng = random.Random(32)
    with SessionStore.open(store_url, index_in_background=False) as store:
        sessions = random_history(store, rng, 6, 40)
        store.search("anything")  # indexes all of it
        assert _compare_all(store, store, sessions, rng) > 40
        sessions += random_history(store, rng, 3, 30)  # pending
        message = store.append_message(sessions[0], "assistant")
        part = store.append_part(message.id, {"type": "tool", "call_id": "late", "tool": "bash", "state": {"status": "pending", "input": {"command": "otter"}}})
        store.search("anything")
        store.update_tool(part.id, status="running", title="ran lynx")  # indexed, then changed: stale
        store.update_tool(part.id, status="completed", output="heron common", title="ran")
        with SessionStore.open(store_url, read_only=True) as reader:
            assert reader.search("common", limit=1000) and _compare_all(store, reader, sessions, rng)
        _compare_all(store, store, sessions, rng)  # the writer indexes what was pending first


def test_hits_equal_the_whole_sort_on_the_corpus(store_url: str) -> None:
    with SessionStore.open(store_url, index_in_background=False) as store:
        for path in all_files():
            import_file(store, path)
        docs = documents(store)
        session = store.list_sessions()[3].id
        for query in ("the", "error", "function test", "file"):
            for kwargs in ({"limit": 7}, {"limit": 50}, {"limit": 20, "role": "assistant"}, {"limit": 20, "session_id": session},
                           {"limit": 20, "tool": "bash"}):
                want = expected(docs, query, **kwargs)
                assert got(store, query, **kwargs) == want, (query, kwargs)
        assert len(expected(docs, "the", limit=10**6)) > 1000  # a common word: the limit cuts it


# -- the plan: the query stops early ----------------------------------------------------------------------


def _fill(store: SessionStore, count: int, *, start: int = 0) -> None:
    """``count`` messages of one text each, every one "common", one in 500 "rare", a millisecond apart."""
    session = store.create_session()
    store.append_messages(session.id, [
        {"info": {"role": "user", "time": {"created": T0 + start + n}},
         "parts": [{"type": "text", "text": f"common {'rare ' if n % 500 == 7 else ''}word{n}"}]}
        for n in range(count)
    ])
    store.settle()  # indexed, and PostgreSQL's statistics taken


def _sqlite_steps(url: str, query: str, limit: int) -> tuple[list[str], int]:
    """SQLite: the walk's plan and the VM steps it takes to its ``limit`` hits."""
    from sqlalchemy.dialects import sqlite

    walk, params = search_ops.sqlite_walk(query_words(query), {"session_id": None, "role": None, "tool": None, "since": None})
    compiled = walk.order_by(text("search_index.rowid DESC")).limit(limit).compile(dialect=sqlite.dialect())
    values = compiled.construct_params(params)
    args = [values[name] for name in compiled.positiontup]
    raw = raw_sqlite(url.removeprefix("sqlite:///"))
    plan = [row[3] for row in raw.execute("EXPLAIN QUERY PLAN " + str(compiled), args)]
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    raw.set_progress_handler(count, 100)
    assert len(raw.execute(str(compiled), args).fetchall()) == limit
    raw.close()
    return plan, steps


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sqlite_walks_fts5_newest_first_and_stops_at_the_limit(store_url: str) -> None:
    """FTS5 serves the rowid order (no sort), each match is joined by primary keys as it comes, and the work
    to the first 20 hits is the same with 2,000 and 8,000 matches."""
    with SessionStore.open(store_url, index_in_background=False) as store:
        _fill(store, 2_000)
        plan, small = _sqlite_steps(store_url, "common", 20)
        _fill(store, 6_000, start=2_000)
        _, large = _sqlite_steps(store_url, "common", 20)
    assert plan[0].startswith("SCAN search_index VIRTUAL TABLE INDEX"), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
    assert all(step.startswith("SEARCH") for step in plan[1:]), plan
    assert large <= small * 1.2, (small, large)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgresql_walks_the_time_index_for_a_common_word_and_gin_for_a_rare_one(store_url: str) -> None:
    """With statistics, a common word walks ``ix_search_vectors_created_at`` backwards and reads about
    ``limit`` vectors of its 6,000 matches; a rare word takes the GIN index and sorts its few matches (with
    sequential scans off: at 6,000 vectors a scan of the table is cheaper still)."""
    with SessionStore.open(store_url, index_in_background=False) as store:
        _fill(store, 6_000)
        filters = {"session_id": None, "role": None, "tool": None, "since": None}
        plans = {}
        for word in ("common", "rare"):
            walk, params = search_ops.pg_walk([word], [], filters)
            compiled = walk.compile(dialect=store.engine.dialect)
            values = compiled.construct_params({**params, "b_limit": 20})
            with store.engine.connect() as conn:
                if word == "rare":
                    conn.exec_driver_sql("SET enable_seqscan = off")
                plans[word] = [row[0] for row in conn.exec_driver_sql("EXPLAIN ANALYZE " + str(compiled), values)]
                assert len(conn.exec_driver_sql(str(compiled), values).fetchall()) == (20 if word == "common" else 12)
    common = "\n".join(plans["common"])
    scan = re.search(r"Index Scan Backward using ix_search_vectors_created_at .*actual time=\S+ rows=(\d+)", common)
    assert scan and int(scan.group(1)) <= 40, common
    rare = "\n".join(plans["rare"])
    assert "Bitmap Index Scan on ix_search_vectors " in rare and "ix_search_vectors_created_at" not in rare, rare
