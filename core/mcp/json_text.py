"""JSON text as clients send it, read the same way by every transport: a lone UTF-16 surrogate escape ("\\ud83d",
what a JavaScript client sends when it cuts a text inside an emoji) becomes U+FFFD, as bytes that are not UTF-8
do, and the request runs. The MCP SDK's parser (pydantic's) refuses both with a parse error. JSON that is no
JSON-RPC 2.0 message gets the same answer on both transports (`refusal`)."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.types import INVALID_PARAMS, INVALID_REQUEST, jsonrpc_message_adapter
from pydantic import ValidationError

_SURROGATE = re.compile("[\ud800-\udfff]")
#: An escape of a surrogate (a pair or a lone one): only a text holding one is parsed again to mend it.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def without_lone_surrogates(text: str) -> str | None:
    """The JSON text with every lone surrogate replaced by U+FFFD, or None when it holds none (or is no JSON).

    Python's json module accepts lone surrogate escapes (pydantic's parser does not) and pairs the valid ones,
    so any surrogate left in a parsed string is a lone one."""
    try:
        value = json.loads(text)
        found: list[bool] = []
        mended = _mend(value, found)
    except (ValueError, RecursionError):
        return None
    return json.dumps(mended, ensure_ascii=False) if found else None


#: The answer's message for a request whose id is neither a string nor an integer.
BAD_ID = 'Invalid request: "id" must be a string or an integer (null, fractions, booleans, objects and arrays are not)'


def has_bad_id(message: Any) -> bool:
    """Whether a parsed message (or one of a batch) is a request whose "id" is no string or integer: null, 1.5,
    true, an object. The SDK takes such a request for a notification (a message without an id), runs nothing and
    answers nothing, so the client would wait for its timeout."""
    if isinstance(message, list):
        return any(has_bad_id(item) for item in message)
    return (isinstance(message, dict) and "method" in message and "id" in message
            and (isinstance(message["id"], bool) or not isinstance(message["id"], str | int)))


#: The answer's message for valid JSON that is no JSON-RPC 2.0 message (a batch, "jsonrpc": "1.0", a missing member).
NOT_JSON_RPC = ('Invalid request: a JSON-RPC 2.0 message is one JSON object with "jsonrpc": "2.0", a "method" '
                '(string), an "id" (string or integer) for a request, and "params" (object) when it has any')


def refusal(message: Any) -> tuple[int, str] | None:
    """The code and text of the error that answers a parsed message, or None when it is a valid JSON-RPC 2.0
    message. Over HTTP the SDK would answer with its validation dump (and -32602 where stdio says -32600), or
    take a request with a bad id for a notification (see `has_bad_id`)."""
    if has_bad_id(message):
        return INVALID_REQUEST, BAD_ID
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return not_a_message(message)
    return None


def not_a_message(value: Any) -> tuple[int, str]:
    """The code and text of the error that answers valid JSON that is no JSON-RPC 2.0 message: params that are not
    an object are invalid params, anything else an invalid request."""
    if (isinstance(value, dict) and value.get("jsonrpc") == "2.0" and isinstance(value.get("method"), str)
            and "params" in value and not isinstance(value["params"], dict)):
        kind = type(value["params"]).__name__.replace("str", "string").replace("NoneType", "null")
        return INVALID_PARAMS, f'Invalid params: "params" must be a JSON object, not a {kind}'
    return INVALID_REQUEST, NOT_JSON_RPC


def request_id(message: Any) -> str | int | None:
    """The "id" of a parsed message when it is one a client can match (a string or an integer), else None."""
    return valid_id(message.get("id")) if isinstance(message, dict) else None


def valid_id(value: Any) -> str | int | None:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def mended_body(body: bytes) -> bytes | None:
    """A request body as the stdio transport reads a line (bytes that are not UTF-8 and lone surrogates become
    U+FFFD), or None when it needs no mending."""
    try:
        text, changed = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, changed = body.decode("utf-8", errors="replace"), True
    if _SURROGATE_ESCAPE.search(text) and (mended := without_lone_surrogates(text)) is not None:
        text, changed = mended, True
    return text.encode("utf-8") if changed else None


def _mend(value: Any, found: list[bool]) -> Any:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            found.append(True)
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, list):
        return [_mend(item, found) for item in value]
    if isinstance(value, dict):
        return {_mend(key, found): _mend(item, found) for key, item in value.items()}
    return value
