"""Tenants: ``SessionStore.open(url, tenant="acme")`` sees and writes that tenant's sessions only.

- PostgreSQL: row-level security (migration 0011). Every table of session data has a ``tenant`` column whose
  default is the transaction's setting ``brutus.tenant``, and a policy that shows and accepts only rows of
  that tenant. A tenanted store sets it at the start of each transaction (``SET LOCAL``: local to the
  transaction, so a pooler that hands the connection on passes nothing along); an untenanted store sets
  nothing and is tenant ''. Superusers and BYPASSRLS roles pass every policy, so a tenanted store refuses to
  run as one (``prepare_tenant``). Each tenant keeps its own search index mark (``search_state``).
- SQLite: one file per tenant, beside the one named: ``x.db`` with tenant ``acme`` is ``x@acme.db``
  (``tenant_url``). Nothing in a file names a tenant.

Session, message and part ids stay global on PostgreSQL: an id another tenant holds cannot be taken again (the
database refuses it, and nothing is written).
"""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..errors import InvalidInput
from .engine import normalize_url

__all__ = ["TENANT_NAME", "check_tenant", "prepare_tenant", "set_tenant", "tenant_url"]

TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# local to the transaction; a SET takes no snapshot, so a transaction may still choose its isolation after it
# (``history_ops.consistent_reads``). The name is checked: no quote in it.
_SETTING = "SET LOCAL brutus.tenant = '{tenant}'"
_BYPASSES = text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
# the tenant's index mark, made before its first write: what it writes later is pending against it
_SEARCH_STATE = text("INSERT INTO search_state (indexed) VALUES (pg_current_snapshot()) ON CONFLICT (tenant) DO NOTHING")


def check_tenant(tenant: str | None) -> str | None:
    """``tenant`` if it is a tenant's name (a letter or digit, then up to 62 letters, digits, ``_ . -``), or
    None for none; ``InvalidInput`` otherwise."""
    if tenant is None:
        return None
    if not isinstance(tenant, str) or TENANT_NAME.fullmatch(tenant) is None:
        raise InvalidInput(
            f"not a tenant name: {tenant!r} (a letter or digit, then up to 62 letters, digits, '_', '.' or '-')"
        )
    return tenant


def tenant_url(url: str, tenant: str | None) -> str:
    """The URL a tenant's store opens: on SQLite the tenant's own file beside ``url``'s (``x.db`` → ``x@acme.db``),
    elsewhere ``url`` itself."""
    if tenant is None:
        return url
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        return url  # refused, with its reason, where the engine is made
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return url
    path = Path(parsed.database)
    return parsed.set(database=str(path.with_name(f"{path.stem}@{tenant}{path.suffix}"))).render_as_string(
        hide_password=False
    )


def set_tenant(engine: Engine, tenant: str) -> None:
    """Every transaction of ``engine`` (an async engine's ``sync_engine`` too) starts by setting its tenant:
    one statement more per transaction, on a tenanted PostgreSQL store only."""
    setting = _SETTING.format(tenant=tenant)

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001  SQLAlchemy's Connection
        conn.exec_driver_sql(setting)


def prepare_tenant(engine: Engine, tenant: str, *, read_only: bool) -> None:
    """Before a tenanted PostgreSQL store is used: refuse a role that row-level security does not hold (it
    would see every tenant), and make the tenant's search index mark (not for a read-only store, which
    writes nothing)."""
    with engine.begin() as connection:
        if connection.execute(_BYPASSES).scalar():
            raise InvalidInput(
                f"tenant {tenant!r}: the role {engine.url.username or '(default)'} is a superuser or has BYPASSRLS, "
                "so row-level security would not hold it to its tenant; connect as the application's role "
                "(README: Tenants)"
            )
        if not read_only:
            connection.exec_driver_sql(_SETTING.format(tenant=tenant))
            connection.execute(_SEARCH_STATE)
