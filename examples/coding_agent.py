"""A small coding agent on the Anthropic Messages API with brutus as its session store.

    python examples/coding_agent.py "What is in this directory?"          # a new session
    python examples/coding_agent.py --session ses_… "Now read the README"  # resume it, by id, after a kill too

Tools: read a file, list a directory, run a shell command (in the current directory, 30 s timeout). With
``ANTHROPIC_API_KEY`` set it talks to Claude; without, to brutus's local fake of the Messages API
(``brutus.testing``), which answers from a short script, so the loop runs offline. Every response is stored
as it arrived and sent back byte for byte; the store prunes and compacts by its ``ContextPolicy``; a prompt
the API finds too long is compacted and sent again. Killed at any point, the agent loses at most the response
in flight: ``--session`` picks the session up, runs the tool calls still waiting, and goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

import anthropic

from brutus import ContextPolicy, SessionStore

MODEL = "claude-opus-4-6"
SYSTEM = "You are a careful coding agent. Use the tools to look before you answer. Be brief."
TOOLS = [
    {"name": "read_file", "description": "Read a text file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "list_dir", "description": "List a directory.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "run", "description": "Run a shell command in the working directory.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
]


def run_tool(name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """The tool's output, and whether it failed."""
    try:
        if name == "read_file":
            return Path(args["path"]).read_text(errors="replace")[:50_000], False
        if name == "list_dir":
            return "\n".join(sorted(p.name + ("/" if p.is_dir() else "") for p in Path(args["path"]).iterdir())), False
        if name == "run":
            done = subprocess.run(args["command"], shell=True, capture_output=True, text=True, timeout=30)
            return (done.stdout + done.stderr)[-50_000:] or "(no output)", done.returncode != 0
        return f"unknown tool {name}", True
    except (OSError, KeyError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}", True


def offline_script() -> list[Any]:
    """What the fake answers when there is no API key: look around, read, report."""
    from brutus.testing import Reply

    return [
        Reply([{"type": "text", "text": "Let me look around."},
               {"type": "tool_use", "name": "list_dir", "input": {"path": "."}}]),
        Reply([{"type": "tool_use", "name": "run", "input": {"command": "python --version"}}]),
        Reply("I listed the directory and checked the Python version; see the tool results above."),
    ] * 20


@contextlib.contextmanager
def messages_api():
    """The real client with ANTHROPIC_API_KEY, else one on the local fake."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        yield anthropic.Anthropic()
        return
    from brutus.testing import FakeMessagesAPI

    with FakeMessagesAPI(offline_script()) as api:
        yield anthropic.Anthropic(base_url=api.base_url, api_key="offline", max_retries=0)


def agent(store: SessionStore, session_id: str, prompt: str | None, client: anthropic.Anthropic) -> None:
    conv = store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=4096,
                              policy=ContextPolicy(prune="on-compaction"))
    calls = conv.pending_calls()  # a resumed session may have calls that never got their results
    if calls:
        conv.tool_results([tool_result(c) for c in calls])
    if prompt:
        conv.user(prompt)
    for _ in range(25):  # at most 25 model calls per run
        try:
            with client.beta.messages.stream(**conv.request()) as stream:  # as the README's loop
                response = stream.get_final_message()
        except anthropic.BadRequestError as exc:
            if conv.recover(exc):  # prompt too long: compacted, send again
                continue
            raise
        conv.record(response)
        for block in response.content:
            if block.type == "text":
                print(block.text)
        calls = conv.pending_calls()
        if not calls:
            return
        conv.tool_results([tool_result(c) for c in calls])


def tool_result(call: dict[str, Any]) -> dict[str, Any]:
    print(f"  [{call['name']}] {call['input']}")
    output, failed = run_tool(call["name"], call["input"])
    return {"tool_use_id": call["id"], "content": output, "is_error": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prompt", nargs="?", help="what to ask (optional when resuming)")
    parser.add_argument("--session", help="resume this session id")
    parser.add_argument("--db", help="database URL or SQLite path (default: brutus's default database)")
    args = parser.parse_args()
    with SessionStore.open(args.db) as store, messages_api() as client:
        session_id = args.session or store.create_session(title=(args.prompt or "agent")[:60], directory=os.getcwd()).id
        print(f"session {session_id}")
        agent(store, session_id, args.prompt, client)


if __name__ == "__main__":
    main()
