"""Fixtures: stores on real SQLite files and on the real PostgreSQL server.

PostgreSQL runs when ``BRUTUS_TEST_POSTGRES_URL`` is set (``.ci/run`` sets it). Each test run creates its own
database on that server; tests share it and start from empty tables. Without the URL the tests on the
``postgresql`` backend are deselected and the header says so once; under CI (``CI`` set) a missing URL is an
error, never a silent skip.

The slow reliability tests (marked ``slow``: crashes, races, fuzzing, every corpus session) run when
``BRUTUS_TEST_SLOW`` or ``CI`` is set (``.ci/run`` sets it) or when ``-m`` chooses; otherwise they are
deselected, and the header says so.

``BRUTUS_TEST_PGBOUNCER_URL`` names a pgbouncer in ``pool_mode = transaction`` in front of that server
(``.ci/run`` starts one): the tests marked ``pooler`` (tests/test_pooler.py) run when it is set and are
deselected otherwise (under CI its absence is an error). The pooler pass, ``BRUTUS_TEST_THROUGH_POOLER=1``
(``.ci/run`` runs the suite a second time so): the databases are still created and dropped directly on the
server, but the tests get URLs through the pooler (same database name, the pooler's host, port, user and
``?pooler=transaction``), and only the tests on the ``postgresql`` backend run (the ``pooler`` tests, those
on the throw-away clusters of ``pg_clusters`` and those marked ``direct`` ran in the first pass). A test that opens its own
SQLAlchemy engine or psycopg connection on such a URL takes ``plain_url(url)``: without the query parameter
only brutus knows.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brutus import codec
from brutus.db.engine import normalize_url, redact
from brutus.store import SessionStore

PG_ENV = "BRUTUS_TEST_POSTGRES_URL"
POOLER_ENV = "BRUTUS_TEST_PGBOUNCER_URL"
THROUGH_POOLER_ENV = "BRUTUS_TEST_THROUGH_POOLER"
BACKENDS = ["sqlite", "postgresql"]
TABLES = "compactions, tool_outputs, tool_states, parts, messages, sessions"


SLOW_ENV = "BRUTUS_TEST_SLOW"


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("CI") and not os.environ.get(PG_ENV):
        raise pytest.UsageError(f"CI is set but {PG_ENV} is not: the PostgreSQL suite must run in CI")
    if os.environ.get("CI") and not os.environ.get(POOLER_ENV):
        raise pytest.UsageError(f"CI is set but {POOLER_ENV} is not: the pooler tests must run in CI")
    if os.environ.get(THROUGH_POOLER_ENV) and not (os.environ.get(POOLER_ENV) and os.environ.get(PG_ENV)):
        raise pytest.UsageError(f"{THROUGH_POOLER_ENV} needs {POOLER_ENV} and {PG_ENV} (the databases are made on the server)")


def _runs_slow(config: pytest.Config) -> bool:
    return bool(os.environ.get(SLOW_ENV) or os.environ.get("CI") or config.getoption("markexpr"))


def pytest_report_header(config: pytest.Config) -> list[str]:
    if _runs_slow(config):
        lines = ["brutus: slow reliability tests included"]
    else:
        lines = [f"brutus: slow reliability tests deselected (set {SLOW_ENV}=1 to run them, as .ci/run does)"]
    if os.environ.get(PG_ENV):
        lines.append("brutus: PostgreSQL tests included")
    else:
        lines.append(f"brutus: PostgreSQL tests deselected (set {PG_ENV}=postgresql+psycopg://… to run them, as .ci/run does)")
    if _through_pooler():
        lines.append(f"brutus: the pooler pass: PostgreSQL tests only, through {redact(os.environ[POOLER_ENV])}")
    elif not os.environ.get(POOLER_ENV):
        lines.append(f"brutus: pooler tests deselected (set {POOLER_ENV}=postgresql+psycopg://… to a pgbouncer, as .ci/run does)")
    return lines


def _through_pooler() -> bool:
    return bool(os.environ.get(THROUGH_POOLER_ENV))


def _on_postgres(item: pytest.Item) -> bool:
    """Whether ``item`` runs on the PostgreSQL backend: a fixture (``backend``, ``crash_runs``) parametrized
    with ``BACKENDS`` took ``"postgresql"``."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgresql" in callspec.params.values()


def _left_out(item: pytest.Item, *, slow: bool, postgres: bool, pooler: bool) -> bool:
    """Whether this run deselects ``item`` (module docstring)."""
    if not slow and item.get_closest_marker("slow"):
        return True
    if item.get_closest_marker("pooler"):
        return not pooler or _through_pooler()
    if _through_pooler():  # the clusters' tests reach servers of their own, never the pooler: the first pass ran them
        direct = item.get_closest_marker("direct") is not None or "pg_clusters" in getattr(item, "fixturenames", ())
        return not _on_postgres(item) or direct
    return not postgres and _on_postgres(item)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    runs = {"slow": _runs_slow(config), "postgres": bool(os.environ.get(PG_ENV)), "pooler": bool(os.environ.get(POOLER_ENV))}
    left_out = [item for item in items if _left_out(item, **runs)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        gone = set(left_out)
        items[:] = [item for item in items if item not in gone]


def plain_url(url: str) -> str:
    """``url`` without brutus's ``?pooler=`` (libpq refuses it), for an engine or connection of a test's own."""
    return make_url(url).difference_update_query(["pooler"]).render_as_string(hide_password=False)


class PostgresServer:
    """Creates and drops throw-away databases on the test server (directly), and names them by the URL the
    tests use: the server's, or the pooler's when one is given."""

    def __init__(self, url: str, pooler_url: str | None = None) -> None:
        self.url = make_url(normalize_url(url))
        self.client = make_url(normalize_url(pooler_url)) if pooler_url else self.url
        self.admin = create_engine(self.url, isolation_level="AUTOCOMMIT")
        self.created: list[str] = []

    def new_database(self) -> str:
        name = f"brutus_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        self.created.append(name)
        return self.client.set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self.admin.connect() as conn:
            for name in self.created:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        self.admin.dispose()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer | None]:
    url = os.environ.get(PG_ENV)
    if not url:
        yield None
        return
    server = PostgresServer(url, os.environ[POOLER_ENV] if _through_pooler() else None)
    yield server
    server.drop_all()


@pytest.fixture(scope="session")
def pg_shared_url(pg_server: PostgresServer | None) -> str | None:
    """One migrated database for the tests that only need a clean store."""
    if pg_server is None:
        return None
    url = pg_server.new_database()
    SessionStore.open(url).close()
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (its ``postgresql`` tests are deselected without ``BRUTUS_TEST_POSTGRES_URL``)."""
    return request.param


@pytest.fixture
def db_url(backend: str, tmp_path, pg_server: PostgresServer | None) -> str:
    """A URL to a new, empty database (not migrated) on the backend under test."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'brutus.db'}"
    assert pg_server is not None
    return pg_server.new_database()


@pytest.fixture
def store_url(backend: str, tmp_path, pg_shared_url: str | None) -> Iterator[str]:
    """A URL to a migrated database with empty tables."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'brutus.db'}"
        SessionStore.open(url).close()
        yield url
        return
    assert pg_shared_url is not None
    engine = create_engine(plain_url(pg_shared_url))
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLES} CASCADE"))
    engine.dispose()
    yield pg_shared_url


@pytest.fixture
def store(store_url: str) -> Iterator[SessionStore]:
    s = SessionStore.open(store_url)
    yield s
    s.close()


@pytest.fixture
def plain_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing packed (``codec.pack``, 0009) by writes in this process: for the tests that count the pages or the
    WAL a known amount of text takes (gc's accounting, checkpoints). tests/test_packed.py covers packed values."""
    monkeypatch.setattr(codec, "PACK_MIN", sys.maxsize)


@pytest.fixture(scope="session", params=["postgresql"])
def pg_clusters() -> Iterator[Any]:
    """A throw-away PostgreSQL primary and its streaming replica (``tests/pgcluster.py``), for the tests that
    restart a server or read from a replica; stopped and deleted at the end of the run. Parametrized as a
    PostgreSQL test: deselected with the rest without ``BRUTUS_TEST_POSTGRES_URL``, and an error (never a skip)
    when the server binaries are missing."""
    from pgcluster import Clusters  # psycopg: only for the PostgreSQL tests

    clusters = Clusters().start()
    try:
        yield clusters
    finally:
        clusters.stop()
