"""Prompt-cache accounting, the way the Messages API counts it (docs: "Prompt caching").

Rules:

- The prompt is hashed cumulatively in the order ``tools`` → ``system`` → ``messages``; an entry is the hash
  of the whole prefix up to and including one block. The model is part of every hash; ``speed`` of the
  system and message ones; ``tool_choice``, the thinking mode (``type``, ``budget_tokens``) and
  ``output_config.effort`` of the message ones ("What invalidates the cache").
- Breakpoints: ``cache_control`` on a tool, a ``system`` block, or a message content block (one nested in a
  ``tool_result``'s content counts at that ``tool_result``), plus the top-level ``cache_control`` (automatic
  caching): it lands on the last block that can carry it (walking back over thinking blocks and empty
  text). If that block already has an explicit breakpoint with the same TTL it is a no-op; a different TTL
  is a 400; with 4 explicit breakpoints already it is the 5th (400). More than 4 is refused with
  ``A maximum of 4 blocks with cache_control may be provided. Found N.``; a ``ttl='1h'`` breakpoint after a
  ``ttl='5m'`` one is refused.
- Writes happen only at breakpoints. Reads: from the last breakpoint backwards, each breakpoint checks its own
  position and then walks back, 20 positions at most counting itself; a run of consecutive ``tool_use``
  blocks, or of ``tool_result`` blocks, counts as one position. The first unexpired entry found is the hit
  (the highest one); if a window finds nothing, the search resumes at the previous breakpoint.
- Lifetimes use the injected clock (seconds) at the start of the request: an entry lives 300 s ("5m") or
  3,600 s ("1h") from the request that wrote or last read it; a read refreshes it.
- Billing (mixing TTLs): A = tokens up to the hit (0 without one), B = tokens up to the last 1h breakpoint
  after A (or A), C = tokens up to the last breakpoint (or A). ``cache_read_input_tokens`` = A,
  ``cache_creation.ephemeral_1h_input_tokens`` = B - A, ``ephemeral_5m_input_tokens`` = C - B,
  ``cache_creation_input_tokens`` = C - A, ``input_tokens`` = the rest. Every breakpoint after A is written.
- Minimum cacheable length: the real per-model minimum (512 to 4,096 tokens) is replaced by the
  ``min_cacheable_tokens`` option (default 0): a breakpoint whose prefix is shorter writes nothing and is not
  counted, with no error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .prompt import Position, canonical, digest

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK = 20
MAX_BREAKPOINTS = 4


@dataclass
class Breakpoint:
    index: int  # position in the view
    ttl: str
    path: str


@dataclass
class CacheUsage:
    """One iteration's input split."""

    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @property
    def cache_creation_input_tokens(self) -> int:
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    def as_usage(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_creation": {"ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                               "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens},
        }


def explicit_breakpoint_count(body: dict[str, Any]) -> int:
    """Explicit ``cache_control`` markers as sent (nested ``tool_result`` content included)."""
    def count(value: Any) -> int:
        n = 0
        if isinstance(value, dict):
            if isinstance(value.get("cache_control"), dict):
                n += 1
            if value.get("type") == "tool_result" and isinstance(value.get("content"), list):
                n += sum(count(b) for b in value["content"])
        return n

    total = sum(count(t) for t in body.get("tools") or [])
    if isinstance(body.get("system"), list):
        total += sum(count(b) for b in body["system"])
    for message in body.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            total += sum(count(b) for b in message["content"])
    return total


def segment_keys(body: dict[str, Any]) -> dict[str, str]:
    """What, besides the blocks, each segment's cache entries depend on."""
    thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
    mode = {"type": thinking.get("type"), "budget_tokens": thinking.get("budget_tokens")}
    effort = (body.get("output_config") or {}).get("effort") if isinstance(body.get("output_config"), dict) else None
    return {
        "tools": canonical({"model": body.get("model")}),
        "system": canonical({"speed": body.get("speed")}),
        "messages": canonical({"tool_choice": body.get("tool_choice"), "thinking": mode, "effort": effort}),
    }


def breakpoints(view: list[Position], body: dict[str, Any]) -> list[Breakpoint]:
    """The request's breakpoints in prompt order, the automatic one included; refuses the invalid ones."""
    points = [Breakpoint(k, p.ttl, p.path) for k, p in enumerate(view) if p.ttl is not None]
    auto = body.get("cache_control")
    if isinstance(auto, dict):
        ttl = auto.get("ttl") or "5m"
        target = next((k for k in range(len(view) - 1, -1, -1) if view[k].auto_eligible), None)
        if target is not None:
            existing = next((b for b in points if b.index == target), None)
            if existing is not None and existing.ttl != ttl:
                raise bad_request(f"cache_control: the top-level `cache_control` (ttl='{ttl}') targets "
                                  f"`{view[target].path}`, which already has a `cache_control` with ttl='{existing.ttl}'")
            if existing is None:
                found = explicit_breakpoint_count(body) + 1
                if found > MAX_BREAKPOINTS:
                    raise bad_request(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}.")
                points.append(Breakpoint(target, ttl, "cache_control"))
                points.sort(key=lambda b: b.index)
    seen_5m = False
    for point in points:
        if point.ttl == "5m":
            seen_5m = True
        elif seen_5m:
            where = point.path if point.path == "cache_control" else f"{point.path}.cache_control"
            raise bad_request(f"{where}.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
                              "cache_control block.")
    return points


@dataclass
class _Entry:
    expires: float
    ttl: str


class PromptCache:
    """The cache entries of one fake API (one workspace)."""

    def __init__(self, *, min_cacheable_tokens: int = 0) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def account(self, view: list[Position], body: dict[str, Any], now: float, points: list[Breakpoint]) -> CacheUsage:
        """Read and write the cache for one prompt; return how its input tokens split."""
        hashes = _prefix_hashes(view, body)
        totals: list[int] = []
        running = 0
        for position in view:
            running += position.tokens
            totals.append(running)
        points = [b for b in points if totals[b.index] >= self.min_cacheable_tokens]
        with self._lock:
            hit = self._lookup(view, hashes, now, points)
            a = totals[hit] if hit is not None else 0
            after = [b for b in points if hit is None or b.index > hit]
            one_hour = [b for b in after if b.ttl == "1h"]
            b_tokens = totals[one_hour[-1].index] if one_hour else a
            c_tokens = totals[after[-1].index] if after else a
            for point in after:
                self._entries[hashes[point.index]] = _Entry(now + TTL_SECONDS[point.ttl], point.ttl)
        return CacheUsage(input_tokens=running - c_tokens, cache_read_input_tokens=a,
                          ephemeral_1h_input_tokens=b_tokens - a, ephemeral_5m_input_tokens=c_tokens - b_tokens)

    def _lookup(self, view: list[Position], hashes: list[str], now: float, points: list[Breakpoint]) -> int | None:
        for point in reversed(points):
            counted = 0
            k = point.index
            while k >= 0 and counted < LOOKBACK:
                entry = self._entries.get(hashes[k])
                if entry is not None and entry.expires > now:
                    entry.expires = now + TTL_SECONDS[entry.ttl]  # a read refreshes the entry
                    return k
                joins_run = k + 1 < len(view) and view[k].kind in ("tool_use", "tool_result") and view[k + 1].kind == view[k].kind
                if not (joins_run and k != point.index):
                    counted += 1
                k -= 1
        return None


def _prefix_hashes(view: list[Position], body: dict[str, Any]) -> list[str]:
    keys = segment_keys(body)
    state = digest("cache")
    hashes: list[str] = []
    current = None
    for position in view:
        while current != position.segment:
            current = {"tools": "system", "system": "messages"}.get(current or "", "tools")
            state = digest(state, current, keys[current])
        state = digest(state, position.element)
        hashes.append(state)
    return hashes
