"""JSON text as clients send it, read the same way by every transport: a lone UTF-16 surrogate escape ("\\ud83d",
what a JavaScript client sends when it cuts a text inside an emoji) becomes U+FFFD, as bytes that are not UTF-8
do, and the request runs. The MCP SDK's parser (pydantic's) refuses both with a parse error."""

from __future__ import annotations

import json
import re
from typing import Any

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
