"""Every corpus session, imported through the store: the view renders to a valid Anthropic request, and the
store's prune agrees with the pure rule on it."""

from __future__ import annotations

import copy

import pytest
from corpus_helpers import all_files

from brutus import CompactionConfig, SessionStore, filter_compacted, import_file, prune, to_anthropic, validate_anthropic


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory) -> SessionStore:
    store = SessionStore.open(f"sqlite:///{tmp_path_factory.mktemp('corpus') / 'corpus.db'}")
    for path in all_files():
        import_file(store, path)
    yield store
    store.close()


def test_the_corpus_is_there() -> None:
    assert len(all_files()) == 22


@pytest.mark.slow
def test_every_view_renders_valid_requests(corpus_store: SessionStore) -> None:
    sessions = corpus_store.list_sessions()
    assert len(sessions) >= 21
    for session in sessions:
        view = corpus_store.filter_compacted(session.id)
        assert [m.info.id for m in view] == [m.info.id for m in filter_compacted(corpus_store.messages(session.id))]
        if view:
            validate_anthropic(to_anthropic(view, system="You are a coding agent."))
        validate_anthropic(to_anthropic(corpus_store.messages(session.id)), allow_empty=True)


@pytest.mark.slow
def test_store_prune_matches_the_pure_rule_on_every_session(corpus_store: SessionStore) -> None:
    # the corpus sessions are small: a tighter window than the default makes prune act on most of them
    config = CompactionConfig(prune_protect=4_000, prune_minimum=2_000)
    pruned_any = False
    for session in corpus_store.list_sessions():
        expected = prune(copy.deepcopy(filter_compacted(corpus_store.messages(session.id))), config, now=1)
        result = corpus_store.prune(session.id, config)
        assert (result.pruned, result.total) == (expected.pruned, expected.total), session.title
        assert [p.id for p in result.parts] == [p.id for p in expected.parts]
        pruned_any = pruned_any or result.pruned > 0
        validate_anthropic(to_anthropic(corpus_store.filter_compacted(session.id)), allow_empty=True)
    assert pruned_any
