"""A path is not a wish (issue 18): reading commands never create, migrate or write a database; writing
commands create one only where its directory exists; a file that is not SQLite is refused by name; every
error is one line naming the path or value, and the file system is left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_helpers import corpus_file
from sqlalchemy import create_engine, text

from brutus import InvalidInput, NoDatabase, SchemaOutOfDate, SessionStore, make_engine
from brutus.db import migrate
from cli_helpers import run
from conftest import plain_url

READERS = [
    ("sessions", "list"),
    ("show", "ses_x"),
    ("stats", "ses_x"),
    ("check",),
    ("export", "ses_x"),
    ("db", "current"),
    ("db", "check"),
]


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes: what a command must leave unchanged."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def one_line_error(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("brutus: error: "), result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def small_transcript() -> Path:
    return corpus_file("9b92ce83")


@pytest.mark.parametrize("command", READERS, ids=[" ".join(c) for c in READERS])
def test_reading_commands_do_not_create_a_database(tmp_path: Path, command: tuple[str, ...]) -> None:
    target = tmp_path / "nope" / "dir" / "x.db"
    result = run(*command, "--db", str(target))
    one_line_error(result, f"no brutus database at {target}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", READERS, ids=[" ".join(c) for c in READERS])
def test_reading_commands_take_no_plain_word_for_a_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    result = run(*command, "--db", "not a url", cwd=tmp_path)
    one_line_error(result, "no brutus database at not a url")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [b"", b'{"messages": []}\n'], ids=["empty", "json"])
@pytest.mark.parametrize("command", [*READERS, ("import", "TRANSCRIPT"), ("db", "upgrade"), ("prune", "ses_x")],
                         ids=lambda c: " ".join(c) if isinstance(c, tuple) else None)
def test_a_file_that_is_not_sqlite_is_refused_by_name(tmp_path: Path, command: tuple[str, ...], content: bytes) -> None:
    target = tmp_path / "notes.json"
    target.write_bytes(content)
    args = [str(small_transcript()) if a == "TRANSCRIPT" else a for a in command]
    before = tree(tmp_path)
    result = run(*args, "--db", str(target))
    one_line_error(result, f"{target} is not a SQLite database")
    assert tree(tmp_path) == before


def test_a_directory_is_refused_by_name(tmp_path: Path) -> None:
    result = run("import", str(small_transcript()), "--db", str(tmp_path))
    one_line_error(result, f"{tmp_path} is a directory, not a SQLite database")
    assert list(tmp_path.iterdir()) == []


def test_writing_commands_create_only_where_the_directory_exists(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "x.db"
    result = run("import", str(small_transcript()), "--db", str(missing))
    one_line_error(result, f"cannot create a database at {missing}: there is no directory {missing.parent}")
    assert list(tmp_path.iterdir()) == []

    here = tmp_path / "x.db"
    created = run("import", str(small_transcript()), "--db", str(here), "--json")
    assert created.returncode == 0, created.stderr
    assert len(json.loads(created.stdout)["created"]) == 1 and here.exists()


@pytest.mark.parametrize("command", [("prune", "ses_x"), ("compact", "ses_x"), ("gc", "--before", "now"), ("db", "downgrade", "base")],
                         ids=lambda c: " ".join(c))
def test_commands_on_what_is_there_do_not_create_either(tmp_path: Path, command: tuple[str, ...]) -> None:
    target = tmp_path / "x.db"
    one_line_error(run(*command, "--db", str(target)), f"no brutus database at {target}")
    assert list(tmp_path.iterdir()) == []


def test_permission_denied_names_the_path() -> None:
    target = Path("/sys/brutus-test.db")  # not writable, even for root
    assert target.parent.is_dir() and not target.exists()
    one_line_error(run("import", str(small_transcript()), "--db", str(target)), f"cannot open {target}")
    assert not target.exists()


def _at_revision(url: str, revision: str) -> None:
    engine = make_engine(url)
    try:
        migrate.upgrade(engine, revision)
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = create_engine(plain_url(url))
    try:
        with engine.connect() as conn:
            return migrate.current_revision(conn)
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", [c for c in READERS if c != ("db", "current")], ids=lambda c: " ".join(c))
def test_reading_commands_do_not_migrate(db_url: str, command: tuple[str, ...]) -> None:
    _at_revision(db_url, "0001")
    head = migrate.head_revision()
    result = run(*command, "--db", db_url)
    one_line_error(result, f"the database is at revision 0001, brutus needs {head}: run brutus db upgrade")
    assert _revision(db_url) == "0001"


def test_db_current_reads_an_old_revision_without_migrating(db_url: str) -> None:
    _at_revision(db_url, "0001")
    result = run("db", "current", "--db", db_url, "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["current"] == "0001"
    assert _revision(db_url) == "0001"


def test_an_unknown_revision_is_a_user_error(store_url: str) -> None:
    head = migrate.head_revision()
    one_line_error(run("db", "downgrade", "9999", "--db", store_url), "Can't locate revision identified by '9999'")
    one_line_error(run("db", "upgrade", "--revision", "9999", "--db", store_url), "'9999'")
    assert _revision(store_url) == head


def test_export_to_a_missing_directory_fails_like_every_error(store: SessionStore, store_url: str, tmp_path: Path) -> None:
    session = store.create_session(title="x")
    target = tmp_path / "no" / "such" / "x.json"
    one_line_error(run("export", session.id, "-o", str(target), "--db", store_url), f"cannot write {target}: No such file or directory")
    assert not target.parent.exists()


def test_debug_prints_the_traceback_of_a_user_error(tmp_path: Path) -> None:
    result = run("sessions", "list", "--db", str(tmp_path / "x.db"), env={"BRUTUS_DEBUG": "1"})
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr and "NoDatabase" in result.stderr
    assert result.stderr.rstrip().endswith(f"brutus: error: no brutus database at {tmp_path / 'x.db'}")


@pytest.mark.parametrize("how", [("--json",), ()], ids=["json", "people"])
def test_a_closed_pipe_is_not_an_error(tmp_path: Path, how: tuple[str, ...]) -> None:
    """``brutus show … | head``: the reader goes away after a few bytes of an output larger than the pipe's
    buffer (1 MB of JSON, 80 KB for people); the command ends quietly with exit 0."""
    db = tmp_path / "x.db"
    session_id = json.loads(run("import", str(corpus_file("0a725fb5")), "--db", str(db), "--json").stdout)["created"][0]
    env = dict(os.environ)
    env.pop("BRUTUS_DEBUG", None)
    reader = subprocess.Popen([sys.executable, "-m", "brutus", "show", session_id, "--full", *how, "--db", str(db)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.read(100)  # what `head -c 100` reads before it goes away
    reader.stdout.close()
    stderr = reader.stderr.read().decode()
    assert reader.wait(timeout=120) == 0, stderr
    assert stderr == ""


# -- the library -----------------------------------------------------------------------------------------


def test_open_with_create_false_finds_no_database(tmp_path: Path) -> None:
    target = tmp_path / "x.db"
    with pytest.raises(NoDatabase, match="no brutus database at"):
        SessionStore.open(str(target), create=False)
    with pytest.raises(NoDatabase):
        SessionStore.open(str(target), read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_open_does_not_make_directories(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="there is no directory"):
        SessionStore.open(str(tmp_path / "a" / "b.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_store_writes_nothing(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session = store.create_session(title="kept")
    with SessionStore.open(store_url, read_only=True) as reader:
        assert [s.id for s in reader.list_sessions()] == [session.id]
        with pytest.raises(Exception) as info:
            reader.create_session(title="refused")
        assert type(info.value).__module__ == "brutus.errors"
    with SessionStore.open(store_url) as store:
        assert [s.title for s in store.list_sessions()] == ["kept"]


def test_a_read_only_open_of_an_old_schema_raises(db_url: str) -> None:
    _at_revision(db_url, "0001")
    with pytest.raises(SchemaOutOfDate, match="the database is at revision 0001"):
        SessionStore.open(db_url, read_only=True)
    assert _revision(db_url) == "0001"


def test_an_engine_brutus_did_not_make_is_refused(store_url: str) -> None:
    foreign = create_engine(plain_url(store_url))
    try:
        with pytest.raises(InvalidInput, match="brutus.make_engine"):
            SessionStore(foreign)
    finally:
        foreign.dispose()


def test_a_handed_engine_keeps_foreign_keys_on(store_url: str) -> None:
    """``delete_session`` on a store built from an engine the caller made with ``make_engine`` cascades."""
    engine = make_engine(store_url, pool_size=2)
    store = SessionStore(engine)
    try:
        session = store.create_session(title="gone")
        message = store.append_message(session.id, "user")
        store.append_part(message.id, {"type": "text", "text": "hi"})
        store.delete_session(session.id)
        with engine.connect() as conn:
            left = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in ("sessions", "messages", "parts")}
        assert left == {"sessions": 0, "messages": 0, "parts": 0}
    finally:
        store.close()


def test_the_async_store_without_its_extra_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['aiosqlite'] = None\n"
        "try:\n    from brutus import AsyncSessionStore\n"
        "except Exception as exc:\n    print(type(exc).__name__, isinstance(exc, __import__('brutus').BrutusError), exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "MissingDependency True the async store needs aiosqlite: pip install 'brutus-store[async]'", out.stderr


# -- the demo --------------------------------------------------------------------------------------------


def test_demo_does_not_pile_up_in_the_default_database(tmp_path: Path) -> None:
    default = tmp_path / "default.db"
    env = {"BRUTUS_DATABASE_URL": f"sqlite:///{default}", "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    places = []
    for _ in range(2):
        result = run("demo", env=env)
        assert result.returncode == 0, result.stderr
        line = next(line for line in result.stdout.splitlines() if line.startswith("stored in "))
        places.append(line.removeprefix("stored in ").split(";")[0])
    assert not default.exists()
    assert places[0] != places[1] and all(Path(p).is_file() and p.startswith(str(tmp_path / "tmp")) for p in places)
    for place in places:
        with SessionStore.open(place, read_only=True) as store:
            assert len(store.list_sessions()) == 1
