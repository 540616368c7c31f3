"""Tenants (PostgreSQL): every row says whose it is, and row-level security shows a transaction its tenant's only.

- A ``tenant`` text column on every table holding session data (``TENANT_TABLES``), NOT NULL. It is added with
  the constant default '' (no table rewrite: existing rows are tenant '', the untenanted store's), then its
  default becomes the transaction's setting ``brutus.tenant`` (''  when unset), so no INSERT names it.
- Row-level security, enabled and FORCEd (the table's owner is subject too), one policy per table: a row is
  seen, written and changed only where ``tenant`` is the setting. ``SessionStore.open(url, tenant=...)``
  sets it per transaction (``brutus.db.tenants``); superusers and BYPASSRLS roles pass the policies, so a
  tenanted store refuses to run as one.
- ``search_state`` gets a row per tenant (its key): one tenant's index run marks only its own rows indexed,
  and ``search_pending`` reads the mark of the transaction's tenant (a role that passes the policies, such as
  the owner with BYPASSRLS, sees every tenant's row: the view names the one it means). A search vector is its
  part's tenant's (``brutus.db.search_ops``).
- ``ix_sessions_tenant``: a tenant's list (newest first) is a range scan of its own sessions.
- An SDK's transcript key is unique per tenant (``uq_transcripts_…`` leads with ``tenant``): two tenants
  may name their OpenAI Agents sessions alike.
- The views read with the caller's rights (``security_invoker``, PostgreSQL 15+), so their owner's
  superuser status does not lift the policies through them.
- SQLite: nothing; a tenant there is a file of its own (``brutus.db.tenants``).

Data migrations after this one must run as a role that bypasses row-level security (the owner with
BYPASSRLS, or a superuser): under the policies an UPDATE sees tenant '' only.

One transaction: the caller's (``brutus.db.migrate``). No row is rewritten; the index is built from one read
of ``sessions``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""
import importlib.util
from pathlib import Path
from typing import Sequence, Union

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

TENANT_TABLES = (
    "sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions", "transcripts",
    "transcript_entries", "search_vectors", "search_state",
)
CURRENT = "coalesce(current_setting('brutus.tenant', true), '')"
VIEWS = ("pruned_parts", "search_pending")
TRANSCRIPT_KEY = "uq_transcripts_sdk_project_key_external_id_subpath"  # 0003's name, kept


def _revision(name: str):
    """An older revision's module, for its definitions (an old revision is read, never changed)."""
    spec = importlib.util.spec_from_file_location(f"brutus_revision_{name[:4]}", Path(__file__).with_name(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


R0005 = _revision("0005_search_off_the_write_path.py")


def _pending_view(mark: str) -> str:
    """0005's ``search_pending`` with the index mark read as ``mark`` (a row of ``search_state``)."""
    selects = []
    for table, id_column, kind, document, scope, _, _ in R0005.PG_TABLES:
        pending = R0005.PG_PENDING_ROW.replace("FROM search_state", mark)
        selects.append(
            f"SELECT {id_column} AS part_id, {kind} AS kind, {document} AS body FROM {table} "
            f"WHERE {pending}" + (f" AND {scope}" if scope else "")
        )
    return "CREATE VIEW search_pending AS " + " UNION ALL ".join(selects)


def _pg_upgrade(version: int) -> list[str]:
    statements = []
    for table in TENANT_TABLES:
        statements += [
            f"ALTER TABLE {table} ADD COLUMN tenant text NOT NULL DEFAULT ''",
            f"ALTER TABLE {table} ALTER COLUMN tenant SET DEFAULT {CURRENT}",
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY tenant ON {table} USING (tenant = {CURRENT}) WITH CHECK (tenant = {CURRENT})",
        ]
    statements += [
        "DROP VIEW search_pending",
        _pending_view(f"FROM search_state WHERE tenant = {CURRENT}"),
        "ALTER TABLE search_state ADD CONSTRAINT pk_search_state PRIMARY KEY (tenant)",
        "CREATE INDEX ix_sessions_tenant ON sessions (tenant, updated_at, id)",
        f"ALTER TABLE transcripts DROP CONSTRAINT {TRANSCRIPT_KEY}",
        f"ALTER TABLE transcripts ADD CONSTRAINT {TRANSCRIPT_KEY} UNIQUE (tenant, sdk, project_key, external_id, subpath)",
    ]
    if version >= 150000:
        statements += [f"ALTER VIEW {view} SET (security_invoker = true)" for view in VIEWS]
    return statements


def _pg_downgrade(version: int) -> list[str]:
    statements = ["ALTER VIEW pruned_parts RESET (security_invoker)"] if version >= 150000 else []
    statements += [
        "DROP VIEW search_pending",
        _pending_view("FROM search_state"),
        "DROP INDEX ix_sessions_tenant",
        f"ALTER TABLE transcripts DROP CONSTRAINT {TRANSCRIPT_KEY}",
        f"ALTER TABLE transcripts ADD CONSTRAINT {TRANSCRIPT_KEY} UNIQUE (sdk, project_key, external_id, subpath)",
    ]
    for table in TENANT_TABLES:
        statements += [
            f"DROP POLICY tenant ON {table}",
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
        ]
    # the tenants' own index marks go; the one left marks everything pending, as it cannot vouch for their rows
    statements += [
        "ALTER TABLE search_state DROP CONSTRAINT pk_search_state",
        "UPDATE search_state SET indexed = CAST('3:3:' AS pg_snapshot) "
        "WHERE EXISTS (SELECT 1 FROM search_state WHERE tenant <> '')",
        "DELETE FROM search_state WHERE tenant <> ''",
    ]
    statements += [f"ALTER TABLE {table} DROP COLUMN tenant" for table in TENANT_TABLES]
    return statements


def _version() -> int:
    return int(op.get_bind().exec_driver_sql("SHOW server_version_num").scalar())


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _pg_upgrade(_version()):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _pg_downgrade(_version()):
            op.execute(statement)
