"""What ``brutus.db.convert.construct`` saves: loads with pydantic's slots written directly against pydantic's
public ``model_construct``, alternated round by round (ABBA).

    python benchmarks/construct_vs_public.py [--rounds N]

Loads, on SQLite: ``messages()`` of the corpus's largest sessions (imported: quick-falcon, the most text, and
da4409c0, the most messages and parts), ``messages()`` of a session of 1,000 written turns (4,000 items: the
load guard of DESIGN §5) and ``Conversation.request()`` on a session of 10,000 messages with its boundary 200
back. The "public" rounds run the same code with
``convert.construct`` and the load path's per-class makers building every model with ``model_construct``.
Prints the median ms per load each way and public / slots.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from corpus_helpers import corpus_file  # noqa: E402
from workload import MODEL, build_compacted, open_sqlite, write_turns  # noqa: E402

from brutus.db import convert  # noqa: E402
from brutus.importers import import_file  # noqa: E402
from brutus.models import CacheTokens, Message, MessageTime, MessageWithParts, TokenCounts, ToolPart, ToolState, ToolTime  # noqa: E402

MAKERS = {
    "_make_state": ToolState, "_make_tool_time": ToolTime, "_make_tool": ToolPart, "_make_message": Message,
    "_make_tokens": TokenCounts, "_make_cache": CacheTokens, "_make_time": MessageTime, "_make_entry": MessageWithParts,
}


def public_construct(cls: Any, fields: dict[str, Any], fields_set: set[str] | None = None) -> Any:
    return cls.model_construct(fields_set, **fields)


def public_maker(cls: Any) -> Callable[[dict[str, Any]], Any]:
    every = set(cls.model_fields)
    return lambda fields: cls.model_construct(every, **fields)


def use(public: bool, slots: dict[str, Any]) -> None:
    """``convert``'s constructors: the slot-writing ones (``slots``), or pydantic's public ones."""
    if public:
        convert.construct = public_construct  # type: ignore[assignment]
        for name, cls in MAKERS.items():
            setattr(convert, name, public_maker(cls))
    else:
        for name, value in slots.items():
            setattr(convert, name, value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    slots = {name: getattr(convert, name) for name in ["construct", *MAKERS]}
    with tempfile.TemporaryDirectory() as work:
        store = open_sqlite(Path(work) / "load.db")
        falcon = import_file(store, corpus_file("quick-falcon"))[0]
        claude = import_file(store, corpus_file("da4409c0"))[0]
        plain = store.create_session().id
        write_turns(store, plain, 0, 1000)
        long = build_compacted(store, Path(work) / "load.db", 10_000)
        conversation = store.conversation(long, model=MODEL, system="You are a coding agent.")
        conversation.user("go on")  # a view that ends with the user: request() writes nothing
        loads = {
            f"messages(), quick-falcon ({len(store.messages(falcon)):,} messages)": lambda: store.messages(falcon),
            f"messages(), da4409c0 ({len(store.messages(claude)):,} messages)": lambda: store.messages(claude),
            "messages(), 4,000 items": lambda: store.messages(plain),
            "Conversation.request(), 10,000 messages": conversation.request,
        }
        for load in loads.values():  # the same result both ways
            use(True, slots)
            public = load()
            use(False, slots)
            assert load() == public
        print(f"{'load':<46}{'slots ms':>10}{'public ms':>11}  public/slots")
        for name, load in loads.items():
            times: dict[bool, list[float]] = {False: [], True: []}
            for i in range(args.rounds):
                for public in (False, True) if i % 2 == 0 else (True, False):  # ABBA
                    use(public, slots)
                    start = time.perf_counter()
                    load()
                    times[public].append(time.perf_counter() - start)
            use(False, slots)
            ms = {way: statistics.median(t) * 1000 for way, t in times.items()}
            print(f"{name:<46}{ms[False]:>10.2f}{ms[True]:>11.2f}  {ms[True] / ms[False]:>11.2f}x")
        store.close()


if __name__ == "__main__":
    main()
