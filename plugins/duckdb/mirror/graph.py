"""The graph mirror: the graph as a search reads it, held in memory so that a search never waits for DuckDB (which
answers a lookup of a few hundred rows by id with a scan of the table, and binds a Python list parameter slowly).

Derived data: loaded from the tables at open (and after a restore), and changed by the store only after a write
has committed (see `DuckDBStore`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.columns import grow, nat, time_value
from duckgraph.plugins.duckdb.mirror.links import LinkTable
from duckgraph.plugins.duckdb.mirror.passages import PassageMirror
from duckgraph.plugins.duckdb.mirror.substrings import SubstringIndex
from duckgraph.plugins.duckdb.sql import now as sql_now
from duckgraph.ports import Links, TimeFilter, isin_ids, link_counts

log = logging.getLogger(__name__)

np: Any = NumpyOnFirstUse(globals())

#: Rows read per query when the graph is loaded.
LOAD_BLOCK = 500_000


#: EdgeRecords kept built (see `GraphMirror.edge_records`): ~200 bytes each (emptied when full).
EDGE_CACHE_SIZE = 500_000


class _FrozenDict(dict):
    """The properties of a cached, shared EdgeRecord: a dict that refuses changes."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the properties of a stored edge record are read-only; copy them with dict(...) to change")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        import copy

        return copy.deepcopy(dict(self), memo)


def _properties(text: str | None) -> dict[str, Any]:
    import json

    return {} if text is None else json.loads(text)


class GraphMirror(PassageMirror):
    """The graph as the search path reads it, in memory: node records and their names, edges with a CSR
    adjacency in both directions, and mentions (chunk <-> node) in both directions.

    Columns are numpy arrays indexed by id (node, edge and chunk ids come from sequences: small and dense);
    texts are object arrays (None for an empty description or '{}' properties, so millions of rows share one
    object). Built from the tables at open; the store applies each committed write to it (`put_nodes`,
    `put_edges`, ...). Not locked by itself: the store calls it under its own lock.

    The store reads it through the methods under "what the store asks" (and `find`, `node_records`, ...), never
    through the columns: those are this class's own.
    """

    def __init__(self, name_keys: Any = None, text_budget: int = 0) -> None:
        #: (key, aliases) -> the keys `find` finds a node by (the store's rule); default: key and alias keys.
        self.name_keys = name_keys or _default_name_keys
        #: Bytes of passage text held in memory at most: a search returns a few passages, and reading them from
        #: the file costs milliseconds of SQL; beyond this the texts stay in the file only.
        self.text_budget = text_budget
        # The arrays are made by `load` at open: making them here would import numpy when a server starts.

    def _reset(self) -> None:
        self.namespace_codes: dict[str, int] = {}
        self.namespace_names: list[str] = []
        self.type_codes: dict[str, int] = {}
        self.type_names: list[str] = []
        # nodes, by id (n_ns -1: no such node)
        self.n_ns = np.full(0, -1, dtype=np.int32)
        self.n_type = np.zeros(0, dtype=np.int32)
        self.n_key = np.empty(0, dtype=object)
        self.n_name = np.empty(0, dtype=object)
        self.n_desc = np.empty(0, dtype=object)
        self.n_aliases = np.empty(0, dtype=object)
        self.n_props = np.empty(0, dtype=object)
        #: a node's observations in stored order (a tuple; None when it has none): searches show them and the
        #: keyword index reads them, and SQL takes milliseconds for the few dozen nodes a search returns
        self.n_obs = np.empty(0, dtype=object)
        self.n_created = np.zeros(0, dtype="datetime64[us]")
        self.n_updated = np.zeros(0, dtype="datetime64[us]")
        #: namespace code -> name key -> node id, or a tuple of ids when several nodes answer to it
        self.names: dict[int, dict[str, Any]] = {}
        self.node_count = 0
        #: the folded texts `nodes_containing` searches, built for a namespace by its first query
        self.substrings = SubstringIndex(self._substring_texts, self._namespace_members)
        # edges, by id (e_src -1: no such edge)
        self.e_src = np.full(0, -1, dtype=np.int64)
        self.e_dst = np.full(0, -1, dtype=np.int64)
        self.e_ns = np.full(0, -1, dtype=np.int32)
        self.e_type = np.zeros(0, dtype=np.int32)
        self.e_weight = np.zeros(0, dtype=np.float64)
        self.e_from = np.zeros(0, dtype="datetime64[us]")
        self.e_until = np.zeros(0, dtype="datetime64[us]")
        self.e_created = np.zeros(0, dtype="datetime64[us]")
        self.e_updated = np.zeros(0, dtype="datetime64[us]")
        self.e_desc = np.empty(0, dtype=object)
        self.e_props = np.empty(0, dtype=object)
        self.edge_count = 0
        self._edge_cache: dict[int, Any] = {}
        #: Edges whose weight changed since the CSRs were built: out of order in their nodes' lists.
        self._reweighted: set[int] = set()
        #: Per node, its edges that hold now in its namespace (a self-loop once), counted when the CSRs were built;
        #: `_degree_stale` marks the nodes an edge written, deleted or repointed since then ends at.
        self._degrees = np.zeros(0, dtype=np.int64)
        self._degree_stale = np.zeros(0, dtype=bool)
        self._degrees_until: Any = None
        #: per node, its edges without validity (counted) and its edges with one (listed), as `_degrees` counts
        self._untimed_degrees = np.zeros(0, dtype=np.int64)
        self._timed_links = LinkTable()
        self.out_edges = LinkTable()  # node -> edges leaving it
        self.in_edges = LinkTable()  # node -> edges entering it
        # mentions
        self.chunk_live = np.zeros(0, dtype=bool)
        # chunk -> its document (a code into documents) and documents' titles: a search picks one passage per
        # document among dozens of candidates and shows titles, and SQL takes milliseconds for a handful of rows
        self.chunk_document = np.full(0, -1, dtype=np.int32)
        self.chunk_ordinal = np.zeros(0, dtype=np.int32)
        #: chunk id -> its text while they fit `text_budget` (decided at open, given up when writes outgrow it)
        self.chunk_text: dict[int, str] | None = {}
        #: chunk id -> its section ("Installation > Linux"), for those that have one: short, so always held
        self.chunk_section: dict[int, str] = {}
        #: chunk id -> the next (`chunk_after`) or previous (`chunk_before`) chunk of its document where that is not
        #: the next or previous id: a replaced document keeps its unchanged passages (see `_note_reading_order`)
        self.chunk_after: dict[int, int] = {}
        self.chunk_before: dict[int, int] = {}
        self.text_bytes = 0  # UTF-8 bytes of the chunks' texts held (of all of them, when over the budget at open)
        self.document_codes: dict[tuple[str, str], int] = {}  # (namespace, document id) -> code
        self.documents: list[tuple[str, str]] = []  # code -> (document id, title)
        #: code -> the document's time (NaT: none given): a search's window filters and shows passages by it
        self.document_time = np.zeros(0, dtype="datetime64[us]")
        self.chunks_of = LinkTable()  # node -> chunks mentioning it
        self.nodes_of = LinkTable()  # chunk -> nodes it mentions

    # -- codes ---------------------------------------------------------------------------------------------

    def namespace_code(self, namespace: str) -> int:
        code = self.namespace_codes.get(namespace)
        if code is None:
            code = self.namespace_codes[namespace] = len(self.namespace_names)
            self.namespace_names.append(namespace)
        return code

    def type_code(self, type_: str) -> int:
        code = self.type_codes.get(type_)
        if code is None:
            code = self.type_codes[type_] = len(self.type_names)
            self.type_names.append(type_)
        return code

    # -- loading ---------------------------------------------------------------------------------------------

    def load(self, con: Any) -> None:
        """Read the whole graph from the tables (at open, and after a restore), block by block of rowids, with
        namespaces and types turned into codes by DuckDB (millions of repeated strings never reach Python)."""
        self._reset()
        for name in (r[0] for r in con.execute(
            "SELECT namespace FROM nodes UNION SELECT namespace FROM edges UNION SELECT namespace FROM node_names"
        ).fetchall()):
            self.namespace_code(name)
        for name in (r[0] for r in con.execute("SELECT type FROM nodes UNION SELECT type FROM edges").fetchall()):
            self.type_code(name)
        con.register("_mirror_namespaces", {"name": np.array(self.namespace_names or [""], dtype=object),
                                            "code": np.arange(max(1, len(self.namespace_names)), dtype=np.int32)})
        con.register("_mirror_types", {"name": np.array(self.type_names or [""], dtype=object),
                                       "code": np.arange(max(1, len(self.type_names)), dtype=np.int32)})
        try:
            self._load_nodes(con)
            self._load_observations(con)
            self._load_edges(con)
        finally:
            con.unregister("_mirror_namespaces")
            con.unregister("_mirror_types")
        self._finish_load(con)

    def _blocks(self, con: Any, table: str) -> Any:
        last = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
        return range(0, -1 if last is None else last + 1, LOAD_BLOCK)

    def _load_nodes(self, con: Any) -> None:
        top = con.execute("SELECT max(id) FROM nodes").fetchone()[0]
        self._grow_nodes((top or 0) + 1)
        empty: tuple[str, ...] = ()
        for start in self._blocks(con, "nodes"):
            nodes = con.execute(
                "SELECT n.id, s.code AS ns, t.code AS ty, n.key, n.name, NULLIF(n.description, '') AS description, "
                "n.aliases, NULLIF(n.properties::VARCHAR, '{}') AS properties, n.created_at, n.updated_at FROM nodes n "
                "JOIN _mirror_namespaces s ON s.name = n.namespace JOIN _mirror_types t ON t.name = n.type "
                "WHERE n.rowid >= $1 AND n.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchnumpy()
            ids = np.asarray(nodes["id"], dtype=np.int64)
            if not len(ids):
                continue
            self.n_ns[ids] = nodes["ns"]
            self.n_type[ids] = nodes["ty"]
            self.n_key[ids] = nodes["key"]
            self.n_name[ids] = nodes["name"]
            self.n_desc[ids] = _filled(nodes["description"])
            self.n_aliases[ids] = [tuple(a) if len(a) else empty for a in nodes["aliases"]]
            self.n_props[ids] = _filled(nodes["properties"])
            self.n_created[ids] = _filled(nodes["created_at"])
            self.n_updated[ids] = _filled(nodes["updated_at"])
            self.node_count += len(ids)
        for start in self._blocks(con, "node_names"):
            names = con.execute(
                "SELECT s.code, n.key, n.node_id FROM node_names n JOIN _mirror_namespaces s ON s.name = n.namespace "
                "WHERE n.rowid >= $1 AND n.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchall()
            for code, key, node_id in names:
                self._add_name(code, key, node_id)

    def _load_observations(self, con: Any) -> None:
        top = con.execute("SELECT max(node_id) FROM observations").fetchone()[0]
        for start in range(0, (top or 0) + 1, LOAD_BLOCK):
            rows = con.execute(
                "SELECT node_id, list(text ORDER BY created_at, rowid) FROM observations "
                "WHERE node_id >= $1 AND node_id < $2 GROUP BY node_id", [start, start + LOAD_BLOCK],
            ).fetchall()
            for node_id, texts in rows:
                if node_id < len(self.n_obs):  # an observation of no stored node is never read
                    self.n_obs[node_id] = tuple(texts)

    def _load_edges(self, con: Any) -> None:
        top = con.execute("SELECT max(id) FROM edges").fetchone()[0]
        self._grow_edges((top or 0) + 1)
        for start in self._blocks(con, "edges"):
            edges = con.execute(
                "SELECT e.id, s.code AS ns, t.code AS ty, e.source_id, e.target_id, "
                "NULLIF(e.description, '') AS description, e.weight, NULLIF(e.properties::VARCHAR, '{}') AS properties, "
                "e.valid_from, e.valid_until, e.created_at, e.updated_at FROM edges e "
                "JOIN _mirror_namespaces s ON s.name = e.namespace JOIN _mirror_types t ON t.name = e.type "
                "WHERE e.rowid >= $1 AND e.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchnumpy()
            ids = np.asarray(edges["id"], dtype=np.int64)
            if not len(ids):
                continue
            self.e_ns[ids] = edges["ns"]
            self.e_type[ids] = edges["ty"]
            self.e_src[ids] = edges["source_id"]
            self.e_dst[ids] = edges["target_id"]
            self.e_weight[ids] = edges["weight"]
            self.e_desc[ids] = _filled(edges["description"])
            self.e_props[ids] = _filled(edges["properties"])
            for column, name in ((self.e_from, "valid_from"), (self.e_until, "valid_until"),
                                 (self.e_created, "created_at"), (self.e_updated, "updated_at")):
                column[ids] = _filled(edges[name])
            self.edge_count += len(ids)

    def _finish_load(self, con: Any) -> None:
        """The adjacency, the live chunks and the mentions, once nodes and edges are in."""
        self._rebuild_adjacency()
        self.chunk_live[:] = False
        documents = con.execute("SELECT namespace, id, title, time FROM documents").fetchnumpy()
        self.put_documents(documents["namespace"], documents["id"], documents["title"], _filled(documents["time"]))
        self.text_bytes = con.execute("SELECT coalesce(sum(strlen(text)), 0) FROM chunks").fetchone()[0]
        held = self.text_bytes <= self.text_budget
        text = "text" if held else "NULL AS text"
        chunks = con.execute(f"SELECT id, namespace, document_id, ordinal, {text}, section FROM chunks").fetchnumpy()
        ids = np.asarray(chunks["id"], dtype=np.int64)
        self.chunk_text = None  # filled below at once: the sum above already counted the texts' bytes
        self.add_chunks(ids, chunks["namespace"], chunks["document_id"], chunks["ordinal"], chunks["text"],
                        chunks["section"])
        self.chunk_text = dict(zip(ids.tolist(), chunks["text"])) if held else None
        mentions = con.execute("SELECT chunk_id, node_id FROM mentions").fetchnumpy()
        chunks = np.asarray(mentions["chunk_id"], dtype=np.int64)
        nodes = np.asarray(mentions["node_id"], dtype=np.int64)
        self.chunks_of.build(nodes, chunks)
        self.nodes_of.build(chunks, nodes)

    def _rebuild_adjacency(self) -> None:
        """Both CSRs from the edge columns, each node's edges by weight (highest first), then id: the order
        `neighbors` returns, so a node's best edges are the first ones of its list (see `touching`)."""
        live = np.flatnonzero(self.e_src >= 0)
        # One rank for (weight desc, id asc): the position in that order.
        rank = np.empty(len(live), dtype=np.int64)
        rank[np.lexsort((live, -self.e_weight[live]))] = np.arange(len(live))
        self.out_edges.build(self.e_src[live], live, rank)
        self.in_edges.build(self.e_dst[live], live, rank)
        self._reweighted: set[int] = set()
        self._count_degrees()

    def _count_degrees(self) -> None:
        # Counted as of now: valid until the next start or end of validity still ahead (`_degrees_until`).
        moment = time_value(sql_now())
        live = np.flatnonzero(self.e_src >= 0)
        ahead = np.concatenate([self.e_from[live], self.e_until[live]])
        ahead = ahead[~np.isnat(ahead) & (ahead > moment)]
        self._degrees_until = ahead.min() if len(ahead) else None
        sources, targets, namespaces = self.e_src[live], self.e_dst[live], self.e_ns[live]
        size = len(self.n_ns)
        owners, edges = [], []
        for ends, others, incoming in ((sources, targets, False), (targets, sources, True)):
            known = ends < size
            keep = known.copy()
            keep[known] = self.n_ns[ends[known]] == namespaces[known]
            if incoming:  # a self-loop counts once, as its source
                keep &= ends != others
            owners.append(ends[keep])
            edges.append(live[keep])
        owners, edges = np.concatenate(owners), np.concatenate(edges)
        # Edges without validity hold at every moment: counted once; those with one are kept per node, so that
        # a search at another moment (or in a window) counts them without listing every neighbour.
        timed = ~(np.isnat(self.e_from[edges]) & np.isnat(self.e_until[edges]))
        self._untimed_degrees = np.bincount(owners[~timed], minlength=size)
        self._timed_links = LinkTable()
        self._timed_links.build(owners[timed], edges[timed])
        now_holding = self._holding_mask(edges[timed], None, None)
        self._degrees = self._untimed_degrees + np.bincount(owners[timed][now_holding], minlength=size)
        self._degree_stale = np.zeros(size, dtype=bool)

    def _mark_degrees_stale(self, *node_arrays: Any) -> None:
        for nodes in node_arrays:
            nodes = np.asarray(nodes, dtype=np.int64)
            self._degree_stale[nodes[(nodes >= 0) & (nodes < len(self._degree_stale))]] = True

    def _grow_nodes(self, size: int) -> None:
        if size <= len(self.n_ns):
            return
        self.n_ns = grow(self.n_ns, size, -1)
        capacity = len(self.n_ns)
        self.n_type = grow(self.n_type, capacity, 0)
        for name in ("n_key", "n_name", "n_desc", "n_aliases", "n_props", "n_obs"):
            setattr(self, name, grow(getattr(self, name), capacity, None))
        self.n_created = grow(self.n_created, capacity, nat())
        self.n_updated = grow(self.n_updated, capacity, nat())

    def _grow_edges(self, size: int) -> None:
        if size <= len(self.e_src):
            return
        self.e_src = grow(self.e_src, size, -1)
        capacity = len(self.e_src)
        self.e_dst = grow(self.e_dst, capacity, -1)
        self.e_ns = grow(self.e_ns, capacity, -1)
        self.e_type = grow(self.e_type, capacity, 0)
        self.e_weight = grow(self.e_weight, capacity, 0.0)
        for name in ("e_from", "e_until", "e_created", "e_updated"):
            setattr(self, name, grow(getattr(self, name), capacity, nat()))
        self.e_desc = grow(self.e_desc, capacity, None)
        self.e_props = grow(self.e_props, capacity, None)

    # -- names -----------------------------------------------------------------------------------------------

    def _add_name(self, code: int, key: str, node_id: int) -> None:
        names = self.names.get(code)
        if names is None:
            names = self.names[code] = {}
        found = names.get(key)
        if found is None:
            names[key] = node_id
        elif isinstance(found, tuple):
            if node_id not in found:
                names[key] = (*found, node_id)
        elif found != node_id:
            names[key] = (found, node_id)

    def _drop_name(self, code: int, key: str, node_id: int) -> None:
        names = self.names.get(code, {})
        found = names.get(key)
        if found == node_id:
            del names[key]
        elif isinstance(found, tuple) and node_id in found:
            rest = tuple(i for i in found if i != node_id)
            names[key] = rest[0] if len(rest) == 1 else rest

    def _name_keys(self, node_id: int) -> list[str]:
        return self.name_keys(self.n_key[node_id], self.n_aliases[node_id])

    # -- writes (after the commit) ---------------------------------------------------------------------------

    def put_nodes(self, nodes: Sequence[Any], now: Any, keys_of: dict[int, list[str]] | None = None) -> None:
        """Insert or replace nodes from their records (ids set); a replaced node keeps its created_at.
        `keys_of`: node id -> its name keys, when the caller has them already."""
        if not nodes:
            return
        self._grow_nodes(max(n.id for n in nodes) + 1)
        stamp = time_value(now)
        empty: tuple[str, ...] = ()
        import json

        searched: list[int] = []  # nodes whose texts `nodes_containing` reads changed
        for node in nodes:
            node_id = node.id
            code = self.namespace_code(node.namespace)
            if self.n_ns[node_id] >= 0:
                old_code = int(self.n_ns[node_id])
                for key in self._name_keys(node_id):
                    self._drop_name(old_code, key, node_id)
                if (old_code != code or self.n_name[node_id] != node.name
                        or self.type_names[self.n_type[node_id]] != node.type):
                    searched.append(node_id)
            else:
                self.n_created[node_id] = stamp
                self.node_count += 1
                searched.append(node_id)
            self.n_ns[node_id] = code
            self.n_type[node_id] = self.type_code(node.type)
            self.n_key[node_id] = node.key
            self.n_name[node_id] = node.name
            self.n_desc[node_id] = node.description or None
            self.n_aliases[node_id] = tuple(node.aliases) if node.aliases else empty
            self.n_props[node_id] = json.dumps(node.properties) if node.properties else None
            self.n_updated[node_id] = stamp
            for key in keys_of[node_id] if keys_of and node_id in keys_of else self._name_keys(node_id):
                self._add_name(code, key, node_id)
        self.substrings.changed(searched)

    def replace_observations(self, node_ids: Sequence[int], wanted: Sequence[Sequence[str]]) -> None:
        """Each node's observations made its `wanted` ones as the file does (writes.replace_observations): those it
        keeps stay in their order, the new ones follow in theirs."""
        for node_id, texts in zip(node_ids, wanted):
            if node_id >= len(self.n_obs) or self.n_ns[node_id] < 0:
                continue
            held, keep = self.n_obs[node_id] or (), set(texts)
            kept = [text for text in held if text in keep]
            known = set(held)
            observations = (*kept, *(text for text in texts if text not in known))
            self.n_obs[node_id] = observations or None
            if observations != held:
                self.substrings.changed([node_id])

    def delete_nodes(self, ids: Iterable[int]) -> None:
        for node_id in ids:
            if node_id >= len(self.n_ns) or self.n_ns[node_id] < 0:
                continue
            code = int(self.n_ns[node_id])
            for key in self._name_keys(node_id):
                self._drop_name(code, key, node_id)
            self.n_ns[node_id] = -1
            for column in (self.n_key, self.n_name, self.n_desc, self.n_aliases, self.n_props, self.n_obs):
                column[node_id] = None
            self.node_count -= 1
            self.substrings.changed([node_id])

    def put_edges(self, ids: Sequence[int], namespaces: Sequence[str], sources: Sequence[int],
                  targets: Sequence[int], types: Sequence[str], descriptions: Sequence[str], weights: Sequence[float],
                  properties: Sequence[str | None], now: Any, valid_from: Sequence[Any] | None = None,
                  valid_until: Sequence[Any] | None = None) -> None:
        """New edges, with their validity (None: open)."""
        if not len(ids):
            return
        ids = np.asarray(ids, dtype=np.int64)
        self._grow_edges(int(ids.max()) + 1)
        fresh = int((self.e_src[ids] < 0).sum())
        self._forget_edges(ids.tolist())
        sources = np.asarray(sources, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        self._mark_degrees_stale(self.e_src[ids], self.e_dst[ids], sources, targets)
        self.e_src[ids] = sources
        self.e_dst[ids] = targets
        namespace_codes = {x: self.namespace_code(x) for x in set(namespaces)}
        type_codes = {x: self.type_code(x) for x in set(types)}
        self.e_ns[ids] = [namespace_codes[x] for x in namespaces]
        self.e_type[ids] = [type_codes[x] for x in types]
        self.e_weight[ids] = weights
        self.e_desc[ids] = [d or None for d in descriptions]
        self.e_props[ids] = [None if p in (None, "{}") else p for p in properties]
        stamp = time_value(now)
        self.e_from[ids] = nat() if valid_from is None else [time_value(t) for t in valid_from]
        self.e_until[ids] = nat() if valid_until is None else [time_value(t) for t in valid_until]
        self.e_created[ids] = stamp
        self.e_updated[ids] = stamp
        self.edge_count += fresh
        self.out_edges.add(sources.tolist(), ids.tolist())
        self.in_edges.add(targets.tolist(), ids.tolist())
        self._maybe_rebuild()

    def update_edges(self, ids: Sequence[int], descriptions: Sequence[str], weights: Sequence[float],
                     properties: Sequence[str | None], now: Any, valid_from: Sequence[Any] | None = None,
                     valid_until: Sequence[Any] | None = None) -> None:
        if not len(ids):
            return
        ids = np.asarray(ids, dtype=np.int64)
        self._forget_edges(ids.tolist())
        if valid_from is not None:
            self.set_validity(ids, valid_from, valid_until)
        self.e_desc[ids] = [d or None for d in descriptions]
        changed = ids[self.e_weight[ids] != np.asarray(weights, dtype=np.float64)]
        self.e_weight[ids] = weights
        if len(changed):
            # Out of order in their CSR lists now: read whole from the delta, and flagged where met in the lists.
            self._reweighted.update(changed.tolist())
            self.out_edges.add(self.e_src[changed].tolist(), changed.tolist())
            self.in_edges.add(self.e_dst[changed].tolist(), changed.tolist())
            self._maybe_rebuild()
        self.e_props[ids] = [None if p in (None, "{}") else p for p in properties]
        self.e_updated[ids] = time_value(now)

    def set_validity(self, ids: Sequence[int], valid_from: Sequence[Any], valid_until: Sequence[Any],
                     now: Any = None) -> None:
        """Edges whose validity changed (a fact ended, or its period given); `now`: when, as the file records it."""
        ids = np.asarray(ids, dtype=np.int64)
        if now is not None:  # the file's updated_at moves even when the period was already this one
            self.e_updated[ids] = time_value(now)
        starts = np.array([time_value(t) for t in valid_from], dtype="datetime64[us]")
        ends = np.array([time_value(t) for t in valid_until], dtype="datetime64[us]")
        changed = ~(((self.e_from[ids] == starts) | (np.isnat(self.e_from[ids]) & np.isnat(starts)))
                    & ((self.e_until[ids] == ends) | (np.isnat(self.e_until[ids]) & np.isnat(ends))))
        if not changed.any():
            return
        ids = ids[changed]
        self._forget_edges(ids.tolist())
        self._mark_degrees_stale(self.e_src[ids], self.e_dst[ids])
        self.e_from[ids] = starts[changed]
        self.e_until[ids] = ends[changed]

    def delete_edges(self, ids: Iterable[int]) -> None:
        ids = np.asarray(list(ids), dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < len(self.e_src))]
        ids = ids[self.e_src[ids] >= 0]
        if not len(ids):
            return
        self._forget_edges(ids.tolist())
        self._mark_degrees_stale(self.e_src[ids], self.e_dst[ids])
        self.e_src[ids] = -1
        self.e_dst[ids] = -1
        self.e_ns[ids] = -1
        self.e_desc[ids] = None
        self.e_props[ids] = None
        self.edge_count -= len(ids)

    def repoint(self, target: int, sources: Sequence[int]) -> None:
        """What merging `sources` into `target` does to the edges: every end at a source moves to the target."""
        sources = np.asarray(sorted(set(sources)), dtype=np.int64)
        if not len(sources):
            return
        self._mark_degrees_stale(sources, [target])
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(sources)
            moved = np.unique(edges[column[edges] == owners])
            self._forget_edges(moved.tolist())
            column[moved] = target
            links.add([target] * len(moved), moved.tolist())
        self._maybe_rebuild()

    def _maybe_rebuild(self) -> None:
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()

    # -- reads -----------------------------------------------------------------------------------------------

    def _node_live(self, ids: Any) -> Any:
        inside = (ids >= 0) & (ids < len(self.n_ns))
        result = np.zeros(len(ids), dtype=bool)
        result[inside] = self.n_ns[ids[inside]] >= 0
        return result

    def observations(self, ids: Iterable[int]) -> dict[int, list[str]]:
        """The observations of those of the nodes `ids` that have some, in stored order."""
        ids = np.unique(np.asarray(list(ids), dtype=np.int64))
        ids = ids[self._node_live(ids)]
        return {node_id: list(texts) for node_id, texts in zip(ids.tolist(), self.n_obs[ids]) if texts}

    def node_texts(self, ids: Any = None) -> tuple[Any, list[str], Any, Any, Any, Any, Any, Any]:
        """The stored ones of the nodes `ids` (default: all), by id, with their namespaces (names), names, types,
        aliases, descriptions, properties (JSON) and observations: what the keyword index holds of them."""
        ids = self._stored_nodes(ids)
        namespaces, types = self.namespace_names, self.type_names
        return (ids, [namespaces[code] for code in self.n_ns[ids].tolist()], self.n_name[ids],
                [types[code] for code in self.n_type[ids].tolist()], self.n_aliases[ids], self.n_desc[ids],
                self.n_props[ids], self.n_obs[ids])

    def edge_texts(self, ids: Any = None) -> tuple[Any, list[str], Any, Any, Any, list[str], Any]:
        """The stored ones of the edges `ids` (default: all), by id, with their namespaces (names), source and
        target node ids, type codes, the types by code, and descriptions: what the keyword index holds of them."""
        ids = np.flatnonzero(self.e_src >= 0) if ids is None else _sorted_unique(np.asarray(ids, dtype=np.int64))
        ids = ids[(ids >= 0) & (ids < len(self.e_src))]
        ids = ids[self.e_src[ids] >= 0]
        namespaces = self.namespace_names
        return (ids, [namespaces[code] for code in self.e_ns[ids].tolist()], self.e_src[ids], self.e_dst[ids],
                self.e_type[ids], self.type_names, self.e_desc[ids])

    def node_names(self, ids: Any) -> Any:
        return self.n_name[ids]

    def _stored_nodes(self, ids: Any) -> Any:
        if ids is None:
            return np.flatnonzero(self.n_ns >= 0)
        ids = _sorted_unique(np.asarray(ids, dtype=np.int64))
        return ids[self._node_live(ids)]

    def node_records(self, ids: Any) -> list[Any]:
        """NodeRecords (without embeddings) of the stored ones of `ids`, by id."""
        from duckgraph.ports import NodeRecord

        ids = np.unique(np.asarray(list(ids), dtype=np.int64))
        ids = ids[self._node_live(ids)]
        if not len(ids):
            return []
        namespaces = self.namespace_names
        types = self.type_names
        return [
            NodeRecord(namespace=namespaces[ns], key=key, name=name, type=types[ty], description=desc or "",
                       aliases=aliases, properties=_properties(props), id=node_id, created_at=created,
                       updated_at=updated)
            for node_id, ns, key, name, ty, desc, aliases, props, created, updated in zip(
                ids.tolist(), self.n_ns[ids].tolist(), self.n_key[ids], self.n_name[ids], self.n_type[ids].tolist(),
                self.n_desc[ids], self.n_aliases[ids], self.n_props[ids], self.n_created[ids].tolist(),
                self.n_updated[ids].tolist(),
            )
        ]

    def _answering(self, namespace: str, keys: Iterable[str]) -> Iterator[tuple[str, tuple[int, ...]]]:
        """(key, the nodes of `namespace` answering to it by name or alias) for those of `keys` that some do."""
        code = self.namespace_codes.get(namespace)
        names = self.names.get(code) if code is not None else None
        if not names:
            return
        for key in keys:
            hit = names.get(key)
            if hit is not None:
                yield key, hit if isinstance(hit, tuple) else (hit,)

    def nodes_containing(self, namespace: str, text: str, limit: int) -> list[int]:
        """`GraphStore.nodes_containing`: see `SubstringIndex`."""
        code = self.namespace_codes.get(namespace)
        return [] if code is None else self.substrings.search(code, text, limit)

    def _substring_texts(self, ids: Iterable[int]) -> Iterator[tuple[int, int, str, str, tuple[str, ...] | None]]:
        """(id, namespace code, name, type, observations or None) of each stored one of `ids`, in their order."""
        ids = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
        ids = ids[self._node_live(ids)]
        types = self.type_names
        for node_id, code, name, type_code, observations in zip(
                ids.tolist(), self.n_ns[ids].tolist(), self.n_name[ids], self.n_type[ids].tolist(), self.n_obs[ids]):
            yield node_id, code, name, types[type_code], observations

    def _namespace_members(self, code: int) -> Any:
        return np.flatnonzero(self.n_ns == code)

    def find(self, namespace: str, keys: Iterable[str]) -> list[int]:
        return sorted({node_id for _, nodes in self._answering(namespace, keys) for node_id in nodes})

    def key_owners(self, namespace: str, keys: Iterable[str]) -> dict[str, int]:
        """key -> the node whose own key (not an alias's) it is, for those of `keys` that have one (a write
        resolving its edges' ends: one dict lookup per key)."""
        n_key = self.n_key
        return {key: node_id for key, nodes in self._answering(namespace, keys)
                for node_id in sorted(nodes) if n_key[node_id] == key}

    def edge_records(self, ids: Any) -> list[Any]:
        """EdgeRecords of the given (existing) edge ids, in that order.

        Building a record costs microseconds (a frozen dataclass of 11 fields), so records are kept in a bounded
        cache, dropped when their edge changes. They are shared: their `properties` is a read-only dict.
        """
        cache = self._edge_cache
        ids = np.asarray(ids, dtype=np.int64)
        found = [cache.get(edge_id) for edge_id in ids.tolist()]
        missing = np.asarray([i for i, record in zip(ids.tolist(), found) if record is None], dtype=np.int64)
        if len(missing):
            from duckgraph.ports import EdgeRecord

            types = self.type_names
            if len(cache) + len(missing) > EDGE_CACHE_SIZE:
                cache.clear()
            for record in (
                EdgeRecord(edge_id, source, target, types[ty], desc or "", weight, _FrozenDict(_properties(props)),
                           valid_from, valid_until, created, updated)
                for edge_id, source, target, ty, desc, weight, props, valid_from, valid_until, created, updated in zip(
                    missing.tolist(), self.e_src[missing].tolist(), self.e_dst[missing].tolist(),
                    self.e_type[missing].tolist(), self.e_desc[missing], self.e_weight[missing].tolist(),
                    self.e_props[missing], self.e_from[missing].tolist(), self.e_until[missing].tolist(),
                    self.e_created[missing].tolist(), self.e_updated[missing].tolist(),
                )
            ):
                cache[record.id] = record
            found = [cache[edge_id] for edge_id in ids.tolist()]
        return found

    def _forget_edges(self, ids: Iterable[int]) -> None:
        cache = self._edge_cache
        if cache:
            for edge_id in ids:
                cache.pop(edge_id, None)

    def existing_edges(self, ids: Iterable[int]) -> Any:
        ids = np.unique(np.asarray(list(ids), dtype=np.int64))
        ids = ids[(ids >= 0) & (ids < len(self.e_src))]
        return ids[self.e_src[ids] >= 0]

    def touching(self, node_ids: Any) -> Any:
        """Ids of the edges with an end among `node_ids` (any namespace, any validity), sorted."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        parts = []
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(nodes)
            parts.append(edges[column[edges] == owners])
        return _sorted_unique(np.concatenate(parts))

    def best_touching(self, node_ids: Any, namespace: str, as_of: Any, limit: int) -> Any:
        """The first `limit` edges by weight (then id) among those that hold at `as_of` in `namespace` and have
        an end among `node_ids`: what `neighbors` returns, in that order.

        Each node's lists are in that order already, so only their first `limit` entries are read (a hub's
        50,000 edges cost as much as its best 2,000): an edge among the first `limit` overall is among the
        first `limit` holding edges of each of its ends. A node whose first `limit` entries are not all holding
        edges of the namespace (or whose weights changed since the build) is read whole instead.
        """
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if limit <= 0 or not len(nodes):
            return nodes[:0]
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        parts, whole = [], []
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(nodes, limit)
            current = column[edges] == owners
            parts.append(edges[current])
            # A list cut at `limit` must be all good for the cut to be exact.
            cut = nodes[(nodes < len(links.ptr) - 1)]
            cut = cut[(links.ptr[np.minimum(cut + 1, len(links.ptr) - 1)] - links.ptr[cut]) > limit]
            if len(cut):
                good = current & isin_ids(edges, self.holding(edges[current], namespace, as_of))
                if self._reweighted:
                    good &= ~np.isin(edges, np.fromiter(self._reweighted, dtype=np.int64))
                bad_owners = np.unique(owners[~good])
                whole.append(cut[isin_ids(cut, bad_owners)])
        if whole:
            again = np.unique(np.concatenate(whole))
            if len(again):
                parts.append(self.touching(again))
        edges = self.holding(_sorted_unique(np.concatenate(parts)), namespace, as_of)
        return self.by_weight(edges, limit)

    def holding(self, edges: Any, namespace: str | None, as_of: Any = None, *, include_expired: bool = False) -> Any:
        """Those of `edges` in `namespace` (None: any) that hold at `as_of`: a datetime, None (now) or a
        `TimeFilter` (see there)."""
        if include_expired:
            return edges if namespace is None else edges[self.e_ns[edges] == self.namespace_codes.get(namespace, -2)]
        return edges[self._holding_mask(edges, namespace, as_of)]

    def _holding_mask(self, edges: Any, namespace: str | None, as_of: Any) -> Any:
        """Which of `edges` are in `namespace` (None: any) and hold at `as_of` (see `holding`)."""
        keep = np.ones(len(edges), dtype=bool)
        if namespace is not None:
            keep &= self.e_ns[edges] == self.namespace_codes.get(namespace, -2)
        when = as_of if isinstance(as_of, TimeFilter) else TimeFilter(as_of=as_of)
        valid_from, valid_until = self.e_from[edges], self.e_until[edges]
        if when.as_of is not None or (when.after is None and when.before is None):
            moment = time_value(when.as_of or sql_now())
            keep &= np.isnat(valid_from) | (valid_from <= moment)
            if not when.history:
                keep &= np.isnat(valid_until) | (valid_until > moment)
        if when.after is not None:
            keep &= np.isnat(valid_until) | (valid_until > time_value(when.after))
        if when.before is not None:
            keep &= np.isnat(valid_from) | (valid_from < time_value(when.before))
        return keep

    def by_weight(self, edges: Any, limit: int | None = None) -> Any:
        """The edges ordered by weight (highest first), then id; the first `limit` of them."""
        weights = self.e_weight[edges]
        if limit is not None and len(edges) > 2 * limit:
            if limit <= 0:
                return edges[:0]
            # Only the first `limit` are ordered: those above the limit-th weight, then ties at it by id.
            threshold = -np.partition(-weights, limit - 1)[limit - 1]
            above = weights > threshold
            ties = np.flatnonzero(weights == threshold)[: max(0, limit - int(above.sum()))]  # edges are sorted by id
            chosen = np.concatenate([np.flatnonzero(above), ties])
            edges, weights = edges[chosen], weights[chosen]
        ordered = edges[np.lexsort((edges, -weights))]
        return ordered if limit is None else ordered[:limit]

    def neighbour_pairs(self, node_ids: Sequence[int], namespace: str, as_of: Any) -> tuple[Any, Any]:
        """(node, neighbour) arrays: each of the nodes with the other end of each of its edges that hold, one pair
        per edge (two facts joining the same nodes are two pairs), in no particular order."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        owners, others = [], []
        for links, here, there in ((self.out_edges, self.e_src, self.e_dst), (self.in_edges, self.e_dst, self.e_src)):
            owner, edges = links.gather(nodes)
            # a list may still hold an edge repointed to another node since it was built, and an edge written
            # again since then twice; a self-loop is in both of its node's lists and counts once
            current = here[edges] == owner
            if links is self.in_edges:
                current &= there[edges] != owner
            edges = edges[current]
            edges = self.holding(_sorted_unique(edges) if links.delta else edges, namespace, as_of)
            owners.append(here[edges])
            others.append(there[edges])
        return np.concatenate(owners), np.concatenate(others)

    def passage_links(self, node_ids: Sequence[int], namespace: str, as_of: Any) -> tuple[Any, tuple[Any, Any]]:
        """The degree of each of the (distinct) nodes as `neighbour_pairs` and `node_chunk_pairs` count it, in
        their order, and their (node, chunk) pairs. A node's neighbours are counted when the CSRs are built; they
        are listed again only for a node an edge written since ends at, or for another moment than now."""
        nodes = np.asarray(node_ids, dtype=np.int64)
        mentions = self.node_chunk_pairs(nodes)
        degrees = link_counts(nodes, mentions[0])
        counted = np.zeros(len(nodes), dtype=bool)
        if as_of is None and self._degrees_until is not None and time_value(sql_now()) >= self._degrees_until:
            self._count_degrees()  # a fact started or ended since they were counted
        inside = (nodes >= 0) & (nodes < len(self._degrees))
        known = nodes[inside]
        counted[inside] = ~self._degree_stale[known] & (self.n_ns[known] == self.namespace_codes.get(namespace, -2))
        chosen = nodes[counted]
        if as_of is None:
            degrees[counted] += self._degrees[chosen]
        else:  # the edges without validity hold whenever; only those with one are read
            owners, edges = self._timed_links.gather(chosen)
            degrees[counted] += self._untimed_degrees[chosen] + link_counts(
                chosen, owners[self._holding_mask(edges, namespace, as_of)])
        again = nodes[~counted]
        if len(again):
            degrees[~counted] += link_counts(again, self.neighbour_pairs(again, namespace, as_of)[0])
        return degrees, mentions

    def node_chunk_pairs(self, node_ids: Sequence[int]) -> tuple[Any, Any]:
        """(node, chunk) arrays: the mentions of the given nodes, distinct, by node then chunk."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        nodes = nodes[self._node_live(nodes)]
        owners, chunks = self.chunks_of.gather(nodes)
        return _distinct_pairs(owners, chunks, self._chunk_live(chunks))

    def chunk_node_pairs(self, chunk_ids: Sequence[int]) -> tuple[Any, Any]:
        """(chunk, node) arrays: the mentions in the given chunks, distinct, by chunk then node."""
        chunks = np.unique(np.asarray(chunk_ids, dtype=np.int64))
        chunks = chunks[self._chunk_live(chunks)]
        owners, nodes = self.nodes_of.gather(chunks)
        return _distinct_pairs(owners, nodes, self._node_live(nodes))

    # -- what the store asks ---------------------------------------------------------------------------------

    def neighbor_ends(
        self, node_ids: Sequence[int], namespace: str, as_of: Any, limit: int
    ) -> tuple[Any, Any, Any, Any]:
        """(edge ids, sources, targets, weights) of `best_touching`, in its order: the search path's columns."""
        edges = self.best_touching(list(node_ids), namespace, as_of, int(limit))
        return (edges.astype(np.int64, copy=False), self.e_src[edges].astype(np.int64, copy=False),
                self.e_dst[edges].astype(np.int64, copy=False), self.e_weight[edges].astype(np.float64))

    def edges_among(self, node_ids: Sequence[int], namespace: str, *, include_expired: bool = False) -> list[Any]:
        """EdgeRecords of the edges of `namespace` with both ends among `node_ids`, by id."""
        nodes = np.asarray(list(node_ids), dtype=np.int64)
        edges = self.holding(self.touching(nodes), namespace, include_expired=include_expired)
        edges = edges[isin_ids(self.e_src[edges], nodes) & isin_ids(self.e_dst[edges], nodes)]
        return self.edge_records(edges)

    def get_edges(self, ids: Iterable[int]) -> list[Any]:
        """EdgeRecords of the stored ones of the edge `ids`, by id."""
        return self.edge_records(self.existing_edges(ids))

    def edge_types(self, ids: Iterable[int]) -> dict[int, str]:
        """The type of each stored one of the edge `ids`, without building records."""
        ids = self.existing_edges(ids)
        codes, inverse = np.unique(self.e_type[ids], return_inverse=True)
        names = [self.type_names[code] for code in codes.tolist()]
        return dict(zip(ids.tolist(), (names[i] for i in inverse.tolist())))

    def edges_between(self, sources: Sequence[int], targets: Sequence[int]) -> dict[tuple, list[list[Any]]]:
        """(namespace, source, target, type) -> [id, description, weight, properties JSON, valid_from, valid_until]
        of every edge, ended ones included, from one of `sources` to one of `targets` (any namespace), by id: what a
        write updates instead of adding (see writes.py)."""
        sources = np.unique(np.asarray(sources, dtype=np.int64))
        owners, edges = self.out_edges.gather(sources)
        edges = edges[self.e_src[edges] == owners]
        edges = np.unique(edges[isin_ids(self.e_dst[edges], np.asarray(targets, dtype=np.int64))])
        found: dict[tuple, list[list[Any]]] = {}
        for edge_id, ns, s, t, ty, desc, weight, props, valid_from, valid_until in zip(
                edges.tolist(), self.e_ns[edges].tolist(), self.e_src[edges].tolist(), self.e_dst[edges].tolist(),
                self.e_type[edges].tolist(), self.e_desc[edges], self.e_weight[edges].tolist(), self.e_props[edges],
                self.e_from[edges].tolist(), self.e_until[edges].tolist()):
            found.setdefault((self.namespace_names[ns], s, t, self.type_names[ty]), []).append(
                [edge_id, desc or "", weight, props or "{}", valid_from, valid_until])
        return found

    def links(self, node_ids: Sequence[int], chunk_ids: Sequence[int], namespace: str, as_of: Any) -> Links:
        """The port's `Links` of the nodes and chunks."""
        return Links(node_neighbors=self.neighbour_pairs(list(node_ids), namespace, as_of),
                     node_chunks=self.node_chunk_pairs(list(node_ids)),
                     chunk_nodes=self.chunk_node_pairs(list(chunk_ids)))

    def sizes(self) -> dict[str, int]:
        """What the mirror holds, for health()."""
        return {"nodes": self.node_count, "edges": self.edge_count, "adjacency_pending": self.out_edges.delta_count}

    def held_text_megabytes(self) -> float | None:
        """MB of passage text held in memory, or None while the texts are read from the file."""
        return None if self.chunk_text is None else self.text_bytes / 2**20


def _distinct_pairs(owners: Any, values: Any, keep: Any) -> tuple[Any, Any]:
    """The kept (owner, value) pairs, distinct, sorted by owner then value (ids are non-negative)."""
    owners, values = owners[keep], values[keep]
    if not len(owners):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(values.max()) + 1  # one int64 key per pair: 1-d unique is far faster than unique(axis=0)
    keys = _sorted_unique(owners * width + values)
    return keys // width, keys % width


def _sorted_unique(values: Any) -> Any:
    """np.unique for int arrays, by sorting (faster than numpy 2's hashing for the sizes met here)."""
    if len(values) < 2:
        return values
    values = np.sort(values)
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _default_name_keys(key: str, aliases: Sequence[str]) -> list[str]:
    from duckgraph.ports import entity_key

    return list(dict.fromkeys([key, *(entity_key(a) for a in aliases)]))


def _filled(column: Any) -> Any:
    """A fetched column with NULLs (a masked array) as a plain array: None / NaT where NULL."""
    if isinstance(column, np.ma.MaskedArray):
        if column.dtype == object:
            data = column.data.copy()
            data[np.ma.getmaskarray(column)] = None
            return data
        if column.dtype.kind == "M":
            return column.filled(np.datetime64("NaT", "us"))
        return column.filled()
    return column
