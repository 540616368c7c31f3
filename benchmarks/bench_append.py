"""Append one agent turn on SQLite (WAL, synchronous=NORMAL): brutus, raw sqlite3 and the peers.

brutus writes the turn as a live agent does (``workload.agent_step``: 8 calls), with a commit per call and
inside ``store.batch()`` (one commit). The limit is raw ``sqlite3`` sending exactly the statements brutus
sent for the same turn (captured at the driver, replayed with fresh ids on a fresh session each turn), with
the same commits. The peers store the same turn as four items: one call per item (a commit each) and one
call per turn (ADK has no such call); each runs in its own virtualenv as a ``PeerServer``. The rounds of
brutus, raw and every peer alternate, so a noisy neighbour hits all alike. A figure is the mean ms per turn
over all rounds: the checkpoints (one every few dozen turns) count wherever they fall, where a median of
rounds could leave out the rounds that took them.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from harness import Config, Goal, PeerServer, Section, Table, peer_servers, ratio, summary
from peers._common import ITEMS_PER_TURN, checkpoint_truncate, wal_kib
from workload import agent_step, open_sqlite, raw_connection, recorded, recording_store, replayer, whole_turn

NAME = "append"
PEER_BASE = "OpenAI Agents SQLiteSession"
WAL = "WAL KiB/turn"


def interleaved(
    contenders: dict[str, Callable[[int], Any]], servers: list[PeerServer], *, turns: int, rounds: int, warmup: int = 5
) -> dict[str, dict[str, Any]]:
    """Rounds of ``turns`` turns of each contender, then of each peer's, in turn; ms per turn per round,
    summarized. The peers warm up on their own before they report ready."""
    counters = {name: iter(range(10**9)) for name in contenders}
    for name, turn in contenders.items():
        for _ in range(warmup):
            turn(next(counters[name]))
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, turn in contenders.items():
            start = time.perf_counter()
            for _ in range(turns):
                turn(next(counters[name]))
            samples[name].append((time.perf_counter() - start) * 1000 / turns)
        for server in servers:
            for name, ms in server.round(turns).items():
                samples.setdefault(name, []).append(ms)
    return {name: summary(s) for name, s in samples.items()}


def raw_contenders(
    cfg: Config, total: int
) -> tuple[dict[str, Callable[[int], Any]], dict[str, Any], sqlite3.Connection]:
    """The raw sqlite3 replays of brutus's statements for one turn, per call and in one batch."""
    path = cfg.workdir(NAME) / "raw.db"
    store = recording_store(path)
    with recorded() as creating:
        template = store.create_session().id
    with recorded() as per_call:
        per_call_ids = agent_step(store, template, 0)
    batched_session = store.create_session().id
    with recorded() as batched:
        with store.batch():
            batched_ids = agent_step(store, batched_session, 0)
    whole_session = store.create_session().id
    with recorded() as whole:
        whole_ids = whole_turn(store, whole_session, 0)
    store.close()

    conn = raw_connection(path)
    create = replayer(conn, creating)
    sessions = {mode: [f"ses_raw_{mode}_{k:06d}" for k in range(total)] for mode in ("call", "batch", "whole")}
    for mode in sessions:
        for session_id in sessions[mode]:
            create({template: session_id})

    def contender(mode: str, recording: Any, session_id: str, ids: list[str]) -> Callable[[int], None]:
        replay = replayer(conn, recording)
        fresh = sessions[mode]

        def turn(i: int) -> None:
            mapping = {session_id: fresh[i]}
            for n, old in enumerate(ids):
                mapping[old] = f"{old[:4]}raw{mode}{i:07d}{n}"
            replay(mapping)

        return turn

    contenders = {
        "raw_call": contender("call", per_call, template, per_call_ids),
        "raw_batch": contender("batch", batched, batched_session, batched_ids),
        "raw_whole": contender("whole", whole, whole_session, whole_ids),
    }
    shape = {
        "per_call": {"statements": per_call.statements, "commits": per_call.commits},
        "batch": {"statements": batched.statements, "commits": batched.commits},
        "whole": {"statements": whole.statements, "commits": whole.commits},
        "captured": [c[1] for c in per_call.calls if c[0] == "sql"],
    }
    return contenders, shape, conn


def brutus_wal(cfg: Config, turns: int = 100) -> dict[str, float]:
    """KiB brutus writes to the WAL per turn, in ``store.batch()``, with a commit per call and as one
    ``append_messages``: what a commit costs grows with them (automatic checkpoints off while counting)."""
    path = cfg.workdir(NAME) / "wal.db"
    store = open_sqlite(path)
    store._driver_connection().execute("PRAGMA wal_autocheckpoint = 0")  # the connection this thread writes on
    store._checkpointer.committed = lambda: None  # and no checkpoint thread: the WAL keeps every page written
    session_id = store.create_session().id
    written = {}
    for how, start in (("batch", 0), ("call", 10_000), ("whole", 20_000)):

        def turn(i: int) -> None:
            if how == "batch":
                with store.batch():
                    agent_step(store, session_id, i)
            elif how == "whole":
                whole_turn(store, session_id, i)
            else:
                agent_step(store, session_id, i)

        for i in range(start, start + 20):  # warm: the tables and indexes exist past their first pages
            turn(i)
        checkpoint_truncate(path)
        for i in range(start + 20, start + 20 + turns):
            turn(i)
        written[how] = wal_kib(path) / turns
    store.close()
    return written


def run(cfg: Config) -> Section:
    turns, rounds = cfg.pick(100, 40, 10), cfg.pick(9, 5, 2)
    work = cfg.workdir(NAME)
    total = 5 + turns * rounds

    store = open_sqlite(work / "brutus.db")
    per_call_session = store.create_session().id
    batch_session = store.create_session().id
    whole_session = store.create_session().id

    def in_batch(i: int) -> None:
        with store.batch():
            agent_step(store, batch_session, i)

    raw, shape, conn = raw_contenders(cfg, total)
    servers = peer_servers(cfg, work / "peers")
    try:
        measured = interleaved(
            {
                "brutus_call": lambda i: agent_step(store, per_call_session, i),
                "brutus_batch": in_batch,
                "brutus_whole": lambda i: whole_turn(store, whole_session, i),
                **raw,
            },
            servers,
            turns=turns,
            rounds=rounds,
        )
    finally:
        for server in servers:
            server.close()
    written = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    expected = 3 * (2 * total + 2)  # the three modes, and the three recorded turns
    if written != expected:
        raise AssertionError(f"the raw replay wrote {written} messages, expected {expected}")
    conn.close()
    store.close()

    wal = brutus_wal(cfg, turns=cfg.pick(100, 100, 10))
    peer_wal = {label: value for server in servers for label, value in server.info.get("wal_kib", {}).items()}
    ms = {key: value["mean"] for key, value in measured.items()}
    peers = sorted({key.split("|")[0] for key in measured if "|" in key}, key=lambda label: label != PEER_BASE)
    base_one, base_item = ms.get(f"{PEER_BASE}|turn"), ms.get(f"{PEER_BASE}|item")

    columns = ["store, how", "commits/turn", WAL, "ms/turn", "ms/item", "vs raw", f"vs {PEER_BASE}"]
    one = Table("append one agent turn (4 items), one commit per turn - SQLite WAL, synchronous=NORMAL", columns)
    one.add(
        "brutus, the 8 calls in store.batch()",
        shape["batch"]["commits"],
        wal["batch"],
        ms["brutus_batch"],
        ms["brutus_batch"] / ITEMS_PER_TURN,
        ratio(ms["brutus_batch"], ms["raw_batch"]),
        ratio(ms["brutus_batch"], base_one),
    )
    one.add(
        "raw sqlite3, brutus's statements",
        shape["batch"]["commits"],
        None,
        ms["raw_batch"],
        ms["raw_batch"] / ITEMS_PER_TURN,
        1.0,
        ratio(ms["raw_batch"], base_one),
    )
    one.add(
        "brutus, the finished turn in 1 append_messages call",
        shape["whole"]["commits"],
        wal["whole"],
        ms["brutus_whole"],
        ms["brutus_whole"] / ITEMS_PER_TURN,
        ratio(ms["brutus_whole"], ms["raw_whole"]),
        ratio(ms["brutus_whole"], base_one),
    )
    one.add(
        "raw sqlite3, append_messages' statements",
        shape["whole"]["commits"],
        None,
        ms["raw_whole"],
        ms["raw_whole"] / ITEMS_PER_TURN,
        1.0,
        ratio(ms["raw_whole"], base_one),
    )
    each = Table("append one agent turn (4 items), a commit per call / per item", columns)
    each.add(
        "brutus, 8 calls, a commit each",
        shape["per_call"]["commits"],
        wal["call"],
        ms["brutus_call"],
        ms["brutus_call"] / ITEMS_PER_TURN,
        ratio(ms["brutus_call"], ms["raw_call"]),
        ratio(ms["brutus_call"], base_item),
    )
    each.add(
        "raw sqlite3, brutus's statements",
        shape["per_call"]["commits"],
        None,
        ms["raw_call"],
        ms["raw_call"] / ITEMS_PER_TURN,
        1.0,
        ratio(ms["raw_call"], base_item),
    )
    for label in peers:
        one_ms, item_ms = ms.get(f"{label}|turn"), ms[f"{label}|item"]
        if one_ms is None:
            one.notes.append(f"{label}: no row, it stores one item a call (its turn is the per-item row)")
        else:
            one.add(
                f"{label}, 4 items per call",
                1,
                peer_wal.get(label, {}).get("turn"),
                one_ms,
                one_ms / ITEMS_PER_TURN,
                ratio(one_ms, ms["raw_batch"]),
                ratio(one_ms, base_one),
            )
        each.add(
            f"{label}, 1 item per call",
            ITEMS_PER_TURN,
            peer_wal.get(label, {}).get("item"),
            item_ms,
            item_ms / ITEMS_PER_TURN,
            ratio(item_ms, ms["raw_call"]),
            ratio(item_ms, base_item),
        )
    one.notes.append(
        f"brutus sends {shape['batch']['statements']} statements per turn in a batch and "
        f"{shape['per_call']['statements']} "
        f"with a commit per call, {shape['whole']['statements']} for append_messages (captured at the driver); "
        "raw sqlite3 replays exactly those"
    )
    one.notes.append(f"mean of {rounds} rounds x {turns} turns; the rounds of brutus, raw and every peer alternate")
    one.notes.append(
        f"{WAL}: what a turn adds to the write-ahead log (whole pages, brutus's 2 KiB, the peers' 4 KiB) with "
        "automatic checkpoints off, counted on a file of its own (the raw replay writes brutus's statements, so "
        "brutus's pages); a checkpoint later copies them into the database and syncs it, so a commit's cost "
        "grows with them"
    )
    # What brutus's own Python costs a turn: its time less the raw replay of its statements, in the same run.
    # When this alone reaches the peer's whole turn, no change to the statements can meet the goal.
    own = {"batch": ms["brutus_batch"] - ms["raw_batch"], "call": ms["brutus_call"] - ms["raw_call"]}
    one.notes.append(
        f"brutus's own Python a turn (brutus less the raw replay): {own['batch']:.2f} ms in batch(), "
        f"{own['call']:.2f} ms with a commit per call"
        + (f"; {PEER_BASE}'s whole turn: {base_one:.2f} ms" if base_one else "")
    )
    if not peers:
        one.notes.append("peers not run (--no-peers, or not set up)")

    goals = [
        Goal(f"brutus batch() turn <= 1.0x {PEER_BASE} add_items(turn)", ratio(ms["brutus_batch"], base_one), 1.0),
        Goal(
            f"brutus per item (commit per call) <= 1.0x {PEER_BASE} per item", ratio(ms["brutus_call"], base_item), 1.0
        ),
        Goal("brutus commit per call <= 2x raw sqlite3", ratio(ms["brutus_call"], ms["raw_call"]), 2.0),
        Goal("brutus batch() <= 2x raw sqlite3", ratio(ms["brutus_batch"], ms["raw_batch"]), 2.0),
        Goal(  # issue #20's goal 1
            f"brutus append_messages(turn) <= 0.8x {PEER_BASE} add_items(turn)",
            ratio(ms["brutus_whole"], base_one),
            0.8,
        ),
        Goal("brutus append_messages <= 2x raw sqlite3", ratio(ms["brutus_whole"], ms["raw_whole"]), 2.0),
    ]
    data = {
        "turns": turns,
        "rounds": rounds,
        "ms_per_turn": measured,
        "brutus_own_ms_per_turn": {mode: round(value, 3) for mode, value in own.items()},
        "shape": shape,
        "wal_kib_per_turn": {"brutus": wal, **peer_wal},
        "peers": {server.name: {k: server.info[k] for k in ("versions", "synchronous")} for server in servers},
    }
    return Section(NAME, [one, each], goals, data)
