"""``brutus stats``, ``check``, ``prune``, ``compact`` and ``gc`` through the real entry point, on SQLite and
PostgreSQL, with the expected numbers computed independently from the loaded history."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

import click
import pytest
from sqlalchemy import create_engine, text

from brutus.errors import InvalidInput
from brutus.cli.maintenance_commands import parse_before
from brutus.db.engine import normalize_url
from brutus.models import CompactionConfig
from brutus.store import SessionStore
from brutus.summarizers import ExtractiveSummarizer
from brutus.tokens import estimate_json_tokens, estimate_tokens

from builders import Msg, Tool, write_history
from cli_helpers import run
from conftest import plain_url


def run_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def raw_engine(url: str) -> Any:
    """An engine without brutus's settings (SQLite foreign keys stay off) to damage a database on purpose."""
    return create_engine(plain_url(normalize_url(url)))


def unchecked(connection: Any) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SET LOCAL session_replication_role = replica"))  # foreign keys off for this transaction (a pooler hands the session on)


def dump(url: str) -> dict[str, list[tuple]]:
    engine = raw_engine(url)
    with engine.connect() as connection:
        rows = {
            table: sorted(tuple(map(str, r)) for r in connection.execute(text(f"SELECT * FROM {table}")))
            for table in ("sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions")
        }
    engine.dispose()
    return rows


def write_worked_session(store: SessionStore) -> str:
    """Three turns with text, reasoning, tools (read, bash completed and errored), provider usage and cost."""
    session = store.create_session(title="worked")
    usage = [
        {"input": 1200, "output": 300, "reasoning": 40, "cache": {"read": 5000, "write": 700}},
        {"input": 800, "output": 150, "reasoning": 0, "cache": {"read": 9000, "write": 0}},
        {"input": 90, "output": 10, "reasoning": 5, "cache": {"read": 12000, "write": 30}},
    ]
    for turn in range(3):
        user = store.append_message(session.id, "user")
        store.append_part(user.id, {"type": "text", "text": f"turn {turn}: fix the bug in module_{turn}.py " * 20})
        reply = store.append_message(session.id, "assistant", parent_id=user.id, model_id="claude-sonnet-4-5")
        store.append_part(reply.id, {"type": "reasoning", "text": "thinking about it " * (10 + turn)})
        store.append_part(reply.id, {"type": "step-start"})
        for n, (tool, outcome) in enumerate([("read", "completed"), ("bash", "completed"), ("bash", "error")]):
            call = store.append_part(
                reply.id,
                {"type": "tool", "call_id": f"c{turn}{n}", "tool": tool,
                 "state": {"status": "pending", "input": {"path": f"src/m{turn}_{n}.py", "n": n}}},
            )
            store.update_tool(call.id, status="running")
            if outcome == "completed":
                store.update_tool(call.id, status="completed", output=f"line {turn}{n}\n" * (500 * (n + 1)))
            else:
                store.update_tool(call.id, status="error", error="exit status 1: " + "E" * 90)
        store.append_part(reply.id, {"type": "text", "text": "Done: the tests pass now."})
        store.finish_message(reply.id, finish="stop", tokens=usage[turn], cost=0.0125 * (turn + 1))
    return session.id


TOOL_FIELDS = ("calls", "completed", "errors", "tokens", "output_tokens", "pruned_calls", "pruned_tokens")


def expected_stats(store: SessionStore, session_id: str) -> dict[str, Any]:
    """What ``stats`` must say, computed from the loaded history (not from SQL)."""
    history = store.messages(session_id)
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_tool: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    provider = dict(input=0, output=0, reasoning=0, read=0, write=0)
    cost = 0.0
    for entry in history:
        t = entry.info.tokens
        for key, value in (("input", t.input), ("output", t.output), ("reasoning", t.reasoning),
                           ("read", t.cache.read), ("write", t.cache.write)):
            provider[key] += value
        cost += entry.info.cost
        for part in entry.parts:
            if part.type in ("text", "reasoning"):
                tokens = estimate_tokens(part.text)
            elif part.type == "tool":
                s = part.state
                output_tokens = estimate_tokens(s.output)
                tokens = estimate_json_tokens(s.input) + output_tokens + estimate_tokens(s.error)
                row = by_tool[part.tool]
                row["calls"] += 1
                row["completed"] += s.status == "completed"
                row["errors"] += s.status == "error"
                row["tokens"] += tokens
                row["output_tokens"] += output_tokens
                if s.time.compacted:
                    row["pruned_calls"] += 1
                    row["pruned_tokens"] += output_tokens
            else:
                tokens = 0
            by_type[part.type][0] += 1
            by_type[part.type][1] += tokens
    return {
        "messages": len(history),
        "user_messages": sum(m.info.role == "user" for m in history),
        "assistant_messages": sum(m.info.role == "assistant" for m in history),
        "summary_messages": sum(m.info.summary for m in history),
        "part_types": [{"type": k, "parts": v[0], "tokens": v[1]} for k, v in sorted(by_type.items())],
        "tools": [{"tool": k, **{f: v[f] for f in TOOL_FIELDS}} for k, v in sorted(by_tool.items())],
        "estimated_tokens": sum(v[1] for v in by_type.values()),
        "pruned_parts": sum(v["pruned_calls"] for v in by_tool.values()),
        "pruned_tokens": sum(v["pruned_tokens"] for v in by_tool.values()),
        "provider_tokens": {
            "input": provider["input"],
            "output": provider["output"],
            "reasoning": provider["reasoning"],
            "cache": {"read": provider["read"], "write": provider["write"]},
        },
        "cost": cost,
        "unpriced": None,  # every response with usage recorded a cost (test_cli_stats_figures has the other case)
        "cache_read_share": round(provider["read"] / counted, 4) if (counted := provider["input"] + provider["read"] + provider["write"]) else 0.0,
    }


# -- stats ----------------------------------------------------------------------------------------------------


def test_stats_match_the_history_and_the_compactions(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = write_worked_session(store)
    pruned = store.prune(session_id, CompactionConfig(prune_protect=500, prune_minimum=100))
    assert pruned.pruned > 0
    result = store.compact(session_id, ExtractiveSummarizer())
    expected = expected_stats(store, session_id)
    records = store.compactions(session_id)
    store.close()

    got = run_json("stats", session_id, "--db", store_url)
    compactions = got.pop("compactions")
    assert got.pop("session_id") == session_id and got.pop("title") == "worked"
    assert got.pop("compaction_counts") == {"completed": 1, "failed": 0, "refused": 0, "pending": 0}
    assert got.pop("cost") == pytest.approx(expected.pop("cost"))
    assert got == expected
    assert expected["summary_messages"] == 1 and expected["pruned_parts"] == len(pruned.parts)
    assert [(c["id"], c["status"], c["pre_tokens"], c["post_tokens"], c["fallback_used"]) for c in compactions] == [
        (r.id, "completed", result.pre_tokens, result.post_tokens, None) for r in records
    ]

    people = run("stats", session_id, "--db", store_url)
    assert people.returncode == 0, people.stderr
    for fragment in ("By part type", "By tool", "Compactions", f"{expected['pruned_tokens']:,} output tokens",
                     "cost $0.0750"):
        assert fragment in people.stdout


def test_stats_of_a_missing_session_is_one_line(store_url: str) -> None:
    result = run("stats", "ses_nothere", "--db", store_url)
    assert result.returncode == 1
    assert result.stderr.strip() == "brutus: error: session not found: 'ses_nothere'"


# -- check ----------------------------------------------------------------------------------------------------


def test_check_passes_then_finds_an_orphan_and_a_broken_pointer(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = write_history(store, [
        Msg("user", "hi"), Msg("assistant", "ok", tools=[Tool()]),
        Msg("user", compaction=True), Msg("assistant", "summary", summary=True), Msg("user", "go on"),
    ])
    store.close()
    clean = run_json("check", "--db", store_url)
    assert clean["ok"] is True and clean["problems"] == [] and clean["sessions"] == 1 and clean["messages"] == 5
    assert run("check", "--db", store_url).stdout.startswith("ok: 1 sessions, 5 messages")

    engine = raw_engine(store_url)
    with engine.begin() as connection:
        unchecked(connection)
        connection.execute(text(
            "INSERT INTO parts (id, session_id, message_id, position, type, data, tokens, created_at, updated_at) "
            "VALUES ('prt_orphan', :s, 'msg_gone', 0, 'text', '{\"text\": \"x\"}', 1, 1, 1)"), {"s": session_id})
        connection.execute(text(
            "UPDATE sessions SET boundary_message_id = NULL, boundary_seq = 0 WHERE id = :s"), {"s": session_id})
    engine.dispose()

    result = run("check", "--db", store_url, "--json")
    assert result.returncode == 1
    assert result.stderr.strip() == "brutus: check found 2 problems"
    report = json.loads(result.stdout)
    assert sorted(p["kind"] for p in report["problems"]) == ["broken-boundary", "orphan-part"]
    orphan = next(p for p in report["problems"] if p["kind"] == "orphan-part")
    assert orphan["row_id"] == "prt_orphan" and "msg_gone" in orphan["detail"]
    broken = next(p for p in report["problems"] if p["kind"] == "broken-boundary")
    assert broken["session_id"] == session_id and "at seq 3" in broken["detail"]
    people = run("check", "--db", store_url)
    assert people.returncode == 1 and "orphan-part" in people.stdout and "broken-boundary" in people.stdout


def test_check_finds_pending_markers_and_seq_gaps(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = write_history(store, [Msg("user", "a"), Msg("assistant", "b"), Msg("user", "c")])
    with store.engine.begin() as connection:  # foreign keys on: the message's parts go with it
        connection.execute(text(
            "INSERT INTO compactions (id, session_id, trigger, auto, overflow, status, cost, created_at) "
            "VALUES ('cmp_stuck', :s, 'auto', true, false, 'pending', 0, 1)"), {"s": session_id})
        connection.execute(text("DELETE FROM messages WHERE session_id = :s AND seq = 2"), {"s": session_id})
    store.close()
    result = run("check", "--db", store_url, "--json")
    assert result.returncode == 1  # the gap; the pending marker (its lock free: abandoned) is a notice
    report = json.loads(result.stdout)
    assert [(p["kind"], p["detail"]) for p in report["problems"]] == [("seq-gap", "missing message seq 2 (counter at 3)")]
    assert [(n["kind"], n["row_id"]) for n in report["notices"]] == [("abandoned-compaction", "cmp_stuck")]


# -- prune ----------------------------------------------------------------------------------------------------


def big_turns(store: SessionStore, turns: int = 6) -> str:
    spec: list[Msg] = []
    for n in range(turns):
        spec += [Msg("user", f"step {n}"), Msg("assistant", "reading", tools=[Tool("read", output_bytes=60_000)])]
    return write_history(store, spec)


def test_prune_dry_run_writes_nothing_and_says_what_prune_does(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = big_turns(store)
    store.close()
    before = dump(store_url)
    dry = run_json("prune", session_id, "--dry-run", "--db", store_url)
    assert dump(store_url) == before
    assert dry["dry_run"] is True and dry["pruned"] > 20_000
    real = run_json("prune", session_id, "--db", store_url)
    assert real["dry_run"] is False
    assert (real["pruned"], real["total"], [p["id"] for p in real["parts"]]) == (
        dry["pruned"], dry["total"], [p["id"] for p in dry["parts"]])
    # six turns of 15,000-token outputs, the last two turns protected: 4 candidates, 40,000 protected
    assert dry["total"] == 60_000 and dry["pruned"] == 30_000 and len(dry["parts"]) == 2
    again = run("prune", session_id, "--db", store_url)
    why = "nothing pruned: all 30,000 tokens of tool output are inside the 40,000-token protect window"
    assert again.returncode == 0 and again.stdout == f"{session_id}: {why}\n"  # the scan stops at the pruned
    people = run("prune", session_id, "--dry-run", "--db", store_url)
    assert people.stdout == f"{session_id}: {why}\n"


# -- compact --------------------------------------------------------------------------------------------------


def test_compact_then_compacting_again_is_refused_in_one_line(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = big_turns(store, turns=3)
    store.close()
    result = run_json("compact", session_id, "--instructions", "keep the file names", "--db", store_url)
    assert result["pre_tokens"] > result["post_tokens"] > 0
    assert result["fallback_used"] is None
    assert result["summary_message"]["info"]["model_id"] == "extractive"
    assert result["boundary"]["compact_metadata"]["trigger"] == "manual"
    view = run_json("show", session_id, "--db", store_url)
    assert [p["type"] for p in view[0]["parts"]] == ["compaction"]
    again = run("compact", session_id, "--db", store_url)
    assert again.returncode == 1
    assert again.stderr.count("\n") == 1 and "nothing new since the previous compaction" in again.stderr
    assert "Traceback" not in again.stderr


# -- gc -------------------------------------------------------------------------------------------------------

OLD = 1_000_000  # 1970: pruned long ago
NEW = int(datetime(2030, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)


def gc_session(store: SessionStore) -> tuple[str, dict[str, str]]:
    """Tools pruned long ago, pruned recently and not pruned; outputs of 300 KB of varied text."""
    session = store.create_session(title="gc")
    user = store.append_message(session.id, "user")
    store.append_part(user.id, {"type": "text", "text": "go"})
    reply = store.append_message(session.id, "assistant", parent_id=user.id)
    ids = {}
    for name, compacted in (("old", OLD), ("new", NEW), ("kept", None)):
        output = "".join(f"{name} {i:08x} {os.urandom(8).hex()}\n" for i in range(10_000))
        state = {"status": "completed", "input": {"name": name}, "output": output, "title": f"read {name}",
                 "metadata": {"lines": 10_000}, "time": {"start": 1, "end": 2, "compacted": compacted}}
        ids[name] = store.append_part(reply.id, {"type": "tool", "call_id": name, "tool": "read", "state": state}).id
    store.finish_message(reply.id, finish="stop")
    return session.id, ids


def output_ids(url: str) -> set[str]:
    engine = raw_engine(url)
    with engine.connect() as connection:
        found = {r[0] for r in connection.execute(text("SELECT part_id FROM tool_outputs"))}
    engine.dispose()
    return found


def test_gc_measures_after_a_checkpoint_that_had_to_wait(tmp_path) -> None:
    """gc's size is the file and its WAL after a TRUNCATE checkpoint. When that checkpoint cannot finish at
    once (another connection's checkpoint under way, or a reader on an older snapshot, as here), it is tried
    again, so the WAL is measured empty, not as it was before (the bytes a CLI run's exit would then drop)."""
    import sqlite3
    from types import SimpleNamespace

    from brutus.db.gc_ops import sqlite_storage_bytes

    path = tmp_path / "w.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE t (x TEXT)")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()  # holds this snapshot
    writer.execute("INSERT INTO t VALUES (?)", ("y" * 50_000,))  # the WAL grows past the reader's snapshot

    class ReleasesTheReaderOnBusy:  # the connection gc measures on, with no busy timeout to wait in
        def __init__(self) -> None:
            self.conn, self.busy = sqlite3.connect(path, timeout=0, isolation_level=None), []

        def execute(self, sql: str, *args: Any) -> Any:
            cursor = self.conn.execute(sql, *args)
            if "wal_checkpoint" not in sql:
                return cursor
            row = cursor.fetchone()
            self.busy.append(row[0])
            if row[0] and reader.in_transaction:
                reader.execute("COMMIT")  # the old snapshot goes away: the next try can finish
            return SimpleNamespace(fetchone=lambda: row)

    measured = ReleasesTheReaderOnBusy()
    size = sqlite_storage_bytes(measured, str(path))
    assert measured.busy == [1, 0]
    assert size == path.stat().st_size and path.with_name("w.db-wal").stat().st_size == 0
    for conn in (measured.conn, reader, writer):
        conn.close()


@pytest.mark.usefixtures("plain_outputs")
def test_gc_drops_exactly_the_old_pruned_outputs_and_keeps_metadata(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id, ids = gc_session(store)
    stats_before = run_json("stats", session_id, "--db", store_url)
    old_state = next(p.state for m in store.messages(session_id) for p in m.parts if p.id == ids["old"])
    store.close()
    expected_tokens = estimate_tokens(old_state.output)

    dry = run_json("gc", "--before", "2000-01-01", "--dry-run", "--db", store_url)
    assert (dry["parts"], dry["tokens"], dry["dry_run"], dry["bytes_reclaimed"]) == (1, expected_tokens, True, None)
    assert dry["output_bytes"] == len(old_state.output.encode())
    assert output_ids(store_url) == set(ids.values())

    sqlite = store_url.startswith("sqlite")
    done = run_json("gc", "--before", "2000-01-01", "--db", store_url)
    assert (done["parts"], done["tokens"], done["vacuumed"]) == (1, expected_tokens, not sqlite)
    assert done["output_bytes"] == dry["output_bytes"]
    assert output_ids(store_url) == {ids["new"], ids["kept"]}
    assert isinstance(done["bytes_before"], int) and isinstance(done["bytes_after"], int)
    if sqlite:
        assert done["bytes_reusable"] >= 0.9 * done["output_bytes"]  # the text's pages are free in the file
    assert run_json("stats", session_id, "--db", store_url) == stats_before  # token counts and marks kept

    store = SessionStore.open(store_url)
    old = next(p for m in store.messages(session_id) for p in m.parts if p.id == ids["old"])
    assert (old.state.output, old.state.title, old.state.metadata, old.state.time.compacted) == (
        None, "read old", {"lines": 10_000}, OLD)
    store.close()
    assert run_json("gc", "--before", "2000-01-01", "--db", store_url)["parts"] == 0
    people = run("gc", "--before", "now", "--db", store_url)
    assert people.returncode == 0 and "dropped the output text of 0 parts" in people.stdout
    assert output_ids(store_url) == {ids["new"], ids["kept"]}
    if sqlite:  # the free pages the first gc left are there for later writes, and --vacuum gives them back
        assert "`brutus gc --vacuum` shrinks the file: it rewrites the database, needing free disk its size" in people.stdout
        vacuumed = run_json("gc", "--before", "now", "--vacuum", "--db", store_url)
        assert (vacuumed["parts"], vacuumed["vacuumed"], vacuumed["bytes_free"]) == (0, True, 0)
        # (the search index, brought up to date first, filled the free pages here: nothing left to shrink)
        assert vacuumed["bytes_reclaimed"] == max(0, vacuumed["bytes_before"] - vacuumed["bytes_after"])
    assert output_ids(store_url) == {ids["new"], ids["kept"]}
    assert "needs free disk the size of the database" in run("gc", "--help").stdout.replace("\n", " ").replace("  ", " ")


def test_store_gc_refuses_a_batch_and_a_bad_time(store: SessionStore) -> None:
    from brutus.errors import InvalidInput

    with pytest.raises(InvalidInput, match="outside any transaction"):
        with store.batch():
            store.gc(0)
    with pytest.raises(InvalidInput, match="epoch milliseconds"):
        store.gc(-1)


def test_parse_before() -> None:
    now = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)
    assert parse_before("2000-01-01") == 946_684_800_000
    assert parse_before("2000-01-01T01:00:00+01:00") == 946_684_800_000
    assert parse_before("now", now=now) == int(now.timestamp() * 1000)
    assert parse_before("30d", now=now) == int((now - timedelta(days=30)).timestamp() * 1000)
    assert parse_before("12h", now=now) == int((now - timedelta(hours=12)).timestamp() * 1000)
    with pytest.raises(click.BadParameter):
        parse_before("yesterday")


def test_async_store_gc_is_the_same_gc(store_url: str) -> None:
    import asyncio

    from brutus.async_store import AsyncSessionStore

    store = SessionStore.open(store_url)
    _, ids = gc_session(store)
    store.close()

    async def collect() -> Any:
        async with await AsyncSessionStore.open(store_url) as async_store:
            with pytest.raises(InvalidInput):
                await async_store.gc(-1)
            dry = await async_store.gc(parse_before("2000-01-01"), dry_run=True)
            assert (dry.parts, dry.dry_run, dry.vacuumed) == (1, True, False)
            assert output_ids(store_url) == set(ids.values())
            return await async_store.gc(parse_before("2000-01-01"), vacuum=True)

    result = asyncio.run(collect())  # the flow the sync store runs, its VACUUM on the async store's connections
    assert (result.parts, result.vacuumed) == (1, True)
    assert output_ids(store_url) == {ids["new"], ids["kept"]}
    assert isinstance(result.bytes_before, int) and isinstance(result.bytes_after, int)
    if store_url.startswith("sqlite"):
        assert result.bytes_reclaimed >= 0.9 * result.output_bytes  # the text is gone from the file
        assert result.bytes_free == 0
