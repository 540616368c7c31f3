"""Stateful property test: random sequences of appends, tool transitions (valid and not), finishes, prunes,
compactions, hand-written compaction pairs and reloads, run against the store and against a plain in-memory
model of the session (a list of ``MessageWithParts``). After every step the full history, and the view
(``brutus.history.filter_compacted`` over the model), must be the same in both; at the end of each run
``integrity_problems`` is empty. SQLite and PostgreSQL.

The model applies each operation itself. For prune and compaction it asks the pure rules the store is
specified by (``brutus.pruning.prune``, ``filter_compacted``, ``context_size``, the stall rule, the fallbacks)
what should happen, then checks the store did exactly that.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from brutus import CompactionStalled, InvalidInput, SessionStore
from brutus.compaction.plan import ended_turn, post_tokens, stall_reason
from brutus.summarizers.fallbacks import summarize_with_fallbacks
from brutus.db.compaction_ops import CONTINUE_TEXT
from brutus.history import filter_compacted
from brutus.models import (
    CompactionConfig,
    CompactionPart,
    Message,
    MessageTime,
    MessageWithParts,
    ReasoningPart,
    TextPart,
    TokenCounts,
    ToolPart,
    ToolState,
)
from brutus.estimates import context_size, has_conversation_messages
from brutus.pruning import prune as pure_prune
from brutus.summarizers import Summary, SummaryRequest
from brutus.toolstate import TRANSITIONS

from integrity import integrity_problems

pytestmark = pytest.mark.slow

CONFIG = CompactionConfig(prune_protect=300, prune_minimum=100)  # small: short runs reach both thresholds
TEXTS = st.sampled_from(["hi", "fix the bug in sync.py", "", "nul \x00 and lone \ud800 and \ue000", "z" * 3000])
SIZES = st.sampled_from([0, 400, 4_000, 12_000])
PICK = st.integers(0, 10**6)
STATUSES = ["pending", "running", "completed", "error"]
SEEN: Counter[str] = Counter()  # which branches the runs reached (the test requires the interesting ones)


def event(name: str) -> None:
    SEEN[name] += 1


class ScriptedSummarizer:
    """Answers by ``mode``: a short text, a long one (the compaction stalls), an empty one or an error (the
    store falls back). Records the requests it got."""

    def __init__(self, mode: str, n: int) -> None:
        self.mode, self.n = mode, n
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        if self.mode == "raise":
            raise RuntimeError("provider down")
        text = {"short": f"summary #{self.n}", "long": "w" * 40_000, "empty": "  "}[self.mode]
        return Summary(text=text, model="fake-model", tokens=TokenCounts(input=70, output=7), cost=0.002)


def _norm_part(part: Any) -> dict[str, Any]:
    if part.type == "tool":
        state = part.state
        data = part.model_dump(exclude={"state"})
        data["state"] = {
            "status": state.status,
            "input": state.input,
            "output": state.output,
            "error": state.error,
            "title": state.title,
            "metadata": state.metadata,
            "compacted": bool(state.time.compacted),
        }
        return data
    return part.model_dump(exclude={"time"})


def norm(history: list[MessageWithParts]) -> list[dict[str, Any]]:
    """A history without the clock's values (the model does not predict times, only whether a part is pruned)."""
    return [{"info": m.info.model_dump(exclude={"time"}), "parts": [_norm_part(p) for p in m.parts]} for m in history]


def as_loaded_view(history: list[MessageWithParts]) -> list[MessageWithParts]:
    """The model's view as the store loads it: pruned outputs are not read."""
    view = copy.deepcopy(filter_compacted(history))
    for message in view:
        for part in message.parts:
            if part.type == "tool" and part.state.time.compacted:
                part.state.output = None
    return view


class SessionMachine(RuleBasedStateMachine):
    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.store = SessionStore.open(self.url, auto_migrate=False)
        self.session_id = self.store.create_session(title="stateful").id
        self.history: list[MessageWithParts] = []
        self.last_compaction_summary_seq: int | None = None  # of the newest compaction store.compact completed
        self.compactions = 0

    def teardown(self) -> None:
        try:
            assert integrity_problems(self.store, [self.session_id]) == []
        finally:
            self.store.close()

    # -- helpers ------------------------------------------------------------------------------------------

    def _message(self, message: Message, **fields: Any) -> MessageWithParts:
        info = Message(
            id=message.id,
            session_id=self.session_id,
            seq=len(self.history) + 1,
            role=message.role,
            time=MessageTime(created=0),
            **fields,
        )
        entry = MessageWithParts(info=info, parts=[])
        self.history.append(entry)
        return entry

    def _append_part(self, entry: MessageWithParts, data: dict[str, Any], model_part: Any) -> Any:
        stored = self.store.append_part(entry.info.id, data)
        model_part.id, model_part.session_id, model_part.message_id = stored.id, self.session_id, entry.info.id
        entry.parts.append(model_part)
        return stored

    def _pick(self, items: list[Any], pick: int) -> Any:
        return items[pick % len(items)]

    def _assistants(self) -> list[MessageWithParts]:
        return [m for m in self.history if m.info.role == "assistant"]

    def _tools(self) -> list[ToolPart]:
        return [p for m in self.history for p in m.parts if p.type == "tool"]

    # -- rules ----------------------------------------------------------------------------------------------

    @initialize(sizes=st.lists(SIZES, max_size=6))
    def some_history(self, sizes: list[int]) -> None:
        """Most runs start with a few finished turns, so prune and compaction have work from the first step."""
        self.agent_turns(sizes, "read", "completed", "stop")

    @rule(text=TEXTS)
    def append_user(self, text: str) -> None:
        entry = self._message(self.store.append_message(self.session_id, "user"))
        if text:
            self._append_part(entry, {"type": "text", "text": text}, TextPart(text=text))

    @rule(pick=PICK, any_parent=st.booleans())
    def append_assistant(self, pick: int, any_parent: bool) -> None:
        users = [m.info.id for m in self.history if m.info.role == "user"]
        parents = [m.info.id for m in self.history] if any_parent else users[-1:]
        parent = self._pick(parents, pick) if parents else None
        self._message(self.store.append_message(self.session_id, "assistant", parent_id=parent, model_id="m"), parent_id=parent, model_id="m")

    @precondition(lambda self: self.history)
    @rule(pick=PICK, text=TEXTS, kind=st.sampled_from(["text", "reasoning"]))
    def append_text(self, pick: int, text: str, kind: str) -> None:
        entry = self._pick(self.history, pick)
        data = {"type": kind, "text": text}
        self._append_part(entry, data, TextPart(text=text) if kind == "text" else ReasoningPart(text=text))

    @precondition(lambda self: any(m.info.role == "assistant" for m in self.history))
    @rule(pick=PICK, tool=st.sampled_from(["read", "bash", "skill"]), status=st.sampled_from(STATUSES), size=SIZES)
    def append_tool(self, pick: int, tool: str, status: str, size: int) -> None:
        entry = self._pick(self._assistants(), pick)
        state: dict[str, Any] = {"status": status, "input": {"path": f"f{len(self.history)}.py", "n": size}}
        if status == "completed":
            state["output"] = "o" * size
        if status == "error":
            state["error"] = "it failed"
        call = f"call_{len(self._tools())}"
        self._append_part(
            entry,
            {"type": "tool", "call_id": call, "tool": tool, "state": state},
            ToolPart(call_id=call, tool=tool, state=ToolState(**state)),
        )

    @rule(
        sizes=st.lists(SIZES, min_size=1, max_size=3),
        tool=st.sampled_from(["read", "read", "skill"]),
        status=st.sampled_from(["completed", "completed", "pending", "running"]),
        finish=st.sampled_from(["stop", "tool-calls"]),
    )
    def agent_turns(self, sizes: list[int], tool: str, status: str, finish: str) -> None:
        """Whole turns at once (a user message, a reply with a completed tool call, finished), so runs grow
        histories that prune and compaction have something to work on."""
        for size in sizes:
            self.append_user("next task")
            self.append_assistant(0, False)
            self.append_tool(len(self._assistants()) - 1, tool, status, size * 2)
            self.finish(len(self._assistants()) - 1, finish, None, 0)

    @precondition(lambda self: any(p.type == "tool" and TRANSITIONS[p.state.status] for p in self._tools()))
    @rule(pick=PICK, size=SIZES, fail=st.booleans())
    def advance_tool(self, pick: int, size: int, fail: bool) -> None:
        """A valid transition: pending → running, running → completed, or → error."""
        part = self._pick([p for p in self._tools() if TRANSITIONS[p.state.status]], pick)
        if fail:
            self.transition(pick=0, status="error", size=None, error="boom", part=part)
        else:
            target = "running" if part.state.status == "pending" else "completed"
            self.transition(pick=0, status=target, size=size if target == "completed" else None, error=None, part=part)

    @precondition(lambda self: any(p.type == "tool" for m in self.history for p in m.parts))
    @rule(pick=PICK, status=st.sampled_from(STATUSES), size=st.none() | SIZES, error=st.sampled_from([None, "", "boom"]))
    def transition(self, pick: int, status: str, size: int | None, error: str | None, part: ToolPart | None = None) -> None:
        target = status
        part = part or self._pick(self._tools(), pick)
        current = part.state.status
        output = None if size is None else "p" * size
        valid = (
            target in TRANSITIONS[current]
            and (output is not None) == (target == "completed")
            and (target != "error" or bool(error))
        )
        event("transition valid" if valid else "transition refused")
        if not valid:
            with pytest.raises(InvalidInput):
                self.store.update_tool(part.id, status=target, output=output, error=error)
            return
        self.store.update_tool(part.id, status=target, output=output, error=error)
        part.state.status = target
        if output is not None:
            part.state.output = output
        if error is not None:
            part.state.error = error

    @precondition(lambda self: any(m.info.role == "assistant" for m in self.history))
    @rule(
        pick=PICK,
        finish=st.sampled_from(["stop", "tool-calls", "length", "end_turn"]),
        error=st.sampled_from([None, None, {"message": "boom"}, "a string error", {}]),
        tokens=st.integers(0, 5_000),
    )
    def finish(self, pick: int, finish: str, error: Any, tokens: int) -> None:
        entry = self._pick(self._assistants(), pick)
        self.store.finish_message(entry.info.id, finish=finish, tokens={"input": tokens, "output": 3}, cost=0.5, error=error)
        if isinstance(error, str):
            error = {"message": error}
        entry.info.finish = finish
        entry.info.error = error or None
        entry.info.tokens = TokenCounts(input=tokens, output=3)
        entry.info.cost = 0.5

    @rule(pick=PICK, tail=st.sampled_from(["none", "earlier", "missing"]), finished=st.booleans(), errored=st.booleans())
    def hand_written_compaction(self, pick: int, tail: str, finished: bool, errored: bool) -> None:
        """A compaction pair written through the plain API (as an importer or another tool would)."""
        tail_id = None
        if tail == "earlier" and self.history:
            tail_id = self._pick(self.history, pick).info.id
        elif tail == "missing":
            tail_id = "msg_not_there"
        user = self._message(self.store.append_message(self.session_id, "user"))
        self._append_part(user, {"type": "compaction", "tail_start_id": tail_id}, CompactionPart(tail_start_id=tail_id))
        summary = self._message(
            self.store.append_message(self.session_id, "assistant", parent_id=user.info.id, summary=True),
            parent_id=user.info.id,
            summary=True,
        )
        self._append_part(summary, {"type": "text", "text": "hand summary"}, TextPart(text="hand summary"))
        if finished:
            error = {"message": "cut"} if errored else None
            self.store.finish_message(summary.info.id, finish="stop", error=error)
            summary.info.finish, summary.info.error = "stop", error

    @rule()
    def prune(self) -> None:
        # The store prunes the view, back to the last boundary (as tests/test_store_compaction_view.py states).
        expected = pure_prune(copy.deepcopy(filter_compacted(self.history)), CONFIG, now=1)
        result = self.store.prune(self.session_id, CONFIG)
        assert (result.pruned, result.total) == (expected.pruned, expected.total)
        assert [p.id for p in result.parts] == [p.id for p in expected.parts]
        marked = {p.id for p in result.parts}
        event("prune marked parts" if marked else "prune nothing")
        for part in self._tools():
            if part.id in marked:
                part.state.time.compacted = 1

    @rule(trigger=st.sampled_from(["manual", "auto", "overflow"]), mode=st.sampled_from(["short", "short", "long", "empty", "raise"]))
    def compact(self, trigger: str, mode: str) -> None:
        self.compactions += 1
        summarizer = ScriptedSummarizer(mode, self.compactions)
        nothing_new = self.last_compaction_summary_seq is not None and not any(
            not m.info.synthetic for m in self.history[self.last_compaction_summary_seq :]
        )
        view = as_loaded_view(self.history)
        if nothing_new:
            event("compact nothing new")
            with pytest.raises(CompactionStalled):
                self.store.compact(self.session_id, summarizer, trigger=trigger, config=CONFIG)
            assert not summarizer.requests
            return
        if not has_conversation_messages(view):
            event("compact nothing to compact")
            with pytest.raises(InvalidInput):
                self.store.compact(self.session_id, summarizer, trigger=trigger, config=CONFIG)
            assert not summarizer.requests
            return
        pre = context_size(view)
        work = copy.deepcopy(view)
        pruned = pure_prune(work, CONFIG, now=1)
        try:
            result = self.store.compact(self.session_id, summarizer, trigger=trigger, config=CONFIG)
        except CompactionStalled:
            result = None
        [request] = summarizer.requests
        assert [m.info.id for m in request.history] == [m.info.id for m in view]
        summary, fallback = summarize_with_fallbacks(ScriptedSummarizer(mode, self.compactions), request)
        post = post_tokens(summary.text, [])
        event("compact stalled" if stall_reason(pre, post, CONFIG) else "compact completed")
        if stall_reason(pre, post, CONFIG):
            assert result is None, "the store compacted where the rule says it stalls"
            return
        assert result is not None, f"the store stalled: pre {pre}, post {post}"
        assert (result.pre_tokens, result.post_tokens, result.pruned, result.fallback_used) == (pre, post, pruned.pruned, fallback)

        marked = {p.id for p in pruned.parts}
        for part in self._tools():
            if part.id in marked:
                part.state.time.compacted = 1
        auto = trigger != "manual"
        new = self.store.messages(self.session_id)[len(self.history) :]
        continued = auto and not ended_turn(view)
        assert len(new) == (3 if continued else 2)
        user = self._message(new[0].info)
        part = CompactionPart(auto=auto, overflow=trigger == "overflow", tail_start_id=None)
        part.id, part.session_id, part.message_id = new[0].parts[0].id, self.session_id, user.info.id
        user.parts.append(part)
        written = self._message(
            new[1].info,
            parent_id=user.info.id,
            summary=True,
            agent="compaction",
            mode="compaction",
            model_id=summary.model,
            provider_id="anthropic" if summary.model.startswith("claude") else "brutus",
            finish="stop",
            tokens=summary.tokens,
            cost=summary.cost,
        )
        text = TextPart(text=summary.text, id=new[1].parts[0].id, session_id=self.session_id, message_id=written.info.id)
        written.parts.append(text)
        self.last_compaction_summary_seq = written.info.seq
        if marked:
            event("compact pruned")
        if continued:
            event("compact continued")
        if continued:
            follow = self._message(new[2].info, synthetic=True)
            follow.parts.append(
                TextPart(text=CONTINUE_TEXT, synthetic=True, id=new[2].parts[0].id, session_id=self.session_id, message_id=follow.info.id)
            )

    @rule()
    def reload(self) -> None:
        self.store.close()
        self.store = SessionStore.open(self.url, auto_migrate=False)

    # -- the check after every step --------------------------------------------------------------------------

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        assert norm(self.store.messages(self.session_id)) == norm(self.history)
        assert norm(self.store.filter_compacted(self.session_id)) == norm(as_loaded_view(self.history))
        assert self.store.get_session(self.session_id).message_count == len(self.history)


def test_store_agrees_with_a_model_of_the_session(store_url: str) -> None:
    SessionMachine.url = store_url
    SEEN.clear()
    run_state_machine_as_test(
        SessionMachine,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    for needed in ("compact completed", "compact stalled", "prune marked parts", "transition valid", "transition refused"):
        assert SEEN[needed], f"no run reached {needed!r}: {sorted(SEEN.items())}"
