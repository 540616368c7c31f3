"""brutus as the Claude Agent SDK's ``SessionStore``: ``BrutusSessionStore(store)`` on an ``AsyncSessionStore``.

Rules (the SDK's protocol, ``claude_agent_sdk.types.SessionStore``, and what brutus adds):

- ``append(key, entries)`` keeps every entry exactly, in call order (``brutus.integrations.transcripts``);
  an entry whose ``uuid`` the transcript holds already is skipped, one without a uuid is always appended.
  ``load(key)`` gives them back deep-equal, or None for a key never written.
- Each key is a brutus session: the main transcript ``ses_cas_…`` (derived from project_key and session id,
  see ``session_id``), a ``subpath`` (a sub-agent's transcript) a child session of it. The entries are parsed
  into its messages, parts and tool states as they arrive (``claude_mirror``: the Claude Code importer's
  mapping, so ``compact_boundary`` / ``isCompactSummary`` lines become brutus compactions and summaries and
  ``filter_compacted`` starts there); ``brutus sessions list`` / ``show`` / ``stats`` read it like any
  session, and ``transcripts`` joins it to its project_key and the SDK's session id in SQL.
- The entries and the SDK's summary commit first, in one transaction; the messages follow in a second one.
  If parsing fails the entries stay (the SDK retries a failed append, which would repeat the entries without
  a uuid), the error is logged and kept in the transcript's state, and the next append catches up.
- ``list_session_summaries`` returns ``fold_session_summary``'s state as it was folded, never interpreted:
  folded in ``append`` over the new entries of main transcripts only, stamped with the transcript's ``mtime``
  (the store's clock at that write, also ``list_sessions``'s ``mtime``, strictly increasing).
- ``delete`` of a main key deletes its session with everything in it, sub-agent transcripts included; of a
  subpath, that transcript only. Deleting the session in brutus deletes the transcript too.
- Appends to one SDK session take turns (the transcript lock), so concurrent appends cannot interleave.
- On a tenant's store (``AsyncSessionStore.open(url, tenant=...)``) every key is that tenant's: the SDK's
  ``project_key`` stays the project within it, and ``list_sessions(project_key)`` lists the tenant's only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, NotFound
from ..extras import require

# what the extra brings: the SDK, and the async store's drivers
require("brutus.integrations.claude_agent_sdk",
        {"claude_agent_sdk": "claude-agent-sdk", "aiosqlite": "claude-agent-sdk", "greenlet": "claude-agent-sdk"})

from claude_agent_sdk import fold_session_summary  # noqa: E402

from ..async_store import AsyncSessionStore
from ..importers.claude_code_builder import prompt_title
from . import transcripts as tr
from .claude_mirror import MirrorState, plan_window, reconcile
from .transcripts import TranscriptKey, run

if TYPE_CHECKING:
    from claude_agent_sdk.types import SessionKey, SessionListSubkeysKey

__all__ = ["BrutusSessionStore", "SDK"]

SDK = "claude-agent-sdk"
log = logging.getLogger(__name__)


class BrutusSessionStore:
    """The Claude Agent SDK's ``SessionStore`` on a brutus ``AsyncSessionStore`` (SQLite or PostgreSQL):
    ``ClaudeAgentOptions(session_store=BrutusSessionStore(store))``."""

    def __init__(self, store: AsyncSessionStore) -> None:
        if not isinstance(store, AsyncSessionStore):
            raise InvalidInput(
                "BrutusSessionStore needs an AsyncSessionStore (await AsyncSessionStore.open(url)), "
                f"got {type(store).__name__}"
            )
        self.store = store

    def session_id(self, key: SessionKey | Mapping[str, Any]) -> str:
        """The brutus session a key's transcript is parsed into (``brutus show`` it)."""
        return _key(key, self.store.tenant).session_id

    # -- the protocol -------------------------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[Any]) -> None:
        """Mirror a batch of transcript entries (see the module's rules)."""
        transcript = _key(key, self.store.tenant)
        if not entries:
            return
        if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
            raise InvalidInput(f"entries must be a list of JSON objects, got {type(entries).__name__}")
        if await self._store_entries(transcript, list(entries)):
            await self._parse(transcript)

    async def load(self, key: SessionKey) -> list[Any] | None:
        return await run(self.store, tr.load(_key(key, self.store.tenant)), write=False)

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        rows = await run(self.store, tr.list_main(SDK, _project(project_key)), write=False)
        return [{"session_id": session_id, "mtime": mtime} for session_id, mtime, _ in rows]

    async def list_session_summaries(self, project_key: str) -> list[dict[str, Any]]:
        rows = await run(self.store, tr.list_main(SDK, _project(project_key)), write=False)
        return [
            {"session_id": session_id, "mtime": mtime, "data": summary}
            for session_id, mtime, summary in rows
            if summary is not None
        ]

    async def delete(self, key: SessionKey) -> None:
        transcript = _key(key, self.store.tenant)
        async with self.store.batch():
            await run(self.store, tr.lock(transcript, self._dialect))
            try:
                await self.store.delete_session(transcript.session_id)
            except NotFound:
                pass

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        main = _key({"project_key": key.get("project_key"), "session_id": key.get("session_id")}, self.store.tenant)
        return await run(self.store, tr.subkeys(main), write=False)

    # -- steps --------------------------------------------------------------------------------------------

    @property
    def _dialect(self) -> str:
        return self.store.engine.dialect.name

    async def _store_entries(self, key: TranscriptKey, entries: list[Any]) -> bool:
        """The entries, the SDK's summary and the transcript's sessions, in one transaction; whether the
        messages need parsing again (new entries, or a parse that failed before)."""
        store = self.store
        async with store.batch():
            await run(store, tr.lock(key, self._dialect))
            row = await run(store, tr.find(key))
            if row is None:
                row = await self._create(key)
            added = await run(store, tr.append_entries(key.session_id, entries, row.last_seq))
            state = MirrorState.from_json(row.state)
            if not added:
                return state.error is not None
            summary = row.summary if key.subpath else _folded(key, row, [a.entry for a in added])
            state.note_summaries(added)
            mtime = max(store.clock(), row.mtime + 1)
            saved = tr.save(key.session_id, last_seq=added[-1].seq, mtime=mtime, summary=summary, state=state.to_json())
            await run(store, saved)
        return True

    async def _create(self, key: TranscriptKey) -> Any:
        parent = None
        if key.subpath:
            parent = key.main().session_id
            await _ensure_session(self.store, parent)
        await _ensure_session(self.store, key.session_id, parent_id=parent)
        return await run(self.store, tr.insert_transcript(key, now=self.store.clock()))

    async def _parse(self, key: TranscriptKey) -> None:
        """Re-plan the transcript's window into its session(s), in a transaction of its own."""
        try:
            async with self.store.batch():
                await run(self.store, tr.lock(key, self._dialect))
                row = await run(self.store, tr.find(key))
                if row is None:  # deleted meanwhile
                    return
                state = MirrorState.from_json(row.state)
                await self._mirror(key, state)
                state.error = None
                await run(self.store, tr.save_state(key.session_id, state.to_json()))
        except Exception as exc:  # noqa: BLE001  the entries are stored: the next append parses again
            log.warning(
                "brutus: transcript %s stored, parsing it into session %s failed: %s",
                key.external_id, key.session_id, exc, exc_info=True,
            )  # fmt: skip
            await self._note_error(key, f"{type(exc).__name__}: {exc}")

    async def _mirror(self, key: TranscriptKey, state: MirrorState) -> None:
        store = self.store
        lines = await run(store, tr.entries(key.session_id, from_seq=state.cut, conversation=True))
        plan = plan_window(lines, key)
        if state.cut == 1:  # the window starts at the first line: what it says of the session holds
            state.first_prompt, state.directory = plan.first_prompt, plan.directory
        title = await self._title(key, state)
        if [title, state.directory] != state.applied:
            await store.update_session(key.session_id, title=title, directory=state.directory)
            state.applied = [title, state.directory]
        state.main = await reconcile(store, key.session_id, plan.main, state.main)
        for child, last in plan.children:
            known = state.children.get(child.id)
            if known is None:
                fields = {"parent_id": key.session_id, "title": child.title, "directory": child.directory}
                await _ensure_session(store, child.id, **fields)
                known = state.children[child.id] = {"written": [], "title": child.title}
            elif child.title != known["title"]:
                await store.update_session(child.id, title=child.title)
                known["title"] = child.title
            known["written"] = await reconcile(store, child.id, child.history, known["written"])
            known["last"] = last
        written = [w[0] for w in state.main]
        if plan.cut is not None and plan.cut > state.cut and plan.cut_message in written:
            del state.main[: written.index(plan.cut_message)]  # the messages before the cut are settled
            state.cut = plan.cut
            state.children = {cid: c for cid, c in state.children.items() if c["last"] >= plan.cut}

    async def _title(self, key: TranscriptKey, state: MirrorState) -> str | None:
        """The importer's title: the first summary line naming a line of the transcript, else the prompt."""
        leaves = [leaf for leaf, summary in state.summaries if isinstance(summary, str)]
        if leaves:
            named = await run(self.store, tr.conversation_uuids(key.session_id, leaves))
            for leaf, summary in state.summaries:
                if leaf in named and isinstance(summary, str):
                    return summary or prompt_title(state.first_prompt)
        return prompt_title(state.first_prompt)

    async def _note_error(self, key: TranscriptKey, error: str) -> None:
        try:
            async with self.store.batch():
                await run(self.store, tr.lock(key, self._dialect))
                row = await run(self.store, tr.find(key))
                if row is not None:
                    state = MirrorState.from_json(row.state)
                    state.error = error
                    await run(self.store, tr.save_state(key.session_id, state.to_json()))
        except Exception:  # noqa: BLE001  best effort: the warning above says what failed
            log.warning("brutus: could not record the parse error of transcript %s", key.external_id, exc_info=True)


def _folded(key: TranscriptKey, row: Any, added: list[Any]) -> Any:
    """The SDK's summary state of a main transcript with ``added`` folded in (its opaque ``data``)."""
    previous = None if row.summary is None else {"session_id": key.external_id, "mtime": row.mtime, "data": row.summary}
    fold_key = {"project_key": key.project_key, "session_id": key.external_id}
    return fold_session_summary(previous, fold_key, added)["data"]  # type: ignore[arg-type]


async def _ensure_session(store: AsyncSessionStore, session_id: str, **fields: Any) -> None:
    try:
        await store.get_session(session_id)
    except NotFound:
        await store.create_session(id=session_id, **fields)


def _project(project_key: Any) -> str:
    if not isinstance(project_key, str):
        raise InvalidInput(f"project_key must be a string, got {type(project_key).__name__}")
    return project_key


def _key(key: Mapping[str, Any], tenant: str | None) -> TranscriptKey:
    if not isinstance(key, Mapping):
        raise InvalidInput(f"a session key is a dict with project_key and session_id, got {type(key).__name__}")
    session_id, subpath = key.get("session_id"), key.get("subpath")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput(f"session_id must be a non-empty string, got {session_id!r}")
    if subpath is not None and (not isinstance(subpath, str) or not subpath):
        raise InvalidInput("subpath must be a non-empty string, or absent for the main transcript")
    return TranscriptKey(SDK, _project(key.get("project_key")), session_id, subpath or "", tenant or "")
