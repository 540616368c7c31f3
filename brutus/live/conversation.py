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

The rules are in ``core.py`` (what is stored), ``render.py`` (what is sent), ``policy.py`` (when it prunes
and compacts) and ``flows.py`` (the order of each call's steps, which this class runs on its store).
``AsyncConversation`` is the same over ``AsyncSessionStore``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..db.history_ops import load_messages
from ..models import Message, MessageWithParts
from . import flows
from .core import ConversationState, RequestStats

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
        """What the last ``request()`` did (``RequestStats``: tokens before and after the policy, first changed
        message, thinking stripped or dropped, prune, compaction or why not)."""
        return self.state.last

    def view(self) -> list[MessageWithParts]:
        return self.store.filter_compacted(self.session_id)

    def user(self, content: str | list[dict[str, Any]]) -> Message:
        """Store a user turn (a string or Anthropic content blocks)."""
        return self._run(flows.user(self.state, content))

    def request(self) -> dict[str, Any]:
        """The policy first (pending / reactive / threshold compaction, prune as configured), then the
        keyword arguments for ``client.beta.messages.stream`` or ``.create``."""
        return self._run(flows.request(self.state, self.store.clock()))

    def record(self, response: Any) -> Message:
        """Store a response (an SDK ``Message`` / ``BetaMessage`` or its dict) whole, in one transaction."""
        return self._run(flows.record(self.state, response, self.store.clock()))

    def tool_results(self, results: Sequence[Mapping[str, Any]]) -> Message:
        """Complete the newest response's tool calls: ``[{"tool_use_id", "content", "is_error"}]``, content a
        string or content blocks. All of them in one transaction; a result that answers no open call writes
        nothing."""
        return self._run(flows.tool_results(self.state, results))

    def pending_calls(self) -> list[dict[str, Any]]:
        """The newest response's ``tool_use`` blocks still waiting for results (what a resumed agent runs)."""
        return self.state.pending_calls(self.view())

    def recover(self, error: BaseException) -> bool:
        """After the provider refused the prompt as too long: compact (trigger ``overflow``) and return True
        to send ``request()`` again; False when it cannot help (another error, or a compaction that stalled)."""
        return self._run(flows.recover(self.state, error))

    def _run(self, flow: flows.Flow) -> Any:
        """Run a flow's store actions, sending each outcome (or error) back into it."""
        try:
            action = next(flow)
            while True:
                try:
                    outcome = self._do(action)
                except Exception as exc:  # noqa: BLE001  the flow decides what it handles
                    action = flow.throw(exc)
                else:
                    action = flow.send(outcome)
        except StopIteration as stop:
            return stop.value

    def _do(self, action: Any) -> Any:
        store, session_id = self.store, self.session_id
        if isinstance(action, flows.Load):  # filter_compacted, reusing the unchanged messages of the last load
            return store._run(load_messages(session_id, filtered=True, reuse=self.state.loaded), write=False)
        if isinstance(action, flows.Compactions):
            return store.compactions(session_id)
        if isinstance(action, flows.Prune):
            return store.prune(session_id, action.config)
        if isinstance(action, flows.Compact):
            summarizer = self.state.summarizer_for(action.prefix)
            return store.compact(session_id, summarizer, trigger=action.trigger, config=action.config)
        if isinstance(action, flows.Append):
            return store.append_messages(session_id, action.items)
        assert isinstance(action, flows.Updates)
        with store.batch():
            for part_id, fields in action.calls:
                store.update_tool(part_id, **fields)
        return None
