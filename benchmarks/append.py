"""Append one agent step on SQLite (WAL, synchronous=NORMAL): brutus vs raw sqlite3 doing the same statements.

A step: user message + text part, assistant message, tool part pending → running → completed, text part,
finish. Measured in one run, as ratios: brutus with a commit per call (7 transactions a step), brutus with
the step inside ``store.batch()`` (one commit), and raw ``sqlite3`` executing the statements brutus issues,
on the same schema, with a commit per call (the limit the DESIGN compares against).

    python benchmarks/append.py [--steps N]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from brutus import SessionStore

OUTPUT = "x" * 2000


def brutus_step(store: SessionStore, session_id: str, i: int) -> None:
    user = store.append_message(session_id, "user")
    store.append_part(user.id, {"type": "text", "text": f"please do step {i}"})
    reply = store.append_message(session_id, "assistant", parent_id=user.id, model_id="claude-sonnet-4-5")
    tool = store.append_part(reply.id, {"type": "tool", "call_id": f"c{i}", "tool": "bash", "state": {"status": "pending", "input": {"command": "ls"}}})
    store.update_tool(tool.id, status="running")
    store.update_tool(tool.id, status="completed", output=OUTPUT)
    store.append_part(reply.id, {"type": "text", "text": "done"})
    store.finish_message(reply.id, finish="stop", tokens={"input": 100, "output": 20})


def raw_step(conn: sqlite3.Connection, session_id: str, i: int, now: int) -> None:
    """The statements brutus runs for one step, each call its own transaction."""
    def tx(*statements: tuple[str, tuple]) -> list:
        conn.execute("BEGIN IMMEDIATE")
        out = [conn.execute(sql, args).fetchall() for sql, args in statements]
        conn.execute("COMMIT")
        return out

    ids = [f"{kind}_{i}_{n}" for n, kind in enumerate(["msg", "prt", "msg", "prt", "prt"])]
    seq = tx(("UPDATE sessions SET last_seq = last_seq + 1, updated_at = ? WHERE id = ? RETURNING last_seq", (now, session_id)))[0][0][0]
    tx(("INSERT INTO messages (id, session_id, seq, role, summary, synthetic, cost, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, tokens_cache_write, part_count, token_estimate, created_at) VALUES (?, ?, ?, 'user', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ?)", (ids[0], session_id, seq, now)))
    tx(
        ("UPDATE messages SET part_count = part_count + 1, token_estimate = token_estimate + 5 WHERE id = ? RETURNING part_count, session_id", (ids[0],)),
        ("INSERT INTO parts (id, session_id, message_id, position, type, data, tokens, created_at, updated_at) VALUES (?, ?, ?, 1, 'text', ?, 5, ?, ?)", (ids[1], session_id, ids[0], json.dumps({"text": f"please do step {i}"}), now, now)),
    )
    seq = tx(("UPDATE sessions SET last_seq = last_seq + 1, updated_at = ? WHERE id = ? RETURNING last_seq", (now, session_id)))[0][0][0]
    tx(("INSERT INTO messages (id, session_id, seq, role, parent_id, model_id, summary, synthetic, cost, tokens_input, tokens_output, tokens_reasoning, tokens_cache_read, tokens_cache_write, part_count, token_estimate, created_at) VALUES (?, ?, ?, 'assistant', ?, 'claude-sonnet-4-5', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ?)", (ids[2], session_id, seq, ids[0], now)))
    tx(
        ("UPDATE messages SET part_count = part_count + 1, token_estimate = token_estimate + 5 WHERE id = ? RETURNING part_count, session_id", (ids[2],)),
        ("INSERT INTO parts (id, session_id, message_id, position, type, data, tokens, created_at, updated_at) VALUES (?, ?, ?, 1, 'tool', '{}', 5, ?, ?)", (ids[3], session_id, ids[2], now, now)),
        ("INSERT INTO tool_states (part_id, session_id, call_id, tool, status, input, output_tokens) VALUES (?, ?, ?, 'bash', 'pending', ?, 0)", (ids[3], session_id, f"c{i}", json.dumps({"command": "ls"}))),
    )
    for status, output in (("running", None), ("completed", OUTPUT)):
        statements = [
            ("SELECT t.status, t.input, t.started_at, p.tokens, p.message_id FROM tool_states t JOIN parts p ON p.id = t.part_id WHERE t.part_id = ?", (ids[3],)),
            ("UPDATE tool_states SET status = ?, started_at = ? WHERE part_id = ?", (status, now, ids[3])),
        ]
        if output is not None:
            statements.append(("INSERT INTO tool_outputs (part_id, output) VALUES (?, ?)", (ids[3], output)))
        statements += [
            ("UPDATE parts SET tokens = ?, updated_at = ? WHERE id = ?", (505, now, ids[3])),
            ("UPDATE messages SET token_estimate = token_estimate + ? WHERE id = ?", (500, ids[2])),
            ("SELECT p.id, p.data, t.status, o.output FROM parts p LEFT JOIN tool_states t ON t.part_id = p.id LEFT JOIN tool_outputs o ON o.part_id = t.part_id WHERE p.id = ?", (ids[3],)),
        ]
        tx(*statements)
    tx(
        ("UPDATE messages SET part_count = part_count + 1, token_estimate = token_estimate + 1 WHERE id = ? RETURNING part_count, session_id", (ids[2],)),
        ("INSERT INTO parts (id, session_id, message_id, position, type, data, tokens, created_at, updated_at) VALUES (?, ?, ?, 2, 'text', ?, 1, ?, ?)", (ids[4], session_id, ids[2], json.dumps({"text": "done"}), now, now)),
    )
    tx(
        ("UPDATE messages SET finish = 'stop', cost = 0, tokens_input = 100, tokens_output = 20, completed_at = ? WHERE id = ? RETURNING *", (now, ids[2])),
        ("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)),
    )


def measure(fn, steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        fn(i)
    return (time.perf_counter() - start) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "append.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore.open(f"sqlite:///{tmp}/brutus.db")
        per_call = store.create_session()
        batched = store.create_session()
        brutus_step(store, per_call.id, -1)  # warm up statement caches

        def in_batch(i: int) -> None:
            with store.batch():
                brutus_step(store, batched.id, i)

        results = {
            "brutus, commit per call": measure(lambda i: brutus_step(store, per_call.id, i), args.steps),
            "brutus, step in batch()": measure(in_batch, args.steps),
        }
        store.close()

        raw_store = SessionStore.open(f"sqlite:///{tmp}/raw.db")
        session = raw_store.create_session()
        raw_store.close()
        conn = sqlite3.connect(f"{tmp}/raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        now = int(time.time() * 1000)
        results["raw sqlite3, commit per call"] = measure(lambda i: raw_step(conn, session.id, i, now), args.steps)
        conn.close()

    raw = results["raw sqlite3, commit per call"]
    print(f"{'append one agent step (SQLite WAL, synchronous=NORMAL)':<44} {'ms/step':>9} {'vs raw':>8}")
    for name, ms in results.items():
        print(f"{name:<44} {ms:>9.3f} {ms / raw:>7.2f}x")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"steps": args.steps, "ms_per_step": results}, indent=2))


if __name__ == "__main__":
    main()
