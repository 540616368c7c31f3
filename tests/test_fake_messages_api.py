"""``brutus.testing.FakeMessagesAPI`` driven through the real ``anthropic`` SDK client, sync and async.

Every refusal is checked by exception type and message; token counts against the documented rule
(ceil(UTF-8 bytes of canonical JSON / 4) per block), recomputed here independently; time only moves through
the injected clock.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from brutus.testing import FakeMessagesAPI, Reply, RequestRecord, Stats

MODEL = "claude-fable-5-1"
BINDING = "thinking-binding-controls-2026-08-01"
ON_DEMAND = "compact-2026-09-04"
THRESHOLD = "compact-2026-01-12"
ADAPTIVE = {"type": "adaptive"}
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


class Clock:
    now = 1_000.0  # seconds; tests move it, never sleep

    def __call__(self) -> float:
        return self.now


def clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if k != "cache_control" and v is not None}
    return [clean(v) for v in value] if isinstance(value, list) else value


def tokens(block: dict[str, Any]) -> int:
    """The documented count, recomputed: no cache_control, no null, no signature/data."""
    opaque = {"thinking": "signature", "redacted_thinking": "data", "compaction": "signature"}.get(block.get("type"))
    block = {k: v for k, v in block.items() if k != opaque}
    text = json.dumps(clean(block), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return math.ceil(len(text.encode("utf-8")) / 4)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def dump(blocks: Any) -> list[dict[str, Any]]:
    """Response blocks as the SDK sends them back."""
    return [b.to_dict() for b in blocks]


def message_of(error: anthropic.APIStatusError) -> str:
    return error.body["error"]["message"]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(clock: Clock) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(clock=clock) as fake:
        yield fake


@pytest.fixture
def client(api: FakeMessagesAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.base_url, api_key="test", max_retries=0)


def create(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    kwargs.setdefault("max_tokens", 2048)
    return client.beta.messages.create(model=MODEL, messages=messages, **kwargs)


def refused(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, messages, **kwargs)
    assert caught.value.status_code == 400
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "invalid_request_error"
    assert caught.value.body["request_id"].startswith("req_")
    return message_of(caught.value)


def scripted(clock: Clock, script: Any, **kwargs: Any) -> tuple[FakeMessagesAPI, anthropic.Anthropic]:
    fake = FakeMessagesAPI(script, clock=clock, **kwargs).start()
    return fake, anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)


def test_plain_and_beta_clients_get_a_filled_in_message(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    plain = client.messages.create(model="claude-opus-5", max_tokens=64, messages=[user("Hello")])
    assert plain.type == "message" and plain.role == "assistant" and plain.model == "claude-opus-5"
    assert plain.id.startswith("msg_") and plain.stop_reason == "end_turn"
    assert [b.text for b in plain.content] == ["OK"]
    assert plain.usage.input_tokens == tokens(text("Hello")) and plain.usage.output_tokens == tokens(text("OK"))

    beta = create(client, [user("Hello")], system="Be brief.")
    assert beta.usage.input_tokens == tokens(text("Be brief.")) + tokens(text("Hello"))
    assert [(i.type, i.input_tokens) for i in beta.usage.iterations] == [("message", beta.usage.input_tokens)]
    assert beta.input_transformations is None  # only with the binding beta

    records = api.requests
    assert [r.number for r in records] == [1, 2] and all(isinstance(r, RequestRecord) and r.accepted for r in records)
    assert records[1].body["system"] == "Be brief." and records[1].usage["input_tokens"] == beta.usage.input_tokens
    assert api.stats == Stats(requests=2, accepted=2, refused=0,
                              input_tokens=plain.usage.input_tokens + beta.usage.input_tokens,
                              output_tokens=2 * tokens(text("OK")))


def test_scripts_fill_in_ids_and_stop_reasons_and_can_fail(clock: Clock) -> None:
    def by_request(request: dict[str, Any]) -> Reply:
        return Reply(f"you said {request['messages'][-1]['content']}")

    fake, client = scripted(clock, [
        Reply([{"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}]),
        by_request,
        Reply.error(529, "overloaded_error", "Overloaded"),
    ])
    with fake:
        call = create(client, [user("Weather?")], tools=[WEATHER])
        assert call.stop_reason == "tool_use" and call.content[0].id.startswith("toolu_")
        answer = create(client, [user("Weather?"), assistant(dump(call.content)),
                                 user([{"type": "tool_result", "tool_use_id": call.content[0].id, "content": "20C"}]),
                                 assistant("Warm."), user("thanks")], tools=[WEATHER])
        assert answer.content[0].text == "you said thanks"
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            create(client, [user("again")])
        assert overloaded.value.status_code == 529 and message_of(overloaded.value) == "Overloaded"
        with pytest.raises(anthropic.InternalServerError) as exhausted:
            create(client, [user("once more")])
        assert "no reply left for request #4" in message_of(exhausted.value)
        assert [r.status for r in fake.requests] == [200, 200, 529, 500]
        assert fake.stats.refused == 2

    broken, client = scripted(clock, [Reply(["not a block"])])  # type: ignore[list-item]
    with broken:
        with pytest.raises(anthropic.InternalServerError) as caught:
            create(client, [user("hi")])
        assert message_of(caught.value).startswith("FakeMessagesAPI internal error: ValueError")


@pytest.mark.parametrize(("messages", "kwargs", "expected"), [
    ([], {}, "messages: List should have at least 1 item after validation, not 0"),
    ([assistant("Hi")], {}, 'messages: first message must use the "user" role'),
    ([user("a"), user("b")], {}, 'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'),
    ([user("a"), assistant("b"), assistant("c")], {}, 'messages: roles must alternate between "user" and "assistant", but found multiple "assistant" roles in a row'),
    ([user("a")], {"max_tokens": -1}, "max_tokens: Input should be greater than or equal to 0"),
    ([user([{"type": "picture", "url": "x"}])], {}, "messages.0.content.0: Input tag 'picture' found using 'type' does not match"),
    ([user([text("")])], {}, "messages: text content blocks must be non-empty"),
    ([user([text("  ")])], {}, "messages: text content blocks must contain non-whitespace text"),
    ([user([{"type": "text", "text": "a", "colour": "red"}])], {}, "messages.0.content.0.text.colour: Extra inputs are not permitted"),
    ([user("a"), assistant([]), user("b")], {}, "messages.1: all messages must have non-empty content except for the optional final assistant message"),
    ([user("a")], {"extra_body": {"temprature": 1}}, "temprature: Extra inputs are not permitted"),
    ([user("a")], {"extra_body": {"stream": "yes"}}, "stream: Input should be a valid boolean"),
    ([{"role": "system", "content": "x"}, user("a")], {}, "messages.0: a `system` message cannot be the first message"),
    ([user("a"), {"role": "system", "content": "Be terse."}, user("b")], {}, 'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'),
])
def test_malformed_requests_are_refused(client: anthropic.Anthropic, messages: list[Any], kwargs: dict[str, Any], expected: str) -> None:
    assert refused(client, messages, **kwargs).startswith(expected)


def test_a_mid_conversation_system_message_is_part_of_the_prompt(client: anthropic.Anthropic) -> None:
    note = {"role": "system", "content": "The workspace is now read-only."}
    reply = create(client, [user("a"), assistant("b"), note, user("c")])
    assert reply.usage.input_tokens == sum(tokens(text(t)) for t in ("a", "b", "The workspace is now read-only.", "c"))


def test_every_refusal_is_recorded_and_consumes_no_script_item(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply("only one")])
    with fake:
        refused(client, [user("a"), user("b")])
        assert create(client, [user("a")]).content[0].text == "only one"
        first = fake.requests[0]
        assert (first.accepted, first.status, first.error_type, first.response, first.usage) == (False, 400, "invalid_request_error", None, None)
        assert first.error.startswith("messages: roles must alternate")


def _tool_call(tool_id: str = "toolu_01") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": "Paris"}}


def _result(tool_id: str = "toolu_01") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "20C"}


PAIRING = [
    ([assistant([_tool_call("toolu_01"), _tool_call("toolu_02")]), user([_result("toolu_01"), text("and?")])],
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_02. Each `tool_use` "
     "block must have a corresponding `tool_result` block in the next message."),
    ([assistant([_tool_call()])], "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "toolu_01. Each `tool_use` block must have a corresponding `tool_result` block in the next message."),
    ([assistant([_tool_call()]), user([text("here:"), _result()])],
     "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. Messages following `tool_use` "
     "blocks must begin with a matching number of `tool_result` blocks."),
    ([assistant("Let me look."), user([_result("toolu_99")])],
     "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_99. Each `tool_result` block "
     "must have a corresponding `tool_use` block in the previous message."),
]


@pytest.mark.parametrize(("turns", "expected"), PAIRING, ids=["missing", "unanswered", "not-first", "orphan"])
def test_tool_use_and_tool_result_must_pair_up(client: anthropic.Anthropic, turns: list[Any], expected: str) -> None:
    assert refused(client, [user("Weather?"), *turns], tools=[WEATHER]) == expected


def test_server_tool_use_is_paired_inside_its_own_message(client: anthropic.Anthropic) -> None:
    searched = assistant([{"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "x"}},
                          {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
                          text("Found nothing.")])
    assert create(client, [user("Search x"), searched, user("ok")]).stop_reason == "end_turn"


def test_a_prompt_over_the_context_window_is_refused_with_its_token_count(clock: Clock) -> None:
    fake, client = scripted(clock, None, context_window=100)
    with fake:
        fits = "x" * (4 * 100 - len(json.dumps(text(""), separators=(",", ":"))))
        assert create(client, [user(fits)]).usage.input_tokens == 100
        over = fits + "yy"
        assert refused(client, [user(over)]) == f"prompt is too long: {tokens(text(over))} tokens > 100 maximum"


def _thinking_reply(thought: str = "Let me think.", answer: str = "Hi!") -> Reply:
    return Reply([{"type": "thinking", "thinking": thought}, text(answer)])


def test_a_thinking_block_sent_back_unchanged_is_accepted(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply(), _thinking_reply("More.", "Sure."), Reply("Done.")])
    with fake:
        history = [user("Hello")]
        first = create(client, history, system="Be brief.", thinking=ADAPTIVE, betas=[BINDING])
        assert first.content[0].type == "thinking" and first.content[0].signature
        history += [assistant(first.content), user("And then?")]  # the SDK's own objects, round-tripped
        second = create(client, history, system="Be brief.", thinking=ADAPTIVE, betas=[BINDING])
        assert second.input_transformations == []
        # Moving a cache breakpoint is not an edit; neither is a parameter outside system/tools/messages.
        history += [assistant(dump(second.content)), user([{"type": "text", "text": "Why?", "cache_control": {"type": "ephemeral"}}])]
        third = create(client, history, system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
                       thinking=ADAPTIVE, betas=[BINDING], max_tokens=999, metadata={"user_id": "u1"})
        assert third.content[0].text == "Done." and third.input_transformations == []


def test_an_edit_before_a_thinking_block_is_refused(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply()])
    with fake:
        first = create(client, [user("Hello")], system="Be brief.", thinking=ADAPTIVE)
        kept = assistant(dump(first.content))
        edited = refused(client, [user("Hello!"), kept, user("next")], system="Be brief.", thinking=ADAPTIVE)
        assert edited == (
            "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different "
            'conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block". '
            "That setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header. "
            "The first block that differs from when the block was created is `messages.0.content.0`.")
        new_system = refused(client, [user("Hello"), kept, user("next")], system="Be very brief.", betas=[BINDING],
                             thinking={"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}})
        assert new_system.endswith('to "drop_block". The `system` prompt differs from when the block was created.')
        new_tool = refused(client, [user("Hello"), kept, user("next")], system="Be brief.", tools=[WEATHER])
        assert new_tool.endswith("The `tools` list differs from when the block was created.")
        injected = refused(client, [user([text("Hello"), text("(reminder)")]), kept, user("next")], system="Be brief.")
        assert injected.endswith("New content that was not there when the block was created starts at `messages.0.content.1`.")


def test_tampered_or_edited_thinking_is_always_refused(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply()])
    with fake:
        first = create(client, [user("Hello")], thinking=ADAPTIVE)
        block = first.content[0].to_dict()
        forged = dict(block, signature=block["signature"][:-4] + "0000")
        assert refused(client, [user("Hello"), assistant([forged, text("Hi!")]), user("next")], thinking=DROP,
                       betas=[BINDING]) == "messages.1.content.0: Invalid `signature` in `thinking` block"
        rewritten = dict(block, thinking="I planned something else.")
        assert refused(client, [user("Hello"), assistant([rewritten, text("Hi!")]), user("next")], thinking=ADAPTIVE) == (
            "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
            "modified. These blocks must remain as they were in the original response.")
        empty = dict(block, signature="")
        assert refused(client, [user("Hello"), assistant([empty, text("Hi!")]), user("next")]) == (
            "messages.1.content.0: Invalid `signature` in `thinking` block")


def test_drop_block_with_the_beta_drops_the_failing_blocks_and_reports_them(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply("One.", "A"), Reply([{"type": "thinking", "thinking": "Two."},
                                                                        {"type": "redacted_thinking"}, text("B")]),
                                    Reply("C"), Reply("D")])
    with fake:
        history = [user("Hello")]
        first = create(client, history, thinking=ADAPTIVE)
        history += [assistant(dump(first.content)), user("More")]
        second = create(client, history, thinking=ADAPTIVE)
        assert second.content[1].type == "redacted_thinking" and second.content[1].data
        history += [assistant(dump(second.content)), user("Last")]
        history[0] = user("Hello, edited")  # client-side rewrite of the first turn

        without_beta = refused(client, history, thinking=DROP)
        assert without_beta == "thinking.adaptive.block_binding: Extra inputs are not permitted"

        third = create(client, history, thinking=DROP, betas=[BINDING])
        assert [t.to_dict() for t in third.input_transformations] == [
            {"type": "thinking_dropped", "path": path, "reason": "prefix_binding_mismatch"}
            for path in ("messages.1.content.0", "messages.3.content.0", "messages.3.content.1")]
        sent = [text("Hello, edited"), text("A"), text("More"), text("B"), text("Last")]
        assert third.usage.input_tokens == sum(tokens(b) for b in sent)  # dropped blocks are not billed
        assert fake.stats.thinking_blocks_dropped == 3
        assert fake.requests[-1].input_transformations == [t.to_dict() for t in third.input_transformations]

        # Thinking produced after the edit is bound to the edited history: it stays valid.
        history += [assistant(dump(third.content)), user("Again")]
        fourth = create(client, history, thinking=DROP, betas=[BINDING])
        assert len(fourth.input_transformations) == 3


def test_thinking_blocks_must_stay_an_unbroken_run(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply("1", "a"), _thinking_reply("2", "b"), _thinking_reply("3", "c"),
                                    Reply("ok"), Reply("ok")])
    with fake:
        history = [user("q1")]
        for question in ("q2", "q3", "q4"):
            reply = create(client, history, thinking=ADAPTIVE)
            history += [assistant(dump(reply.content)), user(question)]
        gap = copy.deepcopy(history)
        gap[3]["content"] = gap[3]["content"][1:]  # the middle thinking block removed, later ones kept
        assert refused(client, gap, thinking=ADAPTIVE).endswith(
            "An earlier thinking block that preceded this one when it was created is missing from this request or out of order.")
        oldest_first = copy.deepcopy(history)
        oldest_first[1]["content"] = oldest_first[1]["content"][1:]  # removed from the start: valid
        assert create(client, oldest_first, thinking=ADAPTIVE).content[0].text == "ok"
        assert create(client, history, thinking=ADAPTIVE).content[0].text == "ok"


def test_a_tool_loop_with_thinking_must_open_with_the_thinking_block(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply([{"type": "thinking", "thinking": "Need weather."}, _tool_call("toolu_01")]),
                                    Reply("Warm today."), Reply([_tool_call("toolu_02")]), Reply("Warm both days.")])
    with fake:
        history = [user("Weather today and tomorrow?")]
        call = create(client, history, thinking=ADAPTIVE, tools=[WEATHER])
        history += [assistant(dump(call.content)), user([_result("toolu_01")])]
        stripped = history[:1] + [assistant([_tool_call("toolu_01")])] + history[2:]
        assert refused(client, stripped, thinking=ADAPTIVE, tools=[WEATHER]) == (
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
            "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
            "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
            "previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
            "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
        assert create(client, stripped, tools=[WEATHER]).content[0].text == "Warm today."  # thinking off: no such rule
        # Later messages of the loop need no thinking block of their own (no interleaved thinking).
        second = create(client, history, thinking=ADAPTIVE, tools=[WEATHER])
        history += [assistant(dump(second.content)), user([_result("toolu_02")])]
        assert create(client, history, thinking=ADAPTIVE, tools=[WEATHER]).content[0].text == "Warm both days."


def test_a_growing_conversation_reads_the_previous_prefix_and_writes_the_rest(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply("First answer."), Reply("Second answer.")])
    with fake:
        system = "You review code." * 20
        history = [user("Review a.py")]
        first = create(client, history, system=system, cache_control={"type": "ephemeral"})
        whole = tokens(text(system)) + tokens(text("Review a.py"))
        assert (first.usage.cache_read_input_tokens, first.usage.cache_creation_input_tokens, first.usage.input_tokens) == (0, whole, 0)
        assert first.usage.cache_creation.ephemeral_5m_input_tokens == whole
        clock.now += 120
        history += [assistant("First answer."), user("Now b.py")]
        second = create(client, history, system=system, cache_control={"type": "ephemeral"})
        added = tokens(text("First answer.")) + tokens(text("Now b.py"))
        assert (second.usage.cache_read_input_tokens, second.usage.cache_creation_input_tokens, second.usage.input_tokens) == (whole, added, 0)
        assert fake.stats.cache_read_input_tokens == whole and fake.stats.cache_creation_input_tokens == whole + added


def test_cache_entries_expire_on_the_injected_clock_and_reads_refresh_them(clock: Clock) -> None:
    fake, client = scripted(clock, None)
    with fake:
        system = [{"type": "text", "text": "Long instructions. " * 30, "cache_control": {"type": "ephemeral"}}]
        cached = tokens(system[0])

        def read(question: str) -> int:
            return create(client, [user(question)], system=system).usage.cache_read_input_tokens

        assert read("q1") == 0  # written at t=1000, lives until 1300
        clock.now += 200
        assert read("q2") == cached  # read at 1200: refreshed until 1500
        clock.now += 250
        assert read("q3") == cached  # 1450: still alive thanks to the refresh
        clock.now += 301
        assert read("q4") == 0  # 1751: expired; written again

        hour = [{"type": "text", "text": "Stable tools manual. " * 30, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
        first = create(client, [user("q5")], system=hour)
        assert first.usage.cache_creation.ephemeral_1h_input_tokens == tokens(hour[0])
        clock.now += 3000
        assert create(client, [user("q6")], system=hour).usage.cache_read_input_tokens == tokens(hour[0])
        clock.now += 3601
        assert create(client, [user("q7")], system=hour).usage.cache_read_input_tokens == 0


def test_the_lookback_window_is_20_positions_with_tool_runs_counting_once(client: anthropic.Anthropic) -> None:
    blocks = [text(f"block {n}") for n in range(1, 36)]
    auto = {"type": "ephemeral"}
    upto = [sum(tokens(b) for b in blocks[:n]) for n in range(36)]
    # The docs' example: turn 1 writes at block 10, turn 2 (15 blocks) finds it, turn 3 (35 blocks) does not.
    assert create(client, [user(blocks[:10])], cache_control=auto).usage.cache_creation_input_tokens == upto[10]
    second = create(client, [user(blocks[:15])], cache_control=auto).usage
    assert (second.cache_read_input_tokens, second.cache_creation_input_tokens) == (upto[10], upto[15] - upto[10])
    third = create(client, [user(blocks[:35])], cache_control=auto).usage
    assert (third.cache_read_input_tokens, third.cache_creation_input_tokens) == (0, upto[35])

    # 25 parallel tool calls and their 25 results are two positions, not fifty.
    calls = [_tool_call(f"toolu_{n:02d}") for n in range(25)]
    results = [_result(f"toolu_{n:02d}") for n in range(25)]
    opening = [user(blocks[:5])]
    create(client, opening, tools=[WEATHER], cache_control=auto)
    loop = create(client, [*opening, assistant(calls), user(results)], tools=[WEATHER], cache_control=auto).usage
    assert loop.cache_read_input_tokens == tokens(WEATHER) + upto[5]


def test_mixed_ttls_split_the_cache_writes(client: anthropic.Anthropic) -> None:
    system = [{"type": "text", "text": "A" * 400, "cache_control": {"type": "ephemeral", "ttl": "1h"}},
              {"type": "text", "text": "B" * 400, "cache_control": {"type": "ephemeral"}}]
    usage = create(client, [user("q")], system=system).usage
    assert usage.cache_creation.ephemeral_1h_input_tokens == tokens(system[0])
    assert usage.cache_creation.ephemeral_5m_input_tokens == tokens(system[1])
    assert usage.cache_creation_input_tokens == tokens(system[0]) + tokens(system[1])
    assert usage.input_tokens == tokens(text("q"))


def test_more_than_four_breakpoints_and_a_1h_after_a_5m_are_refused(client: anthropic.Anthropic) -> None:
    marked = [{"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    assert refused(client, [user(marked)]) == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    assert refused(client, [user(marked[:4])], cache_control={"type": "ephemeral", "ttl": "1h"}).startswith(
        "cache_control: the top-level `cache_control` (ttl='1h') targets `messages.0.content.3`")
    fifth = [user(marked[:3] + [text("tail")])]
    create(client, fifth, cache_control={"type": "ephemeral"})  # the automatic breakpoint is the 4th
    assert refused(client, [user(marked[:4] + [text("tail")])], cache_control={"type": "ephemeral"}) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5.")
    late_hour = [text("a") | {"cache_control": {"type": "ephemeral"}},
                 text("b") | {"cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert refused(client, [user(late_hour)]) == (
        "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block.")


def test_max_tokens_zero_prewarms_the_cache_without_asking_the_script(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply("real answer")])
    with fake:
        system = [{"type": "text", "text": "Expert. " * 50, "cache_control": {"type": "ephemeral"}}]
        warm = client.messages.create(model=MODEL, max_tokens=0, system=system, messages=[user("warmup")])
        assert (warm.content, warm.stop_reason, warm.usage.output_tokens) == ([], "max_tokens", 0)
        assert warm.usage.cache_creation_input_tokens == tokens(system[0])
        real = client.messages.create(model=MODEL, max_tokens=100, system=system, messages=[user("Question")])
        assert real.content[0].text == "real answer" and real.usage.cache_read_input_tokens == tokens(system[0])


def test_on_demand_compaction_returns_one_signed_block_that_round_trips(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply("Entities: Recipe, Ingredient."), Reply("Fields: title, servings.")])
    with fake:
        history = [user("Name the entities."), assistant("Recipe and Ingredient."), user("Fields for Recipe?")]
        summary = create(client, history, betas=[ON_DEMAND], compaction={"type": "summarize"})
        assert summary.stop_reason == "compaction" and len(summary.content) == 1
        block = summary.content[0]
        assert (block.type, block.content) == ("compaction", "Entities: Recipe, Ingredient.") and block.signature
        assert (summary.usage.input_tokens, summary.usage.output_tokens) == (0, 0)
        [iteration] = summary.usage.iterations
        assert iteration.type == "compaction"
        assert iteration.input_tokens == sum(tokens(text(t)) for t in ("Name the entities.", "Recipe and Ingredient.", "Fields for Recipe?"))
        assert iteration.output_tokens == tokens(block.to_dict())

        swapped = [assistant(summary.content), user("Fields for Recipe?")]
        answer = create(client, swapped, betas=[ON_DEMAND])
        assert answer.content[0].text == "Fields: title, servings."
        assert answer.usage.input_tokens == tokens(block.to_dict()) + tokens(text("Fields for Recipe?"))
        assert fake.stats.compactions == 1

        with pytest.raises(anthropic.BadRequestError) as tampered:
            create(client, [assistant([dict(block.to_dict(), content="A kinder summary.")]), user("Fields?")], betas=[ON_DEMAND])
        assert tampered.value.body["error"]["details"] == {"error_code": "compaction_content_mismatch"}
        with pytest.raises(anthropic.BadRequestError) as forged:
            create(client, [assistant([dict(block.to_dict(), signature="EuYBCkQY")]), user("Fields?")], betas=[ON_DEMAND])
        assert forged.value.body["error"]["details"] == {"error_code": "compaction_signature_invalid"}
        with pytest.raises(anthropic.BadRequestError) as misplaced:
            create(client, [user("Name the entities."), assistant(summary.content), user("Fields?")], betas=[ON_DEMAND])
        assert misplaced.value.body["error"]["details"] == {"error_code": "compaction_block_misplaced"}
        assert message_of(misplaced.value).startswith("messages.1.content.0: Summarized messages remain in front of")
        assert refused(client, swapped).startswith("messages.0.content.0: Input tag 'compaction' found using 'type'")


def test_on_demand_compaction_refuses_what_the_docs_refuse(client: anthropic.Anthropic) -> None:
    history = [user("Hello")]
    assert refused(client, history, compaction={"type": "summarize"}) == (
        "compaction: the `compaction` parameter requires anthropic-beta: compact-2026-09-04")
    assert refused(client, history, betas=[ON_DEMAND], compaction={"type": "summarize"}, stop_sequences=["END"]) == (
        "`stop_sequences` cannot be used with `compaction`")
    assert refused(client, history, betas=[ON_DEMAND, THRESHOLD], compaction={"type": "summarize"},
                   context_management={"edits": [{"type": "compact_20260112"}]}) == (
        "`compaction` cannot be combined with `context_management`")


def test_kept_thinking_stays_valid_after_on_demand_compaction(clock: Clock) -> None:
    fake, client = scripted(clock, [_thinking_reply("t1", "Entities."), _thinking_reply("t2", "March 17."),
                                    Reply("Summary of turn one."), Reply("Release on the 18th.")])
    betas = [ON_DEMAND, BINDING]
    error_mode = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
    with fake:
        history = [user("Entities?")]
        first = create(client, history, system="Plan.", thinking=error_mode, betas=betas)
        history += [assistant(dump(first.content)), user("When does testing end?")]
        second = create(client, history, system="Plan.", thinking=error_mode, betas=betas)
        history.append(assistant(dump(second.content)))
        summary = create(client, history[:2], system="Plan.", thinking=error_mode, betas=betas, compaction={"type": "summarize"})
        swapped = [assistant(dump(summary.content)), *history[2:], user("Release day?")]
        third = create(client, swapped, system="Plan.", thinking=error_mode, betas=betas)
        assert third.input_transformations == [] and third.content[0].text == "Release on the 18th."
        assert refused(client, swapped, system="Plan again.", thinking=error_mode, betas=betas).startswith(
            "messages.2.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation.")


def test_threshold_compaction_starts_the_response_and_restarts_the_context(clock: Clock) -> None:
    fake, client = scripted(clock, [Reply("Continuing from the summary."), Reply("Next."), Reply("Paused.")])
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    with fake:
        big = "log line\n" * 25_000
        history = [user(big)]
        response = create(client, history, betas=[THRESHOLD], context_management={"edits": [edit]})
        leading = response.content[0]
        assert leading.type == "compaction" and leading.signature and response.content[1].text == "Continuing from the summary."
        assert [i.type for i in response.usage.iterations] == ["compaction", "message"]
        assert response.usage.iterations[0].input_tokens == tokens(text(big))
        assert response.usage.input_tokens == tokens(leading.to_dict())  # the model read the summary only
        assert response.context_management.applied_edits == []

        history += [assistant(dump(response.content)), user("Add error handling")]
        after = create(client, history, betas=[THRESHOLD], context_management={"edits": [edit]})
        assert [i.type for i in after.usage.iterations] == ["message"]
        read = [leading.to_dict(), text("Continuing from the summary."), text("Add error handling")]
        assert after.usage.input_tokens == sum(tokens(b) for b in read)  # everything before the block is dropped

        paused = create(client, [user(big)], betas=[THRESHOLD],
                        context_management={"edits": [edit | {"pause_after_compaction": True}]})
        assert paused.stop_reason == "compaction" and [b.type for b in paused.content] == ["compaction"]
        assert refused(client, [user("x")], betas=[THRESHOLD],
                       context_management={"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}}]}) == (
            "context_management.edits.0.trigger.value: Input should be greater than or equal to 50000")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_client_round_trips_thinking_and_gets_the_same_refusals(clock: Clock) -> None:
    with FakeMessagesAPI([_thinking_reply(), Reply("fine"), Reply("dropped")], clock=clock) as fake:
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        history = [user("Hello")]
        first = await client.beta.messages.create(model=MODEL, max_tokens=256, messages=history, thinking=ADAPTIVE, betas=[BINDING])
        history += [assistant(first.content), user("Next")]
        second = await client.beta.messages.create(model=MODEL, max_tokens=256, messages=history, thinking=ADAPTIVE, betas=[BINDING])
        assert second.content[0].text == "fine" and second.input_transformations == []
        edited = [user("Hello?"), *history[1:]]
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.beta.messages.create(model=MODEL, max_tokens=256, messages=edited, thinking=ADAPTIVE)
        assert "The block is bound to a different conversation" in message_of(caught.value)
        third = await client.beta.messages.create(model=MODEL, max_tokens=256, messages=edited, thinking=DROP, betas=[BINDING])
        assert [t.path for t in third.input_transformations] == ["messages.1.content.0"]
        await client.close()
        assert [r.status for r in fake.requests] == [200, 200, 400, 200]
        assert fake.requests[0].betas == (BINDING,)


def test_clearing_no_thinking_is_a_no_op_and_other_context_edits_are_not_simulated(client: anthropic.Anthropic) -> None:
    """Claude Code sends ``clear_thinking_20251015`` with ``keep: "all"``: it clears nothing, so it is accepted."""
    betas = ["context-management-2025-06-27"]
    keep_all = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    reply = client.beta.messages.create(model="claude-fable-5-1", max_tokens=64, messages=[user("a")], betas=betas,
                                        context_management=keep_all)
    assert reply.context_management.applied_edits == []
    clearing = {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]}
    with pytest.raises(anthropic.BadRequestError, match="context editing strategy 'clear_thinking_20251015' is not simulated"):
        client.beta.messages.create(model="claude-fable-5-1", max_tokens=64, messages=[user("a")], betas=betas,
                                    context_management=clearing)
