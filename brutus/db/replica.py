"""A read replica: which reads may go to a PostgreSQL streaming standby, and when they go to the primary.

Rules (``SessionStore.open(url, read_url=...)`` and the async store keep them):

- Only reads declared lag-tolerant go to the replica: ``Tx(op, write=False, replica=True)``, which listing
  (``list_sessions``), ``search``, ``stats`` and ``export`` yield. Every write, every other read (``get_session``,
  ``messages``, a live ``Conversation``'s loads) and everything inside ``store.batch()`` runs on the primary.
- Read your writes: a replica read sees at least every write this store has committed (the schema too when
  its open migrated it). After a write, the store's next replica read first asks the primary where its WAL
  ends (one query for all the writes since, one thread or task at a time: the others wait for its answer);
  the replica serves the read only if it has replayed that far, checked by a statement of its own just before
  the read's REPEATABLE READ transaction begins, so the read's snapshot, taken by its first statement, has
  everything replayed by the time of the check. (Checked as that first statement, the snapshot would precede
  the check by a little: replay could pass the position between the two, and the read miss the write.)
  Otherwise the read runs on the primary. Writes of other processes reach a replica read after the replica's lag.
- A replica that falls behind serves nothing: beyond ``max_lag`` seconds (``read_max_lag``, default
  ``MAX_LAG_S``, PostgreSQL's own default for how long replay may wait for a conflicting query; None: no bound),
  reads go to the primary. The same check measures it, on the replica, without asking the primary: it has WAL
  received and not replayed yet, and the last transaction it replayed committed more than ``max_lag`` seconds
  ago; or no WAL receiver is connected to the primary (nothing says how far it has moved on since). So a
  replica whose replay is held up or paused, or cut off from the primary, stops serving within ``max_lag``; one
  whose WAL arrives late over a slow link is measured only from what it received. A standby fed from a WAL
  archive alone has no receiver: give it ``read_max_lag=None``.
- A replica that fails (down, the connection cut, a query cancelled by replay) serves nothing for
  ``RETRY_S`` seconds: reads go to the primary and the replica is tried again after that. A failure before the
  read began (connecting, the check) falls back to the primary in the same call; one in the middle of the read
  raises ``Unavailable`` (retryable: the retry runs on the primary).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..errors import InvalidInput, Unavailable
from .engine import normalize_url, redact
from .statements import Op, step

__all__ = ["MAX_LAG_S", "READ", "RETRY_S", "Replica", "caught_up", "check_max_lag", "engine_settings", "failure",
           "primary_position"]

MAX_LAG_S = 30.0  # a replica further behind serves no read (``read_max_lag``; max_standby_streaming_delay's default)
RETRY_S = 5.0  # how long a failed replica rests before reads try it again
CONNECT_TIMEOUT_S = 3  # a replica that does not accept a connection within this is down
READ = {"isolation_level": "REPEATABLE READ"}  # a replica read's transaction: the check and the read, one snapshot

# The end of the last WAL record inserted: the insert position, except right after a page header (24 bytes,
# 40 on a segment's first page), where it is the page's start: a standby that replayed up to there has every
# record before it, and never reports a position inside a header.
_POSITION = text(
    "SELECT p - CASE WHEN p % b <= 40 THEN p % b ELSE 0 END FROM (SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)"
    "::bigint AS p, current_setting('wal_block_size')::bigint AS b) AS wal"
)
_CAUGHT_UP = text("SELECT coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn) >= :needed, false)")
# ...and not further behind than :max_lag seconds, measured on the replica (module docstring)
_CAUGHT_UP_WITHIN = text(
    "SELECT coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn) >= :needed"
    " AND EXISTS (SELECT FROM pg_stat_wal_receiver) AND (pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn()"
    " OR clock_timestamp() - pg_last_xact_replay_timestamp() <= make_interval(secs => :max_lag)), false)"
)


def engine_settings(url: str, read_url: str) -> dict[str, Any]:
    """The ``make_engine`` arguments for the replica at ``read_url`` of the primary at ``url``;
    ``InvalidInput`` unless both are PostgreSQL (SQLite has no replicas: one file, read by every process).
    Its pooled connections are checked as the primary's are (``engine.pg_events``, no round trip); one that
    died all the same fails the caught-up check, every replica read's first statement, and the read falls
    back to the primary."""
    for name, value in (("url", url), ("read_url", read_url)):
        try:
            backend = make_url(normalize_url(value)).get_backend_name()
        except ArgumentError:
            raise InvalidInput(f"not a database URL: {value!r}") from None
        if backend != "postgresql":
            raise InvalidInput(
                f"read_url needs PostgreSQL for both the primary and the replica; {name} is {backend} ({redact(value)})"
            )
    return {"create": False, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}


def check_max_lag(max_lag: float | None) -> float | None:
    """``read_max_lag`` as given, or ``InvalidInput`` unless it is None or a positive number of seconds."""
    if max_lag is None:
        return None
    if isinstance(max_lag, bool) or not isinstance(max_lag, (int, float)) or not math.isfinite(max_lag) \
            or max_lag <= 0:
        raise InvalidInput(f"read_max_lag is a number of seconds above 0, or None for no bound; got {max_lag!r}")
    return float(max_lag)


def failure(replica: Replica, exc: Exception) -> Unavailable:
    """A replica that failed in the middle of a read: it rests (``Replica.failed``), and the call raises this."""
    replica.failed()
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return Unavailable(f"the read replica failed during the read: {reason} (retryable: the primary serves it meanwhile)")


def primary_position() -> Op:
    """On the primary: where its WAL ends now (a byte offset), at or past the end of every committed write."""
    return int((yield step(_POSITION, {}, fetch="first"))[0])


def caught_up(needed: int, max_lag: float | None = None) -> Op:
    """On the replica: whether it has replayed the primary's WAL up to ``needed``, and is not further behind than
    ``max_lag`` seconds (None: no bound); false on a server that is not replaying (not a standby)."""
    if max_lag is None:
        return bool((yield step(_CAUGHT_UP, {"needed": needed}, fetch="first"))[0])
    return bool((yield step(_CAUGHT_UP_WITHIN, {"needed": needed, "max_lag": max_lag}, fetch="first"))[0])


class Replica:
    """A store's replica: its engine, the WAL position its reads must see, and whether it is resting after a
    failure (module docstring). Shared by the threads or tasks of one store: ``lock`` (a ``threading.Lock``, an
    ``asyncio.Lock`` on the async store) is held while one of them reads the primary's position."""

    def __init__(self, engine: Any, lock: Any, *, max_lag: float | None = MAX_LAG_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine  # an Engine, or an AsyncEngine on the async store
        self.lock = lock
        self.max_lag = max_lag
        self.clock = clock
        self.needed = 0  # the primary's WAL position the replica must have replayed
        self.stale = False  # this store wrote since ``needed`` was read
        self.down_until = 0.0

    def wrote(self) -> None:
        """A write of this store committed: the next replica read asks the primary where it is."""
        self.stale = True

    def asking(self) -> bool:
        """Whether a read must go through ``lock`` first: this store wrote since the position was read, or
        another thread or task is reading it now (it cleared ``stale`` as it began: a read that went on without
        waiting would check the replica against the position from before that write)."""
        return self.stale or self.lock.locked()

    def take_stale(self) -> bool:
        """Under ``lock``: whether the primary's position must be read first (and the store forgets it wrote:
        cleared before that read, so a write committing meanwhile asks again)."""
        stale, self.stale = self.stale, False
        return stale

    def seen(self, position: int) -> None:
        """Under ``lock``: the primary's position, read after this store's writes: the least the replica must
        have replayed from now on."""
        self.needed = max(self.needed, position)

    def usable(self) -> bool:
        """Whether reads may try the replica (it is not resting after a failure)."""
        return self.clock() >= self.down_until

    def failed(self) -> None:
        """The replica failed: reads go to the primary for ``RETRY_S`` seconds."""
        self.down_until = self.clock() + RETRY_S
