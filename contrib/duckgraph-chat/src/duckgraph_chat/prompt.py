"""The system prompt: search memory before answering, store what is learned; seeded by what the server says."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SYSTEM_PROMPT = """\
You are a helpful assistant with a long-term memory that you reach through tools.
- Before you answer, search your memory for what it holds about the question, even when you think you know.
- When the user tells you something worth keeping (facts about people, places, projects, preferences,
  decisions), store it in memory right away, with specific types and relations.
- Call one tool at a time, with arguments that match its parameters exactly. When a tool answers with an
  error, read it, fix the call and try again.
- Answer from what memory returned, and say so when it holds nothing relevant.
"""

#: The server's own prompt for storing knowledge, used when it offers one.
SEED_PROMPT = "extract_knowledge"


async def system_prompt(client: Any, trace: Callable[[str], None]) -> str:
    """The bridge's rules, the server's instructions, and its extract_knowledge guide when it has one."""
    parts = [SYSTEM_PROMPT]
    if client.instructions:
        parts.append(f"About the memory tools:\n{client.instructions.strip()}")
    if seed := await _seed(client, trace):
        parts.append(f"When the user gives you a text to remember:\n{seed}")
    return "\n\n".join(parts)


async def _seed(client: Any, trace: Callable[[str], None]) -> str:
    """The server's extract_knowledge prompt, or "" when it has none (any MCP server may be the memory)."""
    if client.server_capabilities.prompts is None:
        return ""
    offered = next((p for p in (await client.list_prompts()).prompts if p.name == SEED_PROMPT), None)
    if offered is None:
        return ""
    # Only a prompt that needs no arguments can be taken as it is: another server's may want the text itself.
    if needed := [a.name for a in offered.arguments or [] if a.required]:
        trace(f"[not using the server's {SEED_PROMPT} prompt: it needs arguments ({', '.join(needed)})]")
        return ""
    seeded = await client.get_prompt(SEED_PROMPT, {})
    return "\n".join(getattr(m.content, "text", "") for m in seeded.messages).strip()
