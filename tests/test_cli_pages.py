"""``brutus sessions list --limit N --after ID``: pages of the list, the next page's cursor in the JSON, a bad
cursor a one-line error."""

from __future__ import annotations

import json

from brutus import SessionStore

from cli_helpers import run


def _sessions(store_url: str, count: int = 11) -> list[str]:
    with SessionStore.open(store_url) as store:
        ids = [store.create_session(id=f"ses_{n:02d}", title=f"t{n}").id for n in range(count)]
        for n, session_id in enumerate(ids):
            store.update_session(session_id, updated_at=1000 + n // 3)  # ties of three: by id
    return ids


def test_json_pages_put_together_are_the_list(store_url: str) -> None:
    _sessions(store_url)
    whole = json.loads(run("sessions", "list", "--db", store_url, "--json").stdout)
    assert isinstance(whole, list) and len(whole) == 11  # without --limit / --after: a list, as before 0007
    for limit in (1, 4, 11, 12):
        listed, after, pages = [], None, 0
        while True:
            args = ["sessions", "list", "--db", store_url, "--json", "--limit", str(limit)]
            result = run(*args, *(["--after", after] if after else []))
            assert result.returncode == 0, result.stderr
            page = json.loads(result.stdout)
            assert set(page) == {"sessions", "next"} and len(page["sessions"]) <= limit
            listed += page["sessions"]
            pages += 1
            if page["next"] is None:
                break
            assert page["next"] == page["sessions"][-1]["id"] and len(page["sessions"]) == limit
            after = page["next"]
        assert listed == whole, limit
        assert pages == -(-11 // limit)  # no empty page at the end: "next" is null on the last one
    rest = json.loads(run("sessions", "list", "--db", store_url, "--json", "--after", whole[5]["id"]).stdout)
    assert rest == {"sessions": whole[6:], "next": None}


def test_people_see_the_page_and_where_the_next_starts(store_url: str) -> None:
    _sessions(store_url)
    whole = [s["id"] for s in json.loads(run("sessions", "list", "--db", store_url, "--json").stdout)]
    first = run("sessions", "list", "--db", store_url, "--limit", "4")
    assert first.returncode == 0 and first.stderr == f"more: --after {whole[3]}\n"
    assert [line.split()[0] for line in first.stdout.splitlines()[1:]] == whole[:4]
    last = run("sessions", "list", "--db", store_url, "--limit", "4", "--after", whole[7])
    assert last.returncode == 0 and last.stderr == ""
    assert [line.split()[0] for line in last.stdout.splitlines()[1:]] == whole[8:]


def test_a_bad_after_is_a_one_line_error(store_url: str) -> None:
    ids = _sessions(store_url)
    for after in ("ses_missing", "not an id!"):
        result = run("sessions", "list", "--db", store_url, "--limit", "3", "--after", after, "--json")
        assert result.returncode == 1 and result.stdout == ""
        assert "session not found" in result.stderr and len(result.stderr.splitlines()) == 1
        assert "Traceback" not in result.stderr
    with SessionStore.open(store_url) as store:
        store.delete_session(ids[4])
    gone = run("sessions", "list", "--db", store_url, "--after", ids[4])
    assert gone.returncode == 1 and repr(ids[4]) in gone.stderr
