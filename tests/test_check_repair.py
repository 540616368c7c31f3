"""``brutus check`` tells a crash from corruption, ``check --repair`` rebuilds what brutus derives, ``compact``
refuses without writing a marker, ``stats`` counts refusals apart, and ``prune --protect/--minimum`` says why
it pruned nothing. Through the real entry point, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from brutus.compaction.locks import compaction_lock
from brutus.db.compaction_ops import ABANDONED
from brutus.store import SessionStore

from builders import Msg, Tool, write_history
from cli_helpers import run
from test_cli_maintenance import dump, raw_engine, unchecked


def check(url: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = run("check", "--db", url, "--json", *extra)
    return result.returncode, json.loads(result.stdout), result.stderr


def sql(url: str, statement: str, **params: Any) -> None:
    engine = raw_engine(url)
    with engine.begin() as connection:
        unchecked(connection)
        connection.execute(text(statement), params)
    engine.dispose()


def scalar(url: str, statement: str, **params: Any) -> Any:
    engine = raw_engine(url)
    with engine.connect() as connection:
        value = connection.execute(text(statement), params).scalar()
    engine.dispose()
    return value


def compacted_session(store: SessionStore) -> str:
    """Two turns, a completed compaction, a turn after it."""
    return write_history(store, [
        Msg("user", "fix it"), Msg("assistant", "reading", tools=[Tool()]),
        Msg("user", compaction=True), Msg("assistant", "the summary", summary=True),
        Msg("user", "go on"), Msg("assistant", "done"),
    ])


def pending_marker(url: str, session_id: str, marker: str = "cmp_killed") -> None:
    """What a process killed mid-compaction leaves (tests/test_crash.py): a pending marker, nothing else."""
    sql(url, "INSERT INTO compactions (id, session_id, trigger, auto, overflow, status, cost, created_at) "
             "VALUES (:c, :s, 'auto', true, false, 'pending', 0, 1)", c=marker, s=session_id)


# -- check: a crash is a notice, corruption a problem -----------------------------------------------------------


def test_an_abandoned_compaction_is_a_notice_and_repair_marks_it_failed(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    store.close()
    pending_marker(store_url, session_id)
    before = dump(store_url)

    code, report, stderr = check(store_url)
    assert (code, stderr, report["ok"], report["problems"], report["repaired"]) == (0, "", True, [], False)
    [notice] = report["notices"]
    assert (notice["kind"], notice["session_id"], notice["row_id"]) == ("abandoned-compaction", session_id, "cmp_killed")
    assert dump(store_url) == before  # a check writes nothing
    people = run("check", "--db", store_url)
    assert people.returncode == 0 and "abandoned-compaction" in people.stdout
    assert "ok: 1 sessions, 6 messages" in people.stdout and "1 notice" in people.stdout

    code, report, _ = check(store_url, "--repair")
    assert (code, report["ok"], report["repaired"], report["notices"], report["problems"]) == (0, True, True, [], [])
    assert [(r["kind"], r["row_id"]) for r in report["repairs"]] == [("abandoned-compaction", "cmp_killed")]
    assert scalar(store_url, "SELECT status FROM compactions WHERE id = 'cmp_killed'") == "failed"
    assert scalar(store_url, "SELECT error FROM compactions WHERE id = 'cmp_killed'") == ABANDONED
    code, report, _ = check(store_url, "--repair")  # nothing left to do
    assert (code, report["repairs"], report["notices"]) == (0, [], [])
    assert "repaired: nothing needed repair" in run("check", "--repair", "--db", store_url).stdout


def test_a_running_compaction_is_a_notice_and_repair_leaves_it_alone(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    pending_marker(store_url, session_id, "cmp_running")
    with compaction_lock(store.engine, session_id):  # held as a running compaction holds it
        code, report, _ = check(store_url)
        assert (code, [(n["kind"], n["row_id"]) for n in report["notices"]]) == (0, [("running-compaction", "cmp_running")])
        code, report, _ = check(store_url, "--repair")
        assert (code, report["repairs"]) == (0, [])
        assert [n["kind"] for n in report["notices"]] == ["running-compaction"]
        assert scalar(store_url, "SELECT status FROM compactions WHERE id = 'cmp_running'") == "pending"
    store.close()
    code, report, _ = check(store_url)  # the holder went away without completing: abandoned
    assert [n["kind"] for n in report["notices"]] == ["abandoned-compaction"]


def test_repair_rebuilds_counters_and_boundary_pointers(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    pointer = scalar(store_url, "SELECT boundary_message_id FROM sessions WHERE id = :s", s=session_id)
    boundary_seq = scalar(store_url, "SELECT boundary_seq FROM sessions WHERE id = :s", s=session_id)
    first = store.messages(session_id)[1].info.id
    store.close()
    before = dump(store_url)
    sql(store_url, "UPDATE messages SET part_count = 9, token_estimate = 1 WHERE id = :m", m=first)
    sql(store_url, "UPDATE sessions SET last_seq = 4, boundary_message_id = NULL, boundary_seq = 0 WHERE id = :s",
        s=session_id)

    code, report, stderr = check(store_url)
    assert code == 1 and stderr == "brutus: check found 3 problems\n"
    assert sorted(p["kind"] for p in report["problems"]) == ["broken-boundary", "seq-counter", "stale-message-counters"]

    code, report, stderr = check(store_url, "--repair")
    assert (code, stderr, report["ok"], report["problems"]) == (0, "", True, [])
    repairs = {r["kind"]: r for r in report["repairs"]}
    assert set(repairs) == {"message-counters", "seq-counter", "boundary"}
    assert repairs["seq-counter"]["detail"] == "last_seq 4 → 6 (the highest message seq)"
    assert repairs["boundary"]["detail"] == f"boundary None at seq 0 → {pointer} at seq {boundary_seq}"
    assert repairs["message-counters"]["row_id"] == first
    assert dump(store_url) == before  # exactly the rows as brutus wrote them
    assert check(store_url)[0] == 0
    people = run("check", "--repair", "--db", store_url)
    assert people.returncode == 0 and "repaired: nothing needed repair" in people.stdout


def test_real_corruption_exits_1_even_with_repair(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    store.close()
    sql(store_url, "INSERT INTO parts (id, session_id, message_id, position, type, data, tokens, created_at, updated_at) "
                   "VALUES ('prt_orphan', :s, 'msg_gone', 0, 'text', '{\"text\": \"x\"}', 1, 1, 1)", s=session_id)
    hole = "SELECT id FROM messages WHERE session_id = :s AND seq = 5"  # a hole in the history
    sql(store_url, f"DELETE FROM parts WHERE message_id IN ({hole})", s=session_id)
    sql(store_url, "DELETE FROM messages WHERE session_id = :s AND seq = 5", s=session_id)
    sql(store_url, "UPDATE sessions SET boundary_message_id = NULL, boundary_seq = 0 WHERE id = :s", s=session_id)

    code, report, stderr = check(store_url, "--repair")
    assert code == 1 and stderr == "brutus: check found 2 problems that --repair cannot fix\n"
    assert [r["kind"] for r in report["repairs"]] == ["boundary"]  # the pointer it could rebuild
    assert sorted(p["kind"] for p in report["problems"]) == ["orphan-part", "seq-gap"]
    assert scalar(store_url, "SELECT count(*) FROM parts WHERE id = 'prt_orphan'") == 1  # not "fixed" away
    people = run("check", "--repair", "--db", store_url)
    assert people.returncode == 1 and "orphan-part" in people.stdout and "seq-gap" in people.stdout
    assert "Traceback" not in people.stderr


def test_store_check_is_the_library_entry_point(store_url: str) -> None:
    from brutus.errors import InvalidInput

    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    pending_marker(store_url, session_id)
    report = store.check()
    assert report.ok and [n.kind for n in report.notices] == ["abandoned-compaction"] and not report.repaired
    with pytest.raises(InvalidInput, match="batch"):
        with store.batch():
            store.check()
    assert [r.kind for r in store.check(repair=True).repairs] == ["abandoned-compaction"]
    store.close()
    reader = SessionStore.open(store_url, read_only=True)
    with pytest.raises(InvalidInput, match="read-only"):
        reader.check(repair=True)
    assert reader.check().ok
    reader.close()


def test_async_store_check(store_url: str) -> None:
    import asyncio

    from brutus.async_store import AsyncSessionStore
    from brutus.errors import InvalidInput

    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    pending_marker(store_url, session_id)

    async def both() -> Any:
        async with await AsyncSessionStore.open(store_url) as async_store:
            return await async_store.check(), await async_store.check(repair=True)

    async def read_only() -> None:
        async with await AsyncSessionStore.open(store_url, read_only=True) as reader:
            with pytest.raises(InvalidInput, match="read-only"):
                await reader.check(repair=True)

    with compaction_lock(store.engine, session_id):  # held elsewhere, as a running compaction holds it
        plain, repaired = asyncio.run(both())
    assert [n.kind for n in plain.notices] == ["running-compaction"] and plain.repairs == []
    assert [n.kind for n in repaired.notices] == ["running-compaction"] and repaired.repairs == []
    assert scalar(store_url, "SELECT status FROM compactions WHERE id = 'cmp_killed'") == "pending"
    asyncio.run(read_only())
    plain, repaired = asyncio.run(both())
    assert [n.kind for n in plain.notices] == ["abandoned-compaction"] and plain.repairs == []
    assert [r.kind for r in repaired.repairs] == ["abandoned-compaction"] and repaired.notices == []
    store.close()


# -- compact refuses without a marker; stats counts refusals apart ------------------------------------------------


def count_compactions(url: str) -> int:
    return scalar(url, "SELECT count(*) FROM compactions")


def test_compact_refuses_an_empty_and_a_just_compacted_session_writing_nothing(store_url: str) -> None:
    store = SessionStore.open(store_url)
    empty = store.create_session(title="empty").id
    session_id = write_history(store, [Msg("user", "fix the sync " * 200),
                                       Msg("assistant", "reading", tools=[Tool(output_bytes=40_000)])])
    store.close()

    before = dump(store_url)
    refused = run("compact", empty, "--db", store_url)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == f"brutus: refused, nothing written: session {empty} has nothing to compact: it has no messages\n"
    assert dump(store_url) == before

    assert run("compact", session_id, "--db", store_url).returncode == 0
    assert count_compactions(store_url) == 1
    before = dump(store_url)
    again = run("compact", session_id, "--db", store_url, "--json")
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr == (f"brutus: refused, nothing written: session {session_id}: nothing new since the previous "
                            "compaction: compacting again would loop\n")
    assert dump(store_url) == before and count_compactions(store_url) == 1

    stats = json.loads(run("stats", session_id, "--db", store_url, "--json").stdout)
    assert stats["compaction_counts"] == {"completed": 1, "failed": 0, "refused": 0, "pending": 0}


def test_stats_counts_old_refusal_markers_apart_from_failures(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = compacted_session(store)
    boundary = store.messages(session_id)[2].info.id  # written whole, no marker: counted completed, imported
    store.close()
    rows = [  # what older brutus wrote for refusals, and a real failure
        ("cmp_a", "stalled: nothing new since the previous compaction: compacting again would loop"),
        ("cmp_b", f"InvalidInput: session {session_id} has nothing to compact"),
        ("cmp_c", "SummarizerError: the API timed out"),
        ("cmp_d", "stalled: compaction would not reduce the context: 900 tokens after vs 910 before (stall ratio 0.95)"),
    ]
    for n, (marker, error) in enumerate(rows):
        sql(store_url, "INSERT INTO compactions (id, session_id, trigger, auto, overflow, status, error, cost, created_at) "
                       "VALUES (:c, :s, 'manual', false, false, 'failed', :e, 0, :t)", c=marker, s=session_id, e=error, t=n + 2)
    pending_marker(store_url, session_id, "cmp_e")

    stats = json.loads(run("stats", session_id, "--db", store_url, "--json").stdout)
    assert stats["compaction_counts"] == {"completed": 1, "failed": 2, "refused": 2, "pending": 1}
    refused = {c["id"]: (c["refused"], c["imported"]) for c in stats["compactions"]}
    assert refused == {"cmp_a": (True, False), "cmp_b": (True, False), "cmp_c": (False, False),
                       "cmp_d": (False, False), "cmp_e": (False, False), boundary: (False, True)}
    people = run("stats", session_id, "--db", store_url)
    assert people.returncode == 0
    assert "compactions: 1 completed (1 imported), 2 failed, 2 refused (nothing to compact), 1 pending" in people.stdout


# -- prune --protect / --minimum ---------------------------------------------------------------------------------


def turns(store: SessionStore, count: int, output_bytes: int) -> str:
    """``count`` turns of one read each (``output_bytes`` / 4 tokens of output)."""
    spec: list[Msg] = []
    for n in range(count):
        spec += [Msg("user", f"step {n}"), Msg("assistant", "reading", tools=[Tool("read", output_bytes=output_bytes)])]
    return write_history(store, spec)


def pruned_ids(url: str) -> list[str]:
    engine = raw_engine(url)
    with engine.connect() as connection:
        found = [r[0] for r in connection.execute(text("SELECT call_id FROM tool_states WHERE compacted_at IS NOT NULL"))]
    engine.dispose()
    return sorted(found)


def test_prune_protect_and_minimum_steer_exactly(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = turns(store, 8, 24_000)  # 8 outputs of 6,000 tokens; the last two turns are protected
    store.close()
    before = dump(store_url)

    default = run("prune", session_id, "--db", store_url)  # 6 candidates: 36,000 tokens, all inside 40,000
    why = "nothing pruned: all 36,000 tokens of tool output are inside the 40,000-token protect window"
    assert (default.returncode, default.stdout) == (0, f"{session_id}: {why}\n")
    assert dump(store_url) == before

    # protect 20,000: the 4th newest candidate crosses it (24,000): 4 × 6,000 = 18,000 beyond, under 20,000
    low = json.loads(run("prune", session_id, "--protect", "20000", "--db", store_url, "--json").stdout)
    assert (low["pruned"], low["total"], low["prunable"], low["protect"], low["minimum"], low["parts"]) == (
        0, 36_000, 18_000, 20_000, 20_000, [])
    assert low["reason"] == ("nothing pruned: 18,000 tokens of tool output beyond the 20,000-token protect window, "
                             "not over the 20,000-token minimum")
    assert dump(store_url) == before

    dry = json.loads(run("prune", session_id, "--protect", "20000", "--minimum", "10000", "--dry-run",
                         "--db", store_url, "--json").stdout)
    assert (dry["pruned"], dry["total"], len(dry["parts"]), dry["reason"]) == (18_000, 36_000, 3, None)
    assert dump(store_url) == before

    done = json.loads(run("prune", session_id, "--protect", "20000", "--minimum", "10000", "--db", store_url,
                          "--json").stdout)
    assert (done["pruned"], done["total"], [p["call_id"] for p in done["parts"]]) == (
        18_000, 36_000, ["call_5_0", "call_3_0", "call_1_0"])
    assert pruned_ids(store_url) == sorted(["call_1_0", "call_3_0", "call_5_0"])

    again = run("prune", session_id, "--protect", "0", "--minimum", "0", "--db", store_url)
    assert again.returncode == 0  # 3 newer candidates, then the scan stops at the pruned part: 18,000 > 0
    assert pruned_ids(store_url) == sorted(f"call_{n}_0" for n in (1, 3, 5, 7, 9, 11))
    nothing = run("prune", session_id, "--protect", "0", "--minimum", "0", "--db", store_url)
    assert nothing.stdout == (f"{session_id}: nothing pruned: no tool output to prune (the two newest turns, outputs "
                              "before the last compaction and those already pruned are never counted)\n")


def test_prune_refuses_a_negative_threshold_writing_nothing(store_url: str) -> None:
    store = SessionStore.open(store_url)
    session_id = turns(store, 4, 24_000)
    store.close()
    before = dump(store_url)
    bad = run("prune", session_id, "--protect", "-1", "--db", store_url)
    assert bad.returncode == 2 and "--protect" in bad.stderr and "Traceback" not in bad.stderr
    assert dump(store_url) == before
