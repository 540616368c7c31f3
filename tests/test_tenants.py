"""Tenants (``brutus.db.tenants``, migration 0011): two tenants on one database, each hostile to the other.

On PostgreSQL the stores connect as an application role that is no superuser (superusers pass row-level
security, and a tenanted store refuses them); on SQLite a tenant is a file of its own. Another tenant's id is
``NotFound`` for every call and nothing of it changes; lists, search and stats never show it; a fork or an
import lands in the caller's tenant; SQL run as the application role with another tenant set sees none of it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from brutus import AsyncSessionStore, InvalidInput, NotFound, SessionStore
from brutus.db import migrate
from brutus.db.engine import make_engine
from brutus.errors import ImportFormatError
from brutus.importers import import_file
from brutus.summarizers import Summary, SummaryRequest

from builders import Msg, Tool, write_history
from cli_helpers import run
from corpus_helpers import corpus_file
from conftest import plain_url
from migration_fixtures import load_rows, read_fixture

APP_ROLE = f"brutus_app_{os.getpid()}"
TENANT_TABLES = (
    "sessions", "messages", "parts", "tool_states", "tool_outputs", "compactions", "transcripts",
    "transcript_entries", "search_vectors", "search_state",
)
SAMPLE = Path(__file__).resolve().parent.parent / "brutus" / "data" / "sample_session.json"


class Fixed:
    """A summarizer that answers at once with a fixed text."""

    def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(text="summary of the work so far", model="fixed")


def _grant(admin_url: str) -> None:
    """The application role: no superuser, no BYPASSRLS, the rights a store needs on brutus's tables."""
    engine = create_engine(plain_url(admin_url))
    with engine.begin() as conn:
        if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": APP_ROLE}).first() is None:
            conn.exec_driver_sql(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    engine.dispose()


def _as_app(url: str) -> str:
    return make_url(url).set(username=APP_ROLE, password=None).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def pg_app(pg_server: Any) -> Iterator[tuple[str, str] | None]:
    """One migrated PostgreSQL database for the module: its URL as the superuser and as the application role."""
    if pg_server is None:
        yield None
        return
    admin = pg_server.new_database()
    SessionStore.open(admin).close()
    _grant(admin)
    yield admin, _as_app(admin)
    engine = create_engine(plain_url(admin))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP OWNED BY {APP_ROLE}")
        conn.exec_driver_sql(f"DROP ROLE {APP_ROLE}")
    engine.dispose()


@pytest.fixture
def app_url(backend: str, tmp_path: Path, pg_app: tuple[str, str] | None) -> str:
    """The URL a tenant's store opens: the application role's on PostgreSQL, a SQLite file otherwise."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'brutus.db'}"
    assert pg_app is not None
    return pg_app[1]


@pytest.fixture
def names() -> tuple[str, str]:
    """Two tenants no other test uses (the PostgreSQL database is the module's)."""
    tag = uuid.uuid4().hex[:8]
    return f"acme-{tag}", f"bob.{tag}"


@pytest.fixture
def pair(app_url: str, names: tuple[str, str]) -> Iterator[tuple[SessionStore, SessionStore]]:
    a = SessionStore.open(app_url, tenant=names[0], index_in_background=False)
    b = SessionStore.open(app_url, tenant=names[1], index_in_background=False)
    yield a, b
    a.close()
    b.close()


def _history(store: SessionStore) -> str:
    """A session with text, tool calls and outputs (searchable words), compacted once."""
    spec = [Msg("user", "find the zebra"), Msg("assistant", "zebra found", tools=[Tool(output_bytes=50_000)])] * 4
    session_id = write_history(store, spec, title="A's secret")
    store.compact(session_id, Fixed())
    return session_id


def _everything(store: SessionStore, session_id: str) -> Any:
    session = store.get_session(session_id)
    return session.model_dump(), [m.model_dump() for m in store.messages(session_id)], store.compactions(session_id)


def test_another_tenants_session_is_not_found_and_nothing_of_it_changes(pair) -> None:
    a, b = pair
    secret = _history(a)
    before = _everything(a, secret)
    messages = a.messages(secret)
    tool = next(p for m in messages for p in m.parts if p.type == "tool")
    calls = [
        lambda: b.get_session(secret),
        lambda: b.messages(secret),
        lambda: b.filter_compacted(secret),
        lambda: b.stats(secret),
        lambda: b.compactions(secret),
        lambda: b.update_session(secret, title="mine now"),
        lambda: b.append_message(secret, "user"),
        lambda: b.append_part(messages[0].info.id, {"type": "text", "text": "injected"}),
        lambda: b.finish_message(messages[1].info.id, finish="stop"),
        lambda: b.update_tool(tool.id, status="completed", output="changed"),
        lambda: b.rewind(secret, messages[0].info.id),
        lambda: b.prune(secret),
        lambda: b.fork(secret),
        lambda: b.compact(secret, Fixed()),
        lambda: b.delete_session(secret),
        lambda: b.resolve_session(secret[:12]),
    ]
    for call in calls:
        with pytest.raises(NotFound):
            call()
    assert _everything(a, secret) == before
    assert b.list_sessions() == []


def test_lists_search_and_stats_show_only_the_callers_tenant(pair) -> None:
    a, b = pair
    secret = _history(a)
    own = write_history(b, [Msg("user", "a zebra of my own")], title="B's")
    assert [s.id for s in a.list_sessions()] == [secret]
    assert [s.id for s in b.list_sessions()] == [own]
    assert b.list_sessions(forked_from=secret) == []
    assert {hit.session_id for hit in b.search("zebra")} == {own}
    assert {hit.session_id for hit in a.search("zebra")} == {secret}
    report = b.check()
    assert (report.sessions, report.messages, report.problems) == (1, 1, [])


def test_each_tenant_indexes_its_own_writes(pair) -> None:
    """One tenant's index run marks only its own rows indexed: the other's written before it stay findable."""
    a, b = pair
    theirs = write_history(b, [Msg("user", "okapi sighting")])
    mine = write_history(a, [Msg("user", "okapi sighting")])
    assert [hit.session_id for hit in a.search("okapi")] == [mine]  # a's run indexes a's only
    assert [hit.session_id for hit in b.search("okapi")] == [theirs]
    assert [hit.session_id for hit in b.search("okapi")] == [theirs]  # and again, from the index


def test_a_fork_lands_in_the_callers_tenant(pair, app_url: str, names: tuple[str, str]) -> None:
    a, b = pair
    original = _history(a)
    fork = a.fork(original, title="branch")
    assert {s.id for s in a.list_sessions()} == {original, fork.id}
    with pytest.raises(NotFound):
        b.get_session(fork.id)
    with SessionStore.open(app_url, tenant=names[0]) as again:  # a new store of the tenant reads it back
        assert [m.info.id for m in again.messages(fork.id)] != [] and again.get_session(fork.id).forked_from == original


def test_an_import_lands_in_the_callers_tenant_and_another_tenant_cannot_take_its_ids(
    pair, backend: str, app_url: str
) -> None:
    a, b = pair
    [imported] = import_file(a, SAMPLE)
    assert [s.id for s in a.list_sessions()] == [imported]
    assert b.list_sessions() == []
    if backend == "sqlite":  # a file per tenant: the other tenant imports its own copy under the same ids
        assert import_file(b, SAMPLE) == [imported]
        assert len(b.messages(imported)) == len(a.messages(imported))
        return
    with pytest.raises(ImportFormatError, match="another tenant of this database holds its ids"):
        import_file(b, SAMPLE)
    assert b.list_sessions() == []
    assert len(a.messages(imported)) > 0


def test_tenant_names_are_checked_before_anything_is_written(backend: str, tmp_path: Path, app_url: str) -> None:
    for bad in ("", "-x", "a b", "a/b", "a'b", "é", "x" * 64, 7):
        with pytest.raises(InvalidInput, match="not a tenant name"):
            SessionStore.open(app_url, tenant=bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_sqlite_keeps_a_tenant_in_a_file_beside_the_one_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with SessionStore.open(url, tenant="acme") as acme:
        acme.create_session(title="acme's")
    with SessionStore.open(url) as untenanted:
        assert untenanted.list_sessions() == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["x.db", "x@acme.db"]
    with SessionStore.open(f"sqlite:///{tmp_path / 'x@acme.db'}") as same:
        assert [s.title for s in same.list_sessions()] == ["acme's"]


@pytest.mark.anyio
async def test_the_async_store_keeps_to_its_tenant(app_url: str, names: tuple[str, str]) -> None:
    async with await AsyncSessionStore.open(app_url, tenant=names[0]) as a, await AsyncSessionStore.open(
        app_url, tenant=names[1]
    ) as b:
        session = await a.create_session(title="async A")
        user = await a.append_message(session.id, "user")
        await a.append_part(user.id, {"type": "text", "text": "gnu migration"})
        for call in (b.get_session, b.messages, b.fork, b.delete_session):
            with pytest.raises(NotFound):
                await call(session.id)
        async with b.batch():
            with pytest.raises(NotFound):
                await b.update_session(session.id, title="x")
        fork = await a.fork(session.id)
        assert {s.id for s in await a.list_sessions()} == {session.id, fork.id}
        assert await b.list_sessions() == [] and await b.search("gnu") == []
        assert {hit.session_id for hit in await a.search("gnu")} == {session.id, fork.id}


def test_the_cli_takes_the_tenant_from_the_flag_or_the_environment(app_url: str, names: tuple[str, str]) -> None:
    acme, bob = names
    made = run("--tenant", acme, "import", corpus_file("0a725fb5"), "--db", app_url, "--json")
    assert made.returncode == 0, made.stderr
    imported, child = json.loads(made.stdout)["created"]
    assert run("db", "upgrade", "--db", app_url, "--tenant", bob).returncode == 0  # SQLite: bob's file made

    def listed(*args: str, env: dict[str, str] | None = None) -> list[str]:
        result = run("sessions", "list", "--db", app_url, "--json", *args, env=env)
        assert result.returncode == 0, result.stderr
        return [s["id"] for s in json.loads(result.stdout)]

    assert sorted(listed("--tenant", acme)) == sorted([imported, child])
    assert sorted(listed(env={"BRUTUS_TENANT": acme})) == sorted([imported, child])
    assert listed("--tenant", bob, env={"BRUTUS_TENANT": acme}) == []  # the flag wins
    assert listed(env={"BRUTUS_TENANT": bob}) == []
    shown = run("show", imported, "--db", app_url, "--tenant", bob)
    assert shown.returncode == 1 and "not found" in shown.stderr
    bad = run("sessions", "list", "--db", app_url, "--tenant", "no/such")
    assert bad.returncode != 0 and "not a tenant name" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.anyio
async def test_an_openai_agents_session_id_is_the_tenants_own(app_url: str, names: tuple[str, str]) -> None:
    from brutus.integrations.openai_agents import BrutusSession

    async with await AsyncSessionStore.open(app_url, tenant=names[0]) as a, await AsyncSessionStore.open(
        app_url, tenant=names[1]
    ) as b:
        mine, theirs = BrutusSession("user-42", a), BrutusSession("user-42", b)
        await mine.add_items([{"role": "user", "content": "acme's question"}])
        await theirs.add_items([{"role": "user", "content": "bob's question"}])
        assert await mine.get_items() == [{"role": "user", "content": "acme's question"}]
        assert await theirs.get_items() == [{"role": "user", "content": "bob's question"}]
        assert mine.brutus_session_id != theirs.brutus_session_id
        await theirs.clear_session()
        assert await mine.get_items() == [{"role": "user", "content": "acme's question"}]
        with pytest.raises(NotFound):
            await b.get_session(mine.brutus_session_id)


@pytest.mark.anyio
async def test_a_claude_agent_sdk_key_is_the_tenants_own(app_url: str, names: tuple[str, str]) -> None:
    from brutus.integrations.claude_agent_sdk import BrutusSessionStore

    key = {"project_key": "-app", "session_id": "4f1c2a9e-0000-4000-8000-000000000001"}
    async with await AsyncSessionStore.open(app_url, tenant=names[0]) as a, await AsyncSessionStore.open(
        app_url, tenant=names[1]
    ) as b:
        mine, theirs = BrutusSessionStore(a), BrutusSessionStore(b)
        await mine.append(key, [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "acme"}}])
        assert await theirs.load(key) is None and await theirs.list_sessions("-app") == []
        await theirs.append(key, [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "bob"}}])
        assert [e["message"]["content"] for e in await mine.load(key)] == ["acme"]
        assert [e["message"]["content"] for e in await theirs.load(key)] == ["bob"]
        assert [s["session_id"] for s in await mine.list_sessions("-app")] == [key["session_id"]]
        await theirs.delete(key)
        assert [e["message"]["content"] for e in await mine.load(key)] == ["acme"]


# -- PostgreSQL: row-level security itself ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgresql"])
def test_sql_as_the_application_role_sees_and_writes_nothing_of_another_tenant(pair, app_url: str, names) -> None:
    a, b = pair
    secret = _history(a)
    a.fork(secret)
    a.search("zebra")  # a's vectors and index mark are written
    count = len(a.messages(secret))
    engine = create_engine(plain_url(app_url))
    try:
        with engine.begin() as conn:
            conn.execute(text("SELECT set_config('brutus.tenant', :t, true)"), {"t": names[1]})
            for table in TENANT_TABLES:
                assert conn.exec_driver_sql(f"SELECT count(*) FROM {table} WHERE tenant <> '{names[1]}'").scalar() == 0
            assert conn.exec_driver_sql("SELECT count(*) FROM pruned_parts").scalar() == 0
            assert conn.exec_driver_sql("SELECT count(*) FROM search_pending").scalar() == 0
            assert conn.exec_driver_sql(f"UPDATE sessions SET title = 'x' WHERE id = '{secret}'").rowcount == 0
            assert conn.exec_driver_sql(f"DELETE FROM messages WHERE session_id = '{secret}'").rowcount == 0
        with pytest.raises(Exception, match="row-level security"), engine.begin() as conn:
            conn.execute(text("SELECT set_config('brutus.tenant', :t, true)"), {"t": names[1]})
            conn.execute(
                text("INSERT INTO sessions (id, created_at, updated_at, last_seq, boundary_seq, tenant) "
                     "VALUES ('ses_planted', 0, 0, 0, 0, :a)"),
                {"a": names[0]},
            )
        with engine.begin() as conn:  # no tenant set: tenant '', which holds none of a's rows either
            assert conn.exec_driver_sql(f"SELECT count(*) FROM sessions WHERE id = '{secret}'").scalar() == 0
    finally:
        engine.dispose()
    assert a.get_session(secret).title == "A's secret" and len(a.messages(secret)) == count


@pytest.mark.parametrize("backend", ["postgresql"])
def test_an_untenanted_superuser_store_sees_every_tenant_and_leaves_their_index_whole(pair, pg_app, names) -> None:
    """A role that passes row-level security (an operator's) lists and searches every tenant; its index run
    writes each tenant's vectors as that tenant's and moves only its own mark."""
    a, b = pair
    first = write_history(a, [Msg("user", "quokka one")])
    theirs = write_history(b, [Msg("user", "quokka two")])
    with SessionStore.open(pg_app[0], index_in_background=False) as operator:
        assert {first, theirs} <= {s.id for s in operator.list_sessions()}
        assert {first, theirs} <= {hit.session_id for hit in operator.search("quokka")}
    second = write_history(a, [Msg("user", "quokka three")])
    assert {hit.session_id for hit in a.search("quokka")} == {first, second}
    assert {hit.session_id for hit in b.search("quokka")} == {theirs}


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_role_that_passes_row_level_security_is_refused(backend: str, pg_app) -> None:
    admin, _ = pg_app
    with pytest.raises(InvalidInput, match="superuser or has BYPASSRLS"):
        SessionStore.open(admin, tenant="acme")


@pytest.mark.parametrize("backend", ["postgresql"])
def test_an_untenanted_store_is_tenant_empty(backend: str, pg_app, names) -> None:
    admin, app = pg_app
    with SessionStore.open(app) as untenanted, SessionStore.open(app, tenant=names[0]) as acme:
        mine = untenanted.create_session(title=f"untenanted {names[0]}")
        acme.create_session(title="acme")
        assert mine.id in {s.id for s in untenanted.list_sessions()}
        assert "acme" not in {s.title for s in untenanted.list_sessions()}
        with pytest.raises(NotFound):
            acme.get_session(mine.id)
    engine = create_engine(plain_url(admin))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT tenant FROM sessions WHERE id = :i"), {"i": mine.id}).scalar() == ""
    engine.dispose()


@pytest.mark.direct  # through the pooler brutus prepares no statement (``?pooler=transaction``)
@pytest.mark.parametrize("backend", ["postgresql"])
@pytest.mark.parametrize("tenanted", [False, True], ids=["untenanted", "tenant"])
def test_a_finished_turn_with_its_own_id_keeps_its_plan_under_the_policies(backend: str, pg_app, names, tenanted) -> None:
    """``append_messages`` of a turn that gives its message's id, repeated: the statement that checks the id,
    takes the seqs and inserts the rows (one statement on PostgreSQL) is planned once and its plan kept (a generic plan), not planned afresh each call, though
    the policies of ``messages`` filter its check (the hot path's 10% guard, benchmarks/RESULTS.md). A few
    hundred rows first: on a near-empty table even the array statement's generic plan looks cheap."""
    _, app = pg_app
    with SessionStore.open(app, tenant=names[0] if tenanted else None, index_in_background=False) as store:
        session = store.create_session()
        store.append_messages(session.id, [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "t"}] * 3}] * 300)
        for n in range(15):
            store.append_messages(session.id, [{"info": {"role": "user", "id": f"msg_{names[0]}_{n}"}}])
        with store.engine.connect() as conn:  # the one connection the store used (one thread, one at a time)
            plans = conn.execute(
                text("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%UPDATE sessions%'")
            ).all()
    assert [(generic > 0, custom <= 5) for generic, custom in plans] == [(True, True)]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_database_with_data_at_0010_upgrades_in_place_into_tenant_empty(db_url: str, pg_app, names) -> None:
    fixture = read_fixture("0007")
    engine = make_engine(db_url)
    try:
        migrate.upgrade(engine, "0007")
        load_rows(db_url, fixture["tables"])
        migrate.upgrade(engine, "0010")
        migrate.upgrade(engine)
        with SessionStore.open(db_url, index_in_background=False) as superuser:  # row-level security passes it
            titles = sorted(s.title for s in superuser.list_sessions())
        assert len(titles) == len(fixture["tables"]["sessions"])
        with engine.connect() as conn:
            for table in TENANT_TABLES:
                tenants = conn.exec_driver_sql(f"SELECT DISTINCT tenant FROM {table}").scalars().all()
                assert tenants in ([""], []), table
        _grant(db_url)
        app = _as_app(db_url)
        with SessionStore.open(app) as untenanted, SessionStore.open(app, tenant=names[0]) as acme:
            assert sorted(s.title for s in untenanted.list_sessions()) == titles
            assert acme.list_sessions() == []
            acme.create_session(title="acme's")
        migrate.downgrade(engine, "0010")  # the tenants' rows stay, untenanted again
        with SessionStore(engine, index_in_background=False) as store:
            assert sorted(s.title for s in store.list_sessions()) == sorted([*titles, "acme's"])
    finally:
        with create_engine(plain_url(db_url)).begin() as conn:
            conn.exec_driver_sql(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP_ROLE}")
        engine.dispose()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
