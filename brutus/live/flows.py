"""What each ``Conversation`` call does, written once for the sync and async classes.

Each call is a generator over store actions: it yields an action, the class runs it on its store (awaiting it
on ``AsyncSessionStore``) and sends the outcome back; an error is thrown back in. So the order of reads,
writes and policy steps lives here, and the two classes only run actions (``Conversation._run``).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import CompactionStalled
from ..ids import new_id
from ..models import CompactionConfig, Message, MessageWithParts
from .blocks import KEY
from .core import ConversationState, RequestStats, is_prompt_too_long

__all__ = ["Append", "Compact", "Compactions", "Flow", "Load", "Prune", "Updates", "recover", "record", "request", "tool_results", "user"]


class Load(NamedTuple):
    """The session's view (``filter_compacted``)."""


class Compactions(NamedTuple):
    """The session's compaction markers."""


class Prune(NamedTuple):
    config: CompactionConfig


class Compact(NamedTuple):
    trigger: str
    config: CompactionConfig
    prefix: dict[str, Any]  # what the next request would send: a summarizer that can, extends it (cache reads)


class Append(NamedTuple):
    """``append_messages`` of these items, one transaction."""

    items: list[dict[str, Any]]


class Updates(NamedTuple):
    """``update_tool`` calls ``(part_id, fields)``, one transaction."""

    calls: list[tuple[str, dict[str, Any]]]


Flow = Generator[Any, Any, Any]


def user(state: ConversationState, content: Any) -> Flow:
    appended = yield Append([state.user_message(content)])
    state.parent_id = appended[0].info.id
    return appended[0].info


def request(state: ConversationState, now: int) -> Flow:
    """The policy first (pending / reactive / threshold compaction, prune as configured), then the render."""
    state.last = RequestStats()
    view = yield Load()
    pending = any(c.status == "pending" for c in (yield Compactions()))
    plan = state.plan(view, pending=pending, now=now)
    if plan.prune:
        state.last.pruned = (yield Prune(state.policy.compaction_config())).pruned
        if state.last.pruned:
            view = yield Load()
    if plan.compact and (not plan.compact_if_still_over or state.still_over(view)):
        view = yield from _compact(state, view, plan.compact, pending=pending)
    rendered, kwargs = state.render(view)
    if state.needs_continue(rendered):  # a view ending with the assistant: the turn goes on from a user message
        yield Append([state.continue_message()])
        view = yield Load()
        rendered, kwargs = state.render(view)
    state.last.tokens_after = state.measure(view)
    return kwargs


def _compact(state: ConversationState, view: list[MessageWithParts], trigger: str, *, pending: bool = False) -> Flow:
    """Compact, or record why not (``last.stalled``): a stall never leaves the flow as an exception. A view
    too small to gain is not sent to the summarizer, unless a pending marker must be resolved."""
    state.overflow = False
    if not pending and (reason := state.too_small(view)) is not None:
        state.block(view, reason)
        return view
    try:
        yield Compact(trigger, state.policy.compaction_config(), state.preview(view))
    except CompactionStalled as exc:
        state.block(view, str(exc))
        return view
    state.last.compacted = True
    view = yield Load()
    if state.still_over(view):
        state.block(view, "the context is still over the threshold after compacting")
    return view


def record(state: ConversationState, response: Any, now: int) -> Flow:
    """One response, in one transaction. One that opens with a compaction block (the API compacted at its
    threshold) is a completed boundary: a user message holding a ``compaction`` part goes in before it, and
    the response is its summary."""
    parent = state.parent_id
    if parent is None:  # no request() or user() in this process yet: ask the store
        view = yield Load()
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
    appended = yield Append(items)
    return appended[-1].info


def tool_results(state: ConversationState, results: Sequence[Mapping[str, Any]]) -> Flow:
    message_id, updates = state.tool_updates((yield Load()), results)
    calls: list[tuple[str, dict[str, Any]]] = []
    for part_id, result in updates:
        metadata = {KEY: {"tool_result": result.block}}
        if result.is_error:
            calls.append((part_id, {"status": "error", "error": result.output, "metadata": metadata}))
        else:
            calls.append((part_id, {"status": "running"}))
            calls.append((part_id, {"status": "completed", "output": result.output, "metadata": metadata}))
    yield Updates(calls)
    view = yield Load()
    found: Message = next(m.info for m in reversed(view) if m.info.id == message_id)
    return found.model_copy(deep=True)  # the view's entries are reused by the next load: never handed out


def recover(state: ConversationState, error: BaseException) -> Flow:
    if not is_prompt_too_long(error):
        return False
    view = yield Load()
    state.last = RequestStats()
    yield from _compact(state, view, "overflow")
    return state.last.compacted
