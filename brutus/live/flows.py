"""What each ``Conversation`` call does, written once for the sync and async classes.

Each call is a flow (``brutus.flows``): it yields the store's actions — ``Tx`` of a database operation,
``Locked`` compaction (``brutus.compaction.engine.compaction``), the append flow of ``append_messages`` — and
its class runs it on its store (``store.run``), awaiting it on ``AsyncSessionStore``; an error is thrown
back in. So the order of reads, writes and policy steps lives here, and the classes only declare the calls.
``store`` is only read for its ``clock`` and ``dialect``.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from ..compaction.engine import compaction
from ..db import ops
from ..db.fork_ops import fork_flow
from ..db.convert import text_out
from ..db.history_ops import live_view, load_messages, message_tools, newest_assistant, prune_session
from ..db.settle_ops import append_work
from ..errors import CompactionStalled, InvalidInput
from ..flows import Tx, perform
from ..ids import new_id
from ..models import MessageWithParts
from ..blocks import KEY, recorded_response
from .core import ConversationState, RequestStats, is_prompt_too_long

__all__ = ["Flow", "fork", "pending_calls", "recover", "record", "request", "tool_results", "user", "view"]

Flow = Generator[Any, Any, Any]
OPEN = ("pending", "running")  # a tool call's statuses while it waits for its result


def _load(state: ConversationState) -> Tx:
    """The session's view (``filter_compacted``), reusing the unchanged messages of the last load."""
    return Tx(_view(state), write=False)


def _view(state: ConversationState) -> Any:
    """``_load``'s operation, to run inside another one's transaction."""
    return load_messages(state.session_id, filtered=True, reuse=state.loaded)


def _append(state: ConversationState, store: Any, items: list[dict[str, Any]]) -> Flow:
    """``append_messages`` of these items, one transaction."""
    return (yield from perform(append_work(state.session_id, items, now=store.clock(), dialect=store.dialect)))


def view(state: ConversationState) -> Flow:
    return (yield Tx(load_messages(state.session_id, filtered=True), write=False))


def pending_calls(state: ConversationState) -> Flow:
    return state.pending_calls((yield from view(state)))


SETTINGS = ("model", "system", "tools", "max_tokens", "thinking", "policy", "limits", "summarizer", "extra")


def fork(state: ConversationState, store: Any, message_id: str | None) -> Flow:
    """The session forked at ``message_id`` (None: all of it), and a conversation on it with these settings."""
    session = yield from fork_flow(state.session_id, message_id, title=None, dialect=store.dialect, clock=store.clock)
    return store.conversation(session.id, **{name: getattr(state, name) for name in SETTINGS})


def user(state: ConversationState, store: Any, content: Any) -> Flow:
    appended = yield from _append(state, store, [state.user_message(content)])
    state.parent_id = appended[0].info.id
    return appended[0].info


def request(state: ConversationState, store: Any) -> Flow:
    """The policy first (pending / reactive / threshold compaction, prune as configured), then the render."""
    now = store.clock()
    state.last = RequestStats()
    view, pending = yield Tx(live_view(state.session_id, state.loaded), write=False, autocommit=True)
    plan = state.plan(view, pending=pending, now=now)
    if plan.prune:
        prune = prune_session(state.session_id, state.policy.compaction_config(), now=store.clock(), dry_run=False)
        state.last.pruned = (yield Tx(prune)).pruned
        if state.last.pruned:
            view = yield _load(state)
    if plan.compact and (not plan.compact_if_still_over or state.still_over(view)):
        view = yield from _compact(state, store, view, plan.compact, pending=pending)
    rendered, kwargs = state.render(view)
    if state.needs_continue(rendered):  # a view ending with the assistant: the turn goes on from a user message
        yield from _append(state, store, [state.continue_message()])
        view = yield _load(state)
        rendered, kwargs = state.render(view)
    state.last.tokens_after = state.measure(view)
    return kwargs


def _compact(
    state: ConversationState, store: Any, view: list[MessageWithParts], trigger: str, *, pending: bool = False
) -> Flow:
    """Compact, or record why not (``last.stalled``): a stall never leaves the flow as an exception. A view
    too small to gain is not sent to the summarizer, unless a pending marker must be resolved."""
    state.overflow = False
    if not pending and (reason := state.too_small(view)) is not None:
        state.block(view, reason)
        return view
    try:
        summarizer = state.summarizer_for(state.preview(view))
        config = state.policy.compaction_config()
        yield compaction(state.session_id, summarizer, trigger=trigger, config=config, clock=store.clock)
    except CompactionStalled as exc:
        state.block(view, str(exc))
        return view
    state.last.compacted = True
    view = yield _load(state)
    if state.still_over(view):
        state.block(view, "the context is still over the threshold after compacting")
    return view


def record(state: ConversationState, store: Any, response: Any) -> Flow:
    """One response, in one transaction. One that opens with a compaction block (the API compacted at its
    threshold) is a completed boundary: a user message holding a ``compaction`` part goes in before it, and
    the response is its summary."""
    now = store.clock()
    parent = state.parent_id
    if parent is None:  # no request() or user() in this process yet: ask the store
        view = yield _load(state)
        parent = next((m.info.id for m in reversed(view) if m.info.role == "user"), None)
    item = state.assistant_message(response, parent, now)
    content = item["info"]["metadata"][KEY]["response"]["content"]
    items = [item]
    if content and content[0].get("type") == "compaction" and isinstance(content[0].get("content"), str):
        marker_id = new_id("message")
        items.insert(0, {"info": {"id": marker_id, "role": "user", "time": {"created": now}},
                         "parts": [{"type": "compaction", "auto": True}]})
        item["info"].update(parent_id=marker_id, summary=True)
        state.parent_id = marker_id
    appended = yield from _append(state, store, items)
    return appended[-1].info


def tool_results(state: ConversationState, store: Any, results: Sequence[Mapping[str, Any]]) -> Flow:
    return (yield Tx(_complete_tools(state, store.clock, results)))


def _complete_tools(state: ConversationState, clock: Any, results: Sequence[Mapping[str, Any]]) -> Any:
    """``tool_results``' operation, one transaction: the results checked against the newest response's open
    calls (``InvalidInput`` before anything is written), then its tool parts completed, each statement once
    for all of them. The newest response is the view's newest assistant message, read alone; only when that
    one records no response is the view read to find it."""
    if not results:
        raise InvalidInput("tool_results() needs at least one result")
    message = yield from newest_assistant(state.session_id)
    if message is None or not recorded_response(message.metadata):
        message = state.newest_response((yield from _view(state)))
    rows = {row[-1]: row for row in (yield from message_tools(message.id))}
    open_calls = {text_out(row.call_id): part_id for part_id, row in rows.items() if row.status in OPEN}
    updates = state.match_results(open_calls, results)
    now = clock()
    changes = [ops.plan_tool_change(part_id, rows[part_id], _result_changes(result), now=now) for part_id, result in updates]
    yield from ops.write_tool_changes(changes, now=now)
    return message  # completing its tool parts changes none of its ``Message`` fields


def _result_changes(result: Any) -> list[dict[str, Any]]:
    """A tool part's changes for a result: running, then completed with its output; or an error."""
    metadata = {KEY: {"tool_result": result.block}}
    if result.is_error:
        return [{"status": "error", "error": result.output, "metadata": metadata}]
    return [{"status": "running"}, {"status": "completed", "output": result.output, "metadata": metadata}]


def recover(state: ConversationState, store: Any, error: BaseException) -> Flow:
    if not is_prompt_too_long(error):
        return False
    view = yield _load(state)
    state.last = RequestStats()
    yield from _compact(state, store, view, "overflow")
    return state.last.compacted
