"""Scaling: load time and database size against history length, brutus and the peers, plotted.

Each store grows one session turn by turn (the same four-item turns as the append benchmark) and, at each
length, loads the whole history (brutus ``messages()``, the peers' ``get_items()`` / ``messages`` /
``thread_messages()`` / ``get_session()``) and measures its SQLite file once the log is checkpointed. Writes
benchmarks/results/scaling.png (matplotlib; the figures are kept in the JSON when it is missing).
"""

from __future__ import annotations

from typing import Any

from harness import Config, Section, Table, peer_results, ratio, sqlite_bytes, timed
from peers._common import ITEMS_PER_TURN
from workload import open_sqlite, write_turns

NAME = "scaling"
BRUTUS = "brutus messages()"
MB = 1024 * 1024


def brutus_points(cfg: Config, sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    path = cfg.workdir(NAME) / "brutus.db"
    store = open_sqlite(path)
    session_id = store.create_session().id
    points, done = [], 0
    for size in sizes:
        write_turns(store, session_id, done // ITEMS_PER_TURN, (size - done) // ITEMS_PER_TURN)
        done = size
        timing = timed(lambda: store.messages(session_id), repeats=repeats)
        points.append({"items": size, "load_ms": timing["median"], "db_bytes": sqlite_bytes(path)})
    store.close()
    return points


def plot(series: dict[str, list[dict[str, Any]]], cfg: Config) -> str | None:
    """Draw load time and database size against history length; the PNG's path, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    except ImportError:
        return None
    figure, (load, size) = plt.subplots(1, 2, figsize=(13, 5.2))
    for label, points in series.items():
        style = {"linewidth": 2.6, "color": "black", "zorder": 3} if label == BRUTUS else {"linewidth": 1.4}
        items = [p["items"] for p in points]
        load.plot(items, [p["load_ms"] for p in points], marker="o", label=label, **style)
        size.plot(items, [p["db_bytes"] / MB for p in points], marker="o", label=label, **style)
    sizes = sorted({p["items"] for points in series.values() for p in points})
    for axis, title, unit in ((load, "load the whole history", "ms (median)"), (size, "database file", "MB")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xticks(sizes)
        axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.yaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("history length (items; 4 items = 1 agent turn)")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
    load.legend(fontsize=8, loc="upper left")
    figure.suptitle(
        f"brutus and the peers on SQLite (WAL, synchronous=NORMAL), 2,000-byte tool outputs ({cfg.mode} run)"
    )
    figure.tight_layout()
    cfg.results.mkdir(parents=True, exist_ok=True)
    path = cfg.results / "scaling.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return str(path)


def run(cfg: Config) -> Section:
    sizes = cfg.pick([500, 1000, 2000, 4000, 8000, 16000], [250, 500, 1000, 2000, 4000], [40, 80])
    repeats = cfg.pick(7, 5, 2)
    series = {BRUTUS: brutus_points(cfg, sizes, repeats)}
    for label, result in peer_results(
        cfg, "scaling", cfg.workdir(NAME) / "peers", sizes=",".join(map(str, sizes)), repeats=repeats
    ).items():
        series[label] = result["points"]
    last = sizes[-1]
    table = Table(
        f"scaling: load the whole history and the file size, at {', '.join(f'{s:,}' for s in sizes)} items",
        [
            "store",
            f"load ms @ {sizes[0]:,}",
            f"load ms @ {last:,}",
            f"x ({last // sizes[0]}x items)",
            f"MB @ {last:,}",
            "bytes/item",
            "load vs brutus",
        ],
    )
    brutus_last = series[BRUTUS][-1]["load_ms"]
    for label, points in series.items():
        first, end = points[0], points[-1]
        table.add(
            label,
            first["load_ms"],
            end["load_ms"],
            ratio(end["load_ms"], first["load_ms"]),
            end["db_bytes"] / MB,
            float(round(end["db_bytes"] / end["items"])),
            ratio(end["load_ms"], brutus_last),
        )
    png = plot(series, cfg)
    table.notes.append(f"plot: {png}" if png else "no plot: matplotlib is not installed (pip install matplotlib)")
    return Section(NAME, [table], [], {"sizes": sizes, "repeats": repeats, "series": series, "png": png})
