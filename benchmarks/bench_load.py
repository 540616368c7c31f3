"""Load: the full history of 4,000 items against the peers, and the model's view of ever longer sessions.

- Full history: a session of 1,000 turns (4,000 items) read back whole: brutus ``messages()`` against each
  peer's ``get_items()`` / ``messages`` / ``thread_messages()`` / ``get_session()`` on the same turns (goals:
  <= 2x the fastest peer that returns JSON blobs, faster than every peer marked ``typed``: ADK's Events).
- Flatness: ``filter_compacted`` + ``to_anthropic`` on sessions of 1K, 10K and 100K messages (20K at most
  with --quick) whose last completed boundary is 200 messages back: the cost should follow the view, not the
  history (goal: the largest within 2x of 1K).
- What an agent waits for before every model call: ``Conversation.request()`` (policy check + render) on
  the same sessions, against OpenAI Agents' ``SQLiteSession.get_items()`` of as many items as the 10K
  session has messages (goal: <= 0.1x; and the largest within 2x of 1K), when ``openai-agents`` is installed.
- Boundary write: appending a compaction (its part, then the finished summary) on a session with no earlier
  boundary, which makes the store look for the newest boundary in the whole history.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness import Config, Goal, Section, Table, peer_results, ratio, summary, timed
from peers._common import ITEMS_PER_TURN, checkpoint_truncate
from workload import (
    build_compacted,
    build_plain,
    open_sqlite,
    raw_connection,
    recorded,
    recording_store,
    replayer,
    write_compaction,
    write_turns,
)

from brutus import SessionStore, to_anthropic

NAME = "load"


def full_history(cfg: Config, repeats: int) -> tuple[Table, list[Goal], dict]:
    items = cfg.pick(4000, 4000, 400)
    work = cfg.workdir(NAME)
    store = open_sqlite(work / "full.db")
    session_id = store.create_session().id
    write_turns(store, session_id, 0, items // ITEMS_PER_TURN)
    loaded = store.messages(session_id)
    parts = sum(len(m.parts) for m in loaded)
    brutus = {
        "messages()": timed(lambda: store.messages(session_id), repeats=repeats),
        "filter_compacted() (no boundary: the same messages)": timed(
            lambda: store.filter_compacted(session_id), repeats=repeats
        ),
    }
    store.close()
    raw = raw_load(work / "full.db", session_id, repeats)
    peers = peer_results(cfg, "load", work / "peers", items=items, repeats=repeats)
    base = brutus["messages()"]["median"]
    table = Table(
        f"load the full history: {items:,} items ({items // ITEMS_PER_TURN:,} turns)",
        ["store, call", "ms", "vs brutus messages()"],
    )
    for label, result in brutus.items():
        table.add(f"brutus {label}", result["median"], ratio(result["median"], base))
    table.add("raw sqlite3, brutus's statements for messages() (the limit)", raw["median"], ratio(raw["median"], base))
    for label, result in sorted(peers.items(), key=lambda kv: kv[1]["load"]["median"]):
        table.add(label, result["load"]["median"], ratio(result["load"]["median"], base))
    table.notes.append(
        f"brutus: {len(loaded):,} messages with {parts:,} parts (the tool output is 2,000 bytes a turn); "
        f"median of {repeats}"
    )
    fastest = min((r["load"]["median"] for r in peers.values() if not r.get("typed")), default=None)
    fastest_typed = min((r["load"]["median"] for r in peers.values() if r.get("typed")), default=None)
    own = base - raw["median"]
    table.notes.append(
        f"brutus's own Python (messages() less the raw replay, which fetches every row): {own:.1f} ms, building "
        f"{len(loaded):,} MessageWithParts and every model nested in them"
        + (f"; the fastest JSON-blob peer's whole load: {fastest:.1f} ms" if fastest else "")
    )
    # issue #20's goal 4: within 2x of the fastest peer returning JSON blobs, faster than every typed one (ADK)
    goals = [
        Goal("brutus messages() on 4,000 items <= 2.0x the fastest JSON-blob peer", ratio(base, fastest), 2.0),
        Goal("brutus messages() on 4,000 items faster than every typed peer (ADK)", ratio(base, fastest_typed), 1.0),
    ]
    return table, goals, {"items": items, "brutus": brutus, "raw": raw, "brutus_own_ms": round(own, 2), "peers": peers}


def raw_load(path: Path, session_id: str, repeats: int) -> dict:
    """raw ``sqlite3`` sending the statements ``messages()`` sends (captured at the driver), fetching every
    row: what the load costs before any Python of brutus's."""
    recorder = recording_store(path)
    with recorded() as recording:
        recorder.messages(session_id)
    recorder.close()
    if recording.statements < 3:  # the session, its messages, their parts (and tool states)
        raise AssertionError(f"messages() sent {recording.statements} statements: the recording missed them")
    conn = raw_connection(path)
    replay = replayer(conn, recording)
    try:
        return timed(lambda: replay({}), repeats=repeats)
    finally:
        conn.close()


def measure_view(store: SessionStore, session_id: str, repeats: int) -> dict[str, Any]:
    """filter_compacted, to_anthropic, the two together, and a live ``Conversation.request()``, on one session."""
    view = store.filter_compacted(session_id)
    conversation = store.conversation(session_id, model="claude-sonnet-4-5", system="You are a coding agent.")
    conversation.user("go on")  # a view that ends with the user: request() writes nothing
    return {
        "request": timed(conversation.request, repeats=repeats),
        "view_messages": len(view),
        "anthropic_messages": len(to_anthropic(view)["messages"]),
        "filter_compacted": timed(lambda: store.filter_compacted(session_id), repeats=repeats),
        "to_anthropic": timed(lambda: to_anthropic(view), repeats=repeats),
        "both": timed(lambda: to_anthropic(store.filter_compacted(session_id)), repeats=repeats),
    }


def flatness(cfg: Config, repeats: int) -> tuple[Table, list[Goal], dict]:
    sizes = cfg.pick([1000, 10_000, 100_000], [1000, 10_000, 20_000], [400, 1000])
    work = cfg.workdir(NAME)
    path = work / "flat.db"
    store = open_sqlite(path)
    rows, data = [], {}
    for size in sizes:
        started = time.perf_counter()
        session_id = build_compacted(store, path, size)
        built = time.perf_counter() - started
        checkpoint_truncate(path, tries=100)  # the build's WAL copied in first, not while the view is timed
        result = {"build_s": round(built, 2), **measure_view(store, session_id, repeats)}
        data[size] = result
        rows.append((size, result))
    store.close()
    base = data[sizes[0]]["both"]["median"]
    table = Table(
        "the model's view of a long session: filter_compacted + to_anthropic, boundary 200 messages back",
        ["messages in session", "view", "filter_compacted ms", "to_anthropic ms", "both ms", f"vs {sizes[0]:,}",
         "request() ms"],
    )
    for size, result in rows:
        both = result["both"]["median"]
        table.add(
            f"{size:,}",
            result["view_messages"],
            result["filter_compacted"]["median"],
            result["to_anthropic"]["median"],
            both,
            ratio(both, base),
            result["request"]["median"],
        )
    table.notes.append(
        f"median of {repeats}; sessions built in {', '.join(str(data[s]['build_s']) + ' s' for s in sizes)} "
        "(bulk copies of API-written turns; the WAL checkpointed before timing)"
    )
    goals = [
        Goal(
            f"view of {sizes[-1]:,} messages <= 2x the view of {sizes[0]:,}",
            ratio(data[sizes[-1]]["both"]["median"], base),
            2.0,
        ),
        Goal(
            f"Conversation.request() on {sizes[-1]:,} messages <= 2x on {sizes[0]:,}",
            ratio(data[sizes[-1]]["request"]["median"], data[sizes[0]]["request"]["median"]),
            2.0,
        ),
    ]
    return table, goals, data


def get_items_ms(cfg: Config, items: int, repeats: int) -> float | None:
    """OpenAI Agents' ``SQLiteSession.get_items()`` of ``items`` items (the benchmark's four-item turns), in
    this process; None when ``openai-agents`` is not installed."""
    import asyncio
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))  # the peer scripts import _common as top-level
    try:
        from agents import SQLiteSession
        from openai_agents import turn_items
    except ImportError:
        return None

    session = SQLiteSession("peer", db_path=cfg.workdir(NAME) / "sqlitesession.db")
    loop = asyncio.new_event_loop()
    try:
        for start in range(0, items // ITEMS_PER_TURN, 250):
            batch = [item for i in range(start, min(start + 250, items // ITEMS_PER_TURN)) for item in turn_items(i)]
            loop.run_until_complete(session.add_items(batch))
        return timed(lambda: loop.run_until_complete(session.get_items()), repeats=repeats)["median"]
    finally:
        session.close()
        loop.close()


def waits(cfg: Config, flat: dict, repeats: int) -> tuple[Table, list[Goal]]:
    """request() on the 10K session against SQLiteSession.get_items() of 10K items."""
    size = 10_000 if 10_000 in flat else max(flat)
    peer = get_items_ms(cfg, size, repeats)
    mine = flat[size]["request"]["median"]
    table = Table(
        "what an agent waits for before each model call, on a session of "
        f"{size:,} messages / items",
        ["store", "call", "ms", "vs SQLiteSession"],
    )
    table.add("brutus", "Conversation.request() (policy + render, boundary 200 back)", mine, ratio(mine, peer))
    if peer is not None:
        table.add("openai-agents", "SQLiteSession.get_items()", peer, 1.0)
    else:
        table.notes.append("openai-agents is not installed here: no SQLiteSession to compare with")
    goal = Goal(f"Conversation.request() on {size:,} messages <= 0.1x SQLiteSession.get_items() of {size:,} items",
                ratio(mine, peer), 0.1)
    return table, [goal]


def boundary_write(cfg: Config) -> tuple[Table, dict]:
    sizes = cfg.pick([1000, 2000, 4000], [1000, 2000], [200])
    samples = cfg.pick(3, 3, 1)
    path = cfg.workdir(NAME) / "boundary.db"
    store = open_sqlite(path)
    table = Table(
        "write the first compaction boundary (compaction part + finished summary) at the end of a session",
        ["messages before it", "ms", f"vs {sizes[0]:,}"],
    )
    data = {}
    for size in sizes:
        times = []
        for _ in range(samples):  # each on a session of its own: the write changes the session
            session_id = build_plain(store, path, size)
            started = time.perf_counter()
            write_compaction(store, session_id)
            times.append((time.perf_counter() - started) * 1000)
        data[size] = summary(times)
        table.add(f"{size:,}", data[size]["median"], ratio(data[size]["median"], data[sizes[0]]["median"]))
    store.close()
    table.notes.append(
        f"median of {samples} sessions each; a session with an earlier boundary near its end is not measured here "
        "(the flatness sessions have one every 500 messages)"
    )
    return table, data


def run(cfg: Config) -> Section:
    repeats = cfg.pick(7, 5, 2)
    full_table, full_goals, full = full_history(cfg, repeats)
    flat_table, flat_goals, flat = flatness(cfg, cfg.pick(11, 9, 2))
    wait_table, wait_goals = waits(cfg, flat, cfg.pick(11, 9, 2))
    write_table, writes = boundary_write(cfg)
    data = {"repeats": repeats, "full_history": full, "view": flat, "boundary_write_ms": writes}
    return Section(
        NAME, [full_table, flat_table, wait_table, write_table], full_goals + flat_goals + wait_goals, data
    )
