"""Keyset pages of the session list (``list_sessions(limit=..., after=...)``) on SQLite and PostgreSQL: the pages
put together are the unpaged list, filters included; a pager is stable while sessions are written; a bad
``after`` is a clear error and never a page."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from brutus import AsyncSessionStore, InvalidInput, NotFound, Session, SessionStore

# Times chosen so that several sessions share one updated_at: ties go by id, descending.
TIMES = [1000, 1000, 1000, 1001, 1002, 1002, 1003, 1004, 1004, 1004, 1004, 1005, 1006, 1007, 1007, 1008, 1009]


def _sessions(store: SessionStore) -> list[str]:
    """Seventeen sessions (every third a child of the first), their updated_at set from TIMES, ids not in time
    order, and two archived; the ids of all of them."""
    ids = []
    for n, at in enumerate(TIMES):
        parent = ids[0] if ids and n % 3 == 0 else None
        session_id = f"ses_{(n * 7) % 17:02d}"
        store.create_session(id=session_id, parent_id=parent)
        store.update_session(session_id, updated_at=at)
        ids.append(session_id)
    _archive(store, ids[4], ids[9])
    return ids


def _archive(store: SessionStore, *session_ids: str) -> None:
    """No call archives a session yet: plain SQL does."""
    engine = create_engine(store.engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        for session_id in session_ids:
            conn.execute(text("UPDATE sessions SET archived_at = 5 WHERE id = :sid"), {"sid": session_id})
    engine.dispose()


def _pages(store: SessionStore, limit: int, *, by_id: bool, **filters: Any) -> list[list[str]]:
    pages: list[list[Session]] = []
    after: Any = None
    while True:
        page = store.list_sessions(limit=limit, after=after, **filters)
        assert len(page) <= limit
        if not page:
            return [[s.id for s in p] for p in pages]
        pages.append(page)
        after = page[-1].id if by_id else page[-1]


@pytest.mark.parametrize("by_id", [True, False], ids=["after-id", "after-session"])
def test_the_pages_put_together_are_the_unpaged_list(store: SessionStore, by_id: bool) -> None:
    ids = _sessions(store)
    whole = [s.id for s in store.list_sessions()]
    assert len(whole) == len(ids) and set(whole) == set(ids)
    assert whole == [i for _, i in sorted(zip(TIMES, ids), reverse=True)]  # updated_at, then id, descending
    for filters in ({}, {"parent_id": ids[0]}, {"include_archived": False}, {"parent_id": ids[0], "include_archived": False}):
        unpaged = [s.id for s in store.list_sessions(**filters)]
        assert unpaged, filters
        for limit in (1, 2, 3, 5, len(unpaged) - 1, len(unpaged), len(unpaged) + 1):
            if limit < 1:
                continue
            pages = _pages(store, limit, by_id=by_id, **filters)
            assert [i for page in pages for i in page] == unpaged, (filters, limit)
            assert [len(p) for p in pages[:-1]] == [limit] * (len(pages) - 1)
    children = [s.id for s in store.list_sessions(parent_id=ids[0])]
    assert sorted(children) == sorted(ids[3::3])
    assert set(whole) - {s.id for s in store.list_sessions(include_archived=False)} == {ids[4], ids[9]}


def test_a_page_starts_after_any_session_filters_aside(store: SessionStore) -> None:
    """``after`` is a position in the list order; the session there need not pass the filters itself."""
    ids = _sessions(store)
    whole = [s.id for s in store.list_sessions()]
    archived = ids[9]  # at 1004 with three others
    place = whole.index(archived)
    assert [s.id for s in store.list_sessions(after=archived)] == whole[place + 1:]
    assert [s.id for s in store.list_sessions(after=archived, include_archived=False)] == [
        i for i in whole[place + 1:] if i != ids[4]
    ]
    assert [s.id for s in store.list_sessions(after=archived, parent_id=ids[0])] == [
        i for i in whole[place + 1:] if i in ids[3::3]
    ]
    assert store.list_sessions(after=whole[-1]) == []
    assert store.list_sessions(after=whole[0], limit=0) == []


def test_a_pager_is_stable_while_sessions_are_written(store: SessionStore) -> None:
    """Between two pages, a session already listed is written (it moves to the top: not listed again), one not
    listed yet is written (it moves above the pager: this pass does not list it, a new pass lists it first),
    and the last session of the page is written too: with the Session as the cursor the next page starts where
    the pager was; no other session is repeated or skipped."""
    ids = _sessions(store)
    whole = [s.id for s in store.list_sessions()]
    first = store.list_sessions(limit=5)
    seen, ahead, cursor = whole[1], whole[9], first[-1]
    assert cursor.id == whole[4]
    for moved, at in ((seen, 2000), (ahead, 2001), (cursor.id, 2002)):
        store.update_session(moved, updated_at=at)
    store.create_session(id="ses_new")  # a new session is newest: above the pager too
    rest: list[str] = []
    after: Any = cursor
    while page := store.list_sessions(limit=3, after=after):
        rest += [s.id for s in page]
        after = page[-1]
    assert [s.id for s in first] + rest == [i for i in whole if i != ahead]
    # with the cursor as an id, its position now: it was written since, so the page starts after its new place
    now = [s.id for s in store.list_sessions()]
    assert now[:4] == ["ses_new", cursor.id, ahead, seen]
    assert [s.id for s in store.list_sessions(after=cursor.id, limit=3)] == [ahead, seen, now[4]]


def test_pages_under_a_concurrent_writer(store_url: str) -> None:
    """A writer touches (appends to) a fixed half of the sessions over and over while a pager walks the list:
    the pager never lists a session twice, and lists every session the writer leaves alone, in list order."""
    pager = SessionStore.open(store_url)
    writer = SessionStore.open(store_url)
    ids = [pager.create_session(id=f"ses_{n:03d}").id for n in range(60)]
    for n, session_id in enumerate(ids):
        pager.update_session(session_id, updated_at=1000 + n // 2)
    touched = set(ids[::2])
    untouched = [s.id for s in pager.list_sessions() if s.id not in touched]
    started, done = threading.Event(), threading.Event()

    def write() -> None:
        while not done.is_set():
            for session_id in sorted(touched):
                writer.append_message(session_id, "user")
            started.set()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        listed: list[str] = []
        after: Any = None
        started.wait()  # the writer is under way before the first page
        while page := pager.list_sessions(limit=4, after=after):
            listed += [s.id for s in page]
            after = page[-1]
    finally:
        done.set()
        thread.join()
        writer.close()
    pager.close()
    assert len(listed) == len(set(listed))
    assert [i for i in listed if i not in touched] == untouched


@pytest.mark.parametrize(
    "after, error",
    [("ses_missing", NotFound), ("not an id!", NotFound), ("", NotFound), (17, InvalidInput), (b"ses_00", InvalidInput)],
)
def test_a_bad_after_is_an_error_not_a_page(store: SessionStore, after: Any, error: type) -> None:
    _sessions(store)
    with pytest.raises(error):
        store.list_sessions(after=after, limit=3)


def test_a_deleted_after_session_is_not_found(store: SessionStore) -> None:
    ids = _sessions(store)
    page = store.list_sessions(limit=3)
    store.delete_session(page[-1].id)
    with pytest.raises(NotFound) as info:
        store.list_sessions(after=page[-1].id, limit=3)
    assert info.value.id == page[-1].id
    # the Session itself still holds the position it had: the next page is right
    whole = [s.id for s in store.list_sessions()]
    assert [s.id for s in store.list_sessions(after=page[-1], limit=3)] == whole[2:5]
    assert len(whole) == len(ids) - 1


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_a_bad_limit_is_an_error(store: SessionStore, limit: Any) -> None:
    with pytest.raises(InvalidInput):
        store.list_sessions(limit=limit, after="ses_missing")  # the limit is checked first


def test_async_pages_match_the_sync_store(store_url: str) -> None:
    with SessionStore.open(store_url) as sync:
        ids = _sessions(sync)
        expected = [s.id for s in sync.list_sessions(include_archived=False)]

    async def walk() -> list[str]:
        store = await AsyncSessionStore.open(store_url)
        try:
            listed: list[str] = []
            after: Any = None
            while page := await store.list_sessions(limit=4, after=after, include_archived=False):
                listed += [s.id for s in page]
                after = page[-1].id
            with pytest.raises(NotFound):
                await store.list_sessions(after="ses_gone")
            return listed
        finally:
            await store.close()

    assert asyncio.run(walk()) == expected and len(expected) == len(ids) - 2
