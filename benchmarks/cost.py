"""What each context policy costs on the real sessions of the corpus (DESIGN §5 "cost", issue 21).

For every corpus session, at a context limit that forces at least one compaction (60% of the recording's own
peak, at least 24,000 tokens), replays the session under each of the four ``ContextPolicy`` prune modes with
the offline extractive summarizer and prices every simulated request with prompt caching
(``brutus.replay_cost``). Prints one table per run and, with ``--results``, appends it to
``benchmarks/RESULTS.md``.

    python benchmarks/cost.py                    # the whole corpus: a few minutes on two cores
    python benchmarks/cost.py --only kind-meadow --results
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus_helpers import all_files  # noqa: E402

from brutus import ContextPolicy, InvalidInput, SessionStore  # noqa: E402
from brutus.replay import comparison, load_recording, replay, replay_limits  # noqa: E402
from brutus.replay_meter import RecordedCalls  # noqa: E402
from brutus.summarizers import ExtractiveSummarizer  # noqa: E402

POLICIES = ("on-compaction", "after-turn", "off", "cold-cache")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
FRACTION = 0.6  # the limit, as a share of the recording's own peak (--fraction)


def recorded_peak(history: list) -> int:
    calls = RecordedCalls(history)
    peak = 0
    for index in range(len(history)):
        calls.observe(index)
        peak = max(peak, calls.tokens_at(index))
    return peak


def compare(path: Path, store: SessionStore, fraction: float = FRACTION) -> dict | None:
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
        "| session | limit | " + " | ".join(f"{p} $ (reads)" for p in POLICIES) + " | default vs after-turn | compactions (default) |",
        "|---|---:|" + "---:|" * len(POLICIES) + "---:|---:|",
    ]
    for row in rows:
        by = {p["policy"]: p for p in row["policies"]}
        base, after = by["on-compaction"], by["after-turn"]
        saving = 1 - base["cost_usd"] / after["cost_usd"] if after["cost_usd"] else 0.0
        cells = " | ".join(f"{by[p]['cost_usd']:.3f} ({by[p]['cache_read_share']:.0%})" for p in POLICIES)
        lines.append(f"| {row['session']} | {row['limit']:,} | {cells} | {saving:+.1%} | {base['compactions']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only corpus files whose name holds this")
    parser.add_argument("--results", action="store_true", help="append the table to benchmarks/RESULTS.md")
    parser.add_argument("--fraction", type=float, default=FRACTION, help="the limit as a share of each recording's peak")
    args = parser.parse_args()
    files = [p for p in all_files() if not args.only or args.only in p.name]
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, SessionStore.open(str(Path(tmp) / "cost.db")) as store:
        for path in files:
            row = compare(path, store, args.fraction)
            if row is not None:
                rows.append(row)
                print(render([row]).splitlines()[-1], flush=True)
    table = render(rows)
    print(f"\n{table}\n\n{len(rows)} sessions in {time.perf_counter() - started:.0f} s")
    if args.results:
        with RESULTS.open("a") as out:
            out.write(f"\n## {dt.date.today()}: cost per context policy (`benchmarks/cost.py`)\n\n{table}\n")


if __name__ == "__main__":
    main()
