"""The use cases: add a graph, add documents, search; and the one path every write takes (`KnowledgeBase.writing`).
Everything the server and the CLI do goes through here."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain import ingest
from duckgraph.core.domain.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from duckgraph.core.domain import history
from duckgraph.core.domain.history import check_window
from duckgraph.core.domain.ingest import Progress
from duckgraph.core.domain.namespaces import EMPTY_NAMESPACE, check_namespace, empty_namespace_hint
from duckgraph.core.domain.limits import MAX_DESCRIPTION_CHARS, MAX_OBSERVATIONS, over_limits
from duckgraph.core.domain.node_merge import OtherType, appended, other_type_hints, with_aliases
from duckgraph.core.domain.observation_order import by_relevance
from duckgraph.core.domain.observations import new_observations
from duckgraph.core.domain.fact_order import in_time_order
from duckgraph.core.domain.moments import now, parse_moment, period, short
from duckgraph.core.domain.restated_facts import restate_ended
from duckgraph.core.domain.replaced_facts import replaced_hints
from duckgraph.core.domain.relation_types import VAGUE_HINT, is_vague
from duckgraph.core.domain.cancellation import commit_of_call, unless_cancelled
from duckgraph.core.domain.document_ids import cited_as_stored
from duckgraph.core.domain.render import estimate_tokens, render_search
from duckgraph.core.domain.resolution import (
    NameKeys, NameResolver, lookup_keys, possible_duplicates, same_type, self_reference_hint, type_key, types_agree)
from duckgraph.core.domain.passage_ranking import without_repeats
from duckgraph.core.domain.retrieval import anchor_and_expand, match_words
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.core.domain.texts import edge_text, node_text
from duckgraph.core.files import backup as file_backup
from duckgraph.core.plugin_manager import embedder_mismatch
from duckgraph.ports import (
    EdgeWrite,
    Embedder,
    EmbedderMismatchError,
    Extractor,
    GraphStore,
    InvalidInputError,
    NodeRecord,
    Snapshot,
    StoreError,
    TimeFilter,
    WriteBatch,
    WriteSummary,
    entity_key,
    relation_type,
)

# The pydantic models are imported by the methods that build them, when first called: a server answers tools/list
# without them (see core/mcp/tools/).
if TYPE_CHECKING:
    from duckgraph.core.domain.model import (
        AddDocumentsResult,
        AddGraphResult,
        ChangesResult,
        DocumentInput,
        EndRelationInput,
        RelationsEnded,
        EdgeInput,
        NodeInput,
        SearchResult,
    )

log = logging.getLogger(__name__)

#: How many of the anchors' facts are read to count those that ended (a hub's count stops there).
RELATIONS_COUNTED = 10_000
#: Observations a search result lists per entity at most, the most relevant first (`observation_order`); the
#: rest are counted (`observations_not_shown`) and the text says so (get_entities lists all).
OBSERVATIONS_SHOWN = 20
#: The first line of a search's text when the query names ids that nothing stored holds (`not_stored`).
NOT_STORED = "Nothing stored mentions {ids}; what follows is related content."
#: The last line of a search's text when facts of its anchors ended: a question about then ("Who was on call in
#: March?") must learn that what it reads is what holds now.
ENDED_NOT_SHOWN = ("({count} ended fact(s) of these entities not shown: include_history=true adds them, as_of=DATE "
                   "shows what held then)")
#: Its counterpart for facts that start after now (planned: "Carol leads Payments from March"), which a search of
#: now leaves out as silently: a question about what comes next must learn that more is stored.
PLANNED_NOT_SHOWN = ("({count} planned fact(s) of these entities not shown, starting after now: include_history=true "
                     "adds them, as_of=DATE shows what holds then)")
#: Both at once, in one line.
NOT_SHOWN = ("({ended} ended and {planned} planned fact(s) of these entities not shown: include_history=true adds "
             "them, as_of=DATE shows what holds then)")
#: Every period of a relation, the planned ones (starting after now) included.
EVERY_PERIOD = TimeFilter(as_of=datetime.max, history=True)
#: Entity types `stats` lists, the most common (the store lists as many relation types).
TYPES_LISTED = 50


class Writer:
    """What `KnowledgeBase.writing()` hands out: while a use case holds it, no other write runs, so what it
    reads through the store stays true until it commits. A call cancelled before a commit starts has it refused
    (`Cancellation`)."""

    def __init__(self, store: GraphStore, counted: Callable[[bool], None]) -> None:
        self._store = store
        self._counted = counted

    def commit(self, batch: WriteBatch) -> WriteSummary:
        """Write the batch in one transaction; returns what changed."""
        with commit_of_call():
            try:
                return self._store.write(batch)
            finally:
                # Entities or facts go with deletions, merges and documents deleted or replaced (what only they
                # supported): the communities' reports may cite them.
                self._counted(bool(batch.delete_nodes or batch.delete_edges or batch.merges
                                   or batch.delete_documents or batch.documents))

    def restore(self, snapshot: Snapshot) -> WriteSummary:
        """Write an import's rows, matched on their natural keys, in one transaction; returns what changed."""
        with commit_of_call():
            try:
                return self._store.restore(snapshot)
            finally:
                self._counted(False)

    def replace_communities(self, namespace: str, communities: Sequence[Any], build: Any) -> None:
        """Replace a namespace's communities (derived data: not counted as a write of the graph)."""
        with commit_of_call():
            self._store.replace_communities(namespace, communities, build)

    def save_reports(self, communities: Sequence[Any]) -> None:
        """Store community reports (derived data: not counted as a write of the graph)."""
        with commit_of_call():
            self._store.save_reports(communities)

    def mark_extracted(self, chunk_ids: Sequence[int], extractor_id: str) -> None:
        """Record that an extractor read these passages (not counted as a write of the graph)."""
        with commit_of_call():
            self._store.mark_extracted(chunk_ids, extractor_id)

    @contextmanager
    def restoring(self) -> Iterator[Callable[[Snapshot], WriteSummary]]:
        """Write an import's rows in several snapshots and one transaction (see `GraphStore.restore_stream`)."""
        try:
            with commit_of_call(), self._store.restore_stream() as restore:
                yield restore
        finally:
            self._counted(False)


class KnowledgeBase:
    """One knowledge base: a store and the embedder its vectors come from.

    Opening is lazy and thread-safe, so a server can be constructed and answer the MCP handshake before
    the database is opened or the model is loaded.
    """

    def __init__(
        self,
        store: GraphStore,
        embedder: Embedder,
        *,
        namespace: str = "default",
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        chunk_overlap: int = DEFAULT_OVERLAP_CHARS,
        search_defaults: SearchOptions = SearchOptions(),
        extractor: Extractor | None = None,
        community_detector: Any = None,
    ) -> None:
        self.store = store
        self.community_detector = community_detector  # a CommunityDetector (ports/communities.py), or None
        self._communities: Any = None
        self.embedder = embedder
        self.extractor = extractor
        self.namespace = namespace
        self.chunk_chars = chunk_chars
        self.chunk_overlap = chunk_overlap
        self.search_defaults = search_defaults
        self._open_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._opened = False
        self._bound = False
        self._closed_for_good = False
        self._commit_count = 0  # commits tried through `writing()`: what `prepare_write` compares against

    def resolve_namespace(self, namespace: str | None) -> str:
        """The namespace a use case works in: `namespace` when given (an invalid name is an InvalidInputError
        before anything is read or written), else this knowledge base's default."""
        return self.namespace if namespace is None else check_namespace(namespace)

    # -- lifecycle -------------------------------------------------------------------------------------

    def open(self) -> KnowledgeBase:
        """Open the store (idempotent) and check the configured embedder's id against the file."""
        with self._open_lock:
            if self._closed_for_good:
                raise StoreError("this knowledge base is closed: the duckgraph server is stopping")
            if not self._opened:
                self.store.open()
                self._opened = True
                info = self.store.embedder_info()
                if info is not None and info[0] != self.embedder.id and not _holds_nothing(self.store):
                    log.warning("embedder mismatch: file has %s, configured %s", info[0], self.embedder.id)
        return self

    def close(self, *, final: bool = False) -> None:
        """Checkpoint and close the store (it opens again on the next use). `final`: for good, as a stopping
        server closes it: a warm-up or a call still under way then fails rather than opening the file again."""
        with self._open_lock:
            self._closed_for_good = self._closed_for_good or final
            if self._communities is not None:  # its background rebuilds end with the file's use
                self._communities.keeper.stop()
                self._communities = None
            if self._opened:
                self.store.close()
                self._opened = False
                self._bound = False

    def __enter__(self) -> KnowledgeBase:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _vectors_ready(self, *, bind: bool = True) -> None:
        """Bind the embedder to the file once; refuse a different one before any model is loaded. A read
        (`bind=False`) of a file no embedder is bound to yet (it holds no vectors) leaves it unbound, so that the
        first write may still choose another embedder.

        A file that holds no entity nor passage holds no vectors, whatever embedder it records (a first write that
        failed after binding, such as a mistyped model with its `dimensions` given): a write binds it to the
        configured embedder instead (the store logs it), and a read has nothing to refuse."""
        self.open()
        if self._bound:
            return
        info = self.store.embedder_info()
        other = info is not None and info[0] != self.embedder.id
        empty = info is not None and (other or not bind) and _holds_nothing(self.store)
        if not bind and (info is None or empty):
            return
        if info is not None and other and not empty:
            raise EmbedderMismatchError(
                embedder_mismatch(getattr(self.store, "path", "this knowledge base"), info, self.embedder.id))
        self.store.bind_embedder(self.embedder.id, self.embedder.dimensions)
        self._bound = True

    # -- the write path --------------------------------------------------------------------------------

    @contextmanager
    def writing(self, *, vectors: bool = True) -> Iterator[Writer]:
        """The one way to change the knowledge base: `with kb.writing() as writer: ...; writer.commit(batch)`.

        Binds the embedder first (a write that computes no vector, a deletion, passes `vectors=False`), then
        holds every other write back until the block ends, so a use case can read, decide and commit as one step.
        A use case that computes vectors (slow: seconds to minutes) does that before, see `prepare_write`.
        """
        if vectors:
            self._vectors_ready()
        with self.writes_paused():
            yield Writer(self.store, self._count_commit)

    def prepare_write(self) -> int:
        """Start a write whose vectors are computed before `writing()` holds the other writes back, so a long
        embedding blocks no other writer: binds the embedder (a different one is refused before any model loads)
        and returns a mark. Inside `writing()`, `changed_since(mark)` tells whether another write committed
        meanwhile: the use case then reads and decides again (reusing the vectors of texts it already embedded)
        before it commits."""
        self._vectors_ready()
        return self._commit_count

    def changed_since(self, mark: int) -> bool:
        """Whether a write was committed (or tried) since `prepare_write` gave `mark`; asked inside `writing()`."""
        return self._commit_count != mark

    def _count_commit(self, removing: bool) -> None:
        # Counted once the store call has returned (or failed): a mark taken after the count then never misses a
        # write its reads could not see yet. Only under the write lock, so no two writers count at once.
        self._commit_count += 1
        self.communities.keeper.written(removing)  # wakes the background check of the communities' freshness

    @contextmanager
    def writes_paused(self) -> Iterator[None]:
        """Hold every write back until the block ends: what a consistent copy of the file needs."""
        self.open()
        with self._write_lock:
            yield

    # -- use cases -------------------------------------------------------------------------------------

    def add_knowledge_graph(
        self,
        nodes: Sequence[NodeInput],
        edges: Sequence[EdgeInput],
        *,
        namespace: str | None = None,
        source_chunk_ids: Sequence[int] = (),
    ) -> AddGraphResult:
        """Merge entities and relationships into the graph in one transaction.

        Same name after normalisation = same entity: a new description is appended to the stored one (unless
        the two would pass the limit: the stored one stays, and a hint says so), aliases and properties merged,
        the newest type wins (one written in another case or number is the same type: the stored spelling stays);
        but a write with provenance (`source_ids`, `source_chunk_ids`: extracted) keeps the type and property
        values of an entity ever written by hand. The same (source, type, target) twice is one
        edge. `source_chunk_ids` links every node and edge of the call to the passages it was extracted from.
        """
        from duckgraph.core.domain.model import (
            MAX_EDGES_PER_CALL, MAX_NODES_PER_CALL, AddGraphResult, NodeRef)

        namespace = self.resolve_namespace(namespace)
        if len(nodes) > MAX_NODES_PER_CALL or len(edges) > MAX_EDGES_PER_CALL:
            raise InvalidInputError(
                f"too many items in one call ({len(nodes)} nodes, {len(edges)} edges); the limits are "
                f"{MAX_NODES_PER_CALL} nodes and {MAX_EDGES_PER_CALL} edges: split the graph into several calls"
            )
        if not nodes and not edges:
            raise InvalidInputError("nothing to add: give at least one node or edge")
        vectors: dict[str, Any] = {}  # text -> vector: a plan made again embeds only texts it did not have
        mark = self.prepare_write()
        # A document id cited composed whose document is stored decomposed (a macOS file name) names that one.
        nodes, edges = cited_as_stored(self.store, nodes, edges, namespace)
        plan = self._plan_graph(nodes, edges, namespace, tuple(source_chunk_ids), vectors)
        with self.writing() as writer:
            if self.changed_since(mark):  # names resolved before may have been stored, merged or deleted since
                plan = self._plan_graph(nodes, edges, namespace, tuple(source_chunk_ids), vectors)
            restated = restate_ended(self.store, plan.edges, plan.records, namespace)  # under the lock: the periods as committed
            replaced = replaced_hints(self.store, plan.edges, plan.records, namespace)  # what held before this write
            summary = writer.commit(WriteBatch(nodes=plan.records, edges=plan.edges.writes))
        edges_found = plan.edges
        selves = self_reference_hint(self.store, namespace, [n.name for n in plan.records if n.key in plan.created])
        return AddGraphResult(
            nodes_created=summary.nodes_created,
            nodes_updated=summary.nodes_updated,
            nodes_unchanged=summary.nodes_unchanged,
            edges_created=summary.edges_created,
            edges_updated=summary.edges_updated,
            edges_unchanged=summary.edges_unchanged,
            observations_added=plan.observations_added,
            nodes=[NodeRef(id=n.id, name=n.name, type=n.type, created=n.key in plan.created)
                   for n in plan.records],
            resolved=plan.resolved,
            possible_duplicates=plan.duplicates,
            skipped_edges=edges_found.skipped,
            vague_edges=edges_found.vague,
            hints=[*other_type_hints(plan.other_types, {n.key: n for n in plan.records}, plan.observations),
                   *edges_found.hints(), *_full_hint(plan.full), *restated,
                   *replaced, *_versioned_hints(summary, edges_found), *filter(None, [selves])],
        )

    def _plan_graph(
        self, nodes: Sequence[NodeInput], edges: Sequence[EdgeInput], namespace: str, chunk_ids: tuple[int, ...],
        vectors: dict[str, Any],
    ) -> _GraphPlan:
        """What `add_knowledge_graph` writes, read from the store as it is now, its vectors computed."""
        keys = NameKeys()  # the edges name the nodes of the call again: their keys are computed once
        merged, key_of, resolved, full, other_types = self._merge_nodes(nodes, namespace, keys, chunk_ids)
        observations = self._add_observations(nodes, merged, key_of, keys, chunk_ids)
        edges_found = self._resolve_edges(edges, merged, namespace, key_of, keys)
        for item in [*(node for node, _ in merged.values()), *edges_found.writes]:
            item.source_chunk_ids = chunk_ids
            item.by_hand = not (item.source_ids or chunk_ids)  # said by the caller, not read from a passage
        changed = [n for n, text_changed in merged.values() if text_changed]
        self.embed_records(namespace, changed, edges_found.writes, names=edges_found.names, known=vectors)
        records = [n for n, _ in merged.values()]
        created = [n for n in records if n.id is None]
        return _GraphPlan(
            records=records, edges=edges_found, resolved=resolved,
            observations_added=sum(map(len, observations.values())), observations=observations,
            duplicates=possible_duplicates(self.store, namespace, created), created={n.key for n in created},
            full=full, other_types=other_types,
        )

    def embed_records(
        self,
        namespace: str,
        nodes: Sequence[NodeRecord] = (),
        edges: Sequence[EdgeWrite] = (),
        *,
        names: dict[str, str] | None = None,
        known: dict[str, Any] | None = None,
    ) -> None:
        """Give nodes and edges fresh vectors.

        A node is embedded with its observations (read from the store when the record carries none), an edge as
        the fact it states; edge ends that are neither among `nodes` nor in `names` (key -> name) are looked up.
        `known` (text -> vector): vectors already computed, reused, and where the new ones are added.
        """
        stored = self.store.get_observations([n.id for n in nodes if n.id is not None and n.observations is None])
        known = {**(names or {}), **{n.key: n.name for n in nodes}}
        unknown = {key for e in edges for key in (e.source_key, e.target_key)} - known.keys()
        if unknown:
            known.update({n.key: n.name for n in self.store.find_nodes(namespace, unknown)})
        texts = [node_text(n, n.observations if n.observations is not None else stored.get(n.id, ())) for n in nodes]
        texts += [edge_text(e, known) for e in edges]
        ingest.embed_in_batches(self.embedder, list(zip([*nodes, *edges], texts)), None, "embedding", known)

    def _merge_nodes(
        self, nodes: Sequence[NodeInput], namespace: str, keys: NameKeys, chunk_ids: tuple[int, ...]
    ) -> tuple[dict[str, tuple[NodeRecord, bool]], dict[str, str], list[dict[str, str]], list[str], list[OtherType]]:
        """Node records to write by key, each with whether its embedded text changed; the key each input name
        went to; the names merged into an entity of another name or known type (see
        `duckgraph.core.domain.resolution`); the entities whose description was full, so a new one was not
        appended; and the nodes merged into an entity of another known type.

        Names are resolved against stored entities only, and never onto an entity another node of the call
        names or another name of the call was resolved to: nodes given as distinct stay distinct."""
        found = self.store.find_nodes(namespace, lookup_keys([n.name for n in nodes], keys))
        existing = {n.key: n for n in found}
        # A write read from passages must not undo curation: the type or a property a user fixed by hand.
        extracted = any(n.source_ids for n in nodes) or bool(chunk_ids)
        curated = self.store.written_by_hand("node", [n.id for n in found]) if extracted and found else set()
        resolver = NameResolver(keys=keys)
        resolver.add(found)
        claimed = {keys.key(n.name) for n in nodes}
        merged: dict[str, tuple[NodeRecord, bool]] = {}
        key_of: dict[str, str] = {}
        resolved: list[dict[str, str]] = []
        full: dict[str, None] = {}
        other_types: list[OtherType] = []
        for node in nodes:
            key = keys.key(node.name)
            if key not in key_of:
                key_of[key] = key
                if key not in existing:
                    match = resolver.match(node.name, node.type)
                elif not types_agree(existing[key].type, node.type):  # rule 1b
                    match = resolver.alias_owner(node.name, node.type)
                else:
                    match = None
                if match is not None and match.key not in claimed:
                    key_of[key] = match.key
                    claimed.add(match.key)
                    resolved.append({"name": node.name, "into": match.name})
            target = key_of[key]
            if target in merged:
                base, changed = merged[target]
            elif target in existing:
                base, changed = existing[target], False
            else:
                base, changed = NodeRecord(namespace=namespace, key=key, name=node.name, type=node.type), True
            before = None if changed else node_text(base)  # a new or already changed text is embedded anyway
            keep = base.id in curated and bool(node.source_ids or chunk_ids)
            update, appended = _merge_node(base, node, keys.key, keep_curated=keep)
            if not appended:
                full[update.name] = None
            if not types_agree(base.type, node.type):  # rule 1: the same name, maybe another thing
                other_types.append(OtherType(node.name, node.type, base.name, base.type, update.type == base.type,
                                             target, existing.get(target)))
                resolved.append({"name": node.name, "into": base.name})
            merged[target] = (update, changed or node_text(update) != before)
        return merged, key_of, resolved, list(full), other_types

    def _add_observations(
        self, nodes: Sequence[NodeInput], merged: dict[str, tuple[NodeRecord, bool]], key_of: dict[str, str],
        keys: NameKeys, chunk_ids: tuple[int, ...],
    ) -> dict[str, list[str]]:
        """Append the nodes' new observations to their records (after the stored ones); returns them by key.

        Past the limit a call by hand is refused (its caller can fold some in); an extracted one adds those that
        fit: every later passage naming the entity would otherwise lose its whole graph, and a retry cannot help."""
        given: dict[str, list[str]] = {}
        read: set[str] = set()  # targets given observations read from passages
        for node in nodes:
            if node.observations:
                target = key_of[keys.key(node.name)]
                given.setdefault(target, []).extend(node.observations)
                if node.source_ids or chunk_ids:
                    read.add(target)
        stored = self.store.get_observations([merged[k][0].id for k in given if merged[k][0].id is not None])
        added: dict[str, list[str]] = {}
        for target, texts in given.items():
            record, _ = merged[target]
            current = stored.get(record.id, []) if record.id is not None else []
            new = new_observations(current, texts)
            if target in read:
                new = new[:max(MAX_OBSERVATIONS - len(current), 0)]
            if len(current) + len(new) > MAX_OBSERVATIONS:
                raise InvalidInputError(
                    f"{record.name!r} would have {len(current) + len(new)} observations; the limit is "
                    f"{MAX_OBSERVATIONS}: remove some with update_entity(remove_observations=...) or fold them into "
                    "its description"
                )
            if new:
                record.observations = (*current, *new)
                merged[target] = (record, True)  # the first observations are part of the embedded text
                added[target] = new
        return added

    def _resolve_edges(
        self, edges: Sequence[EdgeInput], merged: dict[str, tuple[NodeRecord, bool]], namespace: str,
        key_of: dict[str, str], keys: NameKeys,
    ) -> _ResolvedEdges:
        """The edges to write, the name of each node they may end at (by key; what their facts are embedded
        with), the edges skipped because resolution joined their ends, and those with a vague type."""
        from duckgraph.core.domain.model import RelationRef, SkippedEdge

        key = keys.key
        ends = {name: key(name) for name in {name for e in edges for name in (e.source, e.target)}}
        wanted = set(ends.values()) - merged.keys() - key_of.keys()
        by_key: dict[str, str] = {**{k: k for k in merged}, **key_of}
        alias_owners: dict[str, set[str]] = {}
        # Aliases of the nodes of this call count too (an extractor's edges may name a node by its alias).
        for node_key, (node, _) in merged.items():
            for alias in node.aliases:
                alias_owners.setdefault(key(alias), set()).add(node_key)
        names = {node_key: node.name for node_key, (node, _) in merged.items()}
        for node in self.store.find_nodes(namespace, wanted):
            names[node.key] = node.name
            if node.key in wanted:
                by_key[node.key] = node.key
            for alias in node.aliases:
                alias_owners.setdefault(key(alias), set()).add(node.key)
        for alias_key, owners in alias_owners.items():
            if alias_key not in by_key and len(owners) == 1:
                by_key[alias_key] = next(iter(owners))
        node_of = {name: by_key.get(name_key) for name, name_key in ends.items()}  # None: no such entity
        types: dict[str, str] = {}
        found = _ResolvedEdges(names=names)
        for i, edge in enumerate(edges):
            source, target = node_of[edge.source], node_of[edge.target]
            edge_type = types.get(edge.type)
            if edge_type is None:
                edge_type = types[edge.type] = relation_type(edge.type)
            if source is None or target is None or not edge_type or ends[edge.source] == ends[edge.target]:
                _refuse_edge(i, edge, by_key, alias_owners, key, lambda name: self.curation.did_you_mean(
                    [name], namespace).get(name, []))
            if source == target:  # two names the caller gave as distinct, made one entity by resolution
                found.skipped.append(SkippedEdge(
                    source=edge.source, target=edge.target, type=edge_type,
                    reason=f"{edge.source!r} and {edge.target!r} are both the entity {names[source]!r}"))
                continue
            if is_vague(edge_type):
                found.vague.append(RelationRef(source=edge.source, target=edge.target, type=edge_type))
            found.writes.append(EdgeWrite(
                namespace=namespace, source_key=source, target_key=target, type=edge_type,
                description=edge.description or "", weight=edge.weight,
                properties=dict(edge.properties) if edge.properties else {},
                source_ids=tuple(dict.fromkeys(edge.source_ids)) if edge.source_ids else (),
                valid_from=edge.valid_from, valid_until=edge.valid_until,
            ))
        return found

    def add_documents(
        self,
        documents: Sequence[DocumentInput],
        *,
        namespace: str | None = None,
        extract: bool = False,
        progress: Progress | None = None,
    ) -> AddDocumentsResult:
        """Store, chunk and embed documents in one transaction. A document keeps the caller's id; re-adding
        the same id with the same text changes nothing, with new text replaces the old chunks.

        With `extract`, the configured extractor then reads every passage and its graph is stored with the
        passage as provenance, one transaction per passage: a passage whose extraction fails is still stored
        and its error is reported (see `duckgraph.core.domain.ingest`).
        """
        return ingest.add_documents(self, documents, self.resolve_namespace(namespace), extract,
                                    unless_cancelled(progress))

    def search(self, query: str, *, namespace: str | None = None, token_budget: int = 2_000, **options: Any) -> SearchResult:
        """Anchor & expand: the subgraph around the entities the query is about, and supporting passages."""
        from duckgraph.core.domain.model import (
            ChainGoesOn, Passage, ScoredEdge, ScoredNode, SearchResult, TypeCount, edge_properties)

        namespace = self.resolve_namespace(namespace)
        query = query.strip()
        if not query:
            raise InvalidInputError("the query is empty: ask a question or name what you are looking for")
        unknown = set(options) - set(SearchOptions.__dataclass_fields__)
        if unknown:
            raise InvalidInputError(f"unknown search options: {', '.join(sorted(unknown))}")
        settings = replace(self.search_defaults, **{k: v for k, v in options.items() if v is not None})
        check_window(settings.after, settings.before)
        if settings.relevance_floor is None:
            settings = replace(settings, relevance_floor=self.embedder.relevance_floor)
        self._vectors_ready(bind=False)
        # The query's words are looked up on another thread while the model (or its server) embeds the query: the
        # model runs without Python's lock, and the lookups want it (the other way round, the embedding thread
        # waits for the lock to hand back its vector).
        words = _query_threads().submit(match_words, self.store, query, namespace, settings)
        vector = self.embedder.embed_query(query)
        found = anchor_and_expand(self.store, query, vector, namespace, settings, words.result(), self.embedder)
        observations = by_relevance(query, self.store.get_observations([r.node_id for r in found.nodes]),
                                    {i: (record.name, *record.aliases) for i, record in found.records.items()})

        def scored(reached) -> ScoredNode:
            record = found.records[reached.node_id]
            held = observations.get(record.id, [])
            return ScoredNode(id=record.id, name=record.name, type=record.type, description=record.description,
                              score=round(reached.score, 4), hop=reached.hop, properties=record.properties,
                              observations=held[:OBSERVATIONS_SHOWN],
                              observations_not_shown=max(len(held) - OBSERVATIONS_SHOWN, 0))

        names = {node_id: record.name for node_id, record in found.records.items()}
        # A passage folded into a better one with its text frees its place for the next (`without_repeats`).
        every_passage = without_repeats([*found.passages, *found.more_passages])
        titles = self.store.document_titles({chunk.document_id for chunk, _, _ in every_passage}, namespace)
        times = self.store.chunk_times([chunk.id for chunk, _, _ in every_passage], namespace) if every_passage else {}
        passages = [
            Passage(document_id=chunk.document_id, chunk_id=chunk.id, title=titles.get(chunk.document_id, ""),
                    section=chunk.section, text=chunk.text, time=times.get(chunk.id), score=round(score, 4),
                    also_in=[f"{other.document_id}#{other.id}" for other in repeats])
            for chunk, score, repeats in every_passage
        ]
        ended, planned = self._facts_not_shown([a.node_id for a in found.anchors], namespace, settings)
        result = SearchResult(
            query=query,
            anchors=[scored(a) for a in found.anchors],
            nodes=[scored(n) for n in found.nodes],
            edges=[ScoredEdge(id=e.id, source=names[e.source_id], target=names[e.target_id], type=e.type,
                              description=e.description, weight=e.weight, properties=edge_properties(e.properties),
                              valid_from=e.valid_from, valid_until=e.valid_until, score=round(score, 4))
                   for e, score in in_time_order(found.edges, now() if settings.as_of is None
                                                  else parse_moment(settings.as_of))],
            passages=passages[: len(found.passages)],
            text="",
            truncated=False,
            nothing_relevant=found.nothing_relevant,
            empty_window=_window_words(settings.after, settings.before) if found.empty_window else None,
            not_stored=found.not_stored,
            more_facts=found.more_facts,
            type_count=TypeCount(**found.type_count._asdict()) if found.type_count else None,
            dates_not_applied=found.dates_not_applied,
            chains_go_on=[ChainGoesOn(**chain._asdict()) for chain in found.chains_go_on],
            ended_not_shown=ended,
            planned_not_shown=planned,
        )
        if found.nothing_stored:  # no communities either
            result.hint, communities = EMPTY_NAMESPACE.format(namespace=namespace), ""
        else:
            communities = self._name_communities(result, namespace)
        # An id the query names that nothing stored holds comes first: what follows must not read as about it.
        note = NOT_STORED.format(ids=", ".join(found.not_stored)) if found.not_stored else ""
        not_shown = _not_shown_note(ended, planned)
        result.text, result.truncated = render_search(result, token_budget, more=passages[len(found.passages):],
                                                      hint=result.hint, communities=communities,
                                                      set_aside=estimate_tokens(note) + estimate_tokens(not_shown))
        result.text = "\n".join(filter(None, [note, result.text, not_shown]))
        return result

    def _facts_not_shown(self, anchors: list[int], namespace: str, settings: SearchOptions) -> tuple[int, int]:
        """How many facts of `anchors` ended, and how many start after now (planned), when the search shows what
        holds now (no time asked for)."""
        if not anchors or settings.include_history or settings.as_of or settings.after or settings.before:
            return 0, 0
        ever = self.store.neighbor_ends(anchors, namespace, as_of=EVERY_PERIOD, limit=RELATIONS_COUNTED)
        begun = self.store.neighbor_ends(anchors, namespace, as_of=TimeFilter(history=True), limit=RELATIONS_COUNTED)
        now = self.store.neighbor_ends(anchors, namespace, limit=RELATIONS_COUNTED)
        return max(len(begun[0]) - len(now[0]), 0), max(len(ever[0]) - len(begun[0]), 0)

    def end_relations(self, relations: Sequence[EndRelationInput], *, namespace: str | None = None) -> RelationsEnded:
        """Close current relations at their `ended_at` (default now), keeping them as history (core/domain/history.py)."""
        return history.end_relations(self, relations, self.resolve_namespace(namespace))

    def recent_changes(self, *, namespace: str | None = None, since: datetime | None = None,
                       until: datetime | None = None, limit: int = 50, offset: int = 0,
                       token_budget: int = 2_000) -> ChangesResult:
        """What was written in [since, until), newest first (core/domain/history.py)."""
        return history.recent_changes(self, self.resolve_namespace(namespace), since=since, until=until, limit=limit,
                                      offset=offset, token_budget=token_budget)

    def _name_communities(self, result: SearchResult, namespace: str) -> str:
        """Name the community of each anchor, and point a question about the whole memory to global_search (the
        result's `hint`); returns the text's line that names the communities, each once with its anchors."""
        titles, result.hint = self.communities.about_anchors(namespace, result.anchors, result.query,
                                                             result.nothing_relevant)
        result.anchor_communities = {a.name: titles[a.id] for a in result.anchors if a.id in titles}
        members: dict[str, list[str]] = {}
        for name, title in result.anchor_communities.items():
            members.setdefault(title, []).append(name)
        return "Communities: " + "; ".join(f"{title} holds {', '.join(names)}" for title, names in members.items()) \
            if members else ""

    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        """Counts and types of `namespace` (None: of the whole file), the entity types one per type (`_one_per_type`,
        with `node_type_spellings` when a type is stored in several); a `hint` when the namespace holds nothing."""
        namespace = None if namespace is None else check_namespace(namespace)
        self.open()
        stats = self.store.stats(namespace)
        types = _one_per_type([{"type": t, "count": n} for t, n in stats["node_types"].items()])[:TYPES_LISTED]
        stats["node_types"] = {entry["type"]: entry["count"] for entry in types}
        if spellings := {entry["type"]: entry["spellings"] for entry in types if "spellings" in entry}:
            stats["node_type_spellings"] = spellings
        if namespace is not None and (hint := empty_namespace_hint(self, namespace)):
            stats["hint"] = hint  # zeros alone read like a memory that forgot everything, not a misspelt namespace
        return stats

    def health(self) -> dict[str, Any]:
        self.open()
        return self.store.health()

    def schema(self, namespace: str | None = None, *, limit: int = 50) -> dict[str, Any]:
        """The entity and relation types in use, most common first, each with its count and one example (the entity
        types one per type, `_one_per_type`, with `spellings` when a type is stored in several); at most `limit` of
        each, with `truncated` telling whether there are more."""
        namespace = self.resolve_namespace(namespace)
        self.open()
        found = self.store.type_examples(namespace, limit=None)  # every spelling, to count each type whole
        found["node_types"] = _one_per_type(found["node_types"])
        return {
            "namespace": namespace,
            "node_types": found["node_types"][:limit],
            "edge_types": found["edge_types"][:limit],
            "truncated": {kind: len(found[kind]) > limit for kind in ("node_types", "edge_types")},
        }

    @property
    def communities(self):
        """Communities, their reports and global search (see `duckgraph.core.domain.communities`)."""
        if self._communities is None:
            from duckgraph.core.domain.communities.service import CommunityService

            with self._open_lock:
                if self._communities is None:
                    self._communities = CommunityService(self, self.community_detector)
        return self._communities

    @property
    def curation(self):
        """Reading and editing the graph by entity name (get, update, merge, delete, paths)."""
        from duckgraph.core.domain.curation import GraphCuration  # with its pydantic models: when first needed

        return GraphCuration(self)

    def backup(self, destination: str | Path, *, force: bool = False) -> dict[str, Any]:
        """Write a consistent copy of the knowledge base to the file `destination`, while it stays in use
        (see `duckgraph.core.files.backup`)."""
        return file_backup.backup(self, destination, force=force)


def _one_per_type(counted: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entity types as stored (`{"type", "count", ...}`, most common first) one entry per type as resolution and
    search take them (`type_key`: "Person", "person", "Persons" and "people" are one): named by its most common
    spelling, whose other fields it keeps, the counts summed, the other spellings in `spellings`; most common first."""
    types: dict[str, dict[str, Any]] = {}
    for entry in counted:
        found = types.get(key := type_key(entry["type"]))
        if found is None:
            types[key] = dict(entry)
        else:
            found["count"] += entry["count"]
            found.setdefault("spellings", []).append(entry["type"])
    return sorted(types.values(), key=lambda entry: -entry["count"])  # stable: ties keep the store's order


def _window_words(after: datetime | None, before: datetime | None) -> str:
    """A search's window in words: "2024-06-10 to 2024-06-17", "from 2024-06-10", "before 2024-06-17"."""
    if after is None:
        return f"before {short(before)}"  # type: ignore[arg-type]
    return f"{short(after)} to {short(before)}" if before is not None else f"from {short(after)}"


def _not_shown_note(ended: int, planned: int) -> str:
    """The search text's last line when facts of its anchors that do not hold now were left out; "" if none."""
    if ended and planned:
        return NOT_SHOWN.format(ended=ended, planned=planned)
    if planned:
        return PLANNED_NOT_SHOWN.format(count=planned)
    return ENDED_NOT_SHOWN.format(count=ended) if ended else ""


@functools.cache
def _query_threads() -> ThreadPoolExecutor:
    """Threads that look up queries' words while they are embedded (a few: concurrent searches each need one)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="duckgraph-query")


@dataclass
class _GraphPlan:
    """What one `add_knowledge_graph` call will commit, and what it reports."""

    records: list[NodeRecord]
    edges: _ResolvedEdges
    resolved: list[dict[str, str]]
    observations_added: int
    observations: dict[str, list[str]]  # the observations added, by entity key
    duplicates: list[Any]
    created: set[str]  # keys of the nodes the call creates
    full: list[str]  # entities whose description was full: the new text was not appended
    other_types: list[OtherType]  # nodes merged into an entity of another known type


@dataclass
class _ResolvedEdges:
    """What `_resolve_edges` made of a call's edges."""

    names: dict[str, str]
    writes: list[EdgeWrite] = field(default_factory=list)
    skipped: list[Any] = field(default_factory=list)  # SkippedEdge
    vague: list[Any] = field(default_factory=list)  # RelationRef

    def hints(self) -> list[str]:
        hints = []
        if self.skipped:
            hints.append(f"{len(self.skipped)} edge(s) skipped (see skipped_edges): their two names are stored as one "
                         "entity. If they are different things, rename one with update_entity and add the edge again.")
        if self.vague:
            types = ", ".join(sorted({e.type for e in self.vague}))
            hints.append(VAGUE_HINT.format(count=len(self.vague), types=types))
        return hints


def _refuse_edge(
    i: int, edge: EdgeInput, by_key: dict[str, str], alias_owners: dict[str, set[str]], key: Callable[[str], str],
    meant: Callable[[str], list[str]],
) -> None:
    """Raise the error `_resolve_edges` found in `edges[i]`: an unknown end (the source first, with the stored
    names it likely meant, `meant`: get_entities' did_you_mean), a type without letters or digits, or a self-loop
    the caller wrote (source and target the same name)."""
    label = f"edges[{i}] ({edge.source} -{edge.type}-> {edge.target})"
    for role, name in (("source", edge.source), ("target", edge.target)):
        if key(name) not in by_key:
            if key(name) in alias_owners:
                hint = (f"it is an alias of several entities ({', '.join(sorted(alias_owners[key(name)]))}); use the "
                        "exact name")
            elif suggested := meant(name):
                hint = (f"did you mean {' or '.join(map(repr, suggested))}? Otherwise add it to `nodes` in this "
                        "call, or use the exact name of a stored entity")
            else:
                hint = "add it to `nodes` in this call, or use the exact name of a stored entity"
            raise InvalidInputError(f"{label}: the {role} entity {name!r} does not exist; {hint}")
    if not relation_type(edge.type):
        raise InvalidInputError(f"{label}: the type must contain letters or digits, e.g. FOUNDED")
    raise InvalidInputError(f"{label}: source and target are the same entity; a relation joins two entities")


def _holds_nothing(store: GraphStore) -> bool:
    """Whether the file holds no vector: none without an entity or a passage (a relation needs its entities)."""
    counts = store.stats()
    return not (counts["nodes"] or counts["chunks"])


def _full_hint(names: Sequence[str]) -> list[str]:
    """The hint of a call whose new description texts for `names` were not appended (`node_merge.appended`)."""
    if not names:
        return []
    named = ", ".join(repr(n) for n in names[:10]) + (" and others" if len(names) > 10 else "")
    return [(f"The description of {named} is full: with the new text it would pass {MAX_DESCRIPTION_CHARS:,} "
             "characters, so that was not appended. Rewrite it shorter with update_entity(description=...), or "
             "store the fact as an observation.")]


def _versioned_hints(summary: WriteSummary, edges: _ResolvedEdges) -> list[str]:
    """Say of each relation the store kept a version of as history (`WriteSummary.edges_versioned`: written from a
    later valid_from with other words than the period that held) where the old words went, and how to drop that
    period if it was a mistake rather than an older truth: nothing changed in place without a word."""
    hints: dict[str, str] = {}  # by relation: said once
    for index, start in summary.edges_versioned:
        write = edges.writes[index]
        label = (f"{edges.names.get(write.source_key, write.source_key)} -{write.type}-> "
                 f"{edges.names.get(write.target_key, write.target_key)}")
        sent = "null" if start is None else f'"{short(start)}"'
        hints.setdefault(label, (
            f"{label} says something else from {short(write.valid_from)}: its previous version is kept as history "
            f"({period(start, write.valid_from)}, with its own properties and sources) and the new one holds from "
            f"{short(write.valid_from)}; if the previous version was wrong rather than outdated, delete it "
            f"(delete_relations with this relation and valid_from {sent})"))
    listed = list(hints.values())
    return listed[:10] + ([f"... and {len(listed) - 10} more relations kept their previous version as history"]
                          if len(listed) > 10 else [])


def _merge_node(
    base: NodeRecord, node: NodeInput, key_of: Callable[[str], str] = entity_key, *, keep_curated: bool = False
) -> tuple[NodeRecord, bool]:
    """`node` written over `base`, and whether its description fitted. `keep_curated`: an extracted write over an
    entity written by hand, which keeps its type and its properties' values (new properties are added)."""
    # None: the two would pass the limit; the stored description stays, since refusing would lose the rest of the
    # call (a passage's whole graph, for an entity most passages name) while the stored text is still true.
    description = appended(base.description, node.description or "")
    fitted = description is not None
    description = base.description if description is None else description
    properties = {**node.properties, **base.properties} if keep_curated else {**base.properties, **node.properties}
    if over := over_limits(description, properties):
        raise InvalidInputError(
            f"{base.name!r} would have {over}, what is stored and what is given together: write it whole with "
            "update_entity(description=..., properties=...)")
    # Every alias is kept, as merge_entities and a rename keep them: one dropped would no longer find the entity.
    aliases = with_aliases(base.name, base.aliases, [node.name, *node.aliases], key_of)
    # The newest type wins when it is another type; one written in another case or number ("people" for "Person")
    # is the same type, and the stored spelling stays: listings and type questions keep finding it as it was.
    return replace(
        base,
        type=base.type if keep_curated or same_type(base.type, node.type) else node.type,
        description=description,
        aliases=tuple(aliases),
        properties=properties,
        source_ids=tuple(dict.fromkeys([*base.source_ids, *node.source_ids])),
    ), fitted
