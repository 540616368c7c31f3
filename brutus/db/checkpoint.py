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

from .background import AfterCommits

__all__ = ["Checkpointer"]

log = logging.getLogger(__name__)

DELAY_S = 0.05  # after a commit, wait this long for more before checkpointing (a step is several commits)
CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"


class Checkpointer(AfterCommits):
    """Checkpoints the WAL of the SQLite database at ``path`` in a thread, after the store says it committed."""

    def __init__(self, path: str) -> None:
        super().__init__()
        # absolute now (the thread connects later, maybe after a chdir); opened read-write, never created
        self.path = path
        self._thread_name = f"brutus-checkpoint {path}"
        self._uri = Path(path).expanduser().absolute().as_uri() + "?mode=rw"
        self.runs = 0  # checkpoints run (tests read it, or wait for it: ``wait_for_runs``)
        self._ran = threading.Condition()

    def wait_for_runs(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` checkpoints have run (False if ``timeout`` seconds pass first)."""
        with self._ran:
            return self._ran.wait_for(lambda: self.runs >= count, timeout)

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
