"""Compaction: locks, the pure plan, hooks and the engine that drives a store through one compaction."""

from .hooks import Hooks

__all__ = ["Hooks"]
