"""``AsyncConversation``: ``Conversation`` over an ``AsyncSessionStore``, for ``anthropic.AsyncAnthropic``.

Every method is ``Conversation``'s, awaitable, running the same flows (``flows.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..db.history_ops import load_messages
from ..models import Message, MessageWithParts
from . import flows
from .core import ConversationState, RequestStats

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
        """What the last ``request()`` did (``RequestStats``: tokens before and after the policy, first changed
        message, thinking stripped or dropped, prune, compaction or why not)."""
        return self.state.last

    async def view(self) -> list[MessageWithParts]:
        return await self.store.filter_compacted(self.session_id)

    async def user(self, content: str | list[dict[str, Any]]) -> Message:
        """Store a user turn (a string or Anthropic content blocks)."""
        return await self._run(flows.user(self.state, content))

    async def request(self) -> dict[str, Any]:
        """The policy first (pending / reactive / threshold compaction, prune as configured), then the
        keyword arguments for ``client.beta.messages.stream`` or ``.create``."""
        return await self._run(flows.request(self.state, self.store.clock()))

    async def record(self, response: Any) -> Message:
        """Store a response (an SDK ``Message`` / ``BetaMessage`` or its dict) whole, in one transaction."""
        return await self._run(flows.record(self.state, response, self.store.clock()))

    async def tool_results(self, results: Sequence[Mapping[str, Any]]) -> Message:
        """Complete the newest response's tool calls: ``[{"tool_use_id", "content", "is_error"}]``, content a
        string or content blocks. All of them in one transaction; a result that answers no open call writes
        nothing."""
        return await self._run(flows.tool_results(self.state, results))

    async def pending_calls(self) -> list[dict[str, Any]]:
        """The newest response's ``tool_use`` blocks still waiting for results (what a resumed agent runs)."""
        return self.state.pending_calls(await self.view())

    async def recover(self, error: BaseException) -> bool:
        """After the provider refused the prompt as too long: compact (trigger ``overflow``) and return True
        to send ``request()`` again; False when it cannot help (another error, or a compaction that stalled)."""
        return await self._run(flows.recover(self.state, error))

    async def _run(self, flow: flows.Flow) -> Any:
        """Run a flow's store actions, sending each outcome (or error) back into it."""
        try:
            action = next(flow)
            while True:
                try:
                    outcome = await self._do(action)
                except Exception as exc:  # noqa: BLE001  the flow decides what it handles
                    action = flow.throw(exc)
                else:
                    action = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    async def _do(self, action: Any) -> Any:
        store, session_id = self.store, self.session_id
        if isinstance(action, flows.Load):  # filter_compacted, reusing the unchanged messages of the last load
            return await store._run(load_messages(session_id, filtered=True, reuse=self.state.loaded), write=False)
        if isinstance(action, flows.Compactions):
            return await store.compactions(session_id)
        if isinstance(action, flows.Prune):
            return await store.prune(session_id, action.config)
        if isinstance(action, flows.Compact):
            summarizer = self.state.summarizer_for(action.prefix)
            return await store.compact(session_id, summarizer, trigger=action.trigger, config=action.config)
        if isinstance(action, flows.Append):
            return await store.append_messages(session_id, action.items)
        assert isinstance(action, flows.Updates)
        async with store.batch():
            for part_id, fields in action.calls:
                await store.update_tool(part_id, **fields)
        return None
