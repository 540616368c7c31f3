"""PostgreSQL errors that do not lie (issue 33): a server that cannot be reached or refuses the connection
gives its reason in one line, from the library and the command alike; ``no brutus database at …`` only when
the server answered and the database holds no brutus schema. Against the real local server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from sqlalchemy.engine import make_url

from brutus import AsyncSessionStore, DatabaseError, NoDatabase, SessionStore
from brutus.db.engine import normalize_url, redact
from brutus.db.migrate import connection_reason
from cli_helpers import run
from corpus_helpers import corpus_file
from conftest import PG_ENV, plain_url

REFUSED = "postgresql+psycopg://root@127.0.0.1:1/test"  # nothing listens on port 1
REFUSED_REASON = "Connection refused (Is the server running on that host and accepting TCP/IP connections?)"


def _server_url(**changes: str) -> str:
    return make_url(normalize_url(os.environ[PG_ENV])).set(**changes).render_as_string(hide_password=False)


def _cases() -> list[tuple[str, type[Exception], str]]:
    """(url, error, message) for a role and a database that do not exist, and a closed port."""
    role, database = f"brutus_no_role_{uuid.uuid4().hex[:8]}", f"brutus_no_db_{uuid.uuid4().hex[:8]}"
    no_role, no_database = _server_url(username=role, password="s3cret"), _server_url(database=database)
    assert "s3cret" not in redact(no_role)
    return [
        (no_role, DatabaseError, f'cannot open {redact(no_role)}: role "{role}" does not exist'),
        (no_database, NoDatabase, f'cannot open {redact(no_database)}: database "{database}" does not exist'),
        (REFUSED, DatabaseError, f"cannot open {REFUSED}: {REFUSED_REASON}"),
    ]


def _open_sync(url: str, **options: bool) -> None:
    SessionStore.open(url, **options).close()


def _open_async(url: str, **options: bool) -> None:
    async def go() -> None:
        store = await AsyncSessionStore.open(url, **options)
        await store.close()

    asyncio.run(go())


OPENERS = [_open_sync, _open_async]
OPTIONS = [{}, {"create": False}, {"read_only": True}]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("options", OPTIONS, ids=["create", "no-create", "read-only"])
@pytest.mark.parametrize("open_store", OPENERS, ids=["sync", "async"])
def test_open_says_why_the_server_refused(backend: str, open_store, options: dict[str, bool]) -> None:
    for url, error, message in _cases():
        with pytest.raises(error) as raised:
            open_store(url, **options)
        assert type(raised.value) is error and str(raised.value) == message


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
@pytest.mark.parametrize("command", [("sessions", "list"), ("import", "FILE"), ("db", "current"), ("db", "upgrade")],
                         ids=lambda c: " ".join(c))
def test_the_command_says_why_in_one_line(backend: str, command: tuple[str, ...]) -> None:
    args = [str(corpus_file("9b92ce83")) if a == "FILE" else a for a in command]
    for url, _, message in _cases():
        result = run(*args, "--db", url)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", f"brutus: error: {message}\n")


def test_a_real_process_prints_one_line() -> None:
    """The same through ``python -m brutus``, as a shell sees it (no server needed: the port is closed)."""
    result = subprocess.run([sys.executable, "-m", "brutus", "sessions", "list", "--db", REFUSED],
                            capture_output=True, text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "BRUTUS_DEBUG"})
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"brutus: error: cannot open {REFUSED}: {REFUSED_REASON}\n")


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_no_brutus_database_only_when_the_server_answered(backend: str, pg_server) -> None:
    empty = pg_server.new_database()  # the server answers; no brutus schema in it
    with pytest.raises(NoDatabase) as raised:
        SessionStore.open(empty, read_only=True)
    assert str(raised.value) == f"no brutus database at {redact(empty)}" and raised.value.reason is None
    result = run("sessions", "list", "--db", empty)
    assert (result.returncode, result.stderr) == (1, f"brutus: error: no brutus database at {redact(empty)}\n")
    with psycopg.connect(make_url(plain_url(empty)).set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        tables = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'").fetchone()
    assert tables == (0,)  # nothing was created


@pytest.mark.parametrize(
    "message, reason",
    [
        ('connection failed: connection to server at "10.0.0.7", port 5432 failed: FATAL:  password authentication failed for user "app"',
         'password authentication failed for user "app"'),
        ('connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
         "\tIs the server running on that host and accepting TCP/IP connections?", REFUSED_REASON),
        ('connection is bad: connection to server on socket "/run/postgresql/.s.PGSQL.5432" failed: No such file or directory\n'
         "\tIs the server running locally and accepting connections on that socket?",
         "No such file or directory (Is the server running locally and accepting connections on that socket?)"),
        ("failed to resolve host 'db.invalid': [Errno -2] Name or service not known",
         "failed to resolve host 'db.invalid': [Errno -2] Name or service not known"),
    ],
    ids=["authentication", "refused", "socket", "host"],
)
def test_connection_reason_keeps_what_libpq_says_without_its_preamble(message: str, reason: str) -> None:
    """Reasons the local server (trust authentication, TCP) cannot produce, in libpq's words."""
    assert connection_reason(psycopg.OperationalError(message)) == reason
