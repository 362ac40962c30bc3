"""Document ids as the host gives them. A file's name from macOS comes decomposed (NFD: "e" then a combining
accent), and the document is stored under it as it came; a model retyping the id writes it composed (NFC). The
two look the same but are different strings, so an id is matched to the stored id it equals once both are
normalised, and refused when two stored ids differ from it only that way: a citation in `source_ids` names that
document, and `add_documents` (so also `duckgraph ingest`) replaces it rather than storing a second one that looks
the same. Stored ids are never changed (a file's id is its path, which must still name the file), and a new id is
stored as it came. A document given without an id gets one made from its text, so an edited text given so is stored
beside the old one: `edit_hints` names the stored id to give instead."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.ports import GraphStore, InvalidInputError, terms

if TYPE_CHECKING:
    from duckgraph.core.domain.model import EdgeInput, NodeInput

#: Between a long file's id and the number of each of its parts after the first (`<id>#part-2`): ingest stores a
#: file too long for one document as several, and deleting the file deletes them all.
PART = "#part-"


#: The share of their words (`ports.terms`, of either text) that a document given without an id and a stored one of
#: its title have in common when it is taken for an edit of that one (`edit_hints`).
EDIT_WORDS = 0.5
#: The stored passages nearest a document's first one that its earlier version is looked for among (`edit_hints`).
EDIT_CANDIDATES = 10


def is_part_of(document_id: str, file_id: str) -> bool:
    """Whether `document_id` is one of the later parts of the file stored as `file_id` (`<file_id>#part-2`)."""
    file, mark, number = document_id.rpartition(PART)
    return bool(mark) and number.isdigit() and file == file_id


def all_ids(store: GraphStore, namespace: str, page: int = 1_000) -> list[str]:
    """Every document id of the namespace, in the store's order."""
    ids: list[str] = []
    while batch := store.list_documents(namespace, offset=len(ids), limit=page):
        ids += [d.id for d in batch]
    return ids


def stored_forms(store: GraphStore, ids: Iterable[str], namespace: str) -> dict[str, list[str]]:
    """The stored ids, sorted, that each id of `ids` not stored as written names: its composed (NFC) or decomposed
    (NFD) form (an id mixing both has two). Ids stored as written, and those of no stored form, are left out."""
    wanted = set(ids)
    if all(i.isascii() for i in wanted):  # an ASCII id has one form only: nothing to look up
        return {}
    # Titles, not documents: which ids are stored, without reading texts (the DuckDB store answers from memory).
    stored = store.document_titles(wanted, namespace).keys()
    forms = {i: {unicodedata.normalize(form, i) for form in ("NFC", "NFD")} - {i}
             for i in wanted - stored if not i.isascii()}
    if not any(forms.values()):
        return {}
    found = store.document_titles(set().union(*forms.values()), namespace).keys()
    return {given: hits for given, variants in sorted(forms.items()) if (hits := sorted(variants & found))}


def unambiguous_forms(store: GraphStore, ids: Iterable[str], namespace: str) -> dict[str, str]:
    """As `as_stored`, refusing nothing: an id that two stored ids could be is left out, as if none were stored
    (for reads that must not fail: the write of such an id is refused, with both named)."""
    return {given: hits[0] for given, hits in stored_forms(store, ids, namespace).items() if len(hits) == 1}


def as_stored(store: GraphStore, ids: Iterable[str], namespace: str, field: str = "source_ids") -> dict[str, str]:
    """The stored id that each id of `ids` not stored as written names (see `stored_forms`). Ids stored as written,
    and those naming nothing stored in any form, are left out (a citation of the latter is refused by the write, as
    it always was; a document of such an id is a new one). An id whose two forms are both stored, though it is
    neither, is an InvalidInputError naming both (`field`: the argument it came in, for the message)."""
    matched: dict[str, str] = {}
    for given, hits in stored_forms(store, ids, namespace).items():
        if len(hits) > 1:
            raise InvalidInputError(
                f"{field}: {given!r} is not stored as written, and {len(hits)} stored document ids differ from it only "
                f"in Unicode normalisation (accents composed or decomposed): {', '.join(ascii(h) for h in hits)}; "
                f"write one of them exactly as search shows it (you wrote {ascii(given)})")
        matched[given] = hits[0]
    return matched


def cited_as_stored(store: GraphStore, nodes: Sequence[NodeInput], edges: Sequence[EdgeInput], namespace: str
                    ) -> tuple[list[NodeInput], list[EdgeInput]]:
    """`nodes` and `edges` with each of their `source_ids` written as the document is stored (see `as_stored`):
    provenance names the stored document, under the id it was stored with."""
    matched = as_stored(store, (i for item in [*nodes, *edges] for i in item.source_ids), namespace)
    if not matched:
        return list(nodes), list(edges)

    def cited(item: Any) -> Any:
        if not any(i in matched for i in item.source_ids):
            return item
        return item.model_copy(update={"source_ids": [matched.get(i, i) for i in item.source_ids]})

    return [cited(n) for n in nodes], [cited(e) for e in edges]


def edit_hints(store: GraphStore, namespace: str, added: Sequence[tuple[int, str, str, str, Any]],
               call_ids: Iterable[str]) -> list[str]:
    """For each new document of `added` (its place in the call, the id made from its text, its title, its text and
    its first passage's vector), given without an id, a hint when it looks like an edit of a stored document of
    `namespace` other than this call's (`call_ids`): one of its title, holding one of the passages nearest to its
    first, that shares most of its words (`EDIT_WORDS`). Stored beside that one, both are found by search: the hint
    names the stored id to give to replace it instead. The turns of a conversation share their title too, but not
    their words."""
    hints: list[str] = []
    others = set(call_ids)
    for position, new_id, title, text, vector in added:
        if not title or vector is None:
            continue
        near = store.chunk_documents(c for c, _ in store.vector_search("chunk", vector, EDIT_CANDIDATES, namespace))
        titled = [d for d, t in store.document_titles(set(near.values()) - others, namespace).items() if t == title]
        words = set(terms(text))
        shared: dict[str, float] = {}
        for stored in store.get_documents(sorted(titled), namespace):
            held = set(terms(stored.text))
            shared[stored.id] = len(words & held) / max(len(words | held), 1)
        edited = max(shared, key=shared.__getitem__, default=None)
        if edited is not None and shared[edited] >= EDIT_WORDS:
            hints.append(
                f"documents[{position}] was stored as a new document, {new_id!r}, beside {edited!r}, which has its "
                f"title and most of its words. If it is an edit of that one, add it again with id {edited!r} to "
                f"replace it, and delete {new_id!r} (delete_documents in the `all` tool set, or `duckgraph documents "
                "delete`); search shows both until then")
    return hints
