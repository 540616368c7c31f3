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
- Calls on one session take turns (the transcript lock).
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

__all__ = ["BrutusSession", "SDK"]

SDK = "openai-agents"


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
        self._key = TranscriptKey(SDK, "", session_id)

    @property
    def brutus_session_id(self) -> str:
        """The brutus session the items are parsed into (``brutus show`` it, ``store.compact`` it)."""
        return self._key.session_id

    # -- the protocol -------------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[JSON]:
        """The history, oldest first: the newest ``limit`` items (``session_settings.limit`` when None)."""
        if limit is None:
            limit = self.session_settings.limit
        if limit is not None and limit < 0:
            limit = None  # SQLiteSession's LIMIT of a negative number: no limit
        if limit == 0:
            return []
        found = await run(self.store, _read(self._key, limit), write=False)
        if found is None:  # compacted: the view decides
            found = await self._view()
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
            at = await run(store, tr.items_at(key.session_id))
            outputs = [item["call_id"] for item in items if oi.kind(item) == "output"]
            calls = await run(store, tr.open_calls(key.session_id, outputs)) if outputs else {}
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
                await store.append_messages(key.session_id, plan.new_messages)
            await run(store, tr.append_entries(key.session_id, items, row.last_seq, dedupe=False, columns=plan.columns))
            await self._saved(row, row.last_seq + len(items))

    async def pop_item(self) -> JSON | None:
        store, key = self.store, self._key
        async with store.batch():
            await run(store, tr.lock(key, self._dialect))
            row = await run(store, tr.find(key))
            if row is None:
                return None
            at = await run(store, tr.items_at(key.session_id))
            last = at.last_item
            if last is None:
                return None
            if last.message_id is not None and not await self._rewrite_without(last, at.boundary_seq):
                return None
            await run(store, tr.delete_last_entry(key.session_id, last.seq))
            await self._saved(row, row.last_seq)
            return last.entry

    async def clear_session(self) -> None:
        async with self.store.batch():
            await run(self.store, tr.lock(self._key, self._dialect))
            try:
                await self.store.delete_session(self._key.session_id)
            except NotFound:
                pass

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

    async def _saved(self, row: Any, last_seq: int) -> None:
        mtime = max(self.store.clock(), row.mtime + 1)
        await run(self.store, tr.save(self._key.session_id, last_seq=last_seq, mtime=mtime, summary=None, state=None))

    async def _rewrite_without(self, last: Any, boundary_seq: int) -> bool:
        """Rewind the message ``last`` went into and write it (and the mine after it) again without ``last``;
        False when that cannot be done (behind a compaction, or followed by messages brutus wrote)."""
        store, key = self.store, self._key
        seq, later, parent = await run(store, tr.messages_from(key.session_id, last.message_id))
        if not seq:
            return True  # its message is gone already
        mine = f"msg_{key.tag}_"
        if (boundary_seq and seq < boundary_seq) or not all(message_id.startswith(mine) for message_id in later):
            return False
        keep = set(later)
        rows = [
            r for r in await run(store, tr.item_rows(key.session_id, oi.message_seq(last.message_id)))
            if r[1] in keep and r[0] != last.seq
        ]
        await store.rewind(key.session_id, last.message_id)
        rebuilt = oi.build_messages(rows, tag=key.tag, parent=parent)
        if rebuilt:
            await store.append_messages(key.session_id, rebuilt)
        return True

    async def _view(self) -> list[JSON]:
        """The compaction-aware view as items: the summary, then what the view keeps."""
        key = self._key
        view = await self.store.filter_compacted(key.session_id)
        compaction = next((m for m in view if any(p.type == "compaction" for p in m.parts)), None)
        summary = next(
            (m for m in view if compaction is not None and m.info.summary and m.info.parent_id == compaction.info.id),
            None,
        )
        kept = [m for m in view if m is not compaction and m is not summary]
        mine = [m.info.id for m in kept if m.info.id.startswith(f"msg_{key.tag}_")]
        by_message: dict[str, list[JSON]] = defaultdict(list)
        if mine:
            for _, message_id, _, item in await run(
                self.store, tr.item_rows(key.session_id, min(map(oi.message_seq, mine))), write=False
            ):
                by_message[message_id].append(item)
        items = [oi.summary_item(_text(summary))] if summary is not None else []
        for message in kept:
            items.extend(by_message.get(message.info.id) or oi.to_items(message))
        return items


def _read(key: TranscriptKey, limit: int | None) -> Any:
    """The newest ``limit`` items of a session never compacted ([] for one never written); None when the
    session has a compaction boundary."""
    row = yield from tr.find(key)
    if row is None:
        return []
    at = yield from tr.items_at(key.session_id)
    if at.boundary_seq:
        return None
    return (yield from tr.last_items(key.session_id, limit))


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
