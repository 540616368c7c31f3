"""``brutus demo``: a short, realistic agent session written through the public API, then printed."""

from __future__ import annotations

from typing import Any

import click

from ..store import SessionStore

STEPS = [
    ("Add a --verbose flag to the CLI and make the tests pass.", "read", {"path": "cli.py"}, "def main():\n    ...\n" * 40),
    ("Now run the test suite.", "bash", {"command": "pytest -q"}, "12 passed in 0.31s"),
]


def run_demo(store: SessionStore, *, as_json: bool = False) -> str:
    from .output import history_json, print_history
    from .app import print_json

    session = store.create_session(title="brutus demo", directory="/tmp/demo-project")
    for i, (prompt, tool, tool_input, output) in enumerate(STEPS):
        with store.batch():
            user = store.append_message(session.id, "user", agent="build")
            store.append_part(user.id, {"type": "text", "text": prompt})
            reply = store.append_message(
                session.id, "assistant", parent_id=user.id, agent="build", mode="build",
                model_id="claude-sonnet-4-5", provider_id="anthropic",
            )
            store.append_part(reply.id, {"type": "step-start"})
            call = store.append_part(
                reply.id, {"type": "tool", "call_id": f"toolu_{i:02d}", "tool": tool, "state": {"status": "pending", "input": tool_input}}
            )
        store.update_tool(call.id, status="running", title=f"{tool} {next(iter(tool_input.values()))}")
        store.update_tool(call.id, status="completed", output=output)
        store.append_part(reply.id, {"type": "text", "text": f"Done with step {i + 1}."})
        store.finish_message(reply.id, finish="stop", tokens={"input": 1800 + 900 * i, "output": 120, "cache": {"read": 1500 * i}}, cost=0.004)
    history = store.messages(session.id)
    store.close()
    if as_json:
        print_json({"session_id": session.id, "messages": history_json(history)})
    else:
        click.echo(f"session {session.id} written to {store.url}")
        print_history(history)
    return session.id


