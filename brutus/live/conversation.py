"""``Conversation``: a live agent's session on the Anthropic Messages API, backed by a ``SessionStore``.

::

    conv = store.conversation(session.id, model="claude-sonnet-4-5", system="You are a coding agent.", tools=TOOLS)
    conv.user("Why does test_sync fail?")
    while True:
        try:
            response = client.beta.messages.create(**conv.request())
        except anthropic.BadRequestError as exc:
            if conv.recover(exc):
                continue
            raise
        conv.record(response)
        if response.stop_reason != "tool_use":
            break
        conv.tool_results([run(call) for call in conv.pending_calls()])

The rules are in ``core.py`` (what is stored), ``render.py`` (what is sent) and ``policy.py`` (when it
prunes and compacts). ``AsyncConversation`` is the same over ``AsyncSessionStore``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CompactionStalled
from ..models import Message, MessageWithParts
from .core import ConversationState, RequestStats, is_prompt_too_long

if TYPE_CHECKING:
    from ..store import SessionStore

__all__ = ["Conversation"]


class Conversation:
    """A session driven live against the Messages API (see the module docstring)."""

    def __init__(self, store: SessionStore, session_id: str, *, model: str, **settings: Any) -> None:
        self.store = store
        self.state = ConversationState(session_id=session_id, model=model, **settings)
        store.get_session(session_id)  # NotFound now, not at the first request

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def last(self) -> RequestStats:
        """What the last ``request()`` did (first changed message, thinking stripped or dropped, policy)."""
        return self.state.last

    def view(self) -> list[MessageWithParts]:
        return self.store.filter_compacted(self.session_id)

    def user(self, content: str | list[dict[str, Any]]) -> Message:
        """Store a user turn (a string or Anthropic content blocks)."""
        return self.store.append_messages(self.session_id, [self.state.user_message(content)])[0].info

    def request(self) -> dict[str, Any]:
        """The policy first (pending / reactive / threshold compaction, prune as configured), then the
        keyword arguments for ``client.beta.messages.create``."""
        state = self.state
        state.last = RequestStats()
        view = self.view()
        pending = any(c.status == "pending" for c in self.store.compactions(self.session_id))
        plan = state.plan(view, pending=pending, now=self.store.clock())
        if plan.prune:
            state.last.pruned = self.store.prune(self.session_id, state.policy.compaction_config()).pruned
            if state.last.pruned:
                view = self.view()
        if plan.compact and (not plan.compact_if_still_over or state.still_over(view)):
            view = self._compact(view, plan.compact)
        rendered, kwargs = state.render(view)
        if state.needs_continue(rendered):  # a view ending with the assistant: the turn goes on from a user message
            self.store.append_messages(self.session_id, [state.continue_message()])
            rendered, kwargs = state.render(self.view())
        return kwargs

    def _compact(self, view: list[MessageWithParts], trigger: str) -> list[MessageWithParts]:
        state = self.state
        state.overflow = False
        try:
            self.store.compact(self.session_id, state.summarizer, trigger=trigger, config=state.policy.compaction_config())
        except CompactionStalled as exc:
            state.block(view, str(exc))
            return view
        state.last.compacted = True
        view = self.view()
        if state.still_over(view):
            state.block(view, "the context is still over the threshold after compacting")
        return view

    def record(self, response: Any) -> Message:
        """Store a response (an SDK ``Message`` / ``BetaMessage`` or its dict) whole, in one transaction."""
        view = self.view()
        parent = next((m.info.id for m in reversed(view) if m.info.role == "user"), None)
        item = self.state.assistant_message(response, parent, self.store.clock())
        return self.store.append_messages(self.session_id, [item])[0].info

    def tool_results(self, results: Sequence[Mapping[str, Any]]) -> Message:
        """Complete the newest response's tool calls: ``[{"tool_use_id", "content", "is_error"}]``, content a
        string or content blocks. All of them in one transaction; a result that answers no open call writes
        nothing."""
        message_id, updates = self.state.tool_updates(self.view(), results)
        with self.store.batch():
            for part_id, result in updates:
                metadata = {"anthropic": {"tool_result": result.block}}
                if result.is_error:
                    self.store.update_tool(part_id, status="error", error=result.output, metadata=metadata)
                else:
                    self.store.update_tool(part_id, status="running")
                    self.store.update_tool(part_id, status="completed", output=result.output, metadata=metadata)
        return next(m.info for m in reversed(self.view()) if m.info.id == message_id)

    def pending_calls(self) -> list[dict[str, Any]]:
        """The newest response's ``tool_use`` blocks still waiting for results (what a resumed agent runs)."""
        return self.state.pending_calls(self.view())

    def recover(self, error: BaseException) -> bool:
        """After the provider refused the prompt as too long: compact (trigger ``overflow``) and return True
        to send ``request()`` again; False when it cannot help (another error, or a compaction that stalled)."""
        if not is_prompt_too_long(error):
            return False
        view = self.view()
        self.state.last = RequestStats()
        self._compact(view, "overflow")
        return self.state.last.compacted
