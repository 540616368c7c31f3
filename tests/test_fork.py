"""``store.fork``: a new session holding copies of another's messages up to a point, copied in the database,
ids remapped, the same view and request, independent both ways (issue 35)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from brutus import (
    AsyncSessionStore,
    ContextPolicy,
    InvalidInput,
    ModelLimits,
    NotFound,
    SessionStore,
    import_file,
)
from brutus.importers import import_files
from brutus.testing import FakeMessagesAPI

from corpus_helpers import all_files, corpus_file
from import_helpers import row_counts
from integrity import integrity_problems
from live_helpers import MODEL, SYSTEM, THINKING, TOOLS, client, popping, scripted_steps


def canonical(store: Any, history: list[Any], session_id: str) -> list[dict[str, Any]]:
    """A history with every id it holds named by position: a message ``m<seq>``, a part ``p<seq>.<position>``,
    the session ``S`` (so an original and its fork compare equal exactly when every id was remapped)."""
    names = {session_id: "S"}
    for message in history:
        names[message.info.id] = f"m{message.info.seq}"
        for position, part in enumerate(message.parts):
            names[part.id] = f"p{message.info.seq}.{position}"

    def rename(value: Any) -> Any:
        if isinstance(value, str):
            return names.get(value, value)
        if isinstance(value, dict):
            return {k: rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return rename([m.model_dump(mode="json") for m in history])


def same_up_to(store: SessionStore, original: str, fork: str, seq: int | None = None) -> None:
    before = [m for m in store.messages(original) if seq is None or m.info.seq <= seq]
    copied = store.messages(fork)
    assert canonical(store, copied, fork) == canonical(store, before, original)
    assert {m.info.id for m in copied}.isdisjoint(m.info.id for m in before)


def _turns(store: SessionStore, session_id: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        user = store.append_message(session_id, "user")
        store.append_part(user.id, {"type": "text", "text": f"turn {i}: read the file"})
        reply = store.append_message(session_id, "assistant", parent_id=user.id)
        tool = {"type": "tool", "call_id": f"call_{i}", "tool": "read_file", "state": {"status": "pending", "input": {"path": f"f{i}.py"}}}
        part = store.append_part(reply.id, tool)
        store.update_tool(part.id, status="running")
        store.update_tool(part.id, status="completed", output=f"contents of f{i}.py " * 2000)
        store.finish_message(reply.id, finish="tool-calls", tokens={"input": 100 + i, "output": 20})
        ids += [user.id, reply.id]
    return ids


def test_a_fork_copies_every_message_up_to_the_point_under_new_ids(store: SessionStore) -> None:
    session = store.create_session(title="original", directory="/repo")
    ids = _turns(store, session.id, 6)
    store.prune(session.id)
    for point in (ids[0], ids[5], ids[-1], None):
        fork = store.fork(session.id, point, title=None)
        seq = None if point is None else next(m.info.seq for m in store.messages(session.id) if m.info.id == point)
        same_up_to(store, session.id, fork.id, seq)
        assert fork.title == "original" and fork.directory == "/repo" and fork.parent_id is None
        assert (fork.forked_from, fork.forked_at) == (session.id, point or ids[-1])
        assert fork.message_count == (seq or len(ids))
        assert store.get_session(fork.id) == fork
    assert {s.id for s in store.list_sessions(forked_from=session.id)} == {
        s.id for s in store.list_sessions() if s.forked_from == session.id
    }
    assert len(store.list_sessions(forked_from=session.id)) == 4
    found = {hit.session_id for hit in store.search("contents f5", limit=50)}  # the copies are indexed too
    assert found == {session.id} | {s.id for s in store.list_sessions(forked_from=session.id) if s.message_count >= 12}
    assert integrity_problems(store) == []


def test_prune_marks_and_pending_calls_come_along(store: SessionStore) -> None:
    session = store.create_session()
    _turns(store, session.id, 12)
    pruned = store.prune(session.id)
    assert pruned.pruned
    user = store.append_message(session.id, "user")
    store.append_part(user.id, {"type": "text", "text": "one more"})
    waiting = store.append_message(session.id, "assistant", parent_id=user.id)
    store.append_part(waiting.id, {"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "pending", "input": {"command": "ls"}}})
    fork = store.fork(session.id, title="branch")
    assert fork.title == "branch"
    view, copied = store.filter_compacted(session.id), store.filter_compacted(fork.id)
    assert canonical(store, copied, fork.id) == canonical(store, view, session.id)
    states = [p.state for m in copied for p in m.parts if p.type == "tool"]
    assert sum(s.time.compacted is not None for s in states) == len(pruned.parts)
    assert states[-1].status == "pending"


def test_a_fork_keeps_the_boundary_or_has_none_before_it(store: SessionStore) -> None:
    session = store.create_session()
    before = _turns(store, session.id, 10)
    result = store.compact(session.id)
    after = _turns(store, session.id, 2)
    boundary_view = canonical(store, store.filter_compacted(session.id), session.id)

    early = store.fork(session.id, before[-1])
    assert store.compactions(early.id) == []
    assert len(store.filter_compacted(early.id)) == len(before)  # no boundary: the whole history

    late = store.fork(session.id, after[-1])
    assert canonical(store, store.filter_compacted(late.id), late.id) == boundary_view
    [marker] = store.compactions(late.id)
    assert marker.status == "completed" and marker.summary_message_id != result.summary_message.info.id
    assert marker.summary_message_id in {m.info.id for m in store.messages(late.id)}
    assert marker.boundary["session_id"] == late.id if "session_id" in (marker.boundary or {}) else True

    # between the compaction message and its summary: in flight there, so no marker and no boundary
    compaction_message = next(m for m in store.messages(session.id) if any(p.type == "compaction" for p in m.parts))
    mid = store.fork(session.id, compaction_message.info.id)
    assert store.compactions(mid.id) == []
    assert store.filter_compacted(mid.id)[0].info.seq == 1
    assert integrity_problems(store) == []


def test_a_pending_marker_is_never_copied(store: SessionStore) -> None:
    from brutus.db import compaction_ops
    from brutus.flows import Tx

    session = store.create_session()
    _turns(store, session.id, 4)
    store.run(Tx(compaction_ops.begin_compaction(session.id, trigger="manual", auto=False, overflow=False, instructions=None, now=5)))
    assert [c.status for c in store.compactions(session.id)] == ["pending"]
    fork = store.fork(session.id)
    assert store.compactions(fork.id) == []
    assert store.filter_compacted(fork.id)[0].info.seq == 1


def test_the_fork_and_the_original_are_independent(store: SessionStore) -> None:
    session = store.create_session()
    ids = _turns(store, session.id, 3)
    fork = store.fork(session.id, ids[3])
    original = canonical(store, store.messages(session.id), session.id)

    extra = store.append_message(fork.id, "user")
    store.append_part(extra.id, {"type": "text", "text": "the other path"})
    store.prune(fork.id, dry_run=False)
    assert canonical(store, store.messages(session.id), session.id) == original
    assert store.get_session(fork.id).message_count == 5 and extra.seq == 5

    grandchild = store.fork(fork.id)  # a fork of a fork
    same_up_to(store, fork.id, grandchild.id)
    assert grandchild.forked_from == fork.id

    store.delete_session(session.id)
    assert len(store.messages(fork.id)) == 5 and store.get_session(fork.id).forked_from == session.id
    store.delete_session(fork.id)
    assert len(store.messages(grandchild.id)) == 5
    assert integrity_problems(store) == []


def test_bad_input_is_refused_and_writes_nothing(store: SessionStore) -> None:
    one, other = store.create_session(), store.create_session()
    ids = _turns(store, one.id, 1)
    theirs = _turns(store, other.id, 1)
    counts = row_counts(store)
    with pytest.raises(NotFound):
        store.fork("ses_nothere")
    with pytest.raises(NotFound):
        store.fork(one.id, "msg_nothere")
    with pytest.raises(InvalidInput, match=f"belongs to session {other.id}"):
        store.fork(one.id, theirs[0])
    with pytest.raises(InvalidInput, match="title"):
        store.fork(one.id, ids[0], title=3)  # type: ignore[arg-type]
    assert row_counts(store) == counts


def test_a_fork_inside_a_batch_is_one_more_write_of_it(store: SessionStore) -> None:
    session = store.create_session()
    _turns(store, session.id, 2)
    counts = row_counts(store)
    with pytest.raises(RuntimeError), store.batch():
        store.fork(session.id)
        raise RuntimeError("the batch fails after the fork")
    assert row_counts(store) == counts
    with store.batch():
        fork = store.fork(session.id)
        note = store.append_message(fork.id, "user")
    assert note.seq == 5 and len(store.messages(fork.id)) == 5
    with store.batch():  # after other statements of the batch (PostgreSQL: no isolation level to take then)
        store.get_session(session.id)
        late = store.fork(session.id)
        store.append_message(session.id, "user")
    assert late.message_count == 4 and len(store.messages(session.id)) == 5


def test_an_empty_session_forks_into_an_empty_one(store: SessionStore) -> None:
    session = store.create_session(title="empty")
    fork = store.fork(session.id)
    assert fork.message_count == 0 and fork.forked_at is None and store.messages(fork.id) == []


@pytest.mark.anyio
async def test_the_async_store_forks_the_same_way(store_url: str) -> None:
    async with await AsyncSessionStore.open(store_url) as store:
        session = await store.create_session()
        user = await store.append_message(session.id, "user")
        await store.append_part(user.id, {"type": "text", "text": "hello"})
        fork = await store.fork(session.id, user.id, title="async branch")
        assert fork.forked_from == session.id and fork.title == "async branch"
        copied = await store.messages(fork.id)
        assert [p.text for m in copied for p in m.parts] == ["hello"] and copied[0].info.id != user.id


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_every_corpus_session_forks_at_random_points(backend: str, tmp_path, pg_server: Any) -> None:
    from import_helpers import fresh_url

    url = fresh_url(backend, _Factory(tmp_path), pg_server)
    rng = random.Random(35)
    with SessionStore.open(url) as store:
        import_files(store, all_files())
        sessions = store.list_sessions()
        assert len(sessions) >= 20
        for session in sessions:
            history = store.messages(session.id)
            points = rng.sample(history, min(2, len(history))) if history else []
            for message in points:
                fork = store.fork(session.id, message.info.id)
                same_up_to(store, session.id, fork.id, message.info.seq)
                view = [m for m in store.filter_compacted(fork.id)]
                assert view and view[-1].info.seq == message.info.seq
        assert integrity_problems(store) == []


class _Factory:
    """``fresh_url`` wants a tmp_path_factory; one directory is enough here."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def mktemp(self, name: str) -> Any:
        made = self.path / name
        made.mkdir()
        return made


@pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
def test_a_conversation_on_a_fork_sends_what_the_original_sent_there(store: SessionStore, tmp_path, thinking: bool) -> None:
    """Recorded responses (thinking blocks and their signatures included), prune marks and the boundary come
    along exactly: a new conversation on a fork at any point sends the request the original sent there."""
    with SessionStore.open(str(tmp_path / "source.db")) as source:
        recorded = source.messages(import_file(source, corpus_file("0a725fb5"))[0])
    steps = scripted_steps(recorded, thinking=thinking)[:90]
    session = store.create_session(title="live")
    settings: dict[str, Any] = dict(system=SYSTEM, tools=TOOLS, max_tokens=8_000, limits=ModelLimits(context=60_000, output=8_000),
                                    policy=ContextPolicy(prune="on-compaction"))
    if thinking:
        settings["thinking"] = THINKING
    conv = store.conversation(session.id, model=MODEL, **settings)
    sent: list[tuple[str, dict[str, Any]]] = []  # the last message after each request() and what it sent
    queue: list[Any] = []
    with FakeMessagesAPI(popping(queue), context_window=60_000) as api:
        sdk = client(api)
        for step in steps:
            if step.text is not None:
                conv.user(step.text)
                continue
            queue.append(step.reply)
            kwargs = conv.request()
            sent.append((store.messages(session.id)[-1].info.id, kwargs))
            conv.record(sdk.beta.messages.create(**kwargs))
            if step.results:
                conv.tool_results(step.results)
    assert any(c.status == "completed" for c in store.compactions(session.id)), "the run never compacted"
    for point, kwargs in sent[:: max(1, len(sent) // 12)] + sent[-1:]:
        fork = store.fork(session.id, point)
        again = store.conversation(fork.id, model=MODEL, **settings).request()
        assert again == kwargs


def test_a_conversation_goes_on_along_another_path(store: SessionStore) -> None:
    session = store.create_session()
    conv = store.conversation(session.id, model=MODEL, system=SYSTEM, tools=TOOLS)
    first = conv.user("Why does test_sync fail?")
    conv.user("And test_async?")
    branch = conv.fork(first.id)
    assert branch is not conv and branch.session_id != conv.session_id
    assert store.get_session(branch.session_id).forked_at == first.id
    assert (branch.state.model, branch.state.system, branch.state.tools) == (conv.state.model, conv.state.system, conv.state.tools)
    branch.user("Look at test_sync only.")
    texts = [[p.text for p in m.parts] for m in store.messages(branch.session_id)]
    assert texts == [["Why does test_sync fail?"], ["Look at test_sync only."]]
    assert len(store.messages(session.id)) == 2  # the original is as it was


@pytest.mark.anyio
async def test_an_async_conversation_forks_too(store_url: str) -> None:
    async with await AsyncSessionStore.open(store_url) as store:
        session = await store.create_session()
        conv = store.conversation(session.id, model=MODEL, system=SYSTEM)
        first = await conv.user("hello")
        await conv.user("again")
        branch = await conv.fork(first.id)
        assert type(branch) is type(conv) and len(await branch.view()) == 1


def test_the_cli_forks_and_says_where_a_session_came_from(store_url: str) -> None:
    import json

    from cli_helpers import run

    with SessionStore.open(store_url) as store:
        session = store.create_session(title="original")
        ids = _turns(store, session.id, 2)
        counts = row_counts(store)
    bad = [run("sessions", "fork", "ses_nothere", "--db", store_url), run("sessions", "fork", session.id, "--at", "msg_nothere", "--db", store_url)]
    assert [(r.returncode, r.stderr.strip()) for r in bad] == [
        (1, "brutus: error: session not found: 'ses_nothere'"),
        (1, "brutus: error: message not found: 'msg_nothere'"),
    ]
    with SessionStore.open(store_url) as store:
        assert row_counts(store) == counts
    plain = run("sessions", "fork", session.id, "--at", ids[1], "--title", "branch", "--db", store_url)
    assert plain.returncode == 0, plain.stderr
    fork_id = plain.stdout.split(" into ")[1].split()[0]
    assert plain.stdout == f"forked {session.id} at {ids[1]} into {fork_id} (2 messages)\n"
    as_json = json.loads(run("sessions", "fork", session.id[:12], "--json", "--db", store_url).stdout)
    assert (as_json["forked_from"], as_json["forked_at"], as_json["message_count"], as_json["title"]) == (session.id, ids[-1], 4, "original")
    listed = {s["id"]: s for s in json.loads(run("sessions", "list", "--json", "--db", store_url).stdout)}
    assert listed[fork_id]["forked_from"] == session.id and listed[session.id]["forked_from"] is None
    table = run("sessions", "list", "--db", store_url).stdout
    assert "forked from" in table.splitlines()[0] and table.count(session.id) == 3  # its row and two forks'
    shown = run("show", fork_id, "--db", store_url).stdout
    assert shown.splitlines()[0] == f"forked from {session.id} at {ids[1]}"
    markdown = run("show", fork_id, "--markdown", "--db", store_url).stdout
    assert f"- forked from: `{session.id}` at `{ids[1]}`" in markdown.splitlines()


def test_a_fork_while_the_original_compacts_sees_a_completed_boundary_or_none(store_url: str) -> None:
    """A fork taken while a compaction of the original is summarizing (its marker pending) has neither the
    marker nor a boundary; one taken after it completed has both, and the same view as the original."""
    import threading

    from brutus.summarizers import ExtractiveSummarizer

    summarizing, release = threading.Event(), threading.Event()

    class Held(ExtractiveSummarizer):
        def summarize(self, request: Any) -> Any:
            summarizing.set()
            assert release.wait(30), "the test never released the summarizer"
            return super().summarize(request)

    with SessionStore.open(store_url) as store:
        session = store.create_session()
        _turns(store, session.id, 10)
        done: list[Any] = []
        worker = threading.Thread(target=lambda: done.append(store.compact(session.id, Held())))
        worker.start()
        try:
            assert summarizing.wait(30)
            assert [c.status for c in store.compactions(session.id)] == ["pending"]
            during = store.fork(session.id)
        finally:
            release.set()
            worker.join(30)
        assert done and [c.status for c in store.compactions(session.id)] == ["completed"]
        assert store.compactions(during.id) == [] and store.filter_compacted(during.id)[0].info.seq == 1
        after = store.fork(session.id)
        assert [c.status for c in store.compactions(after.id)] == ["completed"]
        assert canonical(store, store.filter_compacted(after.id), after.id) == canonical(
            store, store.filter_compacted(session.id), session.id
        )
        assert integrity_problems(store) == []
