"""Live agents (issue 19): ``Conversation`` records responses losslessly, renders append-only, keeps thinking
valid, places cache breakpoints, and runs the context policy — on SQLite and PostgreSQL, against the fake
Messages API under the real SDK client."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import pytest
from sqlalchemy import text

from brutus import ContextPolicy, InvalidInput, SessionStore
from brutus.db import statements as st
from brutus.blocks import KEY
from brutus.live.render import BINDING_BETA, render_messages, without_cache_control
from brutus.testing import FakeMessagesAPI, Reply
from brutus.flows import Tx

from live_helpers import EVERY_BLOCK, MODEL, SYSTEM, THINKING, TOOLS, assistant_blocks, breakpoints, client, response


def conversation(store: SessionStore, **settings: Any):
    session = store.create_session(title="live")
    settings = {"system": SYSTEM, "tools": TOOLS, "max_tokens": 4096, **settings}
    return store.conversation(session.id, model=MODEL, **settings)


def counts(store: SessionStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("messages", "parts", "tool_states", "tool_outputs")}


# -- recording ------------------------------------------------------------------------------------------


def test_every_block_comes_back_deep_equal(store: SessionStore) -> None:
    conv = conversation(store)
    conv.user("Why does test_sync fail?")
    conv.request()
    usage = {
        "input_tokens": 50, "output_tokens": 700, "cache_read_input_tokens": 9000, "cache_creation_input_tokens": 1200,
        "cache_creation": {"ephemeral_5m_input_tokens": 1200, "ephemeral_1h_input_tokens": 0},
        "iterations": [
            {"type": "compaction", "input_tokens": 3000, "output_tokens": 400, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
            {"type": "message", "input_tokens": 50, "output_tokens": 700, "cache_read_input_tokens": 9000, "cache_creation_input_tokens": 1200},
        ],
    }
    recorded = response(EVERY_BLOCK, stop_reason="tool_use", usage=usage, input_transformations=[], container=None)
    message = conv.record(recorded)

    assert message.finish == "tool_use" and message.model_id == MODEL and message.provider_id == "anthropic"
    assert (message.tokens.input, message.tokens.output, message.tokens.cache.read, message.tokens.cache.write) == (50, 700, 9000, 1200)
    # cost over both iterations at Opus 4.5's prices: input 5, output 25, cache write 6.25, cache read 0.5 per million
    assert message.cost == pytest.approx((3050 * 5 + 1100 * 25 + 1200 * 6.25 + 9000 * 0.5) / 1e6)
    assert message.metadata["anthropic"]["response"] == recorded  # id, model, stop reason, usage, everything

    loaded = store.messages(conv.session_id)[-1]
    assert [p.type for p in loaded.parts] == ["reasoning", "reasoning", "text", "text", "tool"]
    assert loaded.parts[0].text == EVERY_BLOCK[0]["thinking"] and loaded.parts[2].text == "The docs say:"
    tool = loaded.parts[4]
    assert (tool.call_id, tool.tool, tool.state.status, tool.state.input) == ("toolu_01A", "bash", "pending", {"command": "pytest -x"})

    conv.tool_results([{"tool_use_id": "toolu_01A", "content": "1 failed, 41 passed"}])
    kwargs = conv.request()
    assert assistant_blocks(kwargs) == [EVERY_BLOCK]
    assert without_cache_control(kwargs["messages"][-1]) == {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "1 failed, 41 passed"}]
    }


def test_an_sdk_object_is_recorded_as_the_api_sent_it(store: SessionStore) -> None:
    conv = conversation(store, thinking=THINKING)
    reply = Reply([{"type": "thinking", "thinking": "look first"}, {"type": "text", "text": "I'll read it."},
                   {"type": "tool_use", "id": "toolu_7", "name": "read_file", "input": {"path": "a.py"}}])
    with FakeMessagesAPI([reply]) as api:
        conv.user("read a.py")
        sdk_message = client(api).beta.messages.create(**conv.request())
        conv.record(sdk_message)
        sent = api.requests[-1].response
    stored = store.messages(conv.session_id)[-1].info.metadata["anthropic"]["response"]
    assert stored == sent
    assert stored["content"][0]["signature"]


@pytest.mark.parametrize(
    "result, rendered_content",
    [
        ({"tool_use_id": "toolu_01A", "content": "ok\r\n\x1b[32mgreen\x1b[0m"}, "ok\r\n\x1b[32mgreen\x1b[0m"),
        ({"tool_use_id": "toolu_01A", "content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]},
         [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]),
        ({"tool_use_id": "toolu_01A", "content": "command not found", "is_error": True}, "command not found"),
        ({"tool_use_id": "toolu_01A", "content": "fine", "is_error": False}, "fine"),
    ],
    ids=["string", "blocks", "error", "explicit-false"],
)
def test_tool_results_come_back_exactly(store: SessionStore, result: dict[str, Any], rendered_content: Any) -> None:
    conv = conversation(store)
    conv.user("run it")
    conv.request()
    conv.record(response([{"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": {"command": "x"}}], stop_reason="tool_use"))
    conv.tool_results([result])
    part = store.messages(conv.session_id)[-1].parts[0]
    assert part.state.status == ("error" if result.get("is_error") else "completed")
    sent = without_cache_control(conv.request()["messages"][-1]["content"][0])
    assert sent == {"type": "tool_result", **result, "content": rendered_content}
    assert conv.pending_calls() == []


def test_a_result_for_no_open_call_writes_nothing(store: SessionStore) -> None:
    conv = conversation(store)
    conv.user("run it")
    conv.request()
    conv.record(response([{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}},
                          {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {}}], stop_reason="tool_use"))
    before = counts(store)
    for bad in ([{"tool_use_id": "toolu_1", "content": "a"}, {"tool_use_id": "toolu_9", "content": "b"}],
                [{"tool_use_id": "toolu_1", "content": "a"}, {"tool_use_id": "toolu_1", "content": "b"}],
                [{"tool_use_id": "toolu_1", "content": 42}], []):
        with pytest.raises(InvalidInput):
            conv.tool_results(bad)
    assert counts(store) == before
    assert [c["id"] for c in conv.pending_calls()] == ["toolu_1", "toolu_2"]


def _tool_rows(store: SessionStore, session_id: str) -> list[tuple[Any, ...]]:
    """Each tool part of the session as stored: everything but its times, in seq and position order."""
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT p.position, p.tokens, m.token_estimate, t.status, t.output_tokens, t.error, t.metadata, o.output "
            "FROM parts p JOIN messages m ON m.id = p.message_id JOIN tool_states t ON t.part_id = p.id "
            "LEFT JOIN tool_outputs o ON o.part_id = p.id WHERE p.session_id = :s ORDER BY m.seq, p.position"),
            {"s": session_id})]


def test_results_written_together_equal_update_tool_one_call_at_a_time(store: SessionStore) -> None:
    calls = [{"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"command": "x" * 40 * n}} for n in (1, 2, 3)]
    results = [{"tool_use_id": "toolu_1", "content": "passed " * 50},
               {"tool_use_id": "toolu_2", "content": "boom", "is_error": True},
               {"tool_use_id": "toolu_3", "content": [{"type": "text", "text": "three"}]}]
    together, one_by_one = conversation(store), conversation(store)
    for conv in (together, one_by_one):
        conv.user("run them")
        conv.request()
        conv.record(response([{"type": "text", "text": "running"}, *calls], stop_reason="tool_use"))
    together.tool_results(results)
    for result in results:
        one_by_one.tool_results([result])
    assert _tool_rows(store, together.session_id) == _tool_rows(store, one_by_one.session_id)
    rows = _tool_rows(store, together.session_id)
    assert [r[3] for r in rows] == ["completed", "error", "completed"]
    assert [r[7] for r in rows] == ["passed " * 50, None, "three"]
    with store.engine.connect() as conn:  # the message's estimate is its parts' tokens, summed
        estimate, parts = conn.execute(text(
            "SELECT m.token_estimate, (SELECT sum(tokens) FROM parts WHERE message_id = m.id) FROM messages m "
            "WHERE m.session_id = :s AND m.role = 'assistant'"), {"s": together.session_id}).one()
    assert estimate == parts


def test_results_answer_the_newest_response_past_an_assistant_message_without_one(store: SessionStore) -> None:
    conv = conversation(store)
    conv.user("run it")
    conv.request()
    recorded = conv.record(response([{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}], stop_reason="tool_use"))
    store.append_message(conv.session_id, "assistant", agent="not a response")  # newest, records no response
    assert conv.tool_results([{"tool_use_id": "toolu_1", "content": "done"}]).id == recorded.id
    assert [r[3] for r in _tool_rows(store, conv.session_id)] == ["completed"]
    with pytest.raises(InvalidInput):  # answered: no open call of that response is left
        conv.tool_results([{"tool_use_id": "toolu_1", "content": "again"}])


@pytest.mark.parametrize("bad", [42, {"type": "message", "role": "user", "content": []}, {"content": "x"}, "hi"])
def test_a_bad_response_writes_nothing(store: SessionStore, bad: Any) -> None:
    conv = conversation(store)
    conv.user("hi")
    before = counts(store)
    with pytest.raises(InvalidInput):
        conv.record(bad)
    assert counts(store) == before


def test_a_cut_short_tool_call_is_discarded(store: SessionStore) -> None:
    conv = conversation(store)
    conv.user("write the file")
    conv.request()
    cut = response([{"type": "text", "text": "Writing it now."}, {"type": "tool_use", "id": "toolu_cut", "name": "bash", "input": {}}], stop_reason="max_tokens")
    conv.record(cut)
    assert [p.type for p in store.messages(conv.session_id)[-1].parts] == ["text"]
    assert conv.pending_calls() == []
    kwargs = conv.request()  # a reactive compaction was due; the turn goes on from a user message
    assert conv.last.compacted or conv.last.stalled
    assert kwargs["messages"][-1]["role"] == "user"
    assert all(b.get("id") != "toolu_cut" for m in kwargs["messages"] for b in m["content"])


# -- rendering ---------------------------------------------------------------------------------------------


def test_cache_breakpoints(store: SessionStore) -> None:
    conv = conversation(store, policy=ContextPolicy(cache_ttl="1h"))
    conv.user("hi")
    kwargs = conv.request()
    assert breakpoints(kwargs) == 2  # system, conversation end
    assert kwargs["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert kwargs["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    conv.record(response([{"type": "text", "text": "hello"}]))
    store.compact(conv.session_id, trigger="manual")
    conv.user("next")
    kwargs = conv.request()
    assert breakpoints(kwargs) == 3  # and the summary
    summary = next(m for m in kwargs["messages"] if m["role"] == "assistant")
    assert summary["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def first_cleared(kwargs: dict[str, Any]) -> int:
    return next(i for i, m in enumerate(kwargs["messages"]) if any(
        b.get("type") == "tool_result" and b["content"] == "[Old tool result content cleared]" for b in m["content"]))


def _tool_turn(conv, api, client_, output: str) -> None:
    message = client_.beta.messages.create(**conv.request())
    conv.record(message)
    conv.tool_results([{"tool_use_id": c["id"], "content": output} for c in conv.pending_calls()])


def _thinking_script(turns: int) -> list[Reply]:
    replies = []
    for i in range(turns):
        replies.append(Reply([{"type": "thinking", "thinking": f"step {i}"}, {"type": "text", "text": f"Reading part {i}."},
                              {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "read_file", "input": {"path": f"f{i}.py"}}]))
    replies.append(Reply([{"type": "thinking", "thinking": "done"}, {"type": "text", "text": "All read."}]))
    return replies


@pytest.mark.parametrize("mismatch", ["strip", "drop_block"])
def test_a_prune_invalidates_the_thinking_after_it_and_nothing_is_refused(store: SessionStore, mismatch: str) -> None:
    policy = ContextPolicy(prune="after-turn", prune_protect=2_000, prune_minimum=1_000, thinking_mismatch=mismatch)
    conv = conversation(store, thinking=THINKING, policy=policy)
    more = [Reply([{"type": "thinking", "thinking": f"reply {i}"}, {"type": "text", "text": "Sure."}]) for i in range(2)]
    with FakeMessagesAPI(_thinking_script(6) + more) as api:
        sdk = client(api)
        conv.user("read every file")
        for _ in range(6):
            _tool_turn(conv, api, sdk, "x" * 4_000)
        conv.record(sdk.beta.messages.create(**conv.request()))
        conv.user("anything else?")
        conv.record(sdk.beta.messages.create(**conv.request()))
        assert conv.last.stripped == [] and conv.last.first_change is None  # append-only so far
        conv.user("and now?")  # the first turn is now older than the two protected ones
        kwargs = conv.request()  # a turn ended: after-turn prunes the old outputs, changing the prefix
        assert conv.last.pruned > 0
        assert conv.last.first_change == first_cleared(kwargs)
        conv.record(sdk.beta.messages.create(**kwargs))
        records = api.requests
    assert all(r.accepted for r in records), [r.error for r in records if not r.accepted]
    thinking_sent = [b for m in kwargs["messages"] for b in m["content"] if b["type"] == "thinking"]
    first_pruned = first_cleared(kwargs)
    if mismatch == "strip":
        assert conv.last.stripped and all(int(p.split(".")[1]) > first_pruned for p in conv.last.stripped)
        assert len(thinking_sent) == sum(1 for m in kwargs["messages"][:first_pruned] if m["role"] == "assistant")
        assert records[-1].input_transformations in (None, [])
    else:
        assert conv.last.drop_block and BINDING_BETA in kwargs["betas"]
        assert kwargs["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
        dropped = [t["path"] for t in records[-1].input_transformations]
        assert dropped == conv.last.drop_block  # brutus knew exactly which blocks the API would drop
    # before the prune point every thinking block went back as recorded
    for i, message in enumerate(kwargs["messages"][:first_pruned]):
        if message["role"] == "assistant":
            assert message["content"][0]["type"] == "thinking"


def test_an_unchanged_history_keeps_every_thinking_block(store: SessionStore) -> None:
    conv = conversation(store, thinking=THINKING, policy=ContextPolicy(prune="off"))
    with FakeMessagesAPI(_thinking_script(4)) as api:
        sdk = client(api)
        conv.user("read")
        for _ in range(4):
            _tool_turn(conv, api, sdk, "y" * 3000)
        kwargs = conv.request()
        conv.record(sdk.beta.messages.create(**kwargs))
        assert all(r.accepted for r in api.requests)
        assert api.stats.thinking_blocks_dropped == 0 and api.stats.cache_read_input_tokens > 0
    assert sum(1 for m in kwargs["messages"] for b in m["content"] if b["type"] == "thinking") == 4
    assert conv.last.stripped == [] and conv.last.first_change is None


def test_what_another_connection_writes_is_what_the_next_request_sends(store_url: str) -> None:
    """request() reuses what its last load read unchanged (``reuse_history``), so an edit another connection
    makes to a message it sent before (a text, a prune mark) must be what it sends next, and nothing it hands
    out (results, request arguments) is shared with what it reuses."""
    with SessionStore.open(store_url) as store, SessionStore.open(store_url) as other:
        conv = conversation(store, policy=ContextPolicy(prune="off"))
        store.append_messages(conv.session_id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "imported"}]}])
        conv.user("run it")
        conv.request()
        conv.record(response([{"type": "tool_use", "id": "toolu_01A", "name": "bash", "input": {"command": "x"}}], stop_reason="tool_use"))
        blocks = [{"type": "text", "text": "line 1"}]
        returned = conv.tool_results([{"tool_use_id": "toolu_01A", "content": blocks}])
        returned.metadata = {"changed": "by the caller"}
        first = conv.request()
        sent = copy.deepcopy(first)
        first["messages"][-1]["content"][0]["content"][0]["text"] = "changed by the caller"
        assert conv.request() == sent  # nothing in between: the same arguments
        imported, tool = (other.filter_compacted(conv.session_id)[i].parts[-1] for i in (0, 2))
        with other.engine.begin() as connection:
            connection.execute(
                st.P.update().where(st.P.c.id == imported.id).values(data={"text": "edited", "synthetic": False, "ignored": False})
            )
            connection.execute(st.T.update().where(st.T.c.part_id == tool.id).values(compacted_at=5))
        kwargs = conv.request()
        assert kwargs["messages"][0]["content"] == [{"type": "text", "text": "edited"}, {"type": "text", "text": "run it"}]
        assert kwargs["messages"][-1]["content"][0]["content"] == "[Old tool result content cleared]"
        fresh = store.conversation(conv.session_id, model=MODEL, system=SYSTEM, tools=TOOLS, max_tokens=4096)
        assert kwargs == fresh.request()
        assert conv.last.first_change == 0


def test_a_value_edited_to_an_equal_one_is_sent_as_written(store_url: str) -> None:
    """request() reuses an unchanged message's entry on both backends (the view reads its JSON as text), and
    only an unchanged one: ``1`` edited to ``1.0`` by another connection compares equal decoded, yet the next
    request sends the float."""
    with SessionStore.open(store_url) as store, SessionStore.open(store_url) as other:
        conv = conversation(store)
        message = conv.user([{"type": "text", "text": "run it", "weight": 1}])
        conv.request()
        entry = conv.state.loaded[message.id][1]
        conv.request()
        assert conv.state.loaded[message.id][1] is entry  # read again, reused
        edited = {KEY: {"content": [{"type": "text", "text": "run it", "weight": 1.0}]}}
        with other.engine.begin() as connection:
            connection.execute(st.M.update().where(st.M.c.id == message.id).values(metadata=edited))
        sent = conv.request()["messages"][0]["content"][0]["weight"]
        assert sent == 1 and type(sent) is float
        assert conv.state.loaded[message.id][1] is not entry


def test_each_request_hashes_what_a_fresh_render_hashes(store_url: str) -> None:
    """request() hashes again only the messages that changed since its last render (``render_messages``'
    ``last``): at every step of a loop, with an edit by another connection to an early message and a prune
    in between, its prefix hashes are those of a render from scratch."""
    with SessionStore.open(store_url) as store, SessionStore.open(store_url) as other:
        policy = ContextPolicy(prune="after-turn", prune_protect=2_000, prune_minimum=1_000)
        conv = conversation(store, thinking=THINKING, policy=policy)
        store.append_messages(conv.session_id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "imported"}]}])

        def check() -> None:
            fresh = render_messages(store.filter_compacted(conv.session_id), system=conv.state.system, tools=TOOLS)
            assert conv.state.previous == fresh.prefixes

        with FakeMessagesAPI(_thinking_script(4) + [Reply([{"type": "text", "text": "Sure."}])]) as api:
            sdk = client(api)
            conv.user("read every file")
            conv.request()
            check()
            conv.user("all of them")  # goes into the same message as the last
            for turn in range(4):
                message = sdk.beta.messages.create(**conv.request())
                check()
                assert conv.last.first_change == (0 if turn in (0, 2) else None)  # "all of them", the edit
                conv.record(message)
                conv.tool_results([{"tool_use_id": c["id"], "content": "x" * 4_000} for c in conv.pending_calls()])
                if turn == 1:  # another connection edits the first message
                    imported = other.filter_compacted(conv.session_id)[0].parts[0]
                    with other.engine.begin() as connection:
                        connection.execute(st.P.update().where(st.P.c.id == imported.id).values(data={"text": "edited"}))
            for text in ("anything else?", "and now?"):
                kwargs = conv.request()
                check()
                conv.record(sdk.beta.messages.create(**kwargs))
                conv.user(text)
            conv.request()  # a turn ended and the first is older than the two protected: after-turn prunes
            assert conv.last.pruned > 0
            check()


# -- the policy --------------------------------------------------------------------------------------------


def test_prompt_too_long_compacts_and_retries_once(store: SessionStore) -> None:
    conv = conversation(store, policy=ContextPolicy(compact_at=1.0))  # never proactive: the provider says it
    outputs = "z" * 6_000
    script = [Reply([{"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"command": f"cat {i}"}}]) for i in range(30)]
    with FakeMessagesAPI(script, context_window=12_000) as api:
        sdk = client(api)
        conv.user("cat everything")
        recovered = 0
        for _ in range(30):
            try:
                message = sdk.beta.messages.create(**conv.request())
            except anthropic.BadRequestError as exc:
                assert "prompt is too long" in str(exc)
                assert conv.recover(exc) is True
                recovered += 1
                message = sdk.beta.messages.create(**conv.request())
            conv.record(message)
            conv.tool_results([{"tool_use_id": c["id"], "content": outputs} for c in conv.pending_calls()])
        refused = [r for r in api.requests if not r.accepted]
    assert recovered >= 1 and len(refused) == recovered
    assert [c.trigger for c in store.compactions(conv.session_id) if c.status == "completed"].count("overflow") == recovered


def test_recover_says_no_to_other_errors_and_to_a_stall(store: SessionStore) -> None:
    conv = conversation(store)
    assert conv.recover(ValueError("boom")) is False
    conv.user("hi")
    too_long = anthropic.BadRequestError("prompt is too long: 300000 tokens > 200000 maximum", response=_fake_response(), body=None)
    assert conv.recover(too_long) is False  # nothing to compact: it stalls, and says so
    assert conv.last.stalled


def _fake_response() -> Any:
    import httpx2 as httpx  # the SDK's own HTTP library

    return httpx.Response(400, request=httpx.Request("POST", "http://localhost/v1/messages"))


def test_the_threshold_compacts_before_the_request(store: SessionStore) -> None:
    from brutus import ModelLimits

    conv = conversation(store, limits=ModelLimits(context=60_000, output=8_000))
    script = [Reply([{"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {}}]) for i in range(12)]
    with FakeMessagesAPI(script, context_window=60_000) as api:
        sdk = client(api)
        conv.user("go")
        peak = 0
        for _ in range(12):
            message = sdk.beta.messages.create(**conv.request())
            usage = message.usage
            peak = max(peak, usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0))
            conv.record(message)
            conv.tool_results([{"tool_use_id": c["id"], "content": "w" * 20_000} for c in conv.pending_calls()])
        assert all(r.accepted for r in api.requests)
    assert any(c.status == "completed" for c in store.compactions(conv.session_id))
    assert peak < 60_000


def test_a_compaction_that_does_not_help_is_not_retried_before_the_next_turn(store: SessionStore) -> None:
    from brutus import ModelLimits

    conv = conversation(store, limits=ModelLimits(context=1_500, output=500))  # compacts above 800 tokens
    conv.user("x " * 8_000)  # one huge turn: its summary alone is over the threshold
    conv.request()
    assert conv.last.compacted and conv.last.stalled == "the context is still over the threshold after compacting"
    for _ in range(3):
        conv.request()
        assert not conv.last.compacted
    assert [c.status for c in store.compactions(conv.session_id)] == ["completed"]
    conv.record(response([{"type": "text", "text": "ok"}]))
    conv.user("a new turn")
    conv.request()  # the next user turn may try again, once
    conv.request()
    assert not conv.last.compacted
    assert [c.status for c in store.compactions(conv.session_id)].count("completed") <= 2


def test_a_server_compaction_block_starts_the_next_requests(store: SessionStore) -> None:
    """The API compacted at a threshold: the response opens with a signed compaction block. It is recorded
    whole, and later requests start at it (nothing before it is sent), byte-identical, thinking included."""
    edits = {"context_management": {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}]},
             "betas": ["compact-2026-01-12"]}
    conv = conversation(store, thinking=THINKING, extra=edits)
    script = [Reply([{"type": "thinking", "thinking": f"t{i}"}, {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {}}]) for i in range(8)]
    script.append(Reply([{"type": "thinking", "thinking": "end"}, {"type": "text", "text": "Done."}]))
    with FakeMessagesAPI(script, context_window=200_000) as api:
        sdk = client(api)
        conv.user("go")
        compacted_at = None
        for step in range(9):
            message = sdk.beta.messages.create(**conv.request())
            conv.record(message)
            if message.content[0].type == "compaction" and compacted_at is None:
                compacted_at = step
            calls = conv.pending_calls()
            if calls:
                conv.tool_results([{"tool_use_id": c["id"], "content": "v" * 60_000} for c in calls])
        records = api.requests
    assert all(r.accepted for r in records), [r.error for r in records if not r.accepted]
    assert compacted_at is not None
    block = records[compacted_at].response["content"][0]
    after = records[compacted_at + 1].body["messages"]
    assert without_cache_control(after[0]["content"][0]) == block  # sent back first, as produced
    assert len(after) < len(records[compacted_at].body["messages"])
    assert api.stats.thinking_blocks_dropped == 0
    view = store.filter_compacted(conv.session_id)  # a completed boundary in the store too
    assert view[0].parts[0].type == "compaction" and view[1].info.summary
    newest = [r.response["content"][0] for r in records if r.response["content"][0]["type"] == "compaction"][-1]
    assert view[1].info.metadata["anthropic"]["response"]["content"][0] == newest


def test_a_prune_inside_a_tool_loop_asks_the_api_to_drop_rather_than_strip(store_url: str) -> None:
    """With thinking on, the last assistant message of a tool loop must open with its thinking block; a prune
    (here: the cache went cold mid-loop) changes its prefix, so brutus keeps the block and asks for
    ``drop_block`` instead of sending a loop without it."""
    now = [1_000_000]
    policy = ContextPolicy(prune="cold-cache", prune_protect=1_000, prune_minimum=500)
    with SessionStore.open(store_url, clock=lambda: now[0]) as store:
        conv = conversation(store, thinking=THINKING, policy=policy)
        script = _thinking_script(3) + [Reply([{"type": "thinking", "thinking": "ok"}, {"type": "text", "text": "Fine."}])]
        script += [Reply([{"type": "thinking", "thinking": "loop"}, {"type": "tool_use", "id": "toolu_L1", "name": "bash", "input": {}}]),
                   Reply([{"type": "thinking", "thinking": "after"}, {"type": "text", "text": "Done."}])]
        with FakeMessagesAPI(script) as api:
            sdk = client(api)
            conv.user("read them")
            for _ in range(3):
                _tool_turn(conv, api, sdk, "r" * 4_000)
            conv.record(sdk.beta.messages.create(**conv.request()))
            conv.user("ok?")
            conv.record(sdk.beta.messages.create(**conv.request()))
            conv.user("one more command")
            _tool_turn(conv, api, sdk, "loop output")  # the loop is open: its result is in, the next call is due
            now[0] += 6 * 60_000  # the 5-minute cache went cold while the tool ran
            kwargs = conv.request()
            assert conv.last.pruned > 0 and conv.last.stripped == []
            assert kwargs["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
            assert kwargs["messages"][-2]["content"][0]["type"] == "thinking"  # the loop still opens with it
            conv.record(sdk.beta.messages.create(**kwargs))
            assert all(r.accepted for r in api.requests), [r.error for r in api.requests if not r.accepted]
            assert [t["path"] for t in api.requests[-1].input_transformations] == conv.last.drop_block


def test_stats_give_a_live_sessions_cost_and_cache_reads(store: SessionStore) -> None:
    from brutus.db.stats_ops import session_stats

    conv = conversation(store)
    conv.user("hi")
    conv.request()
    first = conv.record(response([{"type": "text", "text": "a"}], usage={"input_tokens": 100, "output_tokens": 10,
                                  "cache_read_input_tokens": 0, "cache_creation_input_tokens": 900}))
    conv.user("again")
    conv.request()
    second = conv.record(response([{"type": "text", "text": "b"}], usage={"input_tokens": 50, "output_tokens": 10,
                                   "cache_read_input_tokens": 1_000, "cache_creation_input_tokens": 50}))
    stats = store.run(Tx(session_stats(conv.session_id), write=False))
    assert stats.cost == pytest.approx(first.cost + second.cost)
    assert stats.cost == pytest.approx((150 * 5 + 20 * 25 + 950 * 6.25 + 1_000 * 0.5) / 1e6)
    assert stats.cache_read_share == pytest.approx(round(1_000 / (150 + 1_000 + 950), 4))


def test_the_summary_request_extends_the_conversations_prefix(store: SessionStore) -> None:
    """brutus's AnthropicSummarizer inside a conversation sends what the conversation would send, the summary
    prompt after it, tools forbidden by the prompt: the same model, system, tools and messages, so it reads the
    cache."""
    from brutus import ModelLimits
    from brutus.summarizers import AnthropicSummarizer
    from brutus.summarizers.anthropic_api import NO_TOOLS

    def is_summary(request: dict) -> bool:
        return NO_TOOLS in str(request["messages"][-1]["content"][-1].get("text", ""))

    def script(request: dict) -> Reply:
        if is_summary(request):
            return Reply("We read f0..f5 with cat; next: the parser.")
        return Reply([{"type": "tool_use", "name": "bash", "input": {"command": "cat"}}])

    with FakeMessagesAPI(script, context_window=60_000) as api:
        sdk = client(api)
        conv = conversation(store, limits=ModelLimits(context=40_000, output=4_000), summarizer=AnthropicSummarizer(client=sdk))
        conv.user("cat the files")
        while not any(c.status == "completed" for c in store.compactions(conv.session_id)):
            conv.record(sdk.beta.messages.create(**conv.request()))
            conv.tool_results([{"tool_use_id": c["id"], "content": "s" * 12_000} for c in conv.pending_calls()])
        records = api.requests
    summary_call = next(r for r in records if is_summary(r.body))
    before = records[summary_call.number - 2].body  # the conversation's last request
    sent = summary_call.body
    assert sent["model"] == before["model"] and sent["system"] == before["system"] and sent["tools"] == before["tools"]
    assert without_cache_control(sent["messages"][: len(before["messages"])]) == without_cache_control(before["messages"])
    assert summary_call.usage["cache_read_input_tokens"] > 0.8 * before_total(records[summary_call.number - 2].usage)
    assert store.filter_compacted(conv.session_id)[1].parts[0].text.startswith("We read f0..f5")


def before_total(usage: dict) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def _server_script(summary: Reply | None):
    def script(request: dict) -> Reply:
        if "compaction" in request:
            return summary if summary is not None else Reply([{"type": "compaction", "content": "We read the files; next: the parser."}])
        return Reply([{"type": "thinking", "thinking": "next"}, {"type": "tool_use", "name": "bash", "input": {"command": "cat"}}])
    return script


def test_server_compaction_is_the_summary_and_goes_back_first(store: SessionStore) -> None:
    """``AnthropicServerCompaction``: the API compacts on demand; its signed block is the summary and the
    boundary, and later requests send it first, byte-identical, with thinking valid after it."""
    from brutus import ModelLimits
    from brutus.summarizers import AnthropicServerCompaction

    with FakeMessagesAPI(_server_script(None), context_window=60_000) as api:
        sdk = client(api)
        conv = conversation(store, thinking=THINKING, limits=ModelLimits(context=40_000, output=4_000),
                            summarizer=AnthropicServerCompaction(client=sdk))
        conv.user("cat the files")
        for _ in range(12):
            conv.record(sdk.beta.messages.create(**conv.request()))
            conv.tool_results([{"tool_use_id": c["id"], "content": "s" * 12_000} for c in conv.pending_calls()])
        records = api.requests
    assert all(r.accepted for r in records), [r.error for r in records if not r.accepted]
    asked = [r for r in records if "compaction" in r.body]
    assert asked and "compact-2026-09-04" in asked[0].betas
    block = asked[0].response["content"][0]
    assert block["type"] == "compaction" and block["signature"]
    done = [c for c in store.compactions(conv.session_id) if c.status == "completed"]
    assert done and done[0].fallback_used is None
    after = records[asked[0].number].body["messages"]  # the request after the compaction
    assert without_cache_control(after[0]["content"][0]) == block
    assert api.stats.thinking_blocks_dropped == 0


def test_server_compaction_without_a_summary_falls_back(store: SessionStore) -> None:
    from brutus import ModelLimits
    from brutus.summarizers import AnthropicServerCompaction

    with FakeMessagesAPI(_server_script(Reply([], stop_reason="max_tokens")), context_window=60_000) as api:
        sdk = client(api)
        conv = conversation(store, limits=ModelLimits(context=40_000, output=4_000), summarizer=AnthropicServerCompaction(client=sdk))
        conv.user("cat the files")
        while not store.compactions(conv.session_id):
            conv.record(sdk.beta.messages.create(**conv.request()))
            conv.tool_results([{"tool_use_id": c["id"], "content": "s" * 12_000} for c in conv.pending_calls()])
        conv.record(sdk.beta.messages.create(**conv.request()))
        assert all(r.accepted for r in api.requests)
    assert [c.fallback_used for c in store.compactions(conv.session_id)] == ["extractive"]


def test_a_compaction_error_from_the_api_falls_back(store: SessionStore) -> None:
    """The API refuses the compaction request (here: instructions over its 16,384-character limit, one of its
    ``compaction_*`` errors): ``SummarizerError`` inside, the extractive summary outside; nothing is lost."""
    from brutus.summarizers import AnthropicServerCompaction, SummaryRequest
    from brutus import SummarizerError

    conv = conversation(store)
    with FakeMessagesAPI(_server_script(None)) as api:
        sdk = client(api)
        conv.user("hi")
        conv.record(sdk.beta.messages.create(**conv.request()))
        conv.tool_results([{"tool_use_id": c["id"], "content": "o" * 20_000} for c in conv.pending_calls()])
        server = AnthropicServerCompaction(client=sdk).extending(conv.request())
        with pytest.raises(SummarizerError, match="HTTP 400"):
            server.summarize(SummaryRequest(history=store.filter_compacted(conv.session_id), instructions="x" * 20_000))
        result = store.compact(conv.session_id, server, instructions="x" * 20_000)
        assert result.fallback_used == "extractive"
        assert not api.requests[-1].accepted


@pytest.mark.parametrize("bad", [dict(model=""), dict(system=42), dict(tools={"name": "x"}), dict(thinking="on"),
                                 dict(policy={"prune": "off"})], ids=["model", "system", "tools", "thinking", "policy"])
def test_bad_settings_are_refused_up_front(store: SessionStore, bad: dict[str, Any]) -> None:
    session = store.create_session()
    settings = {"model": MODEL, **bad}
    with pytest.raises(InvalidInput):
        store.conversation(session.id, **settings)


def test_a_conversation_on_a_missing_session_is_refused(store: SessionStore) -> None:
    from brutus import NotFound

    with pytest.raises(NotFound):
        store.conversation("ses_nothere", model=MODEL)
