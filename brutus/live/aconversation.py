"""``AsyncConversation``: ``Conversation`` over an ``AsyncSessionStore``, for ``anthropic.AsyncAnthropic``.

Every method is ``Conversation``'s, awaitable, with the same rules: ``core.py`` (what is stored), ``render.py``
(what is sent) and ``policy.py`` (when it prunes and compacts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import CompactionStalled
from ..models import Message, MessageWithParts
from .core import ConversationState, RequestStats, is_prompt_too_long

if TYPE_CHECKING:
    from ..async_store import AsyncSessionStore

__all__ = ["AsyncConversation"]


class AsyncConversation:
    """A session driven live against the Messages API, asynchronously."""

    def __init__(self, store: AsyncSessionStore, session_id: str, *, model: str, **settings: Any) -> None:
        self.store = store
        self.state = ConversationState(session_id=session_id, model=model, **settings)

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def last(self) -> RequestStats:
        """What the last ``request()`` did (first changed message, thinking stripped or dropped, policy)."""
        return self.state.last

    async def view(self) -> list[MessageWithParts]:
        return await self.store.filter_compacted(self.session_id)

    async def user(self, content: str | list[dict[str, Any]]) -> Message:
        """Store a user turn (a string or Anthropic content blocks)."""
        return (await self.store.append_messages(self.session_id, [self.state.user_message(content)]))[0].info

    async def request(self) -> dict[str, Any]:
        """The policy first (pending / reactive / threshold compaction, prune as configured), then the
        keyword arguments for ``client.beta.messages.create``."""
        state = self.state
        state.last = RequestStats()
        view = await self.view()
        pending = any(c.status == "pending" for c in await self.store.compactions(self.session_id))
        plan = state.plan(view, pending=pending, now=self.store.clock())
        if plan.prune:
            state.last.pruned = (await self.store.prune(self.session_id, state.policy.compaction_config())).pruned
            if state.last.pruned:
                view = await self.view()
        if plan.compact and (not plan.compact_if_still_over or state.still_over(view)):
            view = await self._compact(view, plan.compact)
        rendered, kwargs = state.render(view)
        if state.needs_continue(rendered):  # a view ending with the assistant: the turn goes on from a user message
            await self.store.append_messages(self.session_id, [state.continue_message()])
            rendered, kwargs = state.render(await self.view())
        return kwargs

    async def _compact(self, view: list[MessageWithParts], trigger: str) -> list[MessageWithParts]:
        state = self.state
        state.overflow = False
        try:
            await self.store.compact(self.session_id, state.summarizer, trigger=trigger, config=state.policy.compaction_config())
        except CompactionStalled as exc:
            state.block(view, str(exc))
            return view
        state.last.compacted = True
        view = await self.view()
        if state.still_over(view):
            state.block(view, "the context is still over the threshold after compacting")
        return view

    async def record(self, response: Any) -> Message:
        """Store a response (an SDK ``Message`` / ``BetaMessage`` or its dict) whole, in one transaction."""
        view = await self.view()
        parent = next((m.info.id for m in reversed(view) if m.info.role == "user"), None)
        item = self.state.assistant_message(response, parent, self.store.clock())
        return (await self.store.append_messages(self.session_id, [item]))[0].info

    async def tool_results(self, results: Sequence[Mapping[str, Any]]) -> Message:
        """Complete the newest response's tool calls: ``[{"tool_use_id", "content", "is_error"}]``, content a
        string or content blocks. All of them in one transaction; a result that answers no open call writes
        nothing."""
        message_id, updates = self.state.tool_updates(await self.view(), results)
        async with self.store.batch():
            for part_id, result in updates:
                metadata = {"anthropic": {"tool_result": result.block}}
                if result.is_error:
                    await self.store.update_tool(part_id, status="error", error=result.output, metadata=metadata)
                else:
                    await self.store.update_tool(part_id, status="running")
                    await self.store.update_tool(part_id, status="completed", output=result.output, metadata=metadata)
        return next(m.info for m in reversed(await self.view()) if m.info.id == message_id)

    async def pending_calls(self) -> list[dict[str, Any]]:
        """The newest response's ``tool_use`` blocks still waiting for results (what a resumed agent runs)."""
        return self.state.pending_calls(await self.view())

    async def recover(self, error: BaseException) -> bool:
        """After the provider refused the prompt as too long: compact (trigger ``overflow``) and return True
        to send ``request()`` again; False when it cannot help (another error, or a compaction that stalled)."""
        if not is_prompt_too_long(error):
            return False
        view = await self.view()
        self.state.last = RequestStats()
        await self._compact(view, "overflow")
        return self.state.last.compacted
