"""Session ids as a person types them: a unique prefix wherever the CLI takes a session, and ``--db`` before
the command as well as after it."""

from __future__ import annotations

import asyncio
import json

import pytest

from brutus import AsyncSessionStore, InvalidInput, NotFound, SessionStore

from cli_helpers import run

IDS = ("ses_39bc72f6", "ses_39b5bd57", "ses_0a725fb5", "ses_0a725fb5_eb46", "ses_9", "ses_9:")


@pytest.fixture
def ids_url(store_url: str) -> str:
    """Sessions whose ids share prefixes: one starts another (a sub-agent's id is its parent's plus a suffix),
    and ``ses_9:`` is where ``ses_9``'s range would end if the upper bound were wrong."""
    store = SessionStore.open(store_url)
    for session_id in IDS:
        parent = "ses_0a725fb5" if session_id == "ses_0a725fb5_eb46" else None
        store.create_session(id=session_id, title=f"title of {session_id}", parent_id=parent)
    user = store.append_message("ses_39bc72f6", "user")
    store.append_part(user.id, {"type": "text", "text": "the prefix lookup"})
    reply = store.append_message("ses_39bc72f6", "assistant", parent_id=user.id)
    store.append_part(reply.id, {"type": "text", "text": "a long answer " * 2_000})  # enough to compact
    store.finish_message(reply.id, finish="stop")
    store.close()
    return store_url


def _ids(url: str) -> list[str]:
    return sorted(s["id"] for s in json.loads(run("sessions", "list", "--db", url, "--json").stdout))


def test_a_unique_prefix_names_the_session_in_every_command(ids_url: str, tmp_path) -> None:
    stats = json.loads(run("stats", "ses_39bc", "--db", ids_url, "--json").stdout)
    assert stats["session_id"] == "ses_39bc72f6" and stats["messages"] == 2
    view = json.loads(run("show", "ses_39bc", "--db", ids_url, "--json").stdout)
    assert [p["text"] for p in view[0]["parts"]] == ["the prefix lookup"]
    exported = run("export", "ses_39bc", "-o", tmp_path / "x.json", "--db", ids_url)
    assert exported.stdout.strip() == f"exported ses_39bc72f6 (2 messages) to {tmp_path / 'x.json'}"
    pruned = json.loads(run("prune", "ses_39bc", "--dry-run", "--db", ids_url, "--json").stdout)
    assert pruned["session_id"] == "ses_39bc72f6" and pruned["pruned"] == 0
    hits = json.loads(run("search", "prefix", "--session", "ses_39bc", "--db", ids_url, "--json").stdout)
    assert [h["session_id"] for h in hits] == ["ses_39bc72f6"]
    compacted = run("compact", "ses_39bc", "--db", ids_url, "--json")
    assert compacted.returncode == 0, compacted.stderr
    assert json.loads(compacted.stdout)["boundary"]["session_id"] == "ses_39bc72f6"
    deleted = run("sessions", "delete", "ses_39b5", "--yes", "--db", ids_url)
    assert deleted.stdout.strip() == "deleted ses_39b5bd57"
    assert _ids(ids_url) == sorted(set(IDS) - {"ses_39b5bd57"})


def test_an_exact_id_wins_over_the_longer_ids_it_starts(ids_url: str) -> None:
    stats = json.loads(run("stats", "ses_0a725fb5", "--db", ids_url, "--json").stdout)
    assert stats["session_id"] == "ses_0a725fb5"
    assert json.loads(run("stats", "ses_0a725fb5_", "--db", ids_url, "--json").stdout)["session_id"] == "ses_0a725fb5_eb46"
    assert json.loads(run("stats", "ses_9", "--db", ids_url, "--json").stdout)["session_id"] == "ses_9"


@pytest.mark.parametrize("command", [("show",), ("stats",), ("export",), ("sessions", "delete", "--yes")])
def test_an_ambiguous_prefix_lists_the_candidates_and_changes_nothing(ids_url: str, command: tuple[str, ...]) -> None:
    result = run(*command, "ses_39b", "--db", ids_url)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        "brutus: error: session id 'ses_39b' is ambiguous, the start of 2 ids (ses_39b5bd57, ses_39bc72f6): "
        "give more of it\n"
    )
    missing = run(*command, "ses_39a", "--db", ids_url)
    assert missing.returncode == 1 and missing.stderr == "brutus: error: session not found: 'ses_39a'\n"
    wildcard = run(*command, "ses_%", "--db", ids_url)  # not a pattern: no id holds '%'
    assert wildcard.returncode == 1 and wildcard.stderr == "brutus: error: session not found: 'ses_%'\n"
    assert _ids(ids_url) == sorted(IDS)


def test_a_prefix_of_many_sessions_names_five(store_url: str) -> None:
    store = SessionStore.open(store_url)
    for n in range(7):
        store.create_session(id=f"ses_many{n}")
    with pytest.raises(InvalidInput) as raised:
        store.resolve_session("ses_m")
    store.close()
    assert str(raised.value) == (
        "session id 'ses_m' is ambiguous, the start of more than 5 ids "
        "(ses_many0, ses_many1, ses_many2, ses_many3, ses_many4, …): give more of it"
    )


def test_the_async_store_resolves_the_same(ids_url: str) -> None:
    async def resolve() -> tuple[str, str, str]:
        store = await AsyncSessionStore.open(ids_url)
        try:
            with pytest.raises(NotFound):
                await store.resolve_session("ses_1")
            with pytest.raises(InvalidInput):
                await store.resolve_session("ses_0")
            return (await store.resolve_session("ses_39bc"), await store.resolve_session("ses_0a725fb5"),
                    await store.resolve_session("ses_9:"))
        finally:
            await store.close()

    assert asyncio.run(resolve()) == ("ses_39bc72f6", "ses_0a725fb5", "ses_9:")


def test_db_before_the_command(ids_url: str, tmp_path) -> None:
    listed = run("--db", ids_url, "sessions", "list", "--json")
    assert sorted(s["id"] for s in json.loads(listed.stdout)) == sorted(IDS)
    stats = run("--db", ids_url, "stats", "ses_39bc", "--json")
    assert json.loads(stats.stdout)["session_id"] == "ses_39bc72f6"
    missing = tmp_path / "missing.db"
    own_wins = run("--db", str(missing), "stats", "ses_39bc", "--db", ids_url, "--json")
    assert json.loads(own_wins.stdout)["session_id"] == "ses_39bc72f6"
    other_way = run("--db", ids_url, "stats", "ses_39bc", "--db", str(missing))
    assert other_way.returncode == 1 and other_way.stderr == f"brutus: error: no brutus database at {missing}\n"
    assert not missing.exists()
