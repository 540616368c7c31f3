"""README's Python snippets run as pasted (issue 33): each ```python block is run, after the blocks before it in
its section (a reader pasting a section in order), in a temporary directory with ``BRUTUS_DATABASE_URL`` on a
temporary SQLite file shared by the whole README, as a reader's default database would be. Models are the
fakes: ``ANTHROPIC_BASE_URL`` points at ``FakeMessagesAPI`` (the SDK, the summarizer and the Claude Code CLI
behind the Claude Agent SDK read it), ``OPENAI_BASE_URL`` at a stand-in for the Responses API."""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from brutus import SessionStore
from brutus.testing import FakeMessagesAPI, Reply

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^(?P<indent> *)```python\n(?P<code>.*?)^(?P=indent)```", re.S | re.M)


def snippets() -> list[tuple[str, int, str]]:
    """(section, line, code) of every ```python block, in README order."""
    text = README.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        before = text[: match.start()]
        section = re.findall(r"^## (.+)$", before, re.M)[-1]
        found.append((section, before.count("\n") + 1, textwrap.dedent(match["code"])))
    return found


SNIPPETS = snippets()


def claude(request: dict[str, Any]) -> Reply:
    """The live snippet's Claude: it looks with bash once, then answers."""
    last = request["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    thinking = [{"type": "thinking", "thinking": "Look at the files first."}] if request.get("thinking", {}).get("type") == "adaptive" else []
    if request.get("tools") and any(t.get("name") == "bash" for t in request["tools"]) and not answered and len(request["messages"]) == 1:
        return Reply([*thinking, {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}])
    return Reply([*thinking, {"type": "text", "text": "test_sync reads a fixture that CI never writes."}])


class _Responses(BaseHTTPRequestHandler):
    """``POST /v1/responses``: one assistant message naming the input's last user text."""

    protocol_version = "HTTP/1.1"
    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).calls.append(body)
        said = next(i["content"] for i in reversed(body["input"]) if i.get("role") == "user")
        number = len(type(self).calls)
        answer = {
            "id": f"resp_{number}", "object": "response", "created_at": 0, "model": body["model"], "status": "completed",
            "output": [{"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": f"You said: {said}", "annotations": []}]}],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def openai_responses() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Responses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FakeMessagesAPI, str]]:
    home = tmp_path_factory.mktemp("reader")
    with FakeMessagesAPI(claude) as api, openai_responses() as openai_url:
        yield home, api, openai_url


@pytest.mark.parametrize("index", range(len(SNIPPETS)), ids=[f"line {line}" for _, line, _ in SNIPPETS])
def test_every_readme_snippet_runs_as_pasted(index: int, reader: tuple[Path, FakeMessagesAPI, str],
                                             monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home, api, openai_url = reader
    section, line, _ = SNIPPETS[index]
    work = home / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    for name, value in {"BRUTUS_DATABASE_URL": f"sqlite:///{home / 'brutus.db'}", "ANTHROPIC_BASE_URL": api.base_url,
                        "ANTHROPIC_API_KEY": "test-key", "HOME": str(home), "OPENAI_BASE_URL": openai_url,
                        "OPENAI_API_KEY": "test-key", "OPENAI_AGENTS_DISABLE_TRACING": "1"}.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for earlier_section, earlier_line, code in SNIPPETS[: index + 1]:
        if earlier_section == section:
            exec(compile(code, f"README.md, line {earlier_line}", "exec"), namespace)  # noqa: S102 - the README is ours
    printed = capsys.readouterr().out
    assert "Traceback" not in printed
    if section.startswith("Live agents"):
        assert printed.strip().endswith("test_sync reads a fixture that CI never writes.")
        requests = [r for r in api.requests if r.body and r.body.get("stream")]
        assert requests and all(r.accepted for r in requests)


def test_the_snippets_left_what_they_say_in_the_database(reader: tuple[Path, FakeMessagesAPI, str]) -> None:
    """Run after the snippets (pytest keeps file order): the live session ran its tool and was recorded."""
    home, _, _ = reader
    with SessionStore.open(f"sqlite:///{home / 'brutus.db'}", create=False) as store:
        sessions = store.list_sessions()
        histories = [store.messages(s.id) for s in sessions]
        compacted = [s.title for s in sessions if any(c.status == "completed" for c in store.compactions(s.id))]
        with store.engine.connect() as conn:
            transcripts = conn.execute(text("SELECT count(*) FROM transcripts WHERE sdk = 'claude-agent-sdk'")).scalar_one()
    tools = [p for h in histories for m in h for p in m.parts if p.type == "tool" and p.tool == "bash"]
    assert any(p.state.status == "completed" and p.state.input == {"command": "ls"} for p in tools)  # the live loop
    assert "async" in compacted  # the async snippet's compaction completed
    assert transcripts > 0  # the Claude Agent SDK's transcript went through brutus
    said = [[i.get("content") for i in call["input"] if i.get("role") == "user"] for call in _Responses.calls]
    assert said == [["Hi"], ["Hi", "What did I just say?"]]  # the Agents session gave the first turn back
