"""Reading a stored document beyond the one passage a search shows: the `read_document` tool and `duckgraph
documents show`. Its passages come in document order, around one (a search's hit, named by its chunk_id: ids are
global, and an edited passage gets a new one, so a neighbour's id cannot be guessed) or from its start, each with
its place ("passage 12 of 101") and its section, within a token bound. Consecutive passages overlap (`chunk_text`):
each shown after another leaves out what it repeats of it, so that the text reads once. The answer says how to read on
or back, and, at the document's first or last passage, which document the text goes on from or in (the turn before
or after in a conversation kept one turn per document, the part before or after of a long file:
`GraphStore.adjacent_chunks`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from duckgraph.core.domain.chunking import TABLE_DELIMITER, keeps_lines
from duckgraph.core.domain.document_ids import as_stored
from duckgraph.core.domain.documents import not_found_hints
from duckgraph.core.domain.moments import short
from duckgraph.core.domain.render import CODE_LINE, cut_to_tokens, estimate_tokens, shown_id
from duckgraph.core.domain.search_options import TOOL_LIMITS
from duckgraph.ports import ChunkRecord, InvalidInputError, NotFoundError
from duckgraph.ports.text import DOCUMENT_ID_DELIMITERS, as_field, one_line

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import DocumentPassage, DocumentRead

#: The most an answer's text takes: a dozen passages of English, well under what hosts accept of a tool result.
READ_TOKENS = 4_000
#: Room kept in it for the header's words and the notes on how to read back and on.
_NOTE_TOKENS = 150
#: Passages shown before and after the one asked for (from the start: after the first) unless told otherwise.
BEFORE, AFTER = 2, 5
#: A document id given as a passage's whole header would be: "notes.md#57".
_WITH_CHUNK = re.compile(r"(.+)#(\d+)")

#: How to ask for more: (document id, chunk id or None for the document's start, the count to give 0: "before"
#: reads on from that passage, "after" reads back to it, None for neither) -> the words of the call.
ReadOn = Callable[[str, int | None, str | None], str]


def tool_call(document_id: str, chunk_id: int | None, zero: str | None) -> str:
    """`ReadOn` for the `read_document` tool."""
    arguments = [f"document_id={json.dumps(document_id, ensure_ascii=False)}"]
    arguments += [f"chunk_id={chunk_id}"] if chunk_id is not None else []
    arguments += [f"{zero}=0"] if zero else []
    return f"read_document({', '.join(arguments)})"


def read_document(kb: KnowledgeBase, document_id: str, namespace: str | None = None, *, chunk_id: int | None = None,
                  before: int = BEFORE, after: int = AFTER, read_on: ReadOn = tool_call,
                  name_other_namespaces: bool = False) -> DocumentRead:
    """The passages of `document_id` in `namespace` (default: the knowledge base's) from `before` passages ahead of
    the passage `chunk_id` (default: the first) to `after` past it, as many as fit READ_TOKENS, the asked-for one
    first. An id names the stored document as it does everywhere (its other Unicode form too); an unknown id, or a
    chunk_id that is not one of its passages, is refused with what to give instead. `read_on` words the notes on
    how to read on; `name_other_namespaces`: an id not found may be said to be another namespace's (only for the
    file's owner, the command line, as `delete_documents`)."""
    from duckgraph.core.domain.model import DocumentRead

    namespace = kb.resolve_namespace(namespace)
    for name, value in (("before", before), ("after", after)):
        low, high = TOOL_LIMITS["read_document"][name]
        if not low <= value <= high:
            raise InvalidInputError(f"{name} must be from {low} to {high}, not {value}")
    kb.open()
    store = kb.store
    stored = as_stored(store, [document_id], namespace, field="document_id").get(document_id, document_id)
    title = store.document_titles([stored], namespace).get(stored)
    if title is None:
        raise NotFoundError(_unknown_document(kb, document_id, namespace, name_other_namespaces))
    focus = 0 if chunk_id is None else _ordinal(kb, stored, chunk_id, namespace)
    start, stop = max(focus - before, 0), focus + after + 1
    # One passage more on each side: the ids to read back and on from.
    wider, total = store.document_chunk_window(namespace, stored, max(start - 1, 0), stop + 1)
    window = [c for c in wider if start <= c.ordinal < stop]
    shown, cut = _fit(window, focus, READ_TOKENS - _NOTE_TOKENS - estimate_tokens(stored + title))
    first, last = (shown[0], shown[-1]) if shown else (None, None)
    previous_id = next((c.id for c in wider if first and c.ordinal == first.ordinal - 1), None)
    next_id = next((c.id for c in wider if last and c.ordinal == last.ordinal + 1), None)
    # At the document's ends, the passage its text goes on from or in, in another document (or none).
    ends = store.adjacent_chunks([c.id for c in (first, last) if c is not None and c.ordinal in (0, total - 1)],
                                 namespace)
    before_it = ends[first.id][0] if first and first.ordinal == 0 and first.id in ends else None
    after_it = ends[last.id][1] if last and last.ordinal == total - 1 and last.id in ends else None
    documents = store.chunk_documents([i for i in (before_it, after_it) if i is not None])
    result = DocumentRead(
        document_id=stored, title=title, passages_total=total,
        time=store.chunk_times([first.id], namespace).get(first.id) if first else None,
        passages=[_passage(c, before, cut if c is first else None, kb.chunk_overlap)
                  for before, c in zip([None, *shown], shown)],
        previous_chunk_id=previous_id, next_chunk_id=next_id,
        previous_document=documents.get(before_it) if before_it is not None else None,
        previous_document_chunk_id=before_it if before_it in documents else None,
        next_document=documents.get(after_it) if after_it is not None else None,
        truncated=len(shown) < len(window) or cut is not None, text="")
    # Whether a passage is code is read from its whole text: the fence of its block may be in what it repeats.
    lines_kept = {c.id for c in shown if keeps_lines(stored, title, c.text)}
    result.text = _text(result, (window[0].ordinal + 1, window[-1].ordinal + 1) if window else (0, 0), lines_kept,
                        read_on)
    return result


def _ordinal(kb: KnowledgeBase, document_id: str, chunk_id: int, namespace: str) -> int:
    """The ordinal of the passage `chunk_id` of the document, or an error that says what to give instead."""
    store = kb.store
    # An id no store could hold (ids are 64-bit) names no passage either, as any other unknown one.
    chunk = next(iter(store.get_chunks([chunk_id])), None) if 0 <= chunk_id < 2**63 else None
    if chunk is not None:
        # get_chunks reads every namespace: the passage must be the one its document holds at its ordinal here.
        here, _ = store.document_chunk_window(namespace, chunk.document_id, chunk.ordinal, chunk.ordinal + 1)
        if here and here[0].id == chunk_id:
            if chunk.document_id == document_id:
                return chunk.ordinal
            raise InvalidInputError(
                f"chunk_id {chunk_id} is a passage of the document {chunk.document_id!r}, not of {document_id!r}: "
                f"give document_id {chunk.document_id!r} with it, or leave chunk_id out to read {document_id!r} from "
                "its start")
    raise NotFoundError(
        f"no passage has chunk_id {chunk_id} in the namespace {namespace!r}: give the number after '#' of a passage "
        f"as search shows it ([{document_id}#N] is chunk_id N); a passage edited since gets a new id, so search "
        f"again, or leave chunk_id out to read {document_id!r} from its start")


def _unknown_document(kb: KnowledgeBase, document_id: str, namespace: str, name_other_namespaces: bool) -> str:
    """Why `document_id` names no document: as delete_documents says it, or, for an id written as a passage's whole
    header ("notes.md#57") whose document is stored, which two arguments to give."""
    if (header := _WITH_CHUNK.fullmatch(document_id)) and kb.store.document_titles([header[1]], namespace):
        return (f"no document {document_id!r}: that is a passage's header [document_id#chunk_id]; give document_id "
                f"{header[1]!r} and chunk_id {header[2]}")
    [hint] = not_found_hints(kb, [document_id], namespace, any_found=False,
                             name_other_namespaces=name_other_namespaces, doing="read")
    return hint


def _fit(window: list[ChunkRecord], focus: int, room: int) -> tuple[list[ChunkRecord], int | None]:
    """The passages of `window` that fit `room` tokens, in order: the one at the `focus` ordinal (else the window's
    first), then those before it nearest first, then those after it, up to the first that does not fit. A focus
    passage that alone takes more than the room is cut to it; the second value is then its room, else None."""
    if not window:
        return [], None
    at = next((i for i, c in enumerate(window) if c.ordinal == focus), 0)
    used = _cost(window[at])
    if used > room:
        return [window[at]], room
    first, last = at, at
    for i in [*range(at - 1, -1, -1), *range(at + 1, len(window))]:
        used += _cost(window[i])
        if used > room:
            break
        first, last = min(first, i), max(last, i)
    return window[first:last + 1], None


def _cost(chunk: ChunkRecord) -> int:
    # Its header (id, place, section) takes some 20 tokens; the text as shown, whole.
    return estimate_tokens(chunk.section + chunk.text) + 20


def _passage(chunk: ChunkRecord, before: ChunkRecord | None, room: int | None, overlap: int) -> DocumentPassage:
    """`chunk` as shown after `before` (None: the first shown, whole), cut to `room` tokens if given."""
    from duckgraph.core.domain.model import DocumentPassage

    repeats = _repeats(before, chunk, overlap)
    text, section = chunk.text[repeats:], chunk.section
    if room is not None:
        # A heading longer than a quarter of the room is cut too: the text is what is read, and a heading of
        # thousands of words would leave it none and the answer past its bound.
        section = cut_to_tokens(section, room // 4)
        text = cut_to_tokens(text, room - 20 - estimate_tokens(section))
    return DocumentPassage(chunk_id=chunk.id, position=chunk.ordinal + 1, section=section, text=text,
                           repeats=repeats, cut=room is not None)


def _repeats(before: ChunkRecord | None, chunk: ChunkRecord, overlap: int) -> int:
    """How many characters at the start of `chunk`'s text repeat `before`, the passage shown before it, as
    `chunk_text` makes passages overlap: a table's header row and delimiter line, where `before` holds them too (a
    passage of the same table), then the longest start of the rest that `before` ends with, of at most `overlap`
    characters and from a word's start (where chunking starts one), with the line breaks after it. None from a
    passage of another section: a passage never spans two, so theirs never overlap."""
    if before is None or before.section != chunk.section:
        return 0
    previous, text = before.text, chunk.text
    lines = text.split("\n", 2)
    table = len(lines) == 3 and "|" in lines[0] and TABLE_DELIMITER.match(lines[1])
    head = f"{lines[0]}\n{lines[1]}\n" if table else ""
    skip = len(head) if head and (previous.startswith(head) or f"\n{head}" in previous) else 0
    rest = text[skip:]
    skip += next((len(previous) - i for i in range(max(len(previous) - overlap, 0), len(previous))
                  if (i == 0 or previous[i - 1].isspace()) and rest.startswith(previous[i:])), 0)
    if not skip:
        return 0
    # The line breaks between the repeated text and the new go with it; a code line's indentation stays.
    after = text[skip:]
    space = after[:len(after) - len(after.lstrip())]
    return skip + space.rfind("\n") + 1 if "\n" in space else skip + len(space)


def _text(read: DocumentRead, asked: tuple[int, int], lines_kept: set[int], read_on: ReadOn) -> str:
    """The answer as text: a header (id, title, time, which passages of how many), the passages, each with its id
    as search shows it, its place and (where it changes) its section, and how to read back and on. `asked`: the
    places of the first and last passage asked for; `lines_kept`: the ids of those that are code or configuration,
    shown line by line."""
    time = f" ({short(read.time)})" if read.time else ""
    title = f": {one_line(read.title)}" if read.title else ""
    head = f"Document {as_field(read.document_id, DOCUMENT_ID_DELIMITERS)}{title}{time}"
    if not read.passages:
        return f"{head}. It holds no passages."
    total, first, last = read.passages_total, read.passages[0].position, read.passages[-1].position
    which = f"passage {first} of {total}" if first == last else f"passages {first} to {last} of {total}"
    lines = [f"{head}. Shown: {which}."]
    bound = f" (an answer takes at most {READ_TOKENS:,} tokens)"
    if read.previous_chunk_id is not None:
        rest = "Passage 1 comes" if first == 2 else f"Passages 1 to {first - 1} come"
        lines.append(f"({rest} before{bound if first > asked[0] else ''}: read back with "
                     f"{read_on(read.document_id, read.previous_chunk_id, 'after')}.)")
    elif read.previous_document is not None:
        lines.append(f"(The text goes on from the document {as_field(read.previous_document, DOCUMENT_ID_DELIMITERS)}"
                     f": read its end with {read_on(read.previous_document, read.previous_document_chunk_id, 'after')}"
                     ".)")
    section = ""
    shown = shown_id(read.document_id)
    for passage in read.passages:
        named = f" § {one_line(passage.section)}" if passage.section and passage.section != section else ""
        section = passage.section
        cut = f" (cut short: alone it takes more than an answer's {READ_TOKENS:,} tokens)" if passage.cut else ""
        header = f"[{shown}#{passage.chunk_id}] passage {passage.position} of {total}{named}{cut}:"
        if passage.chunk_id in lines_kept:  # code or configuration: its lines kept
            lines.append(header + "".join(f"\n{CODE_LINE}{line}".rstrip() for line in passage.text.splitlines()))
        else:
            lines.append(f"{header} {one_line(passage.text)}")
    if read.next_chunk_id is not None:
        rest = f"Passage {total} follows" if last == total - 1 else f"Passages {last + 1} to {total} follow"
        lines.append(f"({rest}{bound if last < asked[1] else ''}: read on with "
                     f"{read_on(read.document_id, read.next_chunk_id, 'before')}.)")
    elif read.next_document is not None:
        lines.append(f"(The text goes on in the document {as_field(read.next_document, DOCUMENT_ID_DELIMITERS)}: "
                     f"{read_on(read.next_document, None, None)}.)")
    return "\n".join(lines)
