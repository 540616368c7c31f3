"""A thread that works a moment after a store's commits: the WAL checkpoints (``checkpoint.Checkpointer``)
and the search index (``indexer.Indexer``) are two of them.

The thread starts at the first ``committed()`` and blocks on ``_wake`` while nothing is written; ``close()``
stops it (a store used again starts a new one). Called on the thread itself (a dropped store collected
there, its last reference the thread's call), ``close()`` only tells the thread to stop: a thread never
joins itself. A subclass gives ``_run(stop)``, the thread's loop, and its ``_thread_name``.
"""

from __future__ import annotations

import threading

__all__ = ["AfterCommits"]


class AfterCommits:
    """The thread's life (module docstring)."""

    _thread_name = "brutus"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()  # the running thread's own: a new thread gets a new one
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """The store committed a write: work soon (starts the thread the first time)."""
        if self._thread is None:
            self._start()
        if not self._wake.is_set():  # set already: a run is to come, after this commit (set() locks)
            self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (after the run it may be in)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stop.set()
            self._wake.set()
        if thread is not threading.current_thread():
            thread.join(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._stop = stop = threading.Event()  # a thread that outlived close() keeps its own, set
            thread = threading.Thread(target=self._run, args=(stop,), name=self._thread_name, daemon=True)
            thread.start()
            self._thread = thread

    def _run(self, stop: threading.Event) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError
