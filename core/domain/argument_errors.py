"""A tool's arguments refused by their validation, in words a model or a person can act on: one short line per
field as the schema names it ("new_name: must not be empty", "nodes[0].observations[1]: must not contain control
characters") instead of pydantic's dump (its type codes, echoed input and links). The MCP
tools answer with it (core/mcp/server.py), the web page shows it (core/ui/app.py), and import words a refused line
with it (core/files/import_.py): in the domain, as every layer above may use it."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


def validation_cause(exc: BaseException) -> ValidationError | None:
    """The ValidationError `exc` was raised from (the SDK and the tools wrap it), or None."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ValidationError):
        cause = cause.__cause__
    return cause


def readable(exc: ValidationError) -> str:
    """The reasons of `exc`, one line per field, joined with "; "."""
    lines: list[str] = []
    members: dict[tuple, Any] = {}
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        # A union's members (capitalised model names in loc) each refuse it: say only the first one's reasons.
        split = next((i for i, part in enumerate(loc) if isinstance(part, str) and part[:1].isupper()), None)
        if split is not None and members.setdefault(loc[:split], loc[split]) != loc[split]:
            continue
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                        for i, part in enumerate(loc) if i != split).lstrip(".")
        line = f"{where}: {_said(error)}" if where else _said(error)
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)


def _said(error: Any) -> str:
    """One validation error's reason, in a person's words."""
    kind, limits, given = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "string_too_short":
        return "must not be empty" if limits.get("min_length") == 1 else f"needs at least {limits['min_length']} characters"
    if kind == "string_too_long":
        has = f" (this one has {len(given):,})" if isinstance(given, str) else ""
        return f"may have at most {limits['max_length']:,} characters{has}"
    if kind == "too_short":
        return f"needs at least {limits['min_length']:,} item{'s' if limits['min_length'] != 1 else ''}"
    if kind == "too_long":
        return f"may have at most {limits['max_length']:,} items"
    bounds = {"greater_than_equal": ("ge", "at least"), "less_than_equal": ("le", "at most"),
              "greater_than": ("gt", "more than"), "less_than": ("lt", "less than")}
    if kind in bounds:
        key, words = bounds[kind]
        return f"must be {words} {limits[key]}"
    if kind == "value_error" and "error" in limits:
        return str(limits["error"])  # the validator's own sentence, without pydantic's "Value error, "
    return {"missing": "is required", "extra_forbidden": "is not taken here", "dict_type": "must be a JSON object",
            "list_type": "must be a list"}.get(kind, error["msg"][:1].lower() + error["msg"][1:])
