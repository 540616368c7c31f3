"""Test-only: an agent process that is killed with SIGKILL between ``create`` and ``record`` (see
test_live_crash.py). It runs ``steps`` requests, each a user turn or a tool loop, and after the last
``create`` it says so on stdout and waits for the kill."""

from __future__ import annotations

import sys

import anthropic

from brutus import SessionStore

from live_helpers import MODEL, SYSTEM, THINKING, TOOLS


def main(url: str, session_id: str, base_url: str, steps: int) -> None:
    store = SessionStore.open(url)
    sdk = anthropic.Anthropic(base_url=base_url, api_key="test-key", max_retries=0)
    conv = store.conversation(session_id, model=MODEL, system=SYSTEM, tools=TOOLS, thinking=THINKING, max_tokens=4096)
    conv.user("start")
    for step in range(steps):
        message = sdk.beta.messages.create(**conv.request())
        if step == steps - 1:
            print("created", flush=True)
            sys.stdin.read()  # killed here, with the response in hand and not recorded
        conv.record(message)
        calls = conv.pending_calls()
        if calls:
            conv.tool_results([{"tool_use_id": c["id"], "content": f"ran {c['input']}"} for c in calls])
        else:
            conv.user(f"turn {step}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
