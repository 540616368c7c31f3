"""What each request of a replay would have cost on Claude with prompt caching.

Rules (issue 21, DESIGN §3 "Cost"):

- Each replayed call is a request: its input is the recorded call re-based on the replayed view
  (``replay_meter.Usage.input_for``), its output the recorded output.
- Caching as an agent on brutus gets it (a breakpoint at the end of every request): the prefix the request
  shares with the previous one is a cache read when the previous request is within the cache TTL (by the
  recording's clock), and the rest of the input is a cache write. The shared prefix is the system prompt and
  tools (``fixed``) plus the leading messages both views hold unchanged: the same message with the same
  prune marks. A prune or a compaction changes the prefix from its first changed message on.
- Prices are ``brutus.pricing``'s for the recording's model, or Claude Sonnet's when it has none (an
  OpenCode session on another provider), said in ``priced_as``. A compaction's own summary call adds its
  recorded cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .models import MessageWithParts, ToolPart
from .policy import CACHE_TTL_MS
from .pricing import Price, price_of
from .replay_meter import Usage

__all__ = ["CostMeter", "FALLBACK_MODEL"]

FALLBACK_MODEL = "claude-sonnet-4-5"

Key = tuple[str, int]


def _key(message: MessageWithParts) -> Key:
    pruned = sum(1 for p in message.parts if isinstance(p, ToolPart) and p.state.time.compacted)
    return message.info.id, pruned


@dataclass
class CostMeter:
    """Adds up the simulated requests of one replay."""

    model: str | None
    ttl: str = "5m"
    priced_as: str = field(init=False)
    price: Price = field(init=False)
    input: int = 0
    read: int = 0
    written: int = 0
    output: int = 0
    cost: float = 0.0
    _keys: list[Key] = field(default_factory=list)
    _at: int | None = None

    def __post_init__(self) -> None:
        found = price_of(self.model) if self.model else None
        self.priced_as = self.model if found is not None and self.model else FALLBACK_MODEL
        self.price = found or price_of(FALLBACK_MODEL)  # type: ignore[assignment]

    def request(self, view: Sequence[MessageWithParts], usage: Usage, at: int, estimate: Callable[[MessageWithParts], int]) -> float:
        """Price one request whose messages are ``view``, sent at ``at`` (ms); its cost."""
        keys = [_key(m) for m in view]
        sizes = [estimate(m) for m in view]
        total = usage.input_for(sum(sizes))
        shared = 0
        if self._at is not None and at - self._at <= CACHE_TTL_MS[self.ttl]:
            same = 0
            for mine, theirs in zip(keys, self._keys):
                if mine != theirs:
                    break
                same += 1
            shared = min(total, usage.input_for(sum(sizes[:same])))
        self._keys, self._at = keys, at
        write = total - shared
        write_price = self.price.cache_write_1h if self.ttl == "1h" else self.price.cache_write
        cost = (shared * self.price.cache_read + write * write_price + usage.output * self.price.output) / 1_000_000
        self.input += total
        self.read += shared
        self.written += write
        self.output += usage.output
        self.cost += cost
        return cost

    def add(self, cost: float) -> None:
        """A cost beside the requests (a compaction's summary call)."""
        self.cost += cost

    @property
    def read_share(self) -> float:
        return self.read / self.input if self.input else 0.0
