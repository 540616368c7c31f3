"""Multi-step flows: what a compaction, a tier run, gc, check or a search does, written once and run by both
stores.

A flow is a generator that yields **actions** and is sent each action's outcome; it never sees a connection,
a summarizer or an event loop. Compaction (``brutus.compaction.engine.compaction_flow``), the tiers
(``brutus.tiers.manager.tier_flow``), gc (``brutus.db.gc_ops.gc_flow``), check
(``brutus.db.check_ops.check_flow``) and search (``brutus.db.search_ops.search_flow``) are flows. The
actions:

- ``Tx(op, write)``: a database operation (``brutus.db.*_ops``) in a transaction of its own; the outcome is
  what the operation returns.
- ``Summarize(request)``: the summarizer with its fallbacks (``brutus.summarizers.fallbacks``); the outcome is
  ``(summary, fallback)``.
- ``Vacuum(full)`` and ``StorageBytes()``: gc's storage steps, outside any transaction (``brutus.db.gc_ops``);
  ``StorageBytes`` checkpoints SQLite's WAL (TRUNCATE) before it measures.
- ``Locked(session_id, op)``: ``op`` in a write transaction while holding the session's compaction lock
  (``brutus.compaction.locks``); ``CompactionInProgress`` if another caller holds it.
- ``HeldLocks(session_ids)``: which of them some process holds the compaction lock of now.
- a flow may define its own (the tiers' ``Append``).

``drive_flow(flow, handle)`` (sync store) and ``adrive_flow(flow, handle)`` (async store) run a flow: each
action goes to ``handle``; what it returns is sent back, what it raises is thrown into the flow, which may
catch it (a compaction marks its marker failed, then raises again). The flow's return value is theirs. An
async run that is cancelled closes the flow instead: nothing more is written, as after a crash.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from .db.statements import Op

__all__ = ["HeldLocks", "Locked", "StorageBytes", "Summarize", "Tx", "Vacuum", "adrive_flow", "drive_flow"]

T = TypeVar("T")


@dataclass(frozen=True)
class Tx:
    op: Op
    write: bool = True


@dataclass(frozen=True)
class Summarize:
    request: Any  # brutus.summarizers.SummaryRequest


@dataclass(frozen=True)
class Vacuum:
    full: bool = True  # PostgreSQL: VACUUM FULL, else a plain VACUUM; SQLite: VACUUM, else an incremental step
    pages: int = 0  # SQLite's incremental step: the free pages to give back (the outcome: those left)


@dataclass(frozen=True)
class StorageBytes:
    pass


@dataclass(frozen=True)
class Locked:
    session_id: str
    op: Op


@dataclass(frozen=True)
class HeldLocks:
    session_ids: set[str]


def drive_flow(flow: Generator[Any, Any, T], handle: Callable[[Any], Any]) -> T:
    """Run ``flow``, each action through ``handle`` (see the module docstring)."""
    done, value = _advance(flow.send, None)  # a new generator: send(None) starts it
    while not done:
        try:
            outcome = handle(value)
        except BaseException as exc:
            done, value = _advance(flow.throw, exc)
        else:
            done, value = _advance(flow.send, outcome)
    return value


async def adrive_flow(flow: Generator[Any, Any, T], handle: Callable[[Any], Awaitable[Any]]) -> T:
    """``drive_flow`` for asyncio: ``handle`` is awaited; a cancelled run closes the flow."""
    done, value = _advance(flow.send, None)  # a new generator: send(None) starts it
    while not done:
        try:
            outcome = await handle(value)
        except asyncio.CancelledError:
            flow.close()  # as a crash: nothing more is written
            raise
        except BaseException as exc:
            done, value = _advance(flow.throw, exc)
        else:
            done, value = _advance(flow.send, outcome)
    return value


def _advance(resume: Callable[[Any], Any], value: Any) -> tuple[bool, Any]:
    """Resume a flow (``flow.send`` an outcome, ``flow.throw`` an error): ``(False, its next action)``, or
    ``(True, its return value)`` once it has returned."""
    try:
        return False, resume(value)
    except StopIteration as stop:
        return True, stop.value
