"""Full-text search (``store.search``, ``brutus search``) on SQLite and PostgreSQL: hits anywhere in the history
(before a compaction, pruned outputs, summaries) with whether the model still sees them, filters, snippets,
input that is never query syntax, the index kept current by every write path, and migration 0004's backfill
and downgrade."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from typing import Any

import pytest
from cli_helpers import run
from sqlalchemy import inspect, text

from raw_sqlite import raw_sqlite
from brutus import AsyncSessionStore, InvalidInput, NotFound, SearchHit, SessionStore
from brutus.db import engine as engine_module
from brutus.db import migrate
from brutus.db.engine import make_engine
from brutus.search import make_snippet

DAY = 86_400_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool(call_id: str, tool: str, command: str, output: str, *, compacted: int | None = None) -> dict[str, Any]:
    time = {"start": 1, "end": 2, **({"compacted": compacted} if compacted else {})}
    return {"type": "tool", "call_id": call_id, "tool": tool,
            "state": {"status": "completed", "input": {"command": command}, "output": output, "title": f"ran {tool}", "time": time}}


def _msg(id: str, role: str, day: int, parts: list[dict[str, Any]], **info: Any) -> dict[str, Any]:
    return {"info": {"id": id, "role": role, "time": {"created": T0 + day * DAY}, **info}, "parts": parts}


def build(store: SessionStore) -> str:
    """A session compacted once: before the boundary a user turn and a pruned bash output; the summary; after it
    a turn with a pruned and a visible output. "zebra" is in each."""
    session = store.create_session(title="Fix the zebra parser", id="ses_main")
    store.append_messages(session.id, [
        _msg("msg_01", "user", 0, [_text("the zebra migration fails on filter_compacted")]),
        _msg("msg_02", "assistant", 0, [_tool("c1", "bash", "grep -rn zebra src/", "src/zoo.py:1: zebra = 1", compacted=T0),
                                        _text("found it in zoo.py")], parent_id="msg_01", finish="stop"),
        _msg("msg_03", "user", 1, [{"type": "compaction", "auto": False}]),
        _msg("msg_04", "assistant", 1, [_text("Summary: we chased the zebra bug into zoo.py")],
             parent_id="msg_03", summary=True, finish="stop", mode="compaction"),
        _msg("msg_05", "user", 2, [_text("now fix the test")]),
        _msg("msg_06", "assistant", 2, [_tool("c2", "read", "cat zoo.py", "old zebra notes", compacted=T0 + 2 * DAY),
                                        _tool("c3", "bash", "pytest", "1 passed: zebra ok")], parent_id="msg_05", finish="stop"),
    ])
    return session.id


def _brief(hits: list[SearchHit]) -> list[tuple[Any, ...]]:
    return [(h.message_id, h.field, h.tool, h.in_view, h.pruned, h.summary) for h in hits]


# -- what is found -------------------------------------------------------------------------------------------


def test_hits_everywhere_newest_first_with_what_the_model_sees(store: SessionStore) -> None:
    build(store)
    assert store.filter_compacted("ses_main")[0].info.id == "msg_03"  # the boundary the view starts at
    hits = store.search("zebra")
    assert _brief(hits) == [
        ("msg_06", "output", "bash", True, False, False),
        ("msg_06", "output", "read", False, True, False),  # pruned after the boundary: out of view
        ("msg_04", "text", None, True, False, True),  # the compaction summary
        ("msg_02", "call", "bash", False, False, False),  # before the boundary: compacted
        ("msg_02", "output", "bash", False, True, False),
        ("msg_01", "text", None, False, False, False),
    ]
    first = hits[0]
    assert (first.session_id, first.session_title, first.role, first.part_type, first.time) == (
        "ses_main", "Fix the zebra parser", "assistant", "tool", T0 + 2 * DAY)
    assert first.snippet == "1 passed: zebra ok" and first.marks == ((10, 15),)
    assert hits[3].snippet == "bash ran bash grep -rn zebra src/"  # a call: name, title, input strings
    assert all(h.snippet[a:b].lower() == "zebra" for h in hits for a, b in h.marks)


def test_every_word_must_be_in_one_text(store: SessionStore) -> None:
    build(store)
    assert _brief(store.search("zebra bug")) == [("msg_04", "text", None, True, False, True)]
    assert store.search("zebra pytest") == []  # the call says pytest, its output says zebra: two texts
    assert [h.message_id for h in store.search("filter_compacted")] == ["msg_01"]  # a phrase of two tokens
    assert _brief(store.search("ZOO.PY")) == [  # any case; "src/zoo.py:1" holds the words zoo and py
        ("msg_06", "call", "read", True, False, False),
        ("msg_04", "text", None, True, False, True),
        ("msg_02", "text", None, False, False, False),  # within a message, later parts first
        ("msg_02", "output", "bash", False, True, False),
    ]
    assert store.search("zebr") == []  # whole words only


def test_filters(store: SessionStore) -> None:
    build(store)
    other = store.create_session(title="other", id="ses_other")
    store.append_messages(other.id, [_msg("msg_x1", "user", 5, [_text("a zebra elsewhere")])])
    assert [h.session_id for h in store.search("zebra", limit=2)] == ["ses_other", "ses_main"]
    assert {h.session_id for h in store.search("zebra", session_id="ses_main")} == {"ses_main"}
    assert [h.message_id for h in store.search("zebra", role="user")] == ["msg_x1", "msg_01"]
    assert _brief(store.search("zebra", tool="read")) == [("msg_06", "output", "read", False, True, False)]
    assert [h.message_id for h in store.search("zebra", since=T0 + 2 * DAY)] == ["msg_x1", "msg_06", "msg_06"]
    with pytest.raises(NotFound):
        store.search("zebra", session_id="ses_missing")
    for bad in ({"role": "system"}, {"limit": 0}, {"limit": True}, {"since": -1}, {"since": "yesterday"}, {"tool": ""}):
        with pytest.raises(InvalidInput):
            store.search("zebra", **bad)


def test_a_query_is_words_never_syntax(store: SessionStore) -> None:
    build(store)
    for empty in ("", "   ", '"', "()*-:^", "\t\n"):
        with pytest.raises(InvalidInput, match="nothing to search for"):
            store.search(empty)
    with pytest.raises(InvalidInput):
        store.search("zebra\x00")
    with pytest.raises(InvalidInput):
        store.search(None)  # type: ignore[arg-type]
    for odd in ('zebra"', '"zebra', "zebra*", "-zebra", "zebra:", "(zebra)", "'zebra'", "zebra^"):
        assert len(store.search(odd)) == 6, odd
    for nothing in ('AND(', 'NEAR(zebra', 'zebra OR lion', 'zebra NOT bug', '"" AND ""', "col:zebra"):
        assert store.search(nothing) == [], nothing


def test_snippets_are_cut_around_the_first_match() -> None:
    text = " ".join(f"w{i}" for i in range(100)) + " the ZEBRA   ran\n\naway " + " ".join(f"v{i}" for i in range(100))
    snippet, marks = make_snippet(text, ["zebra"])
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "the ZEBRA ran away" in snippet and len(snippet) <= 162
    assert [snippet[a:b] for a, b in marks] == ["ZEBRA"]
    assert snippet.index("ZEBRA") <= 45  # little context before it
    assert make_snippet("short zebra", ["zebra"]) == ("short zebra", ((6, 11),))
    assert make_snippet("no match here", ["zebra"]) == ("no match here", ())
    assert make_snippet("zebras and a zebra_b", ["zebra_b"]) == ("zebras and a zebra_b", ((13, 20),))


# -- the index stays current ---------------------------------------------------------------------------------


def _catch_up(url: str) -> None:
    """Index everything pending, as a writer's search does."""
    with SessionStore.open(url) as writer:
        writer.search("catchup")


PG_FRESH = {  # each kind's vector as migration 0005 computes it
    0: ("parts", "id", "coalesce(brutus_search_vector(data ->> 'text'), ''::tsvector)", "type IN ('text', 'reasoning')"),
    1: ("tool_states", "part_id", "coalesce(brutus_search_vector(tool || ' ' || coalesce(title, '') || ' ' || "
        "coalesce(error, '') || ' ' || coalesce(brutus_json_strings(input), '')), ''::tsvector)", "true"),
    2: ("tool_outputs", "part_id", "coalesce(brutus_search_vector(output), ''::tsvector)", "true"),
}


def _pg_index_is_exact(url: str, *, catch_up: bool = False) -> None:
    """PostgreSQL: every document not pending has its vector, exactly as computed now; no vector is left of a
    row that is gone or no longer text. ``catch_up``: index what is pending first, and check nothing is left."""
    if catch_up:
        _catch_up(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if catch_up:
                assert conn.execute(text("SELECT count(*) FROM search_pending")).scalar() == 0
            for kind, (table, id_column, fresh, scope) in PG_FRESH.items():
                pending = f"EXISTS (SELECT 1 FROM search_pending p WHERE p.part_id = d.{id_column} AND p.kind = {kind})"
                wrong = conn.execute(text(
                    f"SELECT count(*) FROM {table} d LEFT JOIN search_vectors v ON v.part_id = d.{id_column} "
                    f"AND v.kind = {kind} WHERE {scope} AND NOT {pending} AND v.vector IS DISTINCT FROM {fresh}"
                )).scalar()
                assert wrong == 0, (table, wrong)
                left = conn.execute(text(
                    f"SELECT count(*) FROM search_vectors v WHERE v.kind = {kind} AND NOT EXISTS "
                    f"(SELECT 1 FROM {table} d WHERE d.{id_column} = v.part_id AND {scope})"
                )).scalar()
                assert left == 0 or kind == 0, (table, left)  # a part no longer text: its hits are left out
    finally:
        engine.dispose()


def _index_is_exact(url: str, *, catch_up: bool = False) -> None:
    if url.startswith("postgresql"):
        _pg_index_is_exact(url, catch_up=catch_up)
    else:
        _sqlite_index_is_exact(url, catch_up=catch_up)


def _sqlite_index_is_exact(url: str, *, catch_up: bool = False) -> None:
    """SQLite: the FTS5 index holds exactly the documents a fresh build from the rows would (term, document,
    offset) for every key, every key names a row that exists, and every document either has a key or is
    pending (``search_pending``). ``catch_up``: index what is pending first, and check nothing is left."""
    if not url.startswith("sqlite"):
        return
    if catch_up:
        _catch_up(url)
    db = raw_sqlite(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        if catch_up:
            assert db.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
        db.execute("CREATE VIRTUAL TABLE temp.fresh USING fts5(body, content='', tokenize='unicode61 remove_diacritics 0')")
        db.execute("INSERT INTO temp.fresh(rowid, body) SELECT key, body FROM search_documents")
        db.execute("CREATE VIRTUAL TABLE temp.v_live USING fts5vocab(main, search_index, instance)")
        db.execute("CREATE VIRTUAL TABLE temp.v_fresh USING fts5vocab(temp, fresh, instance)")
        live = db.execute("SELECT term, doc, offset FROM temp.v_live ORDER BY 1, 2, 3").fetchall()
        fresh = db.execute("SELECT term, doc, offset FROM temp.v_fresh ORDER BY 1, 2, 3").fetchall()
        assert live == fresh
        orphans = db.execute(
            "SELECT count(*) FROM search_keys k WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.id = k.part_id"
            " AND k.kind = 0) AND NOT EXISTS (SELECT 1 FROM tool_states t WHERE t.part_id = k.part_id AND k.kind = 1)"
            " AND NOT EXISTS (SELECT 1 FROM tool_outputs o WHERE o.part_id = k.part_id AND k.kind = 2)"
        ).fetchone()[0]
        assert orphans == 0
        unaccounted = db.execute(
            "SELECT count(*) FROM (SELECT id, 0 AS kind FROM parts WHERE type IN ('text', 'reasoning') UNION ALL "
            "SELECT part_id, 1 FROM tool_states UNION ALL SELECT part_id, 2 FROM tool_outputs) d "
            "WHERE NOT EXISTS (SELECT 1 FROM search_keys k WHERE k.part_id = d.id AND k.kind = d.kind) "
            "AND NOT EXISTS (SELECT 1 FROM search_pending p WHERE p.part_id = d.id AND p.kind = d.kind)"
        ).fetchone()[0]
        assert unaccounted == 0
    finally:
        db.close()


@pytest.mark.parametrize("searcher", ["writer", "reader"])
def test_every_write_path_keeps_the_index_current(store: SessionStore, store_url: str, searcher: str) -> None:
    """Each write, then a search. ``writer``: the store's own search indexes what was written first;
    ``reader``: a read-only store searches, which never indexes, and everything before the write was indexed,
    so a changed or deleted document must be read from the rows, not found by its old text."""
    reader = SessionStore.open(store_url, read_only=True)

    def search(query: str, **filters: Any) -> list[SearchHit]:
        if searcher == "writer":
            return store.search(query, **filters)
        hits = reader.search(query, **filters)
        _index_is_exact(store_url, catch_up=True)  # the next write changes indexed documents
        return hits

    session_id = build(store)
    _index_is_exact(store_url, catch_up=searcher == "reader")
    message = store.append_message(session_id, "assistant")
    part = store.append_part(message.id, {"type": "tool", "call_id": "c9", "tool": "bash", "state": {"status": "pending", "input": {"command": "make giraffe"}}})
    assert _brief(search("giraffe")) == [(message.id, "call", "bash", True, False, False)]
    store.update_tool(part.id, status="running", title="building okapi")
    assert [h.field for h in search("okapi")] == ["call"]
    store.update_tool(part.id, status="completed", output="built the okapi", title="built")
    assert [h.field for h in search("okapi")] == ["output"]  # the old title is gone from the index
    assert [h.field for h in search("giraffe built")] == ["call"]
    store.append_part(message.id, {"type": "reasoning", "text": "thinking of a pangolin"})
    assert [h.part_type for h in search("pangolin")] == ["reasoning"]
    _index_is_exact(store_url)

    assert store.rewind(session_id, message.id) == 1
    assert search("okapi") == search("pangolin") == search("giraffe") == []
    _index_is_exact(store_url)

    result = store.gc(T0 + DAY)  # drops the output pruned at T0 (before the boundary), keeps its call
    assert result.parts == 1
    assert _brief(search("zebra", session_id=session_id, tool="bash")) == [
        ("msg_06", "output", "bash", True, False, False), ("msg_02", "call", "bash", False, False, False)]
    _index_is_exact(store_url)  # after VACUUM every document is indexed or pending

    child = store.create_session(parent_id=session_id)
    store.append_messages(child.id, [_msg("msg_c1", "user", 3, [_text("a child zebra")])])
    assert len(search("zebra")) == 6  # five left after gc, and the child
    store.delete_session(session_id)
    assert search("zebra") == []
    reader.close()
    _index_is_exact(store_url, catch_up=True)


def test_sqlite_writes_leave_the_index_alone_and_a_search_fills_it(tmp_path) -> None:
    """A write touches nothing of the index: its documents are pending. A read-only store finds them by reading
    them; the writer's search puts them into FTS5 first, in one transaction, and then nothing is pending."""
    url = f"sqlite:///{tmp_path / 'pending.db'}"
    SessionStore.open(url).close()
    db = raw_sqlite(tmp_path / "pending.db")
    index = lambda: db.execute(  # noqa: E731
        "SELECT (SELECT count(*) FROM search_keys), (SELECT count(*) FROM search_index_docsize), "
        "(SELECT count(*) FROM search_pending)").fetchone()
    with SessionStore.open(url, index_in_background=False) as store:
        session = store.create_session()
        messages = []
        for i in range(40):
            messages.append(store.append_message(session.id, "user"))
            store.append_part(messages[-1].id, _text(f"step {i} capybara{i}"))
        assert index() == (0, 0, 40)
        with SessionStore.open(url, read_only=True) as reader:
            assert [h.message_id for h in reader.search("capybara7")] == [messages[7].id]
            assert len(reader.search("step", limit=100)) == 40
        assert index() == (0, 0, 40)  # a reader never writes
        assert [h.message_id for h in store.search("capybara39")] == [messages[39].id]
        assert index() == (40, 40, 0)
        assert store.search("capybara39") and index() == (40, 40, 0)  # nothing pending: nothing written
    db.close()
    _sqlite_index_is_exact(url)


def test_a_rowid_given_out_again_counts_as_pending(tmp_path) -> None:
    """SQLite gives a new row the highest rowid plus one, so once the highest indexed row is gone its number
    comes back: the mark goes down with the delete, so the new document is pending, not taken as indexed."""
    url = f"sqlite:///{tmp_path / 'reuse.db'}"
    with SessionStore.open(url, index_in_background=False) as store:
        session = store.create_session()
        first = store.append_message(session.id, "user")
        store.append_part(first.id, _text("an aardvark"))
        last = store.append_message(session.id, "user")
        store.append_part(last.id, _text("a wombat"))
        _sqlite_index_is_exact(url, catch_up=True)
        db = raw_sqlite(tmp_path / "reuse.db")
        (gone,) = db.execute("SELECT parts_seen FROM search_state").fetchone()
        assert store.rewind(session.id, last.id) == 1
        assert db.execute("SELECT parts_seen FROM search_state").fetchone() == (gone - 1,)
        again = store.append_message(session.id, "user")
        store.append_part(again.id, _text("a numbat"))
        assert db.execute("SELECT max(rowid) FROM parts").fetchone() == (gone,)  # the number is back
        db.close()
        with SessionStore.open(url, read_only=True) as reader:
            assert [h.message_id for h in reader.search("numbat")] == [again.id] and reader.search("wombat") == []
        assert [h.message_id for h in store.search("numbat")] == [again.id] and store.search("wombat") == []
    _sqlite_index_is_exact(url, catch_up=True)


def test_a_rowid_given_out_again_after_a_tool_part_counts_as_pending(tmp_path) -> None:
    """The highest indexed row may be a part with no document of its own (a tool part): its delete lowers the
    mark too, or the next text part would take its number and never be indexed."""
    url = f"sqlite:///{tmp_path / 'reuse-tool.db'}"
    with SessionStore.open(url, index_in_background=False) as store:
        session = store.create_session()
        first = store.append_message(session.id, "user")
        store.append_part(first.id, _text("an aardvark"))
        last = store.append_message(session.id, "assistant")
        store.append_part(last.id, _tool("c1", "bash", "ls", "a wombat"))
        _sqlite_index_is_exact(url, catch_up=True)
        assert store.rewind(session.id, last.id) == 1
        again = store.append_message(session.id, "user")
        store.append_part(again.id, _text("a numbat"))
        assert [h.message_id for h in store.search("numbat")] == [again.id]
        assert store.search("wombat") == []
    _sqlite_index_is_exact(url, catch_up=True)


def test_a_search_while_another_writer_holds_the_database_reads_what_is_pending(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's search cannot index while another connection holds the write lock past the busy timeout:
    it still answers, reading the pending documents itself, and indexes at the next search."""
    monkeypatch.setattr(engine_module, "BUSY_TIMEOUT_MS", 0)  # the store's connections give up at once
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    with SessionStore.open(url, index_in_background=False) as store:
        session = store.create_session()
        message = store.append_message(session.id, "user")
        store.append_part(message.id, _text("a busy beaver"))
        holder = raw_sqlite(tmp_path / "busy.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            assert [h.message_id for h in store.search("beaver")] == [message.id]
            assert holder.execute("SELECT count(*) FROM search_keys").fetchone() == (0,)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert [h.message_id for h in store.search("beaver")] == [message.id]
    _sqlite_index_is_exact(url)
    db = raw_sqlite(tmp_path / "busy.db")
    assert db.execute("SELECT count(*) FROM search_keys").fetchone() == (1,)
    db.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # SQLite has one writer at a time
def test_postgresql_writes_leave_the_index_alone_and_a_writer_still_open_is_not_missed(store_url: str) -> None:
    """PostgreSQL: a write computes no vector, a search indexes what was written since. A transaction still open
    while a search indexes commits later, with a smaller transaction id than rows already indexed: the index
    run's snapshot says it did not see it, so it is pending and found (a high-water mark would lose it)."""
    store = SessionStore.open(store_url, index_in_background=False)
    engine = make_engine(store_url)

    def counts() -> tuple[int, int]:  # its connection closed at once: an open one would block the next TRUNCATE
        with engine.connect() as connection:
            return tuple(connection.execute(text("SELECT (SELECT count(*) FROM search_vectors), (SELECT count(*) FROM search_pending)")).one())

    session = store.create_session()
    early = store.append_message(session.id, "user")
    store.append_part(early.id, _text("an early ocelot"))
    assert tuple(counts()) == (0, 1)
    other_session = store.create_session()  # its own: the open batch holds its session's row
    with SessionStore.open(store_url, index_in_background=False) as other:
        with other.batch():  # open: its transaction id comes before the next write's
            slow = other.append_message(other_session.id, "user")
            other.append_part(slow.id, _text("a slow ocelot"))
            fast = store.append_message(session.id, "user")
            store.append_part(fast.id, _text("a fast ocelot"))
            assert [h.message_id for h in store.search("ocelot")] == [fast.id, early.id]  # indexes both
            assert tuple(counts()) == (2, 0)  # the open one is not visible yet
        assert tuple(counts()) == (2, 1)  # committed: pending
        with SessionStore.open(store_url, read_only=True) as reader:
            assert [h.message_id for h in reader.search("slow ocelot")] == [slow.id]
        assert [h.message_id for h in store.search("ocelot")] == [fast.id, slow.id, early.id]
    assert tuple(counts()) == (3, 0)
    engine.dispose()
    store.close()
    _pg_index_is_exact(store_url)


def test_a_search_inside_a_batch_reads_what_is_pending_and_leaves_it_for_after(store_url: str) -> None:
    """Inside ``store.batch()`` a search does not index: an index run in the batch's transaction would hold the
    index's lock (and, on PostgreSQL, its short lock timeout) until the batch ends. It finds what is pending,
    the batch's own writes too; after the batch the next search indexes them."""
    with SessionStore.open(store_url, index_in_background=False) as store:
        session = store.create_session()
        early = store.append_message(session.id, "user")
        store.append_part(early.id, _text("an early ocelot"))
        with store.batch():
            late = store.append_message(session.id, "user")
            store.append_part(late.id, _text("a batched ocelot"))
            assert [h.message_id for h in store.search("ocelot")] == [late.id, early.id]
            assert _pending(store) == 1  # the early one not indexed (the batch's own is not committed yet)
        assert _pending(store) == 2
        assert [h.message_id for h in store.search("ocelot")] == [late.id, early.id]
        assert _pending(store) == 0


def _pending(store: SessionStore) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM search_pending")).scalar_one()


def test_huge_and_hostile_text_is_indexed_up_to_the_limit(store: SessionStore) -> None:
    session = store.create_session()
    message = store.append_message(session.id, "assistant")
    odd = "nul \x00 lone \ud800 escape \ue000 crlf\r\n é漢 quokka"
    store.append_part(message.id, _text(odd))
    big = "word " * 39_990 + "narwhal " + "x" * 3_000_000  # a 3 MB output; the match within the first 200,000
    store.append_part(message.id, {"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "completed", "input": {"q": odd}, "output": big + " beyondlimit"}})
    assert [h.field for h in store.search("quokka")] == ["call", "text"]
    assert "quokka" in store.search("quokka")[1].snippet
    assert [h.field for h in store.search("narwhal")] == ["output"]
    assert store.search("beyondlimit") == []


def test_the_async_store_searches_too(store_url: str) -> None:
    sync = SessionStore.open(store_url)
    build(sync)
    sync.close()

    async def main() -> list[SearchHit]:
        async with await AsyncSessionStore.open(store_url) as store:
            return await store.search("zebra", role="user")

    assert [h.message_id for h in asyncio.run(main())] == ["msg_01"]


# -- the CLI -------------------------------------------------------------------------------------------------


def test_cli_prints_hits_plain_when_piped(store: SessionStore, store_url: str) -> None:
    build(store)
    result = run("search", "zebra", "--tool", "bash", "--db", store_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ses_main  Fix the zebra parser",
        "  msg_06  assistant  2026-01-03 00:00  in view",
        "    bash output: 1 passed: **zebra** ok",
        "  msg_02  assistant  2026-01-01 00:00  compacted",
        "    bash call: bash ran bash grep -rn **zebra** src/",
        "  msg_02  assistant  2026-01-01 00:00  pruned",
        "    bash output: src/zoo.py:1: **zebra** = 1",
    ]
    assert run("search", "nothinglikethis", "--db", store_url).stdout == "no hits\n"


def test_cli_json_gives_every_field(store: SessionStore, store_url: str) -> None:
    build(store)
    result = run("search", "zebra", "--json", "--limit", "1", "--since", "2026-01-02", "--role", "assistant", "--db", store_url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{
        "session_id": "ses_main", "session_title": "Fix the zebra parser", "message_id": "msg_06",
        "part_id": store.messages("ses_main")[5].parts[1].id, "role": "assistant", "summary": False,
        "part_type": "tool", "field": "output", "tool": "bash", "snippet": "1 passed: zebra ok", "marks": [[10, 15]],
        "time": T0 + 2 * DAY, "in_view": True, "pruned": False,
    }]


def test_cli_at_80_columns_never_cuts_an_id(store: SessionStore, store_url: str) -> None:
    session = store.create_session(title="A title far too long to fit on one line of an eighty-column terminal, really")
    message = store.append_message(session.id, "user")
    store.append_part(message.id, _text("lorem " * 30 + "zebra " + "ipsum " * 60))
    result = run("search", "zebra", "--db", store_url, env={"COLUMNS": "80", "TTY_COMPATIBLE": "1"})
    assert result.returncode == 0, result.stderr
    lines = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout).splitlines()
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith(session.id + "  A title") and lines[0].endswith("…")
    assert lines[1].split() == [message.id, "user", *lines[1].split()[2:4], "in", "view"]
    assert "zebra" in lines[2] and lines[2].endswith("…")


def test_cli_errors_are_one_line_and_write_nothing(store_url: str, tmp_path) -> None:
    cases = [
        (("search", "", "--db", store_url), 1, "brutus: error: nothing to search for"),
        (("search", "zebra", "--session", "ses_missing", "--db", store_url), 1, "brutus: error:"),
        (("search", "zebra", "--since", "yesterday", "--db", store_url), 2, "Invalid value for --since"),
        (("search", "zebra", "--role", "system", "--db", store_url), 2, "Invalid value for '--role'"),
        (("search", "zebra", "--limit", "0", "--db", store_url), 2, "Invalid value for '--limit'"),
    ]
    for args, code, message in cases:
        result = run(*args)
        assert (result.returncode, result.stdout) == (code, ""), (args, result)
        assert message in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
    missing = tmp_path / "missing.db"
    assert run("search", "zebra", "--db", f"sqlite:///{missing}").returncode == 1
    assert not missing.exists()  # a reading command never creates a database


# -- migration 0004 ------------------------------------------------------------------------------------------


def _search_objects(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                rows = conn.execute(text(
                    "SELECT indexname FROM pg_indexes WHERE indexname LIKE '%search' UNION ALL "
                    "SELECT proname FROM pg_proc WHERE proname IN ('brutus_json_strings', 'brutus_search_vector')"))
                return {r[0] for r in rows}
            rows = conn.execute(text("SELECT name FROM sqlite_master WHERE name LIKE 'search%'"))
            return {r[0] for r in rows}
    finally:
        engine.dispose()


def test_a_store_on_a_database_without_the_index_writes_as_before(tmp_path) -> None:
    """``SessionStore(engine)`` does not migrate: on a 0003 database (no search index) writes commit as they did
    before 0004."""
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(engine, "0003")
    store = SessionStore(engine)
    try:
        session_id = build(store)
        message = store.append_message(session_id, "user")
        store.append_part(message.id, _text("after 0003"))
        assert store.messages(session_id)[-1].parts[0].text == "after 0003"
    finally:
        store.close()


def test_0004_backfills_a_0003_database_and_downgrades(db_url: str) -> None:
    engine = make_engine(db_url)
    migrate.upgrade(engine, "0003")
    assert _search_objects(db_url) == set()
    old = SessionStore(engine)  # the constructor does not migrate: rows written at 0003
    build(old)
    old.close()

    with pytest.raises(Exception):  # noqa: B017  reading commands never migrate
        SessionStore.open(db_url, auto_migrate=False).search("zebra")
    with SessionStore.open(db_url) as store:  # upgrades to head: the index is built from the rows
        assert len(store.search("zebra")) == 6
        assert [h.message_id for h in store.search("chased")] == ["msg_04"]
    _index_is_exact(db_url)
    assert _search_objects(db_url)

    engine = make_engine(db_url)
    migrate.downgrade(engine, "0003")
    engine.dispose()
    assert _search_objects(db_url) == set()
    engine = make_engine(db_url)
    at_0003 = SessionStore(engine)
    message = at_0003.append_message("ses_main", "user")  # writes work without the triggers
    at_0003.append_part(message.id, _text("written at 0003: a wombat"))
    at_0003.close()
    with SessionStore.open(db_url) as store:
        assert [h.message_id for h in store.search("wombat")] == [message.id]
        assert len(store.search("zebra")) == 6
    _index_is_exact(db_url)
    if db_url.startswith("postgresql"):
        engine = make_engine(db_url)
        with engine.connect() as conn:
            names = {ix["name"] for ix in inspect(conn).get_indexes("search_vectors")}
        engine.dispose()
        assert "ix_search_vectors" in names


def test_0005_takes_a_0004_index_as_it_is_and_downgrades_to_one(tmp_path) -> None:
    """A 0004 database with documents indexed and documents pending (keys above its mark) upgrades to an exact
    index with nothing pending; a downgrade gives 0004 back: every document keyed and indexed, its triggers
    keeping the index current again."""
    path = tmp_path / "0004.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    migrate.upgrade(engine, "0004")
    at_0004 = SessionStore(engine)
    session_id = build(at_0004)
    at_0004.close()
    db = raw_sqlite(path, isolation_level=None)
    db.execute("INSERT INTO search_index(rowid, body) SELECT key, body FROM search_documents WHERE key <= 3")
    db.execute("UPDATE search_state SET indexed = 3")  # three indexed, the rest pending, as 0004's batches leave it
    keys = db.execute("SELECT key, part_id, kind FROM search_keys ORDER BY key").fetchall()

    migrate.upgrade(make_engine(url), "0005")
    assert db.execute("SELECT count(*) FROM search_pending").fetchone() == (0,)
    assert db.execute("SELECT key, part_id, kind FROM search_keys ORDER BY key").fetchall() == keys
    _sqlite_index_is_exact(url)
    migrate.upgrade(make_engine(url), "head")  # the revisions after 0005 leave the index alone
    _sqlite_index_is_exact(url)
    with SessionStore.open(url, read_only=True) as reader:
        assert len(reader.search("zebra")) == 6
    with SessionStore.open(url, index_in_background=False) as store:  # at head: a write now leaves a pending document
        message = store.append_message(session_id, "user")
        store.append_part(message.id, _text("a pending wombat"))

    engine = make_engine(url)
    migrate.downgrade(engine, "0004")
    engine.dispose()
    (newest,) = db.execute("SELECT max(key) FROM search_keys").fetchone()
    assert newest == len(keys) + 1 and db.execute("SELECT indexed FROM search_state").fetchone() == (newest,)
    triggers = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"search_parts_insert", "search_tool_outputs_update"} <= triggers
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('search_pending', 'search_stale')").fetchone() == (0,)
    fresh = db.execute("SELECT count(*) FROM search_index WHERE search_index MATCH 'wombat'").fetchone()
    assert fresh == (1,)
    at_0004 = SessionStore(make_engine(url))
    later = at_0004.append_message(session_id, "user")
    at_0004.append_part(later.id, _text("a numbat at 0004"))  # 0004's insert trigger gives it a key
    at_0004.close()
    assert db.execute("SELECT max(key) FROM search_keys").fetchone() == (newest + 1,)
    db.close()
    with SessionStore.open(url) as store:  # up again
        assert [h.message_id for h in store.search("numbat")] == [later.id]
        assert [h.message_id for h in store.search("wombat")] == [message.id]
    _sqlite_index_is_exact(url, catch_up=True)
