"""``BrutusSessionStore``: the Claude Agent SDK's ``SessionStore`` on brutus, on SQLite and PostgreSQL.

The SDK's own conformance suite; entries kept exactly; corpus transcripts appended the way the SDK flushes
(one batch per turn, and small batches with retried ones) read in brutus as ``brutus import`` of the same
file reads; the SDK's store helpers give what they give on its in-memory store; sub-agent transcripts,
deletion, concurrent appends, a parse that fails, and messages brutus wrote into a mirrored session.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    InMemorySessionStore,
    fold_session_summary,
    fork_session_via_store,
    get_session_info_from_store,
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
    rename_session_via_store,
    tag_session_via_store,
)
from claude_agent_sdk.testing import run_session_store_conformance
from corpus_helpers import claude_code_files, corpus_file, read_text
from sqlalchemy import delete

from brutus import AsyncSessionStore, InvalidInput, NotFound, SessionStore
from brutus.db.engine import make_engine
from brutus.db.tables import Base
from brutus.importers import import_file
from brutus.integrations import claude_mirror
from brutus.integrations.claude_agent_sdk import BrutusSessionStore

from import_helpers import row_counts
from integrity import integrity_problems
from cli_helpers import run as run_cli

pytestmark = pytest.mark.anyio

HOSTILE = "nul\x00 lone\ud800 esc\ue000 \ue0000 crlf\r\n 漢字🤖 \\u0000"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def astore(store_url: str) -> AsyncIterator[AsyncSessionStore]:
    store = await AsyncSessionStore.open(store_url)
    yield store
    await store.close()


@pytest.fixture
def sdk(astore: AsyncSessionStore) -> BrutusSessionStore:
    return BrutusSessionStore(astore)


@pytest.fixture
def sync_store(store_url: str) -> Iterator[SessionStore]:
    store = SessionStore.open(store_url)
    yield store
    store.close()


def wipe(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(delete(table))
    engine.dispose()


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def key_of(lines: list[dict[str, Any]], project: str = "proj") -> dict[str, str]:
    session = next((e["sessionId"] for e in lines if isinstance(e.get("sessionId"), str)), "no-session-id")
    return {"project_key": project, "session_id": session}


def by_turn(lines: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Batches as the SDK flushes in its default mode: once per turn (a main-chain user prompt starts the
    next), or when 500 entries are waiting."""
    batch: list[dict[str, Any]] = []
    for entry in lines:
        content = entry.get("message", {}).get("content") if isinstance(entry.get("message"), dict) else None
        prompt = entry.get("type") == "user" and not entry.get("isSidechain") and (
            isinstance(content, str) or isinstance(content, list) and any(b.get("type") != "tool_result" for b in content)
        )
        if (prompt and batch) or len(batch) == 500:
            yield batch
            batch = []
        batch.append(entry)
    if batch:
        yield batch


def small_batches(lines: list[dict[str, Any]], rng: random.Random) -> Iterator[list[dict[str, Any]]]:
    """Batches as the SDK's eager mode flushes them: a few entries each."""
    index = 0
    while index < len(lines):
        size = rng.randint(1, 12)
        yield lines[index : index + size]
        index += size


_ID = re.compile(r"^(ses|msg|prt)_")


def shape(value: Any) -> Any:
    """A history (or anything) with its ids replaced by their order of first appearance."""
    seen: dict[str, str] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str) and _ID.match(v):
            return seen.setdefault(v, f"{v[:3]}#{len(seen)}")
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


def same_as_import(store: SessionStore, mirrored: str, path: Path) -> None:
    """The mirrored session (and its sub-agent children) reads as ``brutus import`` of ``path`` does."""
    created = import_file(store, path)
    imported = created[0]

    def sessions(root: str) -> list[Any]:
        children = sorted(store.list_sessions(parent_id=root), key=lambda s: s.created_at)
        return [store.get_session(root), *children]

    ours, theirs = sessions(mirrored), sessions(imported)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a.title, a.directory) == (b.title, b.directory)
        assert shape([m.model_dump() for m in store.messages(a.id)]) == shape([m.model_dump() for m in store.messages(b.id)])
        assert shape([m.model_dump() for m in store.filter_compacted(a.id)]) == shape(
            [m.model_dump() for m in store.filter_compacted(b.id)]
        )


# -- the SDK's conformance suite ----------------------------------------------------------------------------


async def test_the_sdks_conformance_suite(astore: AsyncSessionStore, store_url: str) -> None:
    made = 0

    def fresh() -> BrutusSessionStore:
        nonlocal made
        made += 1
        wipe(store_url)  # each contract starts from an empty store
        return BrutusSessionStore(astore)

    await run_session_store_conformance(fresh)
    assert made >= 15  # the probe and the 14 contracts: every optional method implemented, none skipped


# -- entries kept exactly -----------------------------------------------------------------------------------


async def test_entries_come_back_exactly_and_in_order(sdk: BrutusSessionStore) -> None:
    key = {"project_key": HOSTILE, "session_id": "s1"}
    entries = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": HOSTILE}, "timestamp": "2026-01-01T00:00:00Z"},
        {"type": "x", "n": 1.5, "big": 2**62, "neg": -0.25, "nested": {HOSTILE: [None, True, {"a": []}]}, "e": ""},
        {"type": "x", "uuid": "u2", "list": list(range(50))},
    ]
    await sdk.append(key, entries)
    await sdk.append(key, [entries[0], {"type": "y", "uuid": "u2"}])  # both uuids are there: skipped
    await sdk.append(key, [entries[1], entries[1]])  # no uuid: appended, twice
    await sdk.append(key, [{"type": "z", "uuid": "u3"}, {"type": "z", "uuid": "u3", "second": True}])
    assert await sdk.load(key) == [*entries, entries[1], entries[1], {"type": "z", "uuid": "u3"}]
    assert await sdk.load({"project_key": HOSTILE, "session_id": "s2"}) is None


async def test_bad_keys_and_entries_are_refused_before_anything_is_written(sdk: BrutusSessionStore) -> None:
    for key in ({"project_key": "p"}, {"project_key": "p", "session_id": ""}, {"project_key": 3, "session_id": "s"},
                {"project_key": "p", "session_id": "s", "subpath": ""}, "p/s"):
        with pytest.raises(InvalidInput):
            await sdk.append(key, [{"type": "x"}])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await sdk.append({"project_key": "p", "session_id": "s"}, [{"type": "x"}, "not an object"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        await sdk.append({"project_key": "p", "session_id": "s"}, [{"type": "x", "f": float("nan")}])
    assert await sdk.load({"project_key": "p", "session_id": "s"}) is None
    assert await sdk.list_sessions("p") == []


async def test_summaries_are_the_folds_state_stamped_with_the_write_time(sdk: BrutusSessionStore) -> None:
    lines = lines_of(corpus_file("2cba43de"))
    key = key_of(lines)
    expected = None
    for batch in by_turn(lines):
        await sdk.append(key, batch)
        expected = fold_session_summary(expected, key, batch)  # type: ignore[arg-type]
    await sdk.append({**key, "subpath": "subagents/agent-1"}, [{"type": "user", "customTitle": "not the main one"}])
    [summary] = await sdk.list_session_summaries("proj")
    [listed] = await sdk.list_sessions("proj")
    assert summary["data"] == expected["data"] and summary["session_id"] == key["session_id"]  # type: ignore[index]
    assert summary["mtime"] == listed["mtime"] > 1e12


# -- corpus transcripts read as brutus import reads them ---------------------------------------------------


@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name[:8])
async def test_a_transcript_appended_turn_by_turn_reads_as_its_import(
    path: Path, sdk: BrutusSessionStore, sync_store: SessionStore
) -> None:
    lines = lines_of(path)
    key = key_of(lines)
    for batch in by_turn(lines):
        await sdk.append(key, batch)
    assert await sdk.load(key) == lines
    if any(entry.get("type") in ("user", "assistant", "system") for entry in lines):
        same_as_import(sync_store, sdk.session_id(key), path)
    else:  # only summary lines: the import makes no session, the mirror an empty one
        assert import_file(sync_store, path) == [] and sync_store.messages(sdk.session_id(key)) == []
    assert integrity_problems(sync_store) == []


@pytest.mark.parametrize("fragment", ["0a725fb5", "da4409c0", "d7d349f9", "6dc88126"])
async def test_small_batches_with_retries_read_as_the_import(fragment: str, sdk: BrutusSessionStore, sync_store: SessionStore) -> None:
    """Eager flushing: a few entries at a time, some batches sent twice (a retry after a timeout that
    landed). The sub-agent sidechains (0a725fb5), a compaction boundary (da4409c0) and summary lines
    (6dc88126) among them."""
    path = corpus_file(fragment)
    lines = lines_of(path)
    key = key_of(lines)
    rng = random.Random(fragment)
    for batch in small_batches(lines, rng):
        await sdk.append(key, batch)
        if rng.random() < 0.2 and all("uuid" in entry for entry in batch):
            await sdk.append(key, batch)
    assert await sdk.load(key) == lines
    same_as_import(sync_store, sdk.session_id(key), path)
    state = claude_mirror.MirrorState.from_json(_transcript_state(sync_store, sdk.session_id(key)))
    assert state.error is None and state.cut > 1  # the window moved on: the appends did not re-read the session


def _transcript_state(store: SessionStore, session_id: str) -> Any:
    from sqlalchemy import select

    from brutus.db.tables import TranscriptRow

    with store.engine.connect() as conn:
        return conn.execute(select(TranscriptRow.state).where(TranscriptRow.session_id == session_id)).scalar_one()


async def test_brutus_show_prints_the_same_messages_as_brutus_import(sdk: BrutusSessionStore, store_url: str) -> None:
    path = corpus_file("2cba43de")
    lines = lines_of(path)
    key = key_of(lines)
    for batch in by_turn(lines):
        await sdk.append(key, batch)

    def brutus(*args: str) -> str:
        result = run_cli(*args, "--db", store_url)
        assert result.returncode == 0, result.stderr
        return result.stdout

    imported = json.loads(brutus("import", str(path), "--json"))["created"][0]
    ours = json.loads(brutus("show", sdk.session_id(key), "--full", "--json"))
    theirs = json.loads(brutus("show", imported, "--full", "--json"))
    assert shape(ours) == shape(theirs) and len(ours) == 18
    listed = {s["id"]: s for s in json.loads(brutus("sessions", "list", "--json"))}
    assert listed[sdk.session_id(key)]["title"] == listed[imported]["title"]
    assert json.loads(brutus("stats", sdk.session_id(key), "--json"))["messages"] == 18


# -- the SDK's helpers read our store as they read their own -------------------------------------------------


async def test_the_sdks_store_helpers_give_what_its_in_memory_store_gives(sdk: BrutusSessionStore) -> None:
    directory = "/work/some project"
    project = project_key_for_directory(directory)
    memory = InMemorySessionStore()
    ids = []
    for fragment in ("2cba43de", "9dd861b1", "d7d349f9"):
        lines = lines_of(corpus_file(fragment))
        key = key_of(lines, project)
        ids.append(key["session_id"])
        for batch in by_turn(lines):
            await sdk.append(key, batch)
            await memory.append(key, batch)  # type: ignore[arg-type]
    for store in (sdk, memory):
        await rename_session_via_store(store, ids[0], "renamed " + HOSTILE, directory=directory)  # type: ignore[arg-type]
        await tag_session_via_store(store, ids[1], "tagged", directory=directory)  # type: ignore[arg-type]

    def info(found: Any) -> Any:
        return None if found is None else {k: v for k, v in vars(found).items() if k not in ("last_modified", "file_size")}

    ours = sorted(map(info, await list_sessions_from_store(sdk, directory=directory)), key=lambda i: i["session_id"])  # type: ignore[arg-type]
    theirs = sorted(map(info, await list_sessions_from_store(memory, directory=directory)), key=lambda i: i["session_id"])
    assert ours == theirs and len(ours) == 3 and any(i["custom_title"] == "renamed " + HOSTILE for i in ours)
    for session_id in ids:
        assert info(await get_session_info_from_store(sdk, session_id, directory=directory)) == info(  # type: ignore[arg-type]
            await get_session_info_from_store(memory, session_id, directory=directory)
        )
        assert await get_session_messages_from_store(sdk, session_id, directory=directory) == (  # type: ignore[arg-type]
            await get_session_messages_from_store(memory, session_id, directory=directory)
        )
    fork = await fork_session_via_store(sdk, ids[2], directory=directory, title="forked")  # type: ignore[arg-type]
    assert await get_session_messages_from_store(sdk, fork.session_id, directory=directory)  # type: ignore[arg-type]
    source = await sdk.store.messages(sdk.session_id({"project_key": project, "session_id": ids[2]}))
    copy = await sdk.store.messages(sdk.session_id({"project_key": project, "session_id": fork.session_id}))
    assert [m.info.role for m in copy] == [m.info.role for m in source]  # the fork is parsed like the original


# -- sub-agents, deletion, retention ------------------------------------------------------------------------


async def test_a_subpath_is_a_child_session_and_delete_cascades(sdk: BrutusSessionStore, astore: AsyncSessionStore) -> None:
    lines = lines_of(corpus_file("2cba43de"))
    main = key_of(lines)
    sub = {**main, "subpath": "subagents/agent-a1"}
    side = [{**e, "isSidechain": True, "agentId": "a1"} for e in lines[:6]]
    await sdk.append(sub, side[:3])  # the sub-agent's first flush may come before the main transcript's
    assert await sdk.load(main) is None and await sdk.list_sessions("proj") == []
    await sdk.append(main, lines)
    await sdk.append(sub, side[3:])
    assert await sdk.load(sub) == side and await sdk.list_subkeys(main) == ["subagents/agent-a1"]
    child = await astore.get_session(sdk.session_id(sub))
    assert child.parent_id == sdk.session_id(main)
    # one chain, whatever isSidechain says: as the same lines in a main transcript
    await sdk.append({"project_key": "other", "session_id": "x"}, lines[:6])
    plain = await astore.messages(sdk.session_id({"project_key": "other", "session_id": "x"}))
    strip = lambda history: shape([m.model_dump(exclude={"info": {"metadata"}}) for m in history])  # noqa: E731
    assert strip(await astore.messages(child.id)) == strip(plain) and plain

    await sdk.delete(sub)
    assert await sdk.load(sub) is None and await sdk.load(main) == lines and await sdk.list_subkeys(main) == []
    await sdk.append(sub, side)
    await sdk.delete(main)
    assert await sdk.load(main) is None and await sdk.load(sub) is None
    with pytest.raises(NotFound):
        await astore.get_session(child.id)
    await sdk.delete(main)  # deleting what is not there is no error


async def test_deleting_the_brutus_session_deletes_the_transcript(sdk: BrutusSessionStore, astore: AsyncSessionStore) -> None:
    lines = lines_of(corpus_file("9dd861b1"))
    key = key_of(lines)
    await sdk.append(key, lines)
    await astore.delete_session(sdk.session_id(key))
    assert await sdk.load(key) is None and await sdk.list_sessions("proj") == []


# -- what can go wrong --------------------------------------------------------------------------------------


async def test_concurrent_appends_to_one_session_all_land_and_parse(sdk: BrutusSessionStore, sync_store: SessionStore) -> None:
    path = corpus_file("d7d349f9")
    lines = lines_of(path)
    key = key_of(lines)
    batches = list(by_turn(lines))
    for batch in batches:  # each turn by several writers at once, the turns in order
        await asyncio.gather(*(sdk.append(key, batch) for _ in range(3)))
    assert await sdk.load(key) == lines
    same_as_import(sync_store, sdk.session_id(key), path)


async def test_a_parse_that_fails_keeps_the_entries_and_the_next_append_catches_up(
    sdk: BrutusSessionStore, sync_store: SessionStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = corpus_file("2cba43de")
    lines = lines_of(path)
    key = key_of(lines)
    batches = list(by_turn(lines))
    await sdk.append(key, batches[0])

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise InvalidInput("the planner broke")

    monkeypatch.setattr("brutus.integrations.claude_agent_sdk.plan_window", broken)
    await sdk.append(key, batches[1])  # no error for the SDK: it would send the batch again
    assert "the planner broke" in caplog.text
    assert claude_mirror.MirrorState.from_json(_transcript_state(sync_store, sdk.session_id(key))).error
    monkeypatch.undo()
    for batch in batches[2:]:
        await sdk.append(key, batch)
    assert await sdk.load(key) == lines
    assert claude_mirror.MirrorState.from_json(_transcript_state(sync_store, sdk.session_id(key))).error is None
    same_as_import(sync_store, sdk.session_id(key), path)


async def test_lines_the_importer_refuses_are_kept_but_not_parsed(sdk: BrutusSessionStore, astore: AsyncSessionStore) -> None:
    key = {"project_key": "p", "session_id": "s"}
    good = {"type": "user", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": "hello"}}
    bad = [
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content": "no timestamp"}},
        {"type": "assistant", "uuid": "u3", "timestamp": "2026-01-01T00:00:01Z", "message": "not an object"},
        {"type": "user", "uuid": 4, "timestamp": "2026-01-01T00:00:01Z", "message": {"content": "uuid not a string"}},
    ]
    await sdk.append(key, [good, *bad])
    assert await sdk.load(key) == [good, *bad]
    [message] = await astore.messages(sdk.session_id(key))
    assert message.parts[0].text == "hello"


async def test_a_message_brutus_wrote_after_the_mirrors_is_kept(sdk: BrutusSessionStore, astore: AsyncSessionStore) -> None:
    """A tool call still waiting for its result when something else appends to the session: the result
    arriving later completes the call in place instead of rewinding past that message."""
    def line(kind: str, uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
        return {"type": kind, "uuid": uuid, "timestamp": "2026-01-01T00:00:00Z", "message": {"role": kind, "content": content, **extra}}

    key = {"project_key": "p", "session_id": "s"}
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    await sdk.append(key, [line("user", "u1", "list files"), line("assistant", "a1", [call], id="m1")])
    session = sdk.session_id(key)
    note = (await astore.append_messages(session, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "a note"}]}]))[0]
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
    await sdk.append(key, [line("user", "u2", [result]), line("assistant", "a2", [{"type": "text", "text": "one file"}], id="m2")])
    history = await astore.messages(session)
    assert [m.info.id for m in history][2] == note.info.id
    tool = history[1].parts[0]
    assert (tool.state.status, tool.state.output) == ("completed", "a.txt")
    assert history[-1].parts[0].text == "one file"


async def test_import_brutus_imports_no_integration_and_no_sdk() -> None:
    code = "import sys, brutus; brutus.SessionStore; print(' '.join(m for m in ('brutus.integrations', 'claude_agent_sdk', 'agents') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=dict(os.environ)).stdout
    assert out.strip() == ""


# -- the SDK's fork ------------------------------------------------------------------------------------------


class Recording:
    """A ``SessionStore`` that hands every call to ``inner`` and keeps what was appended."""

    def __init__(self, inner: BrutusSessionStore) -> None:
        self.inner, self.appended = inner, []

    async def load(self, key: Any) -> Any:
        return await self.inner.load(key)

    async def append(self, key: Any, entries: list[Any]) -> None:
        self.appended.append((key, json.loads(json.dumps(entries))))
        await self.inner.append(key, entries)


FORK_FIELDS = {"uuid", "parentUuid", "logicalParentUuid", "sessionId", "timestamp", "forkedFrom", "isSidechain", "time",
               "uuids", "result_uuid"}  # the last two: line uuids the importer keeps


def unforked(history: list[Any]) -> Any:
    """A history without what the SDK's fork changes (the lines' uuids, session id, last timestamp, its
    ``forkedFrom``) and its times; ids by order of appearance."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if k not in FORK_FIELDS}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return shape(walk([m.model_dump() for m in history]))


async def test_the_sdks_fork_is_the_transcript_up_to_the_point_parsed_like_it(
    sdk: BrutusSessionStore, astore: AsyncSessionStore, sync_store: SessionStore
) -> None:
    directory = "/work/forks"
    project = project_key_for_directory(directory)
    lines = lines_of(corpus_file("9dd861b1"))
    source = key_of(lines, project)
    for batch in by_turn(lines):
        await sdk.append(source, batch)
    main = [e for e in lines if e.get("type") in ("user", "assistant") and not e.get("isSidechain")]
    point = main[len(main) // 2]["uuid"]
    recording = Recording(sdk)
    fork = await fork_session_via_store(recording, source["session_id"], directory=directory, up_to_message_id=point)  # type: ignore[arg-type]
    [(key, written)] = recording.appended
    assert key == {"project_key": project, "session_id": fork.session_id}
    assert await sdk.load(key) == written  # what the SDK wrote, exactly
    assert all(e.get("forkedFrom", {}).get("sessionId") == source["session_id"] for e in written if e["type"] in ("user", "assistant"))

    # parsed as the original's lines up to the point are, appended to a session of their own
    kept = lines[: next(i for i, e in enumerate(lines) if e.get("uuid") == point) + 1]
    prefix = {"project_key": project, "session_id": "prefix"}
    await sdk.append(prefix, [e for e in kept if not e.get("isSidechain") and e.get("type") != "progress"])
    forked = await astore.messages(sdk.session_id(key))
    assert unforked(forked) == unforked(await astore.messages(sdk.session_id(prefix)))
    assert len(forked) > 1

    # independent both ways
    note = {"type": "user", "uuid": "after-the-fork", "sessionId": fork.session_id, "timestamp": "2026-01-01T00:00:00Z",
            "parentUuid": written[-3]["uuid"], "message": {"role": "user", "content": "on the fork"}}  # fmt: skip
    await sdk.append(key, [note])
    assert await sdk.load(source) == lines
    await sdk.delete(source)
    assert await sdk.load(key) == [*written, note]
    assert len(await astore.messages(sdk.session_id(key))) == len(forked) + 1
    assert integrity_problems(sync_store) == []


async def test_the_sdks_fork_of_nothing_writes_nothing(sdk: BrutusSessionStore, sync_store: SessionStore) -> None:
    directory = "/work/forks"
    lines = lines_of(corpus_file("9dd861b1"))
    source = key_of(lines, project_key_for_directory(directory))
    await sdk.append(source, lines)
    counts = row_counts(sync_store)
    with pytest.raises(FileNotFoundError):
        await fork_session_via_store(sdk, "00000000-0000-4000-8000-000000000000", directory=directory)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not found in session"):
        await fork_session_via_store(sdk, source["session_id"], directory=directory, up_to_message_id="00000000-0000-4000-8000-000000000001")  # type: ignore[arg-type]
    assert row_counts(sync_store) == counts
