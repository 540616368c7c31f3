"""The stores of ``benchmarks/year.py``: copies of the real corpus sessions (``tests/data/corpus``), built
through the public API and cached.

- ``load_corpus`` imports every corpus file (OpenCode exports, Claude Code sessions) into a scratch SQLite
  store with ``brutus.importers`` and reads each session back (``messages()``): the templates. Their raw text
  (text parts, tool inputs as compact JSON, tool outputs, UTF-8 bytes) is counted here, from the templates,
  so the figure does not depend on how a store keeps it.
- ``copied`` is a template's history with new message ids (and the links to them remapped: an assistant's
  ``parent_id``, a compaction's ``tail_start_id``); parts go without ids, so the store assigns them.
- ``build`` fills a store with copies of the templates round robin (a sub-agent session copied under the
  copy of its parent) until it holds ``messages`` messages, written with ``append_messages`` in calls of up
  to ``CALL`` messages (a shorter session in one call), then one long session whose last completed boundary
  is ``TAIL`` messages back (the view benchmark's session).
- ``build_long`` is one session of ``messages`` messages: template histories one after another.
- ``cached_sqlite`` keeps a built SQLite store under the cache directory, keyed by the size and a hash of
  the code (``brutus/``, ``migrations/``, this file), and hands out a copy made with SQLite's backup API
  (never ``open()`` on a database file: see ``brutus/db/files.py``). The copy is taken before any search,
  so a first search still finds what the bulk writes left pending.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brutus import SessionStore
from brutus.ids import new_id

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
CALL = 100  # messages per append_messages call, as in the issue
TAIL = 200  # the view of the long session: the compaction pair and 198 tail messages
LONG_HISTORY = 1_000  # messages before the long session's last boundary (at most)
WORD = re.compile(r"[a-z0-9]+")  # words as the search tokenizers split them, near enough


@dataclass
class Template:
    """One corpus session, read back from the store: its messages as dicts, its parent's index, and counts."""

    messages: list[dict[str, Any]]
    parent: int | None
    raw: dict[str, int]  # text, input, output bytes
    documents: list[set[str]] = field(default_factory=list)  # the words of each text / tool part
    summaries: int = 0
    compactions: int = 0


@dataclass
class Built:
    """What ``build`` wrote: sessions, messages, raw text bytes, the long session's id, and the write time."""

    sessions: int = 0
    messages: int = 0
    calls: int = 0
    raw: dict[str, int] = field(default_factory=lambda: {"text": 0, "input": 0, "output": 0})
    seconds: float = 0.0
    tail_session: str = ""

    def add(self, messages: list[dict[str, Any]]) -> None:
        self.sessions += 1
        self.messages += len(messages)
        for key, value in raw_text(messages).items():
            self.raw[key] += value

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.name.endswith((".json.gz", ".jsonl.gz")))


def load_corpus(workdir: Path) -> list[Template]:
    """Every corpus session as a template (parents before their children)."""
    from brutus.importers import import_files

    path = workdir / "corpus.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    templates: list[Template] = []
    with SessionStore.open(f"sqlite:///{path}") as store:
        import_files(store, corpus_files())
        sessions = sorted(store.list_sessions(), key=lambda s: (s.parent_id is not None, s.id))
        index = {s.id: n for n, s in enumerate(sessions)}
        for session in sessions:
            history = store.messages(session.id)
            templates.append(_template(history, index.get(session.parent_id) if session.parent_id else None))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return templates


def _template(history: list[Any], parent: int | None) -> Template:
    messages = [m.model_dump() for m in history]
    documents = []
    for message in messages:
        for part in message["parts"]:
            if part["type"] == "text":
                documents.append(set(WORD.findall(part["text"].lower())))
            elif part["type"] == "tool":
                given = json.dumps(part["state"].get("input"), ensure_ascii=False)
                documents.append(set(WORD.findall(f"{given} {part['state'].get('output') or ''}".lower())))
    summaries = sum(bool(m["info"]["summary"]) for m in messages)
    compactions = sum(p["type"] == "compaction" for m in messages for p in m["parts"])
    return Template(messages, parent, raw_text(messages), documents, summaries, compactions)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def raw_text(messages: list[dict[str, Any]]) -> dict[str, int]:
    """UTF-8 bytes of the text parts, the tool inputs (compact JSON) and the tool outputs of ``messages``."""
    raw = {"text": 0, "input": 0, "output": 0}
    for message in messages:
        for part in message["parts"]:
            if part["type"] == "text":
                raw["text"] += _utf8(part["text"])
            elif part["type"] == "tool":
                raw["input"] += _utf8(json.dumps(part["state"].get("input"), ensure_ascii=False, separators=(",", ":")))
                raw["output"] += _utf8(part["state"].get("output") or "")
    return raw


def copied(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with new message ids (links remapped) and parts without ids, for ``append_messages``.
    The corpus's own prune marks are left off (12.8% of its output bytes, in two sessions), so what gc drops
    is what the benchmark prunes."""
    ids = {m["info"]["id"]: new_id("message") for m in messages}
    out = []
    for message in messages:
        info = {k: v for k, v in message["info"].items() if k not in ("session_id", "seq")}
        info["id"] = ids[info["id"]]
        if info.get("parent_id") is not None:
            info["parent_id"] = ids.get(info["parent_id"])
        parts = []
        for part in message["parts"]:
            part = {k: v for k, v in part.items() if k not in ("id", "session_id", "message_id")}
            if part["type"] == "compaction" and part.get("tail_start_id") is not None:
                part["tail_start_id"] = ids.get(part["tail_start_id"])
            elif part["type"] == "tool" and (part["state"].get("time") or {}).get("compacted") is not None:
                part["state"] = dict(part["state"], time=dict(part["state"]["time"], compacted=None))
            parts.append(part)
        out.append({"info": info, "parts": parts})
    return out


def append_in_calls(store: SessionStore, session_id: str, messages: list[dict[str, Any]], call: int = CALL) -> int:
    """``append_messages`` in calls of ``call`` messages; the number of calls."""
    calls = 0
    for start in range(0, len(messages), call):
        store.append_messages(session_id, messages[start : start + call])
        calls += 1
    return calls


def _plain(templates: list[Template]) -> list[Template]:
    """Templates without summaries or compaction parts (their copies add no boundary)."""
    return [t for t in templates if not t.summaries and not t.compactions and t.messages]


def history_of(templates: list[Template], count: int) -> list[dict[str, Any]]:
    """Exactly ``count`` messages of plain template history: copies, one template after another."""
    out: list[dict[str, Any]] = []
    plain = _plain(templates)
    n = 0
    while len(out) < count:
        out.extend(copied(plain[n % len(plain)].messages))
        n += 1
    return out[:count]


def compaction_pair() -> list[dict[str, Any]]:
    """A completed compaction: the user message holding the ``compaction`` part and the finished summary."""
    user = new_id("message")
    return [
        {"info": {"id": user, "role": "user"}, "parts": [{"type": "compaction", "auto": True}]},
        {
            "info": {"id": new_id("message"), "role": "assistant", "parent_id": user, "summary": True,
                     "mode": "compaction", "agent": "compaction", "finish": "stop"},
            "parts": [{"type": "text", "text": "Summary: the work so far, the files touched, the next steps."}],
        },
    ]


def build(store: SessionStore, templates: list[Template], messages: int, progress: Callable[[str], None]) -> Built:
    """Copies of the templates round robin, then the long session with a ``TAIL``-message view (see the
    module docstring). Only the ``append_messages`` calls are timed (``Built.seconds``)."""
    built = Built()
    long_history = min(LONG_HISTORY, max(messages // 10, 2))
    target = messages - long_history - TAIL
    copies: dict[int, str] = {}
    n = 0
    while built.messages < target:
        at = n % len(templates)
        template = templates[at]
        parent = copies.get(template.parent) if template.parent is not None else None
        session = store.create_session(title=f"copy {n // len(templates)} of corpus session {at}", parent_id=parent)
        copies[at] = session.id
        history = copied(template.messages)[: target - built.messages]  # the last copy is cut to size
        start = time.perf_counter()
        built.calls += append_in_calls(store, session.id, history)
        built.seconds += time.perf_counter() - start
        built.add(history)
        n += 1
        if n % 200 == 0:
            progress(f"{built.messages:,} messages in {built.sessions:,} sessions")
    built.tail_session = _long_session(store, templates, long_history, built)
    return built


def _long_session(store: SessionStore, templates: list[Template], history: int, built: Built) -> str:
    session = store.create_session(title=f"{history} messages, a boundary {TAIL} back")
    written = history_of(templates, history) + compaction_pair() + history_of(templates, TAIL - 2)
    start = time.perf_counter()
    built.calls += append_in_calls(store, session.id, written)
    built.seconds += time.perf_counter() - start
    built.add(written)
    return session.id


def build_long(store: SessionStore, templates: list[Template], messages: int, call: int = 1_000) -> str:
    """One session of ``messages`` messages of plain template history, in calls of ``call``."""
    session = store.create_session(title=f"{messages} messages in one session")
    append_in_calls(store, session.id, history_of(templates, messages), call)
    return session.id


# -- the cache ----------------------------------------------------------------------------------------------------


def cached_corpus(cache: Path, workdir: Path) -> list[Template]:
    """``load_corpus``, kept in ``cache`` (a pickle of the templates: the cache is keyed by the code and corpus)."""
    import pickle

    path = cache / "corpus.pickle"
    if path.exists():
        return pickle.loads(path.read_bytes())
    templates = load_corpus(workdir)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(templates))
    return templates


def code_key() -> str:
    """A hash of what the stores are made of: ``brutus/``, ``migrations/``, this file and the corpus."""
    digest = hashlib.sha256()
    files = sorted([*(ROOT / "brutus").rglob("*.py"), *(ROOT / "migrations").rglob("*.py"), Path(__file__),
                    *corpus_files()])
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def commit() -> str:
    """The checked-out commit (``+`` when brutus/ or migrations/ has uncommitted changes), or "unknown"."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "brutus", "migrations"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def sqlite_copy(source: Path, target: Path) -> None:
    """Copy a SQLite database with SQLite's backup API (checkpointed first, the copy in WAL mode)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    src = sqlite3.connect(source)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode = WAL")
    finally:
        dst.close()
        src.close()


def checkpoint(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


@dataclass
class Cached:
    path: Path  # the working copy
    built: Built
    hit: bool


def cached_sqlite(cache: Path, name: str, workdir: Path, make: Callable[[SessionStore], Built]) -> Cached:
    """A working copy of the cached store ``name`` (built with ``make`` when missing) in ``workdir``."""
    cache.mkdir(parents=True, exist_ok=True)
    stored = cache / f"{name}.db"
    meta = cache / f"{name}.json"
    hit = stored.exists() and meta.exists()
    if not hit:
        fd, scratch = tempfile.mkstemp(suffix=".db", dir=cache)
        os.close(fd)
        Path(scratch).unlink()
        with SessionStore.open(f"sqlite:///{scratch}") as store:
            built = make(store)
        checkpoint(Path(scratch))
        for suffix in ("-wal", "-shm"):
            Path(f"{scratch}{suffix}").unlink(missing_ok=True)
        os.replace(scratch, stored)
        meta.write_text(json.dumps(built.as_json()))
    built = Built(**json.loads(meta.read_text()))
    target = workdir / f"{name}.db"
    sqlite_copy(stored, target)
    return Cached(target, built, hit)


def remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def pick_words(templates: list[Template]) -> tuple[tuple[str, float], tuple[str, float]]:
    """A common word (in the share of the corpus's text and tool parts closest to a tenth) and a rare one
    (in exactly one part), each with its share: (word, share) pairs. Copies repeat the corpus evenly, so the
    shares hold for every store built from it."""
    counts: dict[str, int] = {}
    documents = [words for template in templates for words in template.documents]
    for words in documents:
        for word in words:
            counts[word] = counts.get(word, 0) + 1
    candidates = sorted(w for w in counts if w.isalpha() and len(w) >= 4)
    common = min(candidates, key=lambda w: (abs(counts[w] / len(documents) - 0.10), w))
    rare = next(w for w in candidates if counts[w] == 1 and len(w) >= 8)
    return (common, counts[common] / len(documents)), (rare, 1 / len(documents))
