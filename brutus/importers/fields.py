"""Mapping a foreign JSON object onto a brutus model and back, keeping what the model has no field for.

Rules:

- ``split(raw, Model, renames)`` sorts the keys of ``raw``: a key the model has a field for (after renaming,
  e.g. ``callID`` → ``call_id``) is *known* and goes to the model; any other key is an *extra*, kept verbatim
  under its original name. Nested models (a tool's ``state``, ``time``, ``tokens``, ``tokens.cache``) are
  sorted the same way, so ``tokens.total`` is an extra while ``tokens.input`` is known. A JSON-object field
  (``metadata``, ``input``, ``source``) is known as a whole.
- ``merge(exported, extras)`` lays the extras back over an exported object, recursively, so that
  ``merge(export(model), extras)`` gives back ``raw``.
- ``model_error`` turns a pydantic ``ValidationError`` into one readable line naming where it happened.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["JSON", "merge", "model_error", "split"]

JSON = dict[str, Any]


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (``PartTime | None`` → ``PartTime``), or None for any other type."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found is not None:
                return found
    return None


def split(raw: JSON, model: type[BaseModel], renames: dict[str, str]) -> tuple[JSON, JSON]:
    """``(known, extras)``: the fields of ``model`` found in ``raw`` (renamed) and everything else (verbatim)."""
    known: JSON = {}
    extras: JSON = {}
    for key, value in raw.items():
        name = renames.get(key, key)
        field = model.model_fields.get(name)
        if field is None:
            extras[key] = value
            continue
        nested = _nested_model(field.annotation)
        if nested is not None and isinstance(value, dict):
            inner, inner_extras = split(value, nested, renames)
            known[name] = inner
            if inner_extras:
                extras[key] = inner_extras
        else:
            known[name] = value
    return known, extras


def merge(exported: JSON, extras: JSON | None) -> JSON:
    """``exported`` with ``extras`` laid over it, recursively (``exported`` is changed and returned)."""
    for key, value in (extras or {}).items():
        current = exported.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merge(current, value)
        else:
            exported[key] = value
    return exported


def model_error(exc: ValidationError, where: str) -> str:
    """One line: where, the field path at fault, and what pydantic says about it."""
    first = exc.errors()[0] if exc.errors() else None
    if first is None:
        return f"{where}: {exc}"
    path = ".".join(str(x) for x in first.get("loc", ()))
    return f"{where}: {path + ': ' if path else ''}{first.get('msg')}"
