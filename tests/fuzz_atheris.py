"""Coverage-guided fuzzing with atheris (libFuzzer), run by tests/test_fuzz.py when atheris is installed.

    python tests/fuzz_atheris.py DIRECTORY [libFuzzer flags, e.g. -atheris_runs=20000 -max_total_time=20]

Each input picks one target:

0. the lossless codec: ``decode_text(encode_text(s)) == s`` and JSON through the engines' (de)serializers
   gives back the value, for any string (NUL, lone surrogates, U+E000 and its escape sequences);
1. the store: a text part and message metadata built from the input round-trip exactly, or the call raises
   a ``BrutusError`` (SQLite file in DIRECTORY);
2. the store: a part dict parsed from the input as JSON is stored and read back as returned, or refused
   with a ``BrutusError``;
3. the importers: any bytes as a file are detected, parsed and planned, or refused with a ``BrutusError``.

Any other exception, or a failed round trip, is a crash: libFuzzer prints the input and exits non-zero.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import atheris
import pydantic  # noqa: F401  imported before instrumenting: only brutus's own code is traced
import sqlalchemy  # noqa: F401

with atheris.instrument_imports(include=["brutus"]):
    from brutus import codec
    from brutus.errors import BrutusError
    from brutus.importers import plan_document, read_document
    from brutus.store import SessionStore

DIRECTORY = Path(sys.argv[1])
STORE = SessionStore.open(f"sqlite:///{DIRECTORY / 'atheris.db'}")


def _fresh() -> tuple[str, str]:
    """A new session and assistant message per input, so reading one back stays cheap."""
    session = STORE.create_session().id
    return session, STORE.append_message(session, "assistant").id


def _codec(fdp: atheris.FuzzedDataProvider) -> None:
    text = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 300))
    assert codec.decode_text(codec.encode_text(text)) == text
    value = {"k": text, text: [text, {"n": None}]}
    assert codec.loads_json(codec.dumps_json(codec.encode_json(value))) == value


def _loaded(session: str, part_id: str):
    return next(p for m in STORE.messages(session) for p in m.parts if p.id == part_id)


def _store_text(fdp: atheris.FuzzedDataProvider) -> None:
    text = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 2000))
    session, reply = _fresh()
    try:
        part = STORE.append_part(reply, {"type": "text", "text": text, "metadata": {text: [text]}})
        message = STORE.append_message(session, "user", agent=text, metadata={"m": text})
    except BrutusError:
        return
    loaded = _loaded(session, part.id)
    assert loaded.text == text and loaded.metadata == {text: [text]}
    info = next(m.info for m in STORE.messages(session) if m.info.id == message.id)
    assert info.agent == text and info.metadata == {"m": text}


def _store_part(fdp: atheris.FuzzedDataProvider) -> None:
    raw = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4000))
    try:
        part = json.loads(raw)
    except (ValueError, RecursionError):
        return
    session, reply = _fresh()
    try:
        stored = STORE.append_part(reply, part)
    except BrutusError:
        return
    loaded = _loaded(session, stored.id).model_dump()
    expected = stored.model_dump()
    if stored.type == "tool":  # the store stamps start/end times the caller may not have given
        loaded["state"].pop("time"), expected["state"].pop("time")
    assert loaded == expected


def _importer(fdp: atheris.FuzzedDataProvider) -> None:
    suffix = ".jsonl" if fdp.ConsumeBool() else ".json"
    path = DIRECTORY / f"input{suffix}"
    path.write_bytes(fdp.ConsumeBytes(fdp.remaining_bytes()))
    try:
        plan_document(read_document(path))
    except BrutusError:
        pass


TARGETS = [_codec, _store_text, _store_part, _importer]


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    TARGETS[fdp.ConsumeIntInRange(0, len(TARGETS) - 1)](fdp)


if __name__ == "__main__":
    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()
