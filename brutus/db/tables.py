"""The schema: ORM rows (``…Row``) with a naming convention, and the ``pruned_parts`` view.

Rules the rows keep:

- ``messages.seq`` is unique per session and gapless; ``sessions.last_seq`` hands it out (an UPDATE …
  RETURNING, which also serializes concurrent appenders on PostgreSQL).
- ``sessions.boundary_seq`` caches where ``filter_compacted`` starts (the last completed compaction
  boundary, or the tail it keeps); every write that can move a boundary recomputes it in its transaction.
- A tool part's output text lives in ``tool_outputs`` so marking a part pruned never rewrites the text, and
  loading a pruned part never reads it. Token estimates are stored when a part is written.
- On SQLite a large ``metadata`` or tool output is stored packed (zlib, its size in ``<column>_size``: 0009,
  ``brutus.codec.pack``); the SQLite driver packs on write, every reader unpacks.
- ``transcripts`` / ``transcript_entries`` (``brutus.integrations``, 0003) keep an agent SDK's own records
  exactly, one row each, beside the session they are parsed into; deleting the session deletes them.
- The full-text index (0004, 0005, 0008, ``brutus.db.search_ops``) is the database's own business: SQLite's FTS5
  table with its keys, marks and triggers, PostgreSQL's vector table with its GIN index and each row's
  ``search_xid``. They differ per backend, so they are not rows
  here: ``SEARCH_OBJECTS`` names them and ``include_object`` keeps them out of model/migration comparisons.
- Tenants (0011, PostgreSQL only): a ``tenant`` column on every table of session data, filled by its default
  from the transaction's setting and enforced by row-level security; no row here names it (``TENANT_OBJECTS``).

Migrations (``migrations/versions``) create exactly this; a test compares them. ``create_all`` is for nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "Base",
    "CompactionRow",
    "SEARCH_OBJECTS",
    "SEARCH_TEXT_LIMIT",
    "TENANT_OBJECTS",
    "MessageRow",
    "PACKED_TYPES",
    "PRUNED_PARTS_VIEW",
    "PartRow",
    "SessionRow",
    "ToolOutputRow",
    "TranscriptEntryRow",
    "TranscriptRow",
    "ToolStateRow",
    "include_object",
]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# none_as_null: Python None is SQL NULL (not the JSON text 'null'), so "error IS NULL" means no error.
JSONType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


class PackedJSON(JSON):
    """A JSON column whose large values SQLite stores packed (``codec.pack``: zlib, the UTF-8 size in the column
    ``<name>_size`` beside it; 0009). brutus's SQLite driver packs on write; every reader unpacks bytes."""


class PackedText(Text):
    """A text column whose large values SQLite stores packed, as ``PackedJSON`` (``tool_outputs.output``)."""


PackedJSONType = PackedJSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
PACKED_TYPES = (PackedJSON, PackedText)
ID = String(64)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SessionRow(Base):
    __tablename__ = "sessions"
    # the list order, most recently updated first, ties by id: a page after a session is a range scan from its
    # (updated_at, id) position (0007), on both backends.
    __table_args__ = (Index(None, "updated_at", "id"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    parent_id: Mapped[str | None] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    title: Mapped[str | None] = mapped_column(Text)
    directory: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    archived_at: Mapped[int | None] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    boundary_message_id: Mapped[str | None] = mapped_column(ID)
    boundary_seq: Mapped[int] = mapped_column(Integer, default=0)
    # a fork (``store.fork``, 0010): the session it was copied from and that session's last message copied;
    # no foreign key, so deleting the original leaves the fork whole
    forked_from: Mapped[str | None] = mapped_column(ID, index=True)
    forked_at: Mapped[str | None] = mapped_column(ID)


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (
        # "the messages of a session from seq X on": an index range scan.
        UniqueConstraint("session_id", "seq"),
        # finding compaction boundaries without walking the history: the summaries of a session after a
        # seq are a range scan (0002; without seq SQLite's boundary query was quadratic in the history). Only
        # the summaries are in it (0006): its condition is the boundary query's own term, so both planners
        # use it, and a turn's messages write nothing to it.
        Index(
            "ix_messages_summaries",
            "session_id",
            "seq",
            sqlite_where=text("summary IS 1"),
            postgresql_where=text("summary IS true"),
        ),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    parent_id: Mapped[str | None] = mapped_column(ID)
    agent: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str | None] = mapped_column(Text)
    provider_id: Mapped[str | None] = mapped_column(Text)
    model_id: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[bool] = mapped_column(Boolean, default=False)
    synthetic: Mapped[bool] = mapped_column(Boolean, default=False)
    finish: Mapped[str | None] = mapped_column(Text)
    error: Mapped[Any | None] = mapped_column(JSONType)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    tokens_input: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_output: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_reasoning: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_cache_read: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_cache_write: Mapped[int] = mapped_column(BigInteger, default=0)
    part_count: Mapped[int] = mapped_column(Integer, default=0)
    token_estimate: Mapped[int] = mapped_column(BigInteger, default=0)
    meta: Mapped[Any | None] = mapped_column("metadata", PackedJSONType)
    created_at: Mapped[int] = mapped_column(BigInteger)
    completed_at: Mapped[int | None] = mapped_column(BigInteger)
    metadata_size: Mapped[int | None] = mapped_column(Integer)  # SQLite: the size of a packed metadata (0009)


class PartRow(Base):
    __tablename__ = "parts"
    __table_args__ = (
        UniqueConstraint("message_id", "position"),
        # a session's parts, message by message in position order (the load sorts nothing), and its cascade
        # delete; a turn's parts go in at its end, one leaf, as ids are time-ordered (0006)
        Index(None, "session_id", "message_id", "position"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    message_id: Mapped[str] = mapped_column(ID, ForeignKey("messages.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(32))
    data: Mapped[Any] = mapped_column(JSONType)
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class ToolStateRow(Base):
    __tablename__ = "tool_states"
    __table_args__ = (Index(None, "session_id", "compacted_at"),)

    part_id: Mapped[str] = mapped_column(ID, ForeignKey("parts.id", ondelete="CASCADE"), primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    call_id: Mapped[str] = mapped_column(Text)
    tool: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    input: Mapped[Any] = mapped_column(JSONType)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    title: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[Any | None] = mapped_column("metadata", PackedJSONType)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[int | None] = mapped_column(BigInteger)
    ended_at: Mapped[int | None] = mapped_column(BigInteger)
    compacted_at: Mapped[int | None] = mapped_column(BigInteger)
    metadata_size: Mapped[int | None] = mapped_column(Integer)  # SQLite: the size of a packed metadata (0009)


class ToolOutputRow(Base):
    __tablename__ = "tool_outputs"

    part_id: Mapped[str] = mapped_column(ID, ForeignKey("parts.id", ondelete="CASCADE"), primary_key=True)
    output: Mapped[str] = mapped_column(PackedText)
    output_size: Mapped[int | None] = mapped_column(Integer)  # SQLite: the size of a packed output (0009)


class CompactionRow(Base):
    __tablename__ = "compactions"
    __table_args__ = (Index(None, "session_id", "status"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"))
    user_message_id: Mapped[str | None] = mapped_column(ID, ForeignKey("messages.id", ondelete="SET NULL"))
    summary_message_id: Mapped[str | None] = mapped_column(ID, ForeignKey("messages.id", ondelete="SET NULL"))
    trigger: Mapped[str] = mapped_column(String(16))
    auto: Mapped[bool] = mapped_column(Boolean, default=False)
    overflow: Mapped[bool] = mapped_column(Boolean, default=False)
    tail_start_id: Mapped[str | None] = mapped_column(ID)
    status: Mapped[str] = mapped_column(String(16))
    pre_tokens: Mapped[int | None] = mapped_column(BigInteger)
    post_tokens: Mapped[int | None] = mapped_column(BigInteger)
    model: Mapped[str | None] = mapped_column(Text)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    instructions: Mapped[str | None] = mapped_column(Text)
    fallback_used: Mapped[str | None] = mapped_column(String(32))
    boundary: Mapped[Any | None] = mapped_column(JSONType)
    created_at: Mapped[int] = mapped_column(BigInteger)
    completed_at: Mapped[int | None] = mapped_column(BigInteger)


class TranscriptRow(Base):
    """An agent SDK's transcript (a Claude Agent SDK session key, an OpenAI Agents session) mirrored into the
    brutus session ``session_id``: the SDK's key, its write time and the integration's bookkeeping."""

    __tablename__ = "transcripts"
    __table_args__ = (UniqueConstraint("sdk", "project_key", "external_id", "subpath"),)

    session_id: Mapped[str] = mapped_column(ID, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    sdk: Mapped[str] = mapped_column(String(32))
    project_key: Mapped[str] = mapped_column(Text)  # "" where the SDK has no such scope
    external_id: Mapped[str] = mapped_column(Text)  # the SDK's session id
    subpath: Mapped[str] = mapped_column(Text)  # "" for a main transcript
    last_seq: Mapped[int] = mapped_column(Integer, default=0)  # the last entry seq handed out (never reused)
    mtime: Mapped[int] = mapped_column(BigInteger)  # storage write time, epoch ms, increasing
    summary: Mapped[Any | None] = mapped_column(JSONType)  # SDK-owned summary state, kept verbatim
    state: Mapped[Any | None] = mapped_column(JSONType)  # the integration's parsing state
    created_at: Mapped[int] = mapped_column(BigInteger)


class TranscriptEntryRow(Base):
    """One SDK record (a Claude Code JSONL line, a Responses-API item), kept exactly, in order."""

    __tablename__ = "transcript_entries"
    __table_args__ = (
        UniqueConstraint("session_id", "uuid"),  # the idempotency key (NULLs repeat)
        Index(None, "session_id", "call_id"),
    )

    session_id: Mapped[str] = mapped_column(
        ID, ForeignKey("transcripts.session_id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str | None] = mapped_column(Text)
    type: Mapped[str | None] = mapped_column(Text)
    call_id: Mapped[str | None] = mapped_column(Text)  # the tool call an item opens or answers
    message_id: Mapped[str | None] = mapped_column(ID)  # the brutus message it went into, where one is known
    part_id: Mapped[str | None] = mapped_column(ID)
    entry: Mapped[Any] = mapped_column(JSONType)


# What was pruned, when, and how much: one SELECT for an operator (see README).
PRUNED_PARTS_VIEW = """
CREATE VIEW pruned_parts AS
SELECT p.session_id AS session_id,
       p.message_id AS message_id,
       p.id AS part_id,
       t.tool AS tool,
       t.call_id AS call_id,
       t.output_tokens AS tokens,
       t.compacted_at AS compacted_at
FROM tool_states t
JOIN parts p ON p.id = t.part_id
WHERE t.compacted_at IS NOT NULL
"""


# -- the full-text index (0004): what each backend indexes, and the objects it adds -----------------------

SEARCH_TEXT_LIMIT = 200_000  # characters of each text a document reads (PostgreSQL refuses a tsvector > 1 MB)

SEARCH_OBJECTS = frozenset(
    {
        # SQLite: the key table, the marks, the stale list, the FTS5 table and its shadow tables (the views and
        # triggers are not compared)
        "search_keys",
        "search_state",
        "search_stale",
        "search_index",
        "search_index_data",
        "search_index_idx",
        "search_index_docsize",
        "search_index_config",
        # PostgreSQL: the vectors and their GIN index, the rows' writing transaction and its indexes
        "search_vectors",
        "ix_search_vectors",
        "ix_search_vectors_created_at",
        "search_xid",
        "ix_parts_search_xid",
        "ix_tool_states_search_xid",
        "ix_tool_outputs_search_xid",
    }
)


# PostgreSQL's tenants (0011, ``brutus.db.tenants``): each table's ``tenant`` column and the list's index; SQLite
# keeps a tenant in a file of its own
TENANT_OBJECTS = frozenset({"tenant", "ix_sessions_tenant"})


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """alembic's ``include_object`` hook: everything but the backend-specific objects (the search index's, the
    tenants')."""
    if name in SEARCH_OBJECTS or name in TENANT_OBJECTS:
        return False
    # PostgreSQL's transcript key leads with the tenant (0011); the model's, without it, is SQLite's
    if type_ == "unique_constraint":
        reflected_columns = obj.columns if reflected else getattr(compare_to, "columns", ())
        return "tenant" not in reflected_columns
    return True
