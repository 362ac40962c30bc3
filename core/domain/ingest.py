"""Adding documents: check, chunk, embed and store them; then, when asked, let the extractor read every passage
and add the graph it finds, with the passage as provenance."""

from __future__ import annotations

import hashlib
import logging
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from duckgraph.core.domain.chunking import chunk_sections, markdown_headings
from duckgraph.core.domain.document_ids import as_stored, edit_hints
from duckgraph.core.domain.documents import held_by_relations
from duckgraph.core.domain.texts import fact_sentence, passage_text
from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    DuckgraphError,
    Embedder,
    ExtractionError,
    Extractor,
    InvalidInputError,
    StoreError,
    WriteBatch,
    entity_key,
    name_candidates,
)

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import (
        AddDocumentsResult, ChunkExtraction, DocumentInput, EdgeInput, NodeInput, StoredDocument)

log = logging.getLogger(__name__)

#: Progress callback: (done, total, message).
Progress = Callable[[int, int, str], None]
MAX_TOTAL_DOCUMENT_CHARS = 20_000_000
NO_EXTRACTOR = (
    "no extractor is configured, so duckgraph cannot extract entities from text itself. Either configure one "
    "(DUCKGRAPH_EXTRACTOR=ollama with a local chat model, see the README), or extract them yourself: call "
    "add_documents without extract, read the text, and call add_knowledge_graph with the entities and specific "
    "relationships it states, passing the document id in source_ids."
)

#: A passage's error when its document was replaced (or deleted) while the extractor read it.
PASSAGE_GONE = ("the passage was replaced (its document changed or was deleted) while it was being extracted; "
                "nothing of it was stored")


def add_documents(
    kb: KnowledgeBase, documents: Sequence[DocumentInput], namespace: str, extract: bool, progress: Progress | None
) -> AddDocumentsResult:
    """`KnowledgeBase.add_documents`: one transaction for the documents, then one per extracted passage."""
    from duckgraph.core.domain.model import AddDocumentsResult

    _check(documents, extract and kb.extractor is None)
    given = [doc.id or _content_id(doc.text) for doc in documents]
    _refuse_duplicates(given)
    # Passages are chunked and embedded before other writes are held back (a long document takes minutes); under
    # the lock the plan is made again only if another write committed meanwhile, with the vectors computed.
    vectors: dict[str, Any] = {}
    mark = kb.prepare_write()
    ids = _as_stored(kb, given, namespace)
    batch, results = _plan_documents(kb, ids, documents, namespace, vectors, progress)
    with kb.writing() as writer:
        if kb.changed_since(mark):  # the other write may have stored one of the ids in its other form
            ids = _as_stored(kb, given, namespace)
            batch, results = _plan_documents(kb, ids, documents, namespace, vectors, progress)
        # Without extraction nobody reads the new passages again: what the old ones supported stays while the new
        # ones name it (the host model extracted it from the document). With it, the extractor reads them.
        batch.keep_named = not extract
        summary = writer.commit(batch) if batch.documents else None
        # A document stored before as it is keeps its passages: listed as they are stored.
        chunk_ids: dict[str, list[int]] = {}
        for chunk in kb.store.document_chunks(namespace, [r.id for r in results if r.unchanged]):
            chunk_ids.setdefault(chunk.document_id, []).append(chunk.id)
    if summary is not None:
        chunk_ids.update(summary.chunk_ids)
    for result in results:
        result.chunk_ids = chunk_ids.get(result.id, [])
    outcome = AddDocumentsResult(documents=results, chunks_written=0)
    if summary is not None:
        outcome.chunks_written, outcome.chunks_kept = summary.chunks_written, summary.chunks_kept
        outcome.entities_removed, outcome.relations_removed = summary.nodes_deleted, summary.edges_deleted
        outcome.entities_kept, outcome.relations_kept = len(summary.nodes_kept), len(summary.edges_kept)
        outcome.to_review = (_to_review(kb, summary.nodes_kept, summary.edges_kept)
                             + held_by_relations(kb.store, summary.nodes_held))
        first = {c.document_id: c.embedding for c in batch.chunks if c.ordinal == 0}
        outcome.hints = edit_hints(kb.store, namespace, [
            (i, r.id, r.title, doc.text, first.get(r.id)) for i, (doc, r) in enumerate(zip(documents, results))
            if doc.id is None and not (r.unchanged or r.replaced)], ids)
    if extract:
        outcome.extractions = _extract(kb, kb.store.document_chunks(namespace, ids), namespace, progress)
        outcome.extraction_errors = sum(1 for e in outcome.extractions if e.error)
    return outcome


def refuse_read_only(kb: KnowledgeBase) -> None:
    """Raise the store's refusal of writes now when its file is open read-only, for a use case that reads, converts
    and embeds much before its first write (a folder's ingest embedded every passage, for minutes, only to be
    refused). The store's health says whether and why (`read_only`, as doctor shows it); the message is the
    store's own, with its fix, when it gives one. A store that says nothing of it refuses at the first write."""
    reason = kb.health().get("read_only")
    if not reason:
        return
    message = getattr(kb.store, "read_only_message", None)
    raise StoreError(message() if callable(message) else f"this knowledge file is read-only ({reason})")


def _to_review(kb: KnowledgeBase, node_ids: list[int], edge_ids: list[int]) -> list[str]:
    """What a replacement kept because the new text names it, as the host reads it: "entity: Kafka [Technology]",
    "relation: notification-service uses Kafka"."""
    edges = kb.store.get_edges(edge_ids)
    names = {n.id: n for n in kb.store.get_nodes({*node_ids, *(i for e in edges for i in (e.source_id, e.target_id))})}
    kept = [f"entity: {names[i].name} [{names[i].type}]" for i in node_ids if i in names]
    return kept + [f"relation: {fact_sentence(names[e.source_id].name, e.type, names[e.target_id].name)}"
                   for e in edges if e.source_id in names and e.target_id in names]


def _refuse_duplicates(ids: Sequence[str]) -> None:
    """Refuse a call giving one id twice, also once written with accents composed and once decomposed (NFC, NFD):
    both name one document (`_as_stored`), so which text it should hold is not said."""
    keys = Counter(unicodedata.normalize("NFC", i) for i in ids)
    duplicates = sorted({i for i in ids if keys[unicodedata.normalize("NFC", i)] > 1})
    if not duplicates:
        return
    if len(duplicates) == len({unicodedata.normalize("NFC", i) for i in duplicates}):
        raise InvalidInputError(f"the same document id appears twice in one call: {', '.join(duplicates)}")
    raise InvalidInputError(
        f"the same document id appears twice in one call: {', '.join(ascii(i) for i in duplicates)} (ids that differ "
        "only in Unicode normalisation, accents composed or decomposed, name one document): give each document once")


def _as_stored(kb: KnowledgeBase, ids: list[str], namespace: str) -> list[str]:
    """`ids` each as the document it names is stored: one stored in its other Unicode form (a file name from macOS
    decomposed, the id retyped composed) is replaced, not stored a second time (see
    `core.domain.document_ids`); an id stored in neither form is a new document, stored as given."""
    matched = as_stored(kb.store, ids, namespace, field="documents: id")
    return [matched.get(i, i) for i in ids]


def _plan_documents(
    kb: KnowledgeBase, ids: list[str], documents: Sequence[DocumentInput], namespace: str,
    vectors: dict[str, Any], progress: Progress | None,
) -> tuple[WriteBatch, list[StoredDocument]]:
    """The documents to write (new or changed since stored), chunked, and the result of each. A replaced document's
    passages that its stored one has too keep their stored rows (`_keep_unchanged`): only the others are embedded,
    and those too when the title changed (a passage's vector holds it)."""
    from duckgraph.core.domain.model import StoredDocument

    stored = {d.id: d for d in kb.store.get_documents(ids, namespace)}
    batch = WriteBatch()
    results: list[StoredDocument] = []
    for doc_id, doc in zip(ids, documents):
        title = doc.title or ""
        old = stored.get(doc_id)
        if (old is not None and old.text == doc.text and old.title == title and old.metadata == doc.metadata
                and old.time == doc.time):
            results.append(StoredDocument(id=doc_id, title=title, chunk_ids=[], unchanged=True))
            continue
        batch.documents.append(DocumentRecord(
            id=doc_id, namespace=namespace, text=doc.text, title=title, metadata=dict(doc.metadata), time=doc.time,
        ))
        sections = chunk_sections(doc.text, kb.chunk_chars, kb.chunk_overlap,
                                  headings=markdown_headings(doc_id, title, doc.text))
        for ordinal, (section, text) in enumerate(sections):
            batch.chunks.append(ChunkRecord(document_id=doc_id, ordinal=ordinal, text=text, section=section))
        results.append(StoredDocument(id=doc_id, title=title, chunk_ids=[], replaced=old is not None))
    titles = {d.id: d.title for d in batch.documents}
    replaced = [r.id for r in results if r.replaced]
    if replaced:
        _keep_unchanged(batch.chunks, kb.store.document_chunks(namespace, replaced))
    retitled = {i for i in replaced if stored[i].title != titles[i]}
    pairs = [(c, passage_text(titles[c.document_id], c.text, c.section)) for c in batch.chunks
             if c.id is None or c.document_id in retitled]
    embed_in_batches(kb.embedder, pairs, progress, "embedding passages", vectors)
    return batch, results


def _keep_unchanged(chunks: Sequence[ChunkRecord], stored: Sequence[ChunkRecord]) -> None:
    """Give each of `chunks` the id of a `stored` chunk of its document with the same text and section, each stored
    one once, in order: the write keeps that row (its vector, entities and extraction mark) at the new ordinal, so
    an edited paragraph costs its own passages, not the whole document's."""
    free: dict[tuple[str, str, str], list[int]] = {}
    for chunk in reversed(stored):  # popped from the end: first come, first kept
        free.setdefault((chunk.document_id, chunk.section, chunk.text), []).append(chunk.id)
    for chunk in chunks:
        if same := free.get((chunk.document_id, chunk.section, chunk.text)):
            chunk.id = same.pop()


def _check(documents: Sequence[DocumentInput], no_extractor: bool) -> None:
    """Refuse, before anything is read or written, a call that cannot be stored as given."""
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS, MAX_DOCUMENTS_PER_CALL

    if not documents:
        raise InvalidInputError("nothing to add: give at least one document")
    if no_extractor:
        raise InvalidInputError(NO_EXTRACTOR)
    if len(documents) > MAX_DOCUMENTS_PER_CALL:
        raise InvalidInputError(
            f"{len(documents)} documents in one call; the limit is {MAX_DOCUMENTS_PER_CALL}: split them"
        )
    total = sum(len(d.text) for d in documents)
    if total > MAX_TOTAL_DOCUMENT_CHARS:
        raise InvalidInputError(
            f"{total} characters in one call; the limit is {MAX_TOTAL_DOCUMENT_CHARS} "
            f"(and {MAX_DOCUMENT_CHARS} per document): split them"
        )
    for i, doc in enumerate(documents):
        if not doc.text.strip():
            raise InvalidInputError(f"documents[{i}]: the text is empty")


def embed_in_batches(
    embedder: Embedder, pairs: Sequence[tuple[Any, str]], progress: Progress | None, message: str,
    known: dict[str, Any] | None = None,
) -> None:
    """Set each item's `embedding` from the vector of its text, reporting progress once per embedder call.

    `known` (text -> vector): vectors computed before, reused rather than computed again; new ones are added."""
    known = {} if known is None else known
    texts = list(dict.fromkeys(text for _, text in pairs if text not in known))
    step = max(1, embedder.batch_size)
    for start in range(0, len(texts), step):
        batch = texts[start : start + step]
        known.update(zip(batch, embedder.embed_documents(batch)))
        if progress is not None:
            progress(min(start + step, len(texts)), len(texts), message)
    for item, text in pairs:
        item.embedding = known[text]


def _extract(
    kb: KnowledgeBase, chunks: Sequence[ChunkRecord], namespace: str, progress: Progress | None
) -> list[ChunkExtraction]:
    from duckgraph.core.domain.model import ChunkExtraction

    assert kb.extractor is not None
    report: list[ChunkExtraction] = []
    # Re-running an ingest must not pay for (or vary) a chat model's work on passages already done: those marked
    # as read (by an extractor, whatever it found; by the host LLM, through source_ids). Entities linked to a
    # passage do not make it done: a replaced document's new passage gets those its text still names unread.
    done_before = kb.store.extracted_chunks([c.id for c in chunks])
    for done, chunk in enumerate(chunks, start=1):
        entry = ChunkExtraction(document_id=chunk.document_id, chunk_id=chunk.id, skipped=chunk.id in done_before)
        if not entry.skipped:
            _extract_one(kb, chunk, namespace, entry)
        report.append(entry)
        if progress is not None:
            progress(done, len(chunks), "extracting entities and relationships")
    return report


def _extract_one(kb: KnowledgeBase, chunk: ChunkRecord, namespace: str, entry: ChunkExtraction) -> None:
    extractor = kb.extractor
    assert extractor is not None
    try:
        known = [n.name for n in kb.store.find_nodes(namespace, name_candidates(chunk.text, 4))]
        # The section's headings are the passage's context ("Installation > Linux"), as they are for its vector.
        nodes, edges = _extracted(extractor, passage_text("", chunk.text, chunk.section), known, chunk.document_id)
        if nodes or edges:
            # The store refuses provenance of a passage no longer stored, under the write lock: a document replaced
            # while the model read its old text must not get the old text's facts.
            added = kb.add_knowledge_graph(nodes, edges, namespace=namespace, source_chunk_ids=[chunk.id])
            # Every relation the passage states, those already stored as it states them included.
            entry.nodes = len(added.nodes)
            entry.edges = added.edges_created + added.edges_updated + added.edges_unchanged
        # Marked even when it found nothing, so that a re-run skips it; a failed passage is not, and is read again.
        with kb.writing(vectors=False) as writer:
            writer.mark_extracted([chunk.id], extractor.id)
    except DuckgraphError as exc:
        # Passage ids are never reused: one gone now was replaced or deleted, whatever else went wrong.
        entry.error = _one_line(exc) if kb.store.get_chunks([chunk.id]) else PASSAGE_GONE
        # The result carries the error to whoever asked (`duckgraph ingest` prints it): logged only for those
        # who ask for more, with the traceback of a plugin's unexpected exception.
        log.info("extraction of %s#%s failed: %s", chunk.document_id, chunk.id, entry.error,
                 exc_info=exc if exc.__cause__ is not None else None)


def _extracted(
    extractor: Extractor, text: str, known: list[str], document_id: str
) -> tuple[list[NodeInput], list[EdgeInput]]:
    """The extractor's graph of `text` as inputs; whatever goes wrong is a DuckgraphError, the passage's error."""
    try:
        return _fragment_inputs(extractor.extract(text, known_entities=known), document_id, extractor.id)
    except DuckgraphError:
        raise
    except Exception as exc:  # a plugin's bug fails its passage, as the docs promise, not the whole ingest
        raise ExtractionError(f"the extractor {extractor.id} failed: {type(exc).__name__}: {exc}") from exc


def _fragment_inputs(fragment: Any, document_id: str, extractor_id: str) -> tuple[list[NodeInput], list[EdgeInput]]:
    """An extractor's graph as validated inputs, with the document as provenance; self-loops are dropped. Anything
    but a mapping of exactly `nodes` and `edges`, two lists, is refused: a fragment under other keys would
    otherwise store nothing and count as extracted."""
    from duckgraph.core.domain.model import EdgeInput, NodeInput

    if not isinstance(fragment, Mapping) or set(fragment) != {"nodes", "edges"} or not all(
            isinstance(fragment[key], list | tuple) for key in ("nodes", "edges")):
        raise ExtractionError(f"the extractor {extractor_id} returned {_shape(fragment)}; it must return a "
                              "GraphFragment: {'nodes': [...], 'edges': [...]}, both keys, two lists (empty when "
                              "nothing is found)")
    nodes = [_validated(NodeInput, f"nodes[{i}]", node, document_id, extractor_id)
             for i, node in enumerate(fragment["nodes"])]
    edges = [_validated(EdgeInput, f"edges[{i}]", edge, document_id, extractor_id)
             for i, edge in enumerate(fragment["edges"])]
    edges = [e for e in edges if entity_key(e.source) != entity_key(e.target)]
    return nodes, edges


def _shape(fragment: Any) -> str:
    """What an extractor returned instead of a GraphFragment: "a mapping with the keys 'entities', 'relations'"."""
    if isinstance(fragment, Mapping):
        keys = ", ".join(repr(k) for k in list(fragment)[:6]) or "none"
        wrong = [k for k in ("nodes", "edges") if k in fragment and not isinstance(fragment[k], list | tuple)]
        return (f"a mapping whose {' and '.join(repr(k) for k in wrong)} is not a list" if wrong
                else f"a mapping with the keys {keys}")
    return "None" if fragment is None else f"a {type(fragment).__name__}"


def _validated(model: type[Any], label: str, item: Any, document_id: str, extractor_id: str) -> Any:
    """`item` as `model`, or InvalidInputError naming the field and the rule (not pydantic's text and link)."""
    if not isinstance(item, Mapping):
        wanted = "a name and a type" if label.startswith("nodes") else "a source, a target and a type"
        raise InvalidInputError(f"the extractor's graph was refused: {label} is {_shape(item)}, not an object with "
                                f"{wanted} (the extractor {extractor_id})")
    try:
        return model.model_validate({**item, "source_ids": [document_id]})
    except ValidationError as exc:
        problems = "; ".join(f"{label}.{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors()[:3])
        raise InvalidInputError(f"the extractor's graph was refused: {problems}") from exc


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:500]


def _content_id(text: str) -> str:
    """Ids for documents given without one: the same text always gets the same id."""
    return "doc-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
