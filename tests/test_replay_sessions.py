"""What ``brutus replay`` writes and where: a new temporary database unless ``--db`` names one (the user's own
database, ``$BRUTUS_DATABASE_URL`` included, is left alone), each session named with its policy; and one figure
for what was pruned, whether by a prune of its own or inside a compaction."""

from __future__ import annotations

import json
import re
from pathlib import Path

from brutus import SessionStore
from brutus.cli.replay_output import pruned_line
from brutus.replay import replay_file
from brutus.summarizers import ExtractiveSummarizer

from cli_helpers import run
from corpus_helpers import corpus_file

POLICIES = ["on-compaction", "after-turn", "off", "cold-cache"]
# --compare writes each policy's session, then each what-if's but the default's, then the recording as it ran
COMPARED = [*POLICIES, "compact at 0.6", "compact at 0.7", "compact at 0.9", "cache TTL 1h", "server compaction",
            "as recorded"]
WRITTEN = re.compile(r"^  (\S.*?) +(ses_\S+)$", re.M)


def _session_ids(url: str) -> list[str]:
    store = SessionStore.open(url, read_only=True)
    try:
        return sorted(s.id for s in store.list_sessions())
    finally:
        store.close()


def test_replay_leaves_the_default_database_alone(tmp_path: Path) -> None:
    own = tmp_path / "own.db"
    store = SessionStore.open(str(own))
    mine = store.create_session(title="my work").id
    store.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    env = {"BRUTUS_DATABASE_URL": f"sqlite:///{own}", "TMPDIR": str(tmp_path)}

    done = run("replay", corpus_file("nimble-pixel"), "--context-limit", "24000", "--compare", env=env)
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before  # not opened at all
    assert _session_ids(str(own)) == [mine]
    (where,) = list(tmp_path.glob("brutus-replay-*/replay.db"))
    assert f"\nsessions written to {where}\n(a new temporary database; --db chooses one):\n" in done.stdout
    written = WRITTEN.findall(done.stdout)
    assert [label for label, _ in written] == COMPARED
    assert sorted(session for _, session in written) == _session_ids(str(where))

    scripted = json.loads(run("replay", corpus_file("nimble-pixel"), "--context-limit", "24000", "--compare",
                              "--json", env=env).stdout)
    assert _session_ids(str(own)) == [mine]
    listed = {p["session_id"] for p in [*scripted["policies"], *scripted["what_ifs"], scripted["as_recorded"]]}
    assert sorted(listed) == _session_ids(scripted["database"])
    assert Path(scripted["database"]).parent.name.startswith("brutus-replay-") and scripted["database"] != str(where)


def test_replay_with_db_writes_there_and_names_each_session(store_url: str) -> None:
    done = run("--db", store_url, "replay", corpus_file("nimble-pixel"), "--context-limit", "24000", "--compare")
    assert done.returncode == 0, done.stderr
    written = WRITTEN.findall(done.stdout)
    assert [label for label, _ in written] == COMPARED
    assert sorted(session for _, session in written) == _session_ids(store_url)
    assert "temporary" not in done.stdout

    one = run("replay", corpus_file("nimble-pixel"), "--context-limit", "24000", "--policy", "off", "--db", store_url)
    assert one.returncode == 0, one.stderr
    ((policy, session),) = WRITTEN.findall(one.stdout)
    assert policy == "off" and f"→ session {session}" in " ".join(one.stdout.split())
    assert sorted(_session_ids(store_url)) == sorted([session, *(s for _, s in written)])


def test_one_figure_for_what_was_pruned(tmp_path: Path) -> None:
    """silent-panda at 87,000 tokens: the default policy prunes 6,621 tokens inside its second compaction,
    after-turn the same 6,621 in a prune of its own; the report's total says so either way."""
    path = corpus_file("silent-panda")
    store = SessionStore.open(str(tmp_path / "p.db"))
    try:
        inside = replay_file(store, path, context_limit=87_000, summarizer=ExtractiveSummarizer())
        from brutus import ContextPolicy

        alone = replay_file(store, path, context_limit=87_000, summarizer=ExtractiveSummarizer(),
                            policy=ContextPolicy(prune="after-turn"))
        stats = {r.session_id: store.stats(r.session_id).pruned_tokens for r in (inside, alone)}
    finally:
        store.close()
    assert inside.prunes == [] and [c.pruned_tokens for c in inside.compactions] == [0, 6_621]
    assert inside.pruned_tokens == 6_621 == stats[inside.session_id]
    assert pruned_line(inside) == "6,621 tokens of tool output pruned (inside compactions)"
    assert [p.pruned_tokens for p in alone.prunes] == [6_621] and [c.pruned_tokens for c in alone.compactions] == [0, 0]
    assert alone.pruned_tokens == 6_621 == stats[alone.session_id]
    assert pruned_line(alone) == "6,621 tokens of tool output pruned (by 1 prune outside compactions)"
    both = alone.model_copy(update={"compactions": inside.compactions, "pruned_tokens": 13_242})
    assert pruned_line(both) == (
        "13,242 tokens of tool output pruned (6,621 by 1 prune outside compactions, 6,621 inside compactions)"
    )

    shown = run("replay", path, "--context-limit", "87000", "--db", tmp_path / "q.db")
    flat = " ".join(shown.stdout.split())
    assert "compactions, 0 stalls; 6,621 tokens of tool output pruned (inside compactions)" in flat
    assert "Prunes outside compactions" not in flat
