"""Done means (issue 19): real sessions of the corpus, turned into scripted runs of 200+ requests each, and one
with thinking on every turn, driven through ``Conversation`` and the fake Messages API (real SDK client) under
a context window that forces compaction: no request refused, no thinking block dropped by the API (brutus
strips the ones whose prefix it changed itself, and only after such a change), at least one compaction, the
peak context under the window."""

from __future__ import annotations

import pytest

from brutus import ContextPolicy, ModelLimits, SessionStore, import_file
from brutus.testing import FakeMessagesAPI

from corpus_helpers import corpus_file
from live_helpers import MODEL, SYSTEM, THINKING, TOOLS, client, drive, popping, scripted_steps

WINDOW = 60_000
# The first runs in every pytest; the longer ones are reliability runs (``slow``: CI runs them).
RUNS = [
    pytest.param("0a725fb5", False, id="0a725fb5"),
    pytest.param("da4409c0", False, id="da4409c0", marks=pytest.mark.slow),
    pytest.param("f67ab274", False, id="f67ab274", marks=pytest.mark.slow),
    pytest.param("0a725fb5", True, id="0a725fb5-thinking", marks=pytest.mark.slow),
]


def recorded_history(tmp_path, name: str) -> list:
    with SessionStore.open(str(tmp_path / "source.db")) as source:
        session_id = import_file(source, corpus_file(name))[0]  # the main session, sub-agents after it
        return source.messages(session_id)


@pytest.mark.parametrize("name, thinking", RUNS)
def test_a_real_session_runs_live_without_a_refusal(store: SessionStore, tmp_path, name: str, thinking: bool) -> None:
    steps = scripted_steps(recorded_history(tmp_path, name), thinking=thinking)
    assert sum(1 for s in steps if s.reply is not None) >= 200
    session = store.create_session(title=f"live {name}")
    settings = dict(system=SYSTEM, tools=TOOLS, max_tokens=8_000, limits=ModelLimits(context=WINDOW, output=8_000),
                    policy=ContextPolicy(prune="on-compaction"))
    if thinking:
        settings["thinking"] = THINKING
    conv = store.conversation(session.id, model=MODEL, **settings)
    queue: list = []
    with FakeMessagesAPI(popping(queue), context_window=WINDOW) as api:
        report = drive(conv, client(api), steps, queue)
        stats = api.stats
    completed = [c for c in store.compactions(session.id) if c.status == "completed"]
    share = stats.cache_read_input_tokens / max(1, stats.input_tokens + stats.cache_read_input_tokens + stats.cache_creation_input_tokens)
    print(f"\n{name}{' thinking' if thinking else ''}: {report.requests} requests, {stats.refused} refused, "
          f"{len(completed)} compactions, cache read share {share:.1%}, thinking stripped {len(report.stripped)}, "
          f"dropped by the API {stats.thinking_blocks_dropped}, peak {report.peak} / {WINDOW}")
    assert report.requests >= 200 and stats.refused == 0 and report.recovered == 0
    assert completed, "no compaction"
    assert report.peak < WINDOW
    assert stats.thinking_blocks_dropped == 0
    if not thinking:
        assert report.stripped == []
