"""Compact text renderings for an LLM, kept within a token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from duckgraph.core.domain.model import SearchResult

#: A rough, model-independent estimate: English averages about four characters per token.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def render_search(result: SearchResult, token_budget: int) -> tuple[str, bool]:
    """Entities, relations and passages, most relevant first, cut at whole lines to fit `token_budget`."""
    lines: list[str] = []
    if result.anchors:
        lines.append("Anchors: " + "; ".join(f"{a.name} [{a.type}]" for a in result.anchors))
    if result.nodes:
        lines.append("Entities:")
        lines += [f"- {n.name} [{n.type}]" + (f": {n.description}" if n.description else "") for n in result.nodes]
    if result.edges:
        lines.append("Relations:")
        lines += [f"- {e.source} -{e.type}-> {e.target}" + (f" ({e.description})" if e.description else "")
                  for e in result.edges]
    if result.passages:
        lines.append("Passages:")
        lines += [f"[{p.document_id}#{p.chunk_id}] " + " ".join(p.text.split()) for p in result.passages]
    if not lines:
        return "No matching entities or passages.", False
    kept: list[str] = []
    used = 0
    budget = max(token_budget, 1)
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            room = (budget - used - 8) * CHARS_PER_TOKEN
            if room > 80:
                kept.append(line[:room].rstrip() + "…")
            kept.append(f"(truncated to about {token_budget} tokens)")
            return "\n".join(kept), True
        kept.append(line)
        used += cost
    return "\n".join(kept), False
