"""Compact text renderings for an LLM, kept within a token budget.

A search result is rendered by priority, not section by section: the lines are chosen most useful first (the
best facts, the anchors, the best passage, the anchors' details, more facts, more passages, the other entities,
their details, last the entities known only by a name that a fact already shows) until the budget is spent, so a
small budget cuts weak entities and late observations, never every fact. A passage or entity that does not fit
whole leaves out those ranked below it under its heading, and the room left goes to it, cut short; an entity's
detail (its properties, an observation) that does not fit leaves out its details ranked below it.
The chosen lines are then printed grouped under their headings, each group in rank order. When all of them fit,
the room left shows the passages ranked next, under a heading of their own, and last the communities of the anchors.
"""

from __future__ import annotations

import calendar
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from duckgraph.core.domain.chunking import keeps_lines
from duckgraph.core.domain.moments import period, short
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.ports.text import (
    FACT_NAME_DELIMITERS,
    KEY_DELIMITERS,
    VALUE_DELIMITERS,
    as_field,
    entity_header,
    joins_previous,
    one_line,
    shortened,
)

if TYPE_CHECKING:
    import numpy as np

    from duckgraph.core.domain.model import Passage, ScoredEdge, ScoredNode, SearchResult

#: A rough, model-independent estimate: English averages about four characters per token.
CHARS_PER_TOKEN = 4
#: What a character costs, in quarters of a token, by the first code point of each range (to the next one):
#: - 1 (four a token): the Latin script, digits, punctuation, symbols, combining marks; English as before.
#: - 2 (two a token): other alphabets (Greek, Cyrillic, Armenian, Hebrew, Arabic, the Indic scripts, Sinhala,
#:   Georgian, Ethiopic, Cherokee, Hebrew and Arabic presentation forms). A tokenizer's vocabulary holds fewer of
#:   their words than English ones: the MiniLM tokenizer measured 0.8 a letter on Russian, Greek, Arabic and
#:   Hebrew and 0.5 on Hindi; LLM tokenizers, trained on more of them, come nearer 0.3.
#: - 4 (one a token): scripts written without spaces between words (CJK ideographs and punctuation, kana, Thai,
#:   Lao, Tibetan, Myanmar, Khmer, Yi, full-width forms), Hangul jamo, and characters past the BMP (emoji): the
#:   MiniLM tokenizer measured 1.0 a character on Chinese and 0.86 on Japanese; LLM tokenizers come near one too.
#: - 6: Hangul syllables (the MiniLM tokenizer splits each into its jamo: 1.37 a syllable measured).
_COST_FROM = (
    (0x0000, 1), (0x0370, 2), (0x0E00, 4), (0x10A0, 2), (0x1100, 4), (0x1200, 2), (0x1400, 1), (0x1780, 4),
    (0x1800, 1), (0x1F00, 2), (0x2000, 1), (0x2E80, 4), (0xA4D0, 1), (0xA960, 4), (0xA980, 1), (0xAC00, 6),
    (0xD7A4, 4), (0xD800, 1), (0xF900, 4), (0xFB00, 1), (0xFB1D, 2), (0xFE00, 1), (0xFE30, 4), (0xFE50, 1),
    (0xFE70, 2), (0xFF00, 4), (0xFFF0, 1), (0x10000, 4),
)
#: The headings, in the order the groups are printed.
RELATIONS, ENTITIES, PASSAGES = "Relations:", "Entities:", "Passages:"
MORE_PASSAGES = "More passages, ranked lower:"
#: Longest description, fact, property list or observation shown on one line (the structured result has them all).
LINE_CHARS = 300
#: A passage or entity line that does not fit whole is shown cut when at least this much of its own text fits
#: (its header, the passage's id, date and title or the entity's name and type, aside): a header alone says nothing.
MIN_CUT_CHARS = 80
#: The delimiters of each place a stored text is printed in-line (`ports.text.as_field`: a text holding one is shown
#: as a JSON string; those of an entity's header, a property list and a fact are in `ports.text`, as the store's own
#: lines use them too). A passage's header "[document_id#chunk_id]": not "#", as the chunk id is the number after
#: the last one, and a long file's later parts are stored as "<path>#part-2" (core/domain/document_ids.py), shown bare.
_ID_DELIMITERS = ("[", "]")
#: What starts each line of a passage shown line by line (code or configuration, `chunking.keeps_lines`): its
#: indentation kept after it, and none of its lines reads as one of the text's own ("Relations:", "- Dave [person]").
CODE_LINE = "  | "
#: Room kept for the closing note when something is left out, at least (`_render` keeps the room of the longest one
#: its lines may need, which names the caller's budget and says that a larger one shows more).
NOTE_TOKENS = 30
#: The most entities whose facts `max_nodes` cut short, or whose observations the result lists in part, the text
#: names (`_left_out`; the structured result has all).
NAMED_LISTS = 3
#: Facts shown before the anchors, and before the best passage: what answers a question is usually a fact.
FIRST_FACTS = 3
#: Facts and passages shown before the other entities.
EARLY_FACTS = 10
EARLY_PASSAGES = 3
#: Detail lines of an entity (its properties, then its most relevant observations) shown with it; the rest last.
FIRST_DETAILS = 3
EMPTY = "No matching entities or passages."
#: A question about what changed ("What changed last week?") is about writes, not about what they hold: its words
#: are close to nothing stored, and recent_changes answers it (search and recent_changes are served together).
NOTHING_RELEVANT = ("Nothing relevant to this query is stored in memory: no entity, fact or passage is close "
                    "enough to it. For what changed recently, call recent_changes; else say that you do not know, "
                    "or store what you learn about it.")
#: NOTHING_RELEVANT when the time window searched (after, before) holds no passage: nothing is recorded for that
#: period, which says nothing of whether the memory knows the topic.
NOTHING_IN_WINDOW = ("Nothing stored is timed in the window searched ({window}): no passage's document time falls in "
                     "it, and no entity or fact is close enough to the query. Say that nothing is recorded for that "
                     "period, not that you do not know the topic; a search without after and before finds what is "
                     "stored of it at other times.")


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` takes: a quarter a character of English, more for other scripts
    (`_COST_FROM`). It runs on every line rendered: ASCII text (most of it) is counted by its length alone, other
    text by one lookup of all its code points at once."""
    return -(-_quarters(text) // CHARS_PER_TOKEN)


def _quarters(text: str) -> int:
    return len(text) if text.isascii() else int(_costs(text).sum())


def _costs(text: str) -> np.ndarray:
    """The cost of each character of `text`, in quarters of a token."""
    import numpy as np  # not at import: the server imports this module at start, before anything needs numpy

    starts, costs = _cost_table()
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return costs[np.searchsorted(starts, points, side="right") - 1]


@cache
def _cost_table() -> tuple[np.ndarray, np.ndarray]:
    """`_COST_FROM` as arrays: the first code point of each range, and its cost."""
    import numpy as np  # see _costs

    return (np.array([start for start, _ in _COST_FROM], dtype=np.uint32),
            np.array([cost for _, cost in _COST_FROM], dtype=np.int64))


def cut_to_tokens(text: str, tokens: int, spare: int = 0) -> str:
    """`text` cut short between words (`shortened`, with "…") so that it takes at most `tokens` by
    `estimate_tokens`, less `spare` quarters of a token; whole when it fits."""
    room = tokens * CHARS_PER_TOKEN - spare  # in quarters of a token
    if text.isascii():
        return shortened(text, max(room, 0))  # characters, the "…" (a quarter) included
    import numpy as np  # see _costs

    costs = _costs(text)
    if costs.sum() <= room:
        return text
    # The characters whose costs, added up, leave a quarter for the "…"; one less when `shortened` would keep
    # the text whole (it does at `limit` characters).
    limit = int(np.searchsorted(np.cumsum(costs), room - 1, side="right")) + 1
    limit = min(limit, len(text) - 1)
    cut = shortened(text, max(limit, 0))
    # `shortened` goes back to the last space, but Chinese or Japanese has none: the header's would leave no text.
    # Such a script breaks between any two of its characters, so the latest such break past that space is taken.
    for end in range(limit - 1, len(cut) - 1, -1):
        if _breaks_before(text, end, costs):
            return text[:end].rstrip() + "…"
    return cut


def _breaks_before(text: str, i: int, costs: np.ndarray) -> bool:
    """Whether a line may be cut before `text[i]`: next to a character of a script written without spaces (one
    of a token or more, by `costs`), and not inside what reads as one character (a base and its combining marks,
    an emoji sequence joined by U+200D, a variation selector or skin tone, a Hangul syllable written as jamo)."""
    if not 0 < i < len(text) or joins_previous(text, i):
        return False
    return max(costs[i - 1], costs[i]) >= CHARS_PER_TOKEN


@dataclass(eq=False)
class _Line:
    heading: str
    position: tuple[int, int]  # where it prints within its group
    text: str
    kind: str  # what the closing note counts it as
    owner: _Line | None = None  # the entity line it belongs under: shown only with it
    head: int | None = None  # a line that may be cut: the length of its header, which is not its own text


def render_search(result: SearchResult, token_budget: int, more: Sequence[Passage] = (), *, hint: str | None = None,
                  communities: str = "", set_aside: int = 0) -> tuple[str, bool]:
    """The result as grouped lines, the most useful kept first within `token_budget`; and whether some were
    left out or cut. When the whole result fits, the room left shows the passages ranked next (`more`, best
    first, under their own heading; the last one perhaps cut short): the budget is the host's, and the answer to
    a multi-hop question is often a few ranks down. Leaving them out is no truncation: they are extra.

    `hint` (which tool answers such a question better, or that the namespace holds nothing) closes the text when
    it takes at most half the budget, or when nothing else is shown: its room is set aside first, as it tells the
    model what to call instead. `communities` (the line naming the anchors' communities, which the structured
    result holds too) comes last, after the notes on what was left out and before `hint`: shown only in the room
    everything else, the passages ranked next included, leaves; leaving it out is no truncation either.
    `set_aside`: the tokens of the caller's own lines around the text, taken from `token_budget`, which the closing
    note names all the same (it is the budget the caller asked for)."""
    stated, token_budget = token_budget, max(token_budget - set_aside, 1)
    alone = result.nothing_relevant or not (result.nodes or result.edges or result.passages)
    closing = f"\n{hint}" if hint and (alone or _cost(hint) <= max(token_budget, 1) // 2) else ""
    # What the search itself left out (`_left_out`) is said with its room set aside too, while the notes take at
    # most half the budget: a list shown in part reads as whole.
    notes = ""
    for note in _left_out(result):
        if _cost(notes + closing) + _cost(note) <= max(token_budget, 1) // 2:
            notes += f"\n{note}"
    text, truncated, room = _render(result, max(token_budget - estimate_tokens(notes + closing), 1), more, stated)
    # The communities line stays last but for the closing hint: after the notes on what was left out.
    shown = f"\n{communities}" if communities and _cost(communities) <= room else ""
    return text + notes + shown + closing, truncated


def _render(result: SearchResult, budget: int, more: Sequence[Passage], token_budget: int) -> tuple[str, bool, int]:
    """The text within `budget`, whether some was left out or cut, and the room left (none when some was)."""
    if result.nothing_relevant:
        text = NOTHING_IN_WINDOW.format(window=result.empty_window) if result.empty_window else NOTHING_RELEVANT
        return text, False, 0
    lines = _by_priority(result)
    if not lines:
        return EMPTY, False, 0
    if sum(_cost(line.text) for line in lines) + sum(_cost(h) for h in {line.heading for line in lines}) <= budget:
        extra = [_passage_line(MORE_PASSAGES, i, p) for i, p in enumerate(more)]
        kept, used = _fit([*lines, *extra], budget)
        return _printed(kept), False, budget - used
    # The room of the longest note these lines may need (each count at most all of its kind), so that what is left
    # out is said with the budget and the advice a larger one shows more, not in the short form that lacks them.
    longest = _notes(token_budget, Counter(line.kind for line in lines))[0]
    kept, used = _fit(lines, max(budget - max(_cost(longest), NOTE_TOKENS), 0))
    left_out = Counter(line.kind for line in lines if line not in kept)
    # What was left out is said in as many words as fit: a small budget still learns how much it missed.
    notes = _notes(token_budget, left_out)
    note = next((note for note in notes if _cost(note) <= budget - used), notes[-1])
    return _printed(kept) + ("\n" if kept else "") + note, True, 0


def _cost(text: str) -> int:
    return estimate_tokens(text) + 1  # and its line break


def _by_priority(result: SearchResult) -> list[_Line]:
    """Every line the result could show, the most useful first."""
    anchor_ids = {a.id for a in result.anchors}
    facts = [_Line(RELATIONS, (i, 0), "- " + _fact(e), "relations") for i, e in enumerate(result.edges)]
    passages = [_passage_line(PASSAGES, i, p) for i, p in enumerate(result.passages)]
    entities, details = [], []
    for i, node in enumerate(result.nodes):
        head, text = _entity(node)
        entities.append(_Line(ENTITIES, (i, 0), head + text, "entities", head=len(head)))
        details.append([_Line(ENTITIES, (i, j), text, kind, owner=entities[-1])
                        for j, (text, kind) in enumerate(_details(node), start=1)])
    anchors = [i for i, node in enumerate(result.nodes) if node.id in anchor_ids]
    # An entity known by nothing but its name, which a fact shown names, adds only its type: it comes last.
    in_facts = {name for edge in result.edges for name in (edge.source, edge.target)}
    bare = [i for i, node in enumerate(result.nodes) if node.id not in anchor_ids and node.name in in_facts
            and not (node.description or node.properties or node.observations)]
    others = [i for i, node in enumerate(result.nodes) if node.id not in anchor_ids and i not in bare]
    return [
        *facts[:FIRST_FACTS],
        *(entities[i] for i in anchors),
        *passages[:1],
        *(line for i in anchors for line in details[i][:FIRST_DETAILS]),
        *facts[FIRST_FACTS:EARLY_FACTS],
        *passages[1:EARLY_PASSAGES],
        *(entities[i] for i in others),
        *(line for i in others for line in details[i][:FIRST_DETAILS]),
        *facts[EARLY_FACTS:],
        *passages[EARLY_PASSAGES:],
        *(line for lines in details for line in lines[FIRST_DETAILS:]),
        *(entities[i] for i in bare),
    ]


def _fit(lines: list[_Line], budget: int) -> tuple[dict[_Line, str], int]:
    """The lines kept (each with its text) and the tokens they take with their headings: whole lines going down
    the priority order (one that does not fit is left out and the next ones are tried, but a passage or entity left
    out leaves out those ranked below it under its heading, and an entity's detail left out its details ranked
    below it: a weaker, shorter one never takes its room), then the room left goes to the first passage or entity
    left out, cut short: whole facts tell more than the rest of a passage. What a budget shows of a heading's
    passages, or of an entity's observations, is thus what a larger one shows, the last passage cut shorter."""
    kept: dict[_Line, str] = {}
    headings: set[str] = set()
    left_out: dict[str, _Line] = {}  # by heading, the first passage or entity that did not fit whole
    stopped: set[_Line] = set()  # the entities one of whose details did not fit
    used = 0

    def room(line: _Line) -> tuple[int, int]:
        heading = 0 if line.heading in headings else _cost(line.heading)
        return budget - used - heading, heading

    for cut in (False, True):
        for line in lines:
            if line in kept or (line.owner is not None and (line.owner not in kept or line.owner in stopped)):
                continue
            left, heading = room(line)
            text = line.text
            if cut:
                if line is not left_out.get(line.heading):
                    continue
                text = _cut(text, left - 1)
                if len(text) - 1 - line.head < MIN_CUT_CHARS:  # too little of its own text (… aside)
                    continue
            elif line.head is not None and line.heading in left_out:
                continue
            elif _cost(text) > left:
                if line.head is not None:
                    left_out[line.heading] = line
                elif line.owner is not None:
                    stopped.add(line.owner)
                continue
            kept[line] = text
            headings.add(line.heading)
            used += heading + _cost(text)
            if cut:
                break
    return kept, used


def _cut(text: str, tokens: int) -> str:
    """`text` cut short to fit `tokens` and its line break (`cut_to_tokens`). A cut inside a code line's indentation
    leaves its marker bare ("  |…"): the line before ends the text instead."""
    cut = cut_to_tokens(text, tokens, spare=1)
    bare = "\n" + CODE_LINE.rstrip() + "…"
    while cut.endswith(bare):
        cut = cut[: -len(bare)] + "…"
    return cut


def _printed(kept: dict[_Line, str]) -> str:
    out: list[str] = []
    for heading in (RELATIONS, ENTITIES, PASSAGES, MORE_PASSAGES):
        group = sorted((line for line in kept if line.heading == heading), key=lambda line: line.position)
        if group:
            out += [heading, *(kept[line] for line in group)]
    return "\n".join(out)


def _notes(token_budget: int, left_out: Counter[str]) -> list[str]:
    """The closing note, longest first: the caller's budget, what was left out and what to do about it; the last,
    a few tokens, is shown even where it does not fit."""
    parts = ", ".join(f"{left_out[kind]} {kind}" for kind in ("relations", "entities", "properties", "observations", "passages")
                      if left_out[kind])
    shown = f"; not shown: {parts}" if parts else ""
    notes = [f"(truncated to about {token_budget} tokens{shown}; a larger token_budget shows more)"]
    if parts:
        return [*notes, f"(truncated; not shown: {parts})", f"(truncated: {left_out.total()} more not shown)"]
    return [*notes, f"(truncated to about {token_budget} tokens)"]  # only cut short


def _left_out(result: SearchResult) -> list[str]:
    """The notes on what the search left out of the result, not the text (its `more_facts`, `type_count`,
    `chains_go_on`, `dates_not_applied` and the nodes' `observations_not_shown`), each one line and what to call
    for the rest."""
    notes = []
    if result.more_facts:
        lists = [f"{as_field(name, KEY_DELIMITERS)}: "
                 + ", ".join(f"{count} more {type_}" for type_, count in types.items()) + " facts"
                 for name, types in result.more_facts.items()]
        notes.append(f"(not shown, max_nodes reached: {_first_named(lists)}. get_entities lists an entity's facts; "
                     "a larger max_nodes shows more)")
    if count := result.type_count:
        how = (f"k_anchors={count.k_anchors} shows them all, with max_nodes at least {count.k_anchors}"
               if count.k_anchors else "more than a search shows")
        notes.append(f"({count.shown} of {count.stored} {count.type} entities shown: {how}; graph_stats counts each "
                     "type)")
    for chain in result.chains_go_on:
        ends = ", ".join(as_field(name, KEY_DELIMITERS) for name in chain.ends)
        notes.append(f"(not shown, hops reached: the {chain.type} chain from {as_field(chain.start, KEY_DELIMITERS)} "
                     f"goes on past {chain.past} hops, from {ends} to {chain.more} more "
                     f"{'entity' if chain.more == 1 else 'entities'}; "
                     + (f"hops={chain.hops} shows more)" if chain.hops else f"a search for {ends} shows more)"))
    if result.dates_not_applied:
        notes.append(f"(not applied as a time window: {', '.join(result.dates_not_applied)}; give after and before "
                     "(dates) to search that period only)")
    if capped := [node for node in result.nodes if node.observations_not_shown]:
        # A result lists an entity's most relevant observations only: the rest may hold what answers (a decision
        # replaced later, in words the query does not share).
        lists = [f"{as_field(node.name, KEY_DELIMITERS)}: {node.observations_not_shown} more" for node in capped]
        notes.append(f"(not shown, the observations least related to the query: {_first_named(lists)}. "
                     "get_entities lists all of an entity's observations)")
    return notes


def _first_named(lists: list[str]) -> str:
    """The first `NAMED_LISTS` of `lists` (one an entity, each naming it), and how many more entities have one."""
    others = len(lists) - NAMED_LISTS
    return "; ".join(lists[:NAMED_LISTS]) + (f"; those of {others} more entities" if others > 0 else "")


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    return shortened(one_line(text), limit)


def _fact(edge: ScoredEdge) -> str:
    """A fact's line: its sentence, its period and its properties, shown as an entity's are ("version: v2.4"):
    what a fact holds besides its ends is often the answer ("which version runs in production?")."""
    when = period(edge.valid_from, edge.valid_until)  # "since 2024-06-01", "2024-01-01 to 2024-06-01"
    sentence = _clip(shown_fact(edge.source, edge.type, edge.target, edge.description))
    return (sentence + (f" ({when})" if when else "")
            + (f"; properties: {_clip(_properties(edge.properties))}" if edge.properties else ""))


def _entity(node: ScoredNode) -> tuple[str, str]:
    """An entity's line: its header (name and type) and its description."""
    head = _clip(f"- {entity_header(node.name, node.type)}")
    return head, _clip(f": {node.description}", max(LINE_CHARS - len(head), 1)) if node.description else ""


def _details(node: ScoredNode) -> list[tuple[str, str]]:
    """An entity's detail lines (properties, then observations, most relevant first) and what each counts as."""
    lines = []
    if node.properties:
        lines.append(("  properties: " + _clip(_properties(node.properties)), "properties"))
    lines += [("  - " + _clip(text), "observations") for text in node.observations]
    return lines


def shown_fact(source: str, relation: str, target: str, description: str = "") -> str:
    """A fact's sentence as the texts show it (`texts.fact_sentence`, its names shown bare unless they hold a
    delimiter of a fact's line); the sentence a vector is computed from keeps them bare."""
    return fact_sentence(as_field(source, FACT_NAME_DELIMITERS), relation, as_field(target, FACT_NAME_DELIMITERS),
                         description)


def _properties(properties: dict) -> str:
    """Properties as "key: value; key: value" (strings bare unless they hold a delimiter there, other values as
    JSON)."""
    return "; ".join(f"{as_field(key, KEY_DELIMITERS)}: "
                     + (as_field(value, VALUE_DELIMITERS) if isinstance(value, str) else json.dumps(value))
                     for key, value in properties.items())


def _passage_line(heading: str, i: int, passage: Passage) -> _Line:
    head, text = _passage(passage)
    return _Line(heading, (i, 0), head + text, "passages", head=len(head))


def _passage(passage: Passage) -> tuple[str, str]:
    """A passage's header (id, the passages of the same text not shown again, date, title and section, each said
    once) and its text. The date is left out where the title gives it, the clock kept; a first heading that is
    the title, written with the date or without ("Architecture sync, 14 September 2026" under the title
    "Architecture sync 2026-09-14"), is left out of the section: "[mtg-09#2] (10:00) Architecture sync 2026-09-14
    § Decisions: ...". Prose is shown on the header's line (`one_line`); code or configuration
    (`chunking.keeps_lines`) below it, each of its lines after `CODE_LINE`: folded onto one line, a script or a YAML
    file loses the indentation and line breaks that are its meaning.
    """
    text = one_line(passage.text)
    title = one_line(passage.title)
    named = title if title and not text.startswith(title) else ""
    dates = _date_words(passage)
    headings = passage.section.split(" > ") if passage.section else []
    while headings and _words(headings[0]) - dates == _words(title) - dates:  # "Manual § Installation > Linux"
        headings.pop(0)
    if headings:
        named = f"{named} § {' > '.join(headings)}".strip()
    named = f"{named}: " if named else ""
    when = short(passage.time) if passage.time else ""
    if when and title and when[:10] in title:  # the title gives the date: the clock alone, if any
        when = when[11:]
    when = f"({when}) " if when else ""
    head = f"[{shown_id(passage.document_id)}#{passage.chunk_id}] {_also_in(passage)}{when}{named}"
    if keeps_lines(passage.document_id, passage.title, passage.text):
        return head.rstrip(), "".join(f"\n{CODE_LINE}{line}".rstrip() for line in passage.text.splitlines())
    return head, text


def _also_in(passage: Passage) -> str:
    """The other passages of the same text, not shown again (`Passage.also_in`): "(also in [notes (1).md#7]) "."""
    others = (other.rpartition("#") for other in passage.also_in)
    shown = ", ".join(f"[{shown_id(document_id)}#{chunk_id}]" for document_id, _, chunk_id in others)
    return f"(also in {shown}) " if shown else ""


def shown_id(id_: str) -> str:
    """A document's id as a passage's header shows it: as it is, or, where it holds a bracket or a double quote,
    as a JSON string: `["doc-1] Relations: ..."#1]`. Shown bare, such an id closes the header early and what
    follows in it reads as the memory's own lines. The JSON string, quotes included, is what a tool call's
    arguments take back as that id."""
    return as_field(id_, _ID_DELIMITERS)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def _date_words(passage: Passage) -> set[str]:
    """The words a heading may write the passage's date with: "14 September 2026", "Sep 14", "2026-09-14"."""
    if passage.time is None:
        return set()
    day = passage.time
    month = [calendar.month_name[day.month], calendar.month_abbr[day.month]]
    return _words(" ".join([day.date().isoformat(), str(day.day), *month]))
