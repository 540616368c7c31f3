"""Hostile input over the public API and the importers, on SQLite and PostgreSQL (hypothesis; atheris in
tests/fuzz_atheris.py when it is installed).

Every call either succeeds and reads back exactly what it returned, or raises a ``BrutusError`` with every
table as it was (a dump of all rows before and after). Anything else — a driver error, a ``TypeError``, a
half-written row — fails. Inputs: random unicode (NUL, lone surrogates, U+E000, the codec's own escape
sequences), SQL-injection strings as ids and text, bytes where text belongs, huge and negative numbers, NaN,
deeply nested JSON, random part dicts of every type, and OpenCode / Claude Code files mutated at random.

A last test reads brutus's source: no SQL is built by formatting a string with a value that is not a
module constant.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brutus import BrutusError, InvalidInput, NotFound, SessionStore
from brutus.errors import ImportFormatError
from brutus.codec import MAX_JSON_DEPTH
from brutus.importers import import_file
from brutus.models import PART_TYPES

from corpus_helpers import corpus_file, read_export, read_text
from integrity import dump, integrity_problems

pytestmark = pytest.mark.slow

FUZZ = settings(max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", 60)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

SPECIALS = [
    "\x00",
    "\ue000",
    "\ue0000",
    "\ue000s0041",
    "\ue000\ue000",
    "\ud800",
    "\udfff\ud800",
    "'; DROP TABLE sessions; --",
    "\" OR 1=1 --",
    "%s %(x)s :x ? $1",
    "\\u0000",
    "\r\n\x1b[2J",
    "🤖" * 3,
]
CHARS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())  # surrogates included
TEXT = st.one_of(
    st.text(CHARS, max_size=40),
    st.sampled_from(SPECIALS),
    st.lists(st.sampled_from(SPECIALS), min_size=2, max_size=6).map("".join),
    st.sampled_from([1_000, 100_000]).map(lambda n: "é\x00" * n),  # up to 300 KB of UTF-8
)
NOT_TEXT = st.one_of(st.binary(max_size=20), st.integers(), st.floats(), st.none(), st.lists(st.integers(), max_size=2))
NUMBERS = st.one_of(
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20,
)
IDS = st.one_of(
    st.from_regex(r"[A-Za-z0-9_\-.:]{1,64}", fullmatch=True),
    st.text(CHARS, max_size=80),
    st.sampled_from(["", "x" * 65, "ses_' OR '1'='1", "msg_1; DELETE FROM messages", "prt_%", "prt__", "../etc/passwd"]),
)


def deep(depth: int) -> Any:
    value: Any = "\x00"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


DEEP = st.sampled_from([MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 400]).map(deep)  # deeper: test_bad_input
ANY_JSON = st.one_of(JSON, DEEP, st.dictionaries(TEXT, st.one_of(JSON, DEEP), max_size=3))


def _field_values() -> st.SearchStrategy[Any]:
    return st.one_of(TEXT, NOT_TEXT, NUMBERS, ANY_JSON)


@st.composite
def part_dicts(draw: Any) -> dict[str, Any]:
    """Random part dicts: a real type with its fields set to plausible or hostile values, or junk."""
    kind = draw(st.sampled_from(sorted(PART_TYPES) + ["junk", ""]))
    model = PART_TYPES.get(kind)
    fields = sorted(model.model_fields) if model is not None else ["a", "b"]
    part: dict[str, Any] = {"type": kind}
    for name in fields:
        if name in ("type", "session_id", "message_id"):
            continue
        if name == "id":
            if draw(st.booleans()):
                part["id"] = draw(IDS)
            continue
        if name == "state":
            state = {"status": draw(st.sampled_from(["pending", "running", "completed", "error", "weird"]))}
            for key in ("input", "output", "error", "title", "metadata", "time"):
                if draw(st.booleans()):
                    state[key] = draw(_field_values() if key != "time" else st.dictionaries(st.sampled_from(["start", "end", "compacted"]), NUMBERS))
            part["state"] = state
            continue
        if draw(st.integers(0, 3)):
            part[name] = draw(_field_values())
    if draw(st.integers(0, 9)) == 0:
        part[draw(TEXT)] = draw(JSON)  # an unknown field
    return part


# -- the harness ------------------------------------------------------------------------------------------


def attempt(store: SessionStore, call: Any) -> tuple[bool, Any]:
    """(True, result) when ``call`` succeeded; (False, error) when it raised a ``BrutusError`` and every table
    is as it was. Any other exception propagates and fails the test."""
    before = dump(store.engine)
    try:
        return True, call()
    except BrutusError as exc:
        after = dump(store.engine)
        assert after == before, f"{type(exc).__name__}: {exc} — yet the database changed"
        return False, exc


def _base(store: SessionStore) -> tuple[str, str, str, str]:
    session = store.create_session(title="fuzz")
    user = store.append_message(session.id, "user")
    reply = store.append_message(session.id, "assistant", parent_id=user.id)
    tool = store.append_part(reply.id, {"type": "tool", "call_id": "c", "tool": "bash", "state": {"status": "pending"}})
    return session.id, user.id, reply.id, tool.id


def _loaded_part(store: SessionStore, session_id: str, part_id: str) -> Any:
    return next(p for m in store.messages(session_id) for p in m.parts if p.id == part_id)


def _without_tool_times(part: Any) -> dict[str, Any]:
    data = part.model_dump()
    if part.type == "tool":
        data["state"].pop("time")
    return data


# -- the API ------------------------------------------------------------------------------------------------


@FUZZ
@given(title=st.one_of(TEXT, NOT_TEXT), directory=st.one_of(TEXT, NOT_TEXT), id=st.one_of(st.none(), IDS), parent=st.one_of(st.none(), IDS))
def test_create_session(store: SessionStore, title: Any, directory: Any, id: Any, parent: Any) -> None:
    ok, session = attempt(store, lambda: store.create_session(title=title, directory=directory, id=id, parent_id=parent))
    if ok:
        assert store.get_session(session.id) == session
        assert (session.title, session.directory) == (title, directory)
        assert id is None or session.id == id


@FUZZ
@given(
    role=st.one_of(st.sampled_from(["user", "assistant"]), TEXT),
    fields=st.dictionaries(
        st.sampled_from(["id", "parent_id", "agent", "mode", "model_id", "provider_id", "summary", "synthetic", "metadata", "created_at", "finish", "tokens", "cost", "error", "completed_at", "bogus"]),
        st.one_of(TEXT, NOT_TEXT, NUMBERS, ANY_JSON, IDS, st.dictionaries(st.sampled_from(["input", "output", "cache", "x"]), NUMBERS)),
        max_size=5,
    ),
    session=st.one_of(st.none(), IDS),
)
def test_append_message(store: SessionStore, role: Any, fields: dict[str, Any], session: Any) -> None:
    session_id = store.create_session().id if session is None else session
    ok, message = attempt(store, lambda: store.append_message(session_id, role, **fields))
    if ok:
        [loaded] = [m.info for m in store.messages(session_id) if m.info.id == message.id]
        assert loaded == message


@FUZZ
@given(part=part_dicts(), target=st.sampled_from(["user", "reply", "missing"]))
def test_append_part(store: SessionStore, part: dict[str, Any], target: str) -> None:
    session_id, user_id, reply_id, _ = _base(store)
    message_id = {"user": user_id, "reply": reply_id, "missing": "msg_missing"}[target]
    original = copy.deepcopy(part)
    ok, stored = attempt(store, lambda: store.append_part(message_id, part))
    assert part == original, "append_part changed the caller's dict"
    if ok:
        assert _without_tool_times(_loaded_part(store, session_id, stored.id)) == _without_tool_times(stored)


@FUZZ
@given(
    steps=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(["pending", "running", "completed", "error"]), TEXT),
            st.dictionaries(st.sampled_from(["output", "error", "title", "metadata", "input"]), st.one_of(TEXT, NOT_TEXT, ANY_JSON), max_size=3),
        ),
        min_size=1,
        max_size=4,
    ),
    part=st.one_of(st.none(), IDS),
)
def test_update_tool(store: SessionStore, steps: list[tuple[Any, dict[str, Any]]], part: Any) -> None:
    session_id, _, _, tool_id = _base(store)
    part_id = tool_id if part is None else part
    for status, values in steps:
        ok, updated = attempt(store, lambda: store.update_tool(part_id, status=status, **values))
        if ok:
            assert _loaded_part(store, session_id, part_id) == updated
            for name in ("output", "error", "title"):
                if values.get(name) is not None:
                    assert getattr(updated.state, name) == values[name]


@FUZZ
@given(
    finish=st.one_of(TEXT, NOT_TEXT),
    tokens=st.one_of(st.none(), ANY_JSON, st.dictionaries(st.sampled_from(["input", "output", "reasoning", "cache"]), st.one_of(NUMBERS, st.dictionaries(st.sampled_from(["read", "write"]), NUMBERS)))),
    cost=NUMBERS,
    error=st.one_of(st.none(), TEXT, ANY_JSON),
    message=st.one_of(st.none(), IDS),
)
def test_finish_message(store: SessionStore, finish: Any, tokens: Any, cost: Any, error: Any, message: Any) -> None:
    session_id, _, reply_id, _ = _base(store)
    message_id = reply_id if message is None else message
    ok, finished = attempt(store, lambda: store.finish_message(message_id, finish=finish, tokens=tokens, cost=cost, error=error))
    if ok:
        [loaded] = [m.info for m in store.messages(session_id) if m.info.id == message_id]
        assert loaded == finished and loaded.finish == finish


@FUZZ
@given(session=IDS)
def test_lookups_by_hostile_ids(store: SessionStore, session: str) -> None:
    _base(store)
    for call in (
        lambda: store.get_session(session),
        lambda: store.messages(session),
        lambda: store.filter_compacted(session),
        lambda: store.delete_session(session),
        lambda: store.prune(session),
        lambda: store.compactions(session),
    ):
        ok, error = attempt(store, call)
        assert not ok and isinstance(error, NotFound), error


def test_json_written_with_ascii_escapes_reads_back_decoded(store: SessionStore) -> None:
    """A JSON column written by another client that escapes non-ASCII (``json.dumps`` default, sqlite-utils)
    holds ``\\ue000`` where brutus writes the character: it must read back the same."""
    from sqlalchemy import update

    from brutus.db.tables import MessageRow

    session = store.create_session()
    message = store.append_message(session.id, "user", metadata={"k": "nul \x00 here"})
    with store.engine.begin() as conn:  # what brutus stored, re-serialized with ASCII escapes
        stored = json.dumps({"k": "nul \ue0000 here"}, ensure_ascii=True)
        conn.execute(update(MessageRow.__table__).where(MessageRow.__table__.c.id == message.id).values(metadata=json.loads(stored)))
        if store.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("UPDATE messages SET metadata = ? WHERE id = ?", (stored, message.id))
    assert store.messages(session.id)[0].info.metadata == {"k": "nul \x00 here"}


def test_a_part_nested_past_the_serializer_limit_is_refused(store: SessionStore) -> None:
    """pydantic stops serializing at about 255 levels, before the codec's own depth check (found by the fuzz:
    a raw ``ValueError: Maximum serialization depth exceeded`` escaped ``append_part``)."""
    session_id, _, reply_id, _ = _base(store)
    for depth in (MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH):
        ok, error = attempt(store, lambda: store.append_part(reply_id, {"type": "text", "text": "x", "metadata": {"k": deep(depth)}}))
        assert not ok and isinstance(error, InvalidInput), error
    assert [len(m.parts) for m in store.messages(session_id)] == [0, 1]


def test_part_json_keys_with_lone_surrogates_round_trip(store: SessionStore) -> None:
    """Found by atheris: pydantic's JSON-mode dump turned a metadata key holding a lone surrogate into
    U+FFFD characters (silently) and refused one nested deeper (a raw ``UnicodeEncodeError``)."""
    session_id, _, reply_id, _ = _base(store)
    metadata = {"k\ud800": ["\ud800"], "x": {"\udfff": {"\ue000\x00": 1}}}
    part = store.append_part(reply_id, {"type": "text", "text": "\ud800", "metadata": metadata})
    assert _loaded_part(store, session_id, part.id).metadata == metadata


@pytest.mark.parametrize("status", ["pending", "running"])
def test_a_tool_part_appended_with_an_early_output_can_still_complete(store: SessionStore, status: str) -> None:
    """Found by the fuzz: ``append_part`` stores an output given with a pending or running state (``update_tool``
    refuses one: "only a completed tool has an output"), and completing the part later then fails on the
    existing ``tool_outputs`` row ("refused by the database: UNIQUE constraint failed"). Either refusing the
    output up front or replacing it on completion passes."""
    session_id, _, reply_id, _ = _base(store)
    try:
        part = store.append_part(reply_id, {"type": "tool", "call_id": "early", "tool": "bash", "state": {"status": status, "output": "early"}})
    except InvalidInput:
        return
    if status == "pending":
        store.update_tool(part.id, status="running")
    store.update_tool(part.id, status="completed", output="final")
    assert _loaded_part(store, session_id, part.id).state.output == "final"


def test_export_keeps_json_keys_with_lone_surrogates(store: SessionStore) -> None:
    """The exporter dumps parts with pydantic's JSON mode, which turns a dict key holding a lone surrogate
    into U+FFFD characters (brutus/importers/export.py, ``part.model_dump(mode="json", ...)``)."""
    from brutus.importers.export import export_opencode

    session_id, _, reply_id, _ = _base(store)
    metadata = {"k\ud800": 1}
    store.append_part(reply_id, {"type": "text", "text": "x", "metadata": metadata})
    exported = export_opencode(store, session_id)
    texts = [p for m in exported["messages"] for p in m["parts"] if p.get("type") == "text"]
    assert texts[0]["metadata"] == metadata


def test_a_claude_code_entry_with_a_non_string_uuid_is_refused(store: SessionStore, tmp_path: Path) -> None:
    """Found by the fuzz: ``TypeError: unhashable type: 'list'`` from brutus/importers/claude_code.py
    (``plan_claude_code``: ``uuids = {e.get("uuid") for _, e in conversation}``)."""
    lines = [json.loads(line) for line in read_text(corpus_file("9dd861b1")).splitlines() if line.strip()]
    for bad in (["a", "list"], {"a": "dict"}):
        lines[0]["uuid"] = bad
        path = tmp_path / f"bad_uuid_{type(bad).__name__}.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in lines))
        ok, error = attempt(store, lambda: import_file(store, path))
        assert not ok and isinstance(error, ImportFormatError), error


# -- the importers --------------------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, prefix + (index,))
    return found


def _mutate(document: Any, draw: Any) -> Any:
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(document) if p]
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "hostile-text"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "hostile-text":
            parent[path[-1]] = draw(TEXT)
        else:
            parent[path[-1]] = draw(st.one_of(JSON, DEEP, NOT_TEXT.filter(lambda v: not isinstance(v, bytes))))
    return document


@st.composite
def mutated_files(draw: Any, kind: str) -> bytes:
    if kind == "opencode":
        document = read_export(corpus_file("nimble-pixel"))
        raw = json.dumps(_mutate(document, draw), ensure_ascii=draw(st.booleans()), allow_nan=True).encode("utf-8", "surrogatepass")
    else:
        lines = [json.loads(line) for line in read_text(corpus_file("9dd861b1")).splitlines() if line.strip()]
        raw = "\n".join(json.dumps(e, allow_nan=True) for e in _mutate(lines, draw)).encode("utf-8", "surrogatepass")
    cut = draw(st.sampled_from(["none", "none", "truncate", "flip"]))
    if cut == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif cut == "flip":
        at = draw(st.integers(0, len(raw) - 1))
        raw = raw[:at] + bytes([draw(st.integers(0, 255))]) + raw[at + 1 :]
    return raw


@pytest.mark.parametrize("kind", ["opencode", "claude-code"])
def test_mutated_import_files(store: SessionStore, tmp_path: Path, kind: str) -> None:
    @settings(FUZZ, max_examples=40)
    @given(raw=mutated_files(kind))
    def run(raw: bytes) -> None:
        path = tmp_path / f"{uuid.uuid4().hex}.{'json' if kind == 'opencode' else 'jsonl'}"
        path.write_bytes(raw)
        ok, created = attempt(store, lambda: import_file(store, path))
        if ok:
            assert integrity_problems(store, created) == []
            store.delete_session(created[0]) if created else None  # its children go with it: a small database

    run()


def test_atheris_short_run(tmp_path: Path) -> None:
    """Coverage-guided fuzzing of the codec, the store and the importers' parsers for 15 s (SQLite), when
    atheris is installed (``pip install atheris``; it is not a test dependency)."""
    pytest.importorskip("atheris")
    script = Path(__file__).with_name("fuzz_atheris.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "-max_total_time=15", "-max_len=2048", f"-artifact_prefix={tmp_path}/"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done" in proc.stderr


# -- no SQL built from values -----------------------------------------------------------------------------------

SQL_CALLS = {"text", "exec_driver_sql", "execute", "executemany", "executescript"}
SQL_WORDS = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|PRAGMA|VACUUM|ANALYZE|CREATE|DROP|ALTER|WHERE|FROM|BEGIN|COMMIT)\b")
CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")


def _constant(node: ast.expr) -> bool:
    """A module constant (NAME or module.NAME), an ``int(...)``, or SQLAlchemy's compiler rendering an element."""
    if isinstance(node, ast.Name):
        return bool(CONSTANT.fullmatch(node.id))
    if isinstance(node, ast.Attribute):
        return bool(CONSTANT.fullmatch(node.attr))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # int(x): a number carries no SQL
        return node.func.id == "int" and len(node.args) == 1 and not node.keywords
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "process" and isinstance(node.func.value, ast.Name) and node.func.value.id == "compiler"
    return False


def _formatted_sql(node: ast.AST) -> list[ast.expr]:
    """The values interpolated into a string that reads like SQL (f-string, ``%`` or ``.format``)."""
    if isinstance(node, ast.JoinedStr):
        literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
        if SQL_WORDS.search(literal) or "(" in literal and "length" in literal:
            return [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        if isinstance(node.left.value, str) and SQL_WORDS.search(node.left.value):
            return node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        target = node.func.value
        if isinstance(target, ast.Constant) and isinstance(target.value, str) and SQL_WORDS.search(target.value):
            return list(node.args) + [k.value for k in node.keywords]
    return []


def test_no_sql_is_built_from_values() -> None:
    package = Path(__file__).resolve().parents[1] / "brutus"
    offences = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            values = _formatted_sql(node)
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name in SQL_CALLS and node.args:
                    values += [v for v in _formatted_sql_call_arg(node.args[0])]
            for value in values:
                if not _constant(value):
                    offences.append(f"{path.relative_to(package.parent)}:{node.lineno}: {ast.unparse(value)}")
    assert not offences, "SQL built from non-constant values:\n" + "\n".join(sorted(set(offences)))


def _formatted_sql_call_arg(arg: ast.expr) -> list[ast.expr]:
    """Any value formatted into the SQL argument of text()/execute() (even without an SQL keyword)."""
    if isinstance(arg, ast.JoinedStr):
        return [v.value for v in arg.values if isinstance(v, ast.FormattedValue)]
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Mod, ast.Add)):
        return [n for n in (arg.left, arg.right) if not isinstance(n, ast.Constant)]
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "format":
        return list(arg.args) + [k.value for k in arg.keywords]
    return []
