"""Whole histories streamed: ``write_export`` and ``brutus export`` write exactly the bytes of
``dumps(export_opencode(...))``, and ``show --full`` (plain, ``--markdown``, ``--json``) exactly what printing
the whole history at once did, while the history is read a chunk of messages at a time in one snapshot: the
corpus, and a random history with children, a text with a lone surrogate far into it (the whole file then
switches to ``\\u`` escapes, as ``dumps`` does, the stream starting again), on both backends."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from brutus import SessionStore
from brutus.db import history_ops
from brutus.db.history_ops import consistent_reads, history_in_chunks
from brutus.importers.export import dumps, export_opencode, write_export
from brutus.markdown import to_markdown
from brutus.flows import Tx

from builders import Msg, Tool, write_history
from cli_helpers import run
from import_helpers import corpus_database

CHUNK = 3  # messages per read here: every history of more than three messages comes in several chunks


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch) -> None:
    monkeypatch.setattr(history_ops, "HISTORY_CHUNK", CHUNK)


class Pipe(io.RawIOBase):
    """A binary output that cannot seek (a pipe, stdout): what it was given, in order."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.data += bytes(b)
        return len(b)


def streamed(store: SessionStore, session_id: str) -> tuple[bytes, bytes]:
    """The export written to a file that seeks and to one that does not."""
    seekable, pipe = io.BytesIO(), Pipe()
    first = write_export(store, session_id, seekable)
    second = write_export(store, session_id, pipe)
    assert first == second
    return seekable.getvalue(), bytes(pipe.data)


def reference(store: SessionStore, session_id: str) -> bytes:
    return dumps(export_opencode(store, session_id)).encode("utf-8")


@pytest.mark.slow
def test_every_corpus_session_streams_the_same_bytes(backend: str, tmp_path_factory, pg_server) -> None:
    corpus = corpus_database(backend, tmp_path_factory, pg_server)
    with corpus.open() as store:
        sessions = store.list_sessions()
        assert any(s.parent_id for s in sessions)  # children (sidechains) are in it
        for session in sessions:
            expected = reference(store, session.id)
            assert streamed(store, session.id) == (expected, expected), session.id


def random_family(store: SessionStore, seed: int) -> tuple[str, str]:
    """A random history (every part kind the builders write) of ~40 messages with two children, one empty,
    one with a grandchild; a lone surrogate in a text part of the 31st message. (root, the surrogate's text)."""
    rng = random.Random(seed)
    spec = []
    for turn in range(20):
        spec.append(Msg("user", text=rng.choice(["hi", "do it", "é" * 300, "🤖 tool time"])))
        tools = [Tool(tool=rng.choice(["read", "bash"]), status=rng.choice(["completed", "error", "running"]),
                      output_bytes=rng.choice([0, 50, 5_000]), compacted=rng.random() < 0.3)
                 for _ in range(rng.randint(0, 2))]
        spec.append(Msg("assistant", text=f"ok {turn}", tools=tools, finish=rng.choice(["stop", "tool-calls", None])))
    root = write_history(store, spec, title="root")
    messages = store.messages(root)
    nasty = "lone \udc80 surrogate, nul \x00, crlf\r\n, private \ue000"
    store.append_part(messages[30].info.id, {"type": "text", "text": nasty})
    child = store.create_session(title="child", parent_id=root)
    write_history_into(store, child.id, rng)
    store.create_session(title="empty child", parent_id=root)
    grandchild = store.create_session(title="grandchild", parent_id=child.id)
    write_history_into(store, grandchild.id, rng)
    return root, nasty


def write_history_into(store: SessionStore, session_id: str, rng: random.Random) -> None:
    for turn in range(rng.randint(2, 5)):
        user = store.append_message(session_id, "user")
        store.append_part(user.id, {"type": "text", "text": f"child turn {turn}"})
        reply = store.append_message(session_id, "assistant", parent_id=user.id)
        store.finish_message(reply.id, finish="stop")


def test_a_random_family_with_a_lone_surrogate_streams_the_same_bytes(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        root, nasty = random_family(store, 32)
        expected = reference(store, root)
        assert b"\\udc80" in expected and b"\xc3\xa9" not in expected  # the whole file in \u escapes
        assert streamed(store, root) == (expected, expected)
        for session in store.list_sessions():  # each session alone, the empty child and those without surrogates
            alone = dumps(export_opencode(store, session.id, children=False)).encode()
            buffer = io.BytesIO()
            write_export(store, session.id, buffer, children=False)
            assert buffer.getvalue() == alone, session.title
            assert streamed(store, session.id)[0] == reference(store, session.id), session.title
        out = io.BytesIO(b"kept before ")  # written from where the file stands; a restart keeps what came before
        out.seek(len(out.getvalue()))
        counts = write_export(store, root, out)
        assert out.getvalue() == b"kept before " + expected
        assert (counts.messages, counts.children) == (40, 3)
        assert json.loads(expected)["messages"][30]["parts"][-1]["text"] == nasty


def test_the_chunks_are_read_in_one_snapshot(store_url: str) -> None:
    """A message appended (another store, another connection) while the chunks are read is not in them."""
    with SessionStore.open(store_url) as store, SessionStore.open(store_url) as writer:
        session_id = write_history(store, [Msg("user", text=f"m{i}") for i in range(10)])
        seen: list[int] = []

        def on_chunk(entries: list[Any]) -> None:
            if not seen:
                writer.append_message(session_id, "user")  # committed between the first and second chunk
            seen.extend(e.info.seq for e in entries)

        def op() -> Any:
            yield from consistent_reads(store.engine.dialect.name)
            return (yield from history_in_chunks(session_id, on_chunk))

        assert store.run(Tx(op(), write=False)) == 10 and seen == list(range(1, 11))
        assert len(store.messages(session_id)) == 11


def test_cli_export_and_show_full_print_what_they_did(store_url: str, tmp_path: Path) -> None:
    with SessionStore.open(store_url) as store:
        root, _ = random_family(store, 7)
        expected = reference(store, root)
        history = store.messages(root)
        markdown = to_markdown(history, session=store.get_session(root), pruned_text=True)
        as_json = [m.model_dump(mode="json") for m in history]
        child = next(s for s in store.list_sessions(parent_id=root) if s.title == "child")
        child_json = json.dumps([m.model_dump(mode="json") for m in store.messages(child.id)], indent=2, ensure_ascii=False)
    text = expected.decode()  # the CLI's output, decoded as the test runner does (run)
    done = run("export", root, "--db", store_url)
    assert done.returncode == 0 and done.stdout == text
    done = run("export", root, "-o", str(tmp_path / "out.json"), "--db", store_url)
    assert done.returncode == 0 and (tmp_path / "out.json").read_bytes() == expected
    assert done.stdout == f"exported {root} (40 messages, 3 child sessions) to {tmp_path / 'out.json'}\n"

    done = run("show", root, "--full", "--markdown", "-o", str(tmp_path / "t.md"), "--db", store_url)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t.md").read_bytes() == markdown.encode("utf-8", "replace")
    assert done.stdout == f"wrote {root} (40 messages) to {tmp_path / 't.md'}\n"
    assert run("show", root, "--full", "--markdown", "--db", store_url).stdout == markdown.encode("utf-8", "replace").decode()
    assert run("show", child.id, "--full", "--json", "--db", store_url).stdout == child_json + "\n"  # print_json's bytes
    with_json = run("show", root, "--full", "--json", "--db", store_url)  # a lone surrogate: once a crash
    assert with_json.returncode == 0, with_json.stderr
    assert json.loads(with_json.stdout) == as_json and "\\udc80" in with_json.stdout
    # plain text (of the child: rich's console cannot print a lone surrogate, streamed or not)
    messages = len(json.loads(child_json))
    plain = run("show", child.id, "--full", "--full-text", "--db", store_url)
    assert plain.returncode == 0 and plain.stdout.count("#") == messages > CHUNK and "child turn 1" in plain.stdout
    brief = run("show", child.id, "--full", "--db", store_url).stdout
    history_ops.HISTORY_CHUNK = 1000  # the whole history in one chunk, printed at once as before
    assert run("show", child.id, "--full", "--full-text", "--db", store_url).stdout == plain.stdout
    assert run("show", child.id, "--full", "--db", store_url).stdout == brief
    missing = run("export", "ses_nope", "--db", store_url)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
