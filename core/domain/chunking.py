"""Splitting documents into passages small enough to embed well."""

from __future__ import annotations

import re

#: all-MiniLM-L6-v2 reads 256 word pieces, roughly 1,000 characters of English.
DEFAULT_CHUNK_CHARS = 1_000
DEFAULT_OVERLAP_CHARS = 150
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"(?<=[.!?])\s+"), re.compile(r"\s+"))


def chunk_text(text: str, max_chars: int = DEFAULT_CHUNK_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """Passages of at most `max_chars`, cut at paragraph, then sentence, then word boundaries.

    Consecutive passages share up to `overlap` characters so a fact split by a cut is still whole in one.
    """
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + max_chars, len(text))
        if end < len(text):
            end = _best_cut(text, start, end)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        next_start = max(end - overlap, start + 1)
        # Start the overlap at a word boundary so no passage begins mid-word.
        space = text.find(" ", next_start, end)
        start = space + 1 if space != -1 else end
    return chunks


def _best_cut(text: str, start: int, end: int) -> int:
    window = text[start:end]
    for pattern in _BREAKS:
        cuts = [m.end() for m in pattern.finditer(window) if m.end() > len(window) // 2]
        if cuts:
            return start + cuts[-1]
    return end
