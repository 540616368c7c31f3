"""``BrutusSession``: OpenAI Agents' ``Session`` on brutus, on SQLite and PostgreSQL, side by side with the
SDK's own ``SQLiteSession`` on the same calls (random sequences, and ``Runner`` runs of a scripted model);
items parsed into messages and parts; the compaction-aware view after a brutus compaction; branches side by
side with the SDK's ``AdvancedSQLiteSession``."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.extensions.memory import AdvancedSQLiteSession
from agents.items import ModelResponse
from agents.memory import SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText, ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Summary

from brutus import AsyncSessionStore, CompactionConfig, InvalidInput, NotFound, SessionStore
from brutus.integrations.openai_agents import BrutusSession
from brutus.summarizers import ExtractiveSummarizer

from import_helpers import row_counts
from integrity import integrity_problems

pytestmark = pytest.mark.anyio

HOSTILE = "nul\x00 lone\ud800 esc\ue000 crlf\r\n 漢字🤖 \\u0000"


@pytest.fixture(autouse=True, scope="module")
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    yield
    set_tracing_disabled(False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def astore(store_url: str) -> AsyncIterator[AsyncSessionStore]:
    store = await AsyncSessionStore.open(store_url)
    yield store
    await store.close()


@pytest.fixture
def sync_store(store_url: str) -> Iterator[SessionStore]:
    store = SessionStore.open(store_url)
    yield store
    store.close()


# -- items ----------------------------------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str, n: int) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": f"msg_{n}", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip


def reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": f"think {n}"}], "encrypted_content": "opaque=="}


def call(call_id: str, n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "read", "arguments": json.dumps({"path": f"f{n}.py"}), "id": f"fc_{n}", "status": "completed"}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def random_items(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Every kind of item, in any order: calls answered, answered twice, never answered, outputs of no call."""
    items = []
    for _ in range(count):
        n, call_id = rng.randrange(10_000), f"call_{rng.randrange(4)}"
        items.append(
            rng.choice(
                [
                    lambda: user(f"hi {n} {HOSTILE}"),
                    lambda: {"type": "message", "role": rng.choice(["system", "developer"]), "content": [{"type": "input_text", "text": f"be brief {n}"}]},
                    lambda: answer(f"answer {n}", n),
                    lambda: reasoning(n),
                    lambda: call(call_id, n),
                    lambda: output(call_id, f"out {n} " * rng.randrange(1, 50)),
                    lambda: {"type": "web_search_call", "id": f"ws_{n}", "status": "completed", "action": {"type": "search", "query": "q"}},
                    lambda: {"type": "item_reference", "id": f"ref_{n}", "extra": [1.5, None, {"deep": HOSTILE}]},
                ]
            )()
        )
    return items


_ID = re.compile(r"^(ses|msg|prt)_")


def shape(history: list[Any]) -> Any:
    """A history without ids (numbered by first appearance), times or seqs."""
    seen: dict[str, str] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, str) and _ID.match(v):
            return seen.setdefault(v, f"{v[:3]}#{len(seen)}")
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items() if k not in ("time", "seq", "session_id")}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk([m.model_dump() for m in history])


async def parsed_as_fresh(store: AsyncSessionStore, session: BrutusSession) -> bool:
    """The session's messages are what its items make when added at once to a new session."""
    fresh = BrutusSession(session.session_id + "/fresh", store)
    await fresh.add_items(await session.get_items())
    try:
        return shape(await _messages(store, session)) == shape(await _messages(store, fresh))
    finally:
        await fresh.clear_session()


async def _messages(store: AsyncSessionStore, session: BrutusSession) -> list[Any]:
    try:
        return await store.messages(session.brutus_session_id)
    except Exception:  # noqa: BLE001  never written, or cleared
        return []


# -- side by side with SQLiteSession --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
async def test_the_same_calls_give_what_sqlite_session_gives(seed: int, astore: AsyncSessionStore, sync_store: SessionStore) -> None:
    rng = random.Random(seed)
    theirs, ours = SQLiteSession(f"s{seed}"), BrutusSession(f"s{seed}", astore)
    try:
        for step in range(40):
            roll = rng.random()
            if roll < 0.45:
                items = random_items(rng, rng.randrange(0, 5))
                await theirs.add_items(copy.deepcopy(items))
                await ours.add_items(items)
            elif roll < 0.7:
                assert await ours.pop_item() == await theirs.pop_item(), step
            elif roll < 0.96:
                limit = rng.choice([None, 0, 1, 2, 3, 7, -1, 1000])
                assert await ours.get_items(limit) == await theirs.get_items(limit), (step, limit)
            else:
                await theirs.clear_session()
                await ours.clear_session()
        assert await ours.get_items() == await theirs.get_items()
        assert await parsed_as_fresh(astore, ours)
    finally:
        theirs.close()
    assert integrity_problems(sync_store) == []


async def test_pops_rewrite_the_message_without_the_item(astore: AsyncSessionStore) -> None:
    session = BrutusSession("pops", astore)
    rng = random.Random(7)
    for _ in range(25):
        await session.add_items(random_items(rng, rng.randrange(1, 6)))
        for _ in range(rng.randrange(0, 4)):
            await session.pop_item()
        assert await parsed_as_fresh(astore, session)


async def test_session_settings_limit_and_the_protocol(astore: AsyncSessionStore) -> None:
    from agents.memory import Session

    session = BrutusSession("limited", astore, session_settings=SessionSettings(limit=2))
    assert isinstance(session, Session)
    await session.add_items([user("a"), answer("b", 1), user("c")])
    assert await session.get_items() == [answer("b", 1), user("c")]
    assert len(await session.get_items(10)) == 3
    with pytest.raises(InvalidInput):
        await session.add_items([user("d"), "not an item"])  # type: ignore[list-item]
    assert len(await session.get_items(10)) == 3  # nothing of the refused call
    with pytest.raises(InvalidInput):
        BrutusSession("", astore)


async def test_concurrent_adds_to_one_session_all_land(astore: AsyncSessionStore) -> None:
    sessions = [BrutusSession("shared", astore) for _ in range(4)]
    await asyncio.gather(*(s.add_items([user(f"from {i}"), answer(f"reply {i}", i)]) for i, s in enumerate(sessions)))
    items = await sessions[0].get_items()
    assert sorted(item["content"] for item in items if item.get("role") == "user") == [f"from {i}" for i in range(4)]
    assert await parsed_as_fresh(astore, sessions[0])


# -- items → messages and parts -----------------------------------------------------------------------------


async def test_items_become_messages_and_parts(astore: AsyncSessionStore) -> None:
    session = BrutusSession("mapped", astore)
    await session.add_items([{"role": "developer", "content": "be brief"}, user("read two files " + HOSTILE)])
    await session.add_items([reasoning(1), call("c1", 1), call("c2", 2)])
    await session.add_items([output("c1", "one"), output("c2", [{"type": "input_text", "text": "two"}])])
    await session.add_items([answer("done", 3), {"type": "web_search_call", "id": "ws", "status": "completed"}])
    await session.add_items([output("c1", "late duplicate")])
    history = await astore.messages(session.brutus_session_id)
    assert [(m.info.role, m.info.finish) for m in history] == [
        ("user", None), ("user", None), ("assistant", "tool-calls"), ("assistant", "stop"), ("assistant", "stop")
    ]  # fmt: skip
    developer, prompt, calls, reply, late = history
    assert developer.info.metadata == {"openai_agents": {"role": "developer"}} and developer.parts[0].text == "be brief"
    assert prompt.parts[0].text == "read two files " + HOSTILE and calls.info.parent_id == prompt.info.id
    assert [p.type for p in calls.parts] == ["reasoning", "tool", "tool"] and calls.parts[0].text == "think 1"
    assert [(p.call_id, p.tool, p.state.input, p.state.status, p.state.output) for p in calls.parts[1:]] == [
        ("c1", "read", {"path": "f1.py"}, "completed", "one"),
        ("c2", "read", {"path": "f2.py"}, "completed", "two"),
    ]
    assert reply.parts[0].text == "done" and reply.parts[1].ignored and reply.parts[1].metadata == {"openai_agents": {"type": "web_search_call"}}
    assert late.parts[0].ignored  # an output no call waits for: kept, opaque
    assert (await astore.get_session(session.brutus_session_id)).title == "read two files nul\x00 lone\ud800 esc\ue000 crlf"


# -- the Runner with a scripted model -----------------------------------------------------------------------


class ScriptedModel(Model):
    """The SDK's ``Model`` interface answering from a script, recording the input of every call."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, *, previous_response_id, conversation_id, prompt):  # type: ignore[no-untyped-def]  # noqa: A002
        self.inputs.append(copy.deepcopy(input))
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city} " + "and warm " * 400


def _message(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])  # fmt: skip


def _call(city: str, n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(id=f"fc_{n}", type="function_call", call_id=f"call_{n}", name="weather", arguments=json.dumps({"city": city}))


def _think(n: int) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=f"rs_{n}", type="reasoning", summary=[Summary(type="summary_text", text=f"thinking {n}")])


def script() -> list[list[Any]]:
    return [
        [_think(1), _call("Paris", 1)],
        [_message("Sunny in Paris.", 2)],
        [_call("Rome", 3), _call("Oslo", 4)],
        [_think(5), _message("Both sunny.", 5)],
        [_message("You asked about three cities.", 6)],
    ]


async def run_turns(session: Any, prompts: list[str], model: ScriptedModel) -> list[Any]:
    agent = Agent(name="weather", instructions="Be brief.", model=model, tools=[weather])
    return [(await Runner.run(agent, prompt, session=session)).final_output for prompt in prompts]


async def test_runner_turns_give_what_they_give_on_sqlite_session(astore: AsyncSessionStore, sync_store: SessionStore) -> None:
    prompts = ["Weather in Paris?", "And Rome and Oslo?", "How many cities?"]
    theirs_model, ours_model = ScriptedModel(script()), ScriptedModel(script())
    theirs = SQLiteSession("run")
    try:
        assert await run_turns(theirs, prompts, theirs_model) == await run_turns(BrutusSession("run", astore), prompts, ours_model)
        ours = BrutusSession("run", astore)
        assert ours_model.inputs == theirs_model.inputs  # what the model was sent, call by call
        assert await ours.get_items() == await theirs.get_items()
        assert await ours.get_items(3) == await theirs.get_items(3)
        assert await ours.pop_item() == await theirs.pop_item()
        assert await ours.get_items() == await theirs.get_items()
    finally:
        theirs.close()
    history = sync_store.messages(ours.brutus_session_id)
    assert [(m.info.role, [p.type for p in m.parts]) for m in history] == [
        ("user", ["text"]), ("assistant", ["reasoning", "tool"]), ("assistant", ["text"]),
        ("user", ["text"]), ("assistant", ["tool", "tool"]), ("assistant", ["reasoning", "text"]),
        ("user", ["text"]),
    ]  # fmt: skip
    assert all(p.state.status == "completed" for m in history for p in m.parts if p.type == "tool")
    assert integrity_problems(sync_store) == []


# -- after a brutus compaction: the view ---------------------------------------------------------------------


async def test_after_a_compaction_get_items_is_the_summary_then_the_tail(astore: AsyncSessionStore) -> None:
    session = BrutusSession("compacted", astore)
    model = ScriptedModel(script())
    await run_turns(session, ["Weather in Paris?", "And Rome and Oslo?"], model)
    before = await session.get_items()
    result = await astore.compact(session.brutus_session_id, ExtractiveSummarizer())
    summary = result.summary_message.parts[0].text
    assert await session.get_items() == [{"type": "message", "role": "user", "content": summary}]
    assert await session.pop_item() is None  # the newest item lies behind the compaction

    await run_turns(session, ["How many cities?"], model)
    sent = model.inputs[-1]
    assert sent[0] == {"type": "message", "role": "user", "content": summary} and len(sent) == 2
    after = await session.get_items()
    assert after == [sent[0], sent[1], {**before[-1], "id": "msg_6", "content": [{"type": "output_text", "text": "You asked about three cities.", "annotations": []}]}]
    assert await session.get_items(1) == after[-1:]
    assert await session.pop_item() == after[-1]
    assert await session.pop_item() == after[-2]
    assert await session.pop_item() is None
    assert await session.get_items() == after[:1]


async def test_a_compaction_with_a_tail_keeps_its_items(astore: AsyncSessionStore) -> None:
    session = BrutusSession("tail", astore)
    await run_turns(session, ["Weather in Paris?", "And Rome and Oslo?"], ScriptedModel(script()))
    items = await session.get_items()
    config = CompactionConfig(tail_tokens=2_000)  # the second turn fits, both do not
    result = await astore.compact(session.brutus_session_id, ExtractiveSummarizer(), config=config)
    view = await session.get_items()
    assert view[0] == {"type": "message", "role": "user", "content": result.summary_message.parts[0].text}
    assert 1 < len(view) < len(items) + 1 and view[1:] == items[len(items) - len(view) + 1 :]


# -- branches, side by side with AdvancedSQLiteSession ----------------------------------------------------------


def turns(rng: random.Random, count: int) -> list[list[dict[str, Any]]]:
    """``count`` turns: a user item, then any items (so outputs may answer calls of earlier turns)."""
    return [[user(f"turn {n} {HOSTILE}"), *random_items(rng, rng.randrange(0, 5))] for n in range(count)]


async def brutus_turns(session: BrutusSession) -> int:
    return sum(item.get("role") == "user" for item in await session.get_items())


@pytest.mark.parametrize("seed", range(4))
async def test_branches_give_what_advanced_sqlite_session_gives(
    seed: int, astore: AsyncSessionStore, sync_store: SessionStore, tmp_path: Any
) -> None:
    rng = random.Random(seed)
    theirs = AdvancedSQLiteSession(session_id=f"b{seed}", db_path=tmp_path / "sdk.db", create_tables=True)
    ours = BrutusSession(f"b{seed}", astore)
    try:
        for items in turns(rng, 4):
            await theirs.add_items(copy.deepcopy(items))
            await ours.add_items(items)
        main = await ours.get_items()
        for step in range(6):
            if not await brutus_turns(ours):  # a branch from the first turn: nothing to branch from
                await ours.switch_to_branch("main")
                await theirs.switch_to_branch("main")
            turn = rng.randrange(1, await brutus_turns(ours) + 1)
            name = f"try-{step}"
            source = await astore.get_session(ours.brutus_session_id)
            before = await ours.get_items()
            assert await ours.create_branch_from_turn(turn, name) == await theirs.create_branch_from_turn(turn, name) == name
            assert ours.branch_id == name
            branch = await ours.get_items()
            assert branch == await theirs.get_items()
            cut = [i for i, item in enumerate(before) if item.get("role") == "user"][turn - 1]
            assert branch == before[:cut]  # exactly the items before the turn's user item
            fork = await astore.get_session(ours.brutus_session_id)
            if cut:
                assert fork.forked_from == source.id and fork.forked_at is not None
            assert await parsed_as_fresh(astore, ours)
            for items in turns(rng, rng.randrange(0, 3)):
                await theirs.add_items(copy.deepcopy(items))
                await ours.add_items(items)
            if rng.random() < 0.5:
                assert await ours.pop_item() == await theirs.pop_item()
            assert await ours.get_items() == await theirs.get_items()
            assert await parsed_as_fresh(astore, ours)
            if rng.random() < 0.4:
                await ours.switch_to_branch("main")
                await theirs.switch_to_branch("main")
        await ours.switch_to_branch("main")
        await theirs.switch_to_branch("main")
        assert await ours.get_items() == await theirs.get_items() == main  # the branches left it as it was
    finally:
        theirs.close()
    assert integrity_problems(sync_store) == []


async def test_a_branch_and_its_session_are_independent(astore: AsyncSessionStore) -> None:
    session = BrutusSession("independent", astore)
    items = [user("one"), answer("a1", 1), user("two"), call("c1", 2), output("c1", "o1"), answer("a2", 3), user("three")]
    await session.add_items(items)
    original = session.brutus_session_id
    branch = await session.create_branch_from_turn(2)
    assert re.fullmatch(r"branch_from_turn_2_\d+", branch) and session.branch_id == branch
    await session.add_items([user("two again"), call("c2", 4)])
    on_main = BrutusSession("independent", astore)
    assert await on_main.get_items() == items  # the branch wrote nothing of the session
    await on_main.add_items([answer("a3", 5)])
    assert await on_main.pop_item() == answer("a3", 5)
    assert await on_main.pop_item() == user("three")
    assert await session.get_items() == [*items[:2], user("two again"), call("c2", 4)]
    await astore.delete_session(original)  # the session gone, the branch stays whole
    assert await on_main.get_items() == []
    assert await session.get_items() == [*items[:2], user("two again"), call("c2", 4)]
    await session.add_items([output("c2", "o2")])
    assert await parsed_as_fresh(astore, session)
    other = BrutusSession("independent", astore)
    await other.switch_to_branch(branch)  # another object finds it
    assert other.brutus_session_id == session.brutus_session_id
    assert await other.get_items() == await session.get_items()


async def test_a_branch_of_a_branch_and_clear_session(astore: AsyncSessionStore) -> None:
    session = BrutusSession("nested", astore)
    await session.add_items([user("one"), answer("a1", 1), user("two"), answer("a2", 2), user("three")])
    first = await session.create_branch_from_turn(3, "first")
    first_session = session.brutus_session_id
    await session.add_items([user("three b"), answer("a3b", 3)])
    assert await session.create_branch_from_turn(2, "second") == "second"
    assert await session.get_items() == [user("one"), answer("a1", 1)]
    assert (await astore.get_session(session.brutus_session_id)).forked_from == first_session
    await session.switch_to_branch(first)
    assert await session.get_items() == [user("one"), answer("a1", 1), user("two"), answer("a2", 2), user("three b"), answer("a3b", 3)]
    await session.clear_session()  # every branch with it, back on main
    assert session.branch_id == "main" and await session.get_items() == []
    with pytest.raises(InvalidInput, match="does not exist"):
        await session.switch_to_branch("first")
    with pytest.raises(NotFound):
        await astore.get_session(first_session)


async def test_a_branch_holds_a_call_open_that_a_later_turn_answered(astore: AsyncSessionStore) -> None:
    session = BrutusSession("answered later", astore)
    await session.add_items([user("one"), call("c1", 1), user("two"), output("c1", "late"), answer("a", 2)])
    await session.create_branch_from_turn(2)
    assert await session.get_items() == [user("one"), call("c1", 1)]
    [_, assistant] = await astore.messages(session.brutus_session_id)
    assert assistant.parts[0].state.status == "pending"  # as the branch's items say
    assert await parsed_as_fresh(astore, session)
    await session.add_items([output("c1", "now")])
    [_, assistant] = await astore.messages(session.brutus_session_id)
    assert assistant.parts[0].state.status == "completed" and assistant.parts[0].state.output == "now"


async def test_a_branch_of_a_compacted_session_is_its_view_at_that_turn(astore: AsyncSessionStore) -> None:
    session = BrutusSession("compacted branch", astore)
    model = ScriptedModel(script())
    await run_turns(session, ["Weather in Paris?", "And Rome and Oslo?"], model)
    await astore.compact(session.brutus_session_id, ExtractiveSummarizer())
    view = await session.get_items()
    await run_turns(session, ["How many cities?"], model)
    await session.create_branch_from_turn(3)
    assert await session.get_items() == view  # the summary, as the session showed it there
    history = await astore.messages(session.brutus_session_id)
    assert len(await astore.filter_compacted(session.brutus_session_id)) < len(history)


async def test_bad_branches_are_refused_and_write_nothing(astore: AsyncSessionStore, sync_store: SessionStore) -> None:
    session = BrutusSession("refusals", astore)
    with pytest.raises(InvalidInput, match="turn 1 does not contain a user message"):
        await session.create_branch_from_turn(1)  # never written
    await session.add_items([{"role": "system", "content": "rules"}, user("one"), answer("a", 1)])
    await session.create_branch_from_turn(1, "used")
    await session.switch_to_branch("main")
    counts = row_counts(sync_store)
    for turn in (0, -1, 2, 10**9):
        with pytest.raises(InvalidInput, match=f"turn {turn} does not contain a user message in branch 'main'"):
            await session.create_branch_from_turn(turn)
    for turn in ("1", 1.0, True, None):
        with pytest.raises(InvalidInput, match="turn_number must be an int"):
            await session.create_branch_from_turn(turn)  # type: ignore[arg-type]
    for name in ("used", "main"):
        with pytest.raises(InvalidInput, match=f"branch id '{name}' has already been used"):
            await session.create_branch_from_turn(1, name)
    for name in ("", "  ", 3):
        with pytest.raises(InvalidInput, match="a branch name must be a non-empty string"):
            await session.create_branch_from_turn(1, name)  # type: ignore[arg-type]
    for name in ("nope", "", None):
        with pytest.raises(InvalidInput, match="does not exist"):
            await session.switch_to_branch(name)  # type: ignore[arg-type]
    assert row_counts(sync_store) == counts
    assert session.branch_id == "main" and len(await session.get_items()) == 3
