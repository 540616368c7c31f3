"""What each request of a replay would have cost on Claude with prompt caching, and what the recording was billed.

Rules (issues 21 and 36, DESIGN §3 "Cost"):

- Each replayed call is a request: its input is the recorded call re-based on the replayed view
  (``replay_meter.Usage.input_for``), its output the recorded output, priced at the model that answered it
  (``brutus.pricing``; Claude Sonnet's prices for a model with none, an OpenCode session on another provider,
  said in ``priced_as``).
- A compaction the replay runs is one more request (``CostMeter.summary``) unless its summarizer reported a cost
  of its own (a real call: that cost is added as it is). It sends the view it summarizes and gets the summary
  as output: as ``AnthropicSummarizer`` sends it, a prefix extension of the last request that reads what that
  one cached; as server-side compaction (``AnthropicServerCompaction``, whose request carries no cache
  breakpoint), all of it uncached input. Either way the cache is left as the last request left it.
- Of its input, the recorded ``uncached`` tokens (after the request's last cache breakpoint) are plain input;
  the rest is read from the cache or written to it.
- Each model has its own cache: a model switch starts cold. A request reads what the previous request to the
  same model cached if it was sent within the TTL of that one (send to send, ``RecordedCalls.sent_at``) plus
  ``TTL_GRACE_MS``: in the recordings gaps of up to 313 s still read and every gap from 324 s missed, so the
  edge is put halfway, at the TTL + 18 s. It reads that request's cached input up to the first message the two
  views do not share unchanged (the same message with the same prune marks: a prune or a compaction changes
  the prefix from there), counted as that request counted it; the rest, what is new since, is written.
- The first request to a model reads what the recording shows it read (the system prompt and tools other
  sessions had cached), no more than it sends.
- After a typed prompt Claude Code sometimes rewrites the start of the conversation, and the request then reads
  only the system prompt and tools (``fixed``): in 21 of 57 typed prompts of 14 recordings within the TTL (13
  of 38 in the test corpus), with nothing in the transcript to tell which. A meter given ``prompt_miss`` (the
  replay gives ``PROMPT_MISS`` to a Claude Code recording) charges that expected share of the messages'
  prefix as a write instead of a read.
- ``billed``: the recording's own bill, each recorded response's usage at the same prices (one request per
  response: a Claude Code response streamed over several lines is one message), its cache writes at the
  5-minute price (a stored message keeps no TTL split of its writes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from .models import MessageWithParts, ToolPart
from .policy import CACHE_TTL_MS
from .pricing import Price, price_of
from .replay_meter import Usage

__all__ = ["CostMeter", "FALLBACK_MODEL", "KINDS", "PROMPT_MISS", "TTL_GRACE_MS", "Tally", "billed", "priced"]

FALLBACK_MODEL = "claude-sonnet-4-5"
TTL_GRACE_MS = 18_000
PROMPT_MISS = 21 / 57
KINDS = ("input", "cache_read", "cache_write", "output")

Key = tuple[str, int]
Estimate = Callable[[MessageWithParts], int]


def _key(message: MessageWithParts) -> Key:
    pruned = sum(1 for p in message.parts if isinstance(p, ToolPart) and p.state.time.compacted)
    return message.info.id, pruned


def priced(model: str | None) -> tuple[str, Price]:
    """The model whose prices apply to ``model`` (itself, or ``FALLBACK_MODEL``) and those prices."""
    found = price_of(model) if model else None
    if found is not None and model:
        return model, found
    return FALLBACK_MODEL, price_of(FALLBACK_MODEL)  # type: ignore[return-value]


@dataclass
class Tally:
    """Requests, and tokens and US dollars by kind (``KINDS``)."""

    requests: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    costs: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))
    models: dict[str, int] = field(default_factory=dict)  # requests by the model whose prices applied

    def add(self, model: str, write_price: float, **tokens: int) -> float:
        """One request of ``tokens`` by kind at ``model``'s prices (cache writes at ``write_price``); its cost."""
        _, price = priced(model)
        rates = dict(input=price.input, cache_read=price.cache_read, cache_write=write_price, output=price.output)
        cost = 0.0
        for kind, count in tokens.items():
            self.tokens[kind] += count
            self.costs[kind] += count * rates[kind] / 1_000_000
            cost += count * rates[kind] / 1_000_000
        self.requests += 1
        self.models[model] = self.models.get(model, 0) + 1
        return cost

    @property
    def cost(self) -> float:
        return sum(self.costs.values())

    @property
    def read_share(self) -> float:
        sent = self.tokens["input"] + self.tokens["cache_read"] + self.tokens["cache_write"]
        return self.tokens["cache_read"] / sent if sent else 0.0

    def merge(self, other: Tally) -> None:
        self.requests += other.requests
        for kind in KINDS:
            self.tokens[kind] += other.tokens[kind]
            self.costs[kind] += other.costs[kind]
        for model, count in other.models.items():
            self.models[model] = self.models.get(model, 0) + count

    def as_json(self) -> dict[str, object]:
        return {
            "cost_usd": round(self.cost, 6),
            "requests": self.requests,
            "tokens": dict(self.tokens),
            "cost_by_kind": {kind: round(cost, 6) for kind, cost in self.costs.items()},
        }


@dataclass(frozen=True)
class _Cache:
    """What the last request to one model left cached: its messages, where each ends in tokens, when it was sent."""

    keys: list[Key]
    ends: list[int]  # ends[k]: the input through message k as that request counted it; ends[-1] its whole input
    fixed: int
    cached: int
    at: int

    def shared(self, keys: Sequence[Key], miss: float) -> int:
        """What a request of messages ``keys`` reads, when a ``miss`` share of times only ``fixed`` is read."""
        same = 0
        for mine, theirs in zip(keys, self.keys):
            if mine != theirs:
                break
            same += 1
        shared = min(self.cached, self.ends[same - 1] if same else self.fixed)
        fixed = min(shared, self.fixed)
        return fixed + round((1 - miss) * (shared - fixed))


@dataclass
class CostMeter:
    """Adds up the simulated requests of one replayed session; ``model`` prices a request whose message names none."""

    model: str | None
    ttl: str = "5m"
    prompt_miss: float = 0.0  # the share of requests after a typed prompt that read only ``fixed``
    tally: Tally = field(default_factory=Tally)
    extra: float = 0.0  # beside the requests: compactions' summary calls
    _caches: dict[str, _Cache] = field(default_factory=dict)

    def request(
        self,
        view: Sequence[MessageWithParts],
        usage: Usage,
        at: int,
        estimate: Estimate,
        model: str | None = None,
        prompted: bool = False,
    ) -> float:
        """Price one request whose messages are ``view``, sent at ``at`` (epoch ms) to ``model`` (``prompted``:
        right after a typed prompt); its cost."""
        name, price = priced(model or self.model)
        keys = [_key(m) for m in view]
        ends = [usage.fixed + round(usage.ratio * total) for total in accumulate(estimate(m) for m in view)]
        total = ends[-1] if ends else usage.fixed
        uncached = min(usage.uncached, total)
        cacheable = total - uncached
        cache = self._caches.get(name)
        if cache is None:
            read = min(usage.read, cacheable)
        elif at - cache.at <= CACHE_TTL_MS[self.ttl] + TTL_GRACE_MS:
            read = min(cache.shared(keys, self.prompt_miss if prompted else 0.0), cacheable)
        else:
            read = 0
        self._caches[name] = _Cache(keys, ends, usage.fixed, cacheable, at)
        return self.tally.add(
            name, self._write_price(price), input=uncached, cache_read=read, cache_write=cacheable - read, output=usage.output
        )

    def summary(
        self, view: Sequence[MessageWithParts], usage: Usage, at: int, estimate: Estimate, output: int,
        *, model: str | None = None, server: bool = False,
    ) -> float:
        """Price a compaction's summary call over ``view`` sent at ``at``, ``output`` tokens of summary, as the
        client's prefix extension or (``server``) as server-side compaction; its cost."""
        name, price = priced(model or self.model)
        total = usage.input_for(sum(estimate(m) for m in view))
        cache = self._caches.get(name)
        warm = not server and cache is not None and at - cache.at <= CACHE_TTL_MS[self.ttl] + TTL_GRACE_MS
        read = min(cache.shared([_key(m) for m in view], 0.0), total) if warm and cache is not None else 0
        uncached = total if server else 0
        return self.tally.add(name, self._write_price(price), input=uncached, cache_read=read,
                              cache_write=total - uncached - read, output=output)

    def _write_price(self, price: Price) -> float:
        return price.cache_write_1h if self.ttl == "1h" else price.cache_write

    def add(self, cost: float) -> None:
        """A cost beside the requests (a compaction's summary call that priced itself)."""
        self.extra += cost

    @property
    def cost(self) -> float:
        return self.tally.cost + self.extra

    @property
    def read_share(self) -> float:
        return self.tally.read_share

    @property
    def priced_as(self) -> str:
        """The models whose prices applied, in order of first use (the default model's before any request)."""
        return ", ".join(self.tally.models) or priced(self.model)[0]


def billed(history: Iterable[MessageWithParts], default: str | None = None) -> Tally:
    """What the recorded responses of ``history`` cost by their own usage (see the module rules)."""
    bill = Tally()
    for message in history:
        info, tokens = message.info, message.info.tokens
        counted = tokens.input + tokens.output + tokens.cache.read + tokens.cache.write
        if info.role != "assistant" or info.summary or not counted:
            continue
        name, price = priced(info.model_id or default)
        bill.add(name, price.cache_write, input=tokens.input, cache_read=tokens.cache.read,
                 cache_write=tokens.cache.write, output=tokens.output + tokens.reasoning)
    return bill
