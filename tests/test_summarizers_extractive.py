"""ExtractiveSummarizer and the truncation text: exact sections on hand-built histories, every kind,
determinism and the size bound, Claude Code's own markup kept out of the user's directions, and ``brutus compact``
of a Claude Code transcript on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import functools
import json

import pytest
from cli_helpers import run
from corpus_helpers import corpus_file

from brutus.models import MessageWithParts, PatchPart
from brutus.summarizers import (
    SUMMARY_KINDS,
    AsyncSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
    history_facts,
    truncation_summary,
)
from brutus.summarizers.facts import own_words
from brutus.tokens import estimate_tokens
from history_builders import assistant, compaction, summary, text, tool, user


def login_history() -> list[MessageWithParts]:
    return [
        user("u1", text("Fix the login bug in src/auth.py.\nYou must not change the public API.")),
        assistant(
            "a1",
            tool("c1", name="read", input={"filePath": "src/auth.py"}, output="def login(): ..."),
            tool("c2", name="read", input={"filePath": "README.md"}, output="# app"),
            tool("c3", name="bash", input={"command": "pytest -q tests/test_auth.py"}, status="error",
                 error="1 failed: test_login\nAssertionError: token expired"),
            text("The test fails because the token is not refreshed."),
            parent="u1",
        ),
        user("u2", text("Also add a regression test.")),
        assistant(
            "a2",
            tool("c4", name="edit", input={"filePath": "src/auth.py", "oldString": "a", "newString": "b"},
                 output="ok"),
            tool("c5", name="apply_patch", output="done",
                 input={"patchText": "*** Begin Patch\n*** Add File: tests/test_login.py\n+def test(): ...\n"
                                     "*** End Patch"}),
            tool("c6", name="bash", input={"command": "pytest -q"}, output="5 passed"),
            text("Fixed the refresh in src/auth.py and added tests/test_login.py; the suite passes."),
            parent="u2",
        ),
    ]


def summarize(history: list[MessageWithParts], **fields: object) -> str:
    return ExtractiveSummarizer().summarize(SummaryRequest(history=history, **fields)).text


# -- exact sections per kind ---------------------------------------------------------------------------------


def test_compaction_sections() -> None:
    assert summarize(login_history()) == """\
Summary of the conversation so far (4 messages), extracted without a model: the user's directions are quoted as written.

## User Directions
- Fix the login bug in src/auth.py.
  You must not change the public API.
- Also add a regression test.

## Files Read
- `README.md`

## Files Edited
- `src/auth.py`
- `tests/test_login.py`

## Commands Run
- `pytest -q tests/test_auth.py`
- `pytest -q`

## Errors Seen
- bash `pytest -q tests/test_auth.py`: 1 failed: test_login AssertionError: token expired

## Last State
Fixed the refresh in src/auth.py and added tests/test_login.py; the suite passes."""


def test_compaction_with_previous_summary_instructions_and_an_open_request() -> None:
    history = [*login_history(), user("u3", text("Now deploy it to staging."))]
    got = summarize(history, previous_summary="We set up the repository.", instructions="Focus on auth.")
    assert got.startswith("""\
Summary of the conversation so far (5 messages), extracted without a model: the user's directions are quoted as written.

## Instructions for This Summary
Focus on auth.

## Previous Summary
We set up the repository.

## User Directions
""")
    assert got.endswith("""\
## Last State
Fixed the refresh in src/auth.py and added tests/test_login.py; the suite passes.

## Next Step
Continue with the user's latest direction: Now deploy it to staging.""")


def test_tool_call_and_threshold_give_a_summarized_block() -> None:
    expected = """\
[SUMMARIZED]

## Context
- Fix the login bug in src/auth.py.
  You must not change the public API.
- Also add a regression test.

## Actions
- I read `README.md`
- I edited `src/auth.py`
- I edited `tests/test_login.py`
- I ran `pytest -q tests/test_auth.py`
- I ran `pytest -q`

## Errors
- I hit: bash `pytest -q tests/test_auth.py`: 1 failed: test_login AssertionError: token expired

## Result
Fixed the refresh in src/auth.py and added tests/test_login.py; the suite passes."""
    assert summarize(login_history(), kind="tool_call") == expected
    assert summarize(login_history(), kind="threshold") == expected


def test_goal_batch_has_the_six_sections() -> None:
    # Issue 24: Goal Arc no longer repeats the first and last direction, What Was Achieved says where each turn
    # ended, and Key Artifacts lists only what no other section already names (src/auth.py, tests/test_login.py
    # and the failing command are named above it).
    assert summarize(login_history(), kind="goal_batch") == """\
[GOAL BATCH]

## Goal Arc
I worked through 2 user directions in order (Human Direction).

## Human Direction
- Fix the login bug in src/auth.py.
  You must not change the public API.
- Also add a regression test.

## What Was Achieved
- The test fails because the token is not refreshed.
- Fixed the refresh in src/auth.py and added tests/test_login.py; the suite passes.

## Dead Ends
- I hit: bash `pytest -q tests/test_auth.py`: 1 failed: test_login AssertionError: token expired

## Lasting Constraints
- You must not change the public API.

## Key Artifacts
- `README.md`
- `pytest -q`"""


def test_goal_batch_over_summarized_blocks_reads_their_sections() -> None:
    turns = [
        user("u1", text("Refactor the config loader.")),
        assistant("s1", text("[SUMMARIZED]\n\n## Actions\n- I read `config/loader.py`\n- I ran `pytest tests/config`\n\n"
                             "## Errors\n- I tried a dataclass: broke pickling\n\n## Result\nThe loader is split in two."),
                  parent="u1", summary=True, metadata={"summarized": True, "summary_type": "threshold"}),
        user("u2", text("Actually, support YAML too. Never add a new dependency.")),
        assistant("s2", text("[SUMMARIZED]\n## Result\nYAML loads through the stdlib-only parser."), parent="u2"),
    ]
    assert summarize(turns, kind="goal_batch", previous_summary="I had set up CI.") == """\
[GOAL BATCH]

## Goal Arc
I worked through 2 user directions in order (Human Direction).

## Human Direction
- Refactor the config loader.
- Actually, support YAML too. Never add a new dependency.

## What Was Achieved
- Earlier: I had set up CI.
- The loader is split in two.
- YAML loads through the stdlib-only parser.

## Dead Ends
- I tried a dataclass: broke pickling

## Lasting Constraints
- Never add a new dependency.

## Key Artifacts
- `config/loader.py`
- `pytest tests/config`"""


def test_empty_sections_are_omitted() -> None:
    got = summarize([user("u1", text("Hello"))], kind="goal_batch")
    assert got == "[GOAL BATCH]\n\n## Goal Arc\nI worked on one user direction (Human Direction); it was still open.\n\n## Human Direction\n- Hello"
    assert summarize([], kind="tool_call") == "[SUMMARIZED]"


# -- what is read from a history ---------------------------------------------------------------------------


def test_claude_code_tools_patch_parts_exit_codes_and_errors() -> None:
    history = [
        user("u1", text("Go.")),
        assistant(
            "a1",
            tool("t1", name="Read", input={"file_path": "/repo/a.py"}, output="x"),
            tool("t2", name="Write", input={"file_path": "/repo/b.py", "content": "y"}, output="ok"),
            tool("t3", name="MultiEdit", input={"file_path": "/repo/c.py", "edits": []}, output="ok"),
            tool("t4", name="Edit", input={"file_path": "/repo/d.py"}, status="error", error="no match"),
            tool("t5", name="Bash", input={"command": "make\nmake test"}, output="fail"),
            tool("t6", name="grep", input={"path": "src", "pattern": "x"}, output=""),
            PatchPart(hash="abc", files=["/repo/e.py"]),
            parent="u1",
        ),
        assistant("a2", text("partial"), parent="u1", error={"name": "APIError", "data": {"message": "overloaded"}}),
        assistant("a3", parent="u1", error={"name": "MessageAbortedError", "data": {"message": "aborted"}}),
    ]
    history[1].parts[4].state.metadata = {"exit": 2}
    facts = history_facts(history)
    assert facts.files_read == ["/repo/a.py"]
    assert facts.files_edited == ["/repo/b.py", "/repo/c.py", "/repo/e.py"]
    assert facts.commands == ["make\nmake test"]
    assert facts.errors == ["Edit `/repo/d.py`: no match", "Bash `make` exited with 2", "APIError: overloaded"]
    assert facts.last_state == "partial"


def test_synthetic_text_summaries_and_tier_blocks_are_not_directions_or_state() -> None:
    history = [
        compaction("c1"),
        summary("s1", "We built the parser.", parent="c1"),
        user("u1", text("Continue if you have next steps", synthetic=True), text("ignored", ignored=True)),
        assistant("t1", text("[SUMMARIZED]\n## Result\nI ran the tests."), parent="u1"),
        assistant("a1", text("Done."), parent="u1"),
    ]
    facts = history_facts(history)
    assert facts.directions == []
    assert facts.previous == "We built the parser."
    assert facts.memories == ["[SUMMARIZED]\n## Result\nI ran the tests."]
    assert facts.last_state == "Done."
    got = summarize(history)
    assert "## Previous Summary\nWe built the parser." in got
    assert "## Summarized Earlier Work\n- [SUMMARIZED]\n  ## Result\n  I ran the tests." in got
    assert "Continue if you have next steps" not in got


def test_terminal_escapes_and_control_characters_are_cleaned() -> None:
    history = [user("u1", text("\x1b[31mred\x1b[0m line\r\nnext\x00 line   \n\n\n\nend"))]
    assert "- red line\n  next line\n\n  end" in summarize(history)


# -- determinism and bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", SUMMARY_KINDS)
def test_deterministic(kind: str) -> None:
    history = login_history()
    first = summarize(history, kind=kind, previous_summary="p", instructions="i")
    assert summarize(copy.deepcopy(history), kind=kind, previous_summary="p", instructions="i") == first
    assert summarize(history, kind=kind, previous_summary="p", instructions="i") == first


@functools.cache
def big_history(turns: int = 120) -> list[MessageWithParts]:
    """Shared between tests: nothing here mutates a history."""
    history: list[MessageWithParts] = []
    for n in range(turns):
        history.append(user(f"u{n}", text(f"Direction {n}: " + "please do the thing " * 200)))
        history.append(assistant(
            f"a{n}",
            tool(f"r{n}", name="read", input={"filePath": f"src/module_{n}.py"}, output="x" * 5000),
            tool(f"b{n}", name="bash", input={"command": f"pytest tests/test_{n}.py -k case_{n}"}, status="error",
                 error="E" * 3000),
            text(f"State after turn {n}: " + "done and verified " * 300),
            parent=f"u{n}",
        ))
    return history


@pytest.mark.parametrize("kind", SUMMARY_KINDS)
@pytest.mark.parametrize("budget", [1, 7, 50, 300, 1000, 4096])
def test_the_text_fits_max_tokens(kind: str, budget: int) -> None:
    got = summarize(big_history(), kind=kind, max_tokens=budget, previous_summary="earlier " * 5000)
    assert 0 < estimate_tokens(got) <= budget


def test_cutting_keeps_the_first_direction_and_the_newest_items() -> None:
    got = summarize(big_history(), max_tokens=3000)
    directions = got.split("## User Directions\n")[1].split("\n\n## ")[0]
    lines = [line for line in directions.splitlines() if line.startswith("- ")]
    assert lines[0].startswith("- Direction 0: please do the thing")
    assert lines[1].endswith("earlier left out)")
    assert lines[-1].startswith("- Direction 119: ")
    assert "## Last State\nState after turn 119: " in got
    assert "`src/module_119.py`" in got and "`src/module_0.py`" not in got


def test_a_small_history_is_not_cut() -> None:
    assert "left out" not in summarize(login_history(), max_tokens=4096)
    assert "more characters" not in summarize(login_history(), max_tokens=4096)


# -- the summarizer object ----------------------------------------------------------------------------------


def test_summary_fields_and_protocols() -> None:
    s = ExtractiveSummarizer()
    assert isinstance(s, Summarizer) and isinstance(s, AsyncSummarizer)
    result = s.summarize(SummaryRequest(history=login_history()))
    assert (result.model, result.cost, result.tokens.total, result.stop_reason) == ("extractive", 0.0, 0, None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_async_twin_gives_the_same_summary() -> None:
    request = SummaryRequest(history=login_history(), kind="goal_batch")
    assert await ExtractiveSummarizer().asummarize(request) == ExtractiveSummarizer().summarize(request)


def test_the_request_is_not_mutated() -> None:
    history = login_history()
    before = [m.model_dump() for m in history]
    summarize(history, max_tokens=20)
    assert [m.model_dump() for m in history] == before


# -- the truncation text ---------------------------------------------------------------------------------------


def test_truncation_summary() -> None:
    assert truncation_summary(login_history()) == (
        "[Context truncated. Earlier conversation contained 4 messages about: Fix the login bug in src/auth.py.; "
        "Also add a regression test.]"
    )
    assert truncation_summary([]) == "[Context truncated. Earlier conversation contained 0 messages.]"
    only_assistant = [assistant("a1", text("hi"))]
    assert truncation_summary(only_assistant) == "[Context truncated. Earlier conversation contained 1 message.]"


def test_truncation_summary_keeps_the_first_and_newest_topics_cut_short() -> None:
    history = [user(f"u{n}", text(f"topic {n} " + "x" * 200)) for n in range(10)]
    got = truncation_summary(history, max_topics=3)
    topics = got.removeprefix("[Context truncated. Earlier conversation contained 10 messages about: ")[:-1].split("; ")
    assert [t.split()[1] for t in topics] == ["0", "8", "9"]
    assert all(len(t) < 120 for t in topics)


# -- Claude Code sessions (issue 23) ---------------------------------------------------------------------------

CAVEAT = ("Caveat: The messages below were generated by the user while running local commands. DO NOT respond to "
          "these messages or otherwise consider them in your response unless the user explicitly asks you to.")
EXIT = ("<command-name>/exit</command-name>\n            <command-message>exit</command-message>\n"
        "            <command-args></command-args>")


def claude_code_history() -> list[MessageWithParts]:
    """The shapes the corpus transcripts hold: a caveat (an ``isMeta`` line), local commands and their output,
    a system reminder, an interruption marker, and the user's own words among them."""
    return [
        user("u1", text("Make the build pass.")),
        assistant("a1", text("I will run make."), parent="u1"),
        user("u2", text("[Request interrupted by user for tool use]")),
        user("u3", text("Look in the /bench folder")),
        assistant("a2", text("The bench folder holds three scripts."), parent="u3"),
        user("u4", text("<system-reminder>\nThe TODO list is empty.\n</system-reminder>\nAlso keep the old API.")),
        assistant("a3", text("Kept the old API."), parent="u4"),
        user("m1", text(CAVEAT, synthetic=True)),
        user("m2", text(EXIT)),
        user("m3", text("<local-command-stdout>(no content)</local-command-stdout>")),
        user("m4", text("<local-command-stderr>boom</local-command-stderr>")),
        user("m5", text("<local-command-caveat>Caveat: not for you</local-command-caveat>")),
        user("m6", text(CAVEAT)),  # the caveat text even when not marked synthetic
    ]


def test_claude_code_markup_is_not_user_direction() -> None:
    facts = history_facts(claude_code_history())
    assert facts.directions == ["Make the build pass.", "Look in the /bench folder", "Also keep the old API."]
    assert facts.changes == [1]  # the direction after the interruption
    assert facts.open_request is None  # /exit and its output are no request: nothing is left to do
    got = summarize(claude_code_history())
    assert "## Next Step" not in got
    assert got.split("## User Directions\n")[1].split("\n\n## ")[0] == (
        "- Make the build pass.\n- Look in the /bench folder\n- Also keep the old API.")
    for marker in ("command-", "(no content)", "boom", "Caveat", "system-reminder", "TODO list", "Request interrupted"):
        assert marker not in got
    assert truncation_summary(claude_code_history()) == (
        "[Context truncated. Earlier conversation contained 13 messages about: Make the build pass.; "
        "Look in the /bench folder; Also keep the old API.]")


def test_a_slash_command_as_the_last_user_message_is_not_the_next_step() -> None:
    history = [*claude_code_history()[:2], user("m2", text(EXIT))]
    assert "## Next Step" not in summarize(history)
    history = [*claude_code_history()[:2], user("u5", text("Now run the tests.")), user("m2", text(EXIT))]
    assert summarize(history).endswith("## Next Step\nContinue with the user's latest direction: Now run the tests.")


def test_own_words() -> None:
    assert own_words("  as written \n") == "  as written \n"  # nothing removed: unchanged
    assert own_words(EXIT) == ""
    assert own_words(CAVEAT) == ""
    assert own_words("<system-reminder>x</system-reminder>") == ""
    assert own_words("[Request interrupted by user]") == ""
    assert own_words("<command-name>/review</command-name>\nand check the docs") == "and check the docs"
    assert own_words("a <b>tag</b> the user typed") == "a <b>tag</b> the user typed"


def test_directions_that_change_direction() -> None:
    history = [
        user("u1", text("Write the parser.")),
        user("u2", text("No, use a hand-written lexer.")),
        user("u3", text("Keep going.")),
        user("u4", text("Why is there a second build?")),
        user("u5", text("Use the stdlib instead of regex.")),
        user("u6", text("[Request interrupted by user]")),
        user("u7", text("Stop. Revert that file.")),
        user("u8", text("[Request interrupted by user]")),
        user("u9", text("Then add tests.")),
        user("u10", text("Nothing else.")),
    ]
    facts = history_facts(history)
    assert facts.changes == [1, 3, 4, 5, 6]


def many_directions(count: int = 300) -> list[MessageWithParts]:
    """``count`` turns of a user direction and an answer; every 50th direction (from 25) changes direction."""
    history: list[MessageWithParts] = []
    for n in range(count):
        said = f"No, instead do step {n} differently" if n % 50 == 25 else f"Do step {n}"
        history.append(user(f"u{n}", text(f"{said}: " + "with care " * 15)))
        history.append(assistant(f"a{n}", text(f"Step {n} done."), parent=f"u{n}"))
    return history


def test_hundreds_of_directions_keep_the_first_the_last_and_the_changes() -> None:
    got = summarize(many_directions(), max_tokens=4096)
    assert len(got) <= 12_000
    directions = got.split("## User Directions\n")[1].split("\n\n## ")[0].splitlines()
    steps = [int(line.split("step ")[1].split(" ")[0].rstrip(":")) for line in directions if "step " in line]
    notes = [line for line in directions if line.endswith("earlier left out)")]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == 299
    assert {25, 75, 125, 175, 225, 275} <= set(steps)  # every change of direction is kept
    assert 10 < len(steps) < 300 and notes  # the others as room allows, newest first, the gaps noted
    left_out = sum(int(note.split("(")[1].split(" ")[0]) for note in notes)
    assert left_out + len(steps) == 300
    assert all(line.startswith("- ") for line in directions)


def test_a_compaction_summary_is_at_most_12000_characters_and_within_max_tokens() -> None:
    for budget in (4096, 100_000):
        got = summarize(big_history(), max_tokens=budget, previous_summary="earlier " * 5000)
        assert len(got) <= 12_000 and estimate_tokens(got) <= budget
        for heading in ("Previous Summary", "User Directions", "Files Read", "Commands Run", "Errors Seen", "Last State"):
            assert f"## {heading}\n" in got  # each section keeps its share
    wide = [user("u1", text("ü" * 20_000)), *big_history()[1:4]]  # two bytes a character: 12,000 would not fit
    got = summarize(wide, max_tokens=2_000)
    assert estimate_tokens(got) <= 2_000 and "## User Directions\n- üüü" in got


def test_the_files_of_failed_tool_calls_are_named_in_the_errors() -> None:
    history = [user("u1", text("Go.")), assistant(
        "a1", tool("t1", name="Read", input={"file_path": "/repo/status.md"}, status="error", error="File does not exist."),
        parent="u1")]
    assert "- Read `/repo/status.md`: File does not exist." in summarize(history)


def test_brutus_compact_of_a_claude_code_transcript(store_url: str) -> None:
    path = corpus_file("d7d349f9")  # ends with a caveat, /exit and its output
    assert run("import", str(path), "--db", store_url).returncode == 0
    session = "ses_d7d349f9-c243-46e2-9a32-4a0eddfc634b"
    result = run("compact", session, "--db", store_url, "--json")
    assert result.returncode == 0, result.stderr
    view = json.loads(run("show", session, "--db", store_url, "--json").stdout)
    summary = view[1]["parts"][0]["text"]
    assert summary.startswith("Summary of the conversation so far") and len(summary) <= 12_000
    directions = summary.split("## User Directions\n")[1].split("\n\n## ")[0]
    assert directions.startswith("- Check the status.md and lets get this fully functional please.")
    assert directions.splitlines()[-1].startswith("- Create a docs/archive folder and move as many historical notes")
    for marker in ("<command-name>", "/exit", "local-command", "Caveat:", "## Next Step"):
        assert marker not in summary
