"""What the real sessions of the corpus cost: as recorded against their bill, and under each context policy
(DESIGN §5 "cost", issues 21 and 36).

First, every Claude Code transcript with usage replayed as it ran (``brutus replay --as-recorded``: sub-agents
included, each request at its recorded model) beside what its recorded usage was billed, and the ratio; the
goal is within 10% each. Then, for every corpus session, at context limits that force at least one compaction
(50%, 70% and 90% of the recording's own peak, at least 24,000 tokens), replays the session under each of the
four ``ContextPolicy`` prune modes with the offline extractive summarizer and prices every simulated request
with prompt caching (``brutus.replay_cost``). Prints the tables (the policies' with a row per session and
limit, and the tokens each policy's prunes marked) and a summary of each goal (DESIGN §5 "cost"); with
``--results``, adds them, newest first, to ``benchmarks/RESULTS.md``. ``--what-ifs`` prints the other settings
of ``replay --compare`` (``brutus.replay.WHAT_IFS``) on a few sessions instead.

    python benchmarks/cost.py                    # the whole corpus: about a minute on two cores
    python benchmarks/cost.py --bills            # only the as-recorded table: about ten seconds
    python benchmarks/cost.py --what-ifs         # only the what-ifs of replay --compare on a few sessions
    python benchmarks/cost.py --only kind-meadow --fraction 0.6 --results
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus_helpers import all_files, claude_code_files  # noqa: E402

from brutus import ContextPolicy, InvalidInput, SessionStore  # noqa: E402
from brutus.models import ModelLimits  # noqa: E402
from brutus.replay import (  # noqa: E402
    WHAT_IFS, comparison, load_recording, load_recordings, replay, replay_limits,
)
from brutus.replay_recorded import as_recorded  # noqa: E402
from brutus.replay_meter import RecordedCalls  # noqa: E402
from brutus.summarizers import ExtractiveSummarizer  # noqa: E402

POLICIES = ("on-compaction", "after-turn", "off", "cold-cache")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
FRACTIONS = (0.5, 0.7, 0.9)  # the limits, as shares of the recording's own peak (--fraction)


def bill_row(path: Path, store: SessionStore) -> dict | None:
    """One transcript as recorded: its replayed bill beside its billed one (None: no conversation or no usage)."""
    try:
        report = as_recorded(store, load_recordings(path), summarizer=ExtractiveSummarizer())
    except InvalidInput:
        return None
    if report.billed is None:
        return None
    return {"session": path.name[:8], "report": report}


def render_bills(rows: list[dict]) -> str:
    lines = [
        "| transcript | sessions | requests | billed $ | replayed $ | ratio | cache writes replayed / billed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        r = row["report"]
        writes = r.tokens["cache_write"] / r.billed.tokens["cache_write"] if r.billed.tokens["cache_write"] else 1.0
        lines.append(
            f"| {row['session']} | {r.sessions} | {r.requests:,} | {r.billed.cost_usd:.3f} | {r.cost_usd:.3f} "
            f"| {r.ratio:.3f} | {writes:.2f} |"
        )
    billed = sum(row["report"].billed.cost_usd for row in rows)
    replayed = sum(row["report"].cost_usd for row in rows)
    lines.append(f"| all | | | {billed:.3f} | {replayed:.3f} | {replayed / billed:.3f} | |")
    return "\n".join(lines)


def bills_verdict(rows: list[dict]) -> str:
    within = [row for row in rows if abs(row["report"].ratio - 1) <= 0.10]
    out = ", ".join(f"{row['session']} ({row['report'].ratio:.3f})" for row in rows if row not in within) or "none"
    return f"{len(within)} of {len(rows)} transcripts replayed within 10% of their bill; outside: {out}."


FEATURED = (("d7d349f9", 70_000), ("0a725fb5", 108_000), ("f67ab274", 109_000), ("da4409c0", 108_000))


def what_ifs(fragment: str, limit: int, store: SessionStore) -> str:
    """One session's row of the what-ifs: the main session as recorded, then each of ``WHAT_IFS`` under ``limit``
    with the default policy: cost (compactions)."""
    path = next(p for p in claude_code_files() if p.name.startswith(fragment))
    history = load_recording(path).history
    model, limits = replay_limits(history, context_limit=limit)

    def run(limits: ModelLimits, fields: dict, server: bool) -> str:
        r = replay(store, history, limits=limits, model=model, summarizer=ExtractiveSummarizer(),
                   policy=ContextPolicy(**fields), server_compaction=server)
        return f"{r.cost_usd:.3f} ({len(r.compactions)})"

    cells = [run(limits, fields, server) for _, fields, server in WHAT_IFS]
    return f"| {fragment} | {limit:,} | {run(ModelLimits(context=0), {}, False)} | " + " | ".join(cells) + " |"


def render_what_ifs(store: SessionStore) -> str:
    head = "| main session | limit | as recorded | " + " | ".join(label for label, _, _ in WHAT_IFS) + " |"
    rows = [what_ifs(fragment, limit, store) for fragment, limit in FEATURED]
    return "\n".join([head, "|---|---:|" + "---:|" * (len(WHAT_IFS) + 1), *rows])


def recorded_peak(history: list) -> int:
    calls = RecordedCalls(history)
    peak = 0
    for index in range(len(history)):
        calls.observe(index)
        peak = max(peak, calls.tokens_at(index))
    return peak


def compare(path: Path, store: SessionStore, fraction: float) -> dict | None:
    try:
        recording = load_recording(path)
    except InvalidInput:  # a transcript with no conversation in it
        return None
    peak = recorded_peak(recording.history)
    limit = max(24_000, int(peak * fraction) // 1000 * 1000)
    if limit >= peak:
        return None  # too small a session to force a compaction
    model, limits = replay_limits(recording.history, context_limit=limit)
    reports = [
        replay(store, recording.history, limits=limits, model=model, summarizer=ExtractiveSummarizer(),
               policy=ContextPolicy(prune=mode), title=recording.title)
        for mode in POLICIES
    ]
    table = comparison(reports)
    table["session"] = path.name.split("__")[1] if "__" in path.name else path.name[:8]
    table["recorded_peak"] = peak
    return table


def render(rows: list[dict]) -> str:
    lines = [
        "| session | limit | " + " | ".join(f"{p} $ (reads)" for p in POLICIES)
        + " | tokens pruned (after-turn) | default vs after-turn | compactions (default) |",
        "|---|---:|" + "---:|" * len(POLICIES) + "---:|---:|---:|",
    ]
    for row in rows:
        by = {p["policy"]: p for p in row["policies"]}
        base, after = by["on-compaction"], by["after-turn"]
        cells = " | ".join(f"{by[p]['cost_usd']:.3f} ({by[p]['cache_read_share']:.0%})" for p in POLICIES)
        lines.append(
            f"| {row['session']} | {row['limit']:,} | {cells} | {after['pruned_tokens']:,} | {saving(row):+.1%} "
            f"| {base['compactions']} |"
        )
    return "\n".join(lines)


def saving(row: dict) -> float:
    """How much cheaper the default is than ``after-turn`` (negative: dearer)."""
    by = {p["policy"]: p["cost_usd"] for p in row["policies"]}
    return 1 - by["on-compaction"] / by["after-turn"] if by["after-turn"] else 0.0


def verdict(rows: list[dict]) -> str:
    """The goal, counted: cheapest of the four, >= 25% cheaper than after-turn, peak under the limit."""
    cheapest = sum(
        1 for r in rows
        if all(r["policies"][0]["cost_usd"] <= p["cost_usd"] + 1e-9 for p in r["policies"])
    )
    tied = sum(1 for r in rows if len({round(p["cost_usd"], 6) for p in r["policies"]}) == 1)
    pruning = [r for r in rows if next(p for p in r["policies"] if p["policy"] == "after-turn")["pruned_tokens"]]
    quarter = sum(1 for r in rows if saving(r) >= 0.25)
    under = sum(1 for r in rows if r["policies"][0]["peak_tokens"] < r["limit"])
    savings = ", ".join(f"{saving(r):+.1%}" for r in pruning) or "none"
    return (
        f"{len(rows)} runs (session x limit): the default is the cheapest (or tied) in {cheapest}, all four cost "
        f"the same in {tied}; after-turn prunes anything in {len(pruning)} (the default's saving there: "
        f"{savings}); >= 25% cheaper than after-turn in {quarter}; peak under the limit in {under}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only corpus files whose name holds this")
    parser.add_argument("--results", action="store_true", help="add the table to benchmarks/RESULTS.md (newest first)")
    parser.add_argument(
        "--fraction", type=float, action="append", help="a limit as a share of each recording's peak (repeatable)"
    )
    parser.add_argument("--bills", action="store_true", help="only the as-recorded table")
    parser.add_argument("--what-ifs", action="store_true", help="only the what-ifs on a few sessions")
    args = parser.parse_args()
    fractions = args.fraction or FRACTIONS
    files = [p for p in all_files() if not args.only or args.only in p.name]
    rows: list[dict] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, SessionStore.open(str(Path(tmp) / "cost.db")) as store:
        if args.what_ifs:
            print(f"US dollars (compactions), the default policy, summaries extractive\n\n{render_what_ifs(store)}")
            return
        recorded = [row for p in claude_code_files() if p in files if (row := bill_row(p, store)) is not None]
        bills = f"{render_bills(recorded)}\n\n{bills_verdict(recorded)}" if recorded else ""
        print(f"{bills}\n", flush=True)
        if args.bills:
            files = []
        for path in files:
            for fraction in fractions:
                row = compare(path, store, fraction)
                seen = {(r["session"], r["limit"]) for r in rows}  # small sessions: every fraction is the floor
                if row is not None and (row["session"], row["limit"]) not in seen:
                    rows.append(row)
                    print(render([row]).splitlines()[-1], flush=True)
    policies = f"{render(rows)}\n\n{verdict(rows)}" if rows else ""
    if policies:
        print(f"\n{policies}")
    print(f"{len(recorded)} transcripts as recorded, {len(rows)} policy runs in {time.perf_counter() - started:.0f} s")
    if args.results:  # newest first: after the file's introduction, before the first entry
        body = "\n\n".join(part for part in (bills, policies) if part)
        entry = f"## {dt.date.today()}: cost as recorded and per context policy (`benchmarks/cost.py`)\n\n{body}\n\n"
        text = RESULTS.read_text()
        at = text.find("\n## ") + 1 if "\n## " in text else len(text)
        RESULTS.write_text(text[:at] + entry + text[at:])


if __name__ == "__main__":
    main()
