"""Storage: tables, engines, migrations, and the operations the stores run on them.

How a call runs (``store.append_message(...)``, say), from the top:

1. The store method, declared once in ``brutus.calls.StoreCalls`` for both stores, builds an **operation**
   and returns it as its work (``brutus.flows.Tx``); the store's runner (``SessionStore.run``,
   ``AsyncSessionStore.run``) runs it.
2. An operation (``ops.py``, ``bulk_ops.py``, ``history_ops.py``, ``compaction_ops.py``, ``edit_ops.py``, ``search_ops.py``,
   ``stats_ops.py``, ``check_ops.py``, ``gc_ops.py``) is a generator: it validates its input, yields
   ``Step(statement, params, fetch)`` for each SQL statement (``statements.py`` builds them once, at import)
   and receives the rows, and returns the result model. It never sees a connection, so the same generator
   runs on every backend, sync or async. One operation is one transaction.
3. The runner owns the connection, the transaction and the error translation (``runner.translate``:
   driver and SQLAlchemy errors become ``brutus.errors``):

   ========================  ==============================================================================
   sync store, SQLite        ``sqlite_driver.SQLiteDriver`` on the store's sqlite3 connection (statements
                             compiled once), inside ``sqlite_driver.sqlite_transaction``: BEGIN IMMEDIATE for a
                             write, COMMIT, then the checkpoint thread is told (``checkpoint.py``); every
                             SQLite BEGIN / COMMIT / ROLLBACK is ``sqlite_begin`` / ``sqlite_end``
   sync store, PostgreSQL    SQLAlchemy Core on a pooled connection, ``runner.drive`` (a bulk insert's
                             rows as one statement per table: ``pg_bulk.py``)
   async store, SQLite       the same ``SQLiteDriver`` and ``sqlite_transaction`` on a sqlite3 connection in a
                             thread of brutus's own, one trip per call, the event loop awaiting its result
                             (``async_sqlite.py``: the threads, kept between calls; aiosqlite is only the
                             dialect of the ``AsyncEngine`` the store is handed, no call goes through it)
   async store, PostgreSQL   SQLAlchemy's asyncio engine on psycopg; ``AsyncConnection.run_sync`` drives the
                             operation in one greenlet
   ``store.batch()``         any of the above, with one transaction over the calls inside it
   ========================  ==============================================================================

4. Multi-step work (a compaction, a tier run, gc, check, search, settle, a live conversation's turn) is a
   flow (``brutus.flows``): a generator that yields its transactions (``Tx``), summarizer calls
   (``Summarize``), work under a session's compaction lock (``Locked``, ``HeldLocks``) and gc's storage steps
   (``Vacuum``, ``StorageBytes``) in turn, with the slow part outside any transaction. One interpreter and its
   async twin (``drive_flow``, ``adrive_flow``) send each action to the store's ``_do``.

Start-up: ``import brutus`` imports nothing heavy (the public names load on first use, ``brutus/__init__.py``),
and the CLI imports SQLAlchemy, rich and the store inside its commands, so ``brutus --help`` answers at once.
"""
