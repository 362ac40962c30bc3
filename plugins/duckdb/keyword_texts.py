"""What the keyword index holds of each row, read from the tables: the words of its texts (`ports.tokens`).

- node: name, aliases, type, description, every observation, and its properties' string and number values;
- edge: the fact as a sentence, "<source name> <type words> <target name>: <description>" (as
  core/domain/texts.py's `edge_text` writes it for the edge's vector);
- chunk: the passage's text and its document's title.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.ports import tokens

#: Rows read per query when the whole index is built.
BLOCK = 200_000

_QUERIES = {
    "node": (
        "SELECT n.id, n.namespace, n.name, n.type, n.description, array_to_string(n.aliases, ' '), "
        "n.properties::VARCHAR, o.texts FROM nodes n LEFT JOIN (SELECT node_id, string_agg(text, ' ') AS texts "
        "FROM observations WHERE {observations} GROUP BY node_id) o ON o.node_id = n.id WHERE {rows} ORDER BY n.id"
    ),
    "edge": (
        "SELECT e.id, e.namespace, s.name, e.type, t.name, e.description FROM edges e "
        "JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id WHERE {rows} ORDER BY e.id"
    ),
    "chunk": (
        "SELECT c.id, c.namespace, d.title, c.text FROM chunks c "
        "LEFT JOIN documents d ON d.namespace = c.namespace AND d.id = c.document_id WHERE {rows} ORDER BY c.id"
    ),
}
_ID_COLUMN = {"node": ("n.id", "node_id"), "edge": ("e.id", None), "chunk": ("c.id", None)}
_TABLE = {"node": "nodes", "edge": "edges", "chunk": "chunks"}

Rows = tuple[list[int], list[str], list[list[str]]]


def rows_of(con: Any, kind: str, ids: Sequence[int]) -> Rows:
    """(ids, namespaces, words) of the stored rows among `ids` (the others are left out)."""
    if not ids:
        return [], [], []
    column, observation_column = _ID_COLUMN[kind]
    listed = f"IN (SELECT unnest({sql.JSON_IDS % 1}))"
    query = _QUERIES[kind].format(rows=f"{column} {listed}", observations=f"{observation_column} {listed}")
    return _words(kind, con.execute(query, [sql.json_list(sorted(set(ids)))]).fetchall(), {})


def all_rows(con: Any, kind: str) -> Iterator[Rows]:
    """(ids, namespaces, words) of every row of `kind`, block by block of ids."""
    top = con.execute(f"SELECT max(id) FROM {_TABLE[kind]}").fetchone()[0]
    column, observation_column = _ID_COLUMN[kind]
    memo: dict[str, list[str]] = {}  # names and titles repeat across edges and chunks: split each once
    for start in range(0, (top or 0) + 1, BLOCK):
        between = f"BETWEEN {start} AND {start + BLOCK - 1}"
        query = _QUERIES[kind].format(rows=f"{column} {between}", observations=f"{observation_column} {between}")
        yield _words(kind, con.execute(query).fetchall(), memo)


def _words(kind: str, rows: list[tuple[Any, ...]], memo: dict[str, list[str]]) -> Rows:
    def cached(text: str | None) -> list[str]:
        if not text:
            return []
        found = memo.get(text)
        if found is None:
            found = memo[text] = tokens(text)
        return found

    ids, namespaces, words = [], [], []
    for row in rows:
        ids.append(row[0])
        namespaces.append(row[1])
        if kind == "node":
            _, _, name, type_, description, aliases, properties, observations = row
            words.append([*tokens(name), *cached(type_), *tokens(aliases), *tokens(description),
                          *tokens(observations or ""), *tokens(" ".join(_values(properties)))])
        elif kind == "edge":
            _, _, source, type_, target, description = row
            words.append([*cached(source), *cached(type_.replace("_", " ").lower()), *cached(target),
                          *(tokens(description) if description else ())])
        else:
            _, _, title, text = row
            # as core/domain/texts.py's passage_text: the title in front unless the text starts with it
            words.append([*(cached(title) if title and not text.startswith(title) else ()), *tokens(text)])
    return ids, namespaces, words


def _values(properties: str | None) -> list[str]:
    """The string and number values of a node's properties (JSON), nested ones included."""
    if not properties or properties == "{}":
        return []
    found: list[str] = []
    stack = [json.loads(properties)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
            found.append(str(value))
    return found
