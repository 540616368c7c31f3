"""``brutus stats`` agrees with what ``show`` and ``search`` see: imported compaction boundaries count as
compactions, and usage that recorded no cost (the corpus's OpenCode sessions) is priced from the usage."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from brutus import SessionStore
from brutus.summarizers import ExtractiveSummarizer

from cli_helpers import run
from corpus_helpers import corpus_file

# the corpus's Claude Code transcripts with compactions: their boundaries' triggers, oldest first
BOUNDARIES = {"0a725fb5": ["auto"], "da4409c0": ["manual", "auto", "auto"], "f67ab274": ["auto", "auto"]}


def stats_json(session_id: str, url: str) -> dict[str, Any]:
    result = run("stats", session_id, "--db", url, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_imported_boundaries_are_compactions(store_url: str) -> None:
    imported = run("import", *(corpus_file(name) for name in BOUNDARIES), "--db", store_url, "--json")
    created = json.loads(imported.stdout)["created"]
    for name, triggers in BOUNDARIES.items():
        session_id = f"ses_{corpus_file(name).name.split('.')[0]}"
        assert session_id in created
        got = stats_json(session_id, store_url)
        assert got["compaction_counts"] == {"completed": len(triggers), "failed": 0, "refused": 0, "pending": 0}
        assert [(c["trigger"], c["status"], c["imported"]) for c in got["compactions"]] == [
            (t, "completed", True) for t in triggers
        ]
        view = json.loads(run("show", session_id, "--db", store_url, "--json").stdout)
        assert view[0]["info"]["id"] == got["compactions"][-1]["id"]  # show starts at the newest one
        people = run("stats", session_id, "--db", store_url)
        assert f"compactions: {len(triggers)} completed ({len(triggers)} imported), 0 failed, 0 refused" in people.stdout
        assert "compactions: none" not in people.stdout

    main = "ses_0a725fb5-6378-432a-9e84-9f3f49d4043d"
    child = stats_json(f"{main}_eb46ebab", store_url)  # the sub-agent transcript compacted nothing
    assert child["compactions"] == [] and "compactions: none" in run("stats", f"{main}_eb46ebab", "--db", store_url).stdout

    store = SessionStore.open(store_url)
    result = store.compact(main, ExtractiveSummarizer())  # brutus's own on top: a marker, counted once
    store.close()
    got = stats_json(main, store_url)
    assert got["compaction_counts"]["completed"] == 2
    assert [(c["id"], c["imported"]) for c in got["compactions"]] == [
        ("msg_0a725fb5_9b438c83-c889-4184-baaa-20d18b69fe6a_compaction", True), (result.compaction_id, False)
    ]
    people = run("stats", main, "--db", store_url)
    assert "compactions: 2 completed (1 imported), 0 failed, 0 refused" in people.stdout
    assert result.compaction_id in people.stdout


CRISP = "crisp-garden"  # OpenCode on gpt-5.3-codex: 38 responses with usage, every one recording cost 0


def test_opencode_usage_without_a_cost_is_counted_never_priced_at_another_model(store_url: str) -> None:
    run("import", corpus_file(CRISP), "--db", store_url)
    got = stats_json("ses_39bc", store_url)
    t = got["provider_tokens"]
    assert (t["input"], t["output"], t["reasoning"], t["cache"]) == (115_673, 9_049, 2_901, {"read": 908_160, "write": 0})
    assert got["cost"] == 0.0  # what the export recorded
    assert got["unpriced"] == {"messages": 38, "models": ["gpt-5.3-codex"], "priced_as": [],
                               "no_price": ["gpt-5.3-codex"], "cost": None}
    people = " ".join(run("stats", "ses_39bc", "--db", store_url).stdout.split())
    assert ("cost $0.0000; 88.7% of the input read from the cache 38 responses (gpt-5.3-codex) recorded usage but "
            "no cost; brutus knows no price for gpt-5.3-codex") in people


def test_claude_usage_without_a_cost_is_priced_at_its_own_list_prices(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session = store.create_session()
        user = store.append_message(session.id, "user")
        for model, tokens in (("claude-sonnet-4-5", {"input": 1_000_000, "output": 100_000}),
                              ("gpt-5.3-codex", {"input": 5, "output": 5})):
            reply = store.append_message(session.id, "assistant", parent_id=user.id, model_id=model)
            store.finish_message(reply.id, finish="stop", tokens=tokens)
    got = stats_json(session.id, store_url)
    # Sonnet at $3 input and $15 output per million
    assert got["unpriced"] == {"messages": 2, "models": ["claude-sonnet-4-5", "gpt-5.3-codex"],
                               "priced_as": ["claude-sonnet-4-5"], "no_price": ["gpt-5.3-codex"],
                               "cost": pytest.approx(3.0 + 1.5)}
    people = " ".join(run("stats", session.id, "--db", store_url).stdout.split())
    assert ("2 responses (claude-sonnet-4-5, gpt-5.3-codex) recorded usage but no cost: $4.5000 at "
            "claude-sonnet-4-5's list prices; brutus knows no price for gpt-5.3-codex") in people


def test_a_cost_an_opencode_export_records_is_the_cost_stats_shows(store_url: str, tmp_path: Path) -> None:
    export = json.loads(gzip.decompress(corpus_file(CRISP).read_bytes()))
    assistants = [m for m in export["messages"] if m["info"]["role"] == "assistant"]
    for n, message in enumerate(assistants):
        message["info"]["cost"] = 0.001 * (n % 3)  # every third one still recorded nothing
    path = tmp_path / "priced.json"
    path.write_text(json.dumps(export))
    assert run("import", path, "--db", store_url).returncode == 0
    got = stats_json("ses_39bc", store_url)
    assert got["cost"] == pytest.approx(sum(0.001 * (n % 3) for n in range(len(assistants))))
    used = [m for m in assistants if any(m["info"].get("tokens", {}).get(k) for k in ("input", "output", "reasoning"))]
    unpriced = [m for n, m in enumerate(assistants) if n % 3 == 0 and m in used]
    assert len(used) == 38 and len(unpriced) == 12
    assert got["unpriced"]["messages"] == len(unpriced) and got["unpriced"]["models"] == ["gpt-5.3-codex"]
