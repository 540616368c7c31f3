"""Request validation: the shape of a Messages API request, checked before anything else runs.

Rules (each refusal is a 400 ``invalid_request_error``; messages are the real API's where the docs or public
reports quote them, pydantic-style ``path: problem`` otherwise):

- Top level: a JSON object with known parameters only (``x: Extra inputs are not permitted``); ``model`` a
  string; ``max_tokens`` an integer >= 0 (0 is cache pre-warming, which refuses ``thinking.type: "enabled"``,
  ``output_config.format`` and a forcing ``tool_choice``); ``stream`` a boolean (``true``: the answer is
  streamed, ``brutus.testing.stream``); ``messages`` a non-empty list.
- Thinking: ``type`` is ``enabled`` (``budget_tokens`` >= 1024 and < ``max_tokens``), ``adaptive``,
  ``disabled`` or ``between_tools``; ``block_binding`` needs the ``thinking-binding-controls-2026-08-01`` beta
  (else ``thinking.<type>.block_binding: Extra inputs are not permitted``) and a ``prefix_mismatch_behavior``
  of ``"error"`` or ``"drop_block"``.
- Messages: roles ``user``, ``assistant`` or ``system`` (mid-conversation system message, never first); the
  first message is ``user`` and ``user``/``assistant`` strictly alternate (system messages aside). The fake is
  stricter than the API here, which merges consecutive same-role turns: clients are held to alternation. The
  exception is the docs' own: a first message that starts with a ``compaction`` block may have either role,
  and the message after it too. Every message but a final assistant one has non-empty content.
- Content blocks: a known type (a ``compaction`` block only with a compaction beta), its required fields,
  and for ``text``, ``thinking``, ``redacted_thinking``, ``tool_use``, ``tool_result``, ``compaction`` no
  unknown field (``messages.i.content.j.<type>.<field>: Extra inputs are not permitted``); text non-empty and
  not only whitespace; thinking blocks only in assistant messages, tool results only in user messages.
- ``cache_control``: ``{"type": "ephemeral"}`` with an optional ``ttl`` of ``"5m"`` or ``"1h"``; not on
  thinking blocks (they have no such field); at most 4 explicit breakpoints (the automatic one and the TTL
  order are checked in ``brutus.testing.cache``).
- Tool pairing ("How tool use works"): each ``tool_use`` of an assistant message needs a ``tool_result`` with
  its id in the next message, and those results must open that message; a ``tool_result`` whose id is not a
  ``tool_use`` of the previous message is refused. ``server_tool_use`` and ``mcp_tool_use`` are paired inside
  their own message by their result blocks and are exempt.
- Thinking in a tool loop ("Thinking with tool use"): with ``thinking`` of type ``enabled`` or ``adaptive``
  and a conversation that ends in a tool loop (the last message is a user message of ``tool_result`` blocks
  only), the assistant message that opened the current assistant turn (the loop's first one) must start
  with a ``thinking`` or ``redacted_thinking`` block. Later messages of the loop need none ("without
  interleaved thinking, Claude thinks once at the start of the assistant turn"). A loop that contains a
  compaction block is not checked.
"""

from __future__ import annotations

from typing import Any

from .cache import MAX_BREAKPOINTS, explicit_breakpoint_count
from .compaction import COMPACTION_BETAS, leading_compaction
from .errors import bad_request
from .prompt import THINKING_TYPES, blocks_of
from .signing import BINDING_BETA

KNOWN_PARAMS = frozenset({
    "billing_policy", "cache_control", "compaction", "container", "context_management", "diagnostics",
    "fallback_credit_token", "fallbacks", "inference_geo", "max_tokens", "mcp_servers", "messages", "metadata",
    "model", "output_config", "output_format", "service_tier", "speed", "stop_sequences", "stream", "system",
    "temperature", "thinking", "thread", "tool_choice", "tools", "top_k", "top_p",
})

# type -> (required fields, optional fields or None when extra fields are not checked)
BLOCKS: dict[str, tuple[frozenset[str], frozenset[str] | None]] = {
    "text": (frozenset({"text"}), frozenset({"cache_control", "citations"})),
    "image": (frozenset({"source"}), None),
    "document": (frozenset({"source"}), None),
    "search_result": (frozenset({"content", "source", "title"}), None),
    "thinking": (frozenset({"thinking", "signature"}), frozenset()),
    "redacted_thinking": (frozenset({"data"}), frozenset()),
    "tool_use": (frozenset({"id", "input", "name"}), frozenset({"cache_control", "caller", "toolset_name"})),
    "tool_result": (frozenset({"tool_use_id"}), frozenset({"cache_control", "content", "is_error", "toolset_name"})),
    "server_tool_use": (frozenset({"id", "input", "name"}), None),
    "web_search_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "web_fetch_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "advisor_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "code_execution_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "bash_code_execution_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "text_editor_code_execution_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "tool_search_tool_result": (frozenset({"content", "tool_use_id"}), None),
    "mcp_tool_use": (frozenset({"id", "input", "name", "server_name"}), None),
    "mcp_tool_result": (frozenset({"tool_use_id"}), None),
    "container_upload": (frozenset({"file_id"}), None),
    "compaction": (frozenset(), frozenset({"cache_control", "content", "encrypted_content", "signature", "tool_changes"})),
    "tool_addition": (frozenset({"tool"}), None),
    "tool_removal": (frozenset({"tool"}), None),
    "mcp_tool_listing": (frozenset({"mcp_server_name", "tools"}), None),
    "fallback": (frozenset({"from"}), None),
}
SYSTEM_MESSAGE_BLOCKS = frozenset({"text", "tool_addition", "tool_removal"})
ASSISTANT_ONLY = THINKING_TYPES | {"tool_use", "server_tool_use", "mcp_tool_use"}
USER_ONLY = frozenset({"tool_result", "image", "document"})
THINKING_MODES = ("enabled", "adaptive", "disabled", "between_tools")


def thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def drop_requested(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, dict) else None
    return isinstance(binding, dict) and binding.get("prefix_mismatch_behavior") == "drop_block"


def validate(body: Any, betas: set[str]) -> None:
    """Refuse a request whose shape the API refuses (see the module rules)."""
    if not isinstance(body, dict):
        raise bad_request("The request body is not a JSON object")
    for key in body:
        if key not in KNOWN_PARAMS:
            raise bad_request(f"{key}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise bad_request("model: Field required")
    max_tokens = body.get("max_tokens")
    if "max_tokens" not in body:
        raise bad_request("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise bad_request("max_tokens: Input should be a valid integer")
    if max_tokens < 0:
        raise bad_request("max_tokens: Input should be greater than or equal to 0")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise bad_request("stream: Input should be a valid boolean")
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise bad_request("messages: Field required" if messages is None else "messages: Input should be a valid list")
    if not messages:
        if "compaction" in body:
            raise bad_request("messages: There is nothing to summarize: send at least one `user` or `assistant` message.",
                              error_code="compaction_nothing_to_summarize")
        raise bad_request("messages: List should have at least 1 item after validation, not 0")
    _validate_thinking(body, betas)
    _validate_system_and_tools(body)
    _validate_messages(messages, betas)
    found = explicit_breakpoint_count(body)
    if found > MAX_BREAKPOINTS:
        raise bad_request(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}.")
    _validate_roles(messages)
    _validate_tool_pairing(messages)
    if thinking_on(body):
        _validate_tool_loop_thinking(messages)
    if max_tokens == 0:
        _validate_prewarm(body)


def _validate_thinking(body: dict[str, Any], betas: set[str]) -> None:
    thinking = body.get("thinking")
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in THINKING_MODES:
        raise bad_request("thinking.type: Input should be 'enabled', 'adaptive', 'disabled' or 'between_tools'")
    kind = thinking["type"]
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool):
            raise bad_request("thinking.enabled.budget_tokens: Field required")
        if budget < 1024:
            raise bad_request("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if body["max_tokens"] and budget >= body["max_tokens"]:
            raise bad_request("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation "
                              "at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
    if "block_binding" in thinking and thinking["block_binding"] is not None:
        if BINDING_BETA not in betas:
            raise bad_request(f"thinking.{kind}.block_binding: Extra inputs are not permitted")
        binding = thinking["block_binding"]
        behavior = binding.get("prefix_mismatch_behavior") if isinstance(binding, dict) else "?"
        if behavior not in (None, "error", "drop_block"):
            raise bad_request(f"thinking.{kind}.block_binding.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'")


def _validate_cache_control(value: Any, path: str) -> None:
    control = value.get("cache_control") if isinstance(value, dict) else None
    if control is None:
        return
    where = f"{path}.cache_control" if path else "cache_control"
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise bad_request(f"{where}.type: Input should be 'ephemeral'")
    if control.get("ttl") not in (None, "5m", "1h"):
        raise bad_request(f"{where}.ttl: Input should be '5m' or '1h'")


def _validate_system_and_tools(body: dict[str, Any]) -> None:
    _validate_cache_control(body, "")  # the top-level (automatic) breakpoint
    system = body.get("system")
    if system is not None and not isinstance(system, (str, list)):
        raise bad_request("system: Input should be a valid string or a list of text blocks")
    for s, block in enumerate(blocks_of(system)):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise bad_request(f"system.{s}: Input should be a text block")
        _text_present(block, "system")
        _validate_cache_control(block, f"system.{s}")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise bad_request("tools: Input should be a valid list")
    names: set[str] = set()
    for t, tool in enumerate(tools or []):
        if not isinstance(tool, dict):
            raise bad_request(f"tools.{t}: Input should be a valid dictionary")
        _validate_cache_control(tool, f"tools.{t}")
        name = tool.get("name")
        if tool.get("type") in (None, "custom"):
            if not isinstance(name, str) or not name:
                raise bad_request(f"tools.{t}.custom.name: Field required")
            if not isinstance(tool.get("input_schema"), dict):
                raise bad_request(f"tools.{t}.custom.input_schema: Field required")
        if isinstance(name, str):
            if name in names:
                raise bad_request("tools: Tool names must be unique.")
            names.add(name)


def _text_present(block: dict[str, Any], where: str) -> None:
    text = block.get("text")
    if text == "":
        raise bad_request(f"{where}: text content blocks must be non-empty")
    if isinstance(text, str) and not text.strip():
        raise bad_request(f"{where}: text content blocks must contain non-whitespace text")


def _validate_messages(messages: list[Any], betas: set[str]) -> None:
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise bad_request(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise bad_request(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise bad_request(f"messages.{i}.content: Field required" if content is None else
                              f"messages.{i}.content: Input should be a valid string or list")
        if not blocks_of(content) and not (role == "assistant" and i == last) and not (role == "system" and message.get("output_config")):
            raise bad_request(f"messages.{i}: all messages must have non-empty content except for the optional final "
                              "assistant message")
        for j, block in enumerate(blocks_of(content)):
            _validate_block(block, f"messages.{i}.content.{j}", role, betas)


def _validate_block(block: Any, path: str, role: str, betas: set[str]) -> None:
    if not isinstance(block, dict):
        raise bad_request(f"{path}: Input should be a valid dictionary")
    kind = block.get("type")
    known = set(BLOCKS) if betas & COMPACTION_BETAS else set(BLOCKS) - {"compaction"}
    if role == "system":
        known &= SYSTEM_MESSAGE_BLOCKS
    if kind not in known:
        expected = ", ".join(f"'{k}'" for k in sorted(known))
        raise bad_request(f"{path}: Input tag '{kind}' found using 'type' does not match any of the expected tags: {expected}")
    required, optional = BLOCKS[kind]
    for name in sorted(required):
        if name not in block:
            raise bad_request(f"{path}.{kind}.{name}: Field required")
    if optional is not None:
        for name in sorted(block):
            if name != "type" and name not in required and name not in optional:
                raise bad_request(f"{path}.{kind}.{name}: Extra inputs are not permitted")
    if kind == "text":
        if not isinstance(block["text"], str):
            raise bad_request(f"{path}.text.text: Input should be a valid string")
        _text_present(block, "messages")
    if kind == "thinking" and not isinstance(block.get("thinking"), str):
        raise bad_request(f"{path}.thinking.thinking: Input should be a valid string")
    if kind in ASSISTANT_ONLY and role != "assistant":
        raise bad_request(f"{path}: `{kind}` blocks can only be in `assistant` messages")
    if kind in USER_ONLY and role != "user":
        raise bad_request(f"{path}: `{kind}` blocks can only be in `user` messages")
    _validate_cache_control(block, path)
    if kind == "tool_result" and isinstance(block.get("content"), list):
        for k, inner in enumerate(block["content"]):
            _validate_cache_control(inner, f"{path}.content.{k}")


def _validate_roles(messages: list[Any]) -> None:
    if messages[0].get("role") == "system":
        raise bad_request("messages.0: a `system` message cannot be the first message; use the top-level `system` "
                          "parameter")
    exempt = leading_compaction(messages[0])
    if messages[0].get("role") != "user" and not exempt:
        raise bad_request('messages: first message must use the "user" role')
    previous: str | None = None
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "system":
            continue
        if role == previous and not (exempt and i == 1):
            raise bad_request(f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" '
                              "roles in a row")
        previous = role


def _ids(message: Any, kind: str, key: str) -> list[str]:
    if not isinstance(message, dict):
        return []
    return [b.get(key) for b in blocks_of(message.get("content")) if isinstance(b, dict) and b.get("type") == kind]


def _validate_tool_pairing(messages: list[Any]) -> None:
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            asked = _ids(message, "tool_use", "id")
            if not asked:
                continue
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = _ids(following, "tool_result", "tool_use_id") if following and following.get("role") == "user" else []
            missing = [tool_id for tool_id in asked if tool_id not in answered]
            if missing:
                raise bad_request(f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                                  f"{', '.join(map(str, missing))}. Each `tool_use` block must have a corresponding "
                                  "`tool_result` block in the next message.")
            blocks = blocks_of(following.get("content"))
            leading = 0
            while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                leading += 1
            if leading < len(asked):
                raise bad_request(f"messages.{i + 1}: Did not find {len(asked)} `tool_result` block(s) at the beginning of this "
                                  "message. Messages following `tool_use` blocks must begin with a matching number of "
                                  "`tool_result` blocks.")
        elif role == "user":
            previous = messages[i - 1] if i > 0 else None
            asked = _ids(previous, "tool_use", "id") if previous and previous.get("role") == "assistant" else []
            for j, block in enumerate(blocks_of(message.get("content"))):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                    raise bad_request(f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                                      f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                                      "`tool_use` block in the previous message.")


def _only_tool_results(message: dict[str, Any]) -> bool:
    blocks = blocks_of(message.get("content"))
    return bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)


def _validate_tool_loop_thinking(messages: list[Any]) -> None:
    turn = [m for m in messages if m.get("role") != "system"]
    indexes = [i for i, m in enumerate(messages) if m.get("role") != "system"]
    if not turn or turn[-1].get("role") != "user" or not _only_tool_results(turn[-1]):
        return
    k = len(turn) - 1  # walk back over (assistant with tool_use, user of tool results) pairs
    opener = None
    while k >= 1 and turn[k].get("role") == "user" and _only_tool_results(turn[k]) and turn[k - 1].get("role") == "assistant":
        opener = k - 1
        k -= 2
    if opener is None:
        return
    loop = turn[opener:]
    if any(isinstance(b, dict) and b.get("type") == "compaction" for m in loop for b in blocks_of(m.get("content"))):
        return
    blocks = blocks_of(turn[opener].get("content"))
    first = blocks[0].get("type") if blocks else None
    if first not in THINKING_TYPES:
        raise bad_request(
            f"messages.{indexes[opener]}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
            "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
            "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
            "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def _validate_prewarm(body: dict[str, Any]) -> None:
    if (body.get("thinking") or {}).get("type") == "enabled":
        raise bad_request("max_tokens: 0 cannot be combined with extended thinking (`thinking.type: \"enabled\"`)")
    if (body.get("output_config") or {}).get("format") is not None:
        raise bad_request("max_tokens: 0 cannot be combined with `output_config.format`")
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise bad_request("max_tokens: 0 cannot be combined with a `tool_choice` of type `any` or `tool`")
