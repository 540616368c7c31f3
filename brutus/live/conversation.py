"""``Conversation``: a live agent's session on the Anthropic Messages API, backed by a ``SessionStore``.

::

    conv = store.conversation(session.id, model="claude-opus-4-6", system="You are a coding agent.", tools=TOOLS)
    conv.user("Why does test_sync fail?")
    while True:
        if calls := conv.pending_calls():  # first: a resumed session runs the calls left waiting
            conv.tool_results([run(call) for call in calls])
        try:
            with client.beta.messages.stream(**conv.request()) as stream:  # or create(**conv.request())
                response = stream.get_final_message()
        except anthropic.BadRequestError as exc:
            if conv.recover(exc):
                continue
            raise
        conv.record(response)
        if not conv.pending_calls():
            break

The rules are in ``core.py`` (what is stored), ``render.py`` (what is sent), ``brutus.policy`` (when it prunes
and compacts) and ``flows.py`` (the order of each call's steps). ``ConversationCalls`` declares each method
once, returning its flow; ``Conversation`` runs it on a ``SessionStore`` and ``AsyncConversation`` awaits it
on an ``AsyncSessionStore`` (for ``anthropic.AsyncAnthropic``), as the stores bind ``brutus.calls``
(``brutus.flows.Runs``). Nothing here imports a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..flows import Runs, work
from ..models import Message, MessageWithParts
from . import flows
from .core import ConversationState, RequestStats

__all__ = ["AsyncConversation", "Conversation", "ConversationCalls"]


class ConversationCalls(Runs):
    """A session driven live against the Messages API (see the module docstring)."""

    def __init__(self, store: Any, session_id: str, *, model: str, **settings: Any) -> None:
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

    def run(self, work: Any) -> Any:
        return self.store.run(work)

    @work
    def view(self) -> list[MessageWithParts]:
        """The session's view (``filter_compacted``)."""
        return flows.view(self.state)

    @work
    def user(self, content: str | list[dict[str, Any]]) -> Message:
        """Store a user turn (a string or Anthropic content blocks)."""
        return flows.user(self.state, self.store, content)

    @work
    def request(self) -> dict[str, Any]:
        """The policy first (pending / reactive / threshold compaction, prune as configured), then the
        keyword arguments for ``client.beta.messages.stream`` or ``.create``."""
        return flows.request(self.state, self.store)

    @work
    def record(self, response: Any) -> Message:
        """Store a response (an SDK ``Message`` / ``BetaMessage`` or its dict) whole, in one transaction."""
        return flows.record(self.state, self.store, response)

    @work
    def tool_results(self, results: Sequence[Mapping[str, Any]]) -> Message:
        """Complete the newest response's tool calls: ``[{"tool_use_id", "content", "is_error"}]``, content a
        string or content blocks. All of them in one transaction; a result that answers no open call writes
        nothing."""
        return flows.tool_results(self.state, self.store, results)

    @work
    def pending_calls(self) -> list[dict[str, Any]]:
        """The newest response's ``tool_use`` blocks still waiting for results (what a resumed agent runs)."""
        return flows.pending_calls(self.state)

    @work
    def fork(self, message_id: str | None = None) -> Any:
        """Go on along another path: a conversation with these settings on a fork of this session up to and
        including ``message_id`` (None: all of it; ``store.fork``). It sends what this one sent at that point,
        so the prompt cache this one warmed serves it; this conversation and its session are left as they are."""
        return flows.fork(self.state, self.store, message_id)

    @work
    def recover(self, error: BaseException) -> bool:
        """After the provider refused the prompt as too long: compact (trigger ``overflow``) and return True
        to send ``request()`` again; False when it cannot help (another error, or a compaction that stalled)."""
        return flows.recover(self.state, self.store, error)


class Conversation(ConversationCalls, mode="sync"):
    """``ConversationCalls`` on a ``SessionStore``: an unknown session is ``NotFound`` when it is made."""

    def __init__(self, store: Any, session_id: str, *, model: str, **settings: Any) -> None:
        super().__init__(store, session_id, model=model, **settings)
        store.get_session(session_id)  # NotFound now, not at the first request


class AsyncConversation(ConversationCalls, mode="async"):
    """``ConversationCalls`` on an ``AsyncSessionStore``: every call awaitable."""
