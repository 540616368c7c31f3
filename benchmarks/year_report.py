"""The printed report of ``benchmarks/year.py``: the stores, the figures per store, where the bytes go, the
append rates, the long session's export, and each goal of issue 32 with its verdict."""

from __future__ import annotations

from typing import Any

from harness import Goal, Section, Table, ratio

LIMIT = 50  # hits per search, as in the issue
MB = 1024 * 1024
BACKENDS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
SEARCH_GOAL = {"sqlite": 100.0, "postgresql": 250.0}  # ms at 1M messages


def report(section: Section, stores: list[Any], exports: dict[str, Any], words: dict[str, str],
           shares: dict[str, list[Any]]) -> None:
    by = {(s.backend, s.size): s for s in stores}
    backends = sorted({s.backend for s in stores}, key=list(BACKENDS).index)
    built = Table("the stores (copies of the corpus sessions)",
                  ["store", "sessions", "messages", "raw text MB", "build s", "build msg/s", "cached"])
    for s in stores:
        raw = sum(s.built.raw.values())
        built.add(s.label, s.built.sessions, s.built.messages, raw / MB, s.built.seconds,
                  s.built.messages / s.built.seconds if s.built.seconds else None, s.cached)
    built.notes.append("build: append_messages calls of up to 100 messages (a shorter session in one call); "
                       "a cached store's build time is the one it was built with")
    section.tables.append(built)

    figures = Table("figures per store", ["figure"] + [s.label for s in stores])
    row = lambda label, get: figures.add(label, *[get(s) for s in stores])  # noqa: E731
    row("first search after the bulk writes, ms", lambda s: s.figures["first_search_ms"])
    for kind in ("common", "rare"):
        share = shares[kind][1] * 100
        row(f"search '{words[kind]}' ({kind}, {share:.2g}% of parts), ms",
            lambda s, k=kind: s.figures["search"][k]["ms"])
        row(f"  its hits (limit {LIMIT})", lambda s, k=kind: s.figures["search"][k]["hits"])
    row("view of a 200-message tail, ms", lambda s: s.figures["view_ms"])
    row("  the same after ANALYZE, ms", lambda s: s.figures.get("view_analyzed_ms"))
    row("  planner had statistics of parts", lambda s: (s.figures.get("stats_before") or {}).get("parts_analyzed"))
    row("sessions in the list", lambda s: s.figures["pages"]["sessions"])
    row("list_sessions: first page, ms", lambda s: s.figures["pages"]["first_ms"])
    row("list_sessions: page after the deep one, ms", lambda s: s.figures["pages"]["deep_ms"])
    row("  (deep = after session no.)", lambda s: s.figures["pages"]["deep"])
    row("bytes on disk, MB", lambda s: s.figures["disk"]["bytes"] / MB)
    row("raw text stored, MB", lambda s: s.figures["disk"]["raw"] / MB)
    row("bytes on disk / raw text", lambda s: s.figures["disk"]["ratio"])
    row("gc: dropped MB of outputs", lambda s: s.figures["gc"]["dropped_bytes"] / MB)
    row("gc: share of all outputs", lambda s: s.figures["gc"]["dropped_share"])
    row("gc: seconds", lambda s: s.figures["gc"]["seconds"])
    row("gc: peak extra disk, MB", lambda s: s.figures["gc"]["peak_extra"] / MB)
    row("gc: peak extra / database", lambda s: s.figures["gc"]["peak_extra_share"])
    row("gc: reported bytes_reclaimed, MB", lambda s: _mb(s.figures["gc"]["bytes_reclaimed"]))
    row("gc: reported bytes_reusable, MB", lambda s: _mb(s.figures["gc"]["bytes_reusable"]))
    row("gc: vacuumed / has a vacuum option",
        lambda s: f"{s.figures['gc']['vacuumed']} / {s.figures['gc']['vacuum_option']}")
    figures.notes.append("searches, views and pages: medians; PostgreSQL's searches and pages run after ANALYZE")
    section.tables.append(figures)

    for s in stores:
        if s.size != "large":
            continue
        where = Table(f"where the bytes go, {s.label}", ["table (with its indexes)", "MB", "heap", "toast", "indexes",
                                                         "share"])
        total = s.figures["disk"]["bytes"]
        for r in s.figures["disk"]["breakdown"][:12]:
            where.add(r["table"], r["total"] / MB, _mb(r.get("heap")), _mb(r.get("toast")), _mb(r.get("indexes")),
                      r["total"] / total if total else None)
        section.tables.append(where)

    appended = section.data["append_msg_s"]
    table = Table("append_messages of history in 100-message calls (large stores, A B B A)", ["backend", "msg/s"])
    for backend, rate in appended.items():
        table.add(BACKENDS[backend], rate)
    section.tables.append(table)

    long = Table("a session of many messages, in a child process", ["what", "backend", "seconds", "peak RSS MB",
                                                                    "RSS before MB", "output MB"])
    for backend, found in exports.items():
        for what, r in found.items():
            peak = (f"over the cap ({r['capped']:,} MB of address space)" if r.get("capped")
                    else f"failed: {r['failed']}" if r.get("failed") else r["peak_kb"] / 1024)
            long.add("brutus export" if what == "export" else "messages()", BACKENDS[backend], r["seconds"], peak,
                     _mb(r["base_kb"] and r["base_kb"] * 1024), _mb(r.get("bytes")))
    section.tables.append(long)

    goals = section.goals
    for backend in backends:
        name = BACKENDS[backend]
        small, large = by[(backend, "small")], by[(backend, "large")]
        n = f"{large.built.messages:,}"
        for kind in ("common", "rare"):
            value = large.figures["search"][kind]["ms"]
            goals.append(Goal(f"{name}: search '{words[kind]}' ({kind}) at {n} msgs (goal at 1M)", value,
                              SEARCH_GOAL[backend], " ms"))
            goals.append(Goal(f"{name}: search '{words[kind]}', 4x the data / 1x", ratio(
                value, small.figures["search"][kind]["ms"]), 1.5))
        goals.append(Goal(f"{name}: first search after the bulk writes at {n} msgs (as fast as any search)",
                          large.figures["first_search_ms"], SEARCH_GOAL[backend], " ms"))
        pages = large.figures["pages"]
        goals.append(Goal(f"{name}: list_sessions first page at {pages['sessions']:,} sessions (goal at 20,000)",
                          pages["first_ms"], 5.0, " ms"))
        goals.append(Goal(f"{name}: list_sessions page after the {pages['deep']:,}th (goal at 20,000)"
                          + ("" if pages["deep_ms"] is not None else " n/a: no after="), pages["deep_ms"], 5.0, " ms"))
        for s in (small, large):
            gc = s.figures["gc"]
            goals.append(Goal(f"{name}: gc extra disk / database at {s.built.messages:,} msgs",
                              gc["peak_extra_share"], 0.25))
        per = [s.figures["gc"]["seconds"] / max(s.figures["gc"]["dropped_bytes"], 1) for s in (small, large)]
        goals.append(Goal(f"{name}: gc time per byte dropped, 4x the data / 1x", ratio(per[1], per[0]), 1.5))
        if backend == "postgresql":
            reported = large.figures["gc"]["bytes_reclaimed"]
            goals.append(Goal(f"{name}: gc reports no negative bytes_reclaimed (reported, MB, negated)",
                              None if reported is None else -reported / MB, 0.0, " MB"))
        goals.append(Goal(f"{name}: bytes on disk / raw text at {n} msgs", large.figures["disk"]["ratio"], 1.5))
        if backend == "postgresql":
            goals.append(Goal(f"{name}: view of a 200-message tail after the load / after ANALYZE ({n} msgs)",
                              ratio(large.figures["view_ms"], large.figures["view_analyzed_ms"]), 1.5))
        goals.append(Goal(f"{name}: view of a 200-message tail, 4x the data / 1x",
                          ratio(large.figures["view_ms"], small.figures["view_ms"]), 1.5))
        for what, r in exports.get(backend, {}).items():
            label = "brutus export" if what == "export" else "messages()"
            capped = f" (stopped at the {r['capped']:,} MB cap: more)" if r.get("capped") else ""
            value = r["capped"] if capped else None if r.get("failed") else r["peak_kb"] / 1024
            goals.append(Goal(f"{name}: {label} of {section.data['export_messages']:,} msgs, peak RSS{capped}",
                              value, 150.0, " MB"))
    if "postgresql" in appended:
        goals.append(Goal("append_messages in 100-message calls, PostgreSQL time / SQLite time",
                          ratio(appended["sqlite"], appended["postgresql"]), 1.5))


def _mb(value: Any) -> float | None:
    return None if value is None else value / MB
