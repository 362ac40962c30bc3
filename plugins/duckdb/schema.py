"""The file's schema: its tables (DDL), the checks and migrations at open, the `meta` table, and the binding of the
file to an embedder (recorded in `meta`; the vector tables are then created at its width)."""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import aliases_apart, communities, connection, sql, vector_tables
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.ports import EmbedderMismatchError, NodeRecord, StoreError, entity_key, loose_key, relation_type
from duckgraph.ports.records import ORIGINAL_TYPE

log = logging.getLogger(__name__)

np: Any = NumpyOnFirstUse(globals())

SCHEMA_VERSION = 7
#: Version of the derived rows of `node_names`; files with an older one get them rebuilt at open (after any
#: upgrade of the schema, in its own transaction). 3: loose forms keep the kana voicing marks and fold ł, ø, æ...
#: (ports/names.py `unaccented`); it comes with schema 7, so opening a file of schema 6 rebuilds them. 4: loose forms
#: keep symbols ("C++", "C#" and "C" are three names) and a period that starts a word (".NET").
NAME_KEYS_VERSION = "4"
#: Aliases named in the log when the keys are rebuilt (`duckgraph doctor` lists them all).
ALIASES_APART_LOGGED = 10
#: Version of the rule that spells relation types (`ports.relation_type`); files written under an older one get the
#: types of the relations whose caller's spelling is kept (`ORIGINAL_TYPE`) spelt again at open. 2: a word keeps
#: its combining marks (1 split "काम करता है" into क_म_करत_ह).
RELATION_TYPES_VERSION = "2"

SCHEMA = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE SEQUENCE node_ids START 1;
CREATE SEQUENCE edge_ids START 1;
CREATE SEQUENCE chunk_ids START 1;
CREATE TABLE nodes (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    key VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    type VARCHAR NOT NULL,
    description VARCHAR NOT NULL DEFAULT '',
    aliases VARCHAR[] NOT NULL DEFAULT [],
    properties JSON NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (namespace, key)
);
-- Every name a node answers to (its key and its alias keys), for exact name lookups.
CREATE TABLE node_names (namespace VARCHAR NOT NULL, key VARCHAR NOT NULL, node_id BIGINT NOT NULL);
CREATE INDEX node_names_key ON node_names (namespace, key);
CREATE INDEX node_names_node ON node_names (node_id);
CREATE TABLE observations (node_id BIGINT NOT NULL, text VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);
CREATE TABLE edges (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    source_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    type VARCHAR NOT NULL,
    description VARCHAR NOT NULL DEFAULT '',
    weight DOUBLE NOT NULL DEFAULT 1.0,
    properties JSON NOT NULL DEFAULT '{}',
    valid_from TIMESTAMP,
    valid_until TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX edges_source ON edges (source_id);
CREATE INDEX edges_target ON edges (target_id);
CREATE TABLE documents (
    namespace VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    title VARCHAR NOT NULL DEFAULT '',
    text VARCHAR NOT NULL,
    metadata JSON NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    time TIMESTAMP,
    PRIMARY KEY (namespace, id)
);
CREATE TABLE chunks (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    document_id VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    text VARCHAR NOT NULL,
    section VARCHAR NOT NULL DEFAULT '',
    -- Who read the passage for its graph, even when nothing was found (NULL: nobody yet): an extractor's id,
    -- 'host' (the host LLM linked entities to it through source_ids), 'before-marks' (it had entities linked to
    -- it when its file got marks: see migration 6).
    extracted_by VARCHAR
);
CREATE INDEX chunks_document ON chunks (namespace, document_id);
-- Provenance: which chunks mention a node, which chunks support an edge.
CREATE TABLE mentions (chunk_id BIGINT NOT NULL, node_id BIGINT NOT NULL, PRIMARY KEY (chunk_id, node_id));
CREATE INDEX mentions_node ON mentions (node_id);
CREATE TABLE edge_evidence (edge_id BIGINT NOT NULL, chunk_id BIGINT NOT NULL, PRIMARY KEY (edge_id, chunk_id));
"""
#: Nodes and edges ever written by hand (NodeRecord.by_hand): the deletion of documents never takes them.
BY_HAND = """
CREATE TABLE nodes_by_hand (node_id BIGINT PRIMARY KEY);
CREATE TABLE edges_by_hand (edge_id BIGINT PRIMARY KEY);
"""
SCHEMA += BY_HAND
# Communities and their reports (derived data; see communities.py).
SCHEMA += communities.TABLES
#: What writes deleted (and the documents they replaced), for recent_changes: the rows themselves are gone. A row
#: names the thing as it was (`label`: an entity's "Name [Type]", a fact's sentence and period, a document's id),
#: cut short (`LABEL_CHARS`, `NAMED_PER_WRITE`). Rows are only appended, in time order, so DuckDB's zone maps on
#: `deleted_at` serve a span without an index (which would slow every deletion).
DELETIONS = """
CREATE TABLE IF NOT EXISTS deletions (
    namespace VARCHAR NOT NULL, deleted_at TIMESTAMP NOT NULL, kind VARCHAR NOT NULL, label VARCHAR NOT NULL
);
"""
SCHEMA += DELETIONS
#: A deletion's label is cut to this many characters: a fact's or an observation's text may be long, and the log
#: keeps what went only so that a person can recognise it. A document's id is never longer (model.py `SourceId`).
LABEL_CHARS = 200
#: At most this many things of one kind are named per namespace and write in `deletions`; the others are counted
#: in one row, so that deleting a namespace of a million facts does not copy them into the log.
NAMED_PER_WRITE = 1_000
#: `chunks.extracted_by` of a passage the host LLM linked entities to through `source_ids` (it read it), and of one
#: that had entities linked to it before passages were marked (an upgrade to schema 6, an older export).
HOST_MARK = "host"
BEFORE_MARKS = "before-marks"
#: The statements that bring a file of the version before each key up to it, run in one transaction at open.
MIGRATIONS: dict[int, list[str]] = {
    # Documents get the time their text tells of. Edges: a start of validity was never given before this version
    # (writes stored their creation time there), so those starts are dropped: unknown, not "since it was written".
    # An import of an export this old applies the same rule (core/files/import_plan.py, STARTS_SINCE).
    2: ["ALTER TABLE documents ADD COLUMN time TIMESTAMP",
        "UPDATE edges SET valid_from = NULL WHERE valid_from = created_at"],
    # Communities get parents, reports and builds (schema 1's tables were never filled).
    3: ["DROP TABLE IF EXISTS community_members", "DROP TABLE IF EXISTS communities",
        *filter(str.strip, communities.TABLES.split(";"))],
    # Passages know their section, the headings above them ("Installation > Linux"); older ones have none.
    4: ["ALTER TABLE chunks ADD COLUMN section VARCHAR DEFAULT ''"],
    # Marks of what was written by hand. Older files kept none, so they are inferred, erring towards keeping (a
    # mark only keeps what would otherwise go with its last document): a node or an edge is marked when it has no
    # provenance, or when it has what the extractor never writes (observations, properties: the memory tools,
    # curation, merges). A node still the placeholder of a relation's end (type 'unknown', nothing else, see
    # core/domain/memory_server.py) is left unmarked: create_entities fills such a node in. An import of an export
    # this old infers them by the same rule (core/files/import_plan.py, inferred_by_hand).
    5: [*filter(str.strip, BY_HAND.split(";")),
        ("INSERT INTO nodes_by_hand SELECT id FROM nodes WHERE "
         "id IN (SELECT node_id FROM observations) OR json_keys(properties) <> [] "
         "OR (id NOT IN (SELECT node_id FROM mentions) AND NOT (type = 'unknown' AND description = ''))"),
        ("INSERT INTO edges_by_hand SELECT id FROM edges WHERE "
         "json_keys(properties) <> [] OR id NOT IN (SELECT edge_id FROM edge_evidence)")],
    # Passages remember that an extractor read them, so a re-run skips those that found nothing. Older files
    # cannot tell a passage that found nothing from one never extracted: those are read once more. One with
    # entities linked to them was read (by an extractor or the host LLM): marked, so a re-run skips it as before.
    6: ["ALTER TABLE chunks ADD COLUMN IF NOT EXISTS extracted_by VARCHAR",
        (f"UPDATE chunks SET extracted_by = '{BEFORE_MARKS}' WHERE extracted_by IS NULL "
         "AND id IN (SELECT chunk_id FROM mentions)")],
    # Deletions are recorded from now on: what older versions deleted left nothing to list, so the log starts empty.
    7: [*filter(str.strip, DELETIONS.split(";"))],
}
EXPECTED_TABLES = {
    "meta", "nodes", "node_names", "observations", "edges", "documents", "chunks", "mentions", "edge_evidence",
    "communities", "community_members",
}


def name_keys(node: NodeRecord) -> list[str]:
    """What `find_nodes` finds a node by: its key, its aliases' keys, and the loose forms of both."""
    keys = [node.key, *(entity_key(alias) for alias in node.aliases)]
    return list(dict.fromkeys([*keys, *filter(None, map(loose_key, keys))]))


def meta(con: Any, key: str) -> str | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def ensure(con: Any, path: Path, read_only: bool, transaction: Callable[[], AbstractContextManager[Any]],
           keep_copy: Callable[[int], Path | None] | None = None) -> None:
    """Create the schema in an empty file; check an existing file's, and bring its derived rows up to date.

    An upgrade is one way (the duckgraph that wrote the file can no longer open it), so `keep_copy(version)` first
    writes a copy of the file as it is and returns its path (None when none is needed); if it fails, nothing
    changes."""
    tables = {row[0] for row in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall()}
    if not tables:
        if read_only:
            raise StoreError(f"{path} is empty and opened read-only; open it writable once to create it")
        with transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    con.execute(statement)
            now = sql.now().isoformat()
            con.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [["schema_version", str(SCHEMA_VERSION)], ["created_at", now], ["updated_at", now],
                 ["name_keys", NAME_KEYS_VERSION], ["relation_types", RELATION_TYPES_VERSION]],
            )
        return
    if "meta" not in tables or not EXPECTED_TABLES <= tables:
        raise StoreError(
            f"{path} is a DuckDB file but not a duckgraph knowledge base "
            f"(tables: {', '.join(sorted(tables)[:8])}); choose another file with --db or DUCKGRAPH_DB"
        )
    version = meta(con, "schema_version")
    if version is None or not version.isdigit():
        raise StoreError(f"{path} has no valid schema version; it was not written by duckgraph")
    if int(version) > SCHEMA_VERSION:
        raise StoreError(
            f"{path} uses schema version {version}, newer than this duckgraph understands "
            f"({SCHEMA_VERSION}); upgrade duckgraph"
        )
    if int(version) < SCHEMA_VERSION:
        _migrate(con, path, int(version), read_only, transaction, keep_copy)
    if meta(con, "name_keys") != NAME_KEYS_VERSION and not read_only:
        _rebuild_name_keys(con, path, transaction)
    if meta(con, "relation_types") != RELATION_TYPES_VERSION and not read_only:
        _respell_relation_types(con, path, transaction)


def _migrate(con: Any, path: Path, version: int, read_only: bool,
             transaction: Callable[[], AbstractContextManager[Any]],
             keep_copy: Callable[[int], Path | None] | None) -> None:
    """Bring a file of an older schema version up to this one, all steps in one transaction, after keeping a copy
    of it as it was (see `ensure`)."""
    if read_only:
        raise StoreError(f"{path} uses schema version {version}, older than this duckgraph's ({SCHEMA_VERSION}); "
                         "open it writable once to upgrade it")
    copy = keep_copy(version) if keep_copy is not None else None
    with transaction():
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS.get(step, []):
                con.execute(statement)
        con.execute("DELETE FROM meta WHERE key = 'schema_version'")
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    if copy is None:
        log.info("%s: schema upgraded from version %d to %d", path, version, SCHEMA_VERSION)
    else:  # WARNING: a user with a second, older duckgraph (another MCP host's) must learn where the old file is
        log.warning("%s: schema upgraded from version %d to %d; a duckgraph that knows only version %d cannot open "
                    "it any more. The file as it was is kept as %s: point such a duckgraph (--db, DUCKGRAPH_DB) at "
                    "that copy (what is written to one file is not in the other), or upgrade it; delete the copy "
                    "when no longer needed", path, version, SCHEMA_VERSION, version, copy)


def upgrade_copy(path: Path, version: int) -> Path:
    """Where the copy of a file of schema `version` is kept before its upgrade: beside it, as NAME.schemaN.duckdb
    (a name not taken yet: an earlier copy is never overwritten)."""
    stem, suffix = path.stem, path.suffix or ".duckdb"
    candidate, n = path.with_name(f"{stem}.schema{version}{suffix}"), 1
    while candidate.exists() or candidate.with_name(candidate.name + ".wal").exists():
        n += 1
        candidate = path.with_name(f"{stem}.schema{version}-{n}{suffix}")
    return candidate


def upgrade_due(path: Path) -> dict[str, Any] | None:
    """What opening the file for writing would upgrade: {"from", "to", "copy", "embedder"}, or None (no file, one of
    this schema version, or one whose tables the open refuses, saying why). Read through a read-only connection, so
    that asking changes nothing (`duckgraph doctor`); a file that cannot be opened or read raises as
    `connection.connect` does."""
    if not path.is_file():
        return None
    con, _ = connection.connect(path, True)
    import duckdb  # connect has imported it
    try:
        tables = {row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        version = meta(con, "schema_version") if "meta" in tables and EXPECTED_TABLES <= tables else None
        if version is None or not version.isdigit() or int(version) >= SCHEMA_VERSION:
            return None
        info = embedder_info(con)
    except duckdb.Error as exc:  # DuckDB reads a file's blocks only when asked: a file cut short fails here
        raise connection.unusable(path, exc) from exc
    finally:
        con.close()
    return {"from": int(version), "to": SCHEMA_VERSION, "copy": str(upgrade_copy(path, int(version))),
            "embedder": None if info is None else {"id": info[0], "dimensions": info[1]}}


def _rebuild_name_keys(con: Any, path: Path, transaction: Callable[[], AbstractContextManager[Any]]) -> None:
    """Files whose `node_names` are of an older `NAME_KEYS_VERSION` (written before loose name keys existed, or by an
    older rule of loose forms) get them rebuilt (derived rows, in one transaction). The aliases that the older rule
    joined to their entity and this one keeps apart are kept in `meta` and logged (`aliases_apart`)."""
    nodes = con.execute("SELECT id, namespace, name, key, aliases FROM nodes").fetchall()
    rows = [(namespace, key, node_id) for node_id, namespace, _, key, aliases in nodes
            for key in name_keys(NodeRecord(namespace=namespace, key=key, name=key, type="",
                                            aliases=tuple(aliases or ())))]
    apart = aliases_apart.find(nodes, meta(con, "name_keys"))
    with transaction():
        con.execute("DELETE FROM node_names")
        if rows:
            # A registered columnar view: list parameters bind element by element.
            con.register("_incoming_names", {
                "namespace": np.array([r[0] for r in rows], dtype=object),
                "key": np.array([r[1] for r in rows], dtype=object),
                "node_id": np.array([r[2] for r in rows], dtype=np.int64),
            })
            try:
                con.execute("INSERT INTO node_names SELECT namespace, key, node_id FROM _incoming_names")
            finally:
                con.unregister("_incoming_names")
        if apart:
            kept = aliases_apart.kept(meta(con, aliases_apart.META_KEY), apart)
            con.execute("DELETE FROM meta WHERE key = ?", [aliases_apart.META_KEY])
            con.execute("INSERT INTO meta VALUES (?, ?)", [aliases_apart.META_KEY, kept])
        con.execute("DELETE FROM meta WHERE key = 'name_keys'")
        con.execute("INSERT INTO meta VALUES ('name_keys', ?)", [NAME_KEYS_VERSION])
    log.info("%s: rebuilt the name index of %d nodes (their loose forms)", path, len(nodes))
    if apart:  # WARNING: what an older duckgraph merged stays merged, and only the user can tell whether it is one
        listed = "; ".join(f"{item['alias']!r} of {item['name']!r} (namespace {item['namespace']!r})"
                           for item in apart[:ALIASES_APART_LOGGED])
        more = f"; and {len(apart) - ALIASES_APART_LOGGED} more" if len(apart) > ALIASES_APART_LOGGED else ""
        log.warning("%s: %d alias(es) that an older duckgraph joined to their entity's name, which this one keeps "
                    "apart: %s%s. Each may be another thing that was merged into that entity with its observations "
                    "and relations (C++ and C# into C). To split one: remove the alias (update_entity with the "
                    "aliases to keep, or the entity's page in duckgraph ui), create the other entity "
                    "(create_entities, add_knowledge_graph) and move its observations and relations to it. Where "
                    "the alias is meant, keep it. `duckgraph doctor` lists them", path, len(apart), listed, more)


def _respell_relation_types(con: Any, path: Path, transaction: Callable[[], AbstractContextManager[Any]]) -> None:
    """Relation types stored under rule 1 lost the combining marks of their words (Indic scripts, Thai...), so a
    new write of the same label would make a second relation. Where the caller's spelling is kept (the memory
    tools' relations) the type is spelt again; other types were stored without it and stay as they are."""
    rows = con.execute(f"SELECT id, type, json_extract_string(properties, '$.{ORIGINAL_TYPE}') FROM edges "
                       f"WHERE json_extract_string(properties, '$.{ORIGINAL_TYPE}') IS NOT NULL").fetchall()
    changed = [(relation_type(original), edge_id) for edge_id, stored, original in rows
               if relation_type(original) != stored and _rule_1_type(original) == stored]
    with transaction():
        if changed:
            con.executemany("UPDATE edges SET type = ? WHERE id = ?", [list(row) for row in changed])
        con.execute("DELETE FROM meta WHERE key = 'relation_types'")
        con.execute("INSERT INTO meta VALUES ('relation_types', ?)", [RELATION_TYPES_VERSION])
    if changed:
        log.info("%s: spelt the types of %d relations again (their words' combining marks kept)", path, len(changed))


def _rule_1_type(label: str) -> str:
    return "_".join(re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", label))).upper()


def embedder_info(con: Any) -> tuple[str, int] | None:
    """(embedder id, dimensions) the file is bound to, or None before it is."""
    embedder_id, dimensions = meta(con, "embedder_id"), meta(con, "dimensions")
    if embedder_id is None or dimensions is None:
        return None
    return embedder_id, int(dimensions)


def check_embedder(path: Path, bound: tuple[str, int], embedder_id: str, dimensions: int) -> None:
    """Refuse an embedder other than the one the file is bound to (which holds vectors, see `holds_vectors`)."""
    if bound[0] == embedder_id and bound[1] != dimensions:  # one name, another width: its options or server changed
        raise EmbedderMismatchError(
            f"{path} holds vectors of {embedder_id!r} with {bound[1]} dimensions, but it now gives {dimensions} "
            f"dimensions (its options, such as dimensions, or the model its server runs have changed): set it "
            f"back to give {bound[1]}, or move the knowledge to a new file (duckgraph export, then duckgraph import "
            "--re-embed into another --db)."
        )
    if bound != (embedder_id, dimensions) and bound[0].split(":")[0] == embedder_id.split(":")[0]:
        # Its plugin is selected (ids are "plugin:model"): the model or options differ, not the plugin.
        raise EmbedderMismatchError(
            f"{path} holds vectors of {bound[0]!r} ({bound[1]} dimensions), but the configured embedder gives "
            f"{embedder_id!r} ({dimensions} dimensions): set its model and options back to those that gave "
            f"{bound[0]!r}, or move the knowledge to a new file (duckgraph export, then duckgraph import --re-embed "
            "into another --db)."
        )
    if bound != (embedder_id, dimensions):
        raise EmbedderMismatchError(
            f"{path} was built with embedder {bound[0]!r} ({bound[1]} dimensions), but "
            f"{embedder_id!r} ({dimensions} dimensions) is configured. Select the plugin that gives {bound[0]!r} "
            "again (DUCKGRAPH_EMBEDDER / use in [embedder] take the id it registers, as duckgraph doctor lists it, "
            "with the options that gave it) or use another --db file."
        )


def holds_vectors(con: Any) -> bool:
    """Whether the file holds any vector: in the vector tables, of a community report, or owed by an entity, a
    relation or a passage (each is stored with its vector)."""
    tables = {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()}
    vector_rows = [table for table, _, _ in vector_tables.VECTOR_TABLES.values() if table in tables]
    queries = [f"SELECT 1 FROM {table} LIMIT 1" for table in [*vector_rows, "nodes", "edges", "chunks"]]
    queries.append("SELECT 1 FROM communities WHERE embedding IS NOT NULL LIMIT 1")
    return any(con.execute(query).fetchone() is not None for query in queries)


def bind_embedder(con: Any, embedder_id: str, dimensions: int, *, replacing: bool = False) -> None:
    """Record the embedder in `meta` and create the vector tables at its width (inside a transaction). `replacing`:
    the file records another embedder but holds no vectors (`holds_vectors`): its empty vector tables, of the old
    width, and any saved index layout go first."""
    if replacing:
        for table, _, _ in vector_tables.VECTOR_TABLES.values():
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute("DROP TABLE IF EXISTS vector_layouts")  # derived; created again on the next save
        con.execute("DELETE FROM meta WHERE key IN ('embedder_id', 'dimensions')")
    vector_tables.create(con, dimensions)
    con.executemany(
        "INSERT INTO meta VALUES (?, ?)", [["embedder_id", embedder_id], ["dimensions", str(dimensions)]]
    )
