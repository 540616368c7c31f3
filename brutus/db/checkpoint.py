"""WAL checkpoints off the writer's path (SQLite).

In WAL mode a commit appends the pages it changed to the ``-wal`` file; a checkpoint copies them back into
the database and syncs both files. SQLite runs it inside the commit that crosses ``wal_autocheckpoint``, so
every few dozen agent calls one call waits for two syncs. A store keeps a ``Checkpointer``: a thread of its
own, with a sqlite3 connection of its own, that runs ``PRAGMA wal_checkpoint(PASSIVE)`` shortly after the
store commits. A passive checkpoint takes no lock a writer or reader needs: it copies what no reader still
reads and never waits. When the writer pauses (an agent waiting for its model), the thread copies
everything, the writer's next commit starts the log over, and no commit runs a checkpoint itself. The
automatic checkpoint stays on as the backstop, at 16 MB (``engine.WAL_CHECKPOINT_BYTES``): a writer that
never pauses reaches it, and that checkpoint finds most pages copied already; so does a store whose thread
is gone (in a forked child). Nothing about what is durable changes: the commit is in the WAL either way.

The thread starts at the first commit and blocks while nothing is written; ``close()`` stops it and closes
its connection (a store used again starts a new one).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["Checkpointer"]

log = logging.getLogger(__name__)

DELAY_S = 0.05  # after a commit, wait this long for more before checkpointing (a step is several commits)
CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"


class Checkpointer:
    """Checkpoints the WAL of the SQLite database at ``path`` in a thread, after the store says it committed."""

    def __init__(self, path: str) -> None:
        # absolute now (the thread connects later, maybe after a chdir); opened read-write, never created
        self.path = path
        self._uri = Path(path).expanduser().absolute().as_uri() + "?mode=rw"
        self.runs = 0  # checkpoints run (tests read it, or wait for it: ``wait_for_runs``)
        self._ran = threading.Condition()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()  # the running thread's own: a new thread gets a new one
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """The store committed a write: checkpoint soon (starts the thread the first time)."""
        if self._thread is None:
            self._start()
        if not self._wake.is_set():  # set already: a checkpoint is to come, after this commit (set() locks)
            self._wake.set()

    def wait_for_runs(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` checkpoints have run (False if ``timeout`` seconds pass first)."""
        with self._ran:
            return self._ran.wait_for(lambda: self.runs >= count, timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._stop = stop = threading.Event()  # a thread that outlived close() keeps its own, set
            thread = threading.Thread(
                target=self._run, args=(stop,), name=f"brutus-checkpoint {self.path}", daemon=True
            )
            thread.start()
            self._thread = thread

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (after the checkpoint it may be running) and close its connection."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stop.set()
            self._wake.set()
        if thread is not threading.current_thread():  # as the indexer's: never join the thread from itself
            thread.join(timeout)

    def _run(self, stop: threading.Event) -> None:
        wake = self._wake
        try:
            conn = sqlite3.connect(self._uri, uri=True, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            log.debug("brutus: no background checkpoints for %s: %s", self.path, exc)
            return
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            while True:
                wake.wait()
                if stop.wait(DELAY_S):
                    return
                wake.clear()
                try:
                    conn.execute(CHECKPOINT).fetchall()
                    with self._ran:
                        self.runs += 1
                        self._ran.notify_all()
                except sqlite3.Error as exc:  # the commit's own automatic checkpoint is still there
                    log.debug("brutus: background checkpoint of %s failed: %s", self.path, exc)
        finally:
            conn.close()
