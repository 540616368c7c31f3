"""Signatures: how the fake binds a thinking block to the conversation it was produced in, and checks it.

Rules (docs: "Preserved thinking", its sub-pages "Prefix checks on thinking blocks" and "Fix a thinking
block bound to a different conversation", and "Troubleshooting thinking"):

- A signature (``signature`` of a ``thinking`` block, ``data`` of a ``redacted_thinking`` block, ``signature``
  of a ``compaction`` block) is ``base64url(payload JSON) + "." + HMAC-SHA256(key, payload JSON)[:32]``. The
  key is a constant of this module, so the same conversation always gets the same signatures, in any
  ``FakeMessagesAPI``. A signature that does not parse or whose MAC is wrong is "tampered": always a 400
  (``Invalid `signature` in `thinking` block`` with nothing after it); ``drop_block`` does not apply.
- A thinking payload records a digest of the block's own content (its ``thinking`` text), a digest of
  ``system`` and of ``tools``, the prefix state, and the id of the thinking block before it. Changed
  ``thinking`` text is the older error: "`thinking` or `redacted_thinking` blocks in the latest assistant
  message cannot be modified" (always a 400).
- The prefix state is a hash chain over the canonical JSON (no ``cache_control``: moving a breakpoint is not
  an edit) of: ``system`` (a string is one text block), ``tools`` without the ``defer_loading: true`` ones
  (the check ignores a deferred tool; the fake ignores it even once referenced, a simplification), then for
  each message before the block a start marker with its role, and each of its content blocks before the
  block, ``role: "system"`` messages included. Thinking blocks are not in the prefix: each records the id
  of the thinking block before it instead ("each thinking block records which thinking block came before
  it"). Blocks may be removed from the start, from the end or all of them; the kept ones must be an unbroken
  run: a block whose recorded predecessor is not the previous kept thinking block fails (a gap, a move, or a
  block put back), unless no thinking block is kept before it.
- Compaction: the checked prefix starts at the most recent compaction block. A threshold block (produced
  inside a response) restarts the chain from ``system``/``tools`` and the block. An on-demand block (the
  ``compaction`` parameter) records the chain state of the messages it summarized, and stands for them: the
  thinking in turns kept after it stays valid while ``system`` and ``tools`` are unchanged.
- A failing block (prefix differs, or predecessor missing/out of order): with
  ``thinking.block_binding.prefix_mismatch_behavior == "drop_block"`` (which needs the
  ``thinking-binding-controls-2026-08-01`` beta) it is dropped, with the rest of that turn's thinking blocks
  (the SDK's ``prefix_binding_mismatch`` text), each reported as
  ``{"type": "thinking_dropped", "path": "messages.i.content.j", "reason": "prefix_binding_mismatch"}``.
  Otherwise (``"error"``, the default of accounts created on or after 2026-08-31, which the fake models) the
  request is refused with the documented message naming the first failing block, plus the sentence about
  the beta header when it was not sent, plus a sentence naming what changed.
- The fake remembers, per signature it produced, the prefix elements it saw, to name what changed (wording
  of that last sentence is the fake's own; the docs say not to match on it).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from .errors import bad_request
from .prompt import THINKING_TYPES, blocks_of, canonical, digest

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_KEY = b"brutus.testing.FakeMessagesAPI signing key"
_SHORT = 32  # hex digits kept from each digest


def seal(payload: dict[str, Any]) -> str:
    """A signature carrying ``payload``."""
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    mac = hmac.new(_KEY, raw, "sha256").hexdigest()[:_SHORT]
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") + "." + mac


def unseal(token: Any) -> dict[str, Any] | None:
    """The payload of a signature this module made, or None if it is not one (tampered, truncated, empty)."""
    if not isinstance(token, str) or token.count(".") != 1:
        return None
    data, mac = token.split(".")
    try:
        raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    expected = hmac.new(_KEY, raw, "sha256").hexdigest()[:_SHORT]
    if not hmac.compare_digest(mac, expected) or not isinstance(payload, dict):
        return None
    return payload


def short(*parts: str) -> str:
    return digest(*parts)[:_SHORT]


def block_id(token: str) -> str:
    """The id a thinking block is known by as another block's predecessor."""
    return short("thinking-id", token)


def thinking_content_digest(block: dict[str, Any]) -> str:
    if block.get("type") == "redacted_thinking":
        return short("redacted_thinking")
    return short("thinking", canonical({"thinking": block.get("thinking")}))


def compaction_content_digest(block: dict[str, Any]) -> str:
    fields = {k: block.get(k) for k in ("content", "encrypted_content", "tool_changes")}
    return short("compaction", canonical(fields))


def signature_field(block: dict[str, Any]) -> str:
    return "data" if block.get("type") == "redacted_thinking" else "signature"


class Chain:
    """The running prefix state while a request's messages (and then its response) are walked."""

    def __init__(self, body: dict[str, Any]) -> None:
        tools = [t for t in (body.get("tools") or []) if not (isinstance(t, dict) and t.get("defer_loading") is True)]
        self.sys = short("system", canonical(blocks_of(body.get("system"))))
        self.tools = short("tools", canonical(tools))
        self.base = short("base", self.sys, self.tools)
        self.state = self.base
        self.last: str | None = None  # id of the last thinking block kept
        self.elements: list[tuple[str, str]] = []  # (element digest, path) since the base or the last compaction

    def _push(self, element: str, path: str) -> None:
        self.state = short(self.state, element)
        self.elements.append((element, path))

    def message(self, role: Any, path: str) -> None:
        self._push(short("message", str(role)), path)

    def block(self, block: Any, path: str) -> None:
        self._push(short("block", canonical(block)), path)

    def compaction(self, block: dict[str, Any], payload: dict[str, Any], path: str) -> None:
        """Restart at a compaction block (module rules)."""
        if payload.get("mode") == "summarize" and payload.get("base") == self.base and isinstance(payload.get("state"), str):
            self.state = payload["state"]
        else:
            self.state = short("compaction", self.base, canonical(block))
        self.elements = [(self.state, path)]
        self.last = None

    def thinking_payload(self, block: dict[str, Any], model: Any) -> dict[str, Any]:
        return {"v": 1, "kind": block.get("type"), "model": model, "content": thinking_content_digest(block),
                "sys": self.sys, "tools": self.tools, "prefix": self.state, "prev": self.last}


@dataclass
class Binding:
    """What the binding check did to a request: the thinking blocks it dropped, and the chain after it."""

    chain: Chain
    dropped: list[tuple[int, int]] = field(default_factory=list)
    transformations: list[dict[str, str]] = field(default_factory=list)


class Signer:
    """Signs what the fake produces and checks what comes back; remembers prefixes to explain mismatches."""

    def __init__(self) -> None:
        self._origins: dict[str, list[tuple[str, str]]] = {}

    # -- producing ------------------------------------------------------------------------------------------

    def sign_thinking(self, block: dict[str, Any], chain: Chain, model: Any) -> None:
        """Give a produced thinking/redacted_thinking block its signature (unless it already has one)."""
        name = signature_field(block)
        if block.get("type") == "thinking":
            block.setdefault("thinking", "")
        if name not in block:
            block[name] = seal(chain.thinking_payload(block, model))
            self._origins[block[name]] = list(chain.elements)
        chain.last = block_id(str(block[name]))

    # -- checking -------------------------------------------------------------------------------------------

    def check_bindings(
        self,
        body: dict[str, Any],
        *,
        start: tuple[int, int],
        compactions: dict[tuple[int, int], dict[str, Any]],
        drop: bool,
        beta: bool,
    ) -> Binding:
        """Walk the messages from ``start``: verify every thinking block, drop or refuse the failing ones."""
        chain = Chain(body)
        result = Binding(chain)
        messages = body.get("messages") or []
        for i, message in enumerate(messages):
            if i < start[0]:
                continue
            chain.message(message.get("role"), f"messages.{i}")
            turn_failed = False
            for j, block in enumerate(blocks_of(message.get("content"))):
                if i == start[0] and j < start[1]:
                    continue
                path = f"messages.{i}.content.{j}"
                kind = block.get("type")
                if kind == "compaction":
                    if (i, j) in compactions:
                        chain.compaction(block, compactions[(i, j)], path)
                    continue
                if kind not in THINKING_TYPES:
                    chain.block(block, path)
                    continue
                token = block.get(signature_field(block))
                payload = _verified(block, token, path)
                problem = None if turn_failed else self._problem(payload, str(token), chain, path)
                if not turn_failed and problem is None:
                    chain.last = block_id(str(token))
                    continue
                if not drop:
                    raise bad_request(_mismatch_message(path, kind, beta, problem))
                turn_failed = True
                result.dropped.append((i, j))
                result.transformations.append({"type": "thinking_dropped", "path": path, "reason": "prefix_binding_mismatch"})
        return result

    def _problem(self, payload: dict[str, Any], token: str, chain: Chain, path: str) -> str | None:
        """None when the block is bound to this prefix; else the sentence naming what changed ("" if unknown)."""
        prev_ok = chain.last is None or payload.get("prev") == chain.last
        if payload.get("prefix") == chain.state and prev_ok:
            return None
        if payload.get("sys") != chain.sys:
            return "The `system` prompt differs from when the block was created."
        if payload.get("tools") != chain.tools:
            return "The `tools` list differs from when the block was created."
        if not prev_ok:
            return "An earlier thinking block that preceded this one when it was created is missing from this request or out of order."
        origin = self._origins.get(token)
        return "" if origin is None else _content_sentence(origin, chain.elements, path)


def _verified(block: dict[str, Any], token: Any, path: str) -> dict[str, Any]:
    """The block's payload, or the always-400 errors for a tampered signature or edited thinking text."""
    kind = block.get("type")
    payload = unseal(token)
    if payload is None or payload.get("kind") != kind:
        if kind == "redacted_thinking":
            raise bad_request(f"{path}: Invalid `data` in `redacted_thinking` block")
        raise bad_request(f"{path}: Invalid `signature` in `thinking` block")
    if payload.get("content") != thinking_content_digest(block):
        raise bad_request(f"{path}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
                          "modified. These blocks must remain as they were in the original response.")
    return payload


def _mismatch_message(path: str, kind: Any, beta: bool, sentence: str | None) -> str:
    message = (f"{path}: Invalid `signature` in `{kind}` block. The block is bound to a different conversation. "
               'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".')
    if not beta:
        message += f" That setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."
    if sentence:
        message += " " + sentence
    return message


def _content_sentence(origin: list[tuple[str, str]], current: list[tuple[str, str]], path: str) -> str:
    """Name the first element of the prefix that differs between when the block was made and now."""
    k = 0
    while k < len(origin) and k < len(current) and origin[k][0] == current[k][0]:
        k += 1
    now = [d for d, _ in current]
    then = [d for d, _ in origin]
    where = current[k][1] if k < len(current) else path
    if k >= len(origin) or (k < len(current) and origin[k][0] in now[k + 1:]):
        return f"New content that was not there when the block was created starts at `{where}`."
    if k < len(current) and current[k][0] not in then:
        return f"The first block that differs from when the block was created is `{where}`."
    return f"Content that preceded this block when it was created is missing from this request, starting at `{where}`."
