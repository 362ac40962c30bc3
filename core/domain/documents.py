"""Deleting documents by id: the `delete_documents` tool and `duckgraph documents delete`. A document stored by
mistake (a private note, the wrong file) goes with its passages, their vectors and keywords, its provenance links
and the entities and relations only it supported, as `ingest --prune` deletes the documents of files gone (the
store does it for `WriteBatch.delete_documents`); a long file ingested in parts (`<id>#part-2`...) goes whole, and
recent_changes lists each as "document deleted"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from duckgraph.core.domain.document_ids import PART, all_ids, as_stored, is_part_of, unambiguous_forms
from duckgraph.core.domain.namespaces import empty_namespace_hint
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.ports import GraphStore, InvalidInputError, WriteBatch

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import DocumentsDeleted

#: Ids named one by one in a hint; the others are counted (a call of a thousand wrong ids gets one short hint).
HINTED_IDS = 10


def delete_documents(kb: KnowledgeBase, ids: Sequence[str], namespace: str | None = None, *,
                     name_other_namespaces: bool = False) -> DocumentsDeleted:
    """Delete the documents of `ids` in `namespace` (default: the knowledge base's) in one transaction. An id names
    the document stored under it, else the one stored under its other Unicode form (core/domain/document_ids.py);
    ids that name none are returned in `not_found`, with hints. Ids are checked as add_documents checks them: one
    refused (or naming two stored documents) fails the call and nothing is deleted.

    `name_other_namespaces`: a hint may say which other namespaces hold an id not found. Only for the file's owner
    (the command line): a model working in one namespace must learn nothing of the others (namespaces.md)."""
    from typing_extensions import TypedDict

    from pydantic import TypeAdapter, ValidationError

    from duckgraph.core.domain.argument_errors import readable
    from duckgraph.core.domain.model import MAX_DOCUMENTS_PER_CALL, DocumentsDeleted, SourceId

    namespace = kb.resolve_namespace(namespace)
    if not ids:
        raise InvalidInputError("give the id of at least one document to delete (a passage's document_id, as "
                                "search shows it)")
    if len(ids) > MAX_DOCUMENTS_PER_CALL:
        raise InvalidInputError(f"{len(ids)} ids given; at most {MAX_DOCUMENTS_PER_CALL} documents are deleted per "
                                "call: nothing was deleted")

    class Arguments(TypedDict):  # refusals said per field as the tool's are: "ids[0]: must not ..."
        ids: list[SourceId]

    try:  # the tool's schema checks the same; this is for the command line, so both refuse alike
        checked = TypeAdapter(Arguments).validate_python({"ids": list(ids)})["ids"]
    except ValidationError as exc:
        raise InvalidInputError(f"{readable(exc)}; nothing was deleted") from None
    given = list(dict.fromkeys(checked))
    with kb.writing(vectors=False) as writer:  # read and delete as one step: no write slips in between
        named = as_stored(kb.store, given, namespace, field="ids")
        stored = kb.store.document_titles([named.get(i, i) for i in given], namespace).keys()
        # An id given in both its forms names one document: deleted (and listed) once.
        deleted = list(dict.fromkeys(named.get(i, i) for i in given if named.get(i, i) in stored))
        missing = [i for i in given if named.get(i, i) not in stored]
        if deleted:  # a long file ingested in parts is one file to the user: its later parts go with it
            files = set(deleted)
            deleted += [d for d in all_ids(kb.store, namespace)
                        if (file := d.rpartition(PART)[0]) in files and is_part_of(d, file) and d not in files]
        summary = writer.commit(WriteBatch(delete_documents=[(namespace, d) for d in deleted])) if deleted else None
    return DocumentsDeleted(
        deleted=deleted, not_found=missing,
        entities_removed=summary.nodes_deleted if summary else 0,
        relations_removed=summary.edges_deleted if summary else 0,
        hints=not_found_hints(kb, missing, namespace, any_found=bool(deleted),
                              name_other_namespaces=name_other_namespaces)
        + (held_by_relations(kb.store, summary.nodes_held) if summary else []),
    )


def held_by_relations(store: GraphStore, held: dict[int, list[int]]) -> list[str]:
    """The entities a write kept though no passage supports them any more (`WriteSummary.nodes_held`: ends of
    relations written by hand, which would have gone with them), each with one of those relations: "entity: Voltra
    [Company] (no passage supports it now; kept for the relation written by hand Dr. Lee audited Voltra)"."""
    shown = dict(list(held.items())[:HINTED_IDS])
    edges = {e.id: e for e in store.get_edges({ids[0] for ids in shown.values()})}
    names = {n.id: n for n in store.get_nodes({*shown, *(i for e in edges.values()
                                                         for i in (e.source_id, e.target_id))})}
    lines = []
    for node, (first, *others) in shown.items():
        edge = edges.get(first)
        if edge is None or not {node, edge.source_id, edge.target_id} <= names.keys():
            continue
        fact = fact_sentence(names[edge.source_id].name, edge.type, names[edge.target_id].name)
        more = f" and {len(others)} more" if others else ""
        lines.append(f"entity: {names[node].name} [{names[node].type}] (no passage supports it now; kept for the "
                     f"relation written by hand {fact}{more})")
    if len(held) > len(shown):
        lines.append(f"... and {len(held) - len(shown)} more entities kept for relations written by hand")
    return lines


def not_found_hints(kb: KnowledgeBase, missing: Sequence[str], namespace: str, *, any_found: bool,
                    name_other_namespaces: bool, doing: str = "delete") -> list[str]:
    """Why each id of `missing` named nothing: the document is in another namespace (named, only with
    `name_other_namespaces`), the namespace holds nothing (a misspelt one), or no document has that id there.
    `doing`: what the call does with a document, for "give that namespace to delete it there"."""
    if not missing:
        return []
    shown = list(missing[:HINTED_IDS])
    more = f" and {len(missing) - len(shown)} more" if len(missing) > len(shown) else ""
    elsewhere: dict[str, list[str]] = {}
    for other in kb.store.namespaces() if name_other_namespaces else ():  # a few, each answered from memory
        if other == namespace:
            continue
        forms = unambiguous_forms(kb.store, shown, other)
        found = kb.store.document_titles([forms.get(i, i) for i in shown], other).keys()
        for i in shown:
            if forms.get(i, i) in found:
                elsewhere.setdefault(i, []).append(other)
    hints = [f"{i!r} is a document of the namespace {' and '.join(map(repr, spaces))}, not of {namespace!r}: give "
             f"that namespace to {doing} it there" for i, spaces in elsewhere.items()]
    rest = [i for i in shown if i not in elsewhere]
    if rest or more:
        named = (f"no document {', '.join(map(repr, rest))}{more}" if rest
                 else f"no document for {len(missing) - len(shown)} more ids")
        if not any_found and (empty := empty_namespace_hint(kb, namespace)):
            hints.append(f"{named}. {empty}")
        else:
            hints.append(f"{named} in the namespace {namespace!r}: give each id exactly as search shows it (a "
                         "passage's document_id); recent_changes lists the documents added")
    return hints
