"""What the SQLite driver saves: the statements of brutus's hot paths run three ways, alternated round by round.

    python benchmarks/driver_vs_core.py [--turns N] [--rounds N]

The statements are those an agent step (8 calls), a finished turn in one ``append_messages`` and
``messages()`` of a session of ``--turns`` turns (4 items each) send, captured at the driver. Each round runs one
path's statements in a transaction rolled back at its end (the same ids each round), through:

- **driver**: ``SQLiteDriver.execute``, as the store runs them (each statement's plan built once: the compiler's
  ``positiontup`` and the types' processors);
- **public**: the same compiled statements and processors, the positional parameters built per call by
  SQLAlchemy's public ``compiled.construct_expanded_state(params)`` instead of read in ``positiontup``'s order
  (no packing, rows as plain tuples: if anything, less work than the driver's);
- **core**: SQLAlchemy Core, ``Connection.execute(statement, params)`` with its compiled cache.

Prints the median ms of a round per path and way, and each way against the driver.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import agent_step, open_sqlite, whole_turn, write_turns  # noqa: E402

from brutus.db.engine import make_engine  # noqa: E402
from brutus.db.sqlite_driver import SQLiteDriver, sqlite_begin, sqlite_end  # noqa: E402

Call = tuple[Any, Any, str]  # statement, parameters, fetch


class _Rollback(Exception):
    pass


def capture(store: Any, path: Callable[[], Any]) -> list[Call]:
    """The statements ``path()`` sends through the store's driver, its writes rolled back."""
    calls: list[Call] = []
    execute = SQLiteDriver.execute

    def recording(self: SQLiteDriver, dbapi: Any, statement: Any, params: Any, fetch: str) -> Any:
        copied = [dict(p) for p in params] if isinstance(params, list) else dict(params) if params else params
        calls.append((statement, copied, fetch))
        return execute(self, dbapi, statement, params, fetch)

    SQLiteDriver.execute = recording  # type: ignore[method-assign]
    try:
        with store.batch():
            path()
            raise _Rollback
    except _Rollback:
        pass
    finally:
        SQLiteDriver.execute = execute  # type: ignore[method-assign]
    return calls


class Public:
    """The driver's work with the positional parameters built by ``construct_expanded_state`` on every call."""

    def __init__(self, dialect: Any) -> None:
        self.dialect = dialect
        self.compiled: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.binds: dict[int, dict[str, Callable[[Any], Any]]] = {}  # by compiled statement
        self.results: dict[int, dict[int, Callable[[Any], Any]]] = {}

    def _compiled(self, statement: Any, keys: tuple[str, ...]) -> Any:
        compiled = self.compiled.get((id(statement), keys))
        if compiled is None:
            dialect = self.dialect
            compiled = statement.compile(dialect=dialect, column_keys=list(keys))
            self.compiled[(id(statement), keys)] = compiled
            binds = {name: bind.type.dialect_impl(dialect).bind_processor(dialect) for name, bind in compiled.binds.items()}
            self.binds[id(compiled)] = {name: process for name, process in binds.items() if process is not None}
            columns = getattr(statement, "exported_columns", ()) or ()
            results = {i: c.type.dialect_impl(dialect).result_processor(dialect, None) for i, c in enumerate(columns)}
            self.results[id(statement)] = {i: process for i, process in results.items() if process is not None}
        return compiled

    def _args(self, compiled: Any, params: Any) -> list[Any]:
        """The positional parameters in ``ExpandedState.positiontup``'s order, each through its type's processor
        (``ExpandedState.processors`` holds only those of expanded parameters)."""
        state = compiled.construct_expanded_state(params)
        processors, values = self.binds[id(compiled)], state.parameters
        return [processors[k](values[k]) if k in processors else values[k] for k in state.positiontup or ()]

    def execute(self, dbapi: Any, statement: Any, params: Any, fetch: str) -> Any:
        if isinstance(params, list):
            compiled = self._compiled(statement, tuple(params[0]))
            dbapi.executemany(compiled.string, [self._args(compiled, p) for p in params])
            return None
        compiled = self._compiled(statement, tuple(params or ()))
        rows = dbapi.execute(compiled.string, self._args(compiled, params)).fetchall()
        converters = self.results[id(statement)]
        if converters and fetch in ("all", "first"):
            rows = [tuple(converters[i](v) if i in converters else v for i, v in enumerate(r)) for r in rows]
        return rows


def core_execute(conn: Any, statement: Any, params: Any, fetch: str) -> Any:
    result = conn.execute(statement, params) if params else conn.execute(statement)
    if fetch == "rowcount":
        return result.rowcount
    return result.all() if result.returns_rows else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "driver.db"
        store = open_sqlite(path)
        session_id = store.create_session().id
        write_turns(store, session_id, 0, args.turns)
        paths = {
            "agent step": capture(store, lambda: agent_step(store, session_id, 0)),
            "append_messages turn": capture(store, lambda: whole_turn(store, session_id, 0)),
            f"messages() of {args.turns * 4:,} items": capture(store, lambda: store.messages(session_id)),
        }
        store.close()
        engine = make_engine(f"sqlite:///{path}")
        pooled = engine.raw_connection()
        dbapi = pooled.driver_connection
        driver, public = SQLiteDriver(engine.dialect), Public(engine.dialect)
        conn = engine.connect()

        def raw_round(execute: Callable[..., Any], calls: list[Call]) -> float:
            start = time.perf_counter()
            sqlite_begin(dbapi, True)
            for call in calls:
                execute(dbapi, *call)
            sqlite_end(dbapi, False)
            return time.perf_counter() - start

        def core_round(calls: list[Call]) -> float:
            start = time.perf_counter()
            with conn.begin() as transaction:
                for call in calls:
                    core_execute(conn, *call)
                transaction.rollback()
            return time.perf_counter() - start

        ways: dict[str, Callable[[list[Call]], float]] = {
            "driver": lambda calls: raw_round(driver.execute, calls),
            "public": lambda calls: raw_round(public.execute, calls),
            "core": core_round,
        }
        print(f"{'path':<28}{'statements':>11}" + "".join(f"{w + ' ms':>12}" for w in ways) + "  public/driver  core/driver")
        for name, calls in paths.items():
            rounds = max(5, args.rounds // (20 if name.startswith("messages") else 1))
            times: dict[str, list[float]] = {way: [] for way in ways}
            for way in ways:  # warm: plans, compiled cache
                ways[way](calls)
            for i in range(rounds):
                order = list(ways) if i % 2 == 0 else list(reversed(ways))  # ABC CBA …
                for way in order:
                    times[way].append(ways[way](calls))
            ms = {way: statistics.median(t) * 1000 for way, t in times.items()}
            cells = "".join(f"{ms[w]:>12.3f}" for w in ways)
            print(f"{name:<28}{len(calls):>11}{cells}  {ms['public'] / ms['driver']:>12.2f}x  {ms['core'] / ms['driver']:>10.2f}x")
        conn.close()
        pooled.close()
        engine.dispose()


if __name__ == "__main__":
    main()
