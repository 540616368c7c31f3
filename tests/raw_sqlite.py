"""A plain ``sqlite3`` connection to a brutus file, as a client outside brutus opens one, with the one function
brutus's search views and ``tool_outputs`` triggers call (the ``sqlite3`` shell has it built in: migration 0009)."""

from __future__ import annotations

import sqlite3
from typing import Any

from brutus.codec import sqlar_uncompress


def raw_sqlite(path: Any, **kwargs: Any) -> sqlite3.Connection:
    conn = sqlite3.connect(path, **kwargs)
    conn.create_function("sqlar_uncompress", 2, sqlar_uncompress, deterministic=True)
    return conn
