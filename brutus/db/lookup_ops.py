"""``resolve_session``: a session id from a unique prefix of it (what a person types), as a read operation.

An exact id wins, even when it also starts a longer one (a Claude Code sub-agent session's id is its parent's
plus a suffix). Otherwise the ids starting with the prefix are an index range scan on the primary key,
``id >= prefix AND id < upper`` where ``upper`` is the prefix with its last character raised by one; never a
``LIKE`` scan. Ids are ASCII, so on SQLite and on a PostgreSQL database in byte order that range is exactly the
ids with the prefix; each id found is also checked with ``startswith``, so a database in another collation
finds no wrong session either.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from ..errors import InvalidInput, NotFound
from .ops import check_id
from .statements import Op, S, step

__all__ = ["SHOWN", "resolve_session"]

SHOWN = 5  # the candidates an ambiguous prefix lists


def resolve_session(prefix: Any) -> Op:
    """The one session id equal to or starting with ``prefix``: ``NotFound`` when none does, ``InvalidInput``
    naming a few candidates when several do."""
    prefix = check_id("session", prefix)
    exact = yield step(select(S.c.id).where(S.c.id == prefix), fetch="first")
    if exact is not None:
        return exact.id
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    rows = yield step(
        select(S.c.id).where(S.c.id >= prefix, S.c.id < upper).order_by(S.c.id).limit(SHOWN + 1), fetch="all"
    )
    found = [r.id for r in rows if r.id.startswith(prefix)]
    if not found:
        raise NotFound("session", prefix)
    if len(found) > 1:
        count = f"more than {SHOWN}" if len(found) > SHOWN else str(len(found))
        more = ", …" if len(found) > SHOWN else ""
        raise InvalidInput(
            f"session id {prefix!r} is ambiguous, the start of {count} ids ({', '.join(found[:SHOWN])}{more}): "
            "give more of it"
        )
    return found[0]
