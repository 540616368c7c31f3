"""Scripted replies: what the fake answers once a request is accepted.

Rules:

- A ``Reply`` is the content the fake returns, as plain dicts, and a ``stop_reason``. The fake fills in the
  rest of the message (``id``, ``model`` echoed from the request, ``role``, ``type``, ``usage``), gives a
  ``thinking`` block its ``signature``, a ``redacted_thinking`` block its ``data``, a ``compaction`` block its
  ``signature``, and a ``tool_use`` without an ``id`` a ``toolu_…`` one. A block that already carries its
  signature (or ``data``, or ``id``) is returned verbatim: use that to hand a client a forged block.
- ``stop_reason`` defaults to ``"tool_use"`` when the content has a ``tool_use`` block, else ``"end_turn"``;
  ``output_tokens`` defaults to the token count of the content (see ``brutus.testing.prompt``).
- ``Reply(..., cut_after=n)``: a streamed answer stops after its first ``n`` events and the connection is
  dropped (``brutus.testing.stream``); a non-streaming answer ignores it.
- ``Reply("text")`` is one text block. ``Reply.error(status, type, message)`` answers with that error instead
  (for example ``Reply.error(529, "overloaded_error", "Overloaded")``).
- A script is a callable ``script(request) -> Reply | str | None`` (called with a copy of the request body),
  or an iterable of such items (a ``Reply``, a string, or a callable), consumed one per accepted request.
  ``None`` (or no script at all) means the default: the reply text ``"OK"``, and for a compaction request a
  deterministic summary. A script with nothing left, or one that raises, makes the request fail with a
  500 ``api_error`` naming the problem, recorded like any other request.
- The script is asked only for requests the fake accepts; refused requests consume nothing. A compaction
  request (the ``compaction`` parameter) asks it too: a ``compaction`` block in the reply, or its text, is
  the summary; an empty reply with a ``stop_reason`` (say ``"max_tokens"``) answers "no summary".
- A ``max_tokens: 0`` request (cache pre-warming) is answered without asking the script.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from .errors import ApiError


@dataclass(frozen=True)
class Reply:
    """One scripted answer (see the module rules). ``failure`` is set by ``Reply.error``."""

    content: Sequence[dict[str, Any]] | str = ()
    stop_reason: str | None = None
    output_tokens: int | None = None
    stop_sequence: str | None = None
    cut_after: int | None = None  # streamed: drop the connection after this many events (see ``stream``)
    failure: ApiError | None = field(default=None, compare=False)

    @classmethod
    def error(cls, status: int, type: str, message: str) -> Reply:  # noqa: A002 - the API's field name
        """A reply that is an HTTP error: ``{"type": "error", "error": {"type": type, "message": message}}``."""
        return cls(failure=ApiError(status, type, message))

    def blocks(self) -> list[dict[str, Any]]:
        """A fresh copy of the content as a list of blocks."""
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}]
        return copy.deepcopy([dict(block) for block in self.content])


Item = Union[Reply, str, None, Callable[[dict[str, Any]], Any]]
Script = Union[Callable[[dict[str, Any]], Any], Iterable[Item], None]


class ScriptRunner:
    """Turns any accepted script shape into one ``Reply`` (or None) per accepted request."""

    def __init__(self, script: Script) -> None:
        self._lock = threading.Lock()
        self._call: Callable[[dict[str, Any]], Any] | None = None
        self._items: Iterator[Item] | None = None
        if script is None:
            self._call = lambda request: None
        elif callable(script) and not isinstance(script, (list, tuple)):
            self._call = script
        else:
            self._items = iter(script)

    def next(self, request: dict[str, Any], number: int) -> Reply | None:
        """The reply for the ``number``-th request (1-based); ApiError(500) when the script fails."""
        with self._lock:
            try:
                if self._call is not None:
                    item: Any = self._call(copy.deepcopy(request))
                else:
                    assert self._items is not None
                    try:
                        item = next(self._items)
                    except StopIteration:
                        raise ApiError(500, "api_error", f"FakeMessagesAPI: the script has no reply left for request #{number}") from None
                    if callable(item) and not isinstance(item, Reply):
                        item = item(copy.deepcopy(request))
            except ApiError:
                raise
            except Exception as exc:  # the script's own bug: surface it through the client
                raise ApiError(500, "api_error", f"FakeMessagesAPI: the script raised {type(exc).__name__}: {exc}") from exc
        if item is None or isinstance(item, Reply):
            return item
        if isinstance(item, str):
            return Reply(item)
        raise ApiError(500, "api_error", f"FakeMessagesAPI: the script returned {type(item).__name__}, not a Reply")
