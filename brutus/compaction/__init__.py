"""Compaction: locks, the pure plan, hooks and the engine that drives a store through one compaction.

Floor: ``plan.py`` and ``hooks.py`` are rules; ``engine.py`` is the compaction as a flow (``brutus.flows``) over
the database operations and the summarizers, run by either store; ``locks.py`` is what the runners hold.
Nothing here imports a store."""

from .hooks import Hooks

__all__ = ["Hooks"]
