"""The view the model sees over a long session, with and without the tiers (ADR-0041), in estimated tokens.

Replays a session one message at a time, running the three tiers (offline extractive summarizer) before
every model call, and prints the view size every N turns: without tiers (``filter_compacted``), with them
(``tier_view``), and what lies behind the newest 20 messages (the part that would be a floor). Goal batches
are never batched again (ADR-0041), so without a prefix compaction the view of a very long session keeps
one goal batch per 3-6 turns; ``--compact-at`` runs the compaction as an agent would at its threshold.

    python benchmarks/tiers_view.py                 # a 200-turn generated session and the corpus
    python benchmarks/tiers_view.py --turns 400 --every 25
    python benchmarks/tiers_view.py --compact-at 64000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus_helpers import load_export, opencode_files  # noqa: E402
from tier_sessions import Replay, generated_session, replay  # noqa: E402

from brutus.history import filter_compacted  # noqa: E402
from brutus.tiers import TierConfig, tier_metadata, tier_view  # noqa: E402


def table(title: str, run: Replay, every: int) -> None:
    print(f"\n{title}")
    print(f"{'turn':>6} {'without tiers':>14} {'with tiers':>11} {'older part':>11} {'messages':>9}")
    marks = list(range(0, len(run.turn_ends), every))
    if marks[-1] != len(run.turn_ends) - 1:
        marks.append(len(run.turn_ends) - 1)
    for turn in marks:
        end = run.turn_ends[turn + 1] - 1 if turn + 1 < len(run.turn_ends) else len(run.tiered_tokens) - 1
        print(f"{turn + 1:>6} {run.plain_tokens[end]:>14,} {run.tiered_tokens[end]:>11,} {run.old_tokens[end]:>11,} "
              f"{run.tiered_messages[end]:>9}")
    view = tier_view(run.history)
    kinds = [tier_metadata(m).summary_type for m in view if tier_metadata(m)]
    print(f"max over every step: without {max(run.plain_tokens):,}, with {max(run.tiered_tokens):,} "
          f"(older part {max(run.old_tokens):,}); final view: {len(view)} messages, "
          f"{kinds.count('goal_batch')} [GOAL BATCH], {len(kinds) - kinds.count('goal_batch')} [SUMMARIZED], "
          f"{len(run.compactions)} compactions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns of the generated session (default 200)")
    parser.add_argument("--every", type=int, default=20, help="print every N turns (default 20)")
    parser.add_argument("--compact-at", type=int, default=None,
                        help="run the prefix compaction when the view is above this many tokens (default: never)")
    args = parser.parse_args()
    config = TierConfig()
    print(f"TierConfig defaults: {config.model_dump()}")
    started = time.perf_counter()
    options = dict(prepare=filter_compacted, compact_at=args.compact_at)
    table(f"generated session, {args.turns} turns", replay(generated_session(args.turns), config, **options), args.every)
    longest = sorted(opencode_files(), key=lambda path: len(load_export(path)), reverse=True)[:3]
    for path in longest:
        run = replay(load_export(path), config, **options)
        table(f"corpus {path.name.split('__')[1]}", run, max(1, args.every // 10))
    everything = [message for path in opencode_files() for message in load_export(path)]
    table("the whole corpus back to back", replay(everything, config, **options), max(1, args.every // 4))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
