"""brutus as an OpenAI Agents ``Session``: ``BrutusSession(session_id, store)`` on an ``AsyncSessionStore``.

Rules:

- Items are kept exactly, in order (``brutus.integrations.transcripts``, never deduplicated): for a session
  never compacted ``get_items()`` returns them as added, ``get_items(limit)`` the newest ``limit`` of them
  (all when None or negative, none for 0), ``pop_item()`` removes and returns the newest, and
  ``clear_session()`` deletes the session: what the SDK's ``SQLiteSession`` does.
- Each item is also parsed into the brutus session ``brutus_session_id`` (``openai_items``: ``message`` →
  text, ``function_call`` → a pending tool part that its ``function_call_output`` completes, ``reasoning`` →
  reasoning, anything else opaque), in the transaction that stores it, so ``brutus show`` / ``stats`` /
  ``prune`` / ``compact`` work on it. ``pop_item`` rewinds the message the item went into and writes it again
  from the items it still has.
- After a brutus compaction (``store.compact(session.brutus_session_id)``) ``get_items`` returns the
  compaction-aware view: the summary as an input message, then the items of the messages the view keeps (a
  message no item made, such as a compaction's "Continue", as items made from its parts). ``pop_item`` then
  pops only what the view shows and brutus can rewind: it returns None when the newest item lies behind the
  compaction or before messages brutus wrote after it.
- Branches, as the SDK's ``AdvancedSQLiteSession``: ``create_branch_from_turn(n)`` makes a branch holding
  the items before the ``n``-th user item (turns numbered from 1 by the items whose role is "user") and
  switches to it; ``switch_to_branch`` switches back ("main" is the session itself). A branch is a transcript
  of its own (subpath: the branch id) mirrored into a ``store.fork`` of the current branch's session at the
  message before that item (``forked_from`` says where from), its items copied in the database with the ids
  of the fork's copies: it reads back exactly the items before the turn, and shares nothing with the
  session afterwards; a call it holds open that a later turn answered is open in its messages too (unless
  a compaction lies after it). A branch from the first turn with nothing before it is a new empty session
  (nothing to fork). ``clear_session`` deletes every branch too and switches to "main".
- Calls on one session take turns (the transcript lock).
- On a tenant's store (``AsyncSessionStore.open(url, tenant=...)``) the session ids are that tenant's: two
  tenants' ``BrutusSession("user-42", store)`` are two sessions, neither seeing the other's.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..errors import InvalidInput, InvalidTransition, NotFound
from ..extras import require

# what the extra brings: the SDK (the module ``agents``), and the async store's drivers
require("brutus.integrations.openai_agents", {"agents": "openai-agents", "aiosqlite": "openai-agents", "greenlet": "openai-agents"})

from agents.memory import SessionSettings  # noqa: E402

from ..async_store import AsyncSessionStore
from ..models import MessageWithParts
from . import openai_items as oi
from . import transcripts as tr
from .transcripts import JSON, TranscriptKey, run

__all__ = ["BrutusSession", "MAIN", "SDK"]

SDK = "openai-agents"
MAIN = "main"  # the branch that is the session itself


class BrutusSession:
    """OpenAI Agents' ``Session`` protocol on a brutus ``AsyncSessionStore``:
    ``Runner.run(agent, input, session=BrutusSession("user-42", store))``."""

    def __init__(
        self,
        session_id: str,
        store: AsyncSessionStore,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput(f"session_id must be a non-empty string, got {session_id!r}")
        if not isinstance(store, AsyncSessionStore):
            raise InvalidInput(
                "BrutusSession needs an AsyncSessionStore (await AsyncSessionStore.open(url)), "
                f"got {type(store).__name__}"
            )
        self.session_id = session_id
        self.store = store
        if isinstance(session_settings, dict):
            session_settings = SessionSettings(**session_settings)
        self.session_settings = session_settings or SessionSettings()
        self.branch_id = MAIN  # the branch the calls go to
        self._tenant = store.tenant or ""  # session ids are the tenant's own: two tenants may both have "user-42"
        self._key = TranscriptKey(SDK, "", session_id, tenant=self._tenant)
        self._session = self._key.session_id  # the current branch's brutus session, as last seen

    @property
    def brutus_session_id(self) -> str:
        """The brutus session the current branch's items are parsed into (``brutus show`` it, ``store.compact``
        it)."""
        return self._session

    # -- the protocol -------------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[JSON]:
        """The history, oldest first: the newest ``limit`` items (``session_settings.limit`` when None)."""
        if limit is None:
            limit = self.session_settings.limit
        if limit is not None and limit < 0:
            limit = None  # SQLiteSession's LIMIT of a negative number: no limit
        if limit == 0:
            return []
        session, found = await run(self.store, _read(self._key, limit), write=False)
        if found is None:  # compacted: the view decides
            found = await self._view(session)
            return found if limit is None else found[-limit:]
        return found

    async def add_items(self, items: list[JSON]) -> None:
        if not items:
            return
        items = list(items)
        for item in items:
            if not isinstance(item, dict):
                raise InvalidInput(f"an item must be a JSON object (a Responses-API item), got {type(item).__name__}")
        store, key = self.store, self._key
        async with store.batch():
            await run(store, tr.lock(key, self._dialect))
            row = await run(store, tr.find(key))
            if row is None:
                row = await self._create(items)
            session = self._session = row.session_id
            at = await run(store, tr.items_at(session))
            outputs = [item["call_id"] for item in items if oi.kind(item) == "output"]
            calls = await run(store, tr.open_calls(session, outputs)) if outputs else {}
            context = oi.Context(open_message=_open_message(at), last_user=at.last_user, calls=calls)
            numbered = list(enumerate(items, start=row.last_seq + 1))
            plan = oi.plan_add(context, numbered, tag=key.tag)
            for message_id, part in plan.parts:
                await store.append_part(message_id, part)
            if plan.calls_added and context.open_message is not None:
                await store.finish_message(context.open_message, finish="tool-calls")
            for part_id, output in plan.completions:
                await _complete(store, part_id, output)
            if plan.new_messages:
                await store.append_messages(session, plan.new_messages)
            await run(store, tr.append_entries(session, items, row.last_seq, dedupe=False, columns=plan.columns))
            await self._saved(row, row.last_seq + len(items))

    async def pop_item(self) -> JSON | None:
        store, key = self.store, self._key
        async with store.batch():
            await run(store, tr.lock(key, self._dialect))
            row = await run(store, tr.find(key))
            if row is None:
                return None
            session = self._session = row.session_id
            at = await run(store, tr.items_at(session))
            last = at.last_item
            if last is None:
                return None
            rewritten = last.message_id is None or await self._rewrite(
                session, last.message_id, at.boundary_seq, tag=key.tag, drop=last.seq
            )
            if not rewritten:
                return None
            await run(store, tr.delete_last_entry(session, last.seq))
            await self._saved(row, row.last_seq)
            return last.entry

    async def clear_session(self) -> None:
        """Delete the session and every branch of it; the calls go to "main" again."""
        store, main = self.store, self._key.main()
        async with store.batch():
            await run(store, tr.lock(main, self._dialect))
            branches = [TranscriptKey(SDK, "", self.session_id, b, self._tenant) for b in await run(store, tr.subkeys(main))]
            for key in [main, *branches]:
                row = await run(store, tr.find(key))
                session = key.session_id if row is None else row.session_id
                try:
                    await store.delete_session(session)
                except NotFound:
                    pass
        self.branch_id, self._key, self._session = MAIN, main, main.session_id

    # -- branches (the SDK's AdvancedSQLiteSession) -----------------------------------------------------------

    async def create_branch_from_turn(self, turn_number: int, branch_name: str | None = None) -> str:
        """A new branch holding the current branch's items before its ``turn_number``-th user item, switched
        to; its id (``branch_name``, else ``branch_from_turn_<n>_<epoch seconds>``). ``InvalidInput`` (nothing
        written) for a turn with no user item or a branch id in use."""
        if isinstance(turn_number, bool) or not isinstance(turn_number, int):
            raise InvalidInput(f"turn_number must be an int, got {type(turn_number).__name__}")
        if branch_name is not None and (not isinstance(branch_name, str) or not branch_name.strip()):
            raise InvalidInput("a branch name must be a non-empty string")
        store, source, dialect = self.store, self._key, self._dialect
        point = await run(store, _branch_point(source, turn_number, self.branch_id, dialect), write=False)
        key = await self._branch_key(branch_name, turn_number)
        origin, last_seq, before = point
        async with store.batch():
            # the fork, then the transcript's lock and the branch point read again: a branch written to
            # meanwhile is refused rather than copied half way
            if before is None:
                session = await store.create_session(title=(await store.get_session(origin)).title)
            else:
                session = await store.fork(origin, before)
            await run(store, tr.lock(source, dialect))
            if await run(store, _branch_point(source, turn_number, self.branch_id, dialect)) != point:
                raise InvalidInput(f"branch {self.branch_id!r} changed while branching from turn {turn_number}; try again")
            await run(store, tr.insert_transcript(key, now=store.clock(), session_id=session.id))
            await run(store, tr.copy_entries(origin, session.id, last_seq))
            await run(store, tr.save(session.id, last_seq=last_seq, mtime=store.clock(), summary=None, state=None))
            answered = await run(store, tr.answered_after(origin, session.id, last_seq))
            if answered is not None:  # a call the fork holds answered, by an output the branch has not
                boundary_seq = (await run(store, tr.items_at(session.id))).boundary_seq
                await self._rewrite(session.id, answered, boundary_seq, tag=key.tag)
        self.branch_id, self._key, self._session = key.subpath, key, session.id
        return key.subpath

    async def switch_to_branch(self, branch_id: str) -> None:
        """Send the calls to ``branch_id`` ("main": the session itself); ``InvalidInput`` for no such branch."""
        if branch_id == MAIN:
            self.branch_id, self._key = MAIN, self._key.main()
            self._session = self._key.session_id
            return
        key = TranscriptKey(SDK, "", self.session_id, branch_id, self._tenant) if isinstance(branch_id, str) and branch_id else None
        row = None if key is None else await run(self.store, tr.find(key), write=False)
        if row is None:
            raise InvalidInput(f"branch {branch_id!r} does not exist in session {self.session_id!r}")
        self.branch_id, self._key, self._session = branch_id, key, row.session_id

    # -- steps --------------------------------------------------------------------------------------------

    @property
    def _dialect(self) -> str:
        return self.store.engine.dialect.name

    async def _create(self, items: list[JSON]) -> Any:
        store, key = self.store, self._key
        try:
            await store.get_session(key.session_id)
        except NotFound:
            await store.create_session(id=key.session_id, title=oi.title(items))
        return await run(store, tr.insert_transcript(key, now=store.clock()))

    async def _branch_key(self, name: str | None, turn_number: int) -> TranscriptKey:
        """The key of a new branch: ``name``, refused when in use, else the SDK's default name made unique."""
        def key(branch: str) -> TranscriptKey:
            return TranscriptKey(SDK, "", self.session_id, branch, self._tenant)

        if name is not None:
            if name == MAIN or await run(self.store, tr.find(key(name))) is not None:
                raise InvalidInput(f"branch id {name!r} has already been used in session {self.session_id!r}")
            return key(name)
        base = f"branch_from_turn_{turn_number}_{self.store.clock() // 1000}"
        name, suffix = base, 1
        while await run(self.store, tr.find(key(name))) is not None:
            suffix += 1
            name = f"{base}_{suffix}"
        return key(name)

    async def _saved(self, row: Any, last_seq: int) -> None:
        mtime = max(self.store.clock(), row.mtime + 1)
        await run(self.store, tr.save(row.session_id, last_seq=last_seq, mtime=mtime, summary=None, state=None))

    async def _rewrite(
        self, session: str, message_id: str, boundary_seq: int, *, tag: str, drop: int | None = None
    ) -> bool:
        """Rewind ``message_id`` and write it (and the item messages after it) again from their items, without
        the item ``drop``; False when that cannot be done (behind a compaction, or followed by messages brutus
        wrote). ``tag``: the transcript's, for a part whose id the entries lost."""
        store = self.store
        seq, later, parent = await run(store, tr.messages_from(session, message_id))
        if not seq:
            return True  # the message is gone already
        rows = await run(store, tr.item_rows_of(session, seq))
        keep = set(later)
        if (boundary_seq and seq < boundary_seq) or not keep <= {r[1] for r in rows}:
            return False
        rows = [r for r in rows if r[1] in keep and r[0] != drop]
        await store.rewind(session, message_id)
        rebuilt = oi.build_messages(rows, tag=tag, parent=parent)
        if rebuilt:
            await store.append_messages(session, rebuilt)
        return True

    async def _view(self, session: str) -> list[JSON]:
        """The compaction-aware view as items: the summary, then what the view keeps."""
        view = await self.store.filter_compacted(session)
        compaction = next((m for m in view if any(p.type == "compaction" for p in m.parts)), None)
        summary = next(
            (m for m in view if compaction is not None and m.info.summary and m.info.parent_id == compaction.info.id),
            None,
        )
        kept = [m for m in view if m is not compaction and m is not summary]
        by_message: dict[str, list[JSON]] = defaultdict(list)
        if kept:
            for _, message_id, _, item in await run(self.store, tr.item_rows_of(session, kept[0].info.seq), write=False):
                by_message[message_id].append(item)
        items = [oi.summary_item(_text(summary))] if summary is not None else []
        for message in kept:
            items.extend(by_message.get(message.info.id) or oi.to_items(message))
        return items


def _read(key: TranscriptKey, limit: int | None) -> Any:
    """The transcript's brutus session, and the newest ``limit`` items of it when it was never compacted ([]
    for one never written; None when the session has a compaction boundary)."""
    row = yield from tr.find(key)
    if row is None:
        return key.session_id, []
    at = yield from tr.items_at(row.session_id)
    if at.boundary_seq:
        return row.session_id, None
    return row.session_id, (yield from tr.last_items(row.session_id, limit))


def _branch_point(key: TranscriptKey, turn_number: int, branch: str, dialect: str) -> Any:
    """Where a branch from ``turn_number`` starts: the transcript's brutus session, the seq of the last item
    before the turn's user item, and the message to fork at (None: nothing before it)."""
    row = yield from tr.find(key)
    turn = (yield from tr.user_turn(row.session_id, turn_number, dialect)) if row and turn_number > 0 else None
    if turn is None:
        raise InvalidInput(f"turn {turn_number} does not contain a user message in branch {branch!r}")
    before = yield from tr.message_before(row.session_id, turn.message_id)
    return row.session_id, turn.seq - 1, before


def _open_message(at: tr.ItemsAt) -> str | None:
    """The assistant message new assistant items join: the session's last message, when the last item went
    into it and was not a user message or a tool output."""
    item, message = at.last_item, at.last_message
    if item is None or message is None or item.message_id != message.id:
        return None
    return item.message_id if oi.kind(item.entry) in ("assistant", "call", "other") else None


async def _complete(store: AsyncSessionStore, part_id: str, output: str) -> None:
    """Complete a stored tool part (pending → running → completed)."""
    try:
        await store.update_tool(part_id, status="running")
    except InvalidTransition:
        pass  # running already
    await store.update_tool(part_id, status="completed", output=output)


def _text(message: MessageWithParts) -> str:
    return "\n\n".join(p.text for p in message.parts if p.type == "text" and not p.ignored)
