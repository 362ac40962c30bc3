"""Export to the reference MCP memory server's file (@modelcontextprotocol/server-memory's memory.jsonl).

The file is what the reference's saveGraph writes: one compact JSON object per line, keys in its order,
`{"type":"entity","name","entityType","observations"}` for every entity (in creation order) and then
`{"type":"relation","from","to","relationType"}` for every relation that still holds, lines joined by "\\n" with
none after the last. Only one namespace fits in it (the reference has one graph), and only what the reference
has a place for: descriptions, aliases, properties, passages and vectors stay behind.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import BaseModel

from duckgraph.core.domain.memory_server import memory_relation

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase

#: Rows read from the store at a time.
PAGE = 1_000


class MemoryExportSummary(BaseModel):
    namespace: str
    entities: int = 0
    relations: int = 0


def export_memory_jsonl(kb: KnowledgeBase, out: TextIO, *, namespace: str | None = None) -> MemoryExportSummary:
    """Write the entities and relations of `namespace` (default: the knowledge base's) to `out`."""
    kb.open()
    store = kb.store
    namespace = kb.resolve_namespace(namespace)
    summary = MemoryExportSummary(namespace=namespace)
    names: dict[int, str] = {}
    offset = 0
    while page := store.list_nodes(namespace, offset=offset, limit=PAGE):
        observations = store.get_observations([n.id for n in page])
        for node in page:
            names[node.id] = node.name
            _line(out, summary.entities + summary.relations, {
                "type": "entity", "name": node.name, "entityType": node.type,
                "observations": observations.get(node.id, []),
            })
            summary.entities += 1
        offset += len(page)
    offset = 0
    while page := store.list_edges(namespace, offset=offset, limit=PAGE):
        for edge in page:
            relation = memory_relation(edge, names)
            _line(out, summary.entities + summary.relations, {
                "type": "relation", "from": relation.from_, "to": relation.to, "relationType": relation.relationType,
            })
            summary.relations += 1
        offset += len(page)
    return summary


def _line(out: TextIO, written: int, obj: dict[str, Any]) -> None:
    # JSON.stringify's form: no spaces, non-ASCII as is; a separator before every line but the first.
    out.write(("\n" if written else "") + json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
