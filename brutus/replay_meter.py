"""How big a replayed view is, given usage that was recorded on a different, unlimited context.

A recorded call's usage (input + cache + output) measured the *original* context. The replay keeps a
smaller one, so each call is re-based:

- ``fixed``: what the provider counted beyond the messages (system prompt, tool definitions): the smallest
  "usage − output − estimate of the messages" over the calls so far.
- ``ratio``: real tokens per estimated token of the messages (the chars/4 estimate undercounts code and
  JSON): (usage − output − fixed) / estimate of the messages. Above ``MAX_RATIO`` it is content the
  estimate does not see (files a client re-attached, say): the excess is kept whole, as fixed for that call.
- a replayed call's input is ``fixed + ratio × estimate of the replayed messages before it``; on the
  recording itself this gives back exactly the recorded usage. Two recorded figures ride along for the cost
  meter (``brutus.replay_cost``): ``uncached``, the input after the request's last cache breakpoint, and
  ``read``, what its first request read from a cache other sessions had warmed.
- A call was sent (``RecordedCalls.sent_at``) at the last recorded moment before its message: the latest
  creation, completion or tool end since the previous call, no later than the message's own creation.

``measure_view`` is then ``context_size`` of the view with its last call's usage re-based. The recording holds
the prune marks its session *ended* with: a mark counts for the calls made after it, not before
(``RecordedCalls.estimate``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .history import filter_compacted
from .models import MessageWithParts, TokenCounts, ToolPart
from .estimates import context_size, estimate_message_tokens, estimate_part_tokens

__all__ = ["MAX_RATIO", "MIN_RATIO", "RecordedCalls", "Usage", "measure_view"]

MIN_RATIO = 0.1
MAX_RATIO = 4.0

Estimate = Callable[[MessageWithParts], int]


@dataclass(frozen=True, slots=True)
class Usage:
    """One recorded call, re-basable on another context (see the module docstring)."""

    fixed: int
    ratio: float
    output: int
    uncached: int = 0
    read: int = 0

    def input_for(self, estimated: int) -> int:
        return self.fixed + round(self.ratio * estimated)


def _reported(tokens: TokenCounts) -> int:
    return tokens.input + tokens.output + tokens.cache.read + tokens.cache.write


def _last_call(view: Sequence[MessageWithParts], usage: Mapping[str, Usage]) -> int | None:
    for index in range(len(view) - 1, -1, -1):
        info = view[index].info
        if info.role != "assistant":
            continue
        if info.summary:
            return None
        if info.id in usage:
            return index
    return None


def measure_view(
    view: Sequence[MessageWithParts],
    usage: Mapping[str, Usage],
    fallback: Usage | None,
    estimate: Estimate = estimate_message_tokens,
) -> int:
    """``context_size`` of ``view`` with its last call's usage (``usage`` by message id) re-based on the
    messages before it; other reported usage is left out. With no call since the last summary: the
    estimate of the whole view re-based with ``fallback`` (the latest call), as the next call would count it."""
    target = _last_call(view, usage)
    if target is None:
        estimated = sum(estimate(m) for m in view)
        return fallback.input_for(estimated) if fallback is not None else estimated
    rebuilt = list(view)
    for index, message in enumerate(view):
        info = message.info
        if info.role != "assistant" or info.summary:
            continue
        if index == target:
            call = usage[info.id]
            tokens = TokenCounts(input=call.input_for(sum(estimate(m) for m in view[:index])), output=call.output)
        elif _reported(info.tokens):
            tokens = TokenCounts()
        else:
            continue
        info = info.model_copy(update={"tokens": tokens})
        rebuilt[index] = MessageWithParts.model_construct(info=info, parts=message.parts)
    return context_size(rebuilt)


def _unpruned(message: MessageWithParts) -> tuple[MessageWithParts, list[tuple[int, int]]]:
    """The message with its tool outputs as they were before any prune, and when each prune cut how much."""
    parts, cuts = [], []
    for part in message.parts:
        if isinstance(part, ToolPart) and part.state.time.compacted:
            time = part.state.time.model_copy(update={"compacted": None})
            whole = part.model_copy(update={"state": part.state.model_copy(update={"time": time})})
            cuts.append((part.state.time.compacted, estimate_part_tokens(whole) - estimate_part_tokens(part)))
            part = whole
        parts.append(part)
    if not cuts:
        return message, cuts
    return MessageWithParts.model_construct(info=message.info, parts=parts), cuts


class RecordedCalls:
    """The recording as it ran: its views, its calls re-based (``observe``), its context curve (``tokens_at``)."""

    def __init__(self, history: Sequence[MessageWithParts]) -> None:
        pairs = [_unpruned(m) for m in history]
        self.history = [m for m, _ in pairs]
        self.cuts = {id(m): cuts for m, cuts in pairs if cuts}
        self.usage: dict[str, Usage] = {}
        self.last: Usage | None = None
        self.fixed: int | None = None
        self._estimates: dict[int, int] = {}

    def estimate(self, message: MessageWithParts, at: int) -> int:
        """A recorded message's estimate at time ``at`` (its outputs pruned by then count as placeholders)."""
        key = id(message)
        if key not in self._estimates:
            self._estimates[key] = estimate_message_tokens(message)
        return self._estimates[key] - sum(cut for when, cut in self.cuts.get(key, ()) if when <= at)

    def observe(self, index: int) -> Usage | None:
        """Re-base message ``index`` when it is a call with reported usage (None otherwise)."""
        info = self.history[index].info
        reported = _reported(info.tokens)
        if info.role != "assistant" or info.summary or not reported:
            return None
        at = info.time.created
        before = sum(self.estimate(m, at) for m in filter_compacted(self.history[:index]))
        counted = reported - info.tokens.output
        self.fixed = max(0, min(counted - before, self.fixed if self.fixed is not None else counted))
        fixed = max(self.fixed, counted - round(MAX_RATIO * before))
        ratio = max(MIN_RATIO, (counted - fixed) / before) if before else 1.0
        self.last = self.usage[info.id] = Usage(
            fixed=fixed, ratio=ratio, output=info.tokens.output, uncached=info.tokens.input, read=info.tokens.cache.read
        )
        return self.last

    def sent_at(self, index: int) -> int:
        """When message ``index``'s request was sent (see the module docstring), in epoch ms."""
        created = self.history[index].info.time.created
        latest = 0
        for message in reversed(self.history[:index]):
            info = message.info
            ends = [p.state.time.end or 0 for p in message.parts if isinstance(p, ToolPart)]
            latest = max(latest, info.time.created, info.time.completed or 0, *ends)
            if info.role == "assistant":
                break
        return min(created, latest) if latest else created

    def tokens_at(self, index: int) -> int:
        """The recorded session's context after message ``index`` (what it had without any limit)."""
        at = self.history[index].info.time.created
        view = filter_compacted(self.history[: index + 1])
        return measure_view(view, self.usage, self.last, lambda m: self.estimate(m, at))
